#!/usr/bin/env bash
# Installs what nflab needs to run (scripts/deps.txt, set "run") and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
become_root "$0" "$@"
bash scripts/deps.sh run
need_cargo
cargo build --release --locked -p nflab 2>&1 | grep -v "^\s*Compiling" || true
test -x target/release/nflab
# The Python package (python/): maturin builds the engine's bindings (crates/py) into the wheel.
py="${PYTHON:-python3}"
pip=("$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation)
"${pip[@]}" ./python || "${pip[@]}" --break-system-packages ./python
