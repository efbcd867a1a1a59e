#!/usr/bin/env bash
# Build and install the nflab Python package (python/, with the engine's bindings) with its
# test extras and run its tests.
# Called by .ci/run; exits non-zero when a test fails or none ran.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
    echo "ci-python: $py not found" >&2
    exit 1
fi
# Build the wheel from the repository as a user does (pip + maturin, the build backend of
# python/pyproject.toml): maturin compiles crates/py, the engine's PyO3 bindings, into
# nflab._engine; cargo's output goes to target/, nothing is written into python/.
# maturin comes from deps.txt, so the build needs no isolated environment.
# A distribution's own Python (PEP 668) refuses plain installs: then say so explicitly.
pip=("$py" -m pip install --quiet --disable-pip-version-check --no-build-isolation)
"${pip[@]}" "$root/python[test]" || "${pip[@]}" --break-system-packages "$root/python[test]"
# The bindings' PyO3 glue is behind a feature the workspace lint does not turn on.
(cd "$root" && cargo clippy -q -p nflab-py --features python --all-targets --locked -- -D warnings)
# The tests compare the Python API with the CLI: the binary of this tree.
if [ -z "${NFLAB_BIN:-}" ]; then
    (cd "$root" && cargo build -q --locked -p nflab)
    export NFLAB_BIN="$root/target/debug/nflab"
fi
# From tests/, so that `import nflab` is the installed package with its extension module,
# not the sources in python/ (python -m puts the working directory first on sys.path).
cd "$root/python/tests"
set +e
# -p no:cacheprovider: keep the tree clean.
PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -q -p no:cacheprovider -c ../pyproject.toml --rootdir .. .
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "ci-python: pytest collected no tests" >&2
    exit 1
fi
exit "$rc"
