import pytest

import nflab


def test_frames_polars_and_pandas(experiment):
    exp = nflab.load(experiment)
    assert len(exp.runs) == 8 and exp.problems == []
    assert exp.sweep_keys == ["dut.kind", "traffic.rate_pps"]
    s = exp.summaries()
    assert s.height == 8
    assert set(s["config"].to_list()) == {"loopback · 10 kpps", "loopback · 20 kpps", "linux-router · 10 kpps", "linux-router · 20 kpps"}
    assert "latency_ns.p99" in s.columns and "anomalies.0.count" in s.columns
    sp = exp.summaries(backend="pandas")
    assert len(sp) == 8 and sp["param.traffic.rate_pps"].tolist()[:2] == [10000, 10000]
    r = exp.results()
    assert r.height == 8 and "latency_p99_ns" in r.columns
    assert len(exp.results(backend="pandas")) == 8


def test_records_exclude_warmup_and_agree_with_the_summary(experiment):
    exp = nflab.load(experiment)
    df = exp.records("000")
    assert df.height == 5000 - 500  # 10 kpps × 0.5 s, 500 warm-up
    assert df["seq"].min() == 500
    assert df["t_s"][0] == 0.0
    # The engine's p99 of the run is the nearest-rank p99 conftest computed on its own.
    assert exp.analysis("000").summary["latency_ns"]["p99"] == exp.run("000").summary["latency_ns"]["p99"]
    assert exp.analysis("000").summary["packets"]["received"] == df.height
    assert exp.records(warmup=True).height == sum(int(r.sweep["traffic.rate_pps"]) // 2 for r in exp.runs)
    assert len(exp.records("001", backend="pandas")) == 4500


def test_results_fall_back_to_summaries(experiment):
    (experiment / "results.parquet").unlink()
    r = nflab.load(experiment).results()
    assert r.height == 8 and "latency_ns.p50" in r.columns


def test_damaged_tree_is_described(damaged):
    exp = nflab.load(damaged)
    probs = "\n".join(exp.problems)
    assert "run 008: no packet was received" in probs
    assert "run 009: summary.json is missing" in probs
    assert "run 009: records.nfr ends early" in probs
    assert "run 010: params.json is missing" in probs
    assert exp.records("008").height == 0
    assert exp.records("009").height > 0  # what was written before the cut
    assert exp.summaries().height == 11


def test_not_an_experiment(tmp_path):
    with pytest.raises(nflab.NotAnExperiment, match="not an nflab experiment directory"):
        nflab.load(tmp_path)
