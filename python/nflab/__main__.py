"""``python -m nflab plot DIR ID [-o FILE]`` and ``python -m nflab summary DIR``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import app_plots, plots
from .tree import NotAnExperiment, load


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nflab", description="nflab artifact trees in Python")
    sub = p.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("plot", help="draw a figure of the report with matplotlib")
    pp.add_argument("dir", help="experiment directory written by `nflab run`")
    figures = plots.FIGURES + app_plots.APP_FIGURES
    pp.add_argument("figure", help=f"one of {', '.join(figures)}, or 'all'")
    pp.add_argument("-o", "--out", help="output file (.png/.pdf/.svg) or, for 'all', a directory; default figures-py/ in DIR")
    ps = sub.add_parser("summary", help="print the per-run summaries")
    ps.add_argument("dir")
    a = p.parse_args(argv)
    try:
        exp = load(a.dir)
    except NotAnExperiment as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.cmd == "summary":
        df = exp.summaries()
        cols = [c for c in ["run", "config", "packets.received", "loss_ratio", "latency_ns.p50", "latency_ns.p99", "latency_ns.max"] if c in df.columns]
        print(df.select(cols))
        for prob in exp.problems:
            print(f"note: {prob}", file=sys.stderr)
        return 0
    ids = figures if a.figure == "all" else [a.figure]
    if a.figure != "all" and a.figure not in figures:
        print(f"error: no figure {a.figure!r}; figures are {', '.join(figures)}", file=sys.stderr)
        return 2
    outdir = Path(a.out) if (a.out and a.figure == "all") else Path(a.dir) / "figures-py"
    for fid in ids:
        reason = plots.why_not(exp, fid) if a.figure == "all" else None
        if reason:
            print(f"note: {fid} does not apply here: {reason}", file=sys.stderr)
            continue
        fig = plots.draw(exp, fid)
        out = Path(a.out) if (a.out and a.figure != "all") else outdir / f"{fid}.png"
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=150)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
