#!/usr/bin/env bash
# Generator benchmark (issue #3): peak rate and precision of nflab against trafgen
# (netsniff-ng) on one veth pair, counted where the packets arrive.
#
#   sudo bench/gen/run.sh [path/to/nflab]      # default: $CARGO_TARGET_DIR/release/nflab
#
# 1. Peak rate, 64 B frames, one TX core, 5 s: nflab xdp_live, nflab AF_XDP, nflab
#    AF_PACKET, trafgen; counted as the rx_packets delta of the receiving veth end, with
#    three receivers: an XDP_DROP sink whose NAPI runs on the TX core (veth's default:
#    the sender's CPU pays for the receive), the same sink on its own core (threaded NAPI
#    pinned to RX_CPU: the arrangement of two machines), and the kernel stack (XDP_PASS;
#    live frames need an XDP program on a veth peer). REPS interleaved rounds, median.
#    trafgen gets the socket memory it sets itself on a host (it cannot inside a netns).
# 2. Precision at 100 kpps CBR, 64 B, 10 s: the same receiver (`nflab recv --ipg-ns`,
#    kernel RX timestamps) checks both nflab and trafgen (--gap 10us) against a 10 µs gap.
# Prints the machine, the figures and the ratios. Needs root, trafgen, gcc and a release build.
set -euo pipefail

NFLAB=${1:-${CARGO_TARGET_DIR:-target}/release/nflab}
NS=nflabbench-gen-$$
TX_CPU=0
RX_CPU=1
PEAK_S=${PEAK_S:-5}
REPS=${REPS:-3}
PREC_S=${PREC_S:-10}
RATE=100000
# PREC_RT=1 runs both generators of the precision test under SCHED_FIFO (chrt -f 50).
RT=""; [ "${PREC_RT:-0}" = 1 ] && RT="chrt -f 50"
WORK=$(mktemp -d)

command -v trafgen >/dev/null || { echo "trafgen not found: apt-get install -y netsniff-ng" >&2; exit 1; }
[ -x "$NFLAB" ] || { echo "$NFLAB not found: cargo build --release -p nflab" >&2; exit 1; }
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

ip netns add "$NS"
ip -n "$NS" link add va type veth peer name vb
ip -n "$NS" link set va address 02:4e:46:00:00:01
ip -n "$NS" link set vb address 02:4e:46:00:00:02
ip -n "$NS" link set va up
ip -n "$NS" link set vb up
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1

rx_count() { ip netns exec "$NS" cat /sys/class/net/vb/statistics/rx_packets; }

echo "== machine"
echo "kernel: $(uname -r); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); cores: $(nproc)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nflab: $NFLAB; $(trafgen -v 2>&1 | head -1)"

# The 60-byte (64 B with FCS) nflab probe frame, for trafgen: lg0 -> lg1 MACs,
# 198.18.0.1 -> 198.19.0.1, UDP 49152 -> 9, probe magic a7 01, flow 0, seq/tx 0.
python3 - "$WORK/probe.cfg" <<'PY'
import sys, struct
ip = bytearray(struct.pack('!BBHHHBBH4s4s', 0x45, 0, 46, 0, 0x4000, 64, 17, 0,
                           bytes([198,18,0,1]), bytes([198,19,0,1])))
s = sum(struct.unpack('!10H', ip)); s = (s & 0xffff) + (s >> 16); s = (s & 0xffff) + (s >> 16)
ip[10:12] = struct.pack('!H', ~s & 0xffff)
udp = struct.pack('!HHHH', 49152, 9, 26, 0)
probe = bytes([0xa7, 1, 0, 0]) + bytes(14)
frame = bytes([2,0x4e,0x46,0,0,2, 2,0x4e,0x46,0,0,1, 8,0]) + bytes(ip) + udp + probe
assert len(frame) == 60
open(sys.argv[1], 'w').write('{ ' + ', '.join('0x%02x' % b for b in frame) + ' }\n')
PY

