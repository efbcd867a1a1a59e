"""The Python API and the CLI agree bit for bit: ``nflab.analyze(PATHS, **options)`` returns
the exact text ``nflab analyze --json PATHS <flags>`` prints, on the fixtures, on synthetic
trees and on files of every input format, option by option; and an artifact tree's analysis
in Python is, field by field, the report's figures/analysis.json."""

import json
import math
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import nflab
from nflab.records import RECORD_DTYPE, write_records

TINY = Path(__file__).resolve().parent / "fixtures" / "tiny"


def cli(nflab_bin, paths, flags):
    out = subprocess.run([nflab_bin, "analyze", "--json", *flags, *map(str, paths)], capture_output=True, text=True)
    assert out.returncode in (0, 3), out.stderr
    return out.stdout, out.returncode


def same_bits(a, b, where="$"):
    """Equal JSON values, floats compared by their bits (and ints never equal to floats)."""
    assert type(a) is type(b), f"{where}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        assert list(a) == list(b), f"{where}: keys differ"
        for k in a:
            same_bits(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            same_bits(x, y, f"{where}[{i}]")
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{where}: {a!r} vs {b!r}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def agree(nflab_bin, paths, flags, **options):
    text, rc = cli(nflab_bin, paths, flags)
    r = nflab.analyze(paths, **options)
    assert r.json == text.rstrip("\n")
    same_bits(r.value, json.loads(text))
    assert r.sla_failed == (rc == 3)
    return r


def lossy_run(path, n=20_000, flows=2, seed=7):
    """Records with losses, reordering, a duplicate, bursts of high latency, two flows."""
    rng = np.random.default_rng(seed)
    rows = []
    t0 = 1_000_000_000_000
    for f in range(flows):
        for s in range(n):
            if rng.random() < 0.01:
                continue  # lost
            tx = t0 + s * 10_000 + f * 3
            lat = int(5_000 + rng.exponential(3_000))
            if 5_000 <= s < 5_010 or rng.random() < 0.002:
                lat += 400_000
            rows.append((s, f, tx, tx + lat))
    rows.sort(key=lambda r: r[3])
    rows[100], rows[101] = rows[101], rows[100]
    rows.append(rows[500])
    arr = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (s, f, tx, rx) in enumerate(rows):
        arr[i]["seq"], arr[i]["flow"], arr[i]["tx_ns"], arr[i]["rx_ns"], arr[i]["wire_len"] = s, f, tx, rx, 64
    write_records(path, arr, trailer={"sent": [{"flow": f, "sent": n, "warmup": 100} for f in range(flows)]})
    return path


OPTION_CASES = [
    ([], {}),
    (["--anomaly", "2:250us", "--anomaly", "3:100us:lost=inf", "--anomaly", "2:p50*3:gt,lost=skip"],
     {"anomalies": ["2:250us", "3:100us:lost=inf", "2:p50*3:gt,lost=skip"]}),
    (["--hdr"], {"hdr": True}),
    (["--hdr", "--hdr-digits", "2"], {"hdr": True, "hdr_digits": 2}),
    (["--exact"], {"exact": True}),
    (["--exact-limit", "1000"], {"exact_limit": 1000}),
    (["--window", "20ms", "--worst", "7"], {"window": "20ms", "worst": 7}),
    (["--per-flow", "--percentile", "99.99", "--percentile", "12.5"], {"per_flow": True, "percentiles": ["99.99", "12.5"]}),
    (["--trim", "10ms,20ms", "--deadline", "300us"], {"trim": "10ms,20ms", "deadline": "300us"}),
    (["--reorder-window", "8", "--anomaly-events", "3"], {"reorder_window": 8, "anomaly_events": 3}),
    (["--sla", "p99.9<=350us,loss<=1e-5"], {"sla": "p99.9<=350us,loss<=1e-5"}),
    (["--no-anomalies"], {"no_anomalies": True}),
]


@pytest.mark.parametrize("flags,options", OPTION_CASES, ids=[" ".join(f) or "defaults" for f, _ in OPTION_CASES])
def test_every_option_agrees_with_the_cli(nflab_bin, tmp_path, flags, options):
    p = lossy_run(tmp_path / "r.nfr")
    r = agree(nflab_bin, [p], flags, **options)
    s = r.summary
    if not {"trim", "reorder_window"} & set(options):  # these change what counts as a duplicate
        assert s["packets"]["lost"] > 0 and s["packets"]["duplicated"] == 1 and s["packets"]["reordered"] > 0
    if "hdr" in options:
        assert s["percentiles"]["method"] == "hdr"
    # No definition computes none; without any flag the two default definitions.
    assert len(s["anomalies"]) == (0 if "no_anomalies" in options else len(options.get("anomalies", [0, 0])))


def test_fixture_runs_one_by_one_and_across_runs(nflab_bin):
    runs = sorted((TINY / "runs").glob("*/records.nfr"))
    for p in runs:
        agree(nflab_bin, [p], ["--anomaly", "2:6us"], anomalies=["2:6us"])
    # Several files: the CLI's object keyed by path, with _across_runs (t and bootstrap CIs).
    r = agree(nflab_bin, runs, ["--confidence", "0.9"], confidence=0.9)
    assert r.across_runs["p99"]["n"] == 2 and len(r.summaries) == 2
    # An experiment directory expands to its runs, as in the CLI.
    d = agree(nflab_bin, [TINY], ["--window", "1ms"], window="1ms")
    assert [a.label for a in d.analyses] == [str(p) for p in runs]


def test_synthetic_tree_and_csv_and_trex_inputs(nflab_bin, experiment, tmp_path):
    agree(nflab_bin, [experiment], ["--anomaly", "2:250us"], anomalies=["2:250us"])
    # CSV seq,tx_ns,rx_ns in arrival order (a gap is a loss).
    csv = tmp_path / "a.csv"
    csv.write_text("seq,tx_ns,rx_ns\n" + "".join(f"{s},{s * 1000},{s * 1000 + 500 + (s % 7) * 100}\n" for s in range(2000) if s % 97))
    agree(nflab_bin, [csv], [])
    # TRex-fork: 16-byte records of (tx, rx) f64 seconds; the split pass on two threads.
    rng = np.random.default_rng(3)
    tx = 1.0 + np.arange(50_000) * 1e-5
    rx = tx + 2e-6 + rng.exponential(5e-6, len(tx))
    rx[1000:1004] += 1e-3
    trex = tmp_path / "t.data"
    np.stack([tx, rx], axis=1).astype("<f8").tofile(trex)
    agree(nflab_bin, [trex], ["--anomaly", "2:250us"], anomalies=["2:250us"])
    r = agree(nflab_bin, [trex], ["--anomalies-only", "--threads", "2", "--anomaly", "2:250us"],
              anomalies_only=True, threads=2, anomalies=["2:250us"])
    assert r.summary["anomalies"][0]["count"] == 1 and r.summary["anomalies"][0]["packets"] == 4


def test_bad_options_are_one_sentence(tmp_path):
    p = lossy_run(tmp_path / "r.nfr", n=1000, flows=1)
    with pytest.raises(ValueError, match="unknown analysis option 'windw'"):
        nflab.analyze(p, windw="1s")
    with pytest.raises(ValueError, match="invalid anomaly spec"):
        nflab.analyze(p, anomalies=["x:1us"])
    with pytest.raises(ValueError, match="hdr_digits=9 is outside 1..=5"):
        nflab.analyze(p, hdr_digits=9)
    with pytest.raises(ValueError, match="exact=True cannot be combined"):
        nflab.analyze(p, exact=True, hdr=True)
    with pytest.raises(ValueError, match="has no runs"):
        (tmp_path / "runs").mkdir()
        nflab.analyze(tmp_path)


def test_frames_are_the_summary_tables(tmp_path):
    p = lossy_run(tmp_path / "r.nfr")
    r = nflab.analyze(p, window="50ms", worst=5, per_flow=True, anomalies=["2:250us"])
    s = r.summary
    w = nflab.engine.windows_frame(s)
    assert w.height == len(s["windows"]) > 1 and w["packets"].sum() == s["packets"]["received"]
    a = nflab.engine.anomalies_frame(s)
    assert a.height == len(s["anomaly_details"][0]["events"]) == s["anomalies"][0]["count"] >= 1
    assert nflab.engine.worst_frame(s).height == 5
    q = nflab.engine.quantiles_frame(s)
    assert q.filter(q["p"] == 99.0)["ns"][0] == s["latency_ns"]["p99"]
    f = nflab.engine.flows_frame(s)
    assert f.height == 2 and f["packets.received"].sum() == s["packets"]["received"]


def test_known_answers_through_the_binding(tmp_path):
    # Latencies 1..1000 µs in random order, one flow, nothing lost: nearest rank p99 = 990 µs.
    rng = np.random.default_rng(1)
    lats = rng.permutation(np.arange(1, 1001)) * 1000
    p = tmp_path / "k.nfr"
    write_records(p, [(s, 0, s * 10_000_000, s * 10_000_000 + int(l)) for s, l in enumerate(lats)],
                  trailer={"sent": [{"flow": 0, "sent": 1000, "warmup": 0}]})
    r = nflab.analyze(p, anomalies=["2:999us"])
    s = r.summary
    assert (s["latency_ns"]["p50"], s["latency_ns"]["p99"], s["latency_ns"]["max"]) == (500_000, 990_000, 1_000_000)
    assert s["latency_ns"]["mean"] == 500_500.0
    d = r.analyses[0].latency()
    x, y = d.percentile_curve(40)
    assert x[-1] == 1000 and y[-1] == 1_000_000
    k = [i for i, v in enumerate(x) if abs(v - 100) < 1e-9][0]
    assert y[k] == 990_000
    xs, ps = d.cdf_points(600)
    assert xs[-1] == 1_000_000 and ps[-1] == 1.0
    assert sum(d.bin_counts(nflab.engine.log_edges(1e3, 1e6, 10))) == 1000
    # A 95 % t interval of 1, 2, 3: 2 ± t(0.975, 2)·1/√3, t = 4.3027.
    m, h = nflab.engine.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and abs(h - 4.302652729911275 / math.sqrt(3)) < 1e-9
    assert nflab.engine.mean_ci([5.0]) == (5.0, None)
    assert nflab.engine.parse_anomaly("2:250us") == ("2:250000ns", 2, 250_000)


def test_ks_and_autocorrelation_through_the_binding_against_scipy_and_numpy():
    """The engine's KS statistics equal scipy's (an independent implementation; the p-values
    differ on purpose: the engine applies Stephens' small-sample correction, checked here by
    hand), and its autocorrelation the definition summed in numpy."""
    from scipy import stats

    rng = np.random.default_rng(7)
    a = rng.integers(0, 40, 3000)
    b = rng.integers(3, 45, 2000)
    va, na = np.unique(a, return_counts=True)
    vb, nb = np.unique(b, return_counts=True)
    d, p = nflab.engine.ks_two_sample(va, na, vb, nb)
    ref = stats.ks_2samp(a, b, method="asymp")
    assert abs(d - ref.statistic) < 1e-12
    ne = 3000 * 2000 / 5000
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    q = 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))
    assert abs(p - q) < 1e-12 and p < 1e-6
    with pytest.raises(ValueError, match="values must increase"):
        nflab.engine.ks_two_sample([2, 1], [1, 1], [1], [1])

    x = rng.exponential(2.0, 5000)
    d, p = nflab.engine.ks_exponential(x, 2.0)
    assert abs(d - stats.kstest(x, "expon", args=(0, 2.0)).statistic) < 1e-12 and p > 1e-3

    y = rng.normal(size=3000)
    y[1:] += 0.6 * y[:-1]  # an AR(1)-like series: r_1 clearly above 0
    g = y - y.mean()
    direct = [float(np.dot(g[:-k], g[k:]) / np.dot(g, g)) for k in range(1, 201)]
    got = nflab.engine.autocorrelation(y, 200)
    assert len(got) == 200 and max(abs(u - v) for u, v in zip(got, direct)) < 1e-12
    assert nflab.engine.max_abs_autocorrelation(y, 200) == max(abs(v) for v in got) > 0.3


