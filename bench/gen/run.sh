#!/usr/bin/env bash
# Generator benchmark (issue #3): peak rate and precision of nflab against trafgen
# (netsniff-ng) on one veth pair, counted where the packets arrive.
#
#   sudo bench/gen/run.sh [path/to/nflab]      # default: $CARGO_TARGET_DIR/release/nflab
#
# 1. Peak rate, 64 B frames, one TX core, 5 s: nflab xdp_live, nflab AF_XDP, nflab
#    AF_PACKET, trafgen; counted as the rx_packets delta of the receiving veth end, once
#    with an XDP_DROP sink there (the generators' own speed) and once through the
#    kernel stack (XDP_PASS; live frames need an XDP program on a veth peer).
# 2. Precision at 100 kpps CBR, 64 B, 10 s: the same receiver (`nflab recv --ipg-ns`,
#    kernel RX timestamps) checks both nflab and trafgen (--gap 10us) against a 10 µs gap.
# Prints the machine, the figures and the ratios. Needs root, trafgen, gcc and a release build.
set -euo pipefail

NFLAB=${1:-${CARGO_TARGET_DIR:-target}/release/nflab}
NS=nflabbench-gen-$$
TX_CPU=0
RX_CPU=1
PEAK_S=${PEAK_S:-5}
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

peak() { # name, command...
  local name=$1; shift
  local a b
  a=$(rx_count)
  "$@" >/dev/null 2>&1 || true
  b=$(rx_count)
  echo "$name $(( (b - a) / PEAK_S ))"
}

gcc -O2 -o "$WORK/xdp_sink" "$(dirname "$0")/xdp_sink.c"
SINK=""
sink_on() { ip netns exec "$NS" "$WORK/xdp_sink" vb "$1" & SINK=$!; sleep 0.5; }
sink_off() { if [ -n "$SINK" ]; then kill "$SINK" 2>/dev/null || true; wait "$SINK" 2>/dev/null || true; fi; SINK=""; }
trap 'sink_off; cleanup' EXIT

gen_max() { # backend: nflab at max rate for PEAK_S on one core
  ip netns exec "$NS" taskset -c $TX_CPU "$NFLAB" gen --iface va --backend "$1" \
    --dst-mac 02:4e:46:00:00:02 --rate max --duration "$PEAK_S" --batch 64
}
peak_all() { # receiver label: prints one line per generator, sets P_*
  P_LIVE=$(peak nflab-xdp_live gen_max xdp-live | cut -d' ' -f2)
  P_XDP=$(peak nflab-af_xdp gen_max af-xdp | cut -d' ' -f2)
  P_PKT=$(peak nflab-af_packet gen_max af-packet | cut -d' ' -f2)
  P_TG=$(peak trafgen ip netns exec "$NS" timeout -s INT "$PEAK_S" taskset -c $TX_CPU trafgen --dev va \
    --conf "$WORK/probe.cfg" --cpus 1 | cut -d' ' -f2)
  printf "%-18s %12s pps\n" "nflab xdp_live" "$P_LIVE" "nflab AF_XDP" "$P_XDP" "nflab AF_PACKET" "$P_PKT" "trafgen" "$P_TG"
  python3 -c "l,x,p,t=$P_LIVE,$P_XDP,$P_PKT,$P_TG
print('ratio nflab xdp_live / trafgen  = %.2f (goal >= 2)' % (l/t))
print('ratio nflab AF_XDP / trafgen    = %.2f' % (x/t))
print('ratio nflab AF_PACKET / trafgen = %.2f' % (p/t))"
}

# Receiver 1: an XDP_DROP program on vb — the cheapest possible sink, so the figure is
# the generator's. Every generator's frames arrive through vb's XDP receive path.
echo "== peak rate, 64 B, one TX core (CPU $TX_CPU), ${PEAK_S} s, counted at vb (XDP_DROP sink)"
sink_on drop
peak_all
sink_off
# Receiver 2: the kernel stack (netif_receive, IP input, drop for lack of a socket). veth
# takes live frames only with an XDP program on the peer, so vb carries XDP_PASS here
# (for every generator alike).
echo "== peak rate, 64 B, one TX core (CPU $TX_CPU), ${PEAK_S} s, counted at vb (XDP_PASS, kernel stack)"
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
ip netns exec "$NS" $RT taskset -c $TX_CPU trafgen --dev va --conf "$WORK/probe.cfg" --cpus 1 \
  --gap 10us --num $((RATE * PREC_S)) >/dev/null 2>&1 || true
wait $R
summ "$WORK/nflab.nfr.json" "nflab AF_XDP"
summ "$WORK/trafgen.nfr.json" "trafgen -t 10us"
python3 -c "
import json; a=json.load(open('$WORK/nflab.nfr.json'))['ipg']; b=json.load(open('$WORK/trafgen.nfr.json'))['ipg']
print('ratio MSE trafgen / nflab = %.1f (goal > 1); nflab rate error %.4f %% (goal < 0.1 %%)' % (b['ipg_mse_ns2']/max(a['ipg_mse_ns2'],1), abs(a['rate_accuracy']-1)*100))"
