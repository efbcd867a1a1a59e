#!/usr/bin/env bash
# SDN control-plane benchmark (issue 19; docs/benchmarks.md, "## SDN"):
# TableVisor's evaluation on Open vSwitch (userspace datapath) started by
# nflab. For N bridges and k FlowMods: installation time (k FlowMods spread
# over the bridges + one Barrier, first FlowMod -> last BarrierReply) and
# FlowStats delay (request over all tables -> last reply part), each the mean
# and 95 % CI over R repetitions, directly (the harness holds one connection
# per bridge) and through nflab's proxy (one emulated switch, table i on
# bridge i). The proxy's cost is the ratio of the two runs of each cell.
# The harness has one thread per connection, so the direct baseline (one
# connection per bridge) is as parallel as the proxy (one thread per switch).
#   bench/sdn/run.sh [REPEATS] [SWITCHES...]
# NFLAB_BIN=path uses that nflab binary instead of building one. OUT=dir
# (default bench/sdn/out) receives bench.jsonl, machine.txt and, from
# `nflab sdn report OUT`, report.html with the figures.
set -euo pipefail
R=${1:-10}
shift || true
SWITCHES=${*:-1 5 15 50}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
bash "$ROOT/scripts/deps.sh" run
export PATH="$HOME/.cargo/bin:$PATH"
if [ -z "${NFLAB_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --release --locked -p nflab -q)
fi
NFLAB=${NFLAB_BIN:-"$ROOT/target/release/nflab"}
OUT=${OUT:-"$ROOT/bench/sdn/out"}
mkdir -p "$OUT"
: >"$OUT/bench.jsonl"

echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; kernel $(uname -r)"
echo "ovs: $(ovs-vswitchd --version | head -1)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
{
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; kernel $(uname -r)"
  echo "ovs: $(ovs-vswitchd --version | head -1)"
  echo "bench/sdn/run.sh $R $SWITCHES, started $(date -u +%FT%TZ), load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT/machine.txt"
echo
printf "%8s %6s | %22s %22s %6s | %22s %22s %8s\n" bridges k "install_s direct" "install_s proxy" ratio "stats_ms direct" "stats_ms proxy" "diff_ms"
for n in $SWITCHES; do
  for k in 50 250; do
    d=$("$NFLAB" sdn bench --switches "$n" --flowmods "$k" --repeat "$R" --json)
    p=$("$NFLAB" sdn bench --switches "$n" --flowmods "$k" --repeat "$R" --via-proxy --json)
    python3 - "$n" "$k" "$d" "$p" "$OUT/bench.jsonl" <<'PY'
import json, sys
n, k, d, p = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
with open(sys.argv[5], "a") as f:
    f.write(json.dumps({"bridges": int(n), "flowmods": int(k), "direct": d, "proxy": p}) + "\n")
f = lambda x, s=1: "%.4f ± %.4f" % (x["mean"] * s, (x["ci95"] or 0) * s)
print("%8s %6s | %22s %22s %6.2f | %22s %22s %+8.3f" % (
    n, k, f(d["install_s"]), f(p["install_s"]), p["install_s"]["mean"] / d["install_s"]["mean"],
    f(d["stats_delay_ms"]), f(p["stats_delay_ms"]),
    p["stats_delay_ms"]["mean"] - d["stats_delay_ms"]["mean"]))
PY
  done
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/machine.txt"
"$NFLAB" sdn report "$OUT"