def test_the_report_and_python_read_the_same_analysis(nflab_bin, experiment, tmp_path):
    """`nflab report DIR` writes figures/analysis.json; Experiment.analysis gives the same
    summaries bit for bit, with the options the report's `command` names."""
    for tree in (TINY, experiment):
        d = tmp_path / "copies" / tree.name
        shutil.copytree(tree, d)
        shutil.rmtree(d / "figures", ignore_errors=True)
        out = subprocess.run([nflab_bin, "report", str(d)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        rep = json.loads((d / "figures" / "analysis.json").read_text())
        exp = nflab.load(d)
        o = exp.engine_options(exp.runs[0])
        assert f"--window {o['window']}" in rep["command"] and f"--worst {o['worst']}" in rep["command"]
        assert rep["runs"], "the report analysed no run"
        for name, summary in rep["runs"].items():
            same_bits(exp.analysis(name).value, summary, f"{tree.name}/{name}")


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_export_writes_the_clis_files(nflab_bin, tmp_path, fmt):
    """``nflab.analyze(..., export=DIR)`` writes the same files, byte for byte, as
    ``nflab analyze --export DIR``, one directory per input when there are several."""
    a = lossy_run(tmp_path / "a.nfr", n=3000, flows=1)
    b = lossy_run(tmp_path / "b.nfr", n=3000, flows=1, seed=8)
    for paths in ([a], [a, b]):
        cli_dir, py_dir = tmp_path / f"cli-{fmt}-{len(paths)}", tmp_path / f"py-{fmt}-{len(paths)}"
        out = subprocess.run([nflab_bin, "analyze", "--json", "--export", str(cli_dir), "--export-format", fmt,
                              "--bins", "linear:1us", *map(str, paths)], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        r = nflab.analyze(paths, export=py_dir, export_format=fmt, bins="linear:1us")
        assert r.json == out.stdout.rstrip("\n")
        cli_files = sorted(p.relative_to(cli_dir) for p in cli_dir.rglob("*") if p.is_file())
        py_files = sorted(p.relative_to(py_dir) for p in py_dir.rglob("*") if p.is_file())
        assert cli_files == py_files and any(f.name == "latency_cdf." + fmt for f in cli_files)
        if len(paths) == 2:
            assert {f.parts[0] for f in cli_files} == {"000", "001"}
        for f in cli_files:
            if f.suffix == ".hlog":  # the interval log's header carries the time it was written
                continue
            assert (cli_dir / f).read_bytes() == (py_dir / f).read_bytes(), f
    with pytest.raises(ValueError, match="bins"):
        nflab.analyze([a], export=tmp_path / "x", bins="cubic:3")
