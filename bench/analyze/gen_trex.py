#!/usr/bin/env python3
"""Write N (tx, rx) pairs in seed 001's TRex-fork format (headerless little-endian
float64 seconds) and, optionally, the same latencies as a raw int64 ns file for the
percentile benchmark. Deterministic (seed 1).

Latencies: 20 us + exponential(3 us) noise, plus bursts of 1..40 packets at
200..1500 us starting with probability 1e-4 per packet. No latency is within 1 ns of
a multiple of 1 us, so nflab (integer ns) and data-postprocessor (float us) take the
same >= decisions for thresholds given in whole us. The last packet is normal, so the
tool's dropped trailing anomaly (seed 001 §4.2) does not matter for the comparison.
"""
import sys
import numpy as np

n = int(float(sys.argv[1]))
out = sys.argv[2]
lat_out = sys.argv[3] if len(sys.argv) > 3 else None
rng = np.random.default_rng(1)
chunk = 10_000_000
with open(out, "wb") as f, (open(lat_out, "wb") if lat_out else open("/dev/null", "wb")) as g:
    burst_left = 0
    burst_level = 0
    for start in range(0, n, chunk):
        m = min(chunk, n - start)
        idx = np.arange(start, start + m, dtype=np.int64)
        tx_ns = 1_000_000_000 + idx * 5263
        lat = 20_000 + rng.exponential(3_000, m).astype(np.int64)
        starts = np.flatnonzero(rng.random(m) < 1e-4)
        lens = rng.integers(1, 40, len(starts))
        levels = rng.integers(200_000, 1_500_000, len(starts))
        for s, l, v in zip(starts, lens, levels):
            lat[s:s + l] = v + rng.integers(0, 50_000, min(l, m - s))
        lat = (lat // 1000) * 1000 + 1 + (lat % 997)   # never k*1000 exactly
        if start + m == n:
            lat[-1] = 20_001
        rx_ns = tx_ns + lat
        pairs = np.empty(2 * m, dtype="<f8")
        pairs[0::2] = tx_ns / 1e9
        pairs[1::2] = rx_ns / 1e9
        f.write(pairs.tobytes())
        g.write(lat.astype("<i8").tobytes())
