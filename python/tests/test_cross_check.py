"""The Python figures agree with the Rust report.

`fixtures/tiny` (33 KB) is a small artifact tree: two runs of 150 packets
written with `conftest.write_run`, then `cargo run -p nflab-report --example
render -- python/tests/fixtures/tiny`, keeping only `figures/{hdr,cdf,windows,anomalies,ipg}.csv`
(the runs' anomaly specs are 2:250us and 2:6us, so anomalies.csv has rows; those three are
checked in test_figures_more.py). Regenerate it the same way if the figures' data changes."""

import csv
from pathlib import Path

import numpy as np

import nflab

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


def rows(name):
    with open(TINY / "figures" / name, newline="") as f:
        return list(csv.DictReader(f))


def test_hdr_points_match_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("hdr.csv")
    assert rust, "fixture has no hdr rows"
    for run in exp.runs:
        label = exp.config_label(run)
        mine_x, mine_y = nflab.stats.hdr_points(run.latencies())
        theirs = [r for r in rust if r["config"] == label]
        assert len(theirs) == len(mine_x), label
        assert np.allclose([float(r["inv_1_minus_p"]) for r in theirs], mine_x, rtol=1e-5)
        assert [float(r["latency_ns"]) for r in theirs] == list(mine_y)


def test_cdf_end_points_match_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("cdf.csv")
    for run in exp.runs:
        lat = np.sort(run.latencies())
        theirs = [r for r in rust if r["config"] == exp.config_label(run)]
        assert float(theirs[-1]["latency_ns"]) == lat[-1] and float(theirs[-1]["cdf"]) == 1.0
        assert float(theirs[1]["latency_ns"]) == lat[0]  # row 0 is the F = 0 start of the staircase
        # Every point is (x, rank/N) of the sorted sample.
        for r in theirs[1:]:
            x, p = float(r["latency_ns"]), float(r["cdf"])
            k = int(round(p * len(lat)))
            assert lat[k - 1] == x
