import os
import subprocess
import sys
from pathlib import Path

import pytest

import nflab

import matplotlib  # noqa: E402  (the test extras install it)
matplotlib.use("Agg")


@pytest.mark.parametrize("fig_id", nflab.plots.FIGURES)
def test_every_figure_draws_data(experiment, damaged, fig_id, tmp_path):
    exp = nflab.load(damaged)  # damaged ⊃ experiment: bad runs must not break a figure
    fig = nflab.plots.draw(exp, fig_id)
    drawn = sum(len(ax.lines) + len(ax.collections) + len(ax.patches) for ax in fig.axes)
    assert drawn > 0, f"{fig_id} drew nothing"
    out = tmp_path / f"{fig_id}.png"
    fig.savefig(out, dpi=60)
    assert out.stat().st_size > 5000
    matplotlib.pyplot.close(fig)


def test_hdr_lines_end_at_the_max(experiment):
    exp = nflab.load(experiment)
    fig = nflab.plots.hdr(exp)
    ends = sorted(line.get_ydata()[-1] for line in fig.axes[0].lines)
    assert ends[-1] == 900_000  # the burst of the fixture is the maximum of every run


def test_cli_plots_all(experiment, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(Path(nflab.__file__).parent.parent))
    out = subprocess.run([sys.executable, "-m", "nflab", "plot", str(experiment), "all", "-o", str(tmp_path / "figs")],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in (tmp_path / "figs").iterdir()) == sorted(f"{f}.png" for f in nflab.plots.FIGURES)
    bad = subprocess.run([sys.executable, "-m", "nflab", "plot", str(tmp_path), "hdr"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "not an nflab experiment directory" in bad.stderr
