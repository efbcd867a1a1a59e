#!/usr/bin/env bash
# Coverage-guided fuzzing of nflab's parsers of outside input (cargo-fuzz,
# libFuzzer; the targets are in fuzz/fuzz_targets). Builds the targets with
# the nightly toolchain, seeds each corpus from real files of the repo plus
# the hand-made seeds in fuzz/corpus/<target>, runs each target for SECONDS
# and prints executions and crashes per target. Exits 1 on any crash; the
# crashing input is kept in fuzz/artifacts/<target>/ (reproduce it with
# `cargo +nightly fuzz run -a -s none TARGET FILE` in fuzz/).
#   scripts/fuzz.sh                  # every target, 600 s each
#   scripts/fuzz.sh wire_probe 3600  # one target, one hour
#   scripts/fuzz.sh --smoke          # every target, 30 s each (scripts/test.sh)
#   scripts/fuzz.sh --runs 10000000 [TARGET[,TARGET...]] [SECONDS]
#                                    # until 10^7 executions each (no time
#                                    # limit unless SECONDS is given)
# TARGET may name several targets, comma-separated.
# Needs: a nightly toolchain (rustup) and cargo-fuzz (scripts/deps.sh test).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
export PATH="$HOME/.cargo/bin:$PATH"

seconds=600
runs=-1
if [ "${1:-}" = "--smoke" ]; then
  seconds=30
  shift
elif [ "${1:-}" = "--runs" ]; then
  runs="${2:-}"
  case "$runs" in
    '' | *[!0-9]* | 0) echo "fuzz.sh: --runs needs a whole number of executions > 0, not '$runs'" >&2; exit 2 ;;
  esac
  # Until N executions: no time limit unless SECONDS is given too.
  seconds=0
  shift 2
fi
target="${1:-all}"
seconds="${2:-$seconds}"
case "$seconds" in
  '' | *[!0-9]*) echo "fuzz.sh: SECONDS must be a whole number of seconds, not '$seconds'" >&2; exit 2 ;;
esac
command -v cargo-fuzz >/dev/null || {
  echo "fuzz.sh: cargo-fuzz is missing: install it with bash scripts/deps.sh test" >&2
  exit 2
}

cd "$root/fuzz"
all_targets=$(cargo +nightly fuzz list)
if [ "$target" = all ]; then
  targets=$all_targets
else
  targets=${target//,/ }
  for t in $targets; do
    grep -qx "$t" <<<"$all_targets" || {
      echo "fuzz.sh: unknown target '$t'; the targets are: $(echo $all_targets)" >&2
      exit 2
    }
  done
fi

# -a: debug assertions, so an integer overflow is a crash too. No sanitizer
# by default: every parser's crate forbids unsafe code, and AddressSanitizer
# makes the targets 7-25x slower (docs/benchmarks.md). Set
# FUZZ_SANITIZER=address to fuzz with it anyway.
flags=(-a -s "${FUZZ_SANITIZER:-none}")
build_start=$(date +%s)
if [ "$target" = all ]; then
  cargo +nightly fuzz build "${flags[@]}"
else
  for t in $targets; do cargo +nightly fuzz build "${flags[@]}" "$t"; done
fi
bin_dir="$root/fuzz/target/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
echo "fuzz.sh: built in $(($(date +%s) - build_start)) s" >&2

# Real files of the repo that each target's parser reads.
seeds_of() { # target
  case "$1" in
    nfr_reader) find "$root/python/tests/fixtures" "$root/crates" -path '*/target' -prune -o -name '*.nfr' -print ;;
    capture_import) find "$root/crates" -path '*/target' -prune -o \( -name '*.pcap' -o -name '*.pcapng' \) -print ;;
    csv_import) find "$root/python/tests/fixtures" "$root/crates" -path '*/target' -prune -o -name '*.csv' -print ;;
    trex_import) find "$root/crates" -path '*/target' -prune -o \( -name '*.data' -o -name '*.trex' \) -print ;;
    spec_parse) find "$root/examples" "$root/python/tests/fixtures" -name '*.toml' ;;
    *) ;;
  esac
}

# libFuzzer's log of each target (final stats included) stays here.
logs="$root/fuzz/target/logs"
mkdir -p "$logs"

failed=0
report=()
for t in $targets; do
  # New inputs go to the work corpus (fuzz/target, not committed); the
  # committed seeds are read only.
  work="$root/fuzz/target/corpus/$t"
  mkdir -p "$work" "$root/fuzz/corpus/$t" "$root/fuzz/artifacts/$t"
  while read -r f; do
    [ -n "$f" ] && cp -f "$f" "$work/repo-$(echo "${f#"$root"/}" | tr / _)"
  done < <(seeds_of "$t")
  log="$logs/$t.log"
  rc=0
  start=$(date +%s)
  # The binary built above, run directly: `cargo fuzz run` would rebuild
  # a target whose sources changed since, in the middle of a long run.
  "$bin_dir/$t" "$work" "$root/fuzz/corpus/$t" \
    -max_total_time="$seconds" -runs="$runs" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$root/fuzz/artifacts/$t/" >"$log" 2>&1 || rc=$?
  wall=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=0
  if [ "$rc" -ne 0 ]; then
    crashes=1
    failed=1
    echo "fuzz.sh: $t crashed (exit $rc):" >&2
    grep -m1 -A3 -E 'panicked at|ERROR: (libFuzzer|AddressSanitizer)' "$log" >&2 || tail -40 "$log" >&2
    ls -1 "$root/fuzz/artifacts/$t/" >&2
  fi
  report+=("$(printf '%-16s %6s s %14s execs %9s exec/s %3s crashes  load %s' "$t" "$wall" "${execs:-?}" "${rate:-?}" "$crashes" "$(cut -d' ' -f1-3 /proc/loadavg)")")
  echo "${report[-1]}"
done

echo
echo "fuzz.sh summary ($(nproc) cores, $(date -u +%FT%TZ), $(rustc +nightly --version)):"
printf '%s\n' "${report[@]}"
exit "$failed"
