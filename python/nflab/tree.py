"""An nflab artifact tree (DESIGN §3.2) as frames.

::

    DIR/spec.toml  env.json  results.parquet  report.html  figures/
    DIR/runs/NNN/{params.json, summary.json, records.nfr, gen.json, ...}

:class:`Experiment` reads it lazily and tolerates damage the way the HTML
report does: a run without ``summary.json`` or with a cut-off record file is
still listed, and :attr:`Experiment.problems` says what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from .records import RecordFile, read_records

try:  # Python 3.11+
    import tomllib as _toml
except ModuleNotFoundError:  # pragma: no cover
    try:
        import tomli as _toml  # type: ignore
    except ModuleNotFoundError:
        _toml = None  # type: ignore


class NotAnExperiment(ValueError):
    """The directory has neither ``spec.toml`` nor ``runs/``."""


def _frame(rows: List[Dict[str, Any]], backend: str):
    if backend == "polars":
        import polars as pl

        return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
    if backend == "pandas":
        import pandas as pd

        return pd.DataFrame(rows)
    raise ValueError(f"backend must be 'polars' or 'pandas', not {backend!r}")


def _flatten(d: Any, prefix: str = "", out: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``{"a": {"b": 1}, "l": [{"x": 2}]}`` → ``{"a.b": 1, "l.0.x": 2}``; lists of scalars become JSON text."""
    out = {} if out is None else out
    if isinstance(d, dict):
        for k, v in d.items():
            _flatten(v, f"{prefix}{k}.", out)
    elif isinstance(d, list) and d and all(isinstance(x, dict) for x in d):
        for i, x in enumerate(d):
            _flatten(x, f"{prefix}{i}.", out)
    elif isinstance(d, list):
        out[prefix[:-1]] = json.dumps(d)
    else:
        out[prefix[:-1]] = d
    return out


def _read_json(p: Path) -> Optional[Any]:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


class Run:
    """One ``runs/NNN`` directory."""

    def __init__(self, path: Path):
        self.path = path
        self.name = path.name
        self.params: Dict[str, Any] = _read_json(path / "params.json") or {}
        self.summary: Optional[Dict[str, Any]] = _read_json(path / "summary.json")
        self.gen: Optional[Dict[str, Any]] = _read_json(path / "gen.json")
        self._records: Optional[RecordFile] = None
        self._records_error: Optional[str] = None

    @property
    def sweep(self) -> Dict[str, Any]:
        """The swept values of this run, ``{"traffic.rate_pps": 10000, ...}``."""
        return dict(self.params.get("sweep") or {})

    @property
    def dut(self) -> str:
        return str((self.params.get("dut") or {}).get("kind", "?"))

    def record_file(self) -> Optional[RecordFile]:
        """The parsed ``records.nfr`` (cached), or None if missing/unreadable."""
        if self._records is None and self._records_error is None:
            p = self.path / "records.nfr"
            if not p.exists():
                self._records_error = "records.nfr is missing"
            else:
                try:
                    self._records = read_records(p)
                except (OSError, ValueError) as e:
                    self._records_error = f"records.nfr is unreadable ({e})"
        return self._records

    def latencies(self) -> np.ndarray:
        """One-way latencies (ns, int64) of the measured packets, in transmit order."""
        f = self.record_file()
        if f is None:
            return np.zeros(0, dtype=np.int64)
        r = f.measured()
        r = r[np.argsort(r["tx_ns"], kind="stable")]
        return r["rx_ns"].astype(np.int64) - r["tx_ns"].astype(np.int64)

    def problems(self) -> List[str]:
        out = []
        if not self.params:
            out.append("params.json is missing")
        if self.summary is None:
            out.append("summary.json is missing: the run did not finish")
        f = self.record_file()
        if f is None:
            out.append(self._records_error or "records.nfr is missing")
        else:
            if not f.complete:
                out.append(f"records.nfr ends early ({f.tail})")
            if len(f.records) == 0:
                out.append("no packet was received")
        return out

    def __repr__(self) -> str:
        return f"Run({self.name!r}, {self.sweep})"