peak() { # command...: prints the packets per second that arrived at vb
  local a b
  a=$(rx_count)
  "$@" >/dev/null 2>&1 || true
  b=$(rx_count)
  echo $(( (b - a) / PEAK_S ))
}

gcc -O2 -o "$WORK/xdp_sink" "$(dirname "$0")/xdp_sink.c"
SINK=""
sink_on() { ip netns exec "$NS" "$WORK/xdp_sink" vb "$1" & SINK=$!; sleep 0.5; }
sink_off() { if [ -n "$SINK" ]; then kill "$SINK" 2>/dev/null || true; wait "$SINK" 2>/dev/null || true; fi; SINK=""; }
# Threaded NAPI on vb, its thread pinned to RX_CPU: the receive work leaves the TX core.
napi_thread() { # on|off
  ip netns exec "$NS" sh -c "echo $([ "$1" = on ] && echo 1 || echo 0) > /sys/class/net/vb/threaded"
  [ "$1" = on ] || return 0
  local pid
  pid=$(pgrep -n -x "napi/vb-[0-9]*")
  [ -n "$pid" ] || { echo "no NAPI thread for vb" >&2; exit 1; }
  taskset -pc $RX_CPU "$pid" >/dev/null
}

# trafgen raises the system socket memory at start (rmem/wmem_max 100 MiB, defaults 4 MiB,
# netsniff-ng's sock.c) and restores it at exit; inside a netns it cannot, and without it
# its TX ring stops with EAGAIN once the receiver runs on another core. Do it for it.
SOCKMEM_KEYS="net.core.rmem_max net.core.rmem_default net.core.wmem_max net.core.wmem_default"
SOCKMEM_SAVED=$(for k in $SOCKMEM_KEYS; do echo "$k=$(sysctl -n "$k")"; done)
sockmem_restore() { for kv in $SOCKMEM_SAVED; do sysctl -qw "$kv"; done; }
sockmem_trafgen() {
  for k in $SOCKMEM_KEYS; do
    case $k in *_max) want=104857600 ;; *) want=4194304 ;; esac
    [ "$(sysctl -n "$k")" -ge $want ] || sysctl -qw "$k=$want"
  done
}
trap 'sink_off; sockmem_restore; cleanup' EXIT

