#!/usr/bin/env bash
# Realtime probe latency through Open vSwitch with and without background
# traffic, with and without a priority queue (issue 19 item 6; docs/sdn.md):
# the four cases of examples/sdn/qos.toml, one `nflab run` each; writes
# OUT/qos.json ([{"label", "p50_ns", "p99_ns", ...}]) for `nflab sdn report`.
#   bench/sdn/qos.sh            # NFLAB_BIN=path, OUT=dir (default bench/sdn/out)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NFLAB=${NFLAB_BIN:-"$ROOT/target/release/nflab"}
OUT=${OUT:-"$ROOT/bench/sdn/out"}
mkdir -p "$OUT"
work=$(mktemp -d /tmp/nflab-qos.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
rows=()
for bg in 0 1; do
  for prio in 0 1; do
    spec="$work/qos-$bg-$prio.toml"
    # The example without the priority key and/or the background stream.
    awk -v bg="$bg" -v prio="$prio" '
      /^priority_dscp/ && !prio { next }
      /^\[\[traffic.background\]\]/ { skip = !bg }
      /^\[/ && !/^\[\[traffic.background\]\]/ { skip = 0 }
      !skip' "$ROOT/examples/sdn/qos.toml" >"$spec"
    "$NFLAB" run "$spec" --out "$work/out-$bg-$prio" --json >"$work/run.json"
    run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dir"])' "$work/run.json")/runs/000
    label="background $([ "$bg" = 1 ] && echo 15 || echo 0) Mbit/s, $([ "$prio" = 1 ] && echo "priority queue" || echo "one FIFO")"
    rows+=("$(python3 - "$run" "$label" <<'PY'
import json, sys
run, label = sys.argv[1], sys.argv[2]
s = json.load(open(run + "/summary.json"))
d = json.load(open(run + "/dut.json"))
l = s["latency_ns"]
print(json.dumps({"label": label, "p50_ns": l["p50"], "p99_ns": l["p99"], "mean_ns": l["mean"],
                  "max_ns": l["max"], "received": s["packets"]["received"], "lost": s["packets"]["lost"],
                  "queues": d.get("queues")}))
PY
)")
    echo "${rows[-1]}"
  done
done
(IFS=,; echo "[${rows[*]}]") >"$OUT/qos.json"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "wrote $OUT/qos.json"
