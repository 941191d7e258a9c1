#!/usr/bin/env bash
# rate-cost.sh — what one quorum queue at a fixed rate costs each node: starts a 3-node
# Warren cluster on loopback, runs one producer (confirms, node 1) and one consumer (manual
# acks, node 2) of 1 KB messages at RATE msg/s for DURATION seconds, the queue's leader on
# the producer's node (client-local, as in perf-cluster.sh; printed), and prints each node's
# CPU ticks and, where `perf` is installed, its fdatasync, write, read, futex and epoll_pwait
# calls and context switches per second; then CPU µs per message and the load tool's p50/p99
# latencies.
#
# Environment: RATE (1000), DURATION (30), PORT_BASE (5702), EXTRA (more warren flags),
# CONSUMER_NODE (2: the consumer's node; 1 puts it on the leader's, so that no delivery is
# forwarded).
# The environment reaches the nodes, so e.g. GOMAXPROCS=1 or WARREN_* settings apply to them.
# NODE_BIN, a directory, runs the nodes from NODE_BIN/warren instead of the working tree's
# build (rate-ab.sh); the load tool is always the working tree's.
set -euo pipefail
cd "$(dirname "$0")/.."

RATE=${RATE:-1000}
DURATION=${DURATION:-30}
PORT_BASE=${PORT_BASE:-5702}
EXTRA=${EXTRA:-}
CONSUMER_NODE=${CONSUMER_NODE:-2}

go build -o bin/ ./cmd/warren ./cmd/warren-perf ./cmd/warrenctl

source scripts/warren-cluster.sh
trap warren_cluster_stop EXIT
# shellcheck disable=SC2086
warren_cluster_start $EXTRA
pids=("${WARREN_PIDS[@]}")

run() {
  bin/warren-perf --uri "amqp://guest:guest@127.0.0.1:$((PORT_BASE + 1))/" \
    --consumer-uri "amqp://guest:guest@127.0.0.1:$((PORT_BASE + CONSUMER_NODE))/" --producers 1 --consumers 1 \
    --size 1000 --confirm 256 --prefetch 256 --queue-type quorum --queue rate-cost \
    --queue-arg x-queue-leader-locator=client-local --json-only "$@"
}
run --messages 100 --duration 0 --drain 1s >/dev/null # declare the queue, warm up
echo "queue rate-cost led by $(bin/warrenctl --node "127.0.0.1:$((PORT_BASE + 20000))" list queues |
  awk '$2 == "rate-cost" {print $4}') (producer on warren-1, consumer on warren-$CONSUMER_NODE)"

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A before
for p in "${pids[@]}"; do before[$p]=$(ticks "$p"); done
stats=$(mktemp -d)
waits=()
if command -v perf >/dev/null; then
  ev=syscalls:sys_enter_fdatasync,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_pwait,context-switches
  for i in 0 1 2; do
    perf stat -x, -e "$ev" -p "${pids[$i]}" -o "$stats/$i" sleep $((DURATION - 2)) &
    waits+=($!)
  done
fi
out=$(run --rate "$RATE" --duration "${DURATION}s" | grep '^{"summary"')
[ ${#waits[@]} -gt 0 ] && wait "${waits[@]}"

total=0
for i in 0 1 2; do
  p=${pids[$i]}
  used=$(($(ticks "$p") - ${before[$p]}))
  total=$((total + used))
  echo "warren-$i: cpu ticks $used"
  [ -f "$stats/$i" ] && awk -F, -v d=$((DURATION - 2)) '$3 != "" {printf "  %s %d/s\n", $3, $1 / d}' "$stats/$i"
done
rm -rf "$stats"
hz=$(getconf CLK_TCK)
echo "CPU µs per message: $(echo "$total * 1000000 / $hz / ($RATE * $DURATION)" | bc)"
echo "$out" | python3 -c 'import json, sys
s = json.load(sys.stdin)["summary"]
e, c = s["latency_e2e_us"], s["latency_confirm_us"]
print("received %d; end-to-end p50 %.2f ms, p99 %.2f ms; confirm p50 %.2f ms, p99 %.2f ms" % (s["received"], e["p50"] / 1000, e["p99"] / 1000, c["p50"] / 1000, c["p99"] / 1000))
print("confirm ms: p75 %.2f, p95 %.2f, p99.9 %.2f, max %.2f" % (c["p75"] / 1000, c["p95"] / 1000, c["p999"] / 1000, c["max"] / 1000))'
