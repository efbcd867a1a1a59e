#!/usr/bin/env bash
# Seed 003's MVNOCoreSim protocol: 10 runs of 5 min, first 60 s trimmed, for every
# case of docs/models.md §7 (≈ 40 min of one core on a quiet host), or a part of it.
#   bash bench/model/mvno_reproduce.sh                      # everything
#   bash bench/model/mvno_reproduce.sh bottleneck:460       # one row (CASE[:RATE])
#   RUNS=2 DURATION_S=120 WARMUP_S=30 bash bench/model/mvno_reproduce.sh overload
# Prints the Markdown table of docs/models.md, with the machine and its load.
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_INCREMENTAL=0
cargo build --release -q -p nflab-model --example mvno_reproduce
echo "machine: $(uname -n), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
target/release/examples/mvno_reproduce "${RUNS:-10}" "${DURATION_S:-300}" "${WARMUP_S:-60}" ${1:+"$1"}
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
