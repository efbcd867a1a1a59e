#!/bin/sh
# Data-plane benchmarks (issue 8): forwarding rate, latency/throughput
# trade-off, delayer accuracy, reorder. Prints the machine and the ratios.
#   sudo bench/dataplane/run.sh [OUT_DIR]
# Every figure comes from `nflab run` artifacts (summary.json, dut.json),
# same generator and recorder for every DuT.
set -eu
NFLAB=${NFLAB:-nflab}
OUT=${1:-/tmp/nflab-bench-dataplane}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/specs"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, kernel $(uname -r)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

spec() { # name dut-toml traffic-toml
  cat > "$OUT/specs/$1.toml" <<SPEC
[experiment]
name = "$1"
repetitions = ${REPS:-1}
[dut]
$2
[traffic]
frame_bytes = 64
duration_s = ${DURATION:-3}
warmup_s = 0.5
$3
SPEC
}

# 1. Forwarding rate, 64 B, one DuT core, generator at "max".
MAX='rate_pps = "max"'
spec rate-linux-router 'kind = "linux-router"' "$MAX"
spec rate-linux-bridge 'kind = "linux-bridge"' "$MAX"
spec rate-nflab-l2fwd 'kind = "nflab"
pipeline = ["l2fwd"]
batch = 32' "$MAX"
spec rate-nflab-router 'kind = "nflab"
pipeline = ["router"]
batch = 32' "$MAX"
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
# 3. Delayer accuracy (seed 004: 5 ms / 0.1 ms uniform), base = lat-b1-blocking.
spec delayer-5ms 'kind = "nflab"
pipeline = ["l2fwd", "delayer"]
batch = 32
rx_mode = "blocking"
[dut.delayer]
delay_us = 5000
jitter_us = 100' "$T10
drain_ms = 300"
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

for s in "$OUT"/specs/*.toml; do
  "$NFLAB" run "$s" --out "$OUT/runs" >/dev/null 2>"$OUT/$(basename "$s" .toml).log" || echo "failed: $s (see $OUT/$(basename "$s" .toml).log)"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$HERE/summarize.py" "$OUT/runs"
