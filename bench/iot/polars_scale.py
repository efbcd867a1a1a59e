#!/usr/bin/env python3
"""The polars IoT pipeline at growing scale: wall time and peak RSS of
`python -m nflab.iot analyze` on synthetic populations of N messages.

    python3 bench/iot/polars_scale.py 1e6 1e7 [--dir /tmp/iot-bench] [--keep]

Each scale generates a population (14 days, ~1 500 messages per device) in its
own directory, analyses it in a child process (peak RSS from getrusage of that
child alone) and deletes it unless --keep. Memory is bounded when the peak RSS
stays flat while the messages grow ten-fold: the script prints that ratio next
to the time ratio, with the machine and its load (timings on a shared host are
only comparable side by side).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

# The children import the installed package (scripts/setup.sh installs it); not from
# python/, whose source tree lacks the compiled engine module.
WORKDIR = Path("/tmp")
MESSAGES_PER_DEVICE = 1505  # 14 days, default mix (python -m nflab.iot generate)


def child(argv):
    """Runs argv; returns (wall s, its stdout)."""
    t = time.monotonic()
    p = subprocess.run(argv, cwd=WORKDIR, capture_output=True, text=True)
    wall = time.monotonic() - t
    if p.returncode:
        sys.exit(f"{' '.join(argv)} failed:\n{p.stderr}")
    return wall, p.stdout


def measured(argv):
    """Runs argv from a forked waiter, so that RUSAGE_CHILDREN covers that one child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        wall, out = child(argv)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        os.write(w, json.dumps({"wall": wall, "rss": rss, "out": out}).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 1 << 16):
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scales", nargs="+", type=float, help="messages, e.g. 1e6 1e7")
    ap.add_argument("--dir", default="/tmp/nflab-iot-bench")
    ap.add_argument("--chunk-devices", type=int, default=2000)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    rows = []
    for n in a.scales:
        devices = max(10, round(n / MESSAGES_PER_DEVICE))
        d = Path(a.dir).resolve() / f"n{int(n)}"
        shutil.rmtree(d, ignore_errors=True)
        print(f"load: {os.getloadavg()}")
        g = measured([sys.executable, "-m", "nflab.iot", "generate", str(d), "--devices", str(devices)])
        size = sum(f.stat().st_size for f in (d / "messages").glob("*.parquet"))
        r = measured([sys.executable, "-m", "nflab.iot", "analyze", str(d), "--chunk-devices", str(a.chunk_devices), "--json"])
        res = json.loads(r["out"])
        row = {"messages": res["messages"], "devices": devices, "parquet_mib": size / 2**20,
               "generate_s": g["wall"], "generate_rss_mib": g["rss"], "analyze_s": r["wall"], "analyze_rss_mib": r["rss"],
               "ari": res.get("truth", {}).get("adjusted_rand_index"), "k": res["kmeans"]["k"], "load": os.getloadavg()}
        rows.append(row)
        print(json.dumps(row))
        if not a.keep:
            shutil.rmtree(d)
    if len(rows) > 1:
        f, l = rows[0], rows[-1]
        print(f"messages x{l['messages'] / f['messages']:.1f}: analyze time x{l['analyze_s'] / f['analyze_s']:.1f}, "
              f"peak RSS x{l['analyze_rss_mib'] / f['analyze_rss_mib']:.2f} ({f['analyze_rss_mib']:.0f} -> {l['analyze_rss_mib']:.0f} MiB)")


if __name__ == "__main__":
    main()
