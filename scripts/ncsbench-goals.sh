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
#              p99.9 against the host's noise floor (~15 min)
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
  "$nflab" run "$spec" "${run_args[@]}" | tee "$log"
  out=$(sed -n 's/^artifacts: *//p' "$log")
  rm -f "$log"
  echo "load after:  $(uptime)"
  [ -n "$out" ] || { echo "error: $part wrote no artifact tree" >&2; exit 1; }
  runs=$(ls "$out"/runs/*/ncs.json 2>/dev/null | wc -l)
  up=$(grep -l '"fell": false' "$out"/runs/*/ncs.json 2>/dev/null | wc -l)
  echo "$part: $up of $runs runs stayed up ($out)"
  [ -f "$out/ncs-challenge.json" ] && cat "$out/ncs-challenge.json"
done
