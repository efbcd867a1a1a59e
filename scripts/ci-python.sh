#!/usr/bin/env bash
# Install the nflab Python package (python/) with its test extras and run its tests.
# Called by .ci/run; exits non-zero when a test fails or none ran.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${PYTHON:-python3}"
if ! command -v "$py" >/dev/null 2>&1; then
    echo "ci-python: $py not found" >&2
    exit 1
fi
# Build from a copy, so setuptools leaves no build/ or *.egg-info in the work tree.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$root/python" "$tmp/python"
# A distribution's own Python (PEP 668) refuses plain installs: then say so explicitly.
pip=("$py" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "$tmp/python[test]" || "${pip[@]}" --break-system-packages "$tmp/python[test]"
cd "$root/python"
set +e
# -p no:cacheprovider: keep the tree clean.
PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -q -p no:cacheprovider tests
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "ci-python: pytest collected no tests" >&2
    exit 1
fi
exit "$rc"
