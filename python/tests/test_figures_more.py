"""windows, anomalies, ipg and model: known answers on hand-built data, and agreement with
the Rust report's CSVs of fixtures/tiny (rendered with anomaly specs 2:250us and 2:6us)."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

import nflab
from nflab import plots

from conftest import SPEC

import matplotlib  # noqa: E402  (the test extras install it)
matplotlib.use("Agg")

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


def rows(name):
    with open(TINY / "figures" / name, newline="") as f:
        return list(csv.DictReader(f))


def tree(tmp_path, recs, anomalies=("3:100us",), rate=1000, pattern="cbr", name="000"):
    """A one-run tree from (seq, tx_ns, latency_ns) tuples, no warm-up."""
    exp = tmp_path / "exp"
    rd = exp / "runs" / name
    rd.mkdir(parents=True, exist_ok=True)
    (exp / "spec.toml").write_text(SPEC)
    (rd / "params.json").write_text(json.dumps({"run": name, "dut": {"kind": "loopback"},
                                                 "traffic": {"pattern": pattern, "rate_pps": rate},
                                                 "analysis": {"anomalies": list(anomalies)}, "sweep": {}}))
    t0 = 1_000_000_000_000
    nflab.write_records(rd / "records.nfr", [(s, 0, t0 + tx, t0 + tx + lat) for s, tx, lat in recs],
                        trailer={"sent": [{"flow": 0, "sent": max(s for s, _, _ in recs) + 1, "warmup": 0}]})
    return exp


# -- windows ---------------------------------------------------------------

def test_windows_known_p99_and_max(tmp_path):
    # Window 0 (0–1 s): latencies 1..100 µs → p99 = 99 µs, max 100 µs. Window 2 (2–3 s): 5 and 7 µs.
    recs = [(i, i * 5_000_000, (i + 1) * 1000) for i in range(100)]
    lat100 = recs[99]
    recs = recs[:99] + [(99, 999_000_000, lat100[2])]
    recs += [(100, 2_100_000_000, 7000), (101, 2_500_000_000, 5000)]
    exp = nflab.load(tree(tmp_path, recs))
    w = plots.window_series(exp, window_s=1.0)
    (run, win), = w.values()
    assert [(s, p99, mx, k) for s, _, p99, mx, k in win] == [(0, 99_000, 100_000, 100), (2_000_000_000, 7000, 7000, 2)]
    fig = plots.windows(exp, window_s=1.0)
    p99_line, max_line = fig.axes[0].lines
    assert list(p99_line.get_xdata()) == [0.5, 2.5]
    assert list(p99_line.get_ydata()) == [99_000, 7000] and list(max_line.get_ydata()) == [100_000, 7000]
    # Half-second windows: seqs 0..98 (tx < 0.5 s), seq 99 at 0.999 s, then 2.1 s and 2.5 s.
    (_, half), = plots.window_series(exp, window_s=0.5).values()
    assert [(s, mx, k) for s, _, _, mx, k in half] == [(0, 99_000, 99), (500_000_000, 100_000, 1),
                                                        (2_000_000_000, 7000, 1), (2_500_000_000, 5000, 1)]


def test_windows_match_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("windows.csv")
    assert rust
    win_ns = int(rust[0]["window_ns"])
    # The default window is the report's.
    assert exp.window_ns == win_ns
    for r, mine in plots.window_series(exp).values():
        theirs = [x for x in rust if x["run"] == r.name]
        assert len(theirs) == len(mine) > 10
        for m, x in zip(mine, theirs):
            assert m[0] == round(float(x["window_start_s"]) * 1e9)
            assert (m[1], m[2], m[3], m[4]) == (float(x["p50_ns"]), float(x["p99_ns"]), float(x["max_ns"]), int(x["packets"]))


# -- anomalies -------------------------------------------------------------

def test_one_known_anomaly(tmp_path):
    # 1 ms CBR; seqs 10..13 at 200 µs (one anomaly of 4, from tx 10 ms to the last send at 13 ms);
    # seqs 20, 21 high but only 2 < n = 3; seqs 30, 31 high, 32 lost, 33, 34 high: the loss breaks it.
    recs = []
    for s in range(50):
        if s == 32:
            continue
        high = s in (10, 11, 12, 13, 20, 21, 30, 31, 33, 34)
        recs.append((s, s * 1_000_000, 200_000 if high else 5_000))
    exp = nflab.load(tree(tmp_path, recs))
    tab = plots.anomaly_table(exp)
    assert [(a["start_seq"], a["packets"], a["t0_ns"], a["duration_ns"], a["max_ns"]) for a in tab] == \
        [(10, 4, 10_000_000, 3_000_000, 200_000)]
    fig = plots.anomalies(exp)
    bars = fig.axes[0].patches
    assert len(bars) == 1
    b = bars[0]
    assert b.get_x() == pytest.approx(0.010) and b.get_width() == pytest.approx(0.003)
    assert b.get_y() < 3_000_000 < b.get_y() + b.get_height()
    assert "1 found" in fig.axes[0].get_title(loc="left")


def test_open_run_at_the_end_counts_and_flows_are_separate(tmp_path):
    # flow 0: seqs 0..2 at latency 1, 9, 9 ns (an anomaly open at the end); flow 1: 9, 9, 1.
    p = tmp_path / "f.nfr"
    nflab.write_records(p, [(0, 0, 100, 101), (0, 1, 105, 114), (1, 0, 110, 119), (1, 1, 115, 124),
                            (2, 0, 120, 129), (2, 1, 125, 126)],
                        trailer={"sent": [{"flow": 0, "sent": 3, "warmup": 0}, {"flow": 1, "sent": 3, "warmup": 0}]})
    ev = nflab.engine.anomalies_frame(nflab.analyze(p, anomalies=["2:9ns"]).summary).sort("flow")
    assert ev.select("flow", "start_seq", "packets", "start_tx_ns", "duration_ns").rows() == [(0, 1, 2, 110, 10), (1, 0, 2, 105, 10)]
    assert nflab.engine.parse_anomaly("2:250us") == ("2:250000ns", 2, 250_000)
    assert nflab.engine.parse_anomaly("3:1.5ms:gt")[1:] == (3, 1_500_000)
    assert nflab.engine.parse_anomaly("2:p50*3")[2] is None
    with pytest.raises(ValueError, match="invalid anomaly spec"):
        nflab.engine.parse_anomaly("junk")


def test_anomalies_match_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("anomalies.csv")
    assert len(rust) >= 5, "fixture should hold anomalies for 2:6us"
    mine = plots.anomaly_table(exp)
    assert len(mine) == len(rust)
    key = lambda x: (x[0], x[1])  # noqa: E731
    m = sorted(((a["run"], a["t0_ns"], a["duration_ns"], a["packets"], a["max_ns"]) for a in mine), key=key)
    r = sorted(((x["run"], round(float(x["start_s"]) * 1e9), int(x["duration_ns"]), int(x["packets"]),
                 int(x["max_latency_ns"])) for x in rust), key=key)
    assert m == r


# -- ipg -------------------------------------------------------------------

def test_ipg_from_selfcheck(tmp_path):
    exp_dir = tree(tmp_path, [(s, s * 100_000, 5000) for s in range(10)], rate=10_000)
    (exp_dir / "runs" / "000" / "gen.json").write_text(json.dumps({"selfcheck": {
        "configured_ipg_ns": 100000.0, "ipg_mse_ns2": 2.5e7, "histogram_width_ns": 1000,
        "histogram": [{"lo_ns": 99000, "count": 10}, {"lo_ns": 100000, "count": 80}, {"lo_ns": 101000, "count": 10}]}}))
    exp = nflab.load(exp_dir)
    h, = plots.ipg_histograms(exp)
    # Midpoints 99.5, 100.5, 101.5 µs → log bins [79.4, 100) µs: 10 and [100, 125.9) µs: 90.
    assert h["source"].startswith("gen.json") and h["mse_ns2"] == 2.5e7
    assert [(round(lo), round(hi), c) for lo, hi, c in h["bins"]] == [(79433, 100000, 10), (100000, 125893, 90)]
    fig = plots.ipg(exp)
    assert "2.5e+07" in fig.axes[0].get_title(loc="left")
    heights = sorted(float(p.get_data()[0][0]) for p in fig.axes[0].patches)
    assert heights == [0.1, 0.9]


def test_ipg_from_cbr_records_matches_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("ipg.csv")
    mine = [(h["config"], round(lo, 2), b, c, h["mse_ns2"]) for h in plots.ipg_histograms(exp) for lo, _, c in h["bins"] for b in [h["source"]]]
    theirs = [(x["config"], round(float(x["bin_lo_ns"]), 2), x["source"], int(x["count"]), float(x["mse_ns2"])) for x in rust]
    assert mine == theirs


# -- model -----------------------------------------------------------------

def test_model_points_and_diagonal(tmp_path):
    exp_dir = tree(tmp_path, [(s, s * 1000, 5000) for s in range(5)])
    (exp_dir / "runs" / "000" / "summary.json").write_text(json.dumps({"latency_ns": {"p50": 5000, "mean": 5200, "p99": 9000}}))
    (exp_dir / "model.json").write_text(json.dumps({"predictions": [{"run": "000", "p50_ns": 4000, "mean_ns": 6000, "max_ns": 1e6},
                                                                    {"run": "999", "p50_ns": 1}]}))
    exp = nflab.load(exp_dir)
    pts = plots.model_points(exp)
    assert [(p["metric"], p["predicted_ns"], p["measured_ns"]) for p in pts] == [("p50_ns", 4000, 5000), ("mean_ns", 6000, 5200)]
    fig = plots.model(exp)
    diag, p50, mean = fig.axes[0].lines
    assert list(diag.get_xdata()) == list(diag.get_ydata())
    assert diag.get_xdata()[0] <= 4000 and diag.get_xdata()[-1] >= 6000
    assert (p50.get_xdata()[0], p50.get_ydata()[0]) == (4000, 5000)
    assert (mean.get_xdata()[0], mean.get_ydata()[0]) == (6000, 5200)
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_yscale() == "log"
    # A per-run model.json wins over the top-level one.
    (exp_dir / "runs" / "000" / "model.json").write_text(json.dumps({"p99_ns": 8000}))
    assert [(p["metric"], p["predicted_ns"]) for p in plots.model_points(nflab.load(exp_dir))] == [("p99_ns", 8000)]


def test_cli_all_skips_what_does_not_apply(tmp_path):
    from nflab.__main__ import main

    exp_dir = tree(tmp_path, [(s, s * 1000, 5000) for s in range(5)], anomalies=())
    out = tmp_path / "figs"
    assert main(["plot", str(exp_dir), "all", "-o", str(out)]) == 0
    made = {p.stem for p in out.iterdir()}
    assert "model" not in made and "anomalies" not in made and {"windows", "ipg", "hdr"} <= made
    # One run, nothing swept: neither a sweep nor a throughput figure, as in the report.
    assert "sweep" not in made and "throughput" not in made
