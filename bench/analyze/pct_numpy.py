#!/usr/bin/env python3
"""Exact nearest-rank latency percentiles of a TRex-fork file with numpy
(the same definition as nflab: value at rank ceil(p/100*N), ns rounded like nflab)."""
import json, math, sys
from fractions import Fraction
import numpy as np

a = np.fromfile(sys.argv[1], dtype="<f8").reshape(-1, 2)
lat = np.rint(a[:, 1] * 1e9).astype(np.int64) - np.rint(a[:, 0] * 1e9).astype(np.int64)
del a
n = len(lat)
ps = [50, 90, 99, 99.9, 99.99, 99.999]
ranks = [min(max(math.ceil(Fraction(str(p)) / 100 * n), 1), n) - 1 for p in ps]
part = np.partition(lat, ranks)
print(json.dumps({"n": n, "min": int(lat.min()), "max": int(lat.max()), "mean": float(lat.mean()),
                  **{f"p{p}": int(part[r]) for p, r in zip(ps, ranks)}}))
