#!/usr/bin/env bash
# perf-compare.sh — the same warren-perf run against a fresh single Warren node and a
# single-node RabbitMQ (scripts/rabbitmq.sh, Debian's 3.10.8), one after the
# other on this machine. Prints both JSON summaries and a markdown table.
#
# Environment: DURATION (default 30s), SIZE (1000), CONFIRM (100), PREFETCH (100),
# QUEUE_TYPE (classic), WARREN_PORT (5680), EXTRA (more warren-perf flags).
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-30s}
SIZE=${SIZE:-1000}
CONFIRM=${CONFIRM:-100}
PREFETCH=${PREFETCH:-100}
QUEUE_TYPE=${QUEUE_TYPE:-classic}
WARREN_PORT=${WARREN_PORT:-5680}
EXTRA=${EXTRA:-}
RMQ=${RMQ:-$(dirname "$0")/rabbitmq.sh}

go build -o bin/ ./cmd/warren ./cmd/warren-perf

perf() {
  bin/warren-perf --uri "$1" --producers 1 --consumers 1 --size "$SIZE" --confirm "$CONFIRM" \
    --prefetch "$PREFETCH" --queue-type "$QUEUE_TYPE" --duration "$DURATION" --delete --json-only $EXTRA
}

data=$(mktemp -d)
bin/warren --data-dir "$data" --amqp "127.0.0.1:$WARREN_PORT" --log-level warn &
wpid=$!
trap 'kill $wpid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$WARREN_PORT) 2>/dev/null && break; sleep 0.1; done
echo "== Warren"
warren=$(perf "amqp://guest:guest@127.0.0.1:$WARREN_PORT/" | grep '^{"summary"')
echo "$warren"
kill $wpid; wait $wpid 2>/dev/null || true

echo "== RabbitMQ"
$RMQ start 1 >/dev/null
rabbit=$(perf "amqp://guest:guest@127.0.0.1:5772/" | grep '^{"summary"')
echo "$rabbit"
$RMQ stop 1 >/dev/null

scripts/perf-table.py "metric" "$warren" "$rabbit"
