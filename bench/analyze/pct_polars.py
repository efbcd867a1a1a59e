#!/usr/bin/env python3
"""Exact nearest-rank latency percentiles of a TRex-fork file with polars
(sort, then take the value at rank ceil(p/100*N))."""
import json, math, sys
from fractions import Fraction
import numpy as np
import polars as pl

a = np.fromfile(sys.argv[1], dtype="<f8").reshape(-1, 2)
df = pl.DataFrame({"tx": a[:, 0], "rx": a[:, 1]})
del a
lat = ((df["rx"] * 1e9).round().cast(pl.Int64) - (df["tx"] * 1e9).round().cast(pl.Int64)).sort()
n = lat.len()
ps = [50, 90, 99, 99.9, 99.99, 99.999]
out = {"n": n, "min": lat.min(), "max": lat.max(), "mean": lat.mean()}
for p in ps:
    out[f"p{p}"] = lat[min(max(math.ceil(Fraction(str(p)) / 100 * n), 1), n) - 1]
print(json.dumps(out))
