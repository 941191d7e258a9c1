#!/usr/bin/env bash
# cluster.sh — N Warren nodes on this machine, for trying clustering out (`make cluster`,
# `make cluster N=5`). Node i (0..N-1) listens on 127.0.0.1 with AMQP port 5672+i, AMQPS port
# 5681+i, internal gRPC port 25672+i (Raft, forwarding, warrenctl), gossip port 7946+i,
# Prometheus metrics port 15692+i and the management HTTP API on port 15672+i (HTTPS when
# secured). The nodes run secured as a production cluster does: mutual
# TLS between them with certificates from a development CA made in $DATA_DIR/cluster/certs on
# first use (with a client certificate for warrenctl, as guest), and gossip encrypted with a key
# kept there too; INSECURE=1 runs them without. Node i's data is in
# $DATA_DIR/cluster/warren-i and its log in $DATA_DIR/cluster/warren-i.log (the previous run's
# log is kept as warren-i.log.1). The logs are followed here, each line prefixed with its node.
# Ctrl-C (or SIGTERM) stops every node: SIGTERM, then SIGKILL after STOP_TIMEOUT seconds
# (a second Ctrl-C kills at once).
#
# Environment: N (3), DATA_DIR (./data), BIN (bin), FOLLOW_LOGS (1; 0 only prints where the
# logs are), CLEAN (0; 1 deletes $DATA_DIR/cluster first, for a new cluster), STOP_TIMEOUT (15),
# WARREN_FLAGS (more flags for every node, e.g. "--log-level debug"), INSECURE (0).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-3}
DATA_DIR=${DATA_DIR:-./data}
BIN=${BIN:-bin}
FOLLOW_LOGS=${FOLLOW_LOGS:-1}
CLEAN=${CLEAN:-0}
STOP_TIMEOUT=${STOP_TIMEOUT:-15}
WARREN_FLAGS=${WARREN_FLAGS:-}
INSECURE=${INSECURE:-0}
dir=$DATA_DIR/cluster
certs=$dir/certs

case $N in
  '' | *[!0-9]*) echo "cluster.sh: N must be a number of nodes, not '$N'" >&2; exit 2 ;;
esac
if [ "$N" -lt 1 ]; then
  echo "cluster.sh: N must be at least 1" >&2; exit 2
fi

# Under make the binaries were just built (the target depends on build).
if [ -z "${MAKELEVEL:-}" ]; then
  "${MAKE:-make}" --no-print-directory build BIN="$BIN"
fi

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

join=""
for ((i = 0; i < N; i++)); do
  join+="${join:+,}127.0.0.1:$((7946 + i))"
  for port in $((5672 + i)) $((5681 + i)) $((25672 + i)) $((7946 + i)) $((15692 + i)) $((15672 + i)); do
    if listening "$port"; then
      echo "cluster.sh: port $port is in use (another cluster, or \`make run\`?)" >&2
      exit 1
    fi
  done
done

if [ "$CLEAN" = 1 ]; then
  rm -rf "$dir"
fi
mkdir -p "$dir"

# secure_flags NAME: the TLS and gossip-key flags of node NAME, its certificate made on first use.
secure_flags() {
  [ "$INSECURE" = 1 ] && return
  [ -f "$certs/ca.pem" ] || "$BIN/warrenctl" certs init --dir "$certs" --name "Warren development cluster CA" >/dev/null
  [ -f "$certs/$1.pem" ] || "$BIN/warrenctl" certs node "$1" --dir "$certs" >/dev/null
  [ -f "$certs/guest.pem" ] || "$BIN/warrenctl" certs client guest --dir "$certs" >/dev/null
  [ -f "$certs/gossip.key" ] || (umask 077 && head -c 32 /dev/urandom | base64 >"$certs/gossip.key")
  echo "--tls-ca $certs/ca.pem --tls-cert $certs/$1.pem --tls-key $certs/$1-key.pem --gossip-key $(cat "$certs/gossip.key") --amqps 127.0.0.1:$2"
}

pids=()       # node i's process
followers=()  # the log followers
names=()

prefix() { # prefix NAME COLOR: copy stdin to stdout, each line behind the node's name
  local p line
  trap '' INT # Ctrl-C reaches the whole process group: keep following until stop() ends it
  p=$(printf '%-9s| ' "$1")
  if [ -t 1 ]; then p=$(printf '\033[%sm%-9s\033[0m| ' "$2" "$1"); fi
  while IFS= read -r line; do printf '%s%s\n' "$p" "$line"; done
}

# The signal traps only raise flags: the loops below notice them and call stop, which must
# not run inside a trap handler (bash would not run a nested one for the second Ctrl-C).
interrupted=0
trap 'interrupted=1' INT TERM
nap() { sleep "$1" & wait $! || true; } # sleep, cut short by a trapped signal

