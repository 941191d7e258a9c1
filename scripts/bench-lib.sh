# bench-lib.sh — sourced by the 3-node comparison scripts (perf-cluster.sh,
# declare-compare.sh): /proc readings, the PIDs of the local 3-node RabbitMQ and the
# "declare N quorum queues" measurement. Expects RMQ (path of ../shared/tools/rmq-cluster.sh)
# and a built bin/warren-perf.
#
#   proc_kb FIELD PID...     a /proc/PID/status field (VmRSS, RssAnon) summed, KiB
#   rss_kb PID...            VmRSS summed, KiB
#   cpu_ticks PID...         "PID TICKS" lines: utime+stime in clock ticks of the running PIDs
#   cpu_seconds BEFORE AFTER CPU seconds between two cpu_ticks outputs, summed over the
#                            processes in both (a short-lived child that exits is left out)
#   descendants PID...       the PIDs and all their children, grandchildren, ...
#   rmq_beam_pids            the 3 beam.smp PIDs of the running 3-node RabbitMQ
#   rmq_all_pids             those, their children (erl_child_setup, inet_gethost) and epmd
#   rmq_fresh / rmq_stop     wipe and start the 3-node RabbitMQ / stop it (wipe unless KEEP=1)
#   declare_n URI N          declare N quorum queues declared-1..N one after another; prints seconds
#   declare_measure URI N PID...  settle 5 s, RSS, declare_n, settle 10 s, RSS again; prints a
#                            JSON object {"queues", "seconds", "rss_kb_before", "rss_kb_after",
#                            "anon_kb_before", "anon_kb_after"} for perf-table.py's declare part

proc_kb() {
  local field=$1 t=0 p v
  shift
  for p in "$@"; do
    v=$(awk -v f="$field:" '$1 == f {print $2}' "/proc/$p/status" 2>/dev/null || true)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

rss_kb() { proc_kb VmRSS "$@"; }

cpu_ticks() {
  local p v
  for p in "$@"; do
    # Fields after "PID (comm) ": utime and stime are the 12th and 13th.
    v=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null | awk '{print $12 + $13}' || true)
    if [ -n "$v" ]; then echo "$p $v"; fi
  done
}

cpu_seconds() { # BEFORE AFTER (two cpu_ticks outputs)
  awk -v hz="$(getconf CLK_TCK)" 'NR == FNR {b[$1] = $2; next} ($1 in b) {t += $2 - b[$1]} END {printf "%.3f\n", t / hz}' \
    <(echo "$1") <(echo "$2")
}

descendants() {
  local p c
  for p in "$@"; do
    echo "$p"
    for c in $(pgrep -P "$p" || true); do descendants "$c"; done
  done
}

rmq_beam_pids() { { "$RMQ" status 3 2>/dev/null || true; } | sed -nE 's/.*beam pid ([0-9]+).*/\1/p'; }

rmq_all_pids() {
  # shellcheck disable=SC2046
  descendants $(rmq_beam_pids)
  pgrep -x epmd || true
}

rmq_fresh() { # quiet unless the start fails (join_cluster's rabbitmqctl warns on stderr)
  local log
  log=$(mktemp)
  "$RMQ" wipe 3 >/dev/null 2>&1 || true
  if ! "$RMQ" start 3 >"$log" 2>&1; then cat "$log" >&2; rm -f "$log"; return 1; fi
  rm -f "$log"
}

rmq_stop() {
  if [ -n "${KEEP:-}" ]; then "$RMQ" stop 3 >/dev/null; else "$RMQ" wipe 3 >/dev/null; fi
}

declare_n() { # URI N
  local start
  start=$(date +%s.%N)
  bin/warren-perf --uri "$1" --queues "$2" --queue declared --producers 1 --consumers 0 --messages 1 \
    --duration 0 --drain 0s --queue-type quorum --json-only >/dev/null
  awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f\n", b - a}'
}

declare_measure() { # URI N PID...
  local uri=$1 n=$2 rb ab t
  shift 2
  sleep 5
  rb=$(rss_kb "$@")
  ab=$(proc_kb RssAnon "$@")
  t=$(declare_n "$uri" "$n")
  sleep 10
  printf '{"queues":%d,"seconds":%s,"rss_kb_before":%d,"rss_kb_after":%d,"anon_kb_before":%d,"anon_kb_after":%d}\n' \
    "$n" "$t" "$rb" "$(rss_kb "$@")" "$ab" "$(proc_kb RssAnon "$@")"
}
