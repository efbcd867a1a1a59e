"""The same pipeline on Apache Spark (PySpark), for traces that need a cluster.

Dialog assembly, sequences and features are Spark SQL over windows partitioned
by device (the shuffle is by device, so it scales out with the number of
devices); the periodicity runs per device in ``applyInPandas`` with the same
function as the polars engine (``classify.periodicity``); k-means, the scaler
and PCA are Spark MLlib's. The per-class histograms and totals that remain are
small and finish on the driver in ``result.Collector``, as with polars.
``master`` is a Spark master URL (``local[2]`` in the tests).
"""

from __future__ import annotations

from itertools import chain
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl

from . import classify
from . import schema as S
from .result import Collector


def session(master: str = "local[2]", driver_memory: str = "2g"):
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master(master)
        .appName("nflab-iot")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def _quiet(spark):
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _map(d: dict):
    from pyspark.sql import functions as F

    return F.create_map(*[F.lit(x) for x in chain.from_iterable(d.items())])


def dialogs_frame(messages):
    """Messages -> dialogs (device, t_ms, outcome, type); the rules of
    ``polars_engine.dialogs_plan``."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    op, d = F.col("op"), F.col("dir")
    w = Window.partitionBy("device").orderBy("t_ms", "dir")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    opening = (d == S.REQUEST) & op.isin(S.OPENING_OPS)
    m = messages.withColumn("opening", opening).withColumn("new", F.col("opening") | F.lag("device").over(w).isNull())
    m = m.withColumn("dialog", F.sum(F.col("new").cast("long")).over(upto)).withColumn(
        "op0", F.last(F.when(F.col("new"), op), ignorenulls=True).over(upto))
    m = m.withColumn("final", F.coalesce((d == S.RESPONSE) & (op == _map(S.RESPONSE_OP)[F.col("op0")]), F.lit(False)))
    belongs = (F.col("new") & F.col("opening")) | F.col("final") | ((op == S.ISD) & F.col("op0").isin(list(S.WITH_ISD)))
    order = F.struct("t_ms", "dir")
    g = m.groupBy("device", "dialog").agg(
        F.min("t_ms").alias("t_ms"),
        F.min_by("op0", order).alias("op0"),
        F.min_by("opening", order).alias("opened"),
        F.sum(F.col("final").cast("int")).alias("n_final"),
        F.max_by("final", order).alias("ends_final"),
        F.max(F.when(F.col("final"), F.col("result"))).alias("res"),
        F.sum(((op == S.ISD) & (d == S.REQUEST)).cast("int")).alias("isd_req"),
        F.sum(((op == S.ISD) & (d == S.RESPONSE)).cast("int")).alias("isd_resp"),
        F.sum((~belongs).cast("int")).alias("foreign"),
    )
    broken = (F.col("n_final") != 1) | ~F.col("ends_final") | (F.col("isd_req") != F.col("isd_resp")) | (F.col("foreign") > 0)
    outcome = (
        F.when(~F.col("opened") | broken, "ERROR")
        .when(F.col("res") == S.REJECT, "REJECT")
        .when(F.col("res") == S.ERROR, "ERROR")
        .otherwise("SUCCESS")
    )
    base = F.coalesce(_map(S.DIALOG_NAME)[F.col("op0")], F.lit(S.ORPHAN))
    return g.select(
        "device", "t_ms", outcome.alias("outcome"),
        F.when(F.col("opened"), F.concat(base, _map(S.SUFFIX)[outcome])).otherwise(F.lit(S.ORPHAN)).alias("type"),
    )


def _periodicity_udf(horizon: int):
    def fn(pdf: pd.DataFrame) -> pd.DataFrame:
        devs, p = classify.periodicity(pdf["device"].to_numpy(), pdf["minute"].to_numpy(), horizon)
        return pd.DataFrame({"device": devs.astype(np.int64), "periodicity": p})

    return fn


def analyze(data: str | Path, out: str | Path, k: int | None = None, seed: int = 1, spark=None, master: str = "local[2]") -> dict:
    """The pipeline of ``polars_engine.analyze`` on Spark; same outputs."""
    from pyspark.ml.clustering import KMeans
    from pyspark.ml.feature import PCA, StandardScaler, VectorAssembler
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    data, out = Path(data), Path(out)
    spark = _quiet(spark or session(master))
    msgs = spark.read.parquet(str(data / "messages"))
    b = msgs.agg(F.min("t_ms").alias("t0"), F.max("t_ms").alias("t1"), F.count(F.lit(1)).alias("n")).first()
    if not b["n"]:
        raise ValueError(f"{data / 'messages'} holds no messages")
    t0 = b["t0"] // 3_600_000 * 3_600_000
    horizon = int((b["t1"] - t0) // 60_000) + 1
    col = Collector(out, engine="spark", messages=b["n"], t0_ms=t0, horizon_min=horizon)

    dl = dialogs_frame(msgs).withColumn("minute", F.floor((F.col("t_ms") - F.lit(t0)) / 60_000).cast("long")).cache()
    col.add_dialogs(pl.from_pandas(dl.groupBy("type", "outcome").count().toPandas()))

    active = dl.select("device", "minute").distinct()
    wa = Window.partitionBy("device").orderBy("minute")
    active = active.withColumn("seq", F.sum(
        F.coalesce(F.col("minute") != F.lag("minute").over(wa) + 1, F.lit(True)).cast("long")
    ).over(wa.rowsBetween(Window.unboundedPreceding, Window.currentRow))).cache()
    per_seq = dl.join(active, ["device", "minute"]).groupBy("device", "seq").agg(
        F.min("minute").alias("minute"),
        F.array_join(F.transform(F.sort_array(F.collect_list(F.struct("t_ms", "type"))), lambda s: s["type"]), "→").alias("pattern"),
    ).cache()
    col.add_patterns(pl.from_pandas(per_seq.groupBy("pattern").count().toPandas()))
    gaps = per_seq.withColumn("gap", F.col("minute") - F.lag("minute").over(Window.partitionBy("device").orderBy("seq"))).dropna(subset=["gap"])
    gaps_dir = col.work / "spark_gaps"
    gaps.groupBy("device", "gap").count().write.parquet(str(gaps_dir))

    feats = dl.groupBy("device").agg(
        F.count(F.lit(1)).alias("dialogs"),
        F.avg((F.col("outcome") == "ERROR").cast("double")).alias("error_rate"),
        F.avg((F.col("outcome") == "REJECT").cast("double")).alias("reject_rate"),
    )
    n_seq = per_seq.groupBy("device").agg(F.count(F.lit(1)).alias("sequences"))
    per = active.select("device", "minute").groupBy("device").applyInPandas(_periodicity_udf(horizon), "device long, periodicity double")
    pdp = dl.filter(F.col("type") == "PDP_CREATE").withColumn("moh", (F.floor(F.col("t_ms") / 60_000) % 60).cast("int"))
    dens = pdp.groupBy("device", "moh").count().groupBy("device").agg(
        (F.max("count") / F.sum("count")).alias("max_density"), F.sum("count").alias("pdp_create"))
    f = feats.join(n_seq, "device", "left").join(per, "device", "left").join(dens, "device", "left").fillna(0, ["pdp_create", "sequences"])
    f = f.withColumn("synchronised", F.when(F.col("sequences") >= S.SYNC_MIN_SEQUENCES,
                                            F.coalesce(F.col("max_density"), F.lit(0.0)) >= S.SYNC_DENSITY)).cache()
    pdp_dir = col.work / "spark_pdp"
    pdp.join(f.select("device", "synchronised"), "device").filter(F.col("synchronised").isNotNull()) \
        .select("device", "moh", "synchronised", "t_ms").write.parquet(str(pdp_dir))
    col.add_features(pl.from_pandas(f.orderBy("device").toPandas()))

    raw = VectorAssembler(inputCols=list(classify.FEATURES), outputCol="raw").transform(f.fillna(0.0, ["periodicity"]))
    scaler = StandardScaler(inputCol="raw", outputCol="x", withMean=True, withStd=True).fit(raw)
    # One row per device: small next to the messages, one partition keeps k-means' many jobs cheap.
    x = scaler.transform(raw).select("device", "x").orderBy("device").coalesce(1).cache()
    n = x.count()
    inertias, models = {1: float(x.rdd.map(lambda r: float(r.x.dot(r.x))).sum())}, {}
    for kk in range(2, min(10, n) + 1):
        models[kk] = KMeans(k=kk, seed=seed, featuresCol="x", maxIter=50).fit(x)
        inertias[kk] = float(models[kk].summary.trainingCost)
    chosen = k if k else classify.elbow(inertias)
    if chosen == 1:
        raise ValueError("one cluster: the features do not vary")
    model = models.get(chosen) or KMeans(k=chosen, seed=seed, featuresCol="x", maxIter=50).fit(x)
    labels = np.array([r.prediction for r in model.transform(x).select("device", "prediction").orderBy("device").collect()])
    std, mean = scaler.std.toArray(), scaler.mean.toArray()
    centroids = np.array([c * std + mean for c in model.clusterCenters()])
    pca = PCA(k=2, inputCol="x", outputCol="pc").fit(x)
    scores = np.array([r.pc.toArray() for r in pca.transform(x).select("device", "pc").orderBy("device").collect()])
    result = col.finish(
        labels=labels, centroids=centroids, inertias=inertias, k=chosen,
        pca={"explained_variance_ratio": pca.explainedVariance.toArray().tolist(), "components": pca.pc.toArray().T.tolist()},
        scores=scores, data=data, gaps_glob=str(gaps_dir / "*.parquet"), pdp_glob=str(pdp_dir / "*.parquet"),
    )
    dl.unpersist(), active.unpersist(), per_seq.unpersist(), f.unpersist(), x.unpersist()
    return result
