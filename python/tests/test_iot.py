"""nflab.iot: the generator, the seed-003 pipeline on polars and on Spark
(local mode), each checked against a known answer: hand-built dialogs, a
directly summed autocorrelation, the generator's own dialog counts and its
planted device classes."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from nflab.iot import classify, generate, polars_engine
from nflab.iot import schema as S
from nflab.iot.generate import T0_MS, Population

PY = Path(__file__).resolve().parents[1]


def _msgs(rows):
    """(device, second, op, dir, result) -> a message frame."""
    return pl.DataFrame(
        {
            "device": [r[0] for r in rows],
            "t_ms": [T0_MS + int(r[1] * 1000) for r in rows],
            "op": [r[2] for r in rows],
            "dir": [r[3] for r in rows],
            "result": [r[4] for r in rows],
        },
        schema={"device": pl.UInt32, "t_ms": pl.Int64, "op": pl.UInt8, "dir": pl.UInt8, "result": pl.UInt8},
    )


# Every rule of the dialog assembly once, with the dialog type it must give.
CASES = [
    ([(56, 0, 0), (56, 1, 0)], "SAI"),
    ([(2, 0, 0), (7, 0, 0), (7, 1, 0), (7, 0, 0), (7, 1, 0), (2, 1, 0)], "UL"),
    ([(23, 0, 0), (7, 0, 0), (2, 1, 0)], "UL_GPRS_ERROR"),  # ISD unanswered, a UL answer that does not belong
    ([(2, 0, 0), (7, 0, 0), (2, 1, 0)], "UL_ERROR"),  # ISD unanswered
    ([(16, 0, 0), (17, 1, 2)], "PDP_CREATE_REJECT"),
    ([(16, 0, 0), (17, 1, 1)], "PDP_CREATE_ERROR"),
    ([(20, 0, 0)], "PDP_DELETE_ERROR"),  # never answered
    ([(18, 0, 0), (19, 1, 0), (19, 1, 0)], "PDP_UPDATE_ERROR"),  # answered twice
    ([(3, 0, 0), (21, 1, 0)], "CL_ERROR"),  # a foreign answer
    ([(3, 0, 0), (3, 1, 0)], "CL"),
]


def _case_messages():
    rows, expected, t = [], [], 0.0
    # Device 5 starts with an orphan answer: OTHER.
    rows.append((5, t, 56, 1, 0))
    expected.append((5, "OTHER"))
    for dev in (5, 9):
        for msgs, typ in CASES:
            t += 10
            for i, (op, d, res) in enumerate(msgs):
                rows.append((dev, t + 0.05 * i, op, d, res))
            expected.append((dev, typ))
    return _msgs(rows), expected


def test_dialog_assembly_on_hand_built_dialogs():
    msgs, expected = _case_messages()
    # Shuffled rows: the plan sorts by device and time itself.
    got = polars_engine.dialogs_plan(msgs.sample(fraction=1.0, shuffle=True, seed=3).lazy()).collect().sort("device", "t_ms")
    assert list(zip(got["device"].to_list(), got["type"].to_list())) == expected


def _naive_periodicity(x, max_lag):
    x = np.asarray(x, float) - np.mean(x)
    den = np.sum(x * x)
    r = [np.sum(x[: x.size - k] * x[k:]) / den for k in range(1, max_lag + 1)]
    return float(np.sum(np.sort(r)[-3:]))


def test_periodicity_against_a_direct_sum():
    rng = np.random.default_rng(4)
    horizon = 2000
    series = {
        0: np.arange(7, horizon, 15),  # period 15: r ≈ 1 at 15, 30, 45 (the seed's Fig. 4.3 example)
        1: np.sort(rng.choice(horizon, 120, replace=False)),  # no period
        2: np.unique(np.concatenate([np.arange(3, horizon, 60), rng.choice(horizon, 30)])),
        3: np.array([100]),  # one active minute
    }
    devs = np.concatenate([np.full(m.size, d) for d, m in series.items()])
    mins = np.concatenate(list(series.values()))
    got_devs, got = classify.periodicity(devs, mins, horizon)
    assert got_devs.tolist() == [0, 1, 2, 3]
    for d, m in series.items():
        x = np.zeros(horizon)
        x[m] = 1
        assert got[d] == pytest.approx(_naive_periodicity(x, 1500), abs=1e-9)
    assert got[0] > 2.5 and got[1] < 0.5


def test_elbow_picks_the_knee():
    w = {1: 3000, 2: 1900, 3: 870, 4: 48, 5: 10, 6: 6.5, 7: 5.6, 8: 4.7, 9: 4.1, 10: 3.8}
    assert classify.elbow(w) == 5
    assert classify.elbow({1: 10.0, 2: 10.0, 3: 10.0}) == 1


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    d = tmp_path_factory.mktemp("iot") / "pop"
    info = generate(Population(devices=400, days=14, seed=7, devices_per_file=150), d)
    return d, info


@pytest.fixture(scope="module")
def polars_result(population):
    d, _ = population
    return polars_engine.analyze(d, d / "polars", chunk_devices=130)


def test_polars_pipeline_recovers_the_planted_population(population, polars_result):
    d, info = population
    r = polars_result
    # Dialog assembly against the generator's own count of dialogs by outcome.
    outcome = {"SUCCESS": 0, "ERROR": 0, "REJECT": 0}
    for typ, n in r["dialog_types"].items():
        outcome["REJECT" if typ.endswith("_REJECT") else "ERROR" if typ.endswith("_ERROR") else "SUCCESS"] += n
    assert outcome == info["dialogs"]
    assert r["messages"] == info["messages"]
    assert r["kmeans"]["k"] == 5 and r["kmeans"]["k_by"] == "elbow"
    assert r["truth"]["adjusted_rand_index"] >= 0.9
    assert r["truth"]["named_as_planted"] >= 0.9
    assert r["truth"]["sync_accuracy"] >= 0.9
    # Periodic devices' sequences come every 30/60/120 min, Poisson ones do not: KS tells them apart.
    ks = {(t["a"], t["b"]): t for t in r["ks_inter_sequence"]}
    assert ks[("non_periodic", "periodic")]["p_value"] < 1e-6
    # The seed's finding: the non-synchronised superposition is exponential, the synchronised one is not.
    arr = r["arrivals_pdp_create"]
    assert arr["synchronised"]["ks_p_value"] < 1e-6
    assert arr["non_synchronised"]["ks_statistic"] < arr["synchronised"]["ks_statistic"] / 3
    dens = r["synchronisation"]["minute_of_hour_density"]["synchronised"]
    assert max(dens) > 3 / 60 and sum(dens) == pytest.approx(1)
    f = pl.read_parquet(d / "polars" / "features.parquet")
    assert f.height == 400 and set(f["class"]) == set(S.CLASSES)
    assert json.loads((d / "polars" / "analysis.json").read_text())["devices"] == 400
    assert not (d / "polars" / "work").exists()


def test_polars_result_does_not_depend_on_the_chunk_size(population, polars_result, tmp_path):
    d, _ = population
    r = polars_engine.analyze(d, tmp_path / "one", chunk_devices=1000)
    a = pl.read_parquet(d / "polars" / "features.parquet")
    b = pl.read_parquet(tmp_path / "one" / "features.parquet")
    assert a.drop("pc1", "pc2", "cluster").equals(b.drop("pc1", "pc2", "cluster"))
    assert r["dialog_types"] == polars_result["dialog_types"] and r["top_sequences"] == polars_result["top_sequences"]


def test_cli_generate_and_bad_input(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "nflab.iot", *a], cwd=tmp_path, capture_output=True, text=True)
    p = run("generate", str(tmp_path / "p"), "--devices", "20", "--days", "1")
    assert p.returncode == 0, p.stderr
    assert pl.read_parquet(tmp_path / "p" / "devices.parquet").height == 20
    p = run("analyze", str(tmp_path / "nothing"))
    assert p.returncode == 2 and "messages is not a directory" in p.stderr
    p = run("generate", str(tmp_path / "q"), "--mix", "sleepy=1")
    assert p.returncode == 2 and "unknown class 'sleepy'" in p.stderr


@pytest.fixture(scope="module")
def spark():
    from nflab.iot import spark_engine

    s = spark_engine.session("local[2]")
    yield s
    s.stop()


def test_spark_dialog_assembly_on_hand_built_dialogs(spark):
    from nflab.iot import spark_engine

    msgs, expected = _case_messages()
    got = spark_engine.dialogs_frame(spark.createDataFrame(msgs.to_pandas())).orderBy("device", "t_ms").collect()
    assert [(r.device, r.type) for r in got] == expected


def test_spark_pipeline_matches_polars(population, polars_result, spark):
    from nflab.iot import spark_engine

    d, _ = population
    r = spark_engine.analyze(d, d / "spark", spark=spark)
    assert r["truth"]["adjusted_rand_index"] >= 0.9
    assert r["kmeans"]["k"] == 5
    assert r["dialog_types"] == polars_result["dialog_types"]
    assert r["sequences"] == polars_result["sequences"]
    assert {t["pattern"]: t["count"] for t in r["top_sequences"]} == {t["pattern"]: t["count"] for t in polars_result["top_sequences"]}
    a = pl.read_parquet(d / "polars" / "features.parquet")
    b = pl.read_parquet(d / "spark" / "features.parquet")
    assert a["device"].to_list() == b["device"].to_list()
    for c in ("dialogs", "sequences", "pdp_create", "synchronised"):
        assert a[c].to_list() == b[c].to_list(), c
    for c in ("error_rate", "reject_rate", "periodicity"):
        np.testing.assert_allclose(a[c].to_numpy(), b[c].to_numpy(), atol=1e-12)
    ks_a = {(t["a"], t["b"]): t["statistic"] for t in polars_result["ks_inter_sequence"]}
    ks_b = {(t["a"], t["b"]): t["statistic"] for t in r["ks_inter_sequence"]}
    assert ks_a.keys() == ks_b.keys()


def test_exponential_fit_quantiles_are_the_engines_nearest_rank():
    """Gaps of 1..10 s (shuffled): the mean 5.5 s and the 10..90 % quantiles by nearest rank
    (rank ⌈q·10⌉: 1, 2, …, 9 s), as the engine defines percentiles everywhere."""
    from nflab.iot import classify

    gaps_s = [3, 7, 1, 10, 5, 2, 9, 4, 8, 6]
    times_ms = np.cumsum([0] + [g * 1000 for g in gaps_s])
    r = classify.exponential_fit(times_ms)
    assert r["n"] == 10 and r["mean_s"] == 5.5
    assert r["empirical_s"] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]
