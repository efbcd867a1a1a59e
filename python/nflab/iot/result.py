"""Collects what the engines compute per range of devices and writes the
analysis: ``features.parquet`` (one row per device), ``dialog_types.parquet``,
``sequences.parquet`` (dialog patterns of sequences and their counts) and
``analysis.json``. Large intermediate tables (inter-sequence gaps per device,
PDP_CREATE times) go to ``work/`` as Parquet and are read back lazily."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl

from . import classify
from . import schema as S


class Collector:
    def __init__(self, out: Path, engine: str, messages: int, t0_ms: int, horizon_min: int):
        self.out = Path(out)
        self.work = self.out / "work"
        if self.work.exists():
            shutil.rmtree(self.work)
        for d in ("gaps", "pdp"):
            (self.work / d).mkdir(parents=True)
        self.info = {"engine": engine, "messages": int(messages), "t0_ms": int(t0_ms), "horizon_min": int(horizon_min)}
        self._dialogs, self._patterns, self._features = [], [], []
        self._n = 0

    # -- per range -------------------------------------------------------------
    def add_dialogs(self, df: pl.DataFrame):
        self._dialogs.append(df.with_columns(pl.col("count").cast(pl.Int64)))

    def add_patterns(self, df: pl.DataFrame):
        df = df.with_columns(pl.col("count").cast(pl.Int64))
        self._patterns.append(df)
        if len(self._patterns) > 8:  # keep the running total small
            self._patterns = [pl.concat(self._patterns).group_by("pattern").agg(pl.col("count").sum())]

    def add_gaps(self, df: pl.DataFrame):
        df.select(pl.col("device").cast(pl.UInt32), pl.col("gap").cast(pl.Int32), pl.col("count").cast(pl.Int64)).write_parquet(
            self.work / "gaps" / f"part-{self._n:05d}.parquet")
        self._n += 1

    def add_pdp(self, df: pl.DataFrame):
        df.select(pl.col("device").cast(pl.UInt32), pl.col("moh").cast(pl.Int8), "synchronised", "t_ms").write_parquet(
            self.work / "pdp" / f"part-{self._n:05d}.parquet")

    def add_features(self, df: pl.DataFrame):
        self._features.append(df.select(
            pl.col("device").cast(pl.UInt32), pl.col("dialogs").cast(pl.Int64), "error_rate", "reject_rate",
            pl.col("periodicity").fill_null(0.0), pl.col("sequences").cast(pl.Int64), "max_density",
            pl.col("pdp_create").cast(pl.Int64), "synchronised"))

    def features(self) -> pl.DataFrame:
        if not hasattr(self, "_feat"):
            self._feat = pl.concat(self._features).sort("device")
            self._features = []
        return self._feat

    # -- over all devices ------------------------------------------------------
    def finish(self, labels, centroids, inertias, k, pca, scores, data: Path, gaps_glob=None, pdp_glob=None) -> dict:
        names = classify.name_clusters(np.asarray(centroids))
        feats = self.features().with_columns(
            pl.Series("cluster", np.asarray(labels, dtype=np.int32)),
            pl.Series("class", [names[i] for i in labels], dtype=pl.String),
            pl.Series("pc1", np.asarray(scores)[:, 0]), pl.Series("pc2", np.asarray(scores)[:, 1]),
        )
        feats.write_parquet(self.out / "features.parquet")
        dialogs = pl.concat(self._dialogs).group_by("type", "outcome").agg(pl.col("count").sum()).sort("count", descending=True)
        dialogs.write_parquet(self.out / "dialog_types.parquet")
        patterns = pl.concat(self._patterns).group_by("pattern").agg(pl.col("count").sum()).sort(["count", "pattern"], descending=[True, False])
        patterns.write_parquet(self.out / "sequences.parquet")
        n_dialogs = int(dialogs["count"].sum())
        n_seq = int(patterns["count"].sum())

        classes = feats.select("device", "class").lazy()
        gaps = pl.scan_parquet(gaps_glob or str(self.work / "gaps" / "*.parquet")).select(
            pl.col("device").cast(pl.UInt32), pl.col("gap").cast(pl.Int32), pl.col("count").cast(pl.Int64))
        hist = gaps.join(classes, on="device").group_by("class", "gap").agg(pl.col("count").sum()).collect(engine="streaming")
        ks = classify.ks_between({c: (g["gap"].to_numpy(), g["count"].to_numpy()) for (c,), g in hist.partition_by("class", as_dict=True).items()})

        pdp = pl.scan_parquet(pdp_glob or str(self.work / "pdp" / "*.parquet")).select(
            pl.col("device").cast(pl.UInt32), pl.col("moh").cast(pl.Int8), "synchronised", "t_ms")
        moh = pdp.group_by("synchronised", "moh").agg(pl.len().alias("count")).collect(engine="streaming").sort("synchronised", "moh")
        density = {}
        for sync in (False, True):
            sel = moh.filter(pl.col("synchronised") == sync)
            c = np.zeros(60)
            c[sel["moh"].to_numpy().astype(int)] = sel["count"].to_numpy()
            density["synchronised" if sync else "non_synchronised"] = (c / c.sum()).tolist() if c.sum() else None
        arrivals = {}
        for sync in (False, True):
            t = pdp.filter(pl.col("synchronised") == sync).select("t_ms").collect(engine="streaming")["t_ms"].to_numpy()
            arrivals["synchronised" if sync else "non_synchronised"] = classify.exponential_fit(t)

        sync_col = feats["synchronised"]
        result = dict(self.info)
        result.update({
            "devices": feats.height,
            "dialogs": n_dialogs,
            "dialog_types": {f"{r['type']}": int(r["count"]) for r in dialogs.iter_rows(named=True)},
            "sequences": n_seq,
            "top_sequences": [{"pattern": r["pattern"], "count": int(r["count"]), "fraction": r["count"] / n_seq}
                              for r in patterns.head(20).iter_rows(named=True)],
            "kmeans": {
                "features": list(classify.FEATURES),
                "inertia": {str(kk): v for kk, v in sorted(inertias.items())},
                "k": int(k), "k_by": "elbow" if k == classify.elbow(inertias) else "given",
                "clusters": [{"cluster": i, "name": names[i], "centroid": dict(zip(classify.FEATURES, map(float, centroids[i]))),
                              "devices": int(np.sum(np.asarray(labels) == i))} for i in range(len(names))],
            },
            "pca": {"features": list(classify.FEATURES), **pca},
            "synchronisation": {
                "threshold": S.SYNC_DENSITY, "min_sequences": S.SYNC_MIN_SEQUENCES,
                "considered": int(sync_col.is_not_null().sum()), "synchronised": int(sync_col.fill_null(False).sum()),
                "minute_of_hour_density": density,
            },
            "ks_inter_sequence": ks,
            "arrivals_pdp_create": arrivals,
        })
        truth = data / "devices.parquet"
        if truth.exists():
            result["truth"] = score(feats, pl.read_parquet(truth))
        shutil.rmtree(self.work)
        (self.out / "analysis.json").write_text(json.dumps(result, indent=1) + "\n")
        return result


def score(feats: pl.DataFrame, truth: pl.DataFrame) -> dict:
    """The analysis against the planted population: adjusted Rand index of the
    clusters, the fraction named as planted, and the synchronisation classifier's
    accuracy on the devices it considered."""
    from sklearn.metrics import adjusted_rand_score

    j = feats.join(truth.rename({"class": "planted", "synchronised": "planted_sync"}), on="device")
    judged = j.filter(pl.col("synchronised").is_not_null())
    return {
        "devices": j.height,
        "adjusted_rand_index": float(adjusted_rand_score(j["planted"].to_list(), j["class"].to_list())),
        "named_as_planted": float((j["planted"] == j["class"]).mean()),
        "sync_judged": judged.height,
        "sync_accuracy": float((judged["synchronised"] == judged["planted_sync"]).mean()) if judged.height else None,
    }
