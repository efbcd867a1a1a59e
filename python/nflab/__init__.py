"""nflab in Python: load an artifact tree of ``nflab run`` into polars or pandas
frames and draw the report's figures with matplotlib.

>>> import nflab
>>> exp = nflab.load("results/20260101T000000Z-quickstart")   # doctest: +SKIP
>>> exp.results()            # results.parquet, one row per run        # doctest: +SKIP
>>> exp.summaries()          # summary.json of every run, flattened    # doctest: +SKIP
>>> exp.records("000")       # per-packet records of one run           # doctest: +SKIP
>>> nflab.plots.hdr(exp)     # the HDR percentile plot                 # doctest: +SKIP
"""

from . import plots, stats
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
    "load",
    "plots",
    "read_records",
    "stats",
    "write_records",
]
