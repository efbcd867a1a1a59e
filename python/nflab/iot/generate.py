"""Synthetic IoT device populations and their signaling messages, written to Parquet.

A device is active in *activities*: short bursts of dialogs (SAI → PDP_CREATE,
PDP_DELETE → PDP_CREATE, a full attach SAI → UL → SAI → UL_GPRS → PDP_CREATE, ...).
When it is active depends on its planted class:

- ``non_periodic``: Poisson activities (mean gap 30–120 min per device);
- ``periodic``: every 30, 60 or 120 min. Asynchronous devices count the period
  from their last activity on a slightly slow clock (1–3 % longer), so their
  phase drifts through the hour; synchronised devices fire at fixed minutes of the
  hour (0, 5, 15, 35 or 45, plus up to 45 s of delay), as seed 003 §4.2.5 found;
- ``semi_periodic``: the periodic schedule with half of the cycles skipped, plus
  Poisson activities at half the cycle rate;
- ``high_error`` / ``high_reject``: Poisson devices most of whose dialogs fail
  (error responses or incomplete dialogs) or are rejected (inactive SIM).

Every device's messages are written in time order, devices in ascending order,
``devices_per_file`` devices per Parquet file (``messages/part-NNNNN.parquet``),
so an analysis can read a range of devices with predicate pushdown. The truth is
``devices.parquet`` (device, class, synchronised, period_min, sync_minute) and the
parameters ``population.json``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import schema as S

T0_MS = 1_577_836_800_000  # 2020-01-01T00:00:00Z, a full hour, like the seed's trace
SYNC_MINUTES = (0, 5, 15, 35, 45)
PERIODS_MIN = (30, 60, 120)
MIN_GAP_S = 30.0  # activities of one device never overlap (an activity lasts < 25 s)

# Dialog sequences of one activity (seed 003 Table 4.4's common ones) and their weights.
PATTERNS = (
    ((S.PDP_DELETE, S.PDP_CREATE), 0.35),
    ((S.SAI, S.PDP_CREATE), 0.20),
    ((S.SAI,), 0.12),
    ((S.PDP_CREATE, S.PDP_DELETE), 0.10),
    ((S.SAI, S.UL, S.SAI, S.UL_GPRS, S.PDP_CREATE), 0.10),
    ((S.PDP_UPDATE,), 0.08),
    ((S.CL,), 0.05),
)
# Rejected devices (inactive SIMs) mostly retry authentication.
REJECT_PATTERNS = (((S.SAI,), 0.6), ((S.SAI, S.SAI), 0.25), ((S.SAI, S.UL), 0.15))


@dataclass
class Population:
    devices: int = 1000
    days: float = 14.0
    seed: int = 1
    mix: dict = field(
        default_factory=lambda: {
            "non_periodic": 0.35,
            "semi_periodic": 0.2,
            "periodic": 0.25,
            "high_error": 0.1,
            "high_reject": 0.1,
        }
    )
    sync_fraction: float = 0.5  # of the periodic and semi-periodic devices
    base_error: float = 0.02  # error probability of a dialog of a regular device
    base_reject: float = 0.02
    heavy_error: float = 0.6
    heavy_reject: float = 0.7
    devices_per_file: int = 2000

    def check(self):
        if self.devices < 1:
            raise ValueError(f"devices must be at least 1, not {self.devices}")
        if not self.days > 0:
            raise ValueError(f"days must be positive, not {self.days}")
        bad = set(self.mix) - set(S.CLASSES)
        if bad:
            raise ValueError(f"mix has unknown class {sorted(bad)[0]!r}; classes are {', '.join(S.CLASSES)}")
        if any(v < 0 for v in self.mix.values()) or sum(self.mix.values()) <= 0:
            raise ValueError("mix fractions must be non-negative and not all zero")
        if self.devices_per_file < 1:
            raise ValueError(f"devices_per_file must be at least 1, not {self.devices_per_file}")


# -- message templates ---------------------------------------------------------
# A template is the message list of one dialog variant: (op, dir, result) rows.
def _templates():
    out = {}  # (opening op, variant, n_isd) -> list of rows
    for op, resp in S.RESPONSE_OP.items():
        for n_isd in (1, 2) if op in S.WITH_ISD else (0,):
            isd = [(S.ISD, S.REQUEST, S.OK), (S.ISD, S.RESPONSE, S.OK)] * n_isd
            req = [(op, S.REQUEST, S.OK)]
            out[(op, "ok", n_isd)] = req + isd + [(resp, S.RESPONSE, S.OK)]
            out[(op, "error", n_isd)] = req + isd + [(resp, S.RESPONSE, S.ERROR)]
            # Incomplete: the answer never comes (for UL, the last ISD answer is missing too).
            out[(op, "incomplete", n_isd)] = req + isd[:-1]
            out[(op, "reject", n_isd)] = req + [(resp, S.RESPONSE, S.REJECT)]
    keys = list(out)
    lens = np.array([len(out[k]) for k in keys])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    rows = np.array([r for k in keys for r in out[k]], dtype=np.int64)
    return {k: i for i, k in enumerate(keys)}, lens, starts, rows


TEMPLATE_ID, TEMPLATE_LEN, TEMPLATE_START, TEMPLATE_ROWS = _templates()
_VARIANTS = ("ok", "error", "incomplete", "reject")
# Lookup table (op, variant index, n_isd) -> template id.
_TID = np.full((256, 4, 3), -1, dtype=np.int64)
for (_op, _v, _n), _i in TEMPLATE_ID.items():
    _TID[_op, _VARIANTS.index(_v), _n] = _i


# -- activity times --------------------------------------------------------------
def _poisson(rng, horizon_min, mean_gap_min):
    n = int(horizon_min / mean_gap_min * 1.5) + 20
    t = np.cumsum(rng.exponential(mean_gap_min, n)) + rng.uniform(0, mean_gap_min)
    return t[t < horizon_min]


def _periodic(rng, horizon_min, period, sync_minute, keep):
    if sync_minute is None:
        # Fixed intervals on a slow clock: the phase drifts through the hour.
        step = period * (1 + rng.uniform(0.01, 0.03))
        t = rng.uniform(0, period) + step * np.arange(int(horizon_min / step) + 1)
        t = t + rng.uniform(0, 5 / 60, t.size)
    else:
        # Fixed times of the hour, plus up to 45 s of delay.
        cycles = np.arange(int(horizon_min / period) + 1)
        t = cycles * period + (sync_minute % period) + rng.uniform(0, 0.75, cycles.size)
    if keep < 1:
        t = t[rng.random(t.size) < keep]
    return t[t < horizon_min]


def _device_activities(rng, cls, horizon_min, sync):
    """(activity times in minutes, period, sync minute) of one device."""
    if cls in ("non_periodic", "high_error", "high_reject"):
        return _poisson(rng, horizon_min, rng.uniform(30, 120)), None, None
    period = int(rng.choice(PERIODS_MIN))
    minute = int(rng.choice(SYNC_MINUTES)) if sync else None
    if cls == "periodic":
        return _periodic(rng, horizon_min, period, minute, 0.98), period, minute
    t = np.concatenate([_periodic(rng, horizon_min, period, minute, 0.5), _poisson(rng, horizon_min, 2 * period)])
    return np.sort(t), period, minute


def _space(t_min):
    """Push activities apart so that no two of a device overlap."""
    t = np.sort(t_min) * 60.0
    if t.size > 1:
        t = np.maximum.accumulate(t - MIN_GAP_S * np.arange(t.size)) + MIN_GAP_S * np.arange(t.size)
    return t


# -- expansion to dialogs and messages -----------------------------------------
def _pattern_table(patterns):
    seqs = [p for p, _ in patterns]
    w = np.array([w for _, w in patterns], dtype=float)
    lens = np.array([len(s) for s in seqs])
    flat = np.array([op for s in seqs for op in s], dtype=np.int64)
    return lens, np.concatenate([[0], np.cumsum(lens)[:-1]]), flat, w / w.sum()


_REGULAR = _pattern_table(PATTERNS)
_REJECTING = _pattern_table(REJECT_PATTERNS)


def _expand(rng, device, t_s, table):
    """Activities -> dialogs: (device, start second, opening op)."""
    lens, starts, flat, w = table
    pat = rng.choice(lens.size, size=t_s.size, p=w)
    n = lens[pat]
    idx = np.repeat(np.arange(t_s.size), n)
    k = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    ops = flat[starts[pat][idx] + k]
    # Dialogs of an activity 2-5 s apart (an activity lasts < 5 × 5 s = 25 s).
    gaps = rng.uniform(2, 5, idx.size)
    gaps[k == 0] = 0
    offs = np.cumsum(gaps)
    offs -= np.repeat(offs[np.cumsum(n) - n], n)
    return np.full(idx.size, device, dtype=np.int64), t_s[idx] + offs, ops


def _messages(rng, dev, t_s, ops, p_err, p_rej, outcomes):
    """Dialogs -> message columns; counts the planted outcomes into ``outcomes``."""
    u = rng.random(ops.size)
    variant = np.where(u < p_rej, 3, np.where(u < p_rej + p_err, np.where(rng.random(ops.size) < 0.5, 1, 2), 0))
    outcomes["SUCCESS"] += int(np.sum(variant == 0))
    outcomes["ERROR"] += int(np.sum((variant == 1) | (variant == 2)))
    outcomes["REJECT"] += int(np.sum(variant == 3))
    n_isd = np.where(np.isin(ops, S.WITH_ISD), rng.integers(1, 3, ops.size), 0)
    tid = _TID[ops, variant, n_isd]
    n = TEMPLATE_LEN[tid]
    idx = np.repeat(np.arange(ops.size), n)
    k = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
    rows = TEMPLATE_ROWS[TEMPLATE_START[tid][idx] + k]
    # Messages of a dialog 20-200 ms apart, strictly increasing.
    step = rng.integers(20, 200, ops.size)
    t_ms = T0_MS + np.round(t_s * 1000).astype(np.int64)[idx] + k * step[idx]
    return {
        "device": dev[idx].astype(np.uint32),
        "t_ms": t_ms,
        "op": rows[:, 0].astype(np.uint8),
        "dir": rows[:, 1].astype(np.uint8),
        "result": rows[:, 2].astype(np.uint8),
    }


def _device_classes(pop, rng):
    names = list(pop.mix)
    w = np.array([pop.mix[c] for c in names], dtype=float)
    counts = np.floor(w / w.sum() * pop.devices).astype(int)
    counts[np.argmax(w)] += pop.devices - counts.sum()
    cls = np.repeat(np.array(names, dtype=object), counts)
    rng.shuffle(cls)
    return cls


def generate(pop: Population, out: str | Path, progress=None) -> dict:
    """Writes ``out/messages/part-*.parquet``, ``out/devices.parquet`` and
    ``out/population.json``; returns the population's counts (messages, and
    dialogs by planted outcome)."""
    pop.check()
    out = Path(out)
    (out / "messages").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(pop.seed)
    horizon = pop.days * 1440.0
    cls = _device_classes(pop, rng)
    truth = {"device": [], "class": [], "synchronised": [], "period_min": [], "sync_minute": []}
    messages = 0
    outcomes = {"SUCCESS": 0, "ERROR": 0, "REJECT": 0}
    for part, lo in enumerate(range(0, pop.devices, pop.devices_per_file)):
        cols = []
        for d in range(lo, min(lo + pop.devices_per_file, pop.devices)):
            c = cls[d]
            sync = c in ("periodic", "semi_periodic") and rng.random() < pop.sync_fraction
            t_min, period, minute = _device_activities(rng, c, horizon, sync)
            t_s = _space(t_min)
            table = _REJECTING if c == "high_reject" else _REGULAR
            dev, ts, ops = _expand(rng, d, t_s, table)
            p_err = pop.heavy_error if c == "high_error" else pop.base_error
            p_rej = pop.heavy_reject if c == "high_reject" else pop.base_reject
            cols.append(_messages(rng, dev, ts, ops, p_err, p_rej, outcomes))
            for k, v in (("device", d), ("class", c), ("synchronised", sync), ("period_min", period), ("sync_minute", minute)):
                truth[k].append(v)
        table = pa.table({k: np.concatenate([c[k] for c in cols]) for k in S.MESSAGE_SCHEMA.names}, schema=S.MESSAGE_SCHEMA)
        pq.write_table(table, out / "messages" / f"part-{part:05d}.parquet", compression="zstd", row_group_size=1 << 20)
        messages += table.num_rows
        if progress:
            progress(min(lo + pop.devices_per_file, pop.devices), pop.devices, messages)
    pq.write_table(
        pa.table(
            {
                "device": pa.array(truth["device"], pa.uint32()),
                "class": pa.array(truth["class"], pa.string()),
                "synchronised": pa.array(truth["synchronised"], pa.bool_()),
                "period_min": pa.array(truth["period_min"], pa.int16()),
                "sync_minute": pa.array(truth["sync_minute"], pa.int16()),
            }
        ),
        out / "devices.parquet",
    )
    info = {"population": asdict(pop), "messages": messages, "dialogs": outcomes, "t0_ms": T0_MS, "horizon_min": horizon}
    (out / "population.json").write_text(json.dumps(info, indent=1) + "\n")
    return info

