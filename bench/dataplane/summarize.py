#!/usr/bin/env python3
"""Print the data-plane benchmark figures from nflab run artifact trees."""
import glob, json, os, statistics, sys

root = sys.argv[1]
runs = {}
for d in sorted(glob.glob(os.path.join(root, "*"))):
    name = os.path.basename(d).split("-", 1)[1]
    for r in sorted(glob.glob(os.path.join(d, "runs", "*"))):
        s = json.load(open(os.path.join(r, "summary.json")))
        dut = os.path.join(r, "dut.json")
        runs.setdefault(name, []).append((s, json.load(open(dut)) if os.path.exists(dut) else None))

def med(name, f):
    v = [f(s, d) for s, d in runs.get(name, [])]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else float("nan")

rx = lambda s, d: s["rate"]["rx_pps"]
print("\n## forwarding rate, 64 B, generator at max (median of repetitions)")
base = med("rate-linux-router", rx)
print(f"{'DuT':20} {'rx kpps':>9} {'vs linux-router':>16} {'loss':>7} {'cycles/pkt':>11}")
for n in ["rate-linux-router", "rate-linux-bridge", "rate-nflab-l2fwd", "rate-nflab-router", "rate-dpdk-testpmd"]:
    if n not in runs:
        continue
    cpp = med(n, lambda s, d: d["worker"]["cycles_per_packet"] if d else None)
    loss = med(n, lambda s, d: s["loss_ratio"])
    r = med(n, rx)
    print(f"{n[5:]:20} {r/1e3:9.1f} {r/base:16.2f} {loss:7.3f} {cpp:11.0f}")

lat = lambda k: (lambda s, d: s["latency_ns"][k] / 1e3)
print("\n## latency/throughput trade-off at 10 kpps (µs)")
print(f"{'config':18} {'p50':>8} {'mean':>8} {'p99':>9} {'loss':>7} {'busy polls':>11} {'mean batch':>11}")
for n in ["lat-b1-busy", "lat-b32-drain100", "lat-b1-blocking"]:
    if n not in runs:
        continue
    bp = med(n, lambda s, d: d["worker"]["busy_polls"])
    mb = med(n, lambda s, d: d["worker"]["rx_batch_mean"])
    print(f"{n[4:]:18} {med(n, lat('p50')):8.1f} {med(n, lat('mean')):8.1f} {med(n, lat('p99')):9.1f} "
          f"{med(n, lambda s, d: s['loss_ratio']):7.4f} {bp:11.0f} {mb:11.2f}")
if "lat-b1-busy" in runs and "lat-b32-drain100" in runs:
    b = med("lat-b1-busy", lat("p50"))
    print(f"batched p50 − busy p50 = {med('lat-b32-drain100', lat('p50')) - b:.1f} µs (model: timer/2 = 50 µs)")

if "delayer-5ms" in runs:
    print("\n## delayer accuracy (5 ms mean, 0.1 ms stdev, uniform)")
    base = med("lat-b1-blocking", lat("mean"))
    m = med("delayer-5ms", lat("mean")) - base
    sd = med("delayer-5ms", lambda s, d: s["latency_ns"]["stdev"] / 1e3)
    print(f"delay: {m:.1f} µs (error {abs(m - 5000) / 5000 * 100:.3f} %, base {base:.1f} µs subtracted)")
    print(f"jitter: {sd:.1f} µs (error {abs(sd - 100) / 100 * 100:.2f} %)")
    p50 = med("delayer-5ms", lat("p50")) - med("lat-b1-blocking", lat("p50"))
    print(f"median delay: {p50:.1f} µs (error {abs(p50 - 5000) / 5000 * 100:.3f} %, base p50 subtracted)")
    late = med("delayer-5ms", lambda s, d: next(a["detail"]["lateness_ns_sum"] / max(1, a["detail"]["released"])
                                               for a in d["apps"] if a["name"] == "delayer") / 1e3)
    print(f"worker lateness: mean {late:.1f} µs after the due time (dut.json)")

for n in ["scramble-only", "scramble-reorder"]:
    if n in runs:
        s, d = runs[n][0]
        print(f"\n{n}: received {s['packets']['received']}, reordered {s['packets']['reordered']}, lost {s['packets']['lost']}")
        if d:
            for a in d["apps"]:
                if a["name"] == "reorder":
                    print("  reorder counters:", json.dumps(a["detail"]))
