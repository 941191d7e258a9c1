#!/usr/bin/env bash
# idle-cost.sh — what idle quorum queues cost: starts a 3-node Warren cluster on loopback,
# declares N quorum queues through warren-0, waits SETTLE seconds, then measures each
# process over WINDOW seconds: CPU (utime+stime from /proc/PID/stat), VmRSS and RssAnon,
# and goroutines (/debug/pprof/goroutine?debug=1). Prints a table; the CPU column is the
# share of one core.
#
# Environment: N (default 1000), SETTLE (10), WINDOW (30), PORT_BASE (5702: AMQP ports;
# internal +20000, gossip +2274, pprof +3000), EXTRA (more warren flags, e.g.
# "--raft-timeout 1s"), KEEP=1 keeps the data directory, PROFILE=FILE writes a CPU profile
# of warren-0 over the window.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000}
SETTLE=${SETTLE:-10}
WINDOW=${WINDOW:-30}
PORT_BASE=${PORT_BASE:-5702}
EXTRA=${EXTRA:-}

go build -o bin/ ./cmd/warren ./cmd/warren-perf

source scripts/warren-cluster.sh
trap warren_cluster_stop EXIT
# shellcheck disable=SC2086
DEBUG_PORTS=1 warren_cluster_start $EXTRA
pids=("${WARREN_PIDS[@]}")

echo "== declaring $N quorum queues through warren-0"
start=$(date +%s.%N)
bin/warren-perf --uri "amqp://guest:guest@127.0.0.1:$PORT_BASE/" --queues "$N" --queue idle \
  --producers 1 --consumers 0 --messages 1 --duration 0 --drain 0s --queue-type quorum --json-only >/dev/null
echo "declared in $(echo "$(date +%s.%N) - $start" | bc) s; settling ${SETTLE}s"
sleep "$SETTLE"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
declare -A before
for p in "${pids[@]}"; do before[$p]=$(ticks "$p"); done
t0=$(date +%s.%N)
if [[ -n "${PROFILE:-}" ]]; then # a CPU profile of warren-0 over the window
  curl -s -o "$PROFILE" "http://127.0.0.1:$((PORT_BASE + 3000))/debug/pprof/profile?seconds=$WINDOW" &
fi
sleep "$WINDOW"
t1=$(date +%s.%N)

printf '\n%-9s %8s %9s %9s %11s\n' node "cpu%" "rss MiB" "anon MiB" goroutines
total=0
for i in 0 1 2; do
  p=${pids[$i]}
  used=$(( $(ticks "$p") - ${before[$p]} ))
  cpu=$(echo "scale=1; 100 * $used / $hz / ($t1 - $t0)" | bc)
  total=$(echo "$total + $cpu" | bc)
  rss=$(awk '/^VmRSS/ {printf "%.0f", $2/1024}' "/proc/$p/status")
  anon=$(awk '/^RssAnon/ {printf "%.0f", $2/1024}' "/proc/$p/status")
  gr=$(curl -s "http://127.0.0.1:$((PORT_BASE + 3000 + i))/debug/pprof/goroutine?debug=1" | sed -nE '1s/.*total ([0-9]+).*/\1/p')
  printf '%-9s %8s %9s %9s %11s\n' "warren-$i" "$cpu" "$rss" "$anon" "$gr"
done
printf '%-9s %8s\n' total "$total"
echo "(N=$N idle quorum queues, CPU over ${WINDOW}s after ${SETTLE}s idle; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
