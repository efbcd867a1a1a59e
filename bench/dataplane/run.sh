#!/bin/sh
# Data-plane benchmarks (issue 8): forwarding rate, latency/throughput
# trade-off, delayer accuracy, reorder. Prints the machine and the ratios.
#   sudo bench/dataplane/run.sh [OUT_DIR]
#   sudo ONLY=rate REPS=5 bench/dataplane/run.sh   # section 1 only, 5 interleaved rounds
# Every figure comes from `nflab run` artifacts (summary.json, dut.json),
# same generator and recorder for every DuT. Environment: NFLAB (binary),
# REPS, DURATION (s), ONLY (run only specs whose name starts with it),
# DUT_CPU (the one DuT core of nflab and testpmd; default the last CPU),
# MAX_LOAD (2) and WAIT_S (600): see quiet() below.
set -eu
NFLAB=${NFLAB:-nflab}
OUT=${1:-/tmp/nflab-bench-dataplane}
HERE=$(cd "$(dirname "$0")" && pwd)
DUT_CPU=${DUT_CPU:-$(($(nproc) - 1))}
mkdir -p "$OUT/specs"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, kernel $(uname -r)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The DPDK reference: dpdk-testpmd from Debian's dpdk-dev.
if [ -z "${NFLAB_TESTPMD:-}" ] && ! command -v dpdk-testpmd >/dev/null; then
  echo "dpdk-testpmd is missing: installing Debian's dpdk-dev"
  apt-get install -y -qq dpdk-dev >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq dpdk-dev >/dev/null; } ||
    echo "could not install dpdk-dev: the testpmd runs will fail with the reason in their logs"
fi
echo "DuT core: CPU $DUT_CPU for the nflab worker and testpmd's forwarding lcore; generator CPU 0, recorder the last CPU"

spec() { # name dut-toml traffic-toml
  cat > "$OUT/specs/$1.toml" <<SPEC
[experiment]
name = "$1"
repetitions = 1
[dut]
$2
[traffic]
frame_bytes = 64
duration_s = ${DURATION:-3}
warmup_s = 0.5
$3
SPEC
}

# 1. Forwarding rate, 64 B, one DuT core, generator at "max" with the xdp_live
# backend (~3.4 Mpps offered here): every DuT is saturated, so its rx rate is its
# capacity rather than the generator's (the AF_XDP generator's ~420 kpps was
# below both nflab's and testpmd's). nflab and testpmd run on the same CPU
# (DUT_CPU), batch/burst 32, busy-polling, once with AF_PACKET ports and once
# with AF_XDP (copy mode on veth) ports.
MAX='rate_pps = "max"
backend = "xdp_live"'
spec rate-linux-router 'kind = "linux-router"' "$MAX"
spec rate-linux-bridge 'kind = "linux-bridge"' "$MAX"
for io in af_packet af_xdp; do
  sfx=$([ $io = af_xdp ] && echo -xdp || true)
  spec rate-nflab-l2fwd$sfx "kind = \"nflab\"
pipeline = [\"l2fwd\"]
batch = 32
cpu = $DUT_CPU
io = \"$io\"" "$MAX"
  spec rate-nflab-router$sfx "kind = \"nflab\"
pipeline = [\"router\"]
batch = 32
cpu = $DUT_CPU
io = \"$io\"" "$MAX"
  spec rate-testpmd$sfx "kind = \"testpmd\"
batch = 32
cpu = $DUT_CPU
io = \"$io\"" "$MAX"
done
# testpmd's mac mode rewrites both MACs, as nflab's l2fwd does.
spec rate-testpmd-mac-xdp "kind = \"testpmd\"
forward_mode = \"mac\"
batch = 32
cpu = $DUT_CPU
io = \"af_xdp\"" "$MAX"
# 2. Latency/throughput trade-off at 10 kpps.
T10='rate_pps = 10000'
spec lat-b1-busy 'kind = "nflab"
pipeline = ["l2fwd"]
batch = 1
rx_mode = "busy-poll"' "$T10"
spec lat-b32-drain100 'kind = "nflab"
pipeline = ["l2fwd"]
batch = 32
drain_us = 100
rx_mode = "busy-poll"' "$T10"
spec lat-b1-blocking 'kind = "nflab"
pipeline = ["l2fwd"]
batch = 1
rx_mode = "blocking"' "$T10"
# 3. Delayer accuracy (seed 004: 5 ms / 0.1 ms uniform), base = lat-b1-busy.
spec delayer-5ms 'kind = "nflab"
pipeline = ["l2fwd", "delayer"]
batch = 32
rx_mode = "busy-poll"
[dut.delayer]
delay_us = 5000
jitter_us = 100' "$T10
drain_ms = 300"
# 3b. Where the delayer overloads: the same delay at rising rates (AF_XDP
# generator), until the delay or jitter error leaves seed 004's bounds or
# packets are lost.
for r in 50000 100000 200000 300000 400000; do
  spec "delayer-load-$r" 'kind = "nflab"
pipeline = ["l2fwd", "delayer"]
batch = 32
rx_mode = "busy-poll"
[dut.delayer]
delay_us = 5000
jitter_us = 100' "rate_pps = $r
backend = \"af_xdp\"
drain_ms = 300"
done
# 4. Reorder: a jittery delayer scrambles, the POF restores the order.
spec scramble-only 'kind = "nflab"
pipeline = ["l2fwd", "delayer"]
rx_mode = "blocking"
[dut.delayer]
delay_us = 200
jitter_us = 100' "rate_pps = 20000"
spec scramble-reorder 'kind = "nflab"
pipeline = ["l2fwd", "delayer", "reorder"]
rx_mode = "blocking"
[dut.delayer]
delay_us = 200
jitter_us = 100
[dut.reorder]
max_delay_us = 1000' "rate_pps = 20000"

# Other work on the host skews every figure: wait (up to WAIT_S) until the
# 1-minute load is at most MAX_LOAD before each spec. summarize.py shows the
# load each run started with.
quiet() {
  t=0
  while [ "$(awk -v m="${MAX_LOAD:-2}" '{print ($1 > m)}' /proc/loadavg)" = 1 ] && [ $t -lt "${WAIT_S:-600}" ]; do
    [ $t = 0 ] && echo "load $(cut -d' ' -f1 /proc/loadavg) > ${MAX_LOAD:-2}: waiting before $(basename "$1")"
    sleep 10
    t=$((t + 10))
  done
}
# REPS rounds, each running every spec once: the DuTs are interleaved, so a
# change in the host's load hits all of them alike.
for round in $(seq "${REPS:-1}"); do
  for s in "$OUT"/specs/*.toml; do
    case $(basename "$s") in "${ONLY:-}"*) ;; *) continue ;; esac
    quiet "$s"
    log="$OUT/$(basename "$s" .toml)-$round.log"
    "$NFLAB" run "$s" --out "$OUT/runs" >/dev/null 2>"$log" || echo "failed: $s (see $log)"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$HERE/summarize.py" "$OUT/runs"
