"""The figures of report.html, drawn with matplotlib.

Every function takes an :class:`~nflab.tree.Experiment`, draws into ``ax`` (or
a new figure) and returns the matplotlib ``Figure``. They compute from the
records with the same definitions as the Rust report (nearest-rank
percentiles, min/max decimation per pixel column), so a figure redrawn here
matches ``figures/<id>.csv`` of the artifact tree.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional

import numpy as np

from . import stats
from .tree import Experiment, Run

#: Colours of series (Okabe–Ito), as in report.html.
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]

FIGURES = ["hdr", "cdf", "ccdf", "histogram", "timeseries", "sweep", "throughput"]


def _plt():
    # Without a display matplotlib falls back to the Agg backend by itself.
    import matplotlib.pyplot as plt

    return plt


def _ax(ax, size=(8, 4.2)):
    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=size, constrained_layout=True)
    return ax.figure, ax


def configs(exp: Experiment) -> "OrderedDict[str, List[Run]]":
    """Runs grouped by configuration label, in run order."""
    out: "OrderedDict[str, List[Run]]" = OrderedDict()
    for r in exp.runs:
        out.setdefault(exp.config_label(r), []).append(r)
    return out


def _style(i: int, runs: List[Run]) -> Dict:
    return {"color": COLORS[i % len(COLORS)], "linestyle": "--" if any(r.dut == "loopback" for r in runs) else "-", "linewidth": 1.4}


def _pooled(runs: List[Run]) -> np.ndarray:
    parts = [r.latencies() for r in runs]
    parts = [p for p in parts if len(p)]
    return np.sort(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def _ns_axis(axis):
    from matplotlib.ticker import FuncFormatter

    def f(v, _):
        if v <= 0:
            return "0"
        if v < 1e3:
            return f"{v:g} ns"
        if v < 1e6:
            return f"{v / 1e3:g} µs"
        if v < 1e9:
            return f"{v / 1e6:g} ms"
        return f"{v / 1e9:g} s"

    axis.set_major_formatter(FuncFormatter(f))


def hdr(exp: Experiment, ax=None):
    """Latency against percentile on a log axis of 1/(1−p); one line per configuration."""
    from matplotlib.ticker import FixedLocator, FuncFormatter

    fig, ax = _ax(ax)
    nmax = 10
    for i, (label, runs) in enumerate(configs(exp).items()):
        lat = _pooled(runs)
        if len(lat) == 0:
            continue
        x, y = stats.hdr_points(lat)
        nmax = max(nmax, len(lat))
        ax.plot(x, y, label=label, **_style(i, runs))
    ax.set_xscale("log")
    ax.set_yscale("log")
    decades = int(np.ceil(np.log10(nmax)))
    ax.xaxis.set_major_locator(FixedLocator([10.0**d for d in range(decades + 1)]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "0%" if v <= 1 else f"{(1 - 1 / v) * 100:.{max(0, int(round(np.log10(v))) - 2)}f}%"))
    _ns_axis(ax.yaxis)
    ax.set_xlabel("percentile (axis: 1/(1−p), log)")
    ax.set_ylabel("one-way latency (log)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def cdf(exp: Experiment, ax=None, complementary: bool = False):
    """Empirical CDF (or CCDF, log y) of latency; one line per configuration."""
    fig, ax = _ax(ax)
    for i, (label, runs) in enumerate(configs(exp).items()):
        lat = _pooled(runs)
        if len(lat) == 0:
            continue
        p = np.arange(1, len(lat) + 1) / len(lat)
        if complementary:
            ax.step(lat[:-1], 1 - p[:-1], where="post", label=label, **_style(i, runs))
        else:
            ax.step(lat, p, where="post", label=label, **_style(i, runs))
    ax.set_xscale("log")
    _ns_axis(ax.xaxis)
    if complementary:
        ax.set_yscale("log")
        ax.set_ylabel("P(latency > x) (log)")
    else:
        ax.set_ylabel("P(latency ≤ x)")
    ax.set_xlabel("one-way latency (log)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower left" if complementary else "lower right")
    return fig


def ccdf(exp: Experiment, ax=None):
    """Complementary CDF on log axes."""
    return cdf(exp, ax, complementary=True)


def histogram(exp: Experiment, ax=None, per_decade: int = 20):
    """Fraction of packets per log-spaced latency bin."""
    fig, ax = _ax(ax)
    groups = [(label, runs, _pooled(runs)) for label, runs in configs(exp).items()]
    data = [g for g in groups if len(g[2])]
    if data:
        lo = max(1.0, min(float(g[2][0]) for g in data))
        hi = max(float(g[2][-1]) for g in data)
        d0 = np.floor(np.log10(lo))
        edges = 10 ** (d0 + np.arange(0, int((np.log10(hi) - d0) * per_decade) + 2) / per_decade)
        for i, (label, runs, lat) in enumerate(groups):
            if len(lat) == 0:
                continue
            h, _ = np.histogram(np.clip(lat, edges[0], edges[-1]), bins=edges)
            ax.stairs(h / len(lat), edges, label=label, **_style(i, runs))
    ax.set_xscale("log")
    ax.set_yscale("log")
    _ns_axis(ax.xaxis)
    ax.set_xlabel(f"one-way latency (log, {per_decade} bins per decade)")
    ax.set_ylabel("fraction of packets per bin (log)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def timeseries(exp: Experiment, run: Optional[str] = None, ax=None, columns: int = 1200, worst: int = 500):
    """Latency over transmit time, min/max-decimated per column, the ``worst`` highest marked.
    One panel per run (or only ``run``)."""
    plt = _plt()
    runs = [exp.run(run)] if run else [r for r in exp.runs if len(r.latencies())]
    if ax is None:
        fig, axes = plt.subplots(max(1, len(runs)), 1, figsize=(8, 1.8 * max(1, len(runs)) + 0.6), sharex=True, sharey=True, constrained_layout=True, squeeze=False)
        axes = axes[:, 0]
    else:
        fig, axes = ax.figure, [ax]
    labels = configs(exp)
    order = list(labels.keys())
    for a, r in zip(axes, runs):
        df = exp.records(r.name, backend="polars") if _has("polars") else exp.records(r.name, backend="pandas")
        t = np.asarray(df["t_s"])
        lat = np.asarray(df["latency_ns"])
        if len(t) == 0:
            a.text(0.5, 0.5, "no packet received", transform=a.transAxes, ha="center")
            continue
        c0, lo, hi = stats.decimate(t, lat, columns)
        w = (t.max() or 1.0) / columns
        i = order.index(exp.config_label(r))
        a.vlines(c0 + w / 2, np.maximum(lo, 1), np.maximum(hi, 1), color=COLORS[i % len(COLORS)], linewidth=0.6)
        k = min(worst, len(lat))
        idx = np.argpartition(lat, len(lat) - k)[len(lat) - k:]
        a.plot(t[idx], lat[idx], ".", color="#C00000", markersize=2.5, label=f"worst {k}")
        a.set_yscale("log")
        _ns_axis(a.yaxis)
        a.set_title(f"run {r.name} · {exp.config_label(r)}", fontsize=9, loc="left")
        a.grid(True, alpha=0.3)
    axes[-1].set_xlabel("transmit time since the first measured packet (s)")
    return fig


def _has(mod: str) -> bool:
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def _sweep_groups(exp: Experiment, x_key: str):
    others = [k for k in exp.sweep_keys if k != x_key]
    from .tree import _fmt_param

    out: "OrderedDict[str, Dict[float, List[Run]]]" = OrderedDict()
    for r in exp.runs:
        if x_key not in r.sweep:
            continue
        g = " · ".join(_fmt_param(k, r.sweep[k]) for k in others if k in r.sweep) or "all"
        out.setdefault(g, {}).setdefault(float(r.sweep[x_key]), []).append(r)
    return out


def _x_key(exp: Experiment) -> Optional[str]:
    for k in (["traffic.rate_pps"] if "traffic.rate_pps" in exp.sweep_keys else []) + exp.sweep_keys:
        vals = {r.sweep.get(k) for r in exp.runs if isinstance(r.sweep.get(k), (int, float))}
        if len(vals) >= 2:
            return k
    return None


def _summary_num(r: Run, *path):
    v = r.summary
    for p in path:
        if not isinstance(v, dict):
            return None
        v = v.get(p)
    return v if isinstance(v, (int, float)) else None


def sweep(exp: Experiment, ax=None, x_key: Optional[str] = None):
    """p50 (dashed) and p99 (solid) against a swept parameter, mean ± 95 % CI over repetitions."""
    fig, ax = _ax(ax)
    x_key = x_key or _x_key(exp)
    if x_key is None:
        ax.text(0.5, 0.5, "no numeric parameter is swept", transform=ax.transAxes, ha="center")
        return fig
    for i, (g, pts) in enumerate(_sweep_groups(exp, x_key).items()):
        for metric, ls in (("p99", "-"), ("p50", "--")):
            xs, ms, hs = [], [], []
            for x in sorted(pts):
                m, h = stats.mean_ci([_summary_num(r, "latency_ns", metric) for r in pts[x]])
                xs.append(x), ms.append(m), hs.append(h or 0.0)
            ax.errorbar(xs, ms, yerr=hs, color=COLORS[i % len(COLORS)], linestyle=ls, marker="o", markersize=3, capsize=3, label=f"{g} {metric}")
    ax.set_yscale("log")
    _ns_axis(ax.yaxis)
    ax.set_xlabel(x_key)
    ax.set_ylabel("latency (log)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def throughput(exp: Experiment, ax=None):
    """Received rate and loss against the offered rate (two panels)."""
    plt = _plt()
    if ax is None:
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True, constrained_layout=True, gridspec_kw={"height_ratios": [3, 2]})
    else:
        fig, a1 = ax.figure, ax
        a2 = a1.twinx()
    x_key = "traffic.rate_pps"
    top = 0.0
    for i, (g, pts) in enumerate(_sweep_groups(exp, x_key).items()):
        xs = sorted(pts)
        rx = [stats.mean_ci([_summary_num(r, "rate", "rx_pps") for r in pts[x]]) for x in xs]
        loss = [stats.mean_ci([_summary_num(r, "loss_ratio") for r in pts[x]]) for x in xs]
        c = COLORS[i % len(COLORS)]
        a1.errorbar(xs, [m for m, _ in rx], yerr=[h or 0 for _, h in rx], color=c, marker="o", markersize=3, capsize=3, label=g)
        a2.errorbar(xs, [m for m, _ in loss], yerr=[h or 0 for _, h in loss], color=c, marker="o", markersize=3, capsize=3, label=g)
        top = max([top] + xs)
    a1.plot([0, top], [0, top], color="#aaa", linestyle=":", label="offered = received")
    a1.set_ylabel("received rate (pps)")
    a2.set_ylabel("loss ratio")
    a2.set_xlabel("offered load (pps)")
    for a in (a1, a2):
        a.grid(True, alpha=0.3)
    a1.legend(fontsize=8, loc="upper left")
    return fig


def draw(exp: Experiment, figure: str, **kw):
    """Draw one figure by its report id (``hdr``, ``cdf``, ...)."""
    fns = {"hdr": hdr, "cdf": cdf, "ccdf": ccdf, "histogram": histogram, "timeseries": timeseries, "sweep": sweep, "throughput": throughput}
    if figure not in fns:
        raise KeyError(f"no figure {figure!r}; figures are {', '.join(fns)}")
    return fns[figure](exp, **kw)