stop() { # stop [EXIT_STATUS]: stop every node, then exit
  local rc=${1:-0}
  force=0
  trap 'force=1' INT
  trap '' TERM
  echo
  echo "== stopping ${#pids[@]} nodes (SIGTERM; SIGKILL after ${STOP_TIMEOUT}s or a second Ctrl-C)"
  if [ ${#pids[@]} -eq 0 ]; then exit "$rc"; fi
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for ((t = 0; t < STOP_TIMEOUT * 10 && force == 0; t++)); do
    alive=0
    for pid in "${pids[@]}"; do
      if kill -0 "$pid" 2>/dev/null; then alive=1; fi
    done
    [ $alive = 0 ] && break
    nap 0.1
  done
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "== ${names[$i]} did not stop in time: SIGKILL"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
  wait "${pids[@]}" 2>/dev/null || true
  nap 0.2 # let the followers print the last lines
  if [ ${#followers[@]} -gt 0 ]; then
    kill "${followers[@]}" 2>/dev/null || true
  fi
  echo "== stopped; data in $dir, logs in $dir/warren-*.log"
  exit "$rc"
}

colors=(36 33 35 32 34 91 92 93 94)
for ((i = 0; i < N; i++)); do
  name=warren-$i
  log=$dir/$name.log
  [ -f "$log" ] && mv "$log" "$log.1"
  : >"$log"
  secure=$(secure_flags "$name" $((5681 + i)))
  # shellcheck disable=SC2086 # WARREN_FLAGS and secure are split into flags on purpose
  "$BIN/warren" --node-name "$name" $secure \
    --amqp "127.0.0.1:$((5672 + i))" \
    --internal-addr "127.0.0.1:$((25672 + i))" \
    --gossip-addr "127.0.0.1:$((7946 + i))" \
    --prometheus-addr "127.0.0.1:$((15692 + i))" \
    --management-addr "127.0.0.1:$((15672 + i))" \
    --join "$join" \
    --bootstrap-expect "$N" \
    --data-dir "$dir/$name" \
    $WARREN_FLAGS >>"$log" 2>&1 </dev/null &
  pids+=($!)
  names+=("$name")
  if [ "$FOLLOW_LOGS" = 1 ]; then
    tail -n +1 -f "$log" 2>/dev/null > >(prefix "$name" "${colors[$((i % ${#colors[@]}))]}") &
    followers+=($!)
  fi
done

# Wait until every node accepts AMQP connections, or one exits.
for ((t = 0; t < 300; t++)); do
  [ $interrupted = 1 ] && stop
  ready=0
  for ((i = 0; i < N; i++)); do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      echo "== ${names[$i]} exited while starting; its log: $dir/${names[$i]}.log"
      stop 1
    fi
    listening $((5672 + i)) && ready=$((ready + 1))
  done
  [ $ready = "$N" ] && break
  nap 0.1
done

{
  echo
  echo "== $N Warren nodes are running (data and logs in $dir/)"
  for ((i = 0; i < N; i++)); do
    echo "   ${names[$i]}: amqp://guest:guest@127.0.0.1:$((5672 + i))/   internal 127.0.0.1:$((25672 + i))   metrics http://127.0.0.1:$((15692 + i))/metrics   management 127.0.0.1:$((15672 + i))   log $dir/${names[$i]}.log"
  done
  if [ "$INSECURE" != 1 ]; then
    echo "   mutual TLS between the nodes; AMQPS on 127.0.0.1:5681-$((5680 + N)); certificates in $certs/"
    echo "   export WARRENCTL_CA=$certs/ca.pem WARRENCTL_CERT=$certs/guest.pem WARRENCTL_KEY=$certs/guest-key.pem"
  fi
  echo "   $BIN/warrenctl cluster status            (any node: --node 127.0.0.1:2567x)"
  echo "   $BIN/warrenctl list queues"
  echo "   $BIN/warrenctl quorum status QUEUE"
  echo "== Ctrl-C stops them all"
  echo
}

# Report nodes that exit on their own; keep the others until Ctrl-C.
exited=()
while :; do
  [ $interrupted = 1 ] && stop
  left=0
  for i in "${!pids[@]}"; do
    if kill -0 "${pids[$i]}" 2>/dev/null; then
      left=$((left + 1))
    elif [ -z "${exited[$i]:-}" ]; then
      exited[$i]=1
      rc=0
      wait "${pids[$i]}" || rc=$?
      echo "== ${names[$i]} exited with status $rc; its log: $dir/${names[$i]}.log"
    fi
  done
  if [ $left = 0 ]; then
    echo "== every node has exited"
    if [ ${#followers[@]} -gt 0 ]; then kill "${followers[@]}" 2>/dev/null || true; fi
    exit 1
  fi
  nap 1
done
