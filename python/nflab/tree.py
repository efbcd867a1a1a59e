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
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import numpy as np

from . import _engine, engine
from .records import RecordFile, read_records

#: What the report asks of the engine (crates/report/src/load.rs): worst packets kept,
#: anomaly events listed, time slices of the latency-over-time figure.
WORST_N = 500
MAX_ANOMALIES = 100_000
TIME_SLICES = 16_384

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
        self._analyses: Dict[str, Any] = {}
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

    # -- the engine --------------------------------------------------------

    def anomaly_specs(self) -> List[str]:
        """The anomaly definitions the runs were analysed with: ``[analysis] anomalies`` of the
        first run's params.json that has them (as the report), else of the spec."""
        for r in self.runs:
            a = (r.params.get("analysis") or {}).get("anomalies")
            if isinstance(a, list):
                return [str(x) for x in a]
        return [str(x) for x in ((self.spec.get("analysis") or {}).get("anomalies") or [])]

    @property
    def window_ns(self) -> int:
        """The report's window: about 60 windows over the longest run (block headers only), a
        1-2-2.5-5 number of ms, at least 1 µs (``crates/report/src/load.rs`` ``window_for``)."""
        spans = []
        for r in self.runs:
            sp = _engine.prescan_span(str(r.path / "records.nfr")) if (r.path / "records.nfr").is_file() else None
            spans.append(max(sp[1] - sp[0], 0) if sp else 0)
        return _window_for(max(spans + [0]))

    def engine_options(self, run: Union[str, Run]) -> Dict[str, Any]:
        """The options the report analyses a run with (``figures/analysis.json`` → ``command``):
        ``--worst 500 --window <window_ns>ns --anomaly-events 100000 --anomaly …`` (or
        ``--no-anomalies``), plus the
        drawing data (``series_ns``: 16 384 slices of the run, ``tx_gaps``)."""
        r = self.run(run) if isinstance(run, str) else run
        sp = _engine.prescan_span(str(r.path / "records.nfr")) if (r.path / "records.nfr").is_file() else None
        span = max(sp[1] - sp[0], 0) if sp else 0
        specs = [a for a in self.anomaly_specs() if _parses(a)]
        # No definition: none computed (the report's command says --no-anomalies), not the defaults.
        return {"worst": WORST_N, "window": f"{self.window_ns}ns", "anomaly_events": MAX_ANOMALIES,
                "anomalies": specs, "no_anomalies": not specs or None,
                "series_ns": max(-(-span // TIME_SLICES), 1), "tx_gaps": True}

    def analysis(self, run: Union[str, Run]):
        """The engine's analysis of the run's records.nfr with :meth:`engine_options`
        (an :class:`nflab.engine.Result`, cached), or None when there is no readable record file.
        Its ``summary`` is, field by field, the run's entry of the report's ``figures/analysis.json``."""
        r = self.run(run) if isinstance(run, str) else run
        if r.name not in self._analyses:
            res = None
            if r.record_file() is not None:
                try:
                    res = engine.analyze(r.path / "records.nfr", **self.engine_options(r))
                except ValueError as e:
                    r._records_error = f"records.nfr could not be analysed ({e})"
            self._analyses[r.name] = res
        return self._analyses[r.name]

    def analyze(self, **options):
        """``nflab analyze --json DIR`` with these options (every run's records.nfr, plus
        ``_across_runs`` over them): an :class:`nflab.engine.Result`."""
        return engine.analyze(self.path, **options)

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


def _parses(spec: str) -> bool:
    try:
        engine.parse_anomaly(spec)
        return True
    except ValueError:
        return False


def _window_for(span_ns: int) -> int:
    """``window_for`` of crates/report/src/load.rs, operation for operation (so the float
    rounding is the same): a 1-2-2.5-5 step of ms near span/60, at least 1 µs."""
    raw = max(span_ns, 1) / 60.0 / 1e6
    step = 1.0
    if raw > 0 and math.isfinite(raw):
        p = 10.0 ** math.floor(math.log10(raw))
        step = next((m * p for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * p >= raw * 0.999), 10.0 * p)
    return int(max(step * 1e6, 1e3))


def load(path: Union[str, Path]) -> Experiment:
    """Open an artifact tree."""
    return Experiment(path)
