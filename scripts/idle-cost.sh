#!/usr/bin/env bash
# idle-cost.sh — what idle quorum queues cost: starts a 3-node Warren cluster on loopback,
# declares N quorum queues through warren-0, waits SETTLE seconds, then measures each
# process over WINDOW seconds: CPU (utime+stime from /proc/PID/stat), VmRSS and RssAnon,
# and goroutines (/debug/pprof/goroutine?debug=1). Prints a table; the CPU column is the
# share of one core.
#
# Environment: N (default 1000), SETTLE (10), WINDOW (30), PORT_BASE (5702: AMQP ports;
# internal +20000, gossip +2274, pprof +3000), EXTRA (more warren flags, e.g.
# "--raft-timeout 1s"), KEEP=1 keeps the data directory.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000}
SETTLE=${SETTLE:-10}
WINDOW=${WINDOW:-30}
PORT_BASE=${PORT_BASE:-5702}
EXTRA=${EXTRA:-}

go build -o bin/ ./cmd/warren ./cmd/warren-perf

data=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$data"
}
trap cleanup EXIT
join=""
for i in 0 1 2; do join+="${join:+,}127.0.0.1:$((PORT_BASE + 2274 + i))"; done
for i in 0 1 2; do
  # shellcheck disable=SC2086
  bin/warren --node-name "warren-$i" --amqp "127.0.0.1:$((PORT_BASE + i))" \
    --internal-addr "127.0.0.1:$((PORT_BASE + 20000 + i))" --gossip-addr "127.0.0.1:$((PORT_BASE + 2274 + i))" \
    --debug-addr "127.0.0.1:$((PORT_BASE + 3000 + i))" \
    --join "$join" --bootstrap-expect 3 --data-dir "$data/warren-$i" --log-level warn $EXTRA \
    2>"$data/warren-$i.log" &
  pids+=($!)
done
for i in 0 1 2; do
  ready=""
  for _ in $(seq 300); do
    # Ready once a login works: the cluster has formed and seeded its users.
    if bin/warren-perf --uri "amqp://guest:guest@127.0.0.1:$((PORT_BASE + i))/" --producers 1 --consumers 0 \
      --messages 1 --duration 0 --drain 0s --queue idle-ready --delete --json-only >/dev/null 2>&1; then
      ready=1
      break
    fi
    sleep 0.2
  done
  [ -n "$ready" ] || { echo "warren-$i did not become ready" >&2; exit 1; }
done

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
