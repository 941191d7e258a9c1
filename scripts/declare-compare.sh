#!/usr/bin/env bash
# declare-compare.sh — declaring N quorum queues one after another from one client, on a
# fresh 3-node Warren cluster and on a fresh 3-node RabbitMQ 3.10.8
# (../shared/tools/rmq-cluster.sh start 3), one after the other on this machine: the time
# it takes and the resident memory it adds across the three nodes (VmRSS summed, measured
# 10 s after the last declare).
#
# Environment: N (default 1000), PORT_BASE (5722: Warren's AMQP ports; internal +20000,
# gossip +2274).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000}
PORT_BASE=${PORT_BASE:-5722}
RMQ=../shared/tools/rmq-cluster.sh

go build -o bin/ ./cmd/warren ./cmd/warren-perf

rss_kb() { local t=0 p; for p in "$@"; do t=$((t + $(awk '/VmRSS/{print $2}' "/proc/$p/status"))); done; echo $t; }
declare_n() { # URI
  local start; start=$(date +%s.%N)
  bin/warren-perf --uri "$1" --queues "$N" --queue declared --producers 1 --consumers 0 --messages 1 \
    --duration 0 --drain 0s --queue-type quorum --json-only >/dev/null
  echo "$(date +%s.%N) - $start" | bc
}

source scripts/warren-cluster.sh
trap warren_cluster_stop EXIT
warren_cluster_start
sleep 5
w_before=$(rss_kb "${WARREN_PIDS[@]}")
w_time=$(declare_n "amqp://guest:guest@127.0.0.1:$PORT_BASE/")
sleep 10
w_after=$(rss_kb "${WARREN_PIDS[@]}")
echo "== Warren: $N quorum queues in ${w_time}s, RSS ${w_before} -> ${w_after} KiB"
warren_cluster_stop

$RMQ wipe 3 >/dev/null 2>&1 || true
$RMQ start 3 >/dev/null
sleep 5
rpids=($($RMQ status 3 2>/dev/null | sed -nE 's/.*beam pid ([0-9]+).*/\1/p'))
r_before=$(rss_kb "${rpids[@]}")
r_time=$(declare_n "amqp://guest:guest@127.0.0.1:5772/")
sleep 10
r_after=$(rss_kb "${rpids[@]}")
echo "== RabbitMQ 3.10.8: $N quorum queues in ${r_time}s, RSS ${r_before} -> ${r_after} KiB (beam pids ${rpids[*]})"
$RMQ wipe 3 >/dev/null

python3 - "$N" "$w_time" "$w_before" "$w_after" "$r_time" "$r_before" "$r_after" <<'PY'
import sys
n, wt, wb, wa, rt, rb, ra = sys.argv[1], *map(float, sys.argv[2:])
wm, rm = (wa - wb) / 1024, (ra - rb) / 1024
print(f"| declaring {n} quorum queues, 3 nodes | Warren | RabbitMQ 3.10.8 | Warren / RabbitMQ |")
print("| --- | ---: | ---: | ---: |")
print(f"| time s | {wt:.1f} | {rt:.1f} | {wt / rt:.2f} |")
print(f"| added RSS, 3 nodes, MiB | {wm:.0f} | {rm:.0f} | {wm / rm:.2f} |")
PY
