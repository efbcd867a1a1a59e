"""nflab's analysis engine (``crates/analyze``, in Rust) from Python.

Every statistic the package shows comes from here: the functions call the
engine through the ``nflab._engine`` extension module (PyO3, built by
maturin when the package is installed) and return what ``nflab analyze``
computes, bit for bit.

>>> r = nflab.analyze("runs/000/records.nfr", anomalies=["2:250us"], window="100ms")  # doctest: +SKIP
>>> r.json == subprocess.check_output(["nflab", "analyze", "--json", ...]).decode().rstrip("\\n")  # doctest: +SKIP
>>> r.summary["latency_ns"]["p99"]          # the summary.json object         # doctest: +SKIP
>>> nflab.engine.windows_frame(r.summary)   # summary.windows as a polars DataFrame  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _engine

Distribution = _engine.Distribution
Analysis = _engine.Analysis

#: Keyword arguments of :func:`analyze`: the long flags of ``nflab analyze`` with ``_`` for ``-``
#: (repeatable flags take a list), plus ``series_ns`` and ``tx_gaps`` (drawing data that leaves
#: the summary alone).
OPTIONS = (
    "anomalies", "no_anomalies", "format", "percentiles", "hdr_digits", "exact_limit", "exact", "hdr", "window",
    "trim", "deadline", "worst", "per_flow", "reorder_window", "anomaly_events", "sla",
    "anomalies_only", "threads", "confidence", "export", "export_format", "bins", "series_ns", "tx_gaps",
)

PathLike = Union[str, "os.PathLike[str]"]


@dataclass
class Result:
    """What :func:`analyze` returns."""

    #: The text ``nflab analyze --json`` prints for the same inputs and options.
    json: str
    #: ``json`` parsed: one summary, or ``{input: summary, ..., "_across_runs": {...}}``.
    value: Dict[str, Any]
    #: The engine's analysis of each input, in order (distributions, curves).
    analyses: List[Any]
    #: An ``sla`` clause failed (``nflab analyze`` exits with 3).
    sla_failed: bool

    @property
    def summaries(self) -> List[Dict[str, Any]]:
        """One summary.json object per input, in order."""
        if len(self.analyses) == 1:
            return [self.value]
        return [self.value[a.label] for a in self.analyses]

    @property
    def summary(self) -> Dict[str, Any]:
        """The summary of the only input (an error with several)."""
        if len(self.analyses) != 1:
            raise ValueError(f"{len(self.analyses)} inputs were analysed: use .summaries or .value")
        return self.value

    @property
    def across_runs(self) -> Optional[Dict[str, Any]]:
        """Mean and confidence intervals over the inputs (two or more), as ``_across_runs``."""
        return self.value.get("_across_runs") if len(self.analyses) > 1 else None


def analyze(paths: Union[PathLike, Sequence[PathLike]], **options) -> Result:
    """Analyse record files (``.nfr``, CSV ``seq,tx_ns,rx_ns``, TRex-fork ``.data``), experiment
    directories (each ``runs/*/records.nfr``) or, with ``format="pcap"``, PRE POST capture
    pairs, exactly as ``nflab analyze --json PATHS`` with the same options: ``anomalies=["2:250us"]``
    is ``--anomaly 2:250us``, ``window="1s"`` is ``--window 1s``, ``per_flow=True`` is
    ``--per-flow``, ``export="out"`` is ``--export out`` (its tables, summary.json and
    latency.hlog, ``out/NNN/`` per input when there are several; ``export_format``, ``bins``)
    (see :data:`OPTIONS`). A bad option or input raises ``ValueError`` with one
    sentence naming it."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    files = [os.fspath(p) for p in paths]
    if options.get("export") is not None:
        options["export"] = os.fspath(options["export"])
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown analysis option {unknown[0]!r}; options are {', '.join(OPTIONS)}")
    for k in ("anomalies", "percentiles"):
        if isinstance(options.get(k), str):
            options[k] = [options[k]]
    text, analyses, failed = _engine.analyze(files, json.dumps({k: v for k, v in options.items() if v is not None}))
    return Result(json=text, value=json.loads(text), analyses=analyses, sla_failed=failed)


def analyze_json(paths, **options) -> str:
    """The text ``nflab analyze --json`` prints (without its final newline)."""
    return analyze(paths, **options).json


def distribution(exact_limit: Optional[int] = None, hdr_digits: int = 3):
    """An empty engine distribution (to pool runs: ``d.merge(a.latency())``)."""
    return _engine.distribution(exact_limit if exact_limit is not None else 1 << 24, hdr_digits)


def pooled_latency(analyses: Iterable[Any]):
    """The latency distributions of several analyses merged into one (the report pools the
    repetitions of a configuration this way)."""
    out = None
    for a in analyses:
        if out is None:
            out = a.latency()
        else:
            out.merge(a.latency())
    return out if out is not None else distribution()


def mean_ci(values: Iterable[Optional[float]], level: float = 0.95) -> Tuple[float, Optional[float]]:
    """Mean and the half-width of its Student-t confidence interval (None below two values), as
    the report's sweep figures; None and NaN values are left out."""
    xs = [float(v) for v in values if v is not None and v == v]
    if not xs:
        return float("nan"), None
    ci = _engine.mean_t_ci(xs, level)
    if ci is None:
        return xs[0] if len(xs) == 1 else float("nan"), None
    mean, _, hi = ci
    return mean, hi - mean


def log_edges(lo: float, hi: float, per_decade: int) -> List[float]:
    """Log-spaced bin edges over ``[lo, hi]`` from the decade below ``lo``."""
    return _engine.log_edges(float(lo), float(hi), int(per_decade))


def log_bins(values, counts=None, per_decade: int = 10) -> List[Tuple[float, float, int]]:
    """Counts at ``values`` re-binned into log bins: ``(lo, hi, count)`` of the non-empty bins."""
    values = [float(v) for v in values]
    counts = [1] * len(values) if counts is None else [int(c) for c in counts]
    return _engine.log_bins(values, counts, int(per_decade))


def _list(xs, kind):
    return xs.tolist() if hasattr(xs, "tolist") else [kind(x) for x in xs]


def ks_two_sample(a_values, a_counts, b_values, b_counts) -> Tuple[float, float]:
    """``(D, p)`` of the two-sample Kolmogorov–Smirnov test of two histograms (values in
    strictly increasing order, their counts): the engine's statistic and its asymptotic p-value
    with Stephens' small-sample correction (as ``nflab compare``)."""
    return _engine.ks_two_sample(_list(a_values, int), _list(a_counts, int), _list(b_values, int), _list(b_counts, int))


def ks_exponential(samples, mean: float) -> Tuple[float, float]:
    """``(D, p)`` of the one-sample KS test of ``samples`` against the exponential with this
    mean (p optimistic when the mean was estimated from the same samples)."""
    return _engine.ks_exponential(_list(samples, float), float(mean))


def autocorrelation(values, max_lag: int) -> List[float]:
    """r_1 … r_L, L = min(max_lag, n − 1): the biased estimator (R's ``acf``)."""
    return _engine.autocorrelation(_list(values, float), int(max_lag))


def max_abs_autocorrelation(values, max_lag: int) -> float:
    """The largest |r_k| over lags 1 … max_lag."""
    return _engine.max_abs_autocorrelation(_list(values, float), int(max_lag))


def periodicity(minutes, offsets, horizon: int, max_lag: int, top: int) -> List[float]:
    """Seed 003's periodicity metric per device: the sum of the ``top`` largest
    autocorrelations (lags 1 … max_lag) of its 0/1 per-minute activity over ``horizon``
    minutes; device i was active in ``minutes[offsets[i]:offsets[i + 1]]``."""
    return _engine.periodicity(_list(minutes, int), _list(offsets, int), int(horizon), int(max_lag), int(top))


def parse_anomaly(spec: str) -> Tuple[str, int, Optional[int]]:
    """``"2:250us"`` → ``("2:250000ns", 2, 250000)``, the engine's parse (``t_ns`` is None for
    a relative threshold such as ``p50*3``). Raises ``ValueError`` naming what is wrong."""
    return _engine.parse_anomaly(str(spec))


# -- DataFrames of the summary's tables ------------------------------------

def _frame(rows: List[Dict[str, Any]], schema: Dict[str, Any]):
    import polars as pl

    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def windows_frame(summary: Dict[str, Any]):
    """``summary["windows"]`` (analyse with ``window=...``) as a polars DataFrame."""
    import polars as pl

    cols = {"index": pl.UInt64, "start_ns": pl.UInt64, "end_ns": pl.UInt64, "packets": pl.UInt64, "lost": pl.UInt64,
            "loss_ratio": pl.Float64, "min_ns": pl.Int64, "mean_ns": pl.Float64, "p50_ns": pl.Int64, "p99_ns": pl.Int64,
            "max_ns": pl.Int64}
    return _frame([{k: w.get(k) for k in cols} for w in summary.get("windows") or []], cols)


def anomalies_frame(summary: Dict[str, Any]):
    """Every listed anomaly event of every definition (``anomaly_details[*].events``), one row
    each, with its definition (``spec``, ``n``, ``t_ns``)."""
    import polars as pl

    cols = {"spec": pl.Utf8, "n": pl.UInt32, "t_ns": pl.UInt64, "flow": pl.UInt16, "start_seq": pl.UInt64,
            "start_tx_ns": pl.UInt64, "packets": pl.UInt64, "lost": pl.UInt64, "duration_ns": pl.UInt64,
            "peak_ns": pl.Int64, "peak_tx_ns": pl.UInt64}
    rows = []
    for d in summary.get("anomaly_details") or []:
        for e in d.get("events") or []:
            rows.append({"spec": d["spec"], "n": d["n"], "t_ns": d["t_ns"], **{k: e.get(k) for k in list(cols)[3:]}})
    return _frame(rows, cols)


def worst_frame(summary: Dict[str, Any]):
    """``summary["worst"]`` (analyse with ``worst=N``) as a polars DataFrame."""
    import polars as pl

    rows = summary.get("worst") or []
    return pl.DataFrame(rows) if rows else pl.DataFrame()


def quantiles_frame(summary: Dict[str, Any]):
    """``summary["latency_quantiles"]``: ``p``, ``ns`` and ``lower_ns`` (the HDR error interval)."""
    import polars as pl

    cols = {"p": pl.Float64, "ns": pl.Int64, "lower_ns": pl.Int64}
    return _frame([{k: q.get(k) for k in cols} for q in summary.get("latency_quantiles") or []], cols)


def flows_frame(summary: Dict[str, Any]):
    """``summary["flows"]`` flattened (``packets.received``, ``latency_ns.p99`` with ``per_flow=True``)."""
    import polars as pl

    rows = []
    for f in summary.get("flows") or []:
        row = {"flow": f.get("flow"), "loss_ratio": f.get("loss_ratio"), "late": f.get("late")}
        for k, v in (f.get("packets") or {}).items():
            row[f"packets.{k}"] = v
        for k, v in (f.get("latency_ns") or {}).items():
            row[f"latency_ns.{k}"] = v
        rows.append(row)
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
