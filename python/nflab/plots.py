"""The figures of report.html, drawn with matplotlib.

Every function takes an :class:`~nflab.tree.Experiment`, draws into ``ax`` (or
a new figure) and returns the matplotlib ``Figure``. Nothing is computed here:
every curve, window, anomaly, histogram and interval comes from the engine
(:mod:`nflab.engine`, the Rust ``crates/analyze`` the report also calls) with
the report's options, so a figure redrawn here matches ``figures/<id>.csv``.
"""

from __future__ import annotations

import math

from collections import OrderedDict
from typing import Dict, List, Optional

import numpy as np

from . import app_plots, engine
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


def _pooled(exp: Experiment, runs: List[Run]):
    """The engine's latency distribution of the runs of one configuration, pooled."""
    res = [exp.analysis(r) for r in runs]
    return engine.pooled_latency(a.analyses[0] for a in res if a is not None)


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
        d = _pooled(exp, runs)
        if d.count() == 0:
            continue
        x, y = d.percentile_curve(40)
        nmax = max(nmax, d.count())
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
        d = _pooled(exp, runs)
        if d.count() == 0:
            continue
        lat, p = d.cdf_points(600)
        if complementary:
            ax.step(lat[:-1], [1 - q for q in p[:-1]], where="post", label=label, **_style(i, runs))
        else:
            ax.step([lat[0]] + list(lat), [0.0] + list(p), where="post", label=label, **_style(i, runs))
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
    groups = [(label, runs, _pooled(exp, runs)) for label, runs in configs(exp).items()]
    data = [g for g in groups if g[2].count()]
    if data:
        lo = max(1.0, min(float(g[2].min()) for g in data))
        hi = max(1.0, max(float(g[2].max()) for g in data))
        edges = engine.log_edges(lo, hi, per_decade)
        for i, (label, runs, d) in enumerate(groups):
            if d.count() == 0:
                continue
            h = np.asarray(d.bin_counts(edges), dtype=float)
            ax.stairs(h / d.count(), edges, label=label, **_style(i, runs))
    ax.set_xscale("log")
    ax.set_yscale("log")
    _ns_axis(ax.xaxis)
    ax.set_xlabel(f"one-way latency (log, {per_decade} bins per decade)")
    ax.set_ylabel("fraction of packets per bin (log)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def timeseries(exp: Experiment, run: Optional[str] = None, ax=None, worst: int = 500):
    """Latency over transmit time: the engine's min and max per slice of transmit time (16 384
    slices per run, as the report), the ``worst`` highest packets marked. One panel per run (or
    only ``run``)."""
    plt = _plt()
    runs = [exp.run(run)] if run else [r for r in exp.runs if _received(exp, r)]
    if ax is None:
        fig, axes = plt.subplots(max(1, len(runs)), 1, figsize=(8, 1.8 * max(1, len(runs)) + 0.6), sharex=True, sharey=True, constrained_layout=True, squeeze=False)
        axes = axes[:, 0]
    else:
        fig, axes = ax.figure, [ax]
    labels = configs(exp)
    order = list(labels.keys())
    for a, r in zip(axes, runs):
        res = exp.analysis(r)
        if not _received(exp, r):
            a.text(0.5, 0.5, "no packet received", transform=a.transAxes, ha="center")
            continue
        t0 = _first_tx(res)
        start, lo, hi = (np.asarray(v, dtype=np.float64) for v in res.analyses[0].series())
        w = exp.engine_options(r)["series_ns"]
        i = order.index(exp.config_label(r))
        a.vlines((start - t0 + w / 2) / 1e9, np.maximum(lo, 1), np.maximum(hi, 1), color=COLORS[i % len(COLORS)], linewidth=0.6)
        wp = res.summary.get("worst") or []
        wp = sorted(wp, key=lambda p: -p["latency_ns"])[:worst]
        a.plot([(p["tx_ns"] - t0) / 1e9 for p in wp], [p["latency_ns"] for p in wp], ".", color="#C00000", markersize=2.5,
               label=f"worst {len(wp)}")
        a.set_yscale("log")
        _ns_axis(a.yaxis)
        a.set_title(f"run {r.name} · {exp.config_label(r)}", fontsize=9, loc="left")
        a.grid(True, alpha=0.3)
    axes[-1].set_xlabel("transmit time since the first measured packet (s)")
    return fig


def _received(exp: Experiment, r: Run) -> int:
    res = exp.analysis(r)
    return int(res.summary["packets"]["received"]) if res is not None else 0


def _first_tx(res) -> int:
    return int(((res.summary.get("span") or {}).get("first_tx_ns")) or 0)


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
                m, h = engine.mean_ci([_summary_num(r, "latency_ns", metric) for r in pts[x]])
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
        rx = [engine.mean_ci([_summary_num(r, "rate", "rx_pps") for r in pts[x]]) for x in xs]
        loss = [engine.mean_ci([_summary_num(r, "loss_ratio") for r in pts[x]]) for x in xs]
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


def window_series(exp: Experiment, window_s: Optional[float] = None) -> "OrderedDict[str, tuple]":
    """Per configuration (its first run with ≥ 2 packets): ``(run, [(start_ns, p50, p99, max,
    packets)])``, the engine's windows (``summary.windows``) of ``window_s`` seconds of transmit
    time (default: the report's, :attr:`Experiment.window_ns`), start relative to the run's first
    measured packet."""
    out: "OrderedDict[str, tuple]" = OrderedDict()
    for label, runs in configs(exp).items():
        for r in runs:
            if _received(exp, r) < 2:
                continue
            res = exp.analysis(r)
            if window_s is not None and round(window_s * 1e9) != exp.window_ns:
                res = engine.analyze(r.path / "records.nfr", **dict(exp.engine_options(r), window=f"{max(int(round(window_s * 1e9)), 1)}ns"))
            t0 = _first_tx(res)
            rows = [(w["start_ns"] - t0, w["p50_ns"], w["p99_ns"], w["max_ns"], w["packets"])
                    for w in res.summary.get("windows") or [] if w.get("p50_ns") is not None]
            out[label] = (r, rows)
            break
    return out


def default_window_s(exp: Experiment) -> float:
    """The report's window, seconds: about 60 windows over the longest run, a 1-2-5 number of ms."""
    return exp.window_ns / 1e9


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
    """The ``(n, t_ns)`` anomaly definitions the runs are analysed with (the engine's parse of
    :meth:`Experiment.anomaly_specs`; ``t_ns`` None for a relative threshold)."""
    out = []
    for raw in exp.anomaly_specs():
        try:
            _, n, t = engine.parse_anomaly(raw)
        except ValueError:
            continue
        out.append((n, t))
    return out


def anomaly_table(exp: Experiment) -> List[dict]:
    """Every anomaly the engine found in every run, per definition: ``run, config, spec`` (its
    ``(n, t_ns)``), ``n, t_ns, flow, start_seq, t0_ns`` (transmit time of its first packet since
    the run's first measured packet), ``duration_ns`` (first to last send), ``packets, lost,
    max_ns`` (its peak latency)."""
    rows = []
    specs = anomaly_specs(exp)
    for k, (n, thr) in enumerate(specs):
        for r in exp.runs:
            res = exp.analysis(r)
            if res is None:
                continue
            details = res.summary.get("anomaly_details") or []
            if k >= len(details):
                continue
            t0 = _first_tx(res)
            for e in details[k].get("events") or []:
                rows.append(dict(run=r.name, config=exp.config_label(r), spec=(n, thr), n=n, t_ns=details[k]["t_ns"],
                                 flow=e["flow"], start_seq=e["start_seq"], t0_ns=(e["start_tx_ns"] or t0) - t0,
                                 duration_ns=e["duration_ns"], packets=e["packets"], lost=e["lost"], max_ns=e["peak_ns"]))
    rows.sort(key=lambda x: (specs.index(x["spec"]), x["run"], x["t0_ns"]))
    return rows


def anomalies(exp: Experiment, ax=None):
    """Anomaly timeline: one panel per ``n:t``; each anomaly is a bar from its start (transmit
    time of its first packet) as wide as it lasted, at the height of its duration (first to
    last send, at least 1 ns; log); colours by configuration."""
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
    spans = [(exp.analysis(r).summary.get("span") or {}) for r in exp.runs if exp.analysis(r) is not None]
    span = max([float((s.get("last_tx_ns") or 0) - (s.get("first_tx_ns") or 0)) for s in spans] + [1.0]) / 1e9
    order = list(configs(exp).keys())
    for a, (n, thr) in zip(axes, specs):
        found = [x for x in rows if x["spec"] == (n, thr)]
        seen = set()
        for x in found:
            i = order.index(x["config"])
            d = float(max(x["duration_ns"], 1))
            w = max(d / 1e9, span / 400)  # at least a visible sliver
            lab = x["config"] if x["config"] not in seen else None
            seen.add(x["config"])
            a.bar(x["t0_ns"] / 1e9, d * 1.25 - d / 1.25, width=w, bottom=d / 1.25, align="edge",
                  color=COLORS[i % len(COLORS)], alpha=0.8, label=lab)
        a.set_yscale("log")
        _ns_axis(a.yaxis)
        a.set_xlim(0, span * 1.02)
        a.set_ylabel("duration (log)")
        tl = _fmt_ns(thr) if thr is not None else "a relative threshold"
        a.set_title(f"anomaly {n}:{tl}: ≥ {n} consecutive packets with latency ≥ {tl} — {len(found)} found", fontsize=9, loc="left")
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
                bins = engine.log_bins([float(b["lo_ns"]) + w / 2 for b in h], [int(b["count"]) for b in h])
                if not bins:
                    continue
                out.append(dict(config=label, run=r.name, source="gen.json selfcheck (receive side)", bins=bins,
                                total=sum(b[2] for b in bins), target_ns=sc.get("configured_ipg_ns"), mse_ns2=sc.get("ipg_mse_ns2")))
                break
            # Fallback, as the report: the engine's transmit gaps of consecutive sequence numbers.
            rate = _summary_num(r, "rate", "offered_pps")
            if rate is None:
                rate = (r.params.get("traffic") or {}).get("rate_pps")
            res = exp.analysis(r)
            if (r.params.get("traffic") or {}).get("pattern") != "cbr" or not isinstance(rate, (int, float)) or rate <= 0 or res is None:
                continue
            g = res.analyses[0].tx_gaps()
            if g is None or g.count() < 2:
                continue
            target = 1e9 / rate
            values, counts = g.value_counts()
            bins = engine.log_bins([float(v) for v in values], counts)
            out.append(dict(config=label, run=r.name, source="transmit timestamps in the records", bins=bins,
                            total=g.count(), target_ns=target, mse_ns2=g.mse_about(target)))
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
    if figure in app_plots.APP_FIGURES:
        return app_plots.why_not(exp, figure)
    return None


def _swept_values(exp: Experiment, key: str) -> set:
    return {r.sweep.get(key) for r in exp.runs if isinstance(r.sweep.get(key), (int, float))}


def draw(exp: Experiment, figure: str, **kw):
    """Draw one figure by its report id (``hdr``, ``cdf``, ...)."""
    fns = {"hdr": hdr, "cdf": cdf, "ccdf": ccdf, "histogram": histogram, "timeseries": timeseries, "windows": windows,
           "anomalies": anomalies, "sweep": sweep, "throughput": throughput, "model": model, "ipg": ipg,
           **app_plots.DRAW}
    if figure not in fns:
        raise KeyError(f"no figure {figure!r}; figures are {', '.join(fns)}")
    return fns[figure](exp, **kw)
