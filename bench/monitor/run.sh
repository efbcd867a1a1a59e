#!/usr/bin/env bash
# Overhead of the in-stack UDP monitor (issue 16; docs/benchmarks.md, "## eBPF
# monitor"), three instruments.
# First, in one run: a flood relay saturated (200 kpps offered, about twice what
# it relays) while the monitor's modes take turns in 0.1-s blocks ([monitor]
# rotate: detached = no monitor, off = attached taking nothing, sampling, all);
# the relay's throughput per block from the recorder — its capacity, the
# forwarding rate under overload, not RFC 2544's lossless rate — each mode against
# "detached" within every round of four blocks, and what each adds per datagram,
# with bootstrapped 95 % CIs (docs/monitor.md, "The cost in one run"). A drift of
# the host hits every block of a round alike. REPEATS = 0 skips the searches.
# Then the udp-relay's lossless rate (RFC 2544 throughput search, loss
# tolerance 0, flood mode: no artificial delay) with the monitor absent, attached
# but sampling (seed 003's default: 10 datagrams at exponential intervals, mean
# 0.2 s) and taking every datagram — one invocation, runs interleaved per repeat so
# the host's load hits all three alike. Prints each throughput and the ratios to
# the no-monitor run, with the machine and its load.
# Then, at one fixed rate (FIXED_PPS) for sampling and all, what the monitor
# itself spends per datagram, read where it is spent: the BPF programs' run time
# from the kernel (bpf_stats) and the monitor thread's CPU time over FIXED_SECONDS
# — a finer instrument than a zero-loss search, whose trials scatter by ±30 %.
#   bench/monitor/run.sh [REPEATS] [TRIAL_SECONDS] [FIXED_PPS] [FIXED_SECONDS] [ROTATE_SECONDS]
# (root: it sets kernel.bpf_stats_enabled for the second part and restores it)
# Run it alone on a quiet machine: two cores are shared by everything.
set -euo pipefail
R=${1:-3}
T=${2:-1}
FIXED_PPS=${3:-20000}
FIXED_S=${4:-20}
ROTATE_S=${5:-60}
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

spec() { # mode, then "search" (RFC 2544 throughput) or "fixed" -> spec text
  cat <<SPEC
[experiment]
name = "monitor-$2-$1"
seed = 1
[dut]
kind = "udp-relay"
[dut.relay]
flood = true
[traffic]
frame_bytes = 128
warmup_s = 0.2
SPEC
  if [ "$2" = search ]; then
    printf '[rfc2544]\nprocedure = "throughput"\nloss_tolerance = 0.0\nmin_rate_pps = 5000\n'
    printf 'max_rate_pps = 400000\nresolution_pps = 5000\ntrial_s = %s\n' "$T"
  else
    printf 'rate_pps = %s\nduration_s = %s\n' "$FIXED_PPS" "$((FIXED_S + 6))"
  fi
  case "$1" in
    idle) printf '[monitor]\nkind = "udp"\nsample = "off"\n' ;;
    sampling) printf '[monitor]\nkind = "udp"\nsample = { packets = 10, mean_interval_s = 0.2 }\n' ;;
    all) printf '[monitor]\nkind = "udp"\nsample = "all"\n' ;;
  esac
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r)"
echo "load before: $(uptime)"

echo "== one run, the modes taking turns: $ROTATE_S s, relay saturated"
cat >"$WORK/rotate.toml" <<SPEC
[experiment]
name = "monitor-rotate"
seed = 1
[topology]
kind = "netns"
gen_cpu = 0
rec_cpu = 0
[dut]
kind = "udp-relay"
cpu = 1
[dut.relay]
flood = true
[traffic]
frame_bytes = 128
rate_pps = 200000
duration_s = $ROTATE_S
warmup_s = 0.2
[monitor]
kind = "udp"
rotate = ["detached", "off", "sampling", "all"]
rotate_block_s = 0.1
SPEC
"$NFLAB" run "$WORK/rotate.toml" --out "$WORK/rotate" > /dev/null
python3 - "$(ls -d "$WORK"/rotate/*/runs/000)" <<'PY'
import json, sys
run = sys.argv[1]
r = json.load(open(run + "/monitor.json"))["rotation"]
gen = json.load(open(run + "/gen.json"))
rec = json.load(open(run + "/recorder.json"))
print(f"offered {gen['tx_pps']:.0f} pps, recorder kernel drops {rec['kernel_drops']}; "
      f"{r['saturated_rounds']} saturated rounds of {r['rounds']} (blocks of {r['block_s']:.3f} s, "
      f"bootstrap stretches of {r['bootstrap_block_rounds']} rounds)")
for m in r["modes"]:
    if m["ratio"] is None:
        print(f"{m['mode']:9s} no saturated round: no figure")
        continue
    lo, hi = m["ratio_ci"]
    elo, ehi = m["extra_ns_ci"]
    print(f"{m['mode']:9s} {m['mean_pps']:9.0f} pps  ratio to {r['reference']} {m['ratio']:.3f} [{lo:.3f}, {hi:.3f}]  "
          f"cost {100 * m['cost']:+.1f} % (at most {100 * (1 - lo):.1f} %)  "
          f"{m['extra_ns_per_datagram']:+.0f} ns per datagram [{elo:+.0f}, {ehi:+.0f}]")
