"""Read and write nflab per-packet record files (``.nfr``, version 1).

The format is specified in ``docs/formats.md``: a header (magic ``NFLABREC``,
version, JSON metadata, CRC32), then blocks of up to 65 536 records of 40
bytes each, and a JSON trailer block with the sent counts. A damaged tail is
not an error: like the Rust reader, :func:`read_records` returns every record
before the bad block and says why it stopped in ``tail``.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Union

import numpy as np

MAGIC = b"NFLABREC"
BLOCK_MAGIC = b"NFBK"
VERSION = 1
KIND_RECORDS = 1
KIND_TRAILER = 2
RECORD_BYTES = 40
MAX_BLOCK_RECORDS = 65536
MAX_JSON_BYTES = 16 * 1024 * 1024

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
        """Records without warm-up packets and without duplicate copies (first copy kept)."""
        r = self.records
        if len(r) == 0:
            return r
        warm = self.warmup()
        if warm:
            w = np.zeros(len(r), dtype=np.uint64)
            for flow, wu in warm.items():
                w[r["flow"] == flow] = wu
            r = r[r["seq"] >= w]
        key = r["seq"].astype(np.uint64) * np.uint64(65536) + r["flow"].astype(np.uint64)
        _, first = np.unique(key, return_index=True)
        return r[np.sort(first)]


def read_records(path: Union[str, Path]) -> RecordFile:
    """Read a whole ``.nfr`` file."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < 16 or data[:8] != MAGIC:
        raise RecordFormatError(f"{path} is not an nflab record file (no NFLABREC magic)")
    version, meta_len = struct.unpack_from("<II", data, 8)
    if version != VERSION:
        raise RecordFormatError(f"{path}: record format version {version}, this reader knows {VERSION}")
    if meta_len > MAX_JSON_BYTES or 16 + meta_len + 4 > len(data):
        raise RecordFormatError(f"{path}: header cut short or metadata too large")
    meta_bytes = data[16 : 16 + meta_len]
    (crc,) = struct.unpack_from("<I", data, 16 + meta_len)
    if zlib.crc32(meta_bytes) != crc:
        raise RecordFormatError(f"{path}: metadata CRC mismatch")
    try:
        meta = json.loads(meta_bytes)
    except ValueError as e:
        raise RecordFormatError(f"{path}: metadata is not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise RecordFormatError(f"{path}: metadata is not a JSON object")

    off = 16 + meta_len + 4
    chunks: List[np.ndarray] = []
    trailer = None
    tail = "no-trailer"
    discarded = 0
    index = 0
    while off < len(data):
        if trailer is not None:
            tail = "truncated: unexpected bytes after the trailer block"
            discarded = len(data) - off
            break
        if off + 16 > len(data):
            tail = f"truncated: block {index} header cut short at byte {off}"
            discarded = len(data) - off
            break
        magic = data[off : off + 4]
        kind = data[off + 4]
        count, bcrc = struct.unpack_from("<II", data, off + 8)
        more = "corruption in the middle of the file"
        if magic != BLOCK_MAGIC or kind not in (KIND_RECORDS, KIND_TRAILER):
            tail = f"truncated: block {index} at byte {off} has a bad magic or kind"
            discarded = len(data) - off
            break
        size = count * RECORD_BYTES if kind == KIND_RECORDS else count
        limit = MAX_BLOCK_RECORDS if kind == KIND_RECORDS else MAX_JSON_BYTES
        if count > limit:
            tail = f"truncated: block {index} at byte {off} has an implausible count {count}"
            discarded = len(data) - off
            break
        start = off + 16
        if start + size > len(data):
            tail = f"truncated: block {index} payload cut short at byte {off}"
            discarded = len(data) - off
            break
        payload = data[start : start + size]
        if zlib.crc32(payload) != bcrc:
            last = start + size == len(data)
            tail = f"truncated: block {index} at byte {off} fails its CRC" + ("" if last else f" ({more})")
            discarded = len(data) - off
            break
        if kind == KIND_RECORDS:
            if count:
                chunks.append(np.frombuffer(payload, dtype=RECORD_DTYPE).copy())
        else:
            try:
                trailer = json.loads(payload)
            except ValueError:
                tail = f"truncated: trailer JSON of block {index} is invalid"
                discarded = len(data) - off
                break
            tail = "complete"
        off = start + size
        index += 1
    records = np.concatenate(chunks) if chunks else np.zeros(0, dtype=RECORD_DTYPE)
    if tail.startswith("truncated") and trailer is not None and "after the trailer" not in tail:
        trailer = None
    return RecordFile(meta=meta, records=records, trailer=trailer, tail=tail, discarded_bytes=discarded)


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
