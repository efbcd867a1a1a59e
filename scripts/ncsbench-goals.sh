#!/usr/bin/env bash
# The long NCSbench runs of issue #15, in real time (minutes each, so they
# live here and not in the tests):
#   wired30    examples/ncsbench-wired-30.toml: 30 × 49 s over the wired
#              profile; the goal is "30 of 30 stay up, no losses" (~28 min)
#   challenge  examples/ncsbench-challenge.toml: the delay sweep, 7 delays ×
#              3 repetitions (~20 min)
#   challenge-short  examples/ncsbench-challenge-short.toml: 12–15 ms × 2 (~8 min)
#   wlan       examples/ncsbench-wlan.toml: one run over the 802.11g profile
#   floor      examples/ncsbench-wired-floor.toml: the wired runs with and
#              without the link's delay, 8 × 49 s each, interleaved: d_N's
#              p99.9 against the host's noise floor (~15 min). Alongside, for
#              the whole experiment, `nflab doctor` measures the host's timer
#              floor (two holds of the wired profile's 3910 µs every 35 ms,
#              under the link workers' conditions) into the tree's
#              timer-floor.json; ncs-challenge.json's timer_floor composes it
#              with the 0-µs runs' d_N: the p99.9 no 3910-µs link can beat here
# Usage: sudo bash scripts/ncsbench-goals.sh [wired30|floor|challenge|challenge-short|wlan|all]... [-- RUN-ARGS]
# Each experiment's tree goes under results/ (or --out after --); the script
# prints the machine's load before and after, how many runs stayed up, and
# the tree's ncs-challenge.json (fraction up per configuration with its 95 %
# interval, from nflab-analyze). NFLAB=path picks the binary (default: the
# release build, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
become_root "$0" "$@"

which=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case "$1" in
    wired30 | challenge | challenge-short | wlan | floor) which+=("$1") ;;
    all) which+=(wired30 floor challenge wlan) ;;
    *)
      echo "error: unknown part '$1': use wired30, floor, challenge, challenge-short, wlan or all" >&2
      exit 2
      ;;
  esac
  shift
done
[ $# -gt 0 ] && shift
[ ${#which[@]} -eq 0 ] && which=(wired30 challenge wlan)
run_args=("$@")
[ ${#run_args[@]} -eq 0 ] && run_args=(--out results)

nflab="${NFLAB:-./target/release/nflab}"
if [ ! -x "$nflab" ]; then
  need_cargo
  CARGO_INCREMENTAL=0 cargo build --release -p nflab
fi

for part in "${which[@]}"; do
  case "$part" in
    wired30) spec=examples/ncsbench-wired-30.toml ;;
    challenge) spec=examples/ncsbench-challenge.toml ;;
    challenge-short) spec=examples/ncsbench-challenge-short.toml ;;
    wlan) spec=examples/ncsbench-wlan.toml ;;
    floor) spec=examples/ncsbench-wired-floor.toml ;;
  esac
  echo "== $part: $spec, $(date -u +%FT%TZ)"
  echo "load before: $(uptime)"
  log=$(mktemp)
  timer_pid=""
  if [ "$part" = floor ]; then
    timer_out=$(mktemp)
    "$nflab" doctor --noise-seconds 0 --timer-seconds 100000 --timer-hold-us 3910 \
      --timer-period-ms 35 --timer-keep-awake --timer-out "$timer_out" >"$log.timer" &
    timer_pid=$!
  fi
  "$nflab" run "$spec" "${run_args[@]}" | tee "$log"
  out=$(sed -n 's/^artifacts: *//p' "$log")
  rm -f "$log"
  echo "load after:  $(uptime)"
  [ -n "$out" ] || { echo "error: $part wrote no artifact tree" >&2; exit 1; }
  if [ -n "$timer_pid" ]; then
    kill -INT "$timer_pid" && wait "$timer_pid" || true
    grep '^timer floor' "$log.timer" || true
    rm -f "$log.timer"
    mv "$timer_out" "$out/timer-floor.json"
    "$nflab" report "$out" >/dev/null
  fi
  runs=$(ls "$out"/runs/*/ncs.json 2>/dev/null | wc -l)
  up=$(grep -l '"fell": false' "$out"/runs/*/ncs.json 2>/dev/null | wc -l)
  echo "$part: $up of $runs runs stayed up ($out)"
  [ -f "$out/ncs-challenge.json" ] && cat "$out/ncs-challenge.json"
  if [ "$part" = floor ] && [ -f "$out/ncs-challenge.json" ]; then
    # The goal, read off ncs-challenge.json (no statistics computed here).
    python3 - "$out/ncs-challenge.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
confs = c["configurations"]
floors = c.get("timer_floor", {}).get("d_n_p99_9_floor_ms", [])
delay = lambda k: confs[k]["sweep"].get("dut.link.delay_us")
zero = [k for k in range(len(confs)) if delay(k) == 0]
held = [k for k in range(len(confs)) if delay(k) == 3910]
if zero and held and len(floors) == len(confs):
    got = confs[held[0]]["d_n_pooled_ms"]["p99_9"]
    lo, hi = confs[held[0]]["d_n_pooled_p99_9_ci95_ms"]
    floor0 = confs[zero[0]]["d_n_pooled_ms"]["p99_9"]
    limit = floors[zero[0]]
    verdict = "met" if got <= limit else ("NOT met" if lo > limit else "not met, but the floor is inside the p99.9's 95 % interval")
    print(f"d_N p99.9 at 3910 us: {got:.3f} ms (95 % interval {lo:.3f}-{hi:.3f}); 3.910 + the 0-us floor "
          f"{floor0:.3f} = {3.91 + floor0:.3f} ms; with the host's timer floor composed: {limit:.3f} ms -> goal {verdict}")
PY
  fi
done
