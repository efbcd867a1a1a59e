#!/usr/bin/env bash
# Capture benchmark (issue 24; docs/benchmarks.md, "## Capture"): 64-byte frames
# from nflab's generator at its highest rate (xdp_live) on a veth pair in a
# namespace of its own, the same run once per contender: no capture,
# `tcpdump -w`, netsniff-ng, `nflab capture` with each producer (xdp and
# af-packet; in memory, with a libpcap trigger that never matches, so the filter
# runs on every frame), in interleaved rounds. For each: the rate
# the traffic reaches at the receiving end, the frames the capture lost, and
# the CPU per frame of all cores (busy jiffies of /proc/stat over the run,
# divided by frames received) with the no-capture run's subtracted.
# Then the memory step: the xdp producer with a 16 MiB ring for MEM_SECONDS at
# the same rate (far more than 10x what the ring holds): peak RSS of the
# capture process (VmHWM), peak_ring_bytes and what was discarded.
#   bench/capture/run.sh [SECONDS] [REPEATS] [MEM_SECONDS]
# Run it alone on a quiet machine: two cores are shared by everything; the
# load average before and after is printed with the figures.
set -euo pipefail
D=${1:-5}
R=${2:-3}
MEM_D=${3:-10}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
bash "$ROOT/scripts/deps.sh" run bench
export PATH="$HOME/.cargo/bin:$PATH"
(cd "$ROOT" && cargo build --release --locked -p nflab -q)
NFLAB="$ROOT/target/release/nflab"
NS="nflabbench-cap-$$"
WORK=$(mktemp -d /tmp/nflab-bench-capture-XXXXXX)
cleanup() {
  ip netns pids "$NS" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
ip netns add "$NS"
ip -n "$NS" link add va type veth peer name vb
ip -n "$NS" link set va up
ip -n "$NS" link set vb up
# veth takes XDP frames (xdp_live) only into a peer with NAPI: GRO on gives it.
ip netns exec "$NS" ethtool -K vb gro on >/dev/null
MAC=$(ip -n "$NS" -j link show vb | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["address"])')
HZ=$(getconf CLK_TCK)

echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; kernel $(uname -r)"
echo "load before: $(uptime)"
echo "tcpdump: $(tcpdump --version 2>&1 | head -1); netsniff-ng: $(netsniff-ng -v 2>&1 | head -1)"
echo "$D s per run, $R repetitions, 64-byte frames, xdp_live at max rate"

busy_jiffies() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9}' /proc/stat; }
rx_packets() { ip -n "$NS" -s -j link show vb | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["rx"]["packets"])'; }

start_contender() { # name -> pid in $CPID
  case "$1" in
  none) CPID="" ;;
  tcpdump)
    ip netns exec "$NS" tcpdump -i vb -w "$WORK/t.pcap" -n -s 128 2>"$WORK/tcpdump.err" &
    CPID=$!
    ;;
  netsniff-ng)
    ip netns exec "$NS" netsniff-ng --in vb --out "$WORK/n.pcap" --silent >"$WORK/netsniff.out" 2>&1 &
    CPID=$!
    ;;
  nflab-xdp | nflab-afp)
    local producer=xdp
    [ "$1" = nflab-afp ] && producer=af-packet
    "$NFLAB" capture --netns "$NS" --iface vb --out "$WORK/nflab" --ring 512MiB \
      --producer "$producer" --trigger "udp port 1" 2>"$WORK/nflab.err" &
    CPID=$!
    ;;
  esac
  # netsniff-ng takes a few seconds to set its ring up; every contender gets the same.
  sleep 3
}

stop_contender() { # name -> frames the capture got, on stdout (none: nothing)
  [ -z "$CPID" ] && return
  kill -INT "$CPID"
  wait "$CPID" || true
  case "$1" in
  tcpdump) sed -n 's/^\([0-9]*\) packets captured.*/\1/p' "$WORK/tcpdump.err" | head -1 ;;
  netsniff-ng) tr '\r' '\n' <"$WORK/netsniff.out" | sed -n 's/^ *\([0-9]*\)  packets passed filter.*/\1/p' | head -1 ;;
  nflab-*) python3 -c "import json; r=json.load(open('$WORK/nflab/capture.json')); print(r['captured'])" ;;
  esac
}

