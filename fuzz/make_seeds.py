#!/usr/bin/env python3
"""Writes the hand-made seeds under fuzz/corpus/<target>/: small valid inputs
of each format (a probe frame in IPv4, IPv6 and VLAN, a pcap in both byte
orders, a pcapng, TRex records, a record CSV, transport datagrams), built
here from the formats' documentation so the fuzzer starts past the magic
numbers. Real files of the repo are added at run time by scripts/fuzz.sh.
Run it again after a format change: python3 fuzz/make_seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def probe(flow, seq, tx_ns):
    return bytes([0xA7, 1]) + struct.pack("!H", flow) + seq.to_bytes(6, "big") + struct.pack("!Q", tx_ns)


def udp(src_ip, dst_ip, payload, v6):
    length = 8 + len(payload)
    hdr = struct.pack("!HHHH", 0xC020, 7, length, 0)
    if v6:
        pseudo = src_ip + dst_ip + struct.pack("!I", length) + b"\0\0\0\x11"
    else:
        pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, 17, length)
    c = csum(pseudo + hdr + payload) or 0xFFFF
    return struct.pack("!HHHH", 0xC020, 7, length, c) + payload


def ipv4(payload):
    src, dst = bytes([198, 18, 0, 1]), bytes([198, 19, 0, 1])
    l4 = udp(src, dst, payload, False)
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, 17, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + l4


def ipv6(payload):
    src = bytes.fromhex("20010002000000000000000000000001")
    dst = bytes.fromhex("20010002000100000000000000000001")
    l4 = udp(src, dst, payload, True)
    return struct.pack("!IHBB", 6 << 28, len(l4), 17, 64) + src + dst + l4


MACS = bytes.fromhex("020000000002") + bytes.fromhex("020000000001")


def frame(ip, ethertype, vlan=None):
    if vlan is not None:
        return MACS + struct.pack("!HH", 0x8100, vlan) + struct.pack("!H", ethertype) + ip
    return MACS + struct.pack("!H", ethertype) + ip


FRAMES = {
    "ipv4": frame(ipv4(probe(3, 41, 1_700_000_000_123_456_789)), 0x0800),
    "ipv6": frame(ipv6(probe(7, 2**40, 5)), 0x86DD),
    "vlan-ipv4": frame(ipv4(probe(1, 0, 0)), 0x0800, vlan=(5 << 13) | 100),
}

for name, f in FRAMES.items():
    put("wire_probe", name, f)
    put("wire_layers", "eth-" + name, b"\0" + f)
put("wire_layers", "vlan", b"\x01" + struct.pack("!HH", 0xA064, 0x86DD) + b"\x60")
put("wire_layers", "ipv4", b"\x02" + ipv4(probe(3, 41, 9)))
put("wire_layers", "ipv6", b"\x03" + ipv6(probe(3, 41, 9)))
put("wire_layers", "udp4", b"\x04" + udp(bytes([198, 18, 0, 1]), bytes([198, 19, 0, 1]), probe(1, 2, 3), False))
put("wire_layers", "udp6", b"\x05" + udp(bytes.fromhex("20010002000000000000000000000001"), bytes.fromhex("20010002000100000000000000000001"), probe(1, 2, 3), True))
put("wire_layers", "probe", b"\x06" + probe(9, 2**48 - 1, 2**64 - 1) + b"\0" * 4)


def pcap(endian, nanos, packets):
    magic = 0xA1B23C4D if nanos else 0xA1B2C3D4
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    for ts, data in packets:
        frac = ts % 10**9 if nanos else ts % 10**9 // 1000
        out += struct.pack(endian + "IIII", ts // 10**9, frac, len(data), len(data)) + data
    return out


pkts = [(1_700_000_000_000_000_000 + 1000 * i, f) for i, f in enumerate(FRAMES.values())]
put("capture_import", "le-us.pcap", pcap("<", False, pkts))
put("capture_import", "be-ns.pcap", pcap(">", True, pkts))


def block(btype, body):
    body += b"\0" * (-len(body) % 4)
    n = 12 + len(body)
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def option(code, value):
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


shb = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
idb = block(1, struct.pack("<HHI", 1, 0, 65535) + option(9, b"\x09") + option(14, struct.pack("<q", 1)) + option(0, b""))
epbs = b""
for ts, data in pkts:
    epbs += block(6, struct.pack("<IIIII", 0, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data)) + data)
spb = block(3, struct.pack("<I", 60) + FRAMES["ipv4"][:60])
put("capture_import", "ns.pcapng", shb + idb + epbs + spb)

recs = [(1.5 + i * 1e-6, 1.5 + i * 1e-6 + 2e-6 * (i % 3)) for i in range(6)]
put("trex_import", "six.data", b"".join(struct.pack("<dd", tx, rx) for tx, rx in recs))
put("trex_import", "odd.data", struct.pack("<dd", 0.0, -1.0) + struct.pack("<dd", float("nan"), 1e300) + b"\x01\x02\x03")

put("csv_import", "records.csv", b"seq,flow,tx_ns,rx_ns,wire_len,flags\n0,0,1000,1500,64,1\n2,0,3000,3600,64,1\n1,0,2000,2700,64,1\n\n1,1,2000,2100,128,0\n")
put("csv_import", "minimal.csv", b"rx_ns,tx_ns,seq,extra\r\n5,1,0,x\r\n")


def transport(kind, tx_id, tx_ns, body):
    return struct.pack("!BBHIQ", 1, kind, 0, tx_id, tx_ns) + body


payload = b"hello transport"
put("transport_wire", "data", transport(1, 1, 2, struct.pack("!IIBBHQQ", 10, 2, 3, 0, len(payload), 99, 98) + payload))
put("transport_wire", "parity", transport(2, 3, 4, struct.pack("!IIBBBBHH", 2, 8, 4, 2, 1, 0, 4, 0) + b"\x01\x02\x03\x04"))
put("transport_wire", "heartbeat", transport(3, 5, 6, b""))
acks = struct.pack("!IBBBB", 2, 5, 4, 1, 0) + struct.pack("!IBBBB", 3, 1, 0, 0, 0)
put("transport_wire", "feedback", transport(4, 7, 8, struct.pack("!IQQQB3x", 1, 2, 3, 4, 2) + acks))

put("spec_parse", "minimal.toml", b'[experiment]\nname = "fuzz"\n')
put("nfr_reader", "not-nfr", b"NFR\0")

# OpenFlow 1.3: the golden messages os-ken encodes (crates/sdn/tests/fixtures/of13).
import json

with open(os.path.join(HERE, "..", "crates", "sdn", "tests", "fixtures", "of13", "golden.json")) as f:
    for name, hexbytes in json.load(f).items():
        put("openflow", name, bytes.fromhex(hexbytes))
# OpenFlow 1.0: the golden messages of crates/sdn/tests/fixtures/of10 (a switch behind the proxy).
with open(os.path.join(HERE, "..", "crates", "sdn", "tests", "fixtures", "of10", "golden.json")) as f:
    for name, hexbytes in json.load(f).items():
        put("openflow", "of10_" + name, bytes.fromhex(hexbytes))
# A PACKET_IN (type 10) from table 0 with an in_port match, and a PACKET_OUT (13).
pin_match = struct.pack("!HH", 1, 12) + struct.pack("!HBBI", 0x8000, 0, 4, 1) + b"\0" * 4
pin = struct.pack("!IHBBQ", 0xFFFFFFFF, 14, 0, 0, 0) + pin_match + b"\0\0" + bytes(14)
put("openflow", "packet_in", struct.pack("!BBHI", 4, 10, 8 + len(pin), 9) + pin)
pout_actions = struct.pack("!HHIH6x", 0, 16, 1, 0)
pout = struct.pack("!IIH6x", 0xFFFFFFFF, 0xFFFFFFFD, len(pout_actions)) + pout_actions + bytes(14)
put("openflow", "packet_out", struct.pack("!BBHI", 4, 13, 8 + len(pout), 10) + pout)

# The proxy's switch side: a selector byte (bit k: which of two switches sends
# message k), then what the switches send: replies to the controller's
# requests, a port-stats body one byte short of two entries among them.
def of13(typ, xid, body):
    return struct.pack("!BBHI", 4, typ, 8 + len(body), xid) + body


def mp_reply(t, xid, body, more=0):
    return of13(19, xid, struct.pack("!HH4x", t, more) + body)


port_stats = struct.pack("!I4x", 1) + bytes(104)
put("openflow_proxy", "port_stats", b"\x00" + mp_reply(4, 5, port_stats) + mp_reply(4, 5, port_stats * 2)[:-1])
put("openflow_proxy", "table_stats", b"\x01" + mp_reply(3, 6, bytes(24)) + mp_reply(3, 7, bytes(29)))
put("openflow_proxy", "aggregate", b"\x02" + mp_reply(2, 8, struct.pack("!QQI4x", 5, 500, 2)) + mp_reply(2, 8, bytes(24)))
put("openflow_proxy", "barrier", b"\x00" + of13(21, 9, b"") + of13(2, 10, b"ping"))
