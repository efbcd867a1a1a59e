#!/usr/bin/env bash
# Installs what is missing of the sets named on the command line (run, test)
# from scripts/deps.txt, the one list of nflab's host dependencies.
# Idempotent: a package whose probe succeeds is left alone, and apt is not
# called at all when nothing is missing. Needs root for apt.
#   bash scripts/deps.sh run        # what nflab run needs
#   bash scripts/deps.sh run test   # and what the tests need
#   bash scripts/deps.sh --list run test   # print the packages, install nothing
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
list_only=0
if [ "${1:-}" = "--list" ]; then
  list_only=1
  shift
fi
[ $# -gt 0 ] || set -- run
py="${PYTHON:-python3}"
export PATH="$HOME/.cargo/bin:$PATH"

present() { # probe
  case "$1" in
    py:*) "$py" -c "import ${1#py:}" >/dev/null 2>&1 ;;
    /*) [ -e "$1" ] ;;
    +*) rustup run "${1#+}" rustc --version >/dev/null 2>&1 ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac
}

apt_missing=()
pip_missing=()
rustup_missing=()
toolchain_missing=()
cargo_missing=()
while read -r set kind package probe _; do
  case "$set" in '' | '#'*) continue ;; esac
  wanted=0
  for s in "$@"; do [ "$s" = "$set" ] && wanted=1; done
  [ "$wanted" -eq 1 ] || continue
  if [ "$list_only" -eq 1 ]; then
    echo "$set $kind $package"
    continue
  fi
  present "$probe" && continue
  case "$kind" in
    apt) apt_missing+=("$package") ;;
    pip) pip_missing+=("$package") ;;
    rustup)
      case "$probe" in
        +*) toolchain_missing+=("$package") ;;
        *) rustup_missing+=("$package") ;;
      esac ;;
    cargo) cargo_missing+=("$package") ;;
    *) echo "deps.sh: unknown kind '$kind' for $package in scripts/deps.txt (valid: apt, pip, rustup, cargo)" >&2; exit 2 ;;
  esac
done <"$here/deps.txt"
[ "$list_only" -eq 1 ] && exit 0

if [ ${#apt_missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing ${apt_missing[*]}; installing them needs root (sudo bash $0 $*)" >&2
    exit 1
  fi
  echo "deps.sh: installing ${apt_missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${apt_missing[@]}" >/dev/null
fi
if [ ${#rustup_missing[@]} -gt 0 ]; then
  if ! command -v rustup >/dev/null; then
    echo "deps.sh: missing Rust components ${rustup_missing[*]} and no rustup to add them: install them with your toolchain's packages" >&2
    exit 1
  fi
  rustup component add "${rustup_missing[@]}"
fi
if [ ${#toolchain_missing[@]} -gt 0 ]; then
  if ! command -v rustup >/dev/null; then
    echo "deps.sh: missing Rust toolchains ${toolchain_missing[*]} and no rustup to add them" >&2
    exit 1
  fi
  for t in "${toolchain_missing[@]}"; do rustup toolchain install --profile minimal "$t"; done
fi
if [ ${#cargo_missing[@]} -gt 0 ]; then
  echo "deps.sh: installing ${cargo_missing[*]} with cargo install --locked" >&2
  for c in "${cargo_missing[@]}"; do cargo install --locked "$c"; done
fi
if [ ${#pip_missing[@]} -gt 0 ]; then
  echo "deps.sh: installing Python packages ${pip_missing[*]}" >&2
  pip=("$py" -m pip install --quiet --disable-pip-version-check)
  # A distribution's own Python (PEP 668) refuses plain installs: say so explicitly.
  "${pip[@]}" "${pip_missing[@]}" || "${pip[@]}" --break-system-packages "${pip_missing[@]}"
fi
