#!/usr/bin/env python3
"""MVNOCoreSim (baseline policy) in SimPy against `nflab model mvno`, side by side.

Usage:  pip install -r bench/model/requirements.txt
        cargo build --release -p nflab
        python3 bench/model/mvno_simpy.py [--rate 460] [--duration-s 60] [--warmup-s 15]

Both simulate the same model: Poisson devices attaching with
SAI_VLR -> UL -> SAI_SGSN -> UL_GPRS through CMAP (8), HLR (64), AUC (8),
Backend (128) and an infinite-server ISD, gamma service times with Table
4.6's means and cvs, the AUC held through key generation, CMAP out and the
update, HLR/Backend caches, 6 s / 15 s timeouts and unlimited retries. The
script prints each tool's attach rate and AUC utilisation after the warm-up
(they must agree: same model) and the wall-time ratio for the same simulated
scenario. It asserts only that the two agree, never an absolute time.
"""
import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time

import simpy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Table 4.6: (mean µs, cv)
SVC = {
    "cmap_in": (1659, 0.07), "hlr_query": (1739, 0.06),
    "backend_query_hit": (1877, 0.06), "backend_query_miss": (70482, 0.68),
    "isd": (5998, 1.43), "backend_update": (13115, 0.25),
    "auc_keys": (2886, 0.04), "auc_update": (4960, 0.03), "cmap_out": (749, 0.14),
}
SAI_VLR, UL, SAI_SGSN, UL_GPRS = range(4)


def sampler(rng, name):
    mean, cv = SVC[name]
    shape = 1.0 / (cv * cv)
    scale = mean * 1e-6 / shape
    return lambda: rng.gammavariate(shape, scale)


class Core:
    def __init__(self, env, rng, warmup):
        self.env = env
        self.cmap = simpy.Resource(env, 8)
        self.hlr = simpy.Resource(env, 64)
        self.auc = simpy.Resource(env, 8)
        self.backend = simpy.Resource(env, 128)
        self.s = {k: sampler(rng, k) for k in SVC}
        self.hlr_until = {}
        self.backend_until = {}
        self.warmup = warmup
        self.auc_busy = 0.0
        self.attached_after_warmup = 0

    def serve(self, res, name):
        with res.request() as r:
            yield r
            yield self.env.timeout(self.s[name]())

    def message(self, dev, kind, answered):
        env = self.env
        yield from self.serve(self.cmap, "cmap_in")
        yield from self.serve(self.hlr, "hlr_query")
        now = env.now
        if self.hlr_until.get(dev, -1.0) <= now:
            hit = self.backend_until.get(dev, -1.0) > now
            yield from self.serve(self.backend, "backend_query_hit" if hit else "backend_query_miss")
            self.hlr_until[dev] = env.now + 1200.0
            if not hit:
                self.backend_until[dev] = env.now + 86400.0
        if kind in (SAI_VLR, SAI_SGSN):
            req = self.auc.request()
            yield req
            start = env.now
            yield env.timeout(self.s["auc_keys"]())
            yield from self.serve(self.cmap, "cmap_out")
            if not answered.triggered:
                answered.succeed()
            yield env.timeout(self.s["auc_update"]())
            self.auc.release(req)
            self.auc_busy += max(0.0, env.now - max(start, self.warmup))
        else:
            yield env.timeout(self.s["isd"]())
            yield from self.serve(self.backend, "backend_update")
            yield from self.serve(self.cmap, "cmap_out")
            if not answered.triggered:
                answered.succeed()

    def device(self, dev):
        env = self.env
        stage = 0
        while stage < 4:
            answered = env.event()
            env.process(self.message(dev, stage, answered))
            timeout = 6.0 if stage in (SAI_VLR, SAI_SGSN) else 15.0
            yield answered | env.timeout(timeout)
            stage = stage + 1 if answered.triggered else 0
        if env.now >= self.warmup:
            self.attached_after_warmup += 1


def arrivals(env, core, rng, rate):
    dev = 0
    while True:
        yield env.timeout(rng.expovariate(rate))
        env.process(core.device(dev))
        dev += 1


def simpy_run(rate, duration, warmup, seed):
    rng = random.Random(seed)
    env = simpy.Environment()
    core = Core(env, rng, warmup)
    env.process(arrivals(env, core, rng, rate))
    t0 = time.perf_counter()
    env.run(until=duration)
    wall = time.perf_counter() - t0
    span = duration - warmup
    return {
        "attach_rate_per_s": core.attached_after_warmup / span,
        "auc": core.auc_busy / (8 * span),
        "wall_s": wall,
    }


def nflab_run(rate, duration, warmup, seed):
    exe = os.path.join(ROOT, "target", "release", "nflab")
    out = subprocess.run(
        [exe, "model", "mvno", "--rate", str(rate), "--duration-s", str(duration),
         "--warmup-s", str(warmup), "--seed", str(seed), "--json"],
        check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    return {"attach_rate_per_s": r["attach_rate_per_s"], "auc": r["utilisation"]["auc"],
            "wall_s": r["wall_s"], "events": r["events"], "events_per_s": r["events_per_s"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=460.0)
    ap.add_argument("--duration-s", type=float, default=60.0)
    ap.add_argument("--warmup-s", type=float, default=15.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"python {platform.python_version()}, simpy {simpy.__version__}")
    n = nflab_run(a.rate, a.duration_s, a.warmup_s, a.seed)
    s = simpy_run(a.rate, a.duration_s, a.warmup_s, a.seed)
    print(f"nflab : attach {n['attach_rate_per_s']:.1f}/s  AUC {n['auc']:.3f}  "
          f"{n['events']} events in {n['wall_s']:.3f} s = {n['events_per_s'] / 1e6:.2f} M events/s")
    print(f"simpy : attach {s['attach_rate_per_s']:.1f}/s  AUC {s['auc']:.3f}  wall {s['wall_s']:.3f} s")
    print(f"speed-up (same scenario, wall time): {s['wall_s'] / n['wall_s']:.0f}x")
    # Same model: attach rate and AUC utilisation agree (stochastic tolerance).
    assert abs(n["attach_rate_per_s"] - s["attach_rate_per_s"]) < 0.05 * a.rate, (n, s)
    assert abs(n["auc"] - s["auc"]) < 0.03, (n, s)


if __name__ == "__main__":
    sys.exit(main())
