"""The figures of report.html, drawn with matplotlib.

Every function takes an :class:`~nflab.tree.Experiment`, draws into ``ax`` (or
a new figure) and returns the matplotlib ``Figure``. They compute from the
records with the same definitions as the Rust report (nearest-rank
percentiles, min/max decimation per pixel column), so a figure redrawn here
matches ``figures/<id>.csv`` of the artifact tree.
"""

from __future__ import annotations

import math

from collections import OrderedDict
from typing import Dict, List, Optional

import numpy as np

from . import stats
from .tree import Experiment, Run

#: Colours of series (Okabe–Ito), as in report.html.
COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]

FIGURES = ["hdr", "cdf", "ccdf", "histogram", "timeseries", "windows", "anomalies", "sweep", "throughput", "model", "ipg"]


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


def _fmt_ns(v, _=None) -> str:
    """``250000`` → ``250 µs``."""
    if v <= 0:
        return "0"
    if v < 1e3:
        return f"{v:g} ns"
    if v < 1e6:
        return f"{v / 1e3:g} µs"
    if v < 1e9:
        return f"{v / 1e6:g} ms"
    return f"{v / 1e9:g} s"


def _ns_axis(axis):
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(_fmt_ns))


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


def _run_frame(exp: Experiment, r: Run):
    """(t_ns since the first measured transmit, latency, seq, flow) of one run, in transmit order."""
    f = r.record_file()
    if f is None:
        z = np.zeros(0, dtype=np.int64)
        return z, z, z, z
    a = f.measured()
    a = a[np.lexsort((a["seq"], a["flow"], a["tx_ns"]))]
    tx = a["tx_ns"].astype(np.int64)
    t = tx - tx[0] if len(tx) else tx
    return t, a["rx_ns"].astype(np.int64) - tx, a["seq"].astype(np.int64), a["flow"].astype(np.int64)


def window_series(exp: Experiment, window_s: float = 1.0) -> "OrderedDict[str, tuple]":
    """Per configuration (its first run with ≥ 2 packets): ``(run, [(start_ns, p50, p99, max, packets)])``
    for windows of ``window_s`` seconds of transmit time."""
    out: "OrderedDict[str, tuple]" = OrderedDict()
    win_ns = max(int(round(window_s * 1e9)), 1)
    for label, runs in configs(exp).items():
        for r in runs:
            t, lat, _, _ = _run_frame(exp, r)
            if len(t) > 1:
                out[label] = (r, stats.windows(t, lat, win_ns))
                break
    return out


def default_window_s(exp: Experiment) -> float:
    """The report's window: about 60 windows over the longest run, a 1-2-5 number of ms."""
    span = 1.0
    for runs in configs(exp).values():
        for r in runs:
            t, _, _, _ = _run_frame(exp, r)
            if len(t) > 1:
                span = max(span, float(t[-1] - t[0]))
                break
    raw_ms = span / 60.0 / 1e6
    nice_ms = 1.0
    if raw_ms > 0 and math.isfinite(raw_ms):
        p = 10 ** math.floor(math.log10(raw_ms))
        nice_ms = next((m * p for m in (1, 2, 2.5, 5) if m * p >= raw_ms * 0.999), 10 * p)
    return max(nice_ms * 1e6, 1e3) / 1e9


def windows(exp: Experiment, ax=None, window_s: Optional[float] = None):
    """p99 (solid) and max (dotted) latency per time window of ``window_s`` seconds (by default
    the report's: about 60 windows over the longest run), one colour per configuration (its
    first run), drawn at the window's middle."""
    window_s = window_s or default_window_s(exp)
    fig, ax = _ax(ax)
    series = window_series(exp, window_s)
    order = list(configs(exp).keys())
    for label, (r, w) in series.items():
        i = order.index(label)
        c = COLORS[i % len(COLORS)]
        x = [(s + window_s * 1e9 / 2) / 1e9 for s, *_ in w]
        ax.plot(x, [q[2] for q in w], color=c, linestyle="-", marker="o", markersize=2.5, linewidth=1.4, label=f"{label} p99")
        ax.plot(x, [q[3] for q in w], color=c, linestyle=":", marker=".", markersize=2.5, linewidth=1.0, label=f"{label} max")
    if not series:
        ax.text(0.5, 0.5, "no run has two packets", transform=ax.transAxes, ha="center")
    ax.set_yscale("log")
    _ns_axis(ax.yaxis)
    ax.set_xlabel("transmit time since the first measured packet (s)")
    ax.set_ylabel(f"latency per {window_s:g} s window (log)")
    ax.grid(True, alpha=0.3)
    if series:
        ax.legend(fontsize=8, loc="upper right")
    return fig


