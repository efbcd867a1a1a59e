#!/usr/bin/env bash
# Sets nflab up and runs the quickstart experiment on the built-in
# two-namespace topology: a results table on the terminal, the artifact tree
# under results/, and results/<...>/report.html.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
become_root "$0" "$@"
bash scripts/setup.sh
# Not exec: through sudo, the shell hands the build back to the caller when nflab ends.
./target/release/nflab run examples/quickstart.toml --out results "$@"
