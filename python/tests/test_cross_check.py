"""The Python figures draw the Rust report's data.

`fixtures/tiny` (a few dozen KB) is a small artifact tree: two runs of 150 packets written
with `conftest.write_run` (anomaly specs 2:250us and 2:6us), then `nflab report` run on a copy,
keeping only `figures/{hdr,cdf,windows,anomalies,ipg}.csv` and `figures/analysis.json`.
Regenerate it the same way when the report's figures change. The CSVs hold printed numbers,
so the x positions of the percentile plot and the CDF fractions compare to their printed
precision; every latency compares exactly. Bit-for-bit agreement of the numbers themselves
is in test_engine_cli.py."""

import csv
import json
import struct
from pathlib import Path

import nflab
from nflab import plots

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


def rows(name):
    with open(TINY / "figures" / name, newline="") as f:
        return list(csv.DictReader(f))


def test_the_fixture_analysis_is_the_engines():
    exp = nflab.load(TINY)
    rep = json.loads((TINY / "figures" / "analysis.json").read_text())
    assert sorted(rep["runs"]) == ["000", "001"]
    for name, s in rep["runs"].items():
        mine = exp.analysis(name).value
        assert json.dumps(mine, sort_keys=True) == json.dumps(s, sort_keys=True)
        p99 = mine["latency_ns"]["p99"]
        assert struct.pack("<q", p99) == struct.pack("<q", s["latency_ns"]["p99"])


def test_hdr_points_match_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("hdr.csv")
    assert rust, "fixture has no hdr rows"
    for label, runs in plots.configs(exp).items():
        x, y = plots._pooled(exp, runs).percentile_curve(40)
        theirs = [r for r in rust if r["config"] == label]
        assert len(theirs) == len(x) > 10, label
        for r, xi, yi in zip(theirs, x, y):
            assert abs(float(r["inv_1_minus_p"]) - xi) <= 1e-5 * xi
            assert float(r["latency_ns"]) == yi


def test_cdf_points_match_the_rust_report():
    exp = nflab.load(TINY)
    rust = rows("cdf.csv")
    for label, runs in plots.configs(exp).items():
        d = plots._pooled(exp, runs)
        lat, p = d.cdf_points(600)
        theirs = [r for r in rust if r["config"] == label]
        # Row 0 is the F = 0 start of the staircase at the smallest latency.
        assert float(theirs[0]["cdf"]) == 0.0 and float(theirs[0]["latency_ns"]) == lat[0]
        assert len(theirs) == len(lat) + 1
        for r, x, q in zip(theirs[1:], lat, p):
            assert float(r["latency_ns"]) == x and abs(float(r["cdf"]) - q) < 1e-6
        assert p[-1] == 1.0 and lat[-1] == d.max()
