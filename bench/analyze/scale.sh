#!/usr/bin/env bash
# Scale check of issue 4: N records (default 10^9) through the full streaming
# pass on the HDR path, with peak memory. The records are generated on the fly
# (bench/analyze/gen_trex.py, seeded) and piped in, so no 16 GB file is written.
#   bench/analyze/scale.sh [N]
set -euo pipefail
N=${1:-1e9}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/work/target-analyze}
WORK=${WORK:-/tmp/nflab-bench-scale}
mkdir -p "$WORK"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; kernel $(uname -r); load average $(cut -d' ' -f1-3 /proc/loadavg)"
(cd "$ROOT" && cargo build --release -q -p nflab-analyze --example analyze)
python3 "$HERE/gen_trex.py" "$N" /dev/stdout |
  /usr/bin/time -f "%e s wall, %U s user, peak RSS %M KiB" -o "$WORK/time" \
    "$CARGO_TARGET_DIR/release/examples/analyze" - --format trex --hdr --anomaly 2:250us --events 10 \
    > "$WORK/summary.json"
python3 - "$WORK" "$N" <<'PY'
import json, sys
w, n = sys.argv[1], int(float(sys.argv[2]))
s = json.load(open(f"{w}/summary.json"))
t = open(f"{w}/time").read().strip()
rss_kib = int(t.split("peak RSS ")[1].split()[0])
assert s["packets"]["received"] == n, s["packets"]
print(f"{n} records, percentiles {s['percentiles']['method']} ({s['percentiles'].get('significant_digits')} digits): {t}")
print(f"p50 {s['latency_ns']['p50']} ns, p99.999 {s['latency_ns']['p99.999']} ns, anomalies {s['anomalies'][0]['count']}")
print(f"peak memory {rss_kib/1024:.0f} MiB: {'under' if rss_kib < 256*1024 else 'OVER'} the 256 MB bound")
PY
