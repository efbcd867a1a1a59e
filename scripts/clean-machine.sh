#!/usr/bin/env bash
# The check a new user's machine would make: clone this repository (its
# committed HEAD, or the ref given) into a temporary directory and run the
# README's two commands there, exactly as the README writes them. Nothing of
# this work tree (build output, results, uncommitted files) is used.
#   bash scripts/clean-machine.sh [REF] [--keep]
# A truly fresh machine also lacks what earlier runs installed; this script
# checks the repository's side of that: that nothing outside it is needed
# but what scripts/deps.txt installs.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
ref=HEAD
keep=0
for a in "$@"; do
  case "$a" in
  --keep) keep=1 ;;
  *) ref="$a" ;;
  esac
done
tmp="$(mktemp -d /tmp/nflab-clean-XXXXXX)"
if [ "$keep" -eq 0 ]; then
  trap 'rm -rf "$tmp"' EXIT
fi
git clone --quiet --no-local "$here" "$tmp/nflab"
git -C "$tmp/nflab" checkout --quiet "$(git -C "$here" rev-parse "$ref")"
cd "$tmp/nflab"
# The README's commands: the lines of its first sh block.
mapfile -t cmds < <(awk '/^```sh$/{f=1;next} /^```$/{if(f)exit} f' README.md | sed 's/[[:space:]]*#.*$//' | grep .)
if [ "${#cmds[@]}" -ne 2 ]; then
  echo "clean-machine: expected the README's two commands in its first sh block, found ${#cmds[@]}" >&2
  exit 1
fi
rc=0
for c in "${cmds[@]}"; do
  echo "clean-machine: \$ $c  (in $tmp/nflab)" >&2
  start=$(date +%s)
  if bash -c "$c"; then
    echo "clean-machine: ok after $(($(date +%s) - start)) s: $c" >&2
  else
    rc=$?
    echo "clean-machine: FAILED (exit $rc) after $(($(date +%s) - start)) s: $c" >&2
    break
  fi
done
[ "$keep" -eq 1 ] && echo "clean-machine: kept $tmp" >&2
exit "$rc"