echo -e "rep\tcontender\tmpps\tcpu_ns\tlost" >"$WORK/results.tsv"
for rep in $(seq 1 "$R"); do
  for c in none tcpdump netsniff-ng nflab-xdp nflab-afp; do
    rm -rf "$WORK"/*.pcap "$WORK/nflab"
    start_contender "$c"
    b0=$(busy_jiffies)
    p0=$(rx_packets)
    "$NFLAB" gen --netns "$NS" --iface va --dst-mac "$MAC" --backend xdp-live --rate max \
      --frame-bytes 64 --duration "$D" >/dev/null 2>"$WORK/gen.err"
    b1=$(busy_jiffies)
    p1=$(rx_packets)
    got=$(stop_contender "$c")
    # Frames at vb during the generator's run the capture did not get (it also
    # counts the few frames before and after, so this is a lower bound of 0).
    n=$((p1 - p0))
    lost=""
    [ -n "$got" ] && lost=$((n > got ? n - got : 0))
    rate=$(python3 -c "print(f'{$n / $D / 1e6:.3f}')")
    cpu=$(python3 -c "print(f'{($b1 - $b0) / $HZ * 1e9 / max($n, 1):.0f}')")
    echo "rep $rep  $c: $rate Mpps at the receiver, $cpu ns CPU per frame (all cores), lost by the capture: ${lost:-?}"
    echo -e "$rep\t$c\t$rate\t$cpu\t${lost:-nan}" >>"$WORK/results.tsv"
  done
done

echo "== summary (median over $R repetitions; CPU from /proc/stat at $HZ Hz)"
python3 - "$WORK/results.tsv" <<'PY'
import csv, statistics as st, sys
rows = {}
for r in csv.DictReader(open(sys.argv[1]), delimiter="\t"):
    d = rows.setdefault(r["contender"], {"mpps": [], "cpu": [], "lost": []})
    d["mpps"].append(float(r["mpps"])); d["cpu"].append(float(r["cpu_ns"])); d["lost"].append(r["lost"])
r0, c0 = st.median(rows["none"]["mpps"]), st.median(rows["none"]["cpu"])
print(f"{'contender':12} {'Mpps':>7} {'of none':>8} {'CPU ns/frame':>13} {'extra ns':>9}  lost per run")
extra = {}
for name, d in rows.items():
    rm, cm = st.median(d["mpps"]), st.median(d["cpu"])
    extra[name] = cm - c0
    print(f"{name:12} {rm:7.3f} {rm / r0:8.1%} {cm:13.0f} {cm - c0:9.0f}  {' '.join(d['lost'])}")
for n in ("nflab-xdp", "nflab-afp"):
    if extra["tcpdump"] > 0 and extra["netsniff-ng"] > 0:
        print(f"{n}: extra CPU per frame {extra[n] / extra['tcpdump']:.2f} of tcpdump's, "
              f"{extra[n] / extra['netsniff-ng']:.2f} of netsniff-ng's; "
              f"rate {st.median(rows[n]['mpps']) / r0:.1%} of no capture")
PY
echo "load after the rounds: $(uptime)"

echo "== memory: xdp producer, --ring 16MiB, $MEM_D s at the highest rate"
rm -rf "$WORK/nflab"
"$NFLAB" capture --netns "$NS" --iface vb --out "$WORK/nflab" --ring 16MiB \
  --producer xdp --trigger "udp port 1" 2>"$WORK/nflab.err" &
CPID=$!
sleep 3
"$NFLAB" gen --netns "$NS" --iface va --dst-mac "$MAC" --backend xdp-live --rate max \
  --frame-bytes 64 --duration "$MEM_D" >/dev/null 2>"$WORK/gen.err"
hwm_kib=$(awk '/^VmHWM/ {print $2}' "/proc/$CPID/status")
kill -INT "$CPID"
wait "$CPID" || true
python3 - "$WORK/nflab/capture.json" "$hwm_kib" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); hwm = int(sys.argv[2]) * 1024
ring = r["ring_bytes"]
# What the frames would take in the ring if nothing were discarded: the
# captured bytes (64 per frame) plus a 24-byte index entry each.
traffic = r["captured"] * (64 + 24)
print(f"captured {r['captured']}, discarded {r['discarded']} in {r['discarded_queues']} queues, "
      f"kernel drops {r['kernel_drops']}")
print(f"traffic {traffic / 2**20:.0f} MiB = {traffic / ring:.1f}x the ring of {ring / 2**20:.0f} MiB")
print(f"peak_ring_bytes {r['peak_ring_bytes'] / 2**20:.2f} MiB ({'within' if r['peak_ring_bytes'] <= ring else 'OVER'} the budget)")
print(f"peak RSS (VmHWM) {hwm / 2**20:.1f} MiB = ring budget + {(hwm - ring) / 2**20:.1f} MiB "
      f"(the 32 MiB kernel ring buffer mapped for reading, the binary, the libraries)")
PY
echo "load at the end: $(uptime)"
