#!/usr/bin/env python3
"""Compare data-postprocessor's per-anomaly lines with nflab's anomaly events.
usage: compare_anomalies.py SEED_OUTPUT NFLAB_JSON TREX_FILE"""
import json, re, struct, sys

seed = []
for line in open(sys.argv[1], encoding="utf-8"):
    m = re.match(r"^\s*([0-9.]+):\s+(\d+) packets, ([0-9.]+)/([0-9.]+)/([0-9.]+) ", line)
    if m:
        seed.append((float(m.group(1)), int(m.group(2)), float(m.group(5))))
s = json.load(open(sys.argv[2]))
with open(sys.argv[3], "rb") as f:
    tx0 = struct.unpack("<d", f.read(8))[0]
first_ns = round(tx0 * 1e9)
d = s["anomaly_details"][0]
ours = [((e["start_tx_ns"] - first_ns) / 1e9, e["packets"], e["peak_ns"] / 1e3) for e in d["events"]]
ok = len(seed) == len(ours) and all(
    abs(a[0] - b[0]) < 1e-6 and a[1] == b[1] and abs(a[2] - b[2]) < 1e-3 for a, b in zip(seed, ours))
print(json.dumps({"seed_anomalies": len(seed), "nflab_anomalies": len(ours),
                  "nflab_count": d["count"], "identical": ok}))
sys.exit(0 if ok else 1)
