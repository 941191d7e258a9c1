# warren-cluster.sh — sourced by the measurement scripts: start a local 3-node Warren
# cluster for one run and stop it again. Node i listens for AMQP on PORT_BASE+i, for
# internal traffic on PORT_BASE+20000+i and for gossip on PORT_BASE+2274+i; with
# DEBUG_PORTS=1 it serves pprof on PORT_BASE+3000+i and Prometheus metrics on
# PORT_BASE+4000+i. Data in a temporary directory. The nodes
# run NODE_BIN/warren (default bin/warren), the readiness check bin/warren-perf.
# With WARREN_TLS=1 the nodes run secured: mutual TLS between them and encrypted
# gossip, with certificates bin/warrenctl makes in $WARREN_DATA/certs, and AMQPS on
# PORT_BASE+10+i beside AMQP; warren_cluster_start then exports SSL_CERT_FILE (the
# CA, which Go clients such as warren-perf trust for amqps:// URIs).
#
#   source scripts/warren-cluster.sh
#   warren_cluster_start [extra warren flags...]   # sets WARREN_PIDS and WARREN_DATA
#   warren_cluster_stop

WARREN_PIDS=()
WARREN_DATA=""

warren_cluster_start() {
  WARREN_DATA=$(mktemp -d)
  WARREN_PIDS=()
  local join="" i debug
  for i in 0 1 2; do join+="${join:+,}127.0.0.1:$((PORT_BASE + 2274 + i))"; done
  local secure=()
  if [ "${WARREN_TLS:-0}" = 1 ]; then
    local certs=$WARREN_DATA/certs
    bin/warrenctl certs init --dir "$certs" >/dev/null
    for i in 0 1 2; do bin/warrenctl certs node "warren-$i" --dir "$certs" >/dev/null; done
    export SSL_CERT_FILE=$certs/ca.pem
    secure=(--tls-ca "$certs/ca.pem" --gossip-key "$(head -c 32 /dev/urandom | base64)")
  fi
  for i in 0 1 2; do
    debug=()
    tls=()
    [ ${#secure[@]} -gt 0 ] && tls=("${secure[@]}" --tls-cert "$WARREN_DATA/certs/warren-$i.pem"
      --tls-key "$WARREN_DATA/certs/warren-$i-key.pem" --amqps "127.0.0.1:$((PORT_BASE + 10 + i))")
    [ -n "${DEBUG_PORTS:-}" ] && debug=(--debug-addr "127.0.0.1:$((PORT_BASE + 3000 + i))"
      --prometheus-addr "127.0.0.1:$((PORT_BASE + 4000 + i))")
    "${NODE_BIN:-bin}/warren" --node-name "warren-$i" --amqp "127.0.0.1:$((PORT_BASE + i))" \
      --internal-addr "127.0.0.1:$((PORT_BASE + 20000 + i))" --gossip-addr "127.0.0.1:$((PORT_BASE + 2274 + i))" \
      "${debug[@]}" "${tls[@]}" --join "$join" --bootstrap-expect 3 --data-dir "$WARREN_DATA/warren-$i" --log-level warn "$@" \
      2>"$WARREN_DATA/warren-$i.log" &
    WARREN_PIDS+=($!)
  done
  for i in 0 1 2; do
    local ready=""
    for _ in $(seq 300); do
      # Ready once a login works: the cluster has formed and seeded its users.
      if bin/warren-perf --uri "amqp://guest:guest@127.0.0.1:$((PORT_BASE + i))/" --producers 1 --consumers 0 \
        --messages 1 --duration 0 --drain 0s --queue cluster-ready --delete --json-only >/dev/null 2>&1; then
        ready=1
        break
      fi
      sleep 0.2
    done
    [ -n "$ready" ] || { echo "warren-$i did not become ready (log: $WARREN_DATA/warren-$i.log)" >&2; return 1; }
  done
}

warren_cluster_stop() {
  local p
  for p in "${WARREN_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${WARREN_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  WARREN_PIDS=()
  if [ -n "$WARREN_DATA" ] && [ -z "${KEEP:-}" ]; then rm -rf "$WARREN_DATA"; fi
  WARREN_DATA=""
}
