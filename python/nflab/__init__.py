"""nflab in Python: the analysis engine of ``nflab analyze`` (Rust, through PyO3) on record
files and artifact trees, their results as polars frames, and the report's figures with
matplotlib. Every statistic comes from the engine (:mod:`nflab.engine`).

>>> import nflab
>>> exp = nflab.load("results/20260101T000000Z-quickstart")   # doctest: +SKIP
>>> exp.results()            # results.parquet, one row per run        # doctest: +SKIP
>>> exp.summaries()          # summary.json of every run, flattened    # doctest: +SKIP
>>> exp.records("000")       # per-packet records of one run           # doctest: +SKIP
>>> exp.analysis("000")      # the engine's analysis, as the report's   # doctest: +SKIP
>>> nflab.analyze(path, window="1s")   # == nflab analyze --json --window 1s PATH  # doctest: +SKIP
>>> nflab.plots.hdr(exp)     # the HDR percentile plot                 # doctest: +SKIP
"""

from . import engine, plots
from .engine import analyze
from .records import RECORD_DTYPE, RecordFile, RecordFormatError, read_records, write_records
from .tree import Experiment, NotAnExperiment, Run, load

__version__ = "0.1.0"

__all__ = [
    "Experiment",
    "NotAnExperiment",
    "RECORD_DTYPE",
    "RecordFile",
    "RecordFormatError",
    "Run",
    "analyze",
    "engine",
    "load",
    "plots",
    "read_records",
    "write_records",
]
