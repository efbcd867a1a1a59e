#!/usr/bin/env bash
# Soak (issue 21; docs/experiments.md "Soak", figures in docs/benchmarks.md "## Soak"):
# nflab's generator (xdp-live, the fastest backend on veth) sends COUNT probes (or for
# SECONDS) over a veth pair between two namespaces it creates (nflab-<pid>-lg,
# nflab-<pid>-rec) into `nflab recv`, which records every probe to .nfr. Every
# SAMPLE_S the resident memory (VmRSS, VmHWM from /proc/PID/status) of both processes
# and the receiving veth's rx_packets go to OUT/rss.csv; at the end `nflab soak-report`
# gives packets sent/recorded/lost, RSS after warm-up and at the end, growth and the
# verdict (≤ MAX_GROWTH_PCT %) in OUT/soak.json.
#
#   scripts/soak.sh [--count N | --duration S] [--out DIR] [--nflab BIN]
#                   [--segment-bytes SIZE] [--keep-segments K] [--sample-s S]
#                   [--warmup-fraction F] [--warmup-min-s S] [--max-growth-pct P]
#
# Defaults: --count 1000000000, --out ./soak-<UTC time>, the release binary (built if
# missing), --sample-s 1, warm-up = the first 10 % of the packets (of the time with
# --duration) and at least 60 s, --max-growth-pct 5. Records take 40 B each: when they
# would not fit in half the free space of OUT, the recorder writes complete .nfr
# segments of --segment-bytes (default 1GiB) and keeps the newest --keep-segments
# (default 2); every packet is still recorded, and soak.json says which were kept.
# Exit: 0 pass, 1 fail, 2 bad arguments or a failed run. Everything it started and
# created is removed on exit, Ctrl-C and failure; OUT stays.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=scripts/common.sh
. "$ROOT/scripts/common.sh"
become_root "$0" "$@"

COUNT=1000000000
DURATION=""
OUT=""
NFLAB=""
SEGMENT_BYTES=""
KEEP=2
SAMPLE_S=1
WARMUP_FRACTION=0.1
WARMUP_MIN_S=60
MAX_GROWTH=5
die() {
  echo "error: $*" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || die "$1 needs a value (see the head of scripts/soak.sh)"
  case "$1" in
  --count) COUNT=$2 DURATION="" ;;
  --duration) DURATION=$2 COUNT="" ;;
  --out) OUT=$2 ;;
  --nflab) NFLAB=$2 ;;
  --segment-bytes) SEGMENT_BYTES=$2 ;;
  --keep-segments) KEEP=$2 ;;
  --sample-s) SAMPLE_S=$2 ;;
  --warmup-fraction) WARMUP_FRACTION=$2 ;;
  --warmup-min-s) WARMUP_MIN_S=$2 ;;
  --max-growth-pct) MAX_GROWTH=$2 ;;
  *) die "unknown option $1: use --count, --duration, --out, --nflab, --segment-bytes, --keep-segments, --sample-s, --warmup-fraction, --warmup-min-s or --max-growth-pct" ;;
  esac
  shift 2
done
is_num() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
[ -z "$COUNT" ] || [[ $COUNT =~ ^[1-9][0-9]*$ ]] || die "--count $COUNT is not valid: use a positive whole number of packets"
[ -z "$DURATION" ] || { is_num "$DURATION" && [ "$DURATION" != 0 ]; } || die "--duration $DURATION is not valid: use a positive number of seconds"
{ is_num "$SAMPLE_S" && [ "$SAMPLE_S" != 0 ]; } || die "--sample-s $SAMPLE_S is not valid: use a positive number of seconds"
is_num "$WARMUP_FRACTION" && awk "BEGIN{exit !($WARMUP_FRACTION < 1)}" || die "--warmup-fraction $WARMUP_FRACTION is not valid: use a number from 0 to below 1"
is_num "$WARMUP_MIN_S" || die "--warmup-min-s $WARMUP_MIN_S is not valid: use 0 or more seconds"
is_num "$MAX_GROWTH" || die "--max-growth-pct $MAX_GROWTH is not valid: use 0 or more percent"
[[ $KEEP =~ ^[1-9][0-9]*$ ]] || die "--keep-segments $KEEP is not valid: keep at least 1 segment"

