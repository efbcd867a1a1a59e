import numpy as np

from nflab import stats


def test_nearest_rank():
    v = np.arange(1, 101)
    assert stats.quantile(v, 0.5) == 50
    assert stats.quantile(v, 0.99) == 99
    assert stats.quantile(v, 0.0) == 1
    assert stats.quantile(v, 1.0) == 100
    assert stats.quantile(np.array([]), 0.5) is None


def test_hdr_points_match_the_report():
    lat = (np.arange(1000) * 7919) % 1000 + 1  # a permutation of 1..1000
    x, y = stats.hdr_points(lat)
    assert x[-1] == 1000 and y[-1] == 1000  # the max at 1/(1-p) = N
    assert y[np.isclose(x, 100)][0] == 990  # p99, rank 990
    assert y[np.isclose(x, 10)][0] == 900
    assert np.all(np.diff(x) > 0) and np.all(np.diff(y) >= 0)


def test_decimation_keeps_the_spike():
    t = np.arange(1_000_000, dtype=float)
    v = (np.arange(1_000_000) % 100).astype(np.int64)
    v[555_555] = 10_000
    c0, lo, hi = stats.decimate(t, v, 100, span=1_000_000)
    assert len(c0) == 100
    assert hi.max() == 10_000 and hi[55] == 10_000
    assert lo.min() == 0


def test_mean_ci_known_sample():
    m, h = stats.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and abs(h - 4.303 / np.sqrt(3)) < 1e-9
    assert stats.mean_ci([5.0]) == (5.0, None)


def test_anomalies_follow_metrics_md():
    seq = np.array([0, 1, 2, 3, 4, 5, 6, 7, 9])
    lat = np.array([0, 0, 9, 9, 9, 0, 9, 9, 9])
    assert stats.anomalies(seq, lat, 2, 5) == [(2, 3), (6, 2)]
    assert len(stats.anomalies(seq, lat, 1, 5)) == 3  # the lost seq 8 splits 7 from 9
