"""Figures of the applications' figures in ``results.parquet`` (docs/formats.md):
NCSbench's ``ncs_*`` and the PRRT study's ``prrt_<pc|cp>_*`` columns against the swept
parameter, mean ± 95 % Student-t interval over repetitions (``engine.mean_ci``, the
engine's interval). Nothing is computed here beyond grouping the rows.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Dict, List, Optional, Tuple

from . import engine
from .tree import Experiment

#: The application figures ``python -m nflab plot DIR ID`` draws, where they apply.
APP_FIGURES = ["ncs", "prrt"]

_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7"]


def _rows(exp: Experiment) -> List[Dict]:
    df = exp.results()
    return df.to_dicts() if hasattr(df, "to_dicts") else df.to_dict("records")


def _x_key(exp: Experiment, rows: List[Dict]) -> Optional[str]:
    """The first swept parameter with two or more numeric values (``param.<key>``)."""
    for k in exp.sweep_keys:
        vals = {r.get(f"param.{k}") for r in rows if isinstance(r.get(f"param.{k}"), (int, float))}
        if len(vals) >= 2:
            return k
    return None


def points(exp: Experiment, column: str) -> Tuple[Optional[str], "OrderedDict[float, Tuple[float, Optional[float], int]]"]:
    """Column ``column`` per value of the swept parameter: (mean, CI half-width, runs).
    Without a numeric sweep, x is the run's index."""
    rows = _rows(exp)
    key = _x_key(exp, rows)
    groups: "OrderedDict[float, List[float]]" = OrderedDict()
    for i, r in enumerate(rows):
        x = float(r[f"param.{key}"]) if key else float(i)
        v = r.get(column)
        if v is None:
            continue
        groups.setdefault(x, []).append(float(v))
    out: "OrderedDict[float, Tuple[float, Optional[float], int]]" = OrderedDict()
    for x in sorted(groups):
        m, h = engine.mean_ci(groups[x])
        out[x] = (m, h, len(groups[x]))
    return key, out


def has_columns(exp: Experiment, prefix: str) -> bool:
    try:
        cols = exp.results().columns
    except Exception:  # no results.parquet and no summaries
        return False
    return any(str(c).startswith(prefix) for c in cols)


def _panel(ax, exp: Experiment, series: List[Tuple[str, str]], ylabel: str) -> Optional[str]:
    key = None
    for i, (column, label) in enumerate(series):
        key, pts = points(exp, column)
        if not pts:
            continue
        xs = list(pts)
        ax.errorbar(xs, [pts[x][0] for x in xs], yerr=[pts[x][1] or 0.0 for x in xs], marker="o", markersize=3,
                    capsize=3, color=_COLORS[i % len(_COLORS)], label=label)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return key


def ncs(exp: Experiment, ax=None):
    """NCSbench: d_N median and p99.9 (ms), losses and the fraction of runs that fell,
    against the swept parameter."""
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True, constrained_layout=True)
    key = _panel(a1, exp, [("ncs_d_N_median_ms", "d_N median"), ("ncs_d_N_p99.9_ms", "d_N p99.9")], "d_N (ms)")
    _panel(a2, exp, [("ncs_losses", "losses per run"), ("ncs_fell", "fraction of runs fallen")], "losses / fraction")
    a2.set_xlabel(key or "run")
    return fig


def prrt(exp: Experiment, ax=None):
    """PRRT study: loss ratio (late counts as lost) and redundancy per direction, and the
    longest outage, against the swept parameter."""
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True, constrained_layout=True)
    key = _panel(a1, exp, [("prrt_pc_loss_ratio", "PC loss"), ("prrt_cp_loss_ratio", "CP loss"),
                           ("prrt_pc_redundancy_ratio", "PC redundancy"), ("prrt_cp_redundancy_ratio", "CP redundancy")],
                 "ratio")
    _panel(a2, exp, [("prrt_pc_outage_longest_ns", "PC longest outage"), ("prrt_cp_outage_longest_ns", "CP longest outage")],
           "ns")
    a2.set_xlabel(key or "run")
    return fig


def why_not(exp: Experiment, figure: str) -> Optional[str]:
    if figure == "ncs" and not has_columns(exp, "ncs_"):
        return "results.parquet has no ncs_* columns (no [app] kind = \"ncsbench\")"
    if figure == "prrt" and not has_columns(exp, "prrt_"):
        return "results.parquet has no prrt_* columns (no [app] kind = \"prrt\")"
    return None


DRAW = {"ncs": ncs, "prrt": prrt}
