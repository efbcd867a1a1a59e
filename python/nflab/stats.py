"""The statistics behind the figures, with the definitions of ``docs/metrics.md``."""

from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

import numpy as np


def quantile(sorted_values: np.ndarray, q: float) -> Optional[float]:
    """Nearest-rank quantile ``q`` in [0, 1] of ascending values: rank ``ceil(q·N)`` clamped to 1..N."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = min(max(int(math.ceil(q * n)), 1), n)
    return float(sorted_values[rank - 1])


def hdr_points(latencies: np.ndarray, per_decade: int = 40) -> Tuple[np.ndarray, np.ndarray]:
    """``(1/(1−p), latency)`` of an HDR percentile plot, as report.html draws it: 40 points per
    decade of 1/(1−p) below N, then the maximum at 1/(1−p) = N."""
    s = np.sort(np.asarray(latencies))
    n = len(s)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    k = np.arange(0, int(math.floor(per_decade * math.log10(n))) + 2)
    inv = 10.0 ** (k / per_decade)
    inv = inv[inv < n]
    q = 1.0 - 1.0 / inv
    ranks = np.clip(np.ceil(q * n).astype(np.int64), 1, n)
    x = np.append(inv, float(n))
    y = np.append(s[ranks - 1].astype(float), float(s[-1]))
    return x, y


def decimate(t: np.ndarray, v: np.ndarray, cols: int, span: Optional[float] = None) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Min/max of ``v`` per column of ``t`` over ``[0, span]``: (column start, min, max) for
    non-empty columns. One pass, so 10⁸ points cost seconds, and no spike falls between pixels."""
    t = np.asarray(t, dtype=np.float64)
    v = np.asarray(v)
    if len(t) == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    span = float(span if span is not None else t.max()) or 1.0
    w = span / cols
    c = np.minimum((t / w).astype(np.int64), cols - 1)
    v = v.astype(np.int64)
    if len(c) > 1 and np.any(c[1:] < c[:-1]):
        order = np.argsort(c, kind="stable")
        c, v = c[order], v[order]
    starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
    return c[starts] * w, np.minimum.reduceat(v, starts), np.maximum.reduceat(v, starts)


T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def mean_ci(xs: Sequence[float]) -> Tuple[float, Optional[float]]:
    """Mean and the half-width of its 95 % Student-t confidence interval (None for n < 2)."""
    x = np.asarray([v for v in xs if v is not None and not (isinstance(v, float) and math.isnan(v))], dtype=float)
    if len(x) == 0:
        return float("nan"), None
    m = float(x.mean())
    if len(x) < 2:
        return m, None
    df = len(x) - 1
    t = T975[df - 1] if df <= 30 else 1.96
    return m, float(t * x.std(ddof=1) / math.sqrt(len(x)))


def anomalies(seq: np.ndarray, lat: np.ndarray, n: int, t_ns: int) -> List[Tuple[int, int]]:
    """Anomalies of one flow: runs of ≥ n consecutive sequence numbers with latency ≥ t.
    Returns ``(first_index, length)`` into the seq-sorted arrays."""
    order = np.argsort(seq, kind="stable")
    s, l = np.asarray(seq)[order], np.asarray(lat)[order]
    out = []
    start, length = None, 0
    for i in range(len(s)):
        high = l[i] >= t_ns
        if high and start is not None and s[i] == s[i - 1] + 1:
            length += 1
            continue
        if start is not None and length >= max(n, 1):
            out.append((start, length))
        start, length = (i, 1) if high else (None, 0)
    if start is not None and length >= max(n, 1):
        out.append((start, length))
    return out


