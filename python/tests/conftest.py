"""Synthetic artifact trees, written in Python from docs/formats.md: no root,
no nflab binary, known latencies."""

import json
import math
import random
import zlib
from pathlib import Path

import numpy as np
import pytest

from nflab.records import RECORD_DTYPE, write_records

SPEC = """[experiment]
name = "synthetic"
description = "python test tree"
repetitions = 2
seed = 1

[dut]
kind = "linux-router"

[traffic]
pattern = "cbr"
rate_pps = 10000

[analysis]
anomalies = ["2:250us"]

[sweep]
"dut.kind" = ["loopback", "linux-router"]
"traffic.rate_pps" = [10000, 20000]
"""


def latency(seq, rng):
    """A few µs with an exponential tail, and a 5-packet 900 µs burst at seq 2000."""
    if 2000 <= seq < 2005:
        return 900_000
    return 3_000 + int(-math.log(max(rng.random(), 1e-12)) * 2_000)


def write_run(exp: Path, name: str, dut: str, rate: int, rep: int, packets: int, warmup: int = 500,
              lose_all: bool = False, finished: bool = True, summary: bool = True):
    rd = exp / "runs" / name
    rd.mkdir(parents=True)
    (rd / "params.json").write_text(json.dumps({
        "run": name, "repetition": rep, "dut": {"kind": dut},
        "traffic": {"pattern": "cbr", "rate_pps": rate},
        "analysis": {"anomalies": ["2:250us"]},
        "sweep": {"dut.kind": dut, "traffic.rate_pps": rate},
    }))
    rng = random.Random(zlib.crc32(name.encode()) ^ rate)  # deterministic across processes
    gap = 1_000_000_000 // rate
    t0 = 1_700_000_000_000_000_000
    n = 0 if lose_all else packets
    arr = np.zeros(n, dtype=RECORD_DTYPE)
    lats = []
    for s in range(n):
        tx = t0 + s * gap
        lat = latency(s, rng)
        arr[s]["seq"], arr[s]["tx_ns"], arr[s]["rx_ns"], arr[s]["wire_len"] = s, tx, tx + lat, 64
        if s >= warmup:
            lats.append(lat)
    trailer = {"sent": [{"flow": 0, "sent": packets, "warmup": warmup}], "interrupted": False} if finished else None
    write_records(rd / "records.nfr", arr, meta={"run_id": name, "clock": {"source": "CLOCK_REALTIME", "resolution_ns": 1},
                                                 "tx_timestamp": "application", "rx_timestamp": "kernel-software", "flows": [0]},
                  trailer=trailer)
    if summary:
        s = sorted(lats)
        q = (lambda p: s[min(max(math.ceil(p * len(s)), 1), len(s)) - 1]) if s else (lambda p: None)
        sent = packets - warmup
        (rd / "summary.json").write_text(json.dumps({
            "packets": {"sent": sent, "received": len(lats), "lost": sent - len(lats), "reordered": 0, "duplicated": 0},
            "loss_ratio": (sent - len(lats)) / sent,
            "rate": {"offered_pps": float(rate), "tx_pps": float(rate), "rx_pps": float(rate) if len(lats) > 1 else None},
            "latency_ns": {"min": q(0), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p99.9": q(0.999), "max": q(1.0)},
            "jitter_ns": {"rfc3550": 100.0},
            "anomalies": [{"n": 2, "t_ns": 250000, "count": 1, "packets": 5, "longest": 5}],
            "clock": {"source": "CLOCK_REALTIME", "resolution_ns": 1},
            "interrupted": False, "notes": [],
        }))
    return lats


@pytest.fixture
def experiment(tmp_path) -> Path:
    """2 DuT kinds × 2 rates × 2 repetitions, with summaries and results.parquet."""
    exp = tmp_path / "20260101T000000Z-synthetic"
    exp.mkdir()
    (exp / "spec.toml").write_text(SPEC)
    (exp / "env.json").write_text(json.dumps({"hostname": "test", "clock_source": "CLOCK_REALTIME", "clock_resolution_ns": 1}))
    i = 0
    rows = []
    for dut in ["loopback", "linux-router"]:
        for rate in [10_000, 20_000]:
            for rep in range(2):
                name = f"{i:03d}"
                lats = write_run(exp, name, dut, rate, rep, packets=rate // 2)
                rows.append({"run": name, "repetition": rep, "dut": dut, "param.traffic.rate_pps": rate,
                             "received": len(lats), "latency_p99_ns": sorted(lats)[math.ceil(0.99 * len(lats)) - 1]})
                i += 1
    # A model overlay and a generator self-check, so every figure of the report applies.
    (exp / "model.json").write_text(json.dumps({"predictions": [{"run": "000", "p50_ns": 4000, "p99_ns": 15000}, {"run": "002", "mean_ns": 6000}]}))
    (exp / "runs" / "000" / "gen.json").write_text(json.dumps({"sent": 5000, "selfcheck": {
        "configured_ipg_ns": 100000.0, "ipg_mse_ns2": 2.5e7, "histogram_width_ns": 1000,
        "histogram": [{"lo_ns": 99000, "count": 10}, {"lo_ns": 100000, "count": 80}, {"lo_ns": 101000, "count": 10}]}}))
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), exp / "results.parquet")
    except ImportError:
        pass
    return exp


@pytest.fixture
def damaged(experiment) -> Path:
    """The experiment plus a 100 %-loss run, an interrupted run and an empty run directory."""
    write_run(experiment, "008", "linux-router", 30_000, 0, packets=3000, warmup=0, lose_all=True)
    write_run(experiment, "009", "linux-router", 40_000, 0, packets=9000, finished=False, summary=False)
    # Cut the interrupted run's file in the middle of a block, like kill -9.
    p = experiment / "runs" / "009" / "records.nfr"
    p.write_bytes(p.read_bytes()[:-1000])
    (experiment / "runs" / "010").mkdir()
    return experiment


# No test passes by skipping (scripts/deps.txt, crates/testkit): a skip fails
# the session unless the developer opted out with NFLAB_ALLOW_SKIP=1, and
# always under CI. Skips are appended to NFLAB_SKIP_LOG for scripts/test.sh.
def _flag(name):
    import os

    v = os.environ.get(name, "")
    return v not in ("", "0", "false")


def pytest_sessionfinish(session, exitstatus):
    import os

    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if not skipped:
        return
    log = os.environ.get("NFLAB_SKIP_LOG")
    if log:
        with open(log, "a") as f:
            for r in skipped:
                f.write(f"python {r.nodeid}: {r.longrepr[-1] if isinstance(r.longrepr, tuple) else r.longrepr}\n")
    if _flag("CI") or not _flag("NFLAB_ALLOW_SKIP"):
        session.exitstatus = 1


# The `nflab` binary, for the tests that compare the Python API with the CLI: $NFLAB_BIN
# (scripts/ci-python.sh sets it), else built here with cargo from this repository.
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def nflab_bin() -> str:
    import os
    import shutil
    import subprocess

    b = os.environ.get("NFLAB_BIN")
    if b:
        assert Path(b).is_file(), f"NFLAB_BIN={b} does not exist: build it with `cargo build -p nflab`"
        return b
    cargo = shutil.which("cargo")
    assert cargo, "cargo is not on PATH: set NFLAB_BIN to an nflab binary or install Rust"
    subprocess.run([cargo, "build", "-q", "-p", "nflab"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "debug" / "nflab")
