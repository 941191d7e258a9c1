#!/usr/bin/env bash
# make-certs.sh — the TLS material and gossip key of deploy/docker's compose clusters, made
# with bin/warrenctl (make build) on the host, since the image has no shell. Run it once,
# before the first `docker-compose up`; it makes only what is missing, so running it again
# keeps the cluster's CA and keys.
#
#   tls/ca/              the cluster CA (ca-key.pem signs; never mounted into a container)
#   tls/warren-i/        mounted read-only at /tls in container warren-i: ca.pem, the node's
#                        warren-i.pem and warren-i-key.pem (--host warren-i), and the client
#                        certificate USER.pem / USER-key.pem that warrenctl in the container
#                        (and its health check) uses
#   tls/warren.env       compose's env_file: WARREN_TLS_*, WARREN_AMQPS, WARREN_GOSSIP_KEY and
#                        WARRENCTL_* (mode 0600: it holds the gossip key)
#
# Environment: N (5, enough for both compose files), CLIENT_USER (guest: the user whose client
# certificate warrenctl uses; it must exist in the cluster with the administrator tag, or at
# least monitoring for the health check), WARRENCTL (../../bin/warrenctl).
# To rotate a node's certificate, delete tls/warren-i/warren-i.pem and run this again: the node
# picks the new one up within seconds (the folder, not the file, is mounted).
set -euo pipefail
cd "$(dirname "$0")"

N=${N:-5}
CLIENT_USER=${CLIENT_USER:-guest}
WARRENCTL=${WARRENCTL:-../../bin/warrenctl}
tls=tls

if [ ! -x "$WARRENCTL" ]; then
  echo "make-certs.sh: $WARRENCTL not found; run \`make build\` first (or set WARRENCTL)" >&2
  exit 1
fi
ctl() { "$WARRENCTL" "$@" >/dev/null; }
# put SRC DIR: copy SRC into DIR whole (a running node may be reading it), unless unchanged.
put() {
  local dst=$2/$(basename "$1")
  cmp -s "$1" "$dst" 2>/dev/null || { cp -p "$1" "$dst.tmp" && mv "$dst.tmp" "$dst"; }
}

umask 077
mkdir -p "$tls"
[ -f "$tls/ca/ca.pem" ] || ctl certs init --dir "$tls/ca" --name "Warren compose cluster CA"
[ -f "$tls/ca/clients/$CLIENT_USER.pem" ] || ctl certs client "$CLIENT_USER" --dir "$tls/ca" --out "$tls/ca/clients"
[ -f "$tls/gossip.key" ] || head -c 32 /dev/urandom | base64 >"$tls/gossip.key"

for ((i = 0; i < N; i++)); do
  name=warren-$i
  dir=$tls/$name
  mkdir -p "$dir"
  [ -f "$dir/$name.pem" ] || ctl certs node "$name" --dir "$tls/ca" --out "$dir" --host "$name"
  put "$tls/ca/ca.pem" "$dir"
  put "$tls/ca/clients/$CLIENT_USER.pem" "$dir"
  put "$tls/ca/clients/$CLIENT_USER-key.pem" "$dir"
  # The containers run as root, which reads these whatever their owner; with user
  # namespace remapping, make them readable by the remapped root instead.
  chmod 0755 "$dir"
  chmod 0644 "$dir/ca.pem" "$dir/$name.pem" "$dir/$CLIENT_USER.pem"
done

cat >"$tls/warren.env" <<EOF
# Written by make-certs.sh; shared by every node of deploy/docker's compose files (each
# node's own certificate is set in the compose file).
WARREN_TLS_CA=/tls/ca.pem
WARREN_AMQPS=:5671
WARREN_GOSSIP_KEY=$(cat "$tls/gossip.key")
WARRENCTL_CA=/tls/ca.pem
WARRENCTL_CERT=/tls/$CLIENT_USER.pem
WARRENCTL_KEY=/tls/$CLIENT_USER-key.pem
EOF

echo "TLS material for warren-0..warren-$((N - 1)) in $(pwd)/$tls/ (client certificate: $CLIENT_USER)"
echo "AMQPS clients on the host: CA $(pwd)/$tls/ca/ca.pem, client certificate $(pwd)/$tls/ca/clients/$CLIENT_USER.pem and $CLIENT_USER-key.pem"
