#!/bin/bash
# deploy/ checks:
#   - the systemd units pass `systemd-analyze verify` (with ExecStart pointing at this
#     build's binaries, which verify requires to exist, and MANPATH at this build's man
#     pages, which their Documentation= names) with no complaint at all;
#   - they are Type=notify, the daemon's ordered after the master's; they run as the
#     dedicated user with the socket directory's group mode, restart on failure and name the
#     state directories;
#   - `systemd-analyze security` rates each at or below Debian's redis-server.service,
#     measured in the same run; the system calls the binaries make (io_uring for the SSD
#     tier, memfd and mlock for segments, fork for snapshots, ...) are in the filter;
#   - systemd-sysusers creates the user from deploy/mooncake.sysusers.conf (scratch root);
#   - the example configs work on one host as shipped: a master started from master.yaml and
#     a daemon from mooncaked.yaml (ports, paths and sizes overridden by flags, which win over
#     the files) serve, and kvcache_demo puts and gets through them.
# Usage: deploy_units_test.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
if ! command -v systemd-analyze > /dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
redis_unit=/lib/systemd/system/redis-server.service
[ -f "$redis_unit" ] || fail "no $redis_unit to compare with (scripts/install-deps.sh installs redis-server)"
tmp=$(mktemp -d /tmp/mc-deploy-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

sed "s|/usr/local/bin/mooncake-master|$build/master/mooncake-master|g" \
  "$src/deploy/mooncake-master.service" > "$tmp/mooncake-master.service"
sed "s|/usr/local/bin/mooncaked|$build/daemon/mooncaked|g" \
  "$src/deploy/mooncaked.service" > "$tmp/mooncaked.service"
for unit in mooncake-master mooncaked; do
  grep -q "^ExecStart=$build/" "$tmp/$unit.service" || fail "$unit: ExecStart not substituted"
  grep -q "^ExecPaths=$build/" "$tmp/$unit.service" || fail "$unit: ExecPaths not substituted"
  # verify exits 0 on unknown keys and bad values too: any output is a failure. It also
  # looks up the man page Documentation= names (a build with -DMC_MAN_PAGES=OFF has none).
  man=--man=yes
  [ -f "$build/man/man1/$unit.1" ] || man=--man=no
  out=$(MANPATH=$build/man systemd-analyze verify "$man" "$tmp/$unit.service" 2>&1) ||
    fail "$unit: verify: $out"
  [ -z "$out" ] || fail "$unit: systemd-analyze verify says: $out"
  for setting in Type=notify User=mooncake Group=mooncake Restart=on-failure \
                 LoadCredential=cluster.key:/etc/mooncake/cluster.key StateDirectory= \
                 "Documentation=man:$unit(1) "; do
    grep -q "^$setting" "$tmp/$unit.service" || fail "$unit: no $setting"
  done
  grep -q -- "--cluster_key_file %d/cluster.key" "$tmp/$unit.service" ||
    fail "$unit: the credential is not passed as --cluster_key_file"
done
grep -q '^After=mooncake-master.service$' "$tmp/mooncaked.service" ||
  fail "mooncaked.service is not ordered after mooncake-master.service"
grep -q '^RuntimeDirectory=mooncake$' "$tmp/mooncaked.service" || fail "no RuntimeDirectory"
grep -q '^RuntimeDirectoryMode=0750$' "$tmp/mooncaked.service" || fail "socket dir mode"
grep -q '^StateDirectory=mooncake mooncake/ssd$' "$tmp/mooncaked.service" || fail "no SSD dir"
grep -q '^StateDirectory=mooncake-master$' "$tmp/mooncake-master.service" ||
  fail "no snapshot dir"
for unit in mooncake-master mooncaked; do  # state only its user may enter (docs/security.md)
  grep -q '^StateDirectoryMode=0700$' "$tmp/$unit.service" || fail "$unit: state dir mode"
done

# Exposure, in tenths as systemd-analyze prints it: ours at or below redis-server's.
exposure() {
  systemd-analyze security --offline=yes "$1" 2>&1 |
    sed -n 's/.*Overall exposure level for [^:]*: \([0-9]*\)\.\([0-9]\).*/\1\2/p'
}
redis=$(exposure "$redis_unit")
[ -n "$redis" ] || fail "no exposure for $redis_unit: $(systemd-analyze security --offline=yes "$redis_unit" 2>&1 | tail -3)"
for unit in mooncake-master mooncaked; do
  ours=$(exposure "$tmp/$unit.service")
  [ -n "$ours" ] || fail "$unit: no exposure level"
  [ "$((10#$ours))" -le "$((10#$redis))" ] ||
    fail "$unit.service: exposure $((10#$ours / 10)).$((10#$ours % 10)) above redis-server's" \
         "$((10#$redis / 10)).$((10#$redis % 10)): $(systemd-analyze security --offline=yes \
         "$tmp/$unit.service" 2>&1 | grep '✗')"
  echo "$unit.service: exposure $((10#$ours / 10)).$((10#$ours % 10)) (redis-server.service: $((10#$redis / 10)).$((10#$redis % 10)))"
done

# The system call filter: every call the binaries are known to make (strace of a run with
# the SSD tier, snapshots, HA and clients; see the units' comments) is in @system-service
# and in neither group the units take away.
expand() {
  systemd-analyze syscall-filter "$1" 2> /dev/null | awk 'NR > 2 && $1 !~ /^#/ { print $1 }' |
    while read -r name; do
      case $name in @*) expand "$name" ;; *) echo "$name" ;; esac
    done
}
expand @system-service | sort -u > "$tmp/allowed"
{ expand @privileged; expand @resources; } | sort -u > "$tmp/denied"
for unit in mooncake-master mooncaked; do
  grep -q '^SystemCallFilter=@system-service$' "$tmp/$unit.service" &&
    grep -q '^SystemCallFilter=~@privileged @resources$' "$tmp/$unit.service" ||
    fail "$unit: the system call filter is not the one checked here"
