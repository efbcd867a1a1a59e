#!/usr/bin/env python3
"""Print the data-plane benchmark figures from nflab run artifact trees."""
import glob, json, os, statistics, sys

root = sys.argv[1]
runs = {}
for d in sorted(glob.glob(os.path.join(root, "*"))):
    name = os.path.basename(d).split("-", 1)[1]
    for r in sorted(glob.glob(os.path.join(d, "runs", "*"))):
        s = json.load(open(os.path.join(r, "summary.json")))
        sysj = os.path.join(r, "system.json")
        if os.path.exists(sysj):
            s["_load"] = json.load(open(sysj)).get("before", {}).get("load_1m")
        dut = os.path.join(r, "dut.json")
        runs.setdefault(name, []).append((s, json.load(open(dut)) if os.path.exists(dut) else None))

def med(name, f):
    v = [f(s, d) for s, d in runs.get(name, [])]
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else float("nan")

rx = lambda s, d: s["rate"]["rx_pps"]
# Busy cycles per packet on the DuT core: nflab's worker counters
# (cycles_busy / packets sent), testpmd's --record-core-cycles (busy cycles /
# packets received); the kernel DuTs have no such counter.
cpp = lambda s, d: d["worker"].get("cycles_per_packet") if d and "worker" in d else None
RATE = ["rate-linux-router", "rate-linux-bridge",
        "rate-nflab-l2fwd", "rate-nflab-router", "rate-testpmd",
        "rate-nflab-l2fwd-xdp", "rate-nflab-router-xdp", "rate-testpmd-xdp", "rate-testpmd-mac-xdp"]
if any(n in runs for n in RATE):
    print("\n## forwarding rate, 64 B, generator at max, one DuT core (median of repetitions)")
    base = med("rate-linux-router", rx)
    print(f"{'DuT':22} {'runs':>4} {'tx kpps':>8} {'rx kpps':>8} {'vs linux-router':>16} {'loss':>7} "
          f"{'DuT drops':>10} {'cycles/pkt':>11} {'load 1m':>8}")
    for n in RATE:
        if n not in runs:
            continue
        loss = med(n, lambda s, d: s["loss_ratio"])
        r = med(n, rx)
        tx = med(n, lambda s, d: s["rate"]["tx_pps"])
        # testpmd: packets its ports dropped on receive (full AF_XDP ring).
        drops = med(n, lambda s, d: d["total"]["rx_dropped"] if d and d.get("kind") == "testpmd" else None)
        load = med(n, lambda s, d: s.get("_load"))
        print(f"{n[5:]:22} {len(runs[n]):4} {tx/1e3:8.1f} {r/1e3:8.1f} {r/base:16.2f} {loss:7.3f} "
              f"{drops:10.0f} {med(n, cpp):11.0f} {load:8.2f}")
    pairs = [("nflab-l2fwd", "testpmd"), ("nflab-router", "testpmd"),
             ("nflab-l2fwd-xdp", "testpmd-xdp"), ("nflab-router-xdp", "testpmd-xdp"),
             ("nflab-l2fwd-xdp", "testpmd-mac-xdp")]
    pairs = [(a, b) for a, b in pairs if "rate-" + a in runs and "rate-" + b in runs]
    if pairs:
        print("\nnflab / testpmd (rate ≥ 1 and cycles < 1 favour nflab)")
        print(f"{'pair':38} {'rate ratio':>11} {'cycles/pkt ratio':>17}")
        for a, b in pairs:
            ra, rb = med("rate-" + a, rx), med("rate-" + b, rx)
            ca, cb = med("rate-" + a, cpp), med("rate-" + b, cpp)
            print(f"{a + ' / ' + b:38} {ra/rb:11.2f} {ca/cb:17.2f}")

lat = lambda k: (lambda s, d: s["latency_ns"][k] / 1e3)
LAT = ["lat-b1-busy", "lat-b32-drain100", "lat-b1-blocking"]
if any(n in runs for n in LAT):
    print("\n## latency/throughput trade-off at 10 kpps (µs)")
    print(f"{'config':18} {'p50':>8} {'mean':>8} {'p99':>9} {'loss':>7} {'busy polls':>11} {'mean batch':>11}")
for n in LAT:
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
    base = med("lat-b1-busy", lat("mean"))
    m = med("delayer-5ms", lat("mean")) - base
    sd = med("delayer-5ms", lambda s, d: s["latency_ns"]["stdev"] / 1e3)
    print(f"delay: {m:.1f} µs (error {abs(m - 5000) / 5000 * 100:.3f} %, base {base:.1f} µs subtracted)")
    print(f"jitter: {sd:.1f} µs (error {abs(sd - 100) / 100 * 100:.2f} %)")
    p50 = med("delayer-5ms", lat("p50")) - med("lat-b1-busy", lat("p50"))
    print(f"median delay: {p50:.1f} µs (error {abs(p50 - 5000) / 5000 * 100:.3f} %, base p50 subtracted)")
    late = med("delayer-5ms", lambda s, d: next(a["detail"]["lateness_ns_sum"] / max(1, a["detail"]["released"])
                                               for a in d["apps"] if a["name"] == "delayer") / 1e3)
    print(f"worker lateness: mean {late:.1f} µs after the due time (dut.json)")

loads = sorted((int(n.rsplit("-", 1)[1]), n) for n in runs if n.startswith("delayer-load-"))
if loads:
    print("\n## delayer under load (5 ms mean, 0.1 ms stdev; base: lat-b1-busy mean)")
    base = med("lat-b1-busy", lat("mean")) if "lat-b1-busy" in runs else 0.0
    print(f"{'offered pps':>12} {'rx kpps':>8} {'loss':>8} {'delay err %':>12} {'jitter err %':>13} {'p50 err %':>10} {'lateness µs':>12}")
    for rate, n in loads:
        m = med(n, lat("mean")) - base
        sd = med(n, lambda s, d: s["latency_ns"]["stdev"] / 1e3)
        p50 = med(n, lat("p50")) - base
        late = med(n, lambda s, d: next(a["detail"]["lateness_ns_sum"] / max(1, a["detail"]["released"])
                                        for a in d["apps"] if a["name"] == "delayer") / 1e3)
        print(f"{rate:12d} {med(n, rx) / 1e3:8.1f} {med(n, lambda s, d: s['loss_ratio']):8.4f} "
              f"{(m - 5000) / 50:12.3f} {(sd - 100):13.2f} {(p50 - 5000) / 50:10.3f} {late:12.1f}")

for n in ["scramble-only", "scramble-reorder"]:
    if n in runs:
        s, d = runs[n][0]
        print(f"\n{n}: received {s['packets']['received']}, reordered {s['packets']['reordered']}, lost {s['packets']['lost']}")
        if d:
            for a in d["apps"]:
                if a["name"] == "reorder":
                    print("  reorder counters:", json.dumps(a["detail"]))
