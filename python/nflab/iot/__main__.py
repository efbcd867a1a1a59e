"""``python -m nflab.iot generate|analyze``: synthetic IoT signaling traces and
the seed-003 analysis (docs/models.md §8)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from . import schema as S


def _mix(text: str) -> dict:
    out = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in S.CLASSES:
            raise argparse.ArgumentTypeError(f"--mix: unknown class {name.strip()!r}; classes are {', '.join(S.CLASSES)}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--mix: {part!r} is not CLASS=FRACTION") from None
    return out


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return v


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nflab.iot", description="IoT signaling: synthetic populations and their analysis (seed 003 §4.2)")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write a synthetic device population's signaling messages to Parquet")
    g.add_argument("out", help="directory: messages/part-*.parquet, devices.parquet (truth), population.json")
    g.add_argument("--devices", type=_positive_int, default=1000)
    g.add_argument("--days", type=float, default=14.0)
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--mix", type=_mix, help="class fractions, e.g. non_periodic=0.35,semi_periodic=0.2,periodic=0.25,high_error=0.1,high_reject=0.1")
    g.add_argument("--sync-fraction", type=float, default=0.5, help="of the (semi-)periodic devices, the fraction synchronised to minutes of the hour")
    g.add_argument("--devices-per-file", type=_positive_int, default=2000)
    a = sub.add_parser("analyze", help="dialogs, sequences, features, k-means, PCA, synchronisation, KS tests")
    a.add_argument("data", help="directory with messages/*.parquet (and devices.parquet to score against)")
    a.add_argument("--out", help="result directory (default DATA/analysis-ENGINE)")
    a.add_argument("--engine", choices=("polars", "spark"), default="polars")
    a.add_argument("--k", type=_positive_int, help="clusters (default: by the elbow over k = 1..10)")
    a.add_argument("--chunk-devices", type=_positive_int, default=2000, help="polars: devices per pass (bounds memory)")
    a.add_argument("--master", default="local[2]", help="spark: master URL")
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--json", action="store_true", help="print analysis.json on stdout")
    args = p.parse_args(argv)
    tty = sys.stderr.isatty()
    try:
        if args.cmd == "generate":
            from .generate import Population, generate

            pop = Population(devices=args.devices, days=args.days, seed=args.seed, sync_fraction=args.sync_fraction,
                             devices_per_file=args.devices_per_file)
            if args.mix:
                pop.mix = args.mix
            t = time.monotonic()
            show = (lambda d, n, m: print(f"\r{d}/{n} devices, {m} messages", end="", file=sys.stderr)) if tty else None
            info = generate(pop, args.out, progress=show)
            if tty:
                print(file=sys.stderr)
            print(f"{info['messages']} messages of {pop.devices} devices over {pop.days} days in {args.out} ({time.monotonic() - t:.1f} s)")
            return 0
        data = Path(args.data)
        if not (data / "messages").is_dir():
            print(f"error: {data / 'messages'} is not a directory; generate one with `python -m nflab.iot generate DIR`", file=sys.stderr)
            return 2
        out = Path(args.out) if args.out else data / f"analysis-{args.engine}"
        out.mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        if args.engine == "polars":
            from . import polars_engine

            show = (lambda d, n: print(f"\r{d}/{n} devices", end="", file=sys.stderr)) if tty else None
            r = polars_engine.analyze(data, out, k=args.k, chunk_devices=args.chunk_devices, seed=args.seed, progress=show)
        else:
            from . import spark_engine

            r = spark_engine.analyze(data, out, k=args.k, seed=args.seed, master=args.master)
        wall = time.monotonic() - t
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(r, indent=1))
    else:
        print(f"{r['messages']} messages, {r['dialogs']} dialogs, {r['sequences']} sequences, {r['devices']} devices ({args.engine}, {wall:.1f} s)")
        km = r["kmeans"]
        print(f"k-means: k = {km['k']} ({km['k_by']})")
        for c in km["clusters"]:
            cen = ", ".join(f"{k} {v:.3f}" for k, v in c["centroid"].items())
            print(f"  {c['name']:<14} {c['devices']:>8} devices  {cen}")
        s = r["synchronisation"]
        print(f"synchronised: {s['synchronised']} of {s['considered']} devices with >= {s['min_sequences']} sequences")
        if "truth" in r:
            print(f"against the planted population: adjusted Rand index {r['truth']['adjusted_rand_index']:.3f}, "
                  f"synchronisation accuracy {r['truth']['sync_accuracy']}")
        print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
