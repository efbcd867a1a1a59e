"""The seed-003 pipeline on polars, one machine, bounded memory.

The messages are read one range of devices at a time (``chunk_devices``; a
Parquet predicate on ``device`` skips the other row groups) and every range
goes through the lazy plan below, so memory is bounded by the largest range,
whatever the number of messages. What crosses ranges is per device (features),
per class (inter-sequence histograms) or a total (dialog and sequence counts),
plus the PDP_CREATE times of classified devices for the arrival-process test.

Per range:
1. **dialogs**: messages sorted by (device, time); a dialog opens at a request
   of an opening operation (Table 4.1) and collects what follows until the
   next one; it is SUCCESS, REJECT or ERROR (error result, no answer, an
   insertSubscriberData left unanswered, a message that does not belong);
2. **sequences**: 1-minute bins with a dialog; a sequence is a run of active bins;
3. **features**: error rate, reject rate, periodicity (``classify.periodicity``),
   number of sequences, maximum minute-of-hour density of PDP_CREATE dialogs.
Then over all devices: k-means on the features' z-scores for k = 1..10 and
the elbow (scikit-learn), PCA, the synchronisation classifier and the KS tests (the engine, nflab.engine).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from . import classify
from . import schema as S
from .result import Collector


def _scan(data: Path) -> pl.LazyFrame:
    return pl.scan_parquet(str(data / "messages" / "*.parquet"))


def dialogs_plan(messages: pl.LazyFrame) -> pl.LazyFrame:
    """Messages -> one row per dialog: device, t_ms (of its first message), type, outcome."""
    op, d = pl.col("op"), pl.col("dir")
    opening = (d == S.REQUEST) & op.is_in(S.OPENING_OPS)
    # Requests before answers stamped in the same millisecond, as the Spark engine orders them.
    m = messages.sort(["device", "t_ms", "dir"], maintain_order=True).with_columns(
        opening=opening,
        new=opening | (pl.col("device") != pl.col("device").shift(1)).fill_null(True),
    )
    m = m.with_columns(dialog=pl.col("new").cum_sum(), op0=pl.when("new").then(op).forward_fill())
    expected = pl.col("op0").replace_strict(S.RESPONSE_OP, default=None, return_dtype=pl.Int64)
    m = m.with_columns(final=(d == S.RESPONSE) & (op.cast(pl.Int64) == expected).fill_null(False))
    belongs = (pl.col("new") & pl.col("opening")) | pl.col("final") | ((op == S.ISD) & pl.col("op0").is_in(S.WITH_ISD))
    g = m.group_by("dialog").agg(
        pl.col("device").first(),
        pl.col("t_ms").first(),
        pl.col("op0").first(),
        pl.col("opening").first().alias("opened"),
        pl.col("final").sum().alias("n_final"),
        pl.col("final").last().alias("ends_final"),
        pl.col("result").filter(pl.col("final")).first().alias("res"),
        ((op == S.ISD) & (d == S.REQUEST)).sum().alias("isd_req"),
        ((op == S.ISD) & (d == S.RESPONSE)).sum().alias("isd_resp"),
        (~belongs).sum().alias("foreign"),
    )
    broken = (pl.col("n_final") != 1) | ~pl.col("ends_final") | (pl.col("isd_req") != pl.col("isd_resp")) | (pl.col("foreign") > 0)
    outcome = (
        pl.when(~pl.col("opened") | broken).then(pl.lit("ERROR"))
        .when(pl.col("res") == S.REJECT).then(pl.lit("REJECT"))
        .when(pl.col("res") == S.ERROR).then(pl.lit("ERROR"))
        .otherwise(pl.lit("SUCCESS"))
    )
    base = pl.when(pl.col("opened")).then(pl.col("op0").replace_strict(S.DIALOG_NAME, default=S.ORPHAN, return_dtype=pl.String)).otherwise(pl.lit(S.ORPHAN))
    suffix = outcome.replace_strict(S.SUFFIX, return_dtype=pl.String)
    return g.select(
        "device", "t_ms", outcome.alias("outcome"),
        pl.when(pl.col("opened")).then(base + suffix).otherwise(base).alias("type"),
    )


def sequences_plan(dialogs: pl.LazyFrame, t0_ms: int) -> pl.LazyFrame:
    """Dialogs -> dialogs with their minute and sequence id (runs of active minutes)."""
    dl = dialogs.with_columns(minute=((pl.col("t_ms") - t0_ms) // 60_000).cast(pl.Int64))
    active = dl.select("device", "minute").unique().sort(["device", "minute"])
    active = active.with_columns(
        seq=((pl.col("minute") != pl.col("minute").shift(1) + 1) | (pl.col("device") != pl.col("device").shift(1)))
        .fill_null(True).cum_sum()
    )
    return dl.join(active, on=["device", "minute"]).sort(["device", "t_ms"])


def _range(dl: pl.DataFrame, t0_ms: int, horizon: int, col: Collector):
    """Everything per range of devices, from its dialogs."""
    col.add_dialogs(dl.group_by("type", "outcome").len().rename({"len": "count"}))
    sq = sequences_plan(dl.lazy(), t0_ms).collect()
    per_seq = sq.group_by("seq", maintain_order=True).agg(pl.col("device").first(), pl.col("minute").first(), pl.col("type").str.join("→").alias("pattern"))
    col.add_patterns(per_seq.group_by("pattern").len().rename({"len": "count"}))
    gaps = per_seq.with_columns(gap=pl.col("minute").diff().over("device")).drop_nulls("gap")
    col.add_gaps(gaps.group_by("device", "gap").len().rename({"len": "count"}))
    feats = dl.group_by("device").agg(
        pl.len().alias("dialogs"),
        (pl.col("outcome") == "ERROR").mean().alias("error_rate"),
        (pl.col("outcome") == "REJECT").mean().alias("reject_rate"),
    )
    n_seq = per_seq.group_by("device").agg(pl.len().alias("sequences"))
    active = sq.select("device", "minute").unique().sort(["device", "minute"])
    devs, p = classify.periodicity(active["device"].to_numpy(), active["minute"].to_numpy(), horizon)
    per = pl.DataFrame({"device": devs, "periodicity": p}).cast({"device": dl.schema["device"]})
    pdp = dl.filter(pl.col("type") == "PDP_CREATE").with_columns(moh=((pl.col("t_ms") // 60_000) % 60).cast(pl.Int8))
    dens = pdp.group_by("device", "moh").len().group_by("device").agg(
        (pl.col("len").max() / pl.col("len").sum()).alias("max_density"), pl.col("len").sum().alias("pdp_create"))
    f = feats.join(n_seq, on="device", how="left").join(per, on="device", how="left").join(dens, on="device", how="left")
    f = f.with_columns(pl.col("pdp_create").fill_null(0), pl.col("sequences").fill_null(0))
    f = f.with_columns(
        pl.when(pl.col("sequences") >= S.SYNC_MIN_SEQUENCES)
        .then(pl.col("max_density").fill_null(0.0) >= S.SYNC_DENSITY)
        .otherwise(None).alias("synchronised")
    )
    col.add_features(f)
    times = pdp.join(f.select("device", "synchronised"), on="device").filter(pl.col("synchronised").is_not_null())
    col.add_pdp(times.select("device", "moh", "synchronised", "t_ms"))


def analyze(data: str | Path, out: str | Path, k: int | None = None, chunk_devices: int = 2000, seed: int = 1, progress=None) -> dict:
    """Runs the pipeline on ``data`` (written by ``nflab.iot.generate``, or any
    Parquet files of the message schema under ``data/messages/``) and writes the
    results to ``out``; ``k`` = None picks k by the elbow."""
    data, out = Path(data), Path(out)
    lf = _scan(data)
    bounds = lf.select(
        pl.col("t_ms").min().alias("t0"), pl.col("t_ms").max().alias("t1"), pl.len().alias("n"),
    ).collect(engine="streaming").row(0, named=True)
    if bounds["n"] == 0:
        raise ValueError(f"{data / 'messages'} holds no messages")
    t0 = bounds["t0"] // 3_600_000 * 3_600_000  # minutes of the hour count from a full hour
    horizon = int((bounds["t1"] - t0) // 60_000) + 1
    col = Collector(out, engine="polars", messages=bounds["n"], t0_ms=t0, horizon_min=horizon)
    # Passes of chunk_devices devices each, whatever the ids (IMSI-like ids are sparse).
    ids = lf.select(pl.col("device").unique()).collect(engine="streaming")["device"].sort().to_numpy()
    edges = [int(x) for x in ids[::chunk_devices]] + [int(ids[-1]) + 1]
    for i, (lo, hi) in enumerate(zip(edges, edges[1:])):
        part = lf.filter((pl.col("device") >= lo) & (pl.col("device") < hi))
        dl = dialogs_plan(part).collect(engine="streaming")
        if dl.height:
            _range(dl, t0, horizon, col)
        if progress:
            progress(min((i + 1) * chunk_devices, ids.size), ids.size)
    feats = col.features()
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    # k-means and PCA on z-scores: the features' ranges differ (P up to 3, rates up to 1).
    scaler = StandardScaler().fit(feats.select(classify.FEATURES).to_numpy())
    x = scaler.transform(feats.select(classify.FEATURES).to_numpy())

    inertias, models = {}, {}
    for kk in range(1, min(10, len(x)) + 1):
        models[kk] = KMeans(n_clusters=kk, n_init=10, random_state=seed).fit(x)
        inertias[kk] = float(models[kk].inertia_)
    chosen = k if k else classify.elbow(inertias)
    model = models.get(chosen) or KMeans(n_clusters=chosen, n_init=10, random_state=seed).fit(x)
    pca = PCA(n_components=2, random_state=seed).fit(x)
    scores = pca.transform(x)
    return col.finish(
        labels=model.labels_, centroids=scaler.inverse_transform(model.cluster_centers_), inertias=inertias, k=chosen,
        pca={"explained_variance_ratio": pca.explained_variance_ratio_.tolist(), "components": pca.components_.tolist()},
        scores=scores, data=data,
    )
