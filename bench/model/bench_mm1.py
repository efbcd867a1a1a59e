#!/usr/bin/env python3
"""M/M/1 with 10^6 customers: the nflab simulator against SimPy and ciw.

Usage:  pip install -r bench/model/requirements.txt
        python3 bench/model/bench_mm1.py [--customers N] [--rho R]

Each tool simulates the same queue (Poisson arrivals at rate rho per µs,
exponential service with mean 1 µs, FIFO, one server, infinite queue) for N
customers, best wall time of three runs (ciw: one run, it is slow). The
script prints the machine, each tool's mean sojourn time next to the closed
form E[T] = 1/(1 - rho) µs, and the speed ratios. It asserts only that the
means agree with the closed form within statistical tolerance, never an
absolute time.
"""
import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_avg_1min": round(load[0], 2) if load else None,
    }


def run_simpy(n, rho, seed):
    import simpy

    rng = random.Random(seed)
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    total = [0.0]

    def customer(env):
        t0 = env.now
        with server.request() as req:
            yield req
            yield env.timeout(rng.expovariate(1.0))
        total[0] += env.now - t0

    def source(env):
        for _ in range(n):
            env.process(customer(env))
            yield env.timeout(rng.expovariate(rho))

    env.process(source(env))
    t = time.perf_counter()
    env.run()
    wall = time.perf_counter() - t
    return {"tool": "simpy", "mean_sojourn_us": total[0] / n, "wall_s": wall}


def run_ciw(n, rho, seed):
    import ciw

    ciw.seed(seed)
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Exponential(rate=rho)],
        service_distributions=[ciw.dists.Exponential(rate=1.0)],
        number_of_servers=[1],
    )
    sim = ciw.Simulation(net)
    t = time.perf_counter()
    sim.simulate_until_max_customers(n, method="Finish")
    wall = time.perf_counter() - t
    recs = sim.get_all_records()
    mean = statistics.fmean(r.exit_date - r.arrival_date for r in recs)
    return {"tool": "ciw", "mean_sojourn_us": mean, "wall_s": wall, "customers": len(recs)}


def run_nflab(n, rho, seed):
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    cmd = ["cargo", "run", "--quiet", "--release", "-p", "nflab-model", "--example", "sim_bench",
           "--", str(n), str(rho), str(seed)]
    out = subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--customers", type=int, default=1_000_000)
    ap.add_argument("--rho", type=float, default=0.8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-ciw", action="store_true")
    a = ap.parse_args()

    print("machine:", json.dumps(machine()))
    exact = 1.0 / (1.0 - a.rho)
    print(f"M/M/1, rho = {a.rho}, E[S] = 1 us, {a.customers} customers; closed form E[T] = {exact:.4f} us")

    results = [run_nflab(a.customers, a.rho, a.seed)]
    best = None
    for k in range(3):
        r = run_simpy(a.customers, a.rho, a.seed + k)
        if best is None or r["wall_s"] < best["wall_s"]:
            best = r
    results.append(best)
    if not a.skip_ciw:
        results.append(run_ciw(a.customers, a.rho, a.seed))

    # Standard error of the mean sojourn of an M/M/1 run of n customers at
    # rho = 0.8 is about 1 % of E[T] at n = 10^6 (batch means); 5 % bounds it
    # with a wide margin while still catching a wrong queue (M/D/1 is 40 % off).
    ok = True
    print(f"{'tool':<8} {'mean sojourn us':>16} {'rel. to E[T]':>13} {'wall s':>9} {'customers/s':>13}")
    for r in results:
        n = r.get("customers", a.customers)
        r["customers_per_s"] = n / r["wall_s"]
        rel = r["mean_sojourn_us"] / exact - 1.0
        ok &= abs(rel) < 0.05
        print(f"{r['tool']:<8} {r['mean_sojourn_us']:>16.4f} {rel:>+12.2%} {r['wall_s']:>9.3f} {r['customers_per_s']:>13.0f}")
    nfl = results[0]
    print(f"nflab events/s: {nfl['events_per_s']:.3e} ({nfl['events']} events: arrivals, polls, departures)")
    for r in results[1:]:
        print(f"speed ratio nflab / {r['tool']}: {nfl['customers_per_s'] / r['customers_per_s']:.1f}x")
    if not ok:
        print("error: a mean sojourn time is more than 5 % from the closed form", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