if [ -z "$NFLAB" ]; then
  need_cargo
  NFLAB="$ROOT/target/release/nflab"
  [ -x "$NFLAB" ] || (cd "$ROOT" && cargo build --release --locked -p nflab -q)
fi
[ -x "$NFLAB" ] || die "--nflab $NFLAB is not an executable nflab binary"
OUT=${OUT:-./soak-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

NS_LG="nflab-$$-lg"
NS_REC="nflab-$$-rec"
GEN_PID=""
REC_PID=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in $GEN_PID $REC_PID; do kill -9 "$p" 2>/dev/null || true; done
  for p in $GEN_PID $REC_PID; do wait "$p" 2>/dev/null || true; done
  ip netns del "$NS_LG" 2>/dev/null || true
  ip netns del "$NS_REC" 2>/dev/null || true
  exit "$rc"
}
trap cleanup EXIT
trap 'echo "interrupted: cleaning up" >&2; exit 130' INT TERM

# Records: one file, or segments when they would not fit in half the free space.
# A duration soak is sized at 3 Mpps (above what veth delivers here).
planned=${COUNT:-$(awk "BEGIN{printf \"%d\", $DURATION * 3e6}")}
free_bytes=$(($(df -Pk "$OUT" | awk 'NR==2 {print $4}') * 1024))
record_bytes=$((planned * 40))
if [ -z "$SEGMENT_BYTES" ] && [ "$record_bytes" -gt $((free_bytes / 2)) ]; then
  SEGMENT_BYTES=1GiB
fi
REC_ARGS=(--out "$OUT/records.nfr")
if [ -n "$SEGMENT_BYTES" ]; then
  REC_ARGS+=(--segment-bytes "$SEGMENT_BYTES" --keep-segments "$KEEP")
  records_note="segments of $SEGMENT_BYTES, the newest $KEEP kept ($((record_bytes / 1000000)) MB of records planned, $((free_bytes / 1000000)) MB free)"
else
  records_note="one file, $((record_bytes / 1000000)) MB planned"
fi

echo "== machine"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores; kernel $(uname -r); $("$NFLAB" --version)"
LOAD_BEFORE=$(uptime)
echo "load before: $LOAD_BEFORE"
echo "soak: ${COUNT:+$COUNT packets}${DURATION:+$DURATION s}, 64-byte frames, xdp-live at max rate; records: $records_note; samples every $SAMPLE_S s to $OUT/rss.csv"

ip netns add "$NS_LG"
ip netns add "$NS_REC"
for ns in "$NS_LG" "$NS_REC"; do
  # No IPv6 autoconfiguration: only probes cross the link.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
ip -n "$NS_LG" link add va type veth peer name vb netns "$NS_REC"
ip -n "$NS_LG" link set va up
ip -n "$NS_REC" link set vb up
# A veth takes XDP frames (xdp-live) only into a peer with NAPI: GRO on gives it.
ip netns exec "$NS_REC" ethtool -K vb gro on >/dev/null
MAC=$(ip netns exec "$NS_REC" cat /sys/class/net/vb/address)
rx_counter() { ip netns exec "$NS_REC" cat "/sys/class/net/vb/statistics/$1"; }
counters() { printf '{"rx_packets": %s, "rx_dropped": %s}' "$(rx_counter rx_packets)" "$(rx_counter rx_dropped)"; }

cat >"$OUT/params.json" <<EOF
{"count": ${COUNT:-null}, "duration_s": ${DURATION:-null}, "warmup_fraction": $WARMUP_FRACTION,
 "warmup_min_s": $WARMUP_MIN_S, "max_growth_pct": $MAX_GROWTH, "sample_s": $SAMPLE_S,
 "segment_bytes": "${SEGMENT_BYTES}", "keep_segments": $KEEP}
