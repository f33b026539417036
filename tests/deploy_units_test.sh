#!/bin/bash
# deploy/ checks: the systemd units pass `systemd-analyze verify` (with ExecStart pointing
# at this build's binaries, which verify requires to exist) with no complaint at all; they
# run as the dedicated user with the socket directory's group mode, restart on failure and
# name the state directories; systemd-sysusers creates the user from
# deploy/mooncake.sysusers.conf (in a scratch root); the example configs parse.
# Usage: deploy_units_test.sh SOURCE_DIR BUILD_DIR
set -u
src=$1 build=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
if ! command -v systemd-analyze > /dev/null; then
  echo "SKIP: systemd-analyze is not installed (Debian package systemd)"
  exit 77
fi
tmp=$(mktemp -d /tmp/mc-deploy-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

sed "s|/usr/local/bin/mooncake-master|$build/master/mooncake-master|" \
  "$src/deploy/mooncake-master.service" > "$tmp/mooncake-master.service"
sed "s|/usr/local/bin/mooncaked|$build/daemon/mooncaked|" \
  "$src/deploy/mooncaked.service" > "$tmp/mooncaked.service"
for unit in mooncake-master mooncaked; do
  grep -q "^ExecStart=$build/" "$tmp/$unit.service" || fail "$unit: ExecStart not substituted"
  # verify exits 0 on unknown keys and bad values too: any output is a failure.
  out=$(systemd-analyze verify "$tmp/$unit.service" 2>&1) || fail "$unit: verify: $out"
  [ -z "$out" ] || fail "$unit: systemd-analyze verify says: $out"
  for setting in User=mooncake Group=mooncake Restart=on-failure \
                 LoadCredential=cluster.key:/etc/mooncake/cluster.key StateDirectory=; do
    grep -q "^$setting" "$tmp/$unit.service" || fail "$unit: no $setting"
  done
  grep -q -- "--cluster_key_file %d/cluster.key" "$tmp/$unit.service" ||
    fail "$unit: the credential is not passed as --cluster_key_file"
done
grep -q '^RuntimeDirectory=mooncake$' "$tmp/mooncaked.service" || fail "no RuntimeDirectory"
grep -q '^RuntimeDirectoryMode=0750$' "$tmp/mooncaked.service" || fail "socket dir mode"
grep -q '^StateDirectory=mooncake mooncake/ssd$' "$tmp/mooncaked.service" || fail "no SSD dir"
grep -q '^StateDirectory=mooncake-master$' "$tmp/mooncake-master.service" ||
  fail "no snapshot dir"

mkdir -p "$tmp/root/etc"
systemd-sysusers --root="$tmp/root" "$src/deploy/mooncake.sysusers.conf" > /dev/null 2>&1 ||
  fail "systemd-sysusers refuses deploy/mooncake.sysusers.conf"
grep -q '^mooncake:x:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$tmp/root/etc/passwd" ||
  fail "sysusers made no user mooncake"
grep -q '^mooncake:x:' "$tmp/root/etc/group" || fail "sysusers made no group mooncake"

# The example configs parse: the master starts on deploy/master.yaml (ports, snapshot dir
# and key overridden for the test), the daemon gets past its flags.
mkdir "$tmp/snapshots"
"$build/master/mooncake-master" --config "$src/deploy/master.yaml" --rpc_address 127.0.0.1 \
  --rpc_port 0 --metrics_port 0 --snapshot_dir "$tmp/snapshots" --cluster_key_file "" \
  > "$tmp/master.log" 2>&1 &
pid=$!
for _ in $(seq 600); do  # a generous minute: a loaded machine starts it slowly
  grep -q "listening on" "$tmp/master.log" && break
  kill -0 $pid 2> /dev/null || break
  sleep 0.1
done
grep -q "listening on" "$tmp/master.log" || fail "master on deploy/master.yaml: $(cat "$tmp/master.log")"
kill -TERM $pid; wait $pid || fail "master on deploy/master.yaml did not stop cleanly"
grep -q " W master .*is ignored" "$tmp/master.log" && fail "deploy/master.yaml has ignored keys"
timeout 3 "$build/daemon/mooncaked" --config "$src/deploy/mooncaked.yaml" \
  --master 127.0.0.1:1 --socket "$tmp/d.sock" --cluster_key_file "" --metrics_port 0 \
  --global_segment_size 16MB --hostname 127.0.0.1 > "$tmp/daemon.log" 2>&1
rc=$?
[ $rc -ne 2 ] || fail "mooncaked refuses deploy/mooncaked.yaml: $(cat "$tmp/daemon.log")"
echo "PASS"
