#!/usr/bin/env bash
# perf-cluster.sh — a fresh 3-node Warren cluster against a 3-node RabbitMQ 3.10.8
# (scripts/rabbitmq.sh start 3, Debian's package), one broker after the other on
# this machine, with quorum queues; prints each part's JSON and one markdown table. Parts
# (each on a freshly started cluster, Warren's and then RabbitMQ's):
#   single   1 queue: producer with confirms on node 2, consumer with manual acks on node 3
#            (the queue is declared through the producer's node, so its leader is there):
#            published/confirmed/consumed msg/s, end-to-end and confirm p50/p99.
#   multi    QUEUES queues, QUEUES producers on nodes 1,2,3,1,... and QUEUES consumers on
#            nodes 2,3,1,2,...: producer k and consumer k both use queue k (warren-perf gives
#            producer/consumer i queue i mod --queues), whose leader is on the producer's node.
#            Consumed msg/s in total, confirm p99, end-to-end p99.
#   sustained  as single, searching the highest rate at which the consumer keeps pace
#            (bench-lib.sh's sustained_search, as perf-sustained.sh does on one node):
#            an unlimited run and STEPS (5) runs at rates below its consumed rate, and
#            above it while every run passes (up to GROW (4) runs a quarter higher each,
#            then STEPS more), SUSTAINED_DURATION (15s) each; the consumed msg/s of the best
#            passing run.
#   multi_sustained  as multi, searching the highest total rate at which the consumers keep
#            pace (the same search as sustained).
#   rate     as single, at a fixed RATE msg/s for RATE_DURATION: latencies, and the CPU time
#            (utime+stime) of all the broker's processes over the warren-perf run per message
#            consumed (Warren: the three warren processes; RabbitMQ: the three beam.smp, their
#            descendants such as erl_child_setup and inet_gethost, and epmd). Runs after the
#            other parts, RATE_ROUNDS (3) rounds alternating the brokers; the table shows each
#            broker's run of median CPU per message.
#   declare  one client declares DECLARE quorum queues one after another through node 1
#            (declare-compare.sh's measurement, bench-lib.sh): seconds, and the VmRSS and
#            RssAnon it adds across the three nodes (10 s after the last declare).
# With the rate part, scripts/machine-cost's figures for this machine follow (what a log sync
# and a served request cost the kernel), before the table.
# A warren-perf run that fails is retried up to twice (see retry below).
#
# Environment: DURATION (default 30s; single and multi), SIZE (1000), CONFIRM (256: confirm
# window per producer), PREFETCH (256), QUEUES (10), RATE (1000 msg/s), RATE_DURATION (30s),
# RATE_ROUNDS (3), DECLARE (1000), PARTS (default "single sustained multi multi_sustained rate
# declare"; a subset, space- or comma-separated), PORT_BASE (5682: Warren's AMQP ports;
# internal +20000, gossip +2274), EXTRA (more warren-perf flags for every part but declare),
# KEEP=1 keeps the data, BROKERS ("warren rabbit"; "warren" alone to try a change quickly,
# with an empty RabbitMQ column), TLS (0; 1 runs Warren secured: AMQPS for the clients and
# mutual TLS between the nodes, to measure what they cost against a plaintext run; RabbitMQ
# stays plaintext). The output says which.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

DURATION=${DURATION:-30s}
SIZE=${SIZE:-1000}
CONFIRM=${CONFIRM:-256}
PREFETCH=${PREFETCH:-256}
QUEUES=${QUEUES:-10}
RATE=${RATE:-1000}
RATE_DURATION=${RATE_DURATION:-30s}
RATE_ROUNDS=${RATE_ROUNDS:-3}
DECLARE=${DECLARE:-1000}
PARTS=${PARTS:-single sustained multi multi_sustained rate declare}
SUSTAINED_DURATION=${SUSTAINED_DURATION:-15s}
PORT_BASE=${PORT_BASE:-5682}
EXTRA=${EXTRA:-}
RMQ=${RMQ:-$(dirname "$0")/rabbitmq.sh}
read -r -a parts <<<"${PARTS//,/ }"
for part in "${parts[@]}"; do
  case "$part" in single | sustained | multi | multi_sustained | rate | declare) ;; *) echo "perf-cluster: unknown part '$part' in PARTS" >&2; exit 2 ;; esac