def windows(t_ns: np.ndarray, lat: np.ndarray, win_ns: int) -> List[Tuple[int, float, float, float, int]]:
    """Per time window of ``win_ns`` (by transmit time ``t_ns``, ns since the run's first measured
    packet): ``(window_start_ns, p50, p99, max, packets)`` of the non-empty windows, nearest rank,
    as the report's ``windows`` figure (``figures/windows.csv``)."""
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(lat, dtype=np.int64)
    if len(t) == 0:
        return []
    win_ns = max(int(win_ns), 1)
    w = t // win_ns
    order = np.argsort(w, kind="stable")
    w, v = w[order], v[order]
    starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
    ends = np.r_[starts[1:], len(w)]
    out = []
    for a, b in zip(starts, ends):
        s = np.sort(v[a:b])
        out.append((int(w[a]) * win_ns, quantile(s, 0.5), quantile(s, 0.99), float(s[-1]), int(b - a)))
    return out


def anomaly_events(seq, flow, t_ns, lat, n: int, t_thr_ns: int) -> List[dict]:
    """Anomalies of ``docs/metrics.md`` with their times, like the report's ``anomalies`` figure:
    per flow, in sequence order, maximal runs of consecutive received sequence numbers with
    latency ≥ ``t_thr_ns`` (a lost number ends a run; a run open at the end counts), length ≥ n.
    Each is a dict ``flow, t0_ns`` (first transmit), ``t1_ns`` (last arrival, tx + latency),
    ``duration_ns`` (= t1 − t0, at least 1), ``packets, start_seq, min_ns, max_ns``."""
    seq = np.asarray(seq, dtype=np.int64)
    flow = np.asarray(flow, dtype=np.int64)
    t = np.asarray(t_ns, dtype=np.int64)
    lat = np.asarray(lat, dtype=np.int64)
    order = np.lexsort((seq, flow))
    n = max(int(n), 1)
    out: List[dict] = []
    cur: Optional[dict] = None

    def close(c):
        if c is not None and c["packets"] >= n:
            c["duration_ns"] = max(c["t1_ns"] - c["t0_ns"], 1)
            out.append(c)

    last_seq = None
    for i in order:
        s, f, ti, li = int(seq[i]), int(flow[i]), int(t[i]), int(lat[i])
        high = li >= t_thr_ns
        if high and cur is not None and cur["flow"] == f and last_seq + 1 == s:
            cur["packets"] += 1
            cur["t0_ns"] = min(cur["t0_ns"], ti)
            cur["t1_ns"] = max(cur["t1_ns"], max(ti + li, ti))
            cur["min_ns"], cur["max_ns"] = min(cur["min_ns"], li), max(cur["max_ns"], li)
            last_seq = s
            continue
        close(cur)
        cur = None
        if high:
            cur = {"flow": f, "start_seq": s, "t0_ns": ti, "t1_ns": max(ti + li, ti), "packets": 1, "min_ns": li, "max_ns": li}
            last_seq = s
    close(cur)
    return out


def parse_anomaly(spec: str) -> Optional[Tuple[int, int]]:
    """``"2:250us"`` → ``(2, 250000)``; units ns, us/µs, ms, s (none = ns). Options after a
    second ``:`` are ignored. None if it does not parse."""
    try:
        n_s, t_s = str(spec).split(":", 1)
        t_s = t_s.split(":", 1)[0].strip()
        k = 0
        while k < len(t_s) and (t_s[k].isdigit() or t_s[k] == "."):
            k += 1
        mul = {"": 1.0, "ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}[t_s[k:].strip()]
        return int(n_s.strip()), int(round(float(t_s[:k]) * mul))
    except (ValueError, KeyError):
        return None


def log_bins(values, counts=None, per_decade: int = 10) -> List[Tuple[float, float, int]]:
    """Counts at ``values`` in log-spaced bins (``per_decade`` per decade; below 1 → first bin):
    ``(lo, hi, count)`` of the non-empty bins, ascending — the report's ``ipg`` re-binning."""
    v = np.maximum(np.asarray(values, dtype=float), 1.0)
    c = np.ones(len(v), dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)
    k = np.floor(np.log10(v) * per_decade).astype(np.int64)
    out = []
    for kk in np.unique(k):
        cnt = int(c[k == kk].sum())
        if cnt > 0:
            out.append((10.0 ** (kk / per_decade), 10.0 ** ((kk + 1) / per_decade), cnt))
    return out
