#!/usr/bin/env bash
# Overhead of the in-stack UDP monitor (issue 16; docs/benchmarks.md, "## eBPF
# monitor"): the udp-relay's lossless rate (RFC 2544 throughput search, loss
# tolerance 0, flood mode: no artificial delay) with the monitor absent, attached
# but sampling (seed 003's default: 10 datagrams at exponential intervals, mean
# 0.2 s) and taking every datagram — one invocation, runs interleaved per repeat so
# the host's load hits all three alike. Prints each throughput and the ratios to
# the no-monitor run, with the machine and its load.
# Then the same three at one fixed rate below every lossless rate (FIXED_PPS,
# FIXED_SECONDS per run, interleaved, REPEATS rounds): the CPU time of both cores
# per relayed datagram during the traffic (busy ticks of /proc/stat, recorded by
# `nflab run` in runs/NNN/system.json), and each mode's extra over `off` — a
# finer instrument than a zero-loss search, whose trials scatter by ±30 %.
#   bench/monitor/run.sh [REPEATS] [TRIAL_SECONDS] [FIXED_PPS] [FIXED_SECONDS]
# Run it alone on a quiet machine: two cores are shared by everything.
set -euo pipefail
R=${1:-3}
T=${2:-1}
FIXED_PPS=${3:-20000}
FIXED_S=${4:-20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
bash "$ROOT/scripts/deps.sh" run
export PATH="$HOME/.cargo/bin:$PATH"
# NFLAB=path/to/nflab uses that binary instead of building the release one.
if [ -z "${NFLAB:-}" ]; then
  (cd "$ROOT" && cargo build --release --locked -p nflab -q)
  NFLAB="$ROOT/target/release/nflab"
fi
WORK=$(mktemp -d /tmp/nflab-bench-monitor-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

spec() { # mode -> spec text
  cat <<SPEC
[experiment]
name = "monitor-overhead-$1"
seed = 1
[dut]
kind = "udp-relay"
[dut.relay]
flood = true
[traffic]
frame_bytes = 128
warmup_s = 0.2
[rfc2544]
procedure = "throughput"
loss_tolerance = 0.0
min_rate_pps = 5000
max_rate_pps = 400000
resolution_pps = 5000
trial_s = $T
SPEC
  case "$1" in
    sampling) printf '[monitor]\nkind = "udp"\nsample = { packets = 10, mean_interval_s = 0.2 }\n' ;;
    all) printf '[monitor]\nkind = "udp"\nsample = "all"\n' ;;
  esac
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "load before: $(uptime)"
for mode in off sampling all; do spec "$mode" > "$WORK/$mode.toml"; done
for i in $(seq 1 "$R"); do
  for mode in off sampling all; do
    "$NFLAB" run "$WORK/$mode.toml" --out "$WORK/out" --json > "$WORK/$mode-$i.json"
    python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['rfc2544'][0]; print(sys.argv[2], v['throughput_pps'])" \
      "$WORK/$mode-$i.json" "$mode" | tee -a "$WORK/results.txt"
  done
done
echo "load after: $(uptime)"
python3 - "$WORK/results.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    mode, pps = line.split()
    runs.setdefault(mode, []).append(float(pps) if pps != "None" else 0.0)
base = statistics.median(runs["off"])
for mode in ("off", "sampling", "all"):
    med = statistics.median(runs[mode])
    print(f"{mode:9s} lossless rate median {med:10.0f} pps  runs {runs[mode]}  ratio to off {med / base:.3f}")
PY

echo "== fixed rate: $FIXED_PPS pps for $FIXED_S s per run, $R rounds; CPU from /proc/stat at $(getconf CLK_TCK) Hz"
fixed_spec() { # mode -> spec text
  cat <<SPEC
[experiment]
name = "monitor-cpu-$1"
seed = 1
[dut]
kind = "udp-relay"
[dut.relay]
flood = true
[traffic]
frame_bytes = 128
rate_pps = $FIXED_PPS
duration_s = $FIXED_S
warmup_s = 0.2
SPEC
  case "$1" in
    sampling) printf '[monitor]\nkind = "udp"\nsample = { packets = 10, mean_interval_s = 0.2 }\n' ;;
    all) printf '[monitor]\nkind = "udp"\nsample = "all"\n' ;;
  esac
}
for mode in off sampling all; do fixed_spec "$mode" > "$WORK/fixed-$mode.toml"; done
echo "load before: $(uptime)"
for i in $(seq 1 "$R"); do
  for mode in off sampling all; do
    "$NFLAB" run "$WORK/fixed-$mode.toml" --out "$WORK/fixed-$mode-$i" > /dev/null
    python3 - "$WORK/fixed-$mode-$i" "$mode" "$(getconf CLK_TCK)" <<'PY' | tee -a "$WORK/fixed.txt"
import glob, json, sys
run = glob.glob(sys.argv[1] + "/*/runs/000")[0]
ticks = json.load(open(run + "/system.json"))["delta"]["cpu_ticks"]
busy = sum(v for k, v in ticks.items() if k not in ("idle", "iowait"))
got = json.load(open(run + "/summary.json"))["packets"]["received"]
print(sys.argv[2], got, busy, f"{busy / int(sys.argv[3]) * 1e9 / max(got, 1):.0f}")
PY
  done
done
echo "load after: $(uptime)"
python3 - "$WORK/fixed.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    mode, got, busy, ns = line.split()
    runs.setdefault(mode, []).append((int(got), float(ns)))
base = statistics.median(ns for _, ns in runs["off"])
for mode in ("off", "sampling", "all"):
    med = statistics.median(ns for _, ns in runs[mode])
    print(f"{mode:9s} CPU per datagram median {med:6.0f} ns (runs {[int(ns) for _, ns in runs[mode]]}, "
          f"datagrams {[g for g, _ in runs[mode]]})  extra {med - base:+5.0f} ns = {(med - base) / base:+.1%} of off")
PY
