#!/usr/bin/env bash
# The crash matrix with N random kills (#21): `nflab run` of a short study
# with host knobs (crates/cli/tests/crash_matrix.rs) is SIGKILLed N times at
# random moments; after each kill `nflab topo gc` must leave no namespace,
# veth, BPF object, helper process or knob journal, every knob must be back,
# and `nflab run --resume` must complete the study. Prints the tally and the
# machine's load; exits 1 if any kill left something behind.
#   bash scripts/crash-matrix.sh 50
#   NFLAB_CRASH_SEED=7 bash scripts/crash-matrix.sh 10   # another sequence of kill times
# (The test suite runs the short version: each failpoint once plus three random kills.)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=scripts/common.sh
. "$here/common.sh"
become_root "$0" "$@"
need_cargo

n="${1:-50}"
case "$n" in
  '' | *[!0-9]* | 0) echo "crash-matrix.sh: N must be a whole number of kills above 0, not '$n'" >&2; exit 2 ;;
esac
cd "$root"
export CARGO_INCREMENTAL=0
echo "host: $(uname -r), $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
NFLAB_CRASH_MATRIX="random:$n" NFLAB_CRASH_SEED="${NFLAB_CRASH_SEED:-$(date +%s)}" \
  cargo test -p nflab --test crash_matrix -- --nocapture --test-threads=1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