gen_max() { # backend: nflab at max rate for PEAK_S on one core
  ip netns exec "$NS" taskset -c $TX_CPU "$NFLAB" gen --iface va --backend "$1" \
    --dst-mac 02:4e:46:00:00:02 --rate max --duration "$PEAK_S" --batch 64
}
trafgen_max() {
  sockmem_trafgen
  ip netns exec "$NS" timeout -s INT "$PEAK_S" taskset -c $TX_CPU trafgen --dev va \
    --conf "$WORK/probe.cfg" --cpus 1
  local rc=$?
  sockmem_restore
  return $rc
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
peak_all() { # REPS interleaved rounds; one line per generator (median and every round)
  local live="" xdp="" pkt="" tg=""
  for _ in $(seq "$REPS"); do
    live="$live $(peak gen_max xdp-live)"
    xdp="$xdp $(peak gen_max af-xdp)"
    pkt="$pkt $(peak gen_max af-packet)"
    tg="$tg $(peak trafgen_max)"
  done
  P_LIVE=$(echo "$live" | median); P_XDP=$(echo "$xdp" | median)
  P_PKT=$(echo "$pkt" | median); P_TG=$(echo "$tg" | median)
  printf "%-16s %9s pps median; rounds:%s\n" "nflab xdp_live" "$P_LIVE" "$live" \
    "nflab AF_XDP" "$P_XDP" "$xdp" "nflab AF_PACKET" "$P_PKT" "$pkt" "trafgen" "$P_TG" "$tg"
  python3 -c "l,x,p,t=$P_LIVE,$P_XDP,$P_PKT,max($P_TG,1)
print('ratio nflab xdp_live / trafgen  = %.2f (goal >= 2)' % (l/t))
print('ratio nflab AF_XDP / trafgen    = %.2f (goal >= 2)' % (x/t))
print('ratio nflab AF_PACKET / trafgen = %.2f' % (p/t))"
}

# Receiver 1: an XDP_DROP program on vb, the cheapest sink. veth runs the receive in
# the sender's softirq, so the TX core pays for both ends (a one-core loopback).
echo "== peak rate, 64 B, one TX core (CPU $TX_CPU), ${PEAK_S} s, $REPS rounds, counted at vb (XDP_DROP sink on the TX core)"
sink_on drop
peak_all
# Receiver 2: the same sink with vb's NAPI in its own thread on RX_CPU, as the
# receiving machine of a two-machine setup: the TX core does only the sending.
echo "== peak rate, 64 B, one TX core (CPU $TX_CPU), ${PEAK_S} s, $REPS rounds, counted at vb (XDP_DROP sink on CPU $RX_CPU, threaded NAPI)"
napi_thread on
peak_all
napi_thread off
sink_off
# Receiver 3: the kernel stack (netif_receive, IP input, drop for lack of a socket). veth
# takes live frames only with an XDP program on the peer, so vb carries XDP_PASS here
# (for every generator alike).
echo "== peak rate, 64 B, one TX core (CPU $TX_CPU), ${PEAK_S} s, $REPS rounds, counted at vb (XDP_PASS, kernel stack)"
sink_on pass
peak_all
sink_off

echo "== precision${RT:+ (both under $RT)}, CBR ${RATE} pps, 64 B, ${PREC_S} s, same receiver (kernel RX timestamps)"
recv_ipg() { # out-file; records for PREC_S + 2 s
  ip netns exec "$NS" taskset -c $RX_CPU "$NFLAB" recv --iface vb --out "$1" \
    --duration $((PREC_S + 2)) --ipg-ns $((1000000000 / RATE)) --json > "$1.json"
}
summ() { python3 -c "
import json,sys; j=json.load(open(sys.argv[1])); s=j['ipg']
print('%-16s packets %8d  rate accuracy %.5f (%+.3f %%)  IPG mean %8.0f ns  MSE %14.0f ns^2  RMSE %8.0f ns  compressed %.1f %%' % (sys.argv[2], s['packets'], s['rate_accuracy'], (s['rate_accuracy']-1)*100, s['ipg_mean_ns'], s['ipg_mse_ns2'], s['ipg_rmse_ns'], s['compressed_gap_fraction']*100))
" "$1" "$2"; }

recv_ipg "$WORK/nflab.nfr" & R=$!
sleep 1
ip netns exec "$NS" $RT taskset -c $TX_CPU "$NFLAB" gen --iface va --backend af-xdp --dst-mac 02:4e:46:00:00:02 \
  --rate $RATE --duration "$PREC_S" ${NFLAB_GEN_FLAGS:-} >/dev/null
wait $R
recv_ipg "$WORK/trafgen.nfr" & R=$!
sleep 1
sockmem_trafgen
ip netns exec "$NS" $RT taskset -c $TX_CPU trafgen --dev va --conf "$WORK/probe.cfg" --cpus 1 \
  --gap 10us --num $((RATE * PREC_S)) >/dev/null 2>&1 || true
sockmem_restore
wait $R
summ "$WORK/nflab.nfr.json" "nflab AF_XDP"
summ "$WORK/trafgen.nfr.json" "trafgen -t 10us"
python3 -c "
import json; a=json.load(open('$WORK/nflab.nfr.json'))['ipg']; b=json.load(open('$WORK/trafgen.nfr.json'))['ipg']
print('ratio MSE trafgen / nflab = %.1f (goal > 1); nflab rate error %.4f %% (goal < 0.1 %%)' % (b['ipg_mse_ns2']/max(a['ipg_mse_ns2'],1), abs(a['rate_accuracy']-1)*100))"
