#!/usr/bin/env bash
# Benchmark of nflab's analysis engine (see docs/benchmarks.md, "## Analysis").
#   bench/analyze/run.sh [N]      (default N = 1e8 records)
#   ROUNDS=5 SKIP_PERCENTILES=1 bench/analyze/run.sh 1e8   (the anomaly comparison only, in
#   5 interleaved rounds: per-round and median ratios, the load average of each round)
# 1. anomalies: nflab (--anomalies-only on all cores and on one; the full pass) vs seed
#    001's data-postprocessor (KHTangent/thesis-subprojects, built in /tmp, never
#    committed) on the same TRex-fork file and (n, t) = (2, 250 us);
# 2. exact percentiles: nflab vs a polars script and a numpy script.
# Prints the machine, wall times, peak RSS and the ratios. Needs: cargo, python3 with
# numpy + polars, and a checkout of thesis-subprojects in $SEED_REPO (a git dir).
set -euo pipefail
N=${1:-1e8}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${WORK:-/tmp/nflab-bench-analyze}
SEED_REPO=${SEED_REPO:-/work/.mirror/KHTangent+thesis-subprojects/repo}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-analyze}
mkdir -p "$WORK"
DATA="$WORK/bench-$N.data"

rm -f "$WORK/ratios"
echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB; kernel $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rustc: $(rustc --version); python: $(python3 --version 2>&1); polars $(python3 -c 'import polars; print(polars.__version__)'); numpy $(python3 -c 'import numpy; print(numpy.__version__)')"

SEED_BIN="$WORK/seed/target/release/data-postprocessor"
if [ ! -x "$SEED_BIN" ]; then
  echo "== building data-postprocessor (release) from $SEED_REPO"
  rm -rf "$WORK/seed" && mkdir -p "$WORK/seed"
  git --git-dir="$SEED_REPO" archive HEAD data-postprocessor | tar x -C "$WORK/seed"
  (cd "$WORK/seed/data-postprocessor" && CARGO_TARGET_DIR="$WORK/seed/target" cargo build --release -q)
fi
(cd "$ROOT" && cargo build --release -q -p nflab-analyze --example analyze)
NFLAB="$CARGO_TARGET_DIR/release/examples/analyze"
[ -f "$DATA" ] || python3 "$HERE/gen_trex.py" "$N" "$DATA"
cat "$DATA" > /dev/null   # warm the page cache for every tool alike

t() { # label, command...: prints "label wall_s peak_kib user_s sys_s"
  local label=$1; shift
  /usr/bin/time -f "$label %e %M %U %S" -o "$WORK/time.$label" "$@"
  cat "$WORK/time.$label" >&2
}

ROUNDS=${ROUNDS:-1}
echo "== 1. anomalies n=2, t=250us on $N records ($(du -h "$DATA" | cut -f1)), $ROUNDS interleaved round(s)"
for round in $(seq 1 "$ROUNDS"); do
  echo "-- round $round, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  t seed "$SEED_BIN" "$DATA" validate -n 2 -t 250 --decimals 9 > "$WORK/seed.out"
  t nflab_fast "$NFLAB" "$DATA" --anomalies-only --anomaly 2:250us --events 100000000 > "$WORK/nflab_fast.json"
  t nflab_fast1 "$NFLAB" "$DATA" --anomalies-only --threads 1 --anomaly 2:250us --events 100000000 > "$WORK/nflab_fast1.json"
  t nflab "$NFLAB" "$DATA" --format trex --anomaly 2:250us --events 100000000 > "$WORK/nflab.json"
  for out in nflab_fast nflab_fast1 nflab; do
    printf '%s: ' "$out"
    python3 "$HERE/compare_anomalies.py" "$WORK/seed.out" "$WORK/$out.json" "$DATA"
  done
  read -r _ ts ms us ss < "$WORK/time.seed"
  for out in nflab_fast nflab_fast1 nflab; do
    read -r _ tn mn un sn < "$WORK/time.$out"
    python3 -c "print(f'speed-up $out vs data-postprocessor: {$ts/$tn:.2f}x wall, {($us+$ss)/($un+$sn):.2f}x CPU (user+sys {$un+$sn:.2f} vs {$us+$ss:.2f} s; peak RSS {$mn/1024:.0f} vs {$ms/1024:.0f} MiB)')"
    echo "$out $(python3 -c "print($ts/$tn)") $(python3 -c "print(($us+$ss)/($un+$sn))")" >> "$WORK/ratios"
  done
done
python3 - "$WORK/ratios" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for out in ("nflab_fast", "nflab_fast1", "nflab"):
    wall = [float(r[1]) for r in rows if r[0] == out]
    cpu = [float(r[2]) for r in rows if r[0] == out]
    print(f"{out}: wall ratio median {statistics.median(wall):.2f}x (rounds {', '.join(f'{w:.2f}' for w in wall)}); "
          f"CPU ratio median {statistics.median(cpu):.2f}x")
PY
rm -f "$WORK/ratios"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${SKIP_PERCENTILES:-0}" = 1 ] && exit 0

echo "== 2. exact percentiles of $N latencies"
t nflab_exact "$NFLAB" "$DATA" --format trex --exact > "$WORK/nflab_exact.json"
# The anomalies-only pass with every latency kept: counts, moments, exact
# percentiles and anomalies, the file split across cores.
t nflab_exact_fast "$NFLAB" "$DATA" --anomalies-only --exact > "$WORK/nflab_exact_fast.json"
t polars python3 "$HERE/pct_polars.py" "$DATA" > "$WORK/polars.json"
t numpy python3 "$HERE/pct_numpy.py" "$DATA" > "$WORK/numpy.json"
t nflab_hdr "$NFLAB" "$DATA" --format trex --hdr > "$WORK/nflab_hdr.json"
python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
for mine in ("nflab_exact", "nflab_exact_fast"):
    n = json.load(open(f"{w}/{mine}.json"))["latency_ns"]
    for tool in ("polars", "numpy"):
        o = json.load(open(f"{w}/{tool}.json"))
        same = all(o[f"p{k}"] == n[f"p{k}"] for k in ("50", "90", "99", "99.9", "99.99", "99.999")) and o["max"] == n["max"]
        print(f"percentiles {mine} == {tool}: {same}")
times = {}
for k in ("nflab_exact", "nflab_exact_fast", "polars", "numpy", "nflab_hdr"):
    _, s, m, *_ = open(f"{w}/time.{k}").read().split()
    times[k] = (float(s), int(m))
    print(f"{k:12s} {float(s):8.2f} s  peak RSS {int(m)/1024:8.0f} MiB")
for mine in ("nflab_exact", "nflab_exact_fast"):
    print(f"ratio polars/{mine}: {times['polars'][0]/times[mine][0]:.2f}x; numpy/{mine}: {times['numpy'][0]/times[mine][0]:.2f}x")
PY