PY
for mode in off sampling all; do spec "$mode" search > "$WORK/$mode.toml"; done
for i in $(seq 1 "$R"); do
  for mode in off sampling all; do
    "$NFLAB" run "$WORK/$mode.toml" --out "$WORK/out" --json > "$WORK/$mode-$i.json"
    python3 -c "import json,sys; v=json.load(open(sys.argv[1]))['rfc2544'][0]; print(sys.argv[2], v['throughput_pps'])" \
      "$WORK/$mode-$i.json" "$mode" | tee -a "$WORK/results.txt"
  done
done
echo "load after: $(uptime)"
touch "$WORK/results.txt"
[ "$R" -gt 0 ] && python3 - "$WORK/results.txt" <<'PY'
import statistics, sys
runs, failed = {}, {}
for line in open(sys.argv[1]):
    mode, pps = line.split()
    # None: the search found no lossless rate at all (a trial at the lowest rate lost).
    if pps == "None":
        failed[mode] = failed.get(mode, 0) + 1
    else:
        runs.setdefault(mode, []).append(float(pps))
base = statistics.median(runs["off"]) if runs.get("off") else float("nan")
for mode in ("off", "sampling", "all"):
    med = statistics.median(runs[mode]) if runs.get(mode) else float("nan")
    print(f"{mode:9s} lossless rate median {med:10.0f} pps  runs {runs.get(mode, [])}"
          f"{f'  ({failed[mode]} found none)' if mode in failed else ''}  ratio to off {med / base:.3f}")
PY

echo "== cost per hook: $FIXED_PPS pps, BPF run time from the kernel (bpf_stats) over $FIXED_S s"
# The programs' own time (run_time_ns / run_cnt of each, kernel.bpf_stats_enabled:
# two clock reads per call on top, so upper bounds) and the monitor thread's CPU
# time, read FIXED_S seconds apart in the middle of a run of each mode. The
# ingress program (a filter on the relay's socket) runs once per relayed datagram,
# the egress tracepoint for every frame a device of the host queues.
STATS_WAS=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -qw kernel.bpf_stats_enabled="$STATS_WAS"; rm -rf "$WORK"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1
cat >"$WORK/hooks.py" <<'PY'
import json, sys
progs = [p for p in json.load(sys.stdin) if p.get("name") in ("udp_ingress", "udp_egress")]
print(" ".join(f"{p['name']}={p.get('run_time_ns', 0)}:{p.get('run_cnt', 0)}" for p in progs))
PY
hooks() { bpftool prog show -j | python3 "$WORK/hooks.py"; }
thread_ticks() { awk '{print $14 + $15}' "$(dirname "$(grep -lx nflab-monitor /proc/[0-9]*/task/*/comm | head -1)")/stat"; }
for mode in idle sampling all; do
  spec "$mode" fixed > "$WORK/fixed-$mode.toml"
  "$NFLAB" run "$WORK/fixed-$mode.toml" --out "$WORK/fixed-$mode" > /dev/null &
  run_pid=$!
  sleep 3
  h0=$(hooks); c0=$(thread_ticks)
  sleep "$FIXED_S"
  h1=$(hooks); c1=$(thread_ticks)
  wait "$run_pid"
  python3 - "$mode" "$h0" "$h1" "$((c1 - c0))" "$FIXED_S" "$FIXED_PPS" "$(getconf CLK_TCK)" "$WORK/results.txt" <<'PY'
import statistics, sys
mode, h0, h1, ticks, secs, pps, hz, results = sys.argv[1:]
parse = lambda h: {k: tuple(map(int, v.split(":"))) for k, v in (x.split("=") for x in h.split())}
a, b = parse(h0), parse(h1)
per = {k: (b[k][0] - a[k][0]) / max(b[k][1] - a[k][1], 1) for k in b}
calls = {k: (b[k][1] - a[k][1]) / float(secs) / float(pps) for k in b}
bpf = sum(per[k] * calls[k] for k in b)
thread_ns = int(ticks) / int(hz) * 1e9 / (float(secs) * float(pps))
print(f"{mode:9s} ingress {per['udp_ingress']:5.0f} ns x {calls['udp_ingress']:.2f}/datagram, "
      f"egress {per['udp_egress']:5.0f} ns x {calls['udp_egress']:.2f}/datagram: BPF {bpf:5.0f} ns per datagram; "
      f"monitor thread {ticks} ticks = {thread_ns:.0f} ns per datagram")
# Against the relay's own time per datagram at its lossless rate (the median of the
# `off` searches above): the BPF time lies on each datagram's path; the thread's
# CPU is a fixed share of a core (its wake-ups and buffer reads), charged here to
# the datagrams of the lossless rate. Both are upper bounds (bpf_stats' clock reads).
off = [float(l.split()[1]) for l in open(results) if l.startswith("off ") and l.split()[1] != "None"]
if off and statistics.median(off) > 0:
    rate = statistics.median(off)
    per_datagram_ns = 1e9 / rate
    thread_share = int(ticks) / int(hz) / float(secs)
    print(f"{mode:9s} against the relay's {per_datagram_ns / 1e3:.1f} µs per datagram at its lossless rate "
          f"({rate:.0f} pps): BPF {100 * bpf / per_datagram_ns:.1f} %, "
          f"with the monitor thread ({100 * thread_share:.1f} % of a core) {100 * (bpf + thread_share * per_datagram_ns) / per_datagram_ns:.1f} %")
PY
done
