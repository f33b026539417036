#!/usr/bin/env bash
# Runs a command against a real cluster on 127.0.0.1: starts mooncake-master and one
# mooncaked (or --daemons N of them, each its own "host": socket, transfer port, segment),
# with free ports, a temp dir and a fresh cluster key (MOONCAKE_CLUSTER_KEY_FILE), exports
# MOONCAKE_SOCKET, MOONCAKE_MASTER, MOONCAKE_HOSTNAME (the first daemon), MOONCAKE_SOCKET_2..
# (the others) and the admin HTTP URLs MOONCAKE_MASTER_ADMIN_URL and MOONCAKE_DAEMON_ADMIN_URL
# (the first daemon's), the admin token those accept, MOONCAKE_ADMIN_TOKEN (for curl:
# -H "Authorization: Bearer $MOONCAKE_ADMIN_TOKEN"; mooncake-cli finds it from
# MOONCAKE_CLUSTER_KEY_FILE itself), and MC_BUILD_DIR (the build tree, as CTest sets it for
# the C harness) for the command, and stops them afterwards. Exits with the command's
# status. Used by `make demo` and by the binding test suites.
#
#   scripts/with-cluster.sh [--build DIR] [--segment SIZE] [--daemons N] [--master-flag F]...
#                           [--daemon-flag F]... [--master-port P] [--no-key] -- CMD ARGS...
#
# --no-key starts them without a cluster key (neither variable of the key is set): for
# programs that call the admin HTTP and cannot send a token (Mooncake's own tests); they run
# as this user, whom a process without a key admits (docs/security.md).
# The ports are free ones unless --master-port names the master's (Mooncake's tests dial
# its default, 50051: scripts/mooncake_conformance.py).
# A --daemon-flag goes to every daemon, with "{dir}" replaced by the cluster's temp dir and
# "{i}" by the daemon's number (1-based): --daemon-flag --ssd_path={dir}/ssd-{i}. The
# directory an --ssd_path=DIR names is made first, as an operator would: mooncaked refuses
# a missing one. No client-segment budget flag is passed: the daemons run with the
# defaults, which admit any segment the host can back (docs/daemon.md, "Client segments").
set -euo pipefail
BUILD_DIR=build
SEGMENT=1GB
DAEMONS=1
MASTER_FLAGS=()
DAEMON_FLAGS=()
MASTER_PORT=
KEY=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD_DIR=$2; shift 2 ;;
    --segment) SEGMENT=$2; shift 2 ;;
    --daemons) DAEMONS=$2; shift 2 ;;
    --master-flag) MASTER_FLAGS+=("$2"); shift 2 ;;
    --daemon-flag) DAEMON_FLAGS+=("$2"); shift 2 ;;
    --master-port) MASTER_PORT=$2; shift 2 ;;
    --no-key) KEY=0; shift ;;
    --) shift; break ;;
    *) echo "with-cluster.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "with-cluster.sh: no command given" >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
export MC_BUILD_DIR=$BUILD_DIR

