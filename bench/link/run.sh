#!/usr/bin/env bash
# Wake-up lateness of the waits a link worker could use (issue #15): absolute
# clock_nanosleep vs ppoll on a socket vs ppoll on an absolute timerfd, under the
# link workers' conditions (wait_lateness.c says which). Peer-free: the three are
# compared with each other in one run, on one host.
#   bench/link/run.sh [N] [HOLD_US] [PERIOD_US]   (root; run it alone)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
cc -O2 -o "$bin" "$here/wait_lateness.c" -lpthread
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs, kernel $(uname -r), clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
echo "load before: $(uptime)"
"$bin" "${1:-3000}" "${2:-3910}" "${3:-8750}"
