#!/usr/bin/env bash
# The seed's wireless PRRT study (issue 18): examples/prrt-grid.toml over the link
# emulator's 802.11g profile, unattended, then the time it took and the machine's load.
#
#   bash scripts/prrt-grid.sh                    # all 675 runs (750 combinations, 75 refused)
#   bash scripts/prrt-grid.sh --slice            # one gap and one payload: 25 target x window runs
#   bash scripts/prrt-grid.sh --duration 5       # app.duration_s per run (default: the example's 2 s)
#   bash scripts/prrt-grid.sh --out DIR          # parent of the artifact tree (default results)
#   bash scripts/prrt-grid.sh --resume DIR       # finish an interrupted grid
#   NFLAB=target/release/nflab bash scripts/prrt-grid.sh ...   # without building first
#
# Writes DIR/<stamp>-prrt-grid/{runs/NNN/prrt.json, prrt-packets.parquet, ..., report.html}.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
become_root "$0" "$@"
need_cargo

out=results
slice=0
duration=""
resume=""
while [ $# -gt 0 ]; do
  case "$1" in
    --slice) slice=1 ;;
    --duration) duration="$2"; shift ;;
    --out) out="$2"; shift ;;
    --resume) resume="$2"; shift ;;
    *) echo "error: unknown argument $1; use --slice, --duration S, --out DIR or --resume DIR" >&2; exit 2 ;;
  esac
  shift
done

# NFLAB=path/to/nflab uses that binary instead of building one.
bin=${NFLAB:-}
if [ -z "$bin" ]; then
  cargo build --release -p nflab >&2
  bin=./target/release/nflab
fi
uptime >&2
start=$(date +%s)
if [ -n "$resume" ]; then
  "$bin" run --resume "$resume"
else
  spec=examples/prrt-grid.toml
  if [ "$slice" = 1 ] || [ -n "$duration" ]; then
    # A copy next to the example, so its include of the link profile still resolves.
    spec=examples/.prrt-grid-$$.toml
    trap 'rm -f "$spec"' EXIT
    cp examples/prrt-grid.toml "$spec"
    if [ "$slice" = 1 ]; then
      sed -i 's/^"app.gap_ms" = .*/"app.gap_ms" = [3.25]/; s/^"app.payload_bytes" = .*/"app.payload_bytes" = [365]/' "$spec"
    fi
    if [ -n "$duration" ]; then
      sed -i "s/^duration_s = 2\$/duration_s = $duration/" "$spec"
    fi
  fi
  "$bin" run "$spec" --out "$out"
fi
end=$(date +%s)
echo "prrt-grid: $((end - start)) s wall clock on $(nproc) CPUs; load now: $(uptime | sed 's/.*load average: //')" >&2