def anomaly_specs(exp: Experiment) -> List[tuple]:
    """The ``(n, t_ns)`` anomaly definitions: ``[analysis] anomalies`` of the first run that has
    them (as the report), else of the spec."""
    raw = None
    for r in exp.runs:
        a = (r.params.get("analysis") or {}).get("anomalies")
        if isinstance(a, list):
            raw = a
            break
    if raw is None:
        raw = (exp.spec.get("analysis") or {}).get("anomalies") or []
    return [p for p in (stats.parse_anomaly(s) for s in raw) if p is not None]


def anomaly_table(exp: Experiment) -> List[dict]:
    """Every anomaly of every run and spec, as the rows of ``figures/anomalies.csv``
    (``run, config, spec, n, t_ns`` plus the fields of :func:`nflab.stats.anomaly_events`)."""
    rows = []
    specs = anomaly_specs(exp)
    for n, thr in specs:
        for r in exp.runs:
            t, lat, seq, flow = _run_frame(exp, r)
            if len(t) == 0:
                continue
            for a in stats.anomaly_events(seq, flow, t, lat, n, thr):
                rows.append(dict(run=r.name, config=exp.config_label(r), spec=(n, thr), n=n, t_ns=thr, **a))
    return rows


def anomalies(exp: Experiment, ax=None):
    """Anomaly timeline: one panel per ``n:t``; each anomaly is a bar from its start (transmit
    time of its first packet) as wide as it lasted, at the height of its duration (first send
    to last arrival, log); colours by configuration."""
    plt = _plt()
    specs = anomaly_specs(exp)
    if ax is None:
        k = max(1, len(specs))
        fig, axes = plt.subplots(k, 1, figsize=(8, 2.2 * k + 0.6), sharex=True, constrained_layout=True, squeeze=False)
        axes = list(axes[:, 0])
    else:
        fig, axes = ax.figure, [ax] * max(1, len(specs))
    if not specs:
        axes[0].text(0.5, 0.5, "the spec has no [analysis] anomalies", transform=axes[0].transAxes, ha="center")
        return fig
    rows = anomaly_table(exp)
    ends = [_run_frame(exp, r)[0] for r in exp.runs]
    span = max([float(t[-1]) for t in ends if len(t)] + [1.0]) / 1e9
    order = list(configs(exp).keys())
    for a, (n, thr) in zip(axes, specs):
        found = [x for x in rows if x["spec"] == (n, thr)]
        seen = set()
        for x in found:
            i = order.index(x["config"])
            d = float(x["duration_ns"])
            w = max(d / 1e9, span / 400)  # at least a visible sliver
            lab = x["config"] if x["config"] not in seen else None
            seen.add(x["config"])
            a.bar(x["t0_ns"] / 1e9, d * 1.25 - d / 1.25, width=w, bottom=d / 1.25, align="edge",
                  color=COLORS[i % len(COLORS)], alpha=0.8, label=lab)
        a.set_yscale("log")
        _ns_axis(a.yaxis)
        a.set_xlim(0, span * 1.02)
        a.set_ylabel("duration (log)")
        a.set_title(f"anomaly {n}:{_fmt_ns(thr)}: ≥ {n} consecutive packets with latency ≥ {_fmt_ns(thr)} — {len(found)} found", fontsize=9, loc="left")
        a.grid(True, alpha=0.3)
        if found:
            a.legend(fontsize=8, loc="upper right")
        else:
            a.text(0.5, 0.5, "no anomaly in any run", transform=a.transAxes, ha="center")
    axes[-1].set_xlabel("transmit time of the anomaly's first packet (s)")
    return fig