done
for call in io_uring_setup io_uring_enter io_uring_register memfd_create mlock munlock \
            madvise fallocate clone clone3 wait4 chmod prlimit64 accept4 epoll_wait \
            sendmsg recvmsg fdatasync flock ioctl mremap; do
  grep -qx "$call" "$tmp/allowed" || fail "the units' filter refuses $call (not in @system-service)"
  ! grep -qx "$call" "$tmp/denied" || fail "the units' filter refuses $call (@privileged/@resources)"
done

mkdir -p "$tmp/root/etc"
systemd-sysusers --root="$tmp/root" "$src/deploy/mooncake.sysusers.conf" > /dev/null 2>&1 ||
  fail "systemd-sysusers refuses deploy/mooncake.sysusers.conf"
grep -q '^mooncake:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$tmp/root/etc/passwd" ||
  fail "sysusers made no user mooncake"
grep -q '^mooncake:x:' "$tmp/root/etc/group" || fail "sysusers made no group mooncake"

# The example configs, on one host: no other host's address in them, no master named in
# the daemon's (it finds the master at this host's address by default).
! grep -n "10\.0\.0\." "$src/deploy/master.yaml" "$src/deploy/mooncaked.yaml" ||
  fail "an example config names 10.0.0.x"
! grep -q "^master:" "$src/deploy/mooncaked.yaml" || fail "mooncaked.yaml names a master"
# The master on master.yaml, at its default address (this host's); the port, the admin
# port and the snapshot directory overridden, and no key.
mkdir "$tmp/snapshots"
"$build/master/mooncake-master" --config "$src/deploy/master.yaml" --rpc_port 0 \
  --metrics_port 0 --snapshot_dir "$tmp/snapshots" --cluster_key_file "" \
  > "$tmp/master.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do  # a generous minute: a loaded machine starts it slowly
  grep -q "listening on" "$tmp/master.log" && break
  kill -0 "${pids[0]}" 2> /dev/null || break
  sleep 0.1
done
master=$(sed -n 's/.*mooncake-master listening on \([^ ]*:[0-9]*\).*/\1/p' "$tmp/master.log")
[ -n "$master" ] || fail "master on deploy/master.yaml: $(cat "$tmp/master.log")"
grep -q " W master .*is ignored" "$tmp/master.log" && fail "deploy/master.yaml has ignored keys"
# The daemon on mooncaked.yaml: told only the port the master got (by default it looks at
# the same address, port 50051); socket, admin port and segment size overridden.
socket=$tmp/mooncaked.sock
"$build/daemon/mooncaked" --config "$src/deploy/mooncaked.yaml" --master "$master" \
  --socket "$socket" --metrics_port 0 --global_segment_size 64MB --cluster_key_file "" \
  > "$tmp/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  grep -q "mooncaked .* serving" "$tmp/daemon.log" && break
  kill -0 "${pids[1]}" 2> /dev/null || break
  sleep 0.1
done
grep -q "mooncaked .* serving" "$tmp/daemon.log" ||
  fail "mooncaked on deploy/mooncaked.yaml: $(cat "$tmp/daemon.log")"
grep -q " W daemon .*is ignored" "$tmp/daemon.log" && fail "deploy/mooncaked.yaml has ignored keys"
MOONCAKE_SOCKET=$socket MOONCAKE_STORE_HUGE_PAGES=0 "$build/examples/kvcache_demo" \
  > "$tmp/demo.log" 2>&1 || fail "kvcache_demo on the example configs: $(cat "$tmp/demo.log")"
for pid in "${pids[1]}" "${pids[0]}"; do
  kill -TERM "$pid"
  wait "$pid" || fail "a process on the example configs exited with status $? at SIGTERM"
done
pids=()
echo "PASS"
