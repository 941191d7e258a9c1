#!/usr/bin/env bash
# perf-cluster.sh — warren-perf against a fresh 3-node Warren cluster and a 3-node RabbitMQ
# (../shared/tools/rmq-cluster.sh start 3, Debian's 3.10.8), one after the other on this
# machine: one quorum queue, producer with confirms on one node, consumer on another.
# Prints both JSON summaries and a markdown table.
#
# Environment: DURATION (default 30s), SIZE (1000), CONFIRM (256), PREFETCH (256),
# PORT_BASE (5682: Warren's AMQP ports; internal +20000, gossip +2274), EXTRA (more
# warren-perf flags).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-30s}
SIZE=${SIZE:-1000}
CONFIRM=${CONFIRM:-256}
PREFETCH=${PREFETCH:-256}
PORT_BASE=${PORT_BASE:-5682}
EXTRA=${EXTRA:-}
RMQ=../shared/tools/rmq-cluster.sh

go build -o bin/ ./cmd/warren ./cmd/warren-perf

# perf PRODUCER_URI CONSUMER_URI: the queue is declared through the producer's node.
perf() {
  bin/warren-perf --uri "$1" --consumer-uri "$2" --producers 1 --consumers 1 --size "$SIZE" \
    --confirm "$CONFIRM" --prefetch "$PREFETCH" --queue-type quorum --queue perf-cluster \
    --duration "$DURATION" --delete --json-only $EXTRA
}

source scripts/warren-cluster.sh
trap warren_cluster_stop EXIT
warren_cluster_start
echo "== Warren, 3 nodes: producer on warren-1, consumer on warren-2"
warren=$(perf "amqp://guest:guest@127.0.0.1:$((PORT_BASE + 1))/" "amqp://guest:guest@127.0.0.1:$((PORT_BASE + 2))/" | grep '^{"summary"')
echo "$warren"
warren_cluster_stop

echo "== RabbitMQ 3.10.8, 3 nodes: producer on rabbit2, consumer on rabbit3"
$RMQ start 3 >/dev/null
rabbit=$(perf "amqp://guest:guest@127.0.0.1:5773/" "amqp://guest:guest@127.0.0.1:5774/" | grep '^{"summary"')
echo "$rabbit"
$RMQ stop 3 >/dev/null

scripts/perf-table.py "metric (3 nodes, 1 quorum queue)" "$warren" "$rabbit"