class Experiment:
    """An artifact tree written by ``nflab run``."""

    def __init__(self, path: Union[str, Path]):
        self.path = Path(path)
        if not self.path.is_dir() or not ((self.path / "spec.toml").is_file() or (self.path / "runs").is_dir()):
            raise NotAnExperiment(
                f"{self.path} is not an nflab experiment directory (it has no spec.toml and no runs/): "
                "give the directory that `nflab run` printed"
            )
        self.spec_text: Optional[str] = None
        self.spec: Dict[str, Any] = {}
        sp = self.path / "spec.toml"
        if sp.is_file():
            self.spec_text = sp.read_text()
            if _toml is not None:
                try:
                    self.spec = _toml.loads(self.spec_text)
                except Exception:  # a broken spec is reported, not raised
                    self.spec = {}
        self.env: Dict[str, Any] = _read_json(self.path / "env.json") or {}
        rd = self.path / "runs"
        self.runs: List[Run] = [Run(p) for p in sorted(rd.iterdir()) if p.is_dir()] if rd.is_dir() else []

    # -- what is there -----------------------------------------------------

    @property
    def name(self) -> str:
        return str((self.spec.get("experiment") or {}).get("name") or self.path.name)

    @property
    def sweep_keys(self) -> List[str]:
        keys = list((self.spec.get("sweep") or {}).keys())
        for r in self.runs:
            for k in r.sweep:
                if k not in keys:
                    keys.append(k)
        return keys

    @property
    def problems(self) -> List[str]:
        out = []
        if self.spec_text is None:
            out.append("spec.toml is missing")
        if not self.env:
            out.append("env.json is missing")
        if not self.runs:
            out.append("runs/ is missing or empty")
        for r in self.runs:
            out.extend(f"run {r.name}: {p}" for p in r.problems())
        return out

    def run(self, name: str) -> Run:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(f"no run {name!r}; runs are {[r.name for r in self.runs]}")

    def config_label(self, run: Run) -> str:
        """Short label of the run's configuration, as in report.html: ``loopback · 10 kpps``."""
        parts = []
        for k in self.sweep_keys:
            if k in run.sweep:
                parts.append(_fmt_param(k, run.sweep[k]))
        return " · ".join(parts) if parts else str((self.spec.get("dut") or {}).get("kind", "all runs"))

    # -- frames ------------------------------------------------------------

    def results(self, backend: str = "polars"):
        """``results.parquet``: one row per run. Built from the summaries when the file is missing."""
        p = self.path / "results.parquet"
        if p.is_file():
            if backend == "polars":
                import polars as pl

                return pl.read_parquet(p)
            if backend == "pandas":
                import pandas as pd

                return pd.read_parquet(p)
            raise ValueError(f"backend must be 'polars' or 'pandas', not {backend!r}")
        return self.summaries(backend)

    def summaries(self, backend: str = "polars"):
        """Every run's ``summary.json`` flattened (``latency_ns.p99``, ``rate.rx_pps``, ...),
        with ``run``, ``repetition``, ``config`` and the swept parameters (``param.<key>``)."""
        rows = []
        for r in self.runs:
            row: Dict[str, Any] = {"run": r.name, "repetition": r.params.get("repetition"), "config": self.config_label(r), "dut": r.dut}
            for k in self.sweep_keys:
                row[f"param.{k}"] = r.sweep.get(k)
            if r.summary is not None:
                s = dict(r.summary)
                s.pop("percentiles", None)
                for k, v in _flatten(s).items():
                    row[k] = v
            row["has_summary"] = r.summary is not None
            rows.append(row)
        return _frame(rows, backend)

    def records(self, run: Optional[str] = None, backend: str = "polars", warmup: bool = False):
        """Per-packet records (``run``, ``seq``, ``flow``, ``tx_ns``, ``rx_ns``, ``latency_ns``,
        ``t_s`` = seconds since the run's first measured transmit) of one run or all.
        Warm-up packets and duplicate copies are left out unless ``warmup=True``."""
        runs = [self.run(run)] if run is not None else self.runs
        cols: Dict[str, List[np.ndarray]] = {k: [] for k in ["run", "seq", "flow", "tx_ns", "rx_ns", "latency_ns", "t_s", "wire_len"]}
        for r in runs:
            f = r.record_file()
            if f is None:
                continue
            a = f.records if warmup else f.measured()
            a = a[np.argsort(a["tx_ns"], kind="stable")]
            t0 = a["tx_ns"][0] if len(a) else 0
            cols["run"].append(np.full(len(a), r.name, dtype=object))
            cols["seq"].append(a["seq"].astype(np.int64))
            cols["flow"].append(a["flow"].astype(np.int32))
            cols["tx_ns"].append(a["tx_ns"].astype(np.int64))
            cols["rx_ns"].append(a["rx_ns"].astype(np.int64))
            cols["latency_ns"].append(a["rx_ns"].astype(np.int64) - a["tx_ns"].astype(np.int64))
            cols["t_s"].append((a["tx_ns"] - t0).astype(np.float64) / 1e9)
            cols["wire_len"].append(a["wire_len"].astype(np.int32))
        data = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in cols.items()}
        if backend == "polars":
            import polars as pl

            data["run"] = data["run"].astype(str)
            return pl.DataFrame(data)
        if backend == "pandas":
            import pandas as pd

            return pd.DataFrame(data)
        raise ValueError(f"backend must be 'polars' or 'pandas', not {backend!r}")

    def __repr__(self) -> str:
        return f"Experiment({str(self.path)!r}, runs={len(self.runs)})"


def _fmt_num(v: float) -> str:
    a = abs(v)
    if a >= 1e6:
        s = f"{v / 1e6:.2f}".rstrip("0").rstrip(".") + "M"
    elif a >= 1e4:
        s = f"{v / 1e3:.1f}".rstrip("0").rstrip(".") + "k"
    else:
        s = f"{v:g}"
    return s


def _fmt_param(key: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if key.endswith("_pps"):
            if abs(v) >= 1e6:
                return f"{v / 1e6:.2f}".rstrip("0").rstrip(".") + " Mpps"
            if abs(v) >= 1e3:
                return f"{v / 1e3:.1f}".rstrip("0").rstrip(".") + " kpps"
            return f"{v:.0f} pps"
        if key.endswith("_bytes"):
            return f"{_fmt_num(v)} B"
        return f"{key.rsplit('.', 1)[-1]}={_fmt_num(v)}"
    return f"{key.rsplit('.', 1)[-1]}={v}"


def load(path: Union[str, Path]) -> Experiment:
    """Open an artifact tree."""
    return Experiment(path)