def ipg_histograms(exp: Experiment) -> List[dict]:
    """Per configuration (first run with data): the inter-packet-gap histogram, from gen.json's
    ``selfcheck`` (linear buckets re-binned by midpoint) or else, for CBR runs, from the gaps of
    consecutive sequence numbers' transmit times. Dicts ``config, run, source, bins`` ([(lo, hi,
    count)], 10 log bins per decade), ``total, target_ns, mse_ns2``."""
    out = []
    for label, runs in configs(exp).items():
        for r in runs:
            sc = (r.gen or {}).get("selfcheck") if isinstance(r.gen, dict) else None
            if isinstance(sc, dict):
                w = max(float(sc.get("histogram_width_ns") or 1.0), 1.0)
                h = [b for b in sc.get("histogram") or [] if isinstance(b, dict) and "lo_ns" in b and "count" in b]
                bins = stats.log_bins([float(b["lo_ns"]) + w / 2 for b in h], [int(b["count"]) for b in h])
                if not bins:
                    continue
                out.append(dict(config=label, run=r.name, source="gen.json selfcheck (receive side)", bins=bins,
                                total=sum(b[2] for b in bins), target_ns=sc.get("configured_ipg_ns"), mse_ns2=sc.get("ipg_mse_ns2")))
                break
            rate = (r.params.get("traffic") or {}).get("rate_pps")
            if (r.params.get("traffic") or {}).get("pattern") != "cbr" or not isinstance(rate, (int, float)) or rate <= 0:
                continue
            t, _, seq, flow = _run_frame(exp, r)
            o = np.lexsort((seq, flow))
            t, seq, flow = t[o], seq[o], flow[o]
            ok = (flow[1:] == flow[:-1]) & (seq[1:] == seq[:-1] + 1)
            gaps = (t[1:] - t[:-1])[ok]
            if len(gaps) < 2:
                continue
            target = 1e9 / rate
            bins = stats.log_bins(gaps.astype(float))
            out.append(dict(config=label, run=r.name, source="transmit timestamps in the records", bins=bins,
                            total=len(gaps), target_ns=target, mse_ns2=float(np.mean((gaps - target) ** 2))))
            break
    return out


def ipg(exp: Experiment, ax=None):
    """Generator self-check: fraction of inter-packet gaps per log bin, the configured gap as a
    dotted line, the MSE (ns²) in the legend and title."""
    fig, ax = _ax(ax)
    hs = ipg_histograms(exp)
    order = list(configs(exp).keys())
    for h in hs:
        i = order.index(h["config"])
        c = COLORS[i % len(COLORS)]
        mse = f" · MSE {h['mse_ns2']:.1e} ns²" if h["mse_ns2"] is not None else ""
        for k, (lo, hi, cnt) in enumerate(h["bins"]):
            ax.stairs([cnt / h["total"]], [lo, hi], color=c, linewidth=1.4, label=f"{h['config']}{mse}" if k == 0 else None)
        if h["target_ns"]:
            ax.axvline(float(h["target_ns"]), color=c, linestyle=":", linewidth=1.0)
    if hs:
        ax.set_title("IPG MSE " + ", ".join(f"{h['config']}: {h['mse_ns2']:.3g} ns²" for h in hs if h["mse_ns2"] is not None), fontsize=8, loc="left")
        ax.legend(fontsize=8, loc="upper left")
    else:
        ax.text(0.5, 0.5, "no gen.json selfcheck and no CBR run with consecutive packets", transform=ax.transAxes, ha="center")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _ns_axis(ax.xaxis)
    ax.set_xlabel("inter-packet gap (log, 10 bins per decade)")
    ax.set_ylabel("fraction of gaps per bin (log)")
    ax.grid(True, alpha=0.3)
    return fig


MODEL_METRICS = [("p50_ns", "p50"), ("p99_ns", "p99"), ("mean_ns", "mean"), ("max_ns", "max")]