DIR=$(mktemp -d /tmp/mooncake-cluster.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# One cluster key for the master and the daemons, as a real deployment has, and the admin
# token of their admin HTTP (common/admin/admin_http.h), by the CLI's own derivation.
KEY_FLAGS=()
unset MOONCAKE_ADMIN_TOKEN MOONCAKE_ADMIN_TOKEN_FILE  # another cluster's
if [ $KEY = 1 ]; then
  export MOONCAKE_CLUSTER_KEY_FILE="$DIR/cluster.key"
  (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$MOONCAKE_CLUSTER_KEY_FILE")
  KEY_FLAGS=(--cluster_key_file "$MOONCAKE_CLUSTER_KEY_FILE")
  MOONCAKE_ADMIN_TOKEN=$("$BUILD_DIR/cli/mooncake-cli" admin-token \
    --cluster_key_file "$MOONCAKE_CLUSTER_KEY_FILE")
  export MOONCAKE_ADMIN_TOKEN
else
  unset MOONCAKE_CLUSTER_KEY_FILE
fi
MASTER_PORT=${MASTER_PORT:-$(free_port)}
DAEMON_PORT=$(free_port)
export MOONCAKE_SOCKET="$DIR/mooncaked.sock"
export MOONCAKE_MASTER="127.0.0.1:$MASTER_PORT"
export MOONCAKE_HOSTNAME="127.0.0.1:$DAEMON_PORT"

"$BUILD_DIR/master/mooncake-master" --rpc_address 127.0.0.1 --rpc_port "$MASTER_PORT" \
  --metrics_port 0 ${KEY_FLAGS[@]+"${KEY_FLAGS[@]}"} \
  ${MASTER_FLAGS[@]+"${MASTER_FLAGS[@]}"} > "$DIR/master.log" 2>&1 &
PIDS+=($!)
# Daemon i (1-based) serves $DIR/mooncaked-i.sock; daemon 1 is also $MOONCAKE_SOCKET.
for i in $(seq 1 "$DAEMONS"); do
  port=$([ "$i" = 1 ] && echo "$DAEMON_PORT" || free_port)
  socket="$DIR/mooncaked-$i.sock"
  [ "$i" = 1 ] && socket=$MOONCAKE_SOCKET
  [ "$i" -gt 1 ] && export "MOONCAKE_SOCKET_$i=$socket"
  flags=()
  for f in ${DAEMON_FLAGS[@]+"${DAEMON_FLAGS[@]}"}; do
    f=${f//\{dir\}/$DIR}
    f=${f//\{i\}/$i}
    case "$f" in --ssd_path=*) mkdir -p "${f#--ssd_path=}" ;; esac
    flags+=("$f")
  done
  "$BUILD_DIR/daemon/mooncaked" --master "$MOONCAKE_MASTER" --socket "$socket" --metrics_port 0 \
    --hostname 127.0.0.1 --port "$port" --global_segment_size "$SEGMENT" \
    ${KEY_FLAGS[@]+"${KEY_FLAGS[@]}"} ${flags[@]+"${flags[@]}"} \
    > "$DIR/daemon-$i.log" 2>&1 &
  PIDS+=($!)
  # Generous (a machine busy with other work starts it slowly); a daemon that exits is
  # given up on at once.
  for _ in $(seq 1 600); do
    [ -S "$socket" ] || ! kill -0 "${PIDS[-1]}" 2>/dev/null && break
    sleep 0.1
  done
  if [ ! -S "$socket" ]; then
    echo "with-cluster.sh: mooncaked $i did not start; its log:" >&2
    cat "$DIR/daemon-$i.log" >&2
    exit 1
  fi
done
# The admin HTTP ports they chose (--metrics_port 0), from the line each logs once bound:
# MOONCAKE_MASTER_ADMIN_URL and MOONCAKE_DAEMON_ADMIN_URL (the first daemon's), left unset
# when a process logs none.
admin_url() {
  local line
  line=$(grep -m1 -o "$1: admin HTTP listening on .*" "$2" 2>/dev/null || true)
  [ -n "$line" ] && echo "http://127.0.0.1:${line##*:}"
}
for _ in $(seq 1 600); do
  grep -q "master: admin HTTP listening on" "$DIR/master.log" 2>/dev/null && break
  kill -0 "${PIDS[0]}" 2>/dev/null || break
  sleep 0.1
done
url=$(admin_url master "$DIR/master.log") && export MOONCAKE_MASTER_ADMIN_URL=$url
url=$(admin_url daemon "$DIR/daemon-1.log") && export MOONCAKE_DAEMON_ADMIN_URL=$url
echo "with-cluster.sh: master $MOONCAKE_MASTER (admin ${MOONCAKE_MASTER_ADMIN_URL:-none}), $DAEMONS daemon(s), the first $MOONCAKE_HOSTNAME at $MOONCAKE_SOCKET" >&2

set +e
"$@"
status=$?
set -e
if [ $status -ne 0 ]; then
  echo "with-cluster.sh: command failed ($status); daemon log tail:" >&2
  tail -20 "$DIR/daemon-1.log" >&2
fi
exit $status
