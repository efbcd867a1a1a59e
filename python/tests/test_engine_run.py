"""On a tree `nflab run` writes (root: real namespaces, veth and the loopback DuT): the Python
API, `nflab analyze --json` and the report's figures/analysis.json give the same numbers."""

import json
import os
import subprocess

import nflab

from test_engine_cli import same_bits

SPEC = """[experiment]
name = "py-engine"
repetitions = 2
seed = 3

[topology]
kind = "netns"

[dut]
kind = "loopback"

[traffic]
backend = "af_packet"
pattern = "cbr"
rate_pps = 5000
frame_bytes = 64
duration_s = 1
warmup_s = 0.2

[analysis]
anomalies = ["2:20us", "2:250us:lost=inf"]

[sweep]
"traffic.rate_pps" = [5000, 10000]
"""


def test_a_real_run_agrees_everywhere(nflab_bin, tmp_path):
    assert os.geteuid() == 0, "nflab run needs root (namespaces and veth): run the Python tests as root"
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    out = subprocess.run([nflab_bin, "run", str(spec), "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    (tree,) = [p for p in (tmp_path / "out").iterdir() if p.is_dir()]
    exp = nflab.load(tree)
    assert len(exp.runs) == 4
    # The report `nflab run` wrote: every run's entry is the Python analysis of that run.
    rep = json.loads((tree / "figures" / "analysis.json").read_text())
    assert sorted(rep["runs"]) == [r.name for r in exp.runs]
    for name, summary in rep["runs"].items():
        a = exp.analysis(name)
        same_bits(a.value, summary, name)
        assert a.summary["packets"]["received"] > 1000
    # The whole tree through the CLI and through Python: four summaries and _across_runs.
    flags = ["--window", "100ms", "--per-flow", "--anomaly", "2:20us"]
    cli = subprocess.run([nflab_bin, "analyze", "--json", *flags, str(tree)], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    r = exp.analyze(window="100ms", per_flow=True, anomalies=["2:20us"])
    assert r.json == cli.stdout.rstrip("\n")
    same_bits(r.value, json.loads(cli.stdout))
    assert r.across_runs["p50"]["n"] == 4
