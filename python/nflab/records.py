"""Read and write nflab per-packet record files (``.nfr``, version 1).

The format is specified in ``docs/formats.md``: a header (magic ``NFLABREC``,
version, JSON metadata, CRC32), then blocks of up to 65 536 records of 40
bytes each, and a JSON trailer block with the sent counts. :func:`read_records`
reads through the engine (``crates/analyze``, ``record_table``): a damaged
tail is not an error, every record before the bad block is returned and
``tail`` says why reading stopped, and which records are measured (warm-up,
duplicate copies and packets later than the reorder window are not) is the
engine's decision, the one every statistic is computed on.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Union

import numpy as np

from . import _engine

MAGIC = b"NFLABREC"
BLOCK_MAGIC = b"NFBK"
VERSION = 1
KIND_RECORDS = 1
KIND_TRAILER = 2
RECORD_BYTES = 40

#: One record as a numpy dtype (little-endian, 40 bytes).
RECORD_DTYPE = np.dtype(
    [
        ("seq", "<u8"),
        ("tx_ns", "<u8"),
        ("rx_ns", "<u8"),
        ("flow", "<u2"),
        ("wire_len", "<u2"),
        ("flags", "<u2"),
        ("_reserved", "V10"),
    ]
)
assert RECORD_DTYPE.itemsize == RECORD_BYTES

#: The engine's columns (name, little-endian dtype), as ``_engine.read_records`` returns them.
_COLUMNS = {"seq": "<u8", "flow": "<u2", "tx_ns": "<u8", "rx_ns": "<u8", "wire_len": "<u2", "flags": "<u2",
            "measured": "u1"}


class RecordFormatError(ValueError):
    """The file is not a usable ``.nfr`` file (bad magic, version or header)."""


@dataclass
class RecordFile:
    """Everything read from one ``.nfr`` file."""

    meta: Dict[str, Any]
    records: np.ndarray
    trailer: Optional[Dict[str, Any]]
    #: ``"complete"``, ``"no-trailer"`` or ``"truncated: <reason>"``.
    tail: str
    discarded_bytes: int = 0
    #: ``measured_mask[i]``: the engine measures ``records[i]``.
    measured_mask: Optional[np.ndarray] = None

    @property
    def complete(self) -> bool:
        return self.tail == "complete"

    def warmup(self) -> Dict[int, int]:
        """Warm-up sequence numbers per flow (``seq < warmup`` is excluded from analysis)."""
        if not self.trailer:
            return {}
        return {int(s.get("flow", 0)): int(s.get("warmup", 0)) for s in self.trailer.get("sent", [])}

    def sent(self) -> Optional[int]:
        """Packets sent after warm-up, summed over flows, if the trailer has them."""
        if not self.trailer:
            return None
        return sum(max(0, int(s.get("sent", 0)) - int(s.get("warmup", 0))) for s in self.trailer.get("sent", []))

    def measured(self) -> np.ndarray:
        """The records the engine measures, in file order: without warm-up packets, duplicate
        copies (the first is kept) and packets later than the reorder window."""
        if self.measured_mask is None:
            raise ValueError("this RecordFile was not read by read_records: the engine has not marked it")
        return self.records[self.measured_mask]


def read_records(path: Union[str, Path], reorder_window: int = 65_536) -> RecordFile:
    """Read a whole ``.nfr`` file through the engine (``reorder_window``: sequence numbers per
    flow, as ``nflab analyze --reorder-window``)."""
    path = Path(path)
    try:
        meta, trailer, tail, discarded, cols = _engine.read_records(str(path), int(reorder_window))
    except ValueError as e:
        raise RecordFormatError(str(e)) from None
    c = {name: np.frombuffer(b, dtype=_COLUMNS[name]) for name, b in cols}
    records = np.zeros(len(c["seq"]), dtype=RECORD_DTYPE)
    for name in ("seq", "flow", "tx_ns", "rx_ns", "wire_len", "flags"):
        records[name] = c[name]
    return RecordFile(meta=json.loads(meta), records=records, trailer=json.loads(trailer) if trailer else None,
                      tail=tail, discarded_bytes=int(discarded), measured_mask=c["measured"].astype(bool))


def write_records(
    path: Union[str, Path],
    records: Iterable[Any],
    meta: Optional[Dict[str, Any]] = None,
    trailer: Optional[Dict[str, Any]] = None,
    block_records: int = 4096,
) -> None:
    """Write a ``.nfr`` file (for fixtures and importers).

    ``records`` is a structured array of :data:`RECORD_DTYPE` or an iterable of
    ``(seq, flow, tx_ns, rx_ns)`` tuples. Without ``trailer`` the file ends
    like one whose writer was killed between blocks.
    """
    if isinstance(records, np.ndarray) and records.dtype == RECORD_DTYPE:
        arr = records
    else:
        rows = list(records)
        arr = np.zeros(len(rows), dtype=RECORD_DTYPE)
        for i, (seq, flow, tx, rx) in enumerate(rows):
            arr[i]["seq"], arr[i]["flow"], arr[i]["tx_ns"], arr[i]["rx_ns"] = seq, flow, tx, rx
            arr[i]["wire_len"] = 64
    m = json.dumps(meta or {"clock": {"source": "CLOCK_REALTIME", "resolution_ns": 1}}).encode()
    out = bytearray(MAGIC + struct.pack("<II", VERSION, len(m)) + m + struct.pack("<I", zlib.crc32(m)))
    for i in range(0, len(arr), block_records):
        payload = arr[i : i + block_records].tobytes()
        n = len(arr[i : i + block_records])
        out += BLOCK_MAGIC + bytes([KIND_RECORDS, 0, 0, 0]) + struct.pack("<II", n, zlib.crc32(payload)) + payload
    if trailer is not None:
        t = json.dumps(trailer).encode()
        out += BLOCK_MAGIC + bytes([KIND_TRAILER, 0, 0, 0]) + struct.pack("<II", len(t), zlib.crc32(t)) + t
    Path(path).write_bytes(bytes(out))
