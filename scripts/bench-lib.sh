# bench-lib.sh — sourced by the comparison scripts (perf-cluster.sh, declare-compare.sh,
# perf-sustained.sh): /proc readings, the PIDs of the local 3-node RabbitMQ, the "declare N
# quorum queues" measurement and the search for a sustained rate. Expects RMQ (path of
# scripts/rabbitmq.sh) and a built bin/warren-perf.
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
#   sustained_search NAME RUN  the summary line of the best run at which the consumer kept
#                            pace: RUN RATE (0: unlimited) must print one warren-perf summary
#                            line; progress on stderr (perf-sustained.sh, perf-cluster.sh)
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

# keeps_pace SUMMARY: "pass|fail consumed published p99ms" for one run: it passes when the
# consumer received at least 99% of what was published and the end-to-end p99 stayed under
# MAX_P99_MS (default 1000): the queue did not grow.
keeps_pace() {
  python3 -c '
import json, sys
s = json.loads(sys.argv[2])["summary"]
sent, got, p99 = s["send_rate"], s["receive_rate"], s["latency_e2e_us"]["p99"] / 1000
ok = got >= 0.99 * sent and p99 <= float(sys.argv[1])
print("pass" if ok else "fail", round(got), round(sent), round(p99, 1))
' "${MAX_P99_MS:-1000}" "$1"
}

# sustained_search NAME RUN: an unlimited run, then STEPS (default 5) runs searching --rate
# between half and all of the unlimited run's consumed rate. If every one of them passed, the
# unlimited run was no ceiling (its queue grew, and a broker delivering a backlog reads it back
# from its log, a slower regime than keeping pace), so the search goes on above it: --rate a
# quarter higher each time, up to GROW (default 4) times, until a run fails, then STEPS more
# runs between the last rate that passed and the first that failed. Prints the summary line of
# the passing run that consumed most (the unlimited one if it passed; empty if none did).
sustained_search() {
  local name=$1 run=$2 line v best="" bestgot=0 lo hi mid step failed=""
  line=$("$run" 0) || return 1
  v=($(keeps_pace "$line"))
  echo "$name unlimited: consumed ${v[1]}/s, published ${v[2]}/s, e2e p99 ${v[3]} ms (${v[0]})" >&2
  if [ "${v[0]}" = pass ]; then
    echo "$line"
    return
  fi
  hi=${v[1]}
  lo=$((hi / 2))
  for step in $(seq "${STEPS:-5}") last; do
    if [ "$step" = last ]; then
      [ -n "$best" ] && break
      mid=$lo # nothing passed: the lower end, once
    else
      mid=$(((lo + hi) / 2))
    fi
    sustained_try || return 1
  done
  if [ -z "$failed" ] && [ -n "$best" ]; then
    for step in $(seq "${GROW:-4}"); do
      mid=$((lo * 5 / 4))
      sustained_try || return 1
      [ -n "$failed" ] && break
    done
    if [ -n "$failed" ]; then
      for step in $(seq "${STEPS:-5}"); do
        mid=$(((lo + hi) / 2))
        sustained_try || return 1
      done
    fi
  fi
  echo "$best"
}

# sustained_try: one run of sustained_search's at --rate mid, moving its lo or hi (and best,
# failed) by the result. Uses sustained_search's locals.
sustained_try() {
  line=$("$run" "$mid") || return 1
  v=($(keeps_pace "$line"))
  echo "$name at $mid/s: consumed ${v[1]}/s, published ${v[2]}/s, e2e p99 ${v[3]} ms (${v[0]})" >&2
  if [ "${v[0]}" = pass ]; then
    lo=$mid
    if [ "${v[1]}" -gt "$bestgot" ]; then best=$line bestgot=${v[1]}; fi
  else
    hi=$mid failed=1
  fi
}

