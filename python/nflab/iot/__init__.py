"""IoT signaling analysis on synthetic data (seed 003 §4.2): a generator of
device populations that writes signaling messages to Parquet, and the seed's
pipeline — dialog assembly, sequences, features, periodicity, k-means with the
elbow, PCA, the synchronisation classifier and KS tests — on polars
(``polars_engine``, one machine, bounded memory) and on Apache Spark
(``spark_engine``). Needs the ``iot`` extra: ``pip install "./python[iot]"``.

>>> from nflab.iot import Population, generate, analyze          # doctest: +SKIP
>>> generate(Population(devices=1000), "pop")                     # doctest: +SKIP
>>> analyze("pop", "pop/analysis")["truth"]["adjusted_rand_index"]  # doctest: +SKIP

CLI: ``python -m nflab.iot generate DIR`` and ``python -m nflab.iot analyze DIR [--engine spark]``.
"""

from .generate import Population, generate


def analyze(data, out, engine: str = "polars", **kw) -> dict:
    """Runs the pipeline with ``engine`` ("polars" or "spark"); see the engines' ``analyze``."""
    if engine == "polars":
        from . import polars_engine

        return polars_engine.analyze(data, out, **kw)
    if engine == "spark":
        from . import spark_engine

        return spark_engine.analyze(data, out, **kw)
    raise ValueError(f"engine must be polars or spark, not {engine!r}")


__all__ = ["Population", "analyze", "generate"]
