#!/usr/bin/env bash
# perf-sustained.sh — the highest publish rate one quorum queue sustains with its consumer
# keeping pace, on a single Warren node and on a single-node RabbitMQ
# (scripts/rabbitmq.sh, Debian's 3.10.8), measured the same way one after the other.
#
# An unlimited run shows how fast messages can be published, but on a small machine the
# consumer may fall behind and the queue grow for the whole run; its consumed rate is then
# not a rate the broker sustains. Here each broker is first run unlimited, then at fixed
# rates (warren-perf --rate), searching for the highest rate at which, over the run (above
# the unlimited run's consumed rate too when every rate below it passes: bench-lib.sh),
#   - the consumer receives at least 99% of what was published, and
#   - the end-to-end p99 latency stays under MAX_P99_MS (1000): the queue does not grow.
# The sustained rate is the consumed msg/s of the best passing run. (A producer held to a
# rate publishes somewhat less than it, more so with a slower broker: the limiter does not
# make up for time spent waiting on a full confirm window. What counts is what was consumed.)
#
# Environment: SIZE (1000), DURATION (15s per run), STEPS (5 search steps), GROW (4 steps
# above the unlimited rate at most), MAX_P99_MS (1000),
# WARREN_PORT (5680), EXTRA (more warren-perf flags, e.g. --batch-writes=false). The
# workload of docs/performance.md's single-node figures: 1 producer with confirms (window
# 256), 1 consumer (prefetch 256, manual acks).
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-1000}
DURATION=${DURATION:-15s}
STEPS=${STEPS:-5}
MAX_P99_MS=${MAX_P99_MS:-1000}
WARREN_PORT=${WARREN_PORT:-5680}
RMQ=${RMQ:-$(dirname "$0")/rabbitmq.sh}

go build -o bin/ ./cmd/warren ./cmd/warren-perf

source scripts/bench-lib.sh

# run URI RATE: one warren-perf run (RATE 0: unlimited); prints its summary line.
run() {
  # shellcheck disable=SC2086
  bin/warren-perf --uri "$1" --producers 1 --consumers 1 --size "$SIZE" --confirm 256 \
    --prefetch 256 --queue-type quorum --duration "$DURATION" --rate "$2" --delete --json-only ${EXTRA:-} |
    grep '^{"summary"'
}
run_warren() { run "amqp://guest:guest@127.0.0.1:$WARREN_PORT/" "$1"; }
run_rabbit() { run "amqp://guest:guest@127.0.0.1:5772/" "$1"; }

data=$(mktemp -d)
bin/warren --data-dir "$data" --amqp "127.0.0.1:$WARREN_PORT" --log-level warn &
wpid=$!
trap 'kill $wpid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$WARREN_PORT) 2>/dev/null && break; sleep 0.1; done
warren=$(sustained_search Warren run_warren)
kill $wpid; wait $wpid 2>/dev/null || true

$RMQ start 1 >/dev/null
rabbit=$(sustained_search RabbitMQ run_rabbit)
$RMQ stop 1 >/dev/null

scripts/perf-table.py "sustained, 1 queue, $SIZE B" sustained "$warren" "$rabbit"
