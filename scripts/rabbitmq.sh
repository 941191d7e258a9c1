#!/usr/bin/env bash
# rabbitmq.sh runs RabbitMQ from Debian's rabbitmq-server package (3.10.8 on bookworm) as a
# 1- to 5-node cluster on loopback, so that the comparison scripts measure it beside Warren on
# the same machine in the same run.
#
#   scripts/rabbitmq.sh start|stop|status|wipe [N]      N nodes, 1 to 5 (default 3)
#
# Node k (1-based) is rabbitk@localhost with AMQP on 127.0.0.1:$((RMQ_PORT_BASE+k-1)) (5772 and
# up: Warren keeps 5672), Erlang distribution 20000 above that and, with RMQ_MGMT=1, the
# management API 10000 above it (15772 and up). guest/guest works from loopback. Each cluster
# size keeps its data in its own folder (RMQ_BASE, default /tmp/warren-rabbitmq-N); the nodes
# share ports, so run one size at a time. The package is installed on first use.
#
# Environment: RMQ_BASE, RMQ_PORT_BASE (5772), RMQ_MGMT (0), RMQ_BOOT_TIMEOUT (180 s),
# RMQ_EXTRA_ERL_ARGS (more emulator flags).
set -euo pipefail

cmd=${1:-}
count=${2:-3}
[[ $count =~ ^[1-5]$ ]] || { echo "rabbitmq.sh: N is 1 to 5" >&2; exit 2; }
base=${RMQ_BASE:-/tmp/warren-rabbitmq-$count}
port_base=${RMQ_PORT_BASE:-5772}
mgmt=${RMQ_MGMT:-0}
boot_timeout=${RMQ_BOOT_TIMEOUT:-180}
sbin=/usr/lib/rabbitmq/bin

# Everything a node reads comes from $base: its HOME (the Erlang cookie), an empty env file in
# place of /etc/rabbitmq's, and a config file per node.
export HOME=$base
export ERL_EPMD_ADDRESS=127.0.0.1
export RABBITMQ_USE_LONGNAME=false
export RABBITMQ_CONF_ENV_FILE=$base/rabbitmq-env.conf

fail() { echo "rabbitmq.sh: $*" >&2; exit 1; }

install_package() {
  [ -x "$sbin/rabbitmq-server" ] && return
  echo "rabbitmq.sh: installing Debian's rabbitmq-server"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rabbitmq-server; } \
    >/dev/null 2>&1 || fail "could not install rabbitmq-server"
}

name() { echo "rabbit$1"; }            # node k's short name
dir() { echo "$base/rabbit$1"; }       # node k's folder
amqp_port() { echo $((port_base + $1 - 1)); }

ctl() { local k=$1; shift; "$sbin/rabbitmqctl" -n "$(name "$k")@localhost" "$@"; }

# pid prints node k's Erlang VM process id while it runs.
pid() {
  local f p
  f="$(dir "$1")/pid"
  [ -f "$f" ] || return 0
  p=$(tr -dc 0-9 < "$f")
  if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then echo "$p"; fi
}

write_config() {
  mkdir -p "$base"
  if [ -f "$base/size" ] && [ "$(cat "$base/size")" != "$count" ]; then
    fail "$base holds a $(cat "$base/size")-node cluster; wipe it first"
  fi
  echo "$count" > "$base/size"
  : > "$RABBITMQ_CONF_ENV_FILE"
  if [ ! -f "$base/.erlang.cookie" ]; then
    head -c 24 /dev/urandom | base64 | tr -dc A-Za-z0-9 > "$base/.erlang.cookie"
  fi
  chmod 400 "$base/.erlang.cookie"
  local k d
  for k in $(seq 1 "$count"); do
    d=$(dir "$k")
    mkdir -p "$d/mnesia" "$d/log"
    {
      echo "loopback_users.guest = true"
      echo "log.console = false"
      echo "log.file.level = info"
      if [ "$mgmt" = 1 ]; then
        echo "management.tcp.ip = 127.0.0.1"
        echo "management.tcp.port = $(( $(amqp_port "$k") + 10000 ))"
      fi
    } > "$d/rabbitmq.conf"
    if [ "$mgmt" = 1 ]; then echo "[rabbitmq_management]." > "$d/enabled_plugins"; else echo "[]." > "$d/enabled_plugins"; fi
  done
}

