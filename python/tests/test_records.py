import json
import struct
import zlib

import numpy as np
import pytest

from nflab.records import RECORD_DTYPE, RecordFormatError, read_records, write_records


def handmade(records, trailer=None, meta=b'{"run_id":"x","clock":{"source":"CLOCK_MONOTONIC","resolution_ns":1}}'):
    """A file built field by field from the table in docs/formats.md, independently of write_records."""
    out = b"NFLABREC" + struct.pack("<II", 1, len(meta)) + meta + struct.pack("<I", zlib.crc32(meta))
    payload = b"".join(struct.pack("<QQQHHH10x", s, tx, rx, fl, 64, 1) for s, fl, tx, rx in records)
    out += b"NFBK" + bytes([1, 0, 0, 0]) + struct.pack("<II", len(records), zlib.crc32(payload)) + payload
    if trailer is not None:
        t = json.dumps(trailer).encode()
        out += b"NFBK" + bytes([2, 0, 0, 0]) + struct.pack("<II", len(t), zlib.crc32(t)) + t
    return out


def test_reads_a_file_built_from_the_spec(tmp_path):
    p = tmp_path / "a.nfr"
    p.write_bytes(handmade([(0, 0, 100, 250), (1, 0, 200, 260), (2, 3, 300, 1300)],
                           trailer={"sent": [{"flow": 0, "sent": 5, "warmup": 1}], "interrupted": False}))
    f = read_records(p)
    assert f.complete and f.tail == "complete"
    assert f.meta["clock"]["source"] == "CLOCK_MONOTONIC"
    assert list(f.records["seq"]) == [0, 1, 2]
    assert list(f.records["rx_ns"] - f.records["tx_ns"]) == [150, 60, 1000]
    assert list(f.records["flow"]) == [0, 0, 3]
    assert f.records.dtype.itemsize == 40
    assert f.sent() == 4
    # Warm-up (seq < 1 on flow 0) is excluded; flow 3 has no warm-up.
    assert list(f.measured()["seq"]) == [1, 2]


def test_round_trip_and_duplicates(tmp_path):
    arr = np.zeros(10_000, dtype=RECORD_DTYPE)
    arr["seq"] = np.arange(10_000)
    arr["tx_ns"] = np.arange(10_000) * 1000
    arr["rx_ns"] = arr["tx_ns"] + 5000
    arr[5000]["seq"] = 4999  # a duplicate copy of seq 4999
    p = tmp_path / "b.nfr"
    write_records(p, arr, trailer={"sent": [{"flow": 0, "sent": 10_000, "warmup": 0}]})
    f = read_records(p)
    assert f.complete and len(f.records) == 10_000
    assert np.array_equal(f.records["tx_ns"], arr["tx_ns"])
    assert len(f.measured()) == 9_999


def test_truncated_tail_keeps_whole_blocks(tmp_path):
    arr = np.zeros(10_000, dtype=RECORD_DTYPE)
    arr["seq"] = np.arange(10_000)
    p = tmp_path / "c.nfr"
    write_records(p, arr, trailer={"sent": []}, block_records=4096)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 2000])  # cut inside the third block (and lose the trailer)
    f = read_records(p)
    assert f.tail.startswith("truncated") and "ends inside the block payload" in f.tail
    assert len(f.records) == 8192 and f.trailer is None
    # No trailer at all, but whole blocks: "no-trailer".
    write_records(p, arr, trailer=None)
    assert read_records(p).tail == "no-trailer"


def test_crc_mismatch_drops_the_block(tmp_path):
    arr = np.zeros(5000, dtype=RECORD_DTYPE)
    p = tmp_path / "d.nfr"
    write_records(p, arr, trailer={"sent": []})
    b = bytearray(p.read_bytes())
    hdr = 16 + struct.unpack_from("<I", b, 12)[0] + 4
    b[hdr + 16 + 4096 * 40 + 16 + 5] ^= 0xFF  # a byte in the second block's payload
    p.write_bytes(bytes(b))
    f = read_records(p)
    assert len(f.records) == 4096
    assert "CRC" in f.tail and "middle of the file" in f.tail


def test_not_a_record_file(tmp_path):
    p = tmp_path / "e.nfr"
    p.write_bytes(b"hello world, not records")
    with pytest.raises(RecordFormatError, match="not an nflab record file"):
        read_records(p)


def test_measured_is_the_engines_decision(tmp_path):
    """Warm-up, a duplicate copy and a packet later than the reorder window are left out, and
    what is left is the packet count the engine's summary reports."""
    import nflab

    rows = [(0, 0, 0, 1000), (1, 0, 10, 1010), (2, 0, 20, 1020), (4, 0, 40, 1040), (5, 0, 50, 1050),
            (5, 0, 50, 1050), (20, 0, 200, 1200), (3, 0, 30, 1030), (0, 1, 25, 1025)]
    p = tmp_path / "m.nfr"
    write_records(p, rows, trailer={"sent": [{"flow": 0, "sent": 21, "warmup": 2}, {"flow": 1, "sent": 1, "warmup": 0}]})
    f = read_records(p, reorder_window=8)
    assert [(int(r["seq"]), int(r["flow"])) for r in f.measured()] == [(2, 0), (4, 0), (5, 0), (20, 0), (0, 1)]
    s = nflab.analyze(p, reorder_window=8).summary
    assert s["packets"]["received"] == len(f.measured())
    # With the default window seq 3 is merely reordered, and measured.
    assert len(read_records(p).measured()) == 6
