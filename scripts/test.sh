#!/usr/bin/env bash
# The whole test suite: installs what the tests need (scripts/deps.txt, sets
# "run" and "test"), then formatting, lints, every unit, property and
# end-to-end test (real namespaces and veth, so as root), the report in
# headless Chromium, the Python package's tests, a 30 s smoke of every fuzz
# target, and a final check that no test left a network namespace behind.
#
# No test passes by skipping: a missing tool fails its test, naming the
# package. A developer may opt out with NFLAB_ALLOW_SKIP=1 (and, not root and
# without sudo, the namespace tests are then skipped); the last lines say how
# many tests were skipped and why. With CI set, any skip fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
if [ "$(id -u)" -ne 0 ] && [ -n "${NFLAB_ALLOW_SKIP:-}" ] && [ "${NFLAB_ALLOW_SKIP}" != 0 ] &&
  ! command -v sudo >/dev/null 2>&1; then
  echo "warning: not root: installing nothing, and the tests that need root are skipped" >&2
else
  become_root "$0" "$@"
  bash scripts/deps.sh run test
fi
need_cargo
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
mkdir -p target
export NFLAB_SKIP_LOG="$PWD/target/skipped-tests.txt"
: >"$NFLAB_SKIP_LOG"
set +e
cargo test --workspace --locked --no-fail-fast 2>&1 | tee target/test-output.txt
status=${PIPESTATUS[0]}
# The Python package (python/): loads artifact trees, draws the figures.
if [ "$status" -eq 0 ]; then
  bash scripts/ci-python.sh
  status=$?
fi
# Every fuzz target for 30 s (scripts/fuzz.sh; nightly and cargo-fuzz from deps.txt).
if [ "$status" -eq 0 ]; then
  bash scripts/fuzz.sh --smoke
  status=$?
fi
set -e
left=$(ip netns list 2>/dev/null | grep -c . || true)
if [ "$left" -ne 0 ]; then
  echo "error: tests left $left network namespace(s):" >&2
  ip netns list >&2
  status=1
fi
skipped=$(grep -c . "$NFLAB_SKIP_LOG" || true)
echo
echo "skipped tests: $skipped"
if [ "$skipped" -ne 0 ]; then
  sed 's/^/  /' "$NFLAB_SKIP_LOG"
  case "${CI:-}" in
  "" | 0 | false) ;;
  *)
    echo "error: CI is set, where no test may be skipped" >&2
    status=1
    ;;
  esac
fi
exit "$status"