start_node() {
  local k=$1 d port
  d=$(dir "$k"); port=$(amqp_port "$k")
  if [ -n "$(pid "$k")" ]; then echo "$(name "$k") is running"; return; fi
  rm -f "$d/pid"
  echo "starting $(name "$k")@localhost, AMQP 127.0.0.1:$port"
  RABBITMQ_NODENAME="$(name "$k")@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
    RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT=$((port + 20000)) \
    RABBITMQ_MNESIA_BASE="$d/mnesia" RABBITMQ_LOG_BASE="$d/log" \
    RABBITMQ_CONFIG_FILE="$d/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$d/advanced.config" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$d/enabled_plugins" RABBITMQ_PID_FILE="$d/pid" \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} ${RMQ_EXTRA_ERL_ARGS:-}" \
    setsid nohup "$sbin/rabbitmq-server" >> "$d/log/console.out" 2>&1 < /dev/null &
}

start() {
  install_package
  write_config
  local k
  # All nodes start before any is waited for: after a whole-cluster stop each waits for its peers.
  for k in $(seq 1 "$count"); do start_node "$k"; done
  for k in $(seq 1 "$count"); do
    ctl "$k" -q wait --timeout "$boot_timeout" "$(dir "$k")/pid" || fail "$(name "$k") did not boot; see $(dir "$k")/log/"
  done
  for k in $(seq 2 "$count"); do
    if ctl "$k" cluster_status --formatter json 2>/dev/null | grep -q '"rabbit1@localhost"'; then continue; fi
    echo "joining $(name "$k") to rabbit1@localhost"
    ctl "$k" -q stop_app && ctl "$k" -q reset && ctl "$k" -q join_cluster rabbit1@localhost && ctl "$k" -q start_app
  done
  ctl 1 -q await_online_nodes "$count" --timeout 60 >/dev/null 2>&1 || true
  echo "RabbitMQ: $count node(s) up, AMQP from 127.0.0.1:$port_base"
}

stop() {
  local k p
  for k in $(seq "$count" -1 1); do
    p=$(pid "$k")
    [ -n "$p" ] || continue
    echo "stopping $(name "$k")"
    ctl "$k" -q stop "$(dir "$k")/pid" || kill -TERM "$p" 2>/dev/null || true
    for _ in $(seq 60); do kill -0 "$p" 2>/dev/null || break; sleep 1; done
  done
  # epmd came up with the first node; it goes once no node is registered with it.
  local epmd
  epmd=$(command -v epmd || echo /usr/lib/erlang/bin/epmd)
  if [ -x "$epmd" ] && ! "$epmd" -names 2>/dev/null | grep -q '^name '; then "$epmd" -kill >/dev/null 2>&1 || true; fi
}

status() {
  local k p up=
  for k in $(seq 1 "$count"); do
    p=$(pid "$k")
    if [ -n "$p" ]; then
      up=$k
      echo "$(name "$k")@localhost: beam pid $p, RSS $(awk '/VmRSS/{print $2" "$3}' "/proc/$p/status"), AMQP 127.0.0.1:$(amqp_port "$k")"
    else
      echo "$(name "$k")@localhost: not running"
    fi
  done
  [ -n "$up" ] && ctl "$up" cluster_status
}

case $cmd in
  start) start ;;
  stop) stop ;;
  status) status ;;
  wipe) stop; rm -rf "$base"; echo "removed $base" ;;
  *) echo "usage: scripts/rabbitmq.sh start|stop|status|wipe [N]" >&2; exit 2 ;;
esac