EOF

"$NFLAB" recv --netns "$NS_REC" --iface vb "${REC_ARGS[@]}" --json >"$OUT/recv.json" 2>"$OUT/recv.log" &
REC_PID=$!
first_file="$OUT/records.nfr"
[ -n "$SEGMENT_BYTES" ] && first_file="$OUT/records.000000.nfr"
for _ in $(seq 100); do
  [ -e "$first_file" ] && break
  kill -0 "$REC_PID" 2>/dev/null || die "the recorder stopped before recording: $(cat "$OUT/recv.log")"
  sleep 0.1
done
[ -e "$first_file" ] || die "the recorder did not open $first_file within 10 s"
BEFORE=$(counters)
rx0=$(rx_counter rx_packets)

GEN_ARGS=(--netns "$NS_LG" --iface va --dst-mac "$MAC" --backend xdp-live --rate max --frame-bytes 64)
if [ -n "$COUNT" ]; then GEN_ARGS+=(--count "$COUNT"); else GEN_ARGS+=(--duration "$DURATION"); fi
t0=$(date +%s.%N)
"$NFLAB" gen "${GEN_ARGS[@]}" --json >"$OUT/gen.json" 2>"$OUT/gen.log" &
GEN_PID=$!

# VmRSS and VmHWM in KiB of a live process ("" once it has exited).
mem() { awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {if (r != "") print r "," h}' "/proc/$1/status" 2>/dev/null || true; }
echo "t_s,gen_rss_kib,gen_hwm_kib,rec_rss_kib,rec_hwm_kib,rx_packets" >"$OUT/rss.csv"
next_report=60
while kill -0 "$GEN_PID" 2>/dev/null; do
  g=$(mem "$GEN_PID")
  r=$(mem "$REC_PID")
  [ -n "$g" ] && [ -n "$r" ] || break
  rx=$(($(rx_counter rx_packets) - rx0))
  t=$(awk "BEGIN{printf \"%.3f\", $(date +%s.%N) - $t0}")
  echo "$t,$g,$r,$rx" >>"$OUT/rss.csv"
  if awk "BEGIN{exit !($t >= $next_report)}"; then
    echo "  $t s: $rx packets at the receiver; recorder VmRSS ${r%,*} KiB, generator VmRSS ${g%,*} KiB"
    next_report=$((next_report + 60))
  fi
  # `wait` returns at once on a trapped signal; a foreground sleep would make
  # bash wait for it and then drop a SIGINT sent to this script alone.
  sleep "$SAMPLE_S" &
  wait $! || true
done
gen_rc=0
wait "$GEN_PID" || gen_rc=$?
GEN_PID=""
# Ctrl-C reaches the whole job: the generator may notice it (exit 130) before
# this shell runs its trap.
if [ "$gen_rc" -eq 130 ]; then
  echo "interrupted: cleaning up" >&2
  exit 130
fi
[ "$gen_rc" -eq 0 ] || die "the generator failed (exit $gen_rc): $(tail -3 "$OUT/gen.log")"
# Let the recorder drain its ring, then stop it as Ctrl-C would.
sleep 1
kill -INT "$REC_PID"
rec_rc=0
wait "$REC_PID" || rec_rc=$?
REC_PID=""
[ "$rec_rc" -eq 0 ] || die "the recorder failed (exit $rec_rc): $(tail -3 "$OUT/recv.log")"
printf '{"before": %s, "after": %s}\n' "$BEFORE" "$(counters)" >"$OUT/counters.json"
LOAD_AFTER=$(uptime)

echo "== result ($OUT/soak.json)"
verdict=0
"$NFLAB" soak-report "$OUT" || verdict=$?
echo "load before: $LOAD_BEFORE"
echo "load after:  $LOAD_AFTER"
printf 'load before: %s\nload after: %s\n' "$LOAD_BEFORE" "$LOAD_AFTER" >"$OUT/load.txt"
exit "$verdict"
