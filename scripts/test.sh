#!/usr/bin/env bash
# The whole test suite, as CI runs it: formatting, lints, every unit,
# property and end-to-end test (real namespaces and veth, so as root), the
# report in headless Chromium, the Python package's tests, and a final check
# that no test left a network namespace behind.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
if [ "$(id -u)" -ne 0 ]; then
  echo "error: the end-to-end tests create network namespaces: run as root (sudo $0)" >&2
  exit 1
fi
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
mkdir -p target
# HdrHistogram's own Python port reads nflab's interval logs in a test
# (crates/analyze/tests/importers.rs).
python3 -c 'import hdrh' 2>/dev/null ||
  python3 -m pip install --quiet --disable-pip-version-check hdrhistogram ||
  echo "warning: could not install hdrhistogram (pip); the interval-log test will fail" >&2
cargo test --workspace --locked 2>&1 | tee target/test-output.txt
status=${PIPESTATUS[0]}
# The Python package (python/): loads artifact trees, draws the figures.
if [ "$status" -eq 0 ]; then
  bash scripts/ci-python.sh || status=$?
fi
left=$(ip netns list | grep -c . || true)
if [ "$left" -ne 0 ]; then
  echo "error: tests left $left network namespace(s):" >&2
  ip netns list >&2
  exit 1
fi
exit "$status"
