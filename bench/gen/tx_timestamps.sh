#!/usr/bin/env bash
# Kernel TX timestamps (issue #3, item 4): what they cost the generator and what they show.
#
#   sudo bench/gen/tx_timestamps.sh [path/to/nflab]   # default: $CARGO_TARGET_DIR/release/nflab
#
# 1. Peak rate, 64 B, AF_PACKET (TX ring, qdisc bypass), one TX core, PEAK_S s, counted as
#    the rx_packets delta of the receiving veth end: --tx-timestamp app and kernel,
#    alternated ROUNDS times; the ratio kernel/app of each round and their median.
# 2. 100 kpps CBR for 1 s (100 000 measured probes, 0.1 s warm-up), 64 B, through the
#    loopback DuT of `nflab run`, once with app and once with kernel TX stamps (one sweep):
#    median (kernel_tx − app_tx) from gen.json, median (rx − kernel_tx) and, for the app
#    run, median (rx − app_tx) from summary.json.
# Prints the machine and the load average before and after. Needs root and a release build.
set -euo pipefail

NFLAB=${1:-${CARGO_TARGET_DIR:-target}/release/nflab}
NFLAB=$(readlink -f "$NFLAB")
NS=nflabbench-ts-$$
TX_CPU=0
PEAK_S=${PEAK_S:-5}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d)

[ -x "$NFLAB" ] || { echo "$NFLAB not found: cargo build --release -p nflab" >&2; exit 1; }
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

echo "== machine"
echo "kernel: $(uname -r); CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); cores: $(nproc)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nflab: $NFLAB"

ip netns add "$NS"
ip -n "$NS" link add va type veth peer name vb
ip -n "$NS" link set va up
ip -n "$NS" link set vb up
ip netns exec "$NS" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
rx_count() { ip netns exec "$NS" cat /sys/class/net/vb/statistics/rx_packets; }

peak() { # tx_timestamp -> pps at vb
  local a b
  a=$(rx_count)
  ip netns exec "$NS" taskset -c $TX_CPU "$NFLAB" gen --iface va --backend af-packet \
    --dst-mac 02:4e:46:00:00:02 --rate max --duration "$PEAK_S" --batch 64 \
    --tx-timestamp "$1" >"$WORK/peak-$1.txt" 2>&1 || true
  b=$(rx_count)
  echo $(( (b - a) / PEAK_S ))
}

echo "== peak rate, 64 B, AF_PACKET, one TX core (CPU $TX_CPU), ${PEAK_S} s, counted at vb rx"
ratios=()
for r in $(seq 1 "$ROUNDS"); do
  app=$(peak app)
  ker=$(peak kernel)
  ratio=$(python3 -c "print('%.3f' % ($ker / $app))")
  ratios+=("$ratio")
  printf "round %d: app %9d pps   kernel %9d pps   kernel/app %s\n" "$r" "$app" "$ker" "$ratio"
done
grep -h "kernel TX timestamps" "$WORK/peak-kernel.txt" || true
python3 -c "import statistics,sys; print('median kernel/app = %.3f' % statistics.median(map(float, sys.argv[1:])))" "${ratios[@]}"
ip netns del "$NS"

echo "== 100 kpps, 1 s (100 000 measured probes), 64 B, loopback DuT: app vs kernel TX stamps"
cat >"$WORK/ts.toml" <<'EOF'
[experiment]
name = "txts-bench"

[dut]
kind = "loopback"

[traffic]
rate_pps = 100000
duration_s = 1
warmup_s = 0.1

[sweep]
"traffic.tx_timestamp" = ["app", "kernel"]
EOF
"$NFLAB" run "$WORK/ts.toml" --out "$WORK/out" --json >"$WORK/run.json"
python3 - "$WORK/run.json" <<'PY'
import json, sys, pathlib
d = pathlib.Path(json.load(open(sys.argv[1]))["dir"])
for run in ("000", "001"):
    rd = d / "runs" / run
    s = json.load(open(rd / "summary.json"))
    g = json.load(open(rd / "gen.json"))
    ts = s.get("timestamps", {})
    lat = s["latency_ns"]
    print(f"run {run}: tx {ts.get('tx')}, rx {ts.get('rx')}: received {s['packets']['received']}, "
          f"median (rx - tx) {lat['p50']} ns, p99 {lat['p99']} ns, achieved {g['tx_pps']:.0f} pps, "
          f"late packets {g['late_packets']}")
    t = g.get("tx_stamps")
    if t:
        k = t.get("kernel_minus_app_ns") or {}
        print(f"  kernel TX stamps: {t['matched']} of {t['probes']} matched, {t['missing']} missing, "
              f"{t['drain_calls']} drains; kernel_tx - app_tx: min {k.get('min')} p50 {k.get('p50')} "
              f"p99 {k.get('p99')} max {k.get('max')} ns; fallbacks {ts.get('tx_application_fallbacks')}")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