done

go build -o bin/ ./cmd/warren ./cmd/warren-perf ./cmd/warrenctl
TLS=${TLS:-0}
export WARREN_TLS=$TLS
if [ "$TLS" = 1 ]; then
  echo "Warren: AMQPS for the clients and mutual TLS between the nodes (TLS=1)" >&2
else
  echo "Warren: plaintext AMQP and internal traffic (TLS=0)" >&2
fi

source scripts/bench-lib.sh
source scripts/warren-cluster.sh

# A broker is "warren" or "rabbit". broker_start starts a fresh 3-node cluster and sets
# NODE_PIDS (the three node processes) and PIDS (every process of the broker); broker_stop
# stops it; uris BROKER I... prints the AMQP URIs of nodes I... (0-based), comma-separated.
rmq_up=""
broker_start() {
  if [ "$1" = warren ]; then
    warren_cluster_start
    NODE_PIDS=("${WARREN_PIDS[@]}")
    PIDS=("${WARREN_PIDS[@]}")
  else
    rmq_up=1
    rmq_fresh
    mapfile -t NODE_PIDS < <(rmq_beam_pids)
    mapfile -t PIDS < <(rmq_all_pids)
  fi
  [ "${#NODE_PIDS[@]}" = 3 ] || { echo "perf-cluster: expected 3 $1 node PIDs, got: ${NODE_PIDS[*]}" >&2; return 1; }
}
broker_stop() {
  if [ "$1" = warren ]; then warren_cluster_stop; else rmq_stop; rmq_up=""; fi
}
uris() {
  local base=$PORT_BASE scheme=amqp out="" i
  [ "$1" = rabbit ] && base=5772
  [ "$1" = warren ] && [ "$TLS" = 1 ] && base=$((PORT_BASE + 10)) scheme=amqps
  shift
  for i in "$@"; do out+="${out:+,}$scheme://guest:guest@127.0.0.1:$((base + i))/"; done
  echo "$out"
}
cleanup() {
  warren_cluster_stop
  if [ -n "$rmq_up" ]; then rmq_stop || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# perf PRODUCER_URIS CONSUMER_URIS warren-perf-flags...: the summary line of one run. Queue k
# is declared through producer URI k mod 3, with x-queue-leader-locator=client-local so that
# its leader is on that node in both brokers: RabbitMQ's default locator, but not Warren's
# (balanced), which would otherwise put Warren's leader on whichever node leads fewest and
# make its messages cross one more node than RabbitMQ's.
perf() {
  local p=$1 c=$2
  shift 2
  # shellcheck disable=SC2086
  bin/warren-perf --uri "$p" --consumer-uri "$c" --size "$SIZE" --confirm "$CONFIRM" \
    --prefetch "$PREFETCH" --queue-type quorum --queue-arg x-queue-leader-locator=client-local \
    --delete --json-only "$@" $EXTRA | grep '^{"summary"'
}

# retry CMD...: CMD, up to 3 times while it fails. A consumer on another node than the one
# that just declared the queue can get a 404 from a fresh Warren cluster (the queue then
# shows up there within seconds); the failed attempt is reported on stderr.
retry() {
  local i
  for i in 1 2 3; do
    "$@" && return 0
    echo "perf-cluster: $1 failed (attempt $i of 3)" >&2
    sleep 2
  done
  return 1
}

# perf_single BROKER warren-perf-flags...: one queue, producer on node 1, consumer on node 2.
perf_single() {
  local b=$1
  shift
  perf "$(uris "$b" 1)" "$(uris "$b" 2)" --producers 1 --consumers 1 "$@"
}
# perf_multi BROKER warren-perf-flags...: QUEUES queues, producers on nodes 0,1,2,...,
# consumers on nodes 1,2,0,...
perf_multi() {
  local b=$1
  shift
  perf "$(uris "$b" 0 1 2)" "$(uris "$b" 1 2 0)" --queues "$QUEUES" --producers "$QUEUES" --consumers "$QUEUES" "$@"
}

# part_PART BROKER: prints the part's JSON for perf-table.py.
part_single() { retry perf_single "$1" --queue perf-cluster --duration "$DURATION"; }
part_sustained() {
  sustained_broker=$1
  sustained_search "$1, 1 queue" sustained_once
}
sustained_once() { # RATE (0: unlimited)
  retry perf_single "$sustained_broker" --queue perf-cluster-sustained --rate "$1" --duration "$SUSTAINED_DURATION"
}
part_multi() { retry perf_multi "$1" --queue perf-cluster-multi --duration "$DURATION"; }
part_multi_sustained() {
  sustained_broker=$1
  sustained_search "$1, $QUEUES queues" multi_sustained_once
}
multi_sustained_once() { # RATE (0: unlimited), shared by all producers
  retry perf_multi "$sustained_broker" --queue perf-cluster-multi-sustained --rate "$1" --duration "$SUSTAINED_DURATION"
}
part_rate() { retry rate_once "$1"; }
# rate_once BROKER: the CPU ticks of PIDS right before and right after one fixed-rate run.
rate_once() {
  local t0 t1 out
  echo "CPU of: $(ps -o pid=,comm= -p "$(IFS=,; echo "${PIDS[*]}")" | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $1, $2}')" >&2
  t0=$(cpu_ticks "${PIDS[@]}")
  out=$(perf_single "$1" --queue perf-cluster-rate --rate "$RATE" --duration "$RATE_DURATION") || return 1
  t1=$(cpu_ticks "${PIDS[@]}")
  echo "{\"cpu_s\":$(cpu_seconds "$t0" "$t1"),${out#\{}"
}
part_declare() {
  declare_measure "$(uris "$1" 0)" "$DECLARE" "${NODE_PIDS[@]}"
}

declare -A result
read -r -a brokers <<<"${BROKERS:-warren rabbit}"
for broker in "${brokers[@]}"; do
  for part in "${parts[@]}"; do
    [ "$part" = rate ] && continue # below, in rounds
    echo "== $broker, 3 nodes: $part"
    broker_start "$broker"
    result[$broker.$part]=$(part_"$part" "$broker")
    echo "${result[$broker.$part]}"
    broker_stop "$broker"
  done
done

# The rate part's CPU per message follows this machine's load, which drifted by a quarter
# within minutes (docs/performance.md#method), so its runs alternate the brokers,
# RATE_ROUNDS rounds of one run each, and the run with each broker's median CPU per message
# stands in the table (every run's figure is printed).
if [[ " ${parts[*]} " == *" rate "* ]]; then
  declare -A rate_runs
  for round in $(seq "$RATE_ROUNDS"); do
    for broker in "${brokers[@]}"; do
      echo "== $broker, 3 nodes: rate (round $round of $RATE_ROUNDS)"
      broker_start "$broker"
      out=$(part_rate "$broker")
      echo "$out"
      rate_runs[$broker]+="$out"$'\n'
      broker_stop "$broker"
    done
  done
  for broker in "${brokers[@]}"; do
    result[$broker.rate]=$(printf '%s' "${rate_runs[$broker]}" | python3 -c '
import json, sys
runs = [json.loads(l) for l in sys.stdin if l.strip()]
cost = lambda d: 1e6 * d["cpu_s"] / max(d["summary"]["received"], 1)
mid = sorted(runs, key=cost)[(len(runs) - 1) // 2]
print("%s rate rounds, CPU µs per message in run order: %s (median %.1f)" % (sys.argv[1], ", ".join("%.1f" % cost(d) for d in runs), cost(mid)), file=sys.stderr)
print(json.dumps(mid, separators=(",", ":")))' "$broker")
  done
fi

# What a sync and a served request cost on this machine that day, so that CPU figures from
# different machines can be told apart (docs/performance.md#the-ratio).
if [[ " ${parts[*]} " == *" rate "* ]]; then
  echo "== this machine (scripts/machine-cost)"
  go run ./scripts/machine-cost --dir "${TMPDIR:-/tmp}"
fi

args=()
for part in "${parts[@]}"; do args+=("$part" "${result[warren.$part]:-}" "${result[rabbit.$part]:-}"); done
scripts/perf-table.py "metric (3 nodes, quorum queues)" "${args[@]}"
