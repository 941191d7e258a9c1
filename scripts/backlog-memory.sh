#!/usr/bin/env bash
# backlog-memory.sh — publish MESSAGES (default 1,000,000) messages of SIZE bytes (1000) with
# confirms into one quorum queue of a fresh Warren node, with no consumer, then report the
# node's anonymous resident memory (RssAnon: the Go heap and stacks; the log's file-backed
# pages, which the kernel can drop, do not count) right after and once it has settled.
set -euo pipefail
cd "$(dirname "$0")/.."
MESSAGES=${MESSAGES:-1000000}
SIZE=${SIZE:-1000}
PORT=${PORT:-5683}
go build -o bin/ ./cmd/warren ./cmd/warren-perf
data=$(mktemp -d)
bin/warren --data-dir "$data" --amqp "127.0.0.1:$PORT" --log-level warn &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
bin/warren-perf --uri "amqp://guest:guest@127.0.0.1:$PORT/" --queue-type quorum --confirm 256 \
  --consumers 0 --size "$SIZE" --messages "$MESSAGES" --duration 0 --json-only | grep '^{"summary"' \
  | python3 -c 'import json,sys; d=json.load(sys.stdin)["summary"]; print("published %d confirmed messages at %.0f msg/s" % (d["confirmed"], d["confirm_rate"]))'
echo "RssAnon after publishing: $(awk '/RssAnon/ {print $2/1024 " MiB"}' /proc/$pid/status)"
sleep 25   # past a snapshot and its log compaction
echo "RssAnon settled:          $(awk '/RssAnon/ {print $2/1024 " MiB"}' /proc/$pid/status)"
echo "data directory:           $(du -sh "$data" | cut -f1)"
