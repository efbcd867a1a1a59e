"""What both engines share after the per-device features: the periodicity
metric, the elbow, the cluster names and the KS tests (seed 003 §4.2.4–4.2.5).

k-means and PCA are scikit-learn's (the polars engine) or Spark MLlib's (the
Spark engine); the autocorrelations and KS tests are nflab's engine
(``nflab_analyze::{acf, ks}``), as every statistic nflab reports.
"""

from __future__ import annotations

import numpy as np

from .. import engine
from . import schema as S

FEATURES = ("error_rate", "reject_rate", "periodicity")


def periodicity(devices, minutes, horizon_min, max_lag=S.ACF_MAX_LAG, top=S.ACF_TOP):
    """Sum of the ``top`` largest autocorrelations over lags 1..max_lag of each
    device's per-minute activity series (1 when the device has a dialog in the
    minute). ``devices`` and ``minutes`` are parallel arrays of the active
    (device, minute) pairs, sorted by device; returns (unique devices, P).

    The autocorrelation is the usual biased estimator (as R's ``acf``):
    r_k = Σ (x_t − x̄)(x_{t+k} − x̄) / Σ (x_t − x̄)², the engine's
    (``nflab_analyze::acf::periodicity``, exact from the active minutes alone).
    A device whose series is constant has P = 0.
    """
    devices = np.asarray(devices)
    minutes = np.asarray(minutes, dtype=np.int64)
    uniq, starts = np.unique(devices, return_index=True)
    offsets = np.append(starts, devices.size)
    return uniq, np.asarray(engine.periodicity(minutes, offsets, horizon_min, max_lag, top))


def elbow(inertias: dict) -> int:
    """The k at the elbow of the within-cluster sum of squares W(k): the point
    farthest below the chord from the first to the last k, on log W (W falls by
    orders of magnitude when the clusters are well apart) with both axes scaled
    to [0, 1]."""
    ks = np.array(sorted(inertias))
    w = np.log(np.maximum(np.array([inertias[k] for k in ks], dtype=float), 1e-12))
    if ks.size < 3 or w[0] <= w[-1]:
        return int(ks[0])
    x = (ks - ks[0]) / (ks[-1] - ks[0])
    y = (w - w[-1]) / (w[0] - w[-1])
    return int(ks[np.argmax((1 - x) - y)])


def name_clusters(centroids: np.ndarray) -> list:
    """Names of k-means clusters from their centroids over FEATURES: with k = 5
    the seed's classes (high reject, high error, then by periodicity non-,
    semi- and periodic); otherwise ``cluster_<i>``."""
    k = centroids.shape[0]
    if k != 5:
        return [f"cluster_{i}" for i in range(k)]
    names = [None] * k
    rej = int(np.argmax(centroids[:, 1]))
    names[rej] = "high_reject"
    rest = [i for i in range(k) if i != rej]
    err = max(rest, key=lambda i: centroids[i, 0])
    names[err] = "high_error"
    rest = sorted((i for i in rest if i != err), key=lambda i: centroids[i, 2])
    for i, n in zip(rest, ("non_periodic", "semi_periodic", "periodic")):
        names[i] = n
    return names


def ks_between(hists: dict) -> list:
    """Two-sided KS tests (the engine's, asymptotic p-value with Stephens'
    correction) of the inter-sequence times between every pair of classes;
    ``hists`` maps a class to (gap minutes, counts)."""
    h = {}
    for c, (v, n) in hists.items():
        v, n = np.asarray(v, dtype=np.int64), np.asarray(n, dtype=np.int64)
        keep = n > 0
        v, n = v[keep], n[keep]
        order = np.argsort(v, kind="stable")
        v, n = v[order], n[order]
        # One count per value (a histogram may list a value twice).
        uv, first = np.unique(v, return_index=True)
        h[c] = (uv, np.add.reduceat(n, first) if n.size else n)
    names = sorted(c for c, (_, n) in h.items() if n.sum() > 0)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            d, p = engine.ks_two_sample(*h[a], *h[b])
            out.append({"a": a, "b": b, "n_a": int(h[a][1].sum()), "n_b": int(h[b][1].sum()),
                        "statistic": d, "p_value": p})
    return out


def exponential_fit(times_ms) -> dict | None:
    """The aggregated arrival process of a set of devices: interarrival times of
    the superposition against an exponential of the same mean (the engine's one-sample
    KS; the mean is estimated, so the p-value is optimistic), the 10–90 %
    quantiles of both (the seed's Q-Q plot; the empirical ones nearest-rank, from
    the engine) and the largest |ACF| of the
    interarrival times over lags 1..1000."""
    t = np.sort(np.asarray(times_ms, dtype=np.int64))
    if t.size < 3:
        return None
    gaps_ms = np.diff(t)
    # The mean and the empirical quantiles are the engine's (exact, nearest rank).
    d = engine.distribution(exact_limit=max(int(gaps_ms.size), 1 << 24))
    d.record_many(gaps_ms.tolist())
    mean = d.mean() / 1000.0
    if mean <= 0:
        return None
    gaps = gaps_ms / 1000.0
    ks_d, ks_p = engine.ks_exponential(gaps, mean)
    qs = np.arange(0.1, 0.91, 0.1)
    emp = np.array([d.percentile(round(100 * q, 6)) / 1000.0 for q in qs])
    fit = -mean * np.log1p(-qs)  # the exponential's quantile function
    acf_max = engine.max_abs_autocorrelation(gaps, 1000)
    return {"n": int(gaps.size), "mean_s": mean, "ks_statistic": ks_d, "ks_p_value": ks_p,
            "quantiles": [float(q) for q in qs], "empirical_s": emp.tolist(), "exponential_s": fit.tolist(),
            "acf_max_abs_1_1000": acf_max}


def synchronised(n_sequences, max_density):
    """Seed 003 §4.2.5: True/False for devices with at least 30 sequences, else None."""
    if n_sequences < S.SYNC_MIN_SEQUENCES or max_density is None or np.isnan(max_density):
        return None
    return bool(max_density >= S.SYNC_DENSITY)