def model_points(exp: Experiment) -> List[dict]:
    """``run, config, metric, measured_ns, predicted_ns`` for every statistic present both in a
    prediction (``runs/NNN/model.json``, else ``DIR/model.json`` → ``predictions``) and in the
    run's ``summary.json`` → ``latency_ns`` — the rows of ``figures/model.csv``."""
    import json

    try:
        top = json.loads((exp.path / "model.json").read_text())
    except (OSError, ValueError):
        top = None
    preds = (top or {}).get("predictions") if isinstance(top, dict) else None
    out = []
    for r in exp.runs:
        try:
            p = json.loads((r.path / "model.json").read_text())
        except (OSError, ValueError):
            p = next((x for x in preds or [] if isinstance(x, dict) and x.get("run") == r.name), None)
        if not isinstance(p, dict):
            continue
        for key, stat in MODEL_METRICS:
            pv, mv = p.get(key), _summary_num(r, "latency_ns", stat)
            if isinstance(pv, (int, float)) and not isinstance(pv, bool) and mv is not None:
                out.append(dict(run=r.name, config=exp.config_label(r), metric=key, measured_ns=float(mv), predicted_ns=float(pv)))
    return out


def model(exp: Experiment, ax=None):
    """Measured (summary.json) against predicted (model.json) latency, one point per run and
    statistic, log–log, with the measured = predicted diagonal."""
    fig, ax = _ax(ax, size=(6.5, 5))
    pts = model_points(exp)
    if not pts:
        ax.text(0.5, 0.5, "no model.json with predictions for these runs", transform=ax.transAxes, ha="center")
        return fig
    lo = max(1.0, min(min(p["measured_ns"], p["predicted_ns"]) for p in pts))
    hi = max(max(p["measured_ns"], p["predicted_ns"]) for p in pts)
    lo, hi = 10 ** np.floor(np.log10(lo)), 10 ** np.ceil(np.log10(max(hi, lo * 10)))
    ax.plot([lo, hi], [lo, hi], color="#aaa", linestyle="--", linewidth=1.0, label="measured = predicted")
    for i, (key, _) in enumerate(MODEL_METRICS):
        v = [p for p in pts if p["metric"] == key]
        if v:
            ax.plot([p["predicted_ns"] for p in v], [p["measured_ns"] for p in v], "o", color=COLORS[i], markersize=5, label=key)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    _ns_axis(ax.xaxis)
    _ns_axis(ax.yaxis)
    ax.set_xlabel("predicted by the model (log)")
    ax.set_ylabel("measured (log)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def why_not(exp: Experiment, figure: str) -> Optional[str]:
    """Why ``figure`` does not apply to ``exp`` (as the report's "Figures that do not apply"), or None."""
    if figure == "anomalies" and not anomaly_specs(exp):
        return "the spec has no [analysis] anomalies"
    if figure == "model" and not model_points(exp):
        return "no model.json with predictions that match a run's summary.json"
    if figure == "ipg" and not ipg_histograms(exp):
        return "no run has a gen.json selfcheck or CBR records with consecutive packets"
    if figure == "sweep" and _x_key(exp) is None:
        return "no numeric parameter is swept over two or more values"
    if figure == "throughput" and len(_swept_values(exp, "traffic.rate_pps")) < 2:
        return "traffic.rate_pps is not swept over two or more values"
    return None


def _swept_values(exp: Experiment, key: str) -> set:
    return {r.sweep.get(key) for r in exp.runs if isinstance(r.sweep.get(key), (int, float))}


def draw(exp: Experiment, figure: str, **kw):
    """Draw one figure by its report id (``hdr``, ``cdf``, ...)."""
    fns = {"hdr": hdr, "cdf": cdf, "ccdf": ccdf, "histogram": histogram, "timeseries": timeseries, "windows": windows,
           "anomalies": anomalies, "sweep": sweep, "throughput": throughput, "model": model, "ipg": ipg}
    if figure not in fns:
        raise KeyError(f"no figure {figure!r}; figures are {', '.join(fns)}")
    return fns[figure](exp, **kw)
