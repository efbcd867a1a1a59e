"""The applications' results.parquet columns (docs/formats.md) in Python: NCSbench's
``ncs_*`` and PRRT's ``prrt_<pc|cp>_*`` reach ``Experiment.results()`` and the ``ncs``
and ``prrt`` figures of ``python -m nflab plot``, mean ± CI per swept value."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import nflab

import matplotlib  # noqa: E402
matplotlib.use("Agg")


def _with_app_columns(exp_dir: Path, app: str) -> pl.DataFrame:
    """results.parquet of the fixture with known application columns added, as
    `nflab run` writes them (one row per run, param.<key> columns)."""
    exp = nflab.load(exp_dir)
    rows = []
    for i, r in enumerate(exp.runs):
        rate = r.sweep["traffic.rate_pps"]
        row = {"run": r.name, "repetition": r.params.get("repetition"), "dut": r.dut,
               "param.dut.kind": r.sweep["dut.kind"], "param.traffic.rate_pps": float(rate)}
        if app == "ncs":
            row.update({"ncs_losses": i * 3, "ncs_fell": rate == 20000 and i % 2 == 0,
                        "ncs_periods_completed": 150, "ncs_d_N_median_ms": 1.0 + i / 10,
                        "ncs_d_N_p99.9_ms": 2.0 + i, "ncs_iae_theta": 1.5, "ncs_iae_phi": 2.5, "ncs_iae_nu": 3.5})
        else:
            for d in ("pc", "cp"):
                row.update({f"prrt_{d}_sent": 100, f"prrt_{d}_delivered": 100 - i, f"prrt_{d}_late_discarded": i,
                            f"prrt_{d}_loss_ratio": i / 100, f"prrt_{d}_redundancy_ratio": 0.125,
                            f"prrt_{d}_outages": i % 2, f"prrt_{d}_outage_longest_ns": 1_000_000 * (i % 2)})
        rows.append(row)
    df = pl.DataFrame(rows)
    df.write_parquet(exp_dir / "results.parquet")
    return df


def test_ncs_columns_are_results_and_the_figure_draws_their_means(experiment):
    df = _with_app_columns(experiment, "ncs")
    exp = nflab.load(experiment)
    res = exp.results()
    assert {"ncs_losses", "ncs_fell", "ncs_d_N_median_ms", "ncs_d_N_p99.9_ms", "ncs_iae_nu"} <= set(res.columns)
    key, pts = nflab.app_plots.points(exp, "ncs_losses")
    assert key == "traffic.rate_pps"  # dut.kind is not numeric
    for rate in (10000, 20000):
        want = df.filter(pl.col("param.traffic.rate_pps") == rate)["ncs_losses"].to_numpy()
        mean, half, n = pts[float(rate)]
        assert n == len(want) and mean == pytest.approx(np.mean(want))
        # Student-t 95 %: t(0.975, n-1) · s / √n, computed here with numpy and scipy's value.
        t = {2: 12.706204736, 3: 4.302652730, 4: 3.182446305}[n]
        assert half == pytest.approx(t * np.std(want, ddof=1) / np.sqrt(n), rel=1e-6)
    # fell is a fraction of runs: the mean of the booleans.
    _, fell = nflab.app_plots.points(exp, "ncs_fell")
    assert fell[20000.0][0] == pytest.approx(df.filter(pl.col("param.traffic.rate_pps") == 20000)["ncs_fell"].mean())
    fig = nflab.plots.draw(exp, "ncs")
    lines = [l for ax in fig.axes for l in ax.lines if len(l.get_xdata()) == 2]
    assert any(list(l.get_ydata()) == pytest.approx([pts[10000.0][0], pts[20000.0][0]]) for l in lines)
    assert nflab.plots.why_not(exp, "ncs") is None
    assert "prrt_" in nflab.plots.why_not(exp, "prrt")
    matplotlib.pyplot.close(fig)


def test_prrt_columns_and_the_cli_plots_only_what_applies(experiment, tmp_path):
    _with_app_columns(experiment, "prrt")
    exp = nflab.load(experiment)
    assert {f"prrt_{d}_{k}" for d in ("pc", "cp") for k in ("sent", "delivered", "late_discarded", "loss_ratio",
                                                            "redundancy_ratio", "outages", "outage_longest_ns")} \
        <= set(exp.results().columns)
    fig = nflab.plots.draw(exp, "prrt")
    assert sum(len(ax.lines) for ax in fig.axes) > 0
    matplotlib.pyplot.close(fig)
    env = dict(os.environ, PYTHONPATH=str(Path(nflab.__file__).parent.parent))
    out = subprocess.run([sys.executable, "-m", "nflab", "plot", str(experiment), "all", "-o", str(tmp_path / "figs")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    names = {p.name for p in (tmp_path / "figs").iterdir()}
    assert "prrt.png" in names and "ncs.png" not in names
    assert "ncs does not apply here" in out.stderr
