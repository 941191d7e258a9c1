#!/usr/bin/env bash
# declare-compare.sh — declaring N quorum queues one after another from one client, on a
# fresh 3-node Warren cluster and on a fresh 3-node RabbitMQ 3.10.8
# (scripts/rabbitmq.sh start 3), one after the other on this machine: the time
# it takes and the resident memory it adds across the three nodes (VmRSS and RssAnon
# summed, measured 10 s after the last declare). perf-cluster.sh runs the same measurement
# as its "declare" part (the functions are in bench-lib.sh).
#
# Environment: N (default 1000), PORT_BASE (5722: Warren's AMQP ports; internal +20000,
# gossip +2274).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000}
PORT_BASE=${PORT_BASE:-5722}
RMQ=${RMQ:-$(dirname "$0")/rabbitmq.sh}

go build -o bin/ ./cmd/warren ./cmd/warren-perf

source scripts/bench-lib.sh
source scripts/warren-cluster.sh
rmq_up=""
cleanup() {
  warren_cluster_stop
  if [ -n "$rmq_up" ]; then rmq_stop || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

warren_cluster_start
warren=$(declare_measure "amqp://guest:guest@127.0.0.1:$PORT_BASE/" "$N" "${WARREN_PIDS[@]}")
echo "== Warren: $warren"
warren_cluster_stop

rmq_up=1
rmq_fresh
mapfile -t rpids < <(rmq_beam_pids)
rabbit=$(declare_measure "amqp://guest:guest@127.0.0.1:5772/" "$N" "${rpids[@]}")
echo "== RabbitMQ 3.10.8 (beam pids ${rpids[*]}): $rabbit"
rmq_stop
rmq_up=""

scripts/perf-table.py "metric (3 nodes)" declare "$warren" "$rabbit"
