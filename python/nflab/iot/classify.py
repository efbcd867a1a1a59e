"""What both engines share after the per-device features: the periodicity
metric, the elbow, the cluster names and the KS tests (seed 003 §4.2.4–4.2.5).

k-means and PCA are scikit-learn's (the polars engine) or Spark MLlib's (the
Spark engine); the KS tests are scipy's.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from .. import engine
from . import schema as S

FEATURES = ("error_rate", "reject_rate", "periodicity")


def periodicity(devices, minutes, horizon_min, max_lag=S.ACF_MAX_LAG, top=S.ACF_TOP, batch=128):
    """Sum of the ``top`` largest autocorrelations over lags 1..max_lag of each
    device's per-minute activity series (1 when the device has a dialog in the
    minute). ``devices`` and ``minutes`` are parallel arrays of the active
    (device, minute) pairs, sorted by device; returns (unique devices, P).

    The autocorrelation is the usual biased estimator (as R's ``acf``):
    r_k = Σ (x_t − x̄)(x_{t+k} − x̄) / Σ (x_t − x̄)², computed with a zero-padded FFT.
    A device whose series is constant has P = 0.
    """
    devices = np.asarray(devices)
    minutes = np.asarray(minutes, dtype=np.int64)
    uniq, starts = np.unique(devices, return_index=True)
    ends = np.append(starts[1:], devices.size)
    lags = min(max_lag, horizon_min - 1)
    nfft = 1 << int(np.ceil(np.log2(horizon_min + lags + 1)))
    out = np.zeros(uniq.size)
    for b in range(0, uniq.size, batch):
        rows = slice(b, min(b + batch, uniq.size))
        n_rows = rows.stop - rows.start
        x = np.zeros((n_rows, horizon_min), dtype=np.float64)
        for i, (s, e) in enumerate(zip(starts[rows], ends[rows])):
            x[i, minutes[s:e]] = 1.0
        x -= x.mean(axis=1, keepdims=True)
        f = np.fft.rfft(x, n=nfft, axis=1)
        ac = np.fft.irfft(f * np.conj(f), n=nfft, axis=1)[:, : lags + 1]
        var = ac[:, 0]
        ok = var > 1e-12
        r = np.zeros((n_rows, lags))
        r[ok] = ac[ok, 1:] / var[ok, None]
        k = min(top, lags)
        out[rows] = np.sort(r, axis=1)[:, -k:].sum(axis=1) if lags else 0.0
    return uniq, out


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
    """Two-sided KS tests (scipy) of the inter-sequence times between every pair
    of classes; ``hists`` maps a class to (gap minutes, counts)."""
    samples = {c: np.repeat(np.asarray(v, dtype=np.int32), np.asarray(n, dtype=np.int64)) for c, (v, n) in hists.items()}
    names = sorted(c for c, s in samples.items() if s.size)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            r = stats.ks_2samp(samples[a], samples[b], method="asymp")
            out.append({"a": a, "b": b, "n_a": int(samples[a].size), "n_b": int(samples[b].size),
                        "statistic": float(r.statistic), "p_value": float(r.pvalue)})
    return out


def exponential_fit(times_ms) -> dict | None:
    """The aggregated arrival process of a set of devices: interarrival times of
    the superposition against an exponential of the same mean (scipy's one-sample
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
    r = stats.kstest(gaps, "expon", args=(0, mean))
    qs = np.arange(0.1, 0.91, 0.1)
    emp = np.array([d.percentile(round(100 * q, 6)) / 1000.0 for q in qs])
    fit = stats.expon(scale=mean).ppf(qs)
    g = gaps - mean
    # Lag by lag (dot products of views): an FFT over the whole trace would need
    # ~30 bytes per interarrival time more, the one memory term that grows with it.
    den = float(np.dot(g, g))
    lags = range(1, min(1001, g.size))
    acf_max = max((abs(float(np.dot(g[:-k], g[k:]))) / den for k in lags), default=0.0) if den > 0 else 0.0
    return {"n": int(gaps.size), "mean_s": mean, "ks_statistic": float(r.statistic), "ks_p_value": float(r.pvalue),
            "quantiles": [float(q) for q in qs], "empirical_s": emp.tolist(), "exponential_s": fit.tolist(),
            "acf_max_abs_1_1000": acf_max}


def synchronised(n_sequences, max_density):
    """Seed 003 §4.2.5: True/False for devices with at least 30 sequences, else None."""
    if n_sequences < S.SYNC_MIN_SEQUENCES or max_density is None or np.isnan(max_density):
        return None
    return bool(max_density >= S.SYNC_DENSITY)
