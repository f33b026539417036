#!/bin/bash
# make install: `cmake --install` of this build under a non-system prefix, into a scratch
# DESTDIR, installs exactly the expected files (the CLI and the Java binding when this build
# has them, the man pages unless configured off), with the units naming the binaries under
# the prefix and nothing naming DESTDIR. Then, from the INSTALLED tree only and with no
# LD_LIBRARY_PATH anywhere:
#   - every installed program and module resolves every library it needs, ours from the
#     prefix's lib through a RUNPATH relative to itself ($ORIGIN);
#   - the installed master and daemon start and serve; the installed CLI puts and gets;
#   - a program built with pkg-config, and one built with CMake's find_package, run against
#     them (kvcache_demo connects and round-trips its blocks; the .pc's rpath is what finds
#     the library);
#   - `import mooncake.store` from the installed site directory loads the installed library
#     and puts and gets;
#   - the man pages render without a groff warning, lexgrog finds their NAME line, and each
#     names every flag its program's --help declares (the CLI's commands' too).
# Usage: install_test.sh SOURCE_DIR BUILD_DIR HAVE_CLI HAVE_JAVA MAN_PAGES PYTHON PYTHON_DIR
#   HAVE_CLI, HAVE_JAVA, MAN_PAGES: 0|1; PYTHON_DIR: the module's directory under the prefix.
set -u
src=$1 build=$2 have_cli=$3 have_java=$4 man_pages=$5 python=$6 python_dir=$7
fail() { echo "FAIL: $*" >&2; exit 1; }
unset LD_LIBRARY_PATH
tmp=$(mktemp -d /tmp/mc-install-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
prefix=/opt/mooncake-test
dest=$tmp/dest
root=$dest$prefix
# The pools of the clients below stay on ordinary pages: no huge pages need be reserved.
export MOONCAKE_STORE_HUGE_PAGES=0

DESTDIR=$dest cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
  fail "cmake --install: $(cat "$tmp/install.log")"
[ -z "$(find "$dest" -mindepth 1 -maxdepth 1 ! -name opt)" ] || fail "files outside the prefix"

programs=(mooncake-master mooncaked)
[ "$have_cli" = 1 ] && programs+=(mooncake-cli)
expected=(bin/mooncake-master bin/mooncaked bin/mooncake_master
  include/mooncake_store.h
  lib/libmooncake_store.so lib/libmooncake_store.so.1 lib/libmooncake_store.so.1.0.0
  lib/pkgconfig/mooncake_store.pc
  lib/cmake/MooncakeStore/MooncakeStoreConfig.cmake
  lib/cmake/MooncakeStore/MooncakeStoreConfigVersion.cmake
  lib/cmake/MooncakeStore/MooncakeStoreTargets.cmake
  lib/systemd/system/mooncake-master.service lib/systemd/system/mooncaked.service
  lib/sysusers.d/mooncake.conf
  share/doc/mooncake/examples/master.yaml share/doc/mooncake/examples/mooncaked.yaml
  share/doc/mooncake/examples/prometheus-rules.yml
  share/doc/mooncake/README.md share/doc/mooncake/operations.md
  "$python_dir/mooncake/__init__.py" "$python_dir/mooncake/store.py"
  bin/mooncake_client)
# Mooncake's package layout: every module of the package's source, and where the commands
# find the programs.
for f in $(cd "$src/bindings/python" && find mooncake -name '*.py') mooncake/_install_paths.py; do
  expected+=("$python_dir/$f")
done
[ "$have_cli" = 1 ] && expected+=(bin/mooncake-cli)
[ "$have_java" = 1 ] && expected+=(share/java/mooncake-store.jar lib/jni/libmooncake_store_jni.so)
# The modules of the tensor calls (docs/mooncake-api.md, "Tensors").
for f in _safetensors _tensor_codec _tensor_io _tensor_parallel_read _tensor_parallel_write \
         _tensor_parallelism _tensor_store _tensor_tp; do
  expected+=("$python_dir/mooncake/$f.py")
done
if [ "$man_pages" = 1 ]; then
  for p in "${programs[@]}" mooncake_master; do expected+=("share/man/man1/$p.1"); done
fi
for f in "${expected[@]}"; do
  [ -e "$root/$f" ] || fail "not installed: $f"
done
module=$(ls "$root/$python_dir"/mooncake_store.cpython-*.so 2> /dev/null)
[ -n "$module" ] || fail "the Python module is not installed in $python_dir"
fast_copy=$(ls "$root/$python_dir"/mooncake/_fast_copy.cpython-*.so 2> /dev/null)
[ -n "$fast_copy" ] || fail "mooncake._fast_copy is not installed in $python_dir/mooncake"
for f in mooncake-master mooncaked; do [ -x "$root/bin/$f" ] || fail "$f is not executable"; done
[ "$(readlink "$root/bin/mooncake_master")" = mooncake-master ] ||
  fail "bin/mooncake_master is not a link to mooncake-master"
[ "$(readlink "$root/lib/libmooncake_store.so")" = libmooncake_store.so.1 ] ||
  fail "the .so link does not name the soname"
# Nothing else in bin (the CLI only with its target).
extra=$(ls "$root/bin" | grep -vxE 'mooncake-master|mooncaked|mooncake_master|mooncake_client|mooncake-cli')
[ -z "$extra" ] || fail "unexpected in bin: $extra"
[ "$have_cli" = 1 ] || [ ! -e "$root/bin/mooncake-cli" ] || fail "mooncake-cli without its target"

for unit in mooncake-master mooncaked; do
  file=$root/lib/systemd/system/$unit.service
  grep -q "^ExecStart=$prefix/bin/$unit " "$file" || fail "$unit.service does not start $prefix/bin/$unit"
  grep -q "^ExecPaths=$prefix/bin/$unit " "$file" || fail "$unit.service's ExecPaths misses $prefix/bin/$unit"
done
if grep -rlI -- "$dest" "$root" > "$tmp/leaks"; then fail "DESTDIR named in: $(cat "$tmp/leaks")"; fi

# RUNPATH: relative to each file, so that the prefix may be anything; every library found.
runpath() { readelf -d "$1" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]$/\1/p'; }
# Every library FILE needs resolves, and libmooncake_store.so.1 (when it needs it: with
# "needs", it must) to the installed one.
check_libraries() {  # FILE [needs]
  ldd "$1" > "$tmp/ldd" 2>&1 || fail "ldd $1: $(cat "$tmp/ldd")"
  ! grep -q "not found" "$tmp/ldd" || fail "$1 misses a library: $(cat "$tmp/ldd")"
  local found
  found=$(sed -n 's/.*libmooncake_store.so.1 => \([^ ]*\) .*/\1/p' "$tmp/ldd")
  [ -n "$found" ] || [ "${2:-}" != needs ] || fail "$1 does not link libmooncake_store"
  [ -z "$found" ] || [ "$(realpath "$found")" = "$root/lib/libmooncake_store.so.1.0.0" ] ||
    fail "$1 does not load the installed library: $(cat "$tmp/ldd")"
}
check_runpath() {  # FILE EXPECTED-RUNPATH
  [ "$(runpath "$1")" = "$2" ] || fail "$1: RUNPATH is '$(runpath "$1")', not '$2'"
  check_libraries "$1"
}
# The master and the daemon link no library of ours: they need no RUNPATH.
for p in mooncake-master mooncaked; do check_libraries "$root/bin/$p"; done
[ "$have_cli" = 1 ] && check_runpath "$root/bin/mooncake-cli" '$ORIGIN/../lib' &&
  check_libraries "$root/bin/mooncake-cli" needs
check_runpath "$module" "\$ORIGIN/$(realpath -m --relative-to="/$python_dir" /lib)"
check_libraries "$fast_copy"
[ "$have_java" = 1 ] && check_runpath "$root/lib/jni/libmooncake_store_jni.so" '$ORIGIN/..'

# Each installed program runs, and says its version.
for p in "${programs[@]}" mooncake_master; do
  out=$("$root/bin/$p" --version 2>&1)
  rc=$?
  case "$out" in *"error while loading shared libraries"*) fail "$p: $out" ;; esac
  if [ $rc -ne 0 ] || ! [[ "$out" =~ ^(mooncake-master|mooncaked|mooncake-cli)\ [0-9] ]]; then
    fail "the installed $p does not run: $out"
  fi
done

# The installed master and daemon serve; the installed CLI puts and gets through them.
"$root/bin/mooncake-master" --rpc_address 127.0.0.1 --rpc_port 0 --metrics_port -1 \
  --cluster_key_file "" > "$tmp/master.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  grep -q "listening on" "$tmp/master.log" && break
  kill -0 "${pids[0]}" 2> /dev/null || break
  sleep 0.1
done
master=$(sed -n 's/.*mooncake-master listening on \([0-9.]*:[0-9]*\).*/\1/p' "$tmp/master.log")
[ -n "$master" ] || fail "the installed master does not serve: $(cat "$tmp/master.log")"
socket=$tmp/mooncaked.sock
"$root/bin/mooncaked" --master "$master" --socket "$socket" --hostname 127.0.0.1 \
  --global_segment_size 64MB --metrics_port -1 --cluster_key_file "" > "$tmp/daemon.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  grep -q "mooncaked .* serving" "$tmp/daemon.log" && break
  kill -0 "${pids[1]}" 2> /dev/null || break
  sleep 0.1
done
grep -q "mooncaked .* serving" "$tmp/daemon.log" ||
  fail "the installed daemon does not serve: $(cat "$tmp/daemon.log")"
export MOONCAKE_SOCKET=$socket
if [ "$have_cli" = 1 ]; then
  echo "installed" > "$tmp/value"
  "$root/bin/mooncake-cli" --socket "$socket" put install/cli -f "$tmp/value" > "$tmp/cli.log" 2>&1 &&
    "$root/bin/mooncake-cli" --socket "$socket" get install/cli "$tmp/got" >> "$tmp/cli.log" 2>&1 &&
    cmp -s "$tmp/value" "$tmp/got" || fail "the installed CLI: $(cat "$tmp/cli.log")"
fi

# pkg-config, from the installed tree only: no -rpath of ours, the .pc's finds the library.
cc=${CC:-cc}
export PKG_CONFIG_PATH=$root/lib/pkgconfig PKG_CONFIG_LIBDIR=$root/lib/pkgconfig
flags=$(pkg-config --cflags --libs mooncake_store) || fail "pkg-config knows no mooncake_store"
[ "$(realpath "$(pkg-config --variable=includedir mooncake_store)")" = "$root/include" ] &&
  [ "$(realpath "$(pkg-config --variable=libdir mooncake_store)")" = "$root/lib" ] ||
  fail "pkg-config does not point into the installed tree: $flags"
mkdir "$tmp/empty"
# -I of an empty dir first: the source tree's include/ must not be what is found.
$cc -I"$tmp/empty" "$src/examples/kvcache_demo.c" $flags -o "$tmp/demo_pkgconfig" \
  2> "$tmp/cc.log" || fail "compile with pkg-config: $(cat "$tmp/cc.log")"
check_libraries "$tmp/demo_pkgconfig" needs
"$tmp/demo_pkgconfig" > "$tmp/demo.log" 2>&1 || fail "the pkg-config demo: $(cat "$tmp/demo.log")"

# CMake's find_package, from the installed tree only.
mkdir "$tmp/consumer"
cat > "$tmp/consumer/CMakeLists.txt" << CMAKE
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(MooncakeStore 0.1 REQUIRED)
add_executable(demo "$src/examples/kvcache_demo.c")
target_link_libraries(demo PRIVATE MooncakeStore::mooncake_store)
CMAKE
cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$root" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF > "$tmp/cmake.log" 2>&1 &&
  cmake --build "$tmp/consumer/build" >> "$tmp/cmake.log" 2>&1 ||
  fail "find_package(MooncakeStore): $(cat "$tmp/cmake.log")"
grep -q "MooncakeStore_DIR:PATH=$root/lib/cmake/MooncakeStore" "$tmp/consumer/build/CMakeCache.txt" ||
  fail "find_package found another MooncakeStore"
check_libraries "$tmp/consumer/build/demo" needs
"$tmp/consumer/build/demo" > "$tmp/demo.log" 2>&1 || fail "the CMake demo: $(cat "$tmp/demo.log")"

# Python, from the installed site directory alone (another working directory).
(cd "$tmp" && PYTHONPATH="$root/$python_dir" PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import os, sys
import mooncake.store, mooncake_store
site, lib = sys.argv[1], sys.argv[2]
assert mooncake.store.__file__.startswith(site), mooncake.store.__file__
assert mooncake_store.__file__.startswith(site), mooncake_store.__file__
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libmooncake_store.so" in l]
assert libs and all(os.path.realpath(l).startswith(lib) for l in libs), libs
store = mooncake.store.MooncakeDistributedStore()
assert store.connect() == 0
assert store.put("install/python", b"installed") == 0
assert store.get("install/python") == b"installed"
store.close()
# Mooncake modules import, and the commands find the installed programs (not those of PATH).
import mooncake, mooncake.mooncake_config, mooncake.async_store, mooncake.engine
import mooncake.dataproto_catalog, mooncake.mooncake_store_service, mooncake._fast_copy
import mooncake.structured_object_store
from mooncake._programs import find_program
assert mooncake.BufferPool is mooncake_store.BufferPool
for p in ("mooncake-master", "mooncaked"):
    assert find_program(p) == os.path.join(os.path.dirname(lib), "bin", p), find_program(p)
' "$root/$python_dir" "$root/lib") > "$tmp/python.log" 2>&1 ||
  fail "the installed Python module: $(cat "$tmp/python.log")"
# The installed mooncake_client finds its package relative to itself (no PYTHONPATH).
(cd "$tmp" && env -u PYTHONPATH "$root/bin/mooncake_client" --help) > "$tmp/client.log" 2>&1 &&
  grep -q "mooncaked" "$tmp/client.log" || fail "the installed mooncake_client: $(cat "$tmp/client.log")"

# The daemon first: it unmounts at the master as it stops.
for pid in "${pids[1]}" "${pids[0]}"; do
  kill -TERM "$pid"
  wait "$pid" || fail "an installed program exited with status $? at SIGTERM"
done
pids=()

[ "$man_pages" = 1 ] || { echo PASS; exit 0; }
# Man pages: clean roff, a NAME line, and every flag --help declares.
[ "$(readlink "$root/share/man/man1/mooncake_master.1")" = mooncake-master.1 ] ||
  fail "share/man/man1/mooncake_master.1 is not a link to mooncake-master.1"
for p in "${programs[@]}"; do
  page=$root/share/man/man1/$p.1
  warnings=$(groff -man -Tascii -ww -z "$page" 2>&1)
  [ -z "$warnings" ] || fail "$p.1: groff warns: $warnings"
  MANWIDTH=80 man -l "$page" > /dev/null 2> "$tmp/man.err" || fail "man -l $p.1: $(cat "$tmp/man.err")"
  lexgrog "$page" | grep -q "\"$p - ." || fail "$p.1: lexgrog finds no NAME line: $(lexgrog "$page")"
  # One line per paragraph, no hyphenation: a flag name is never broken.
  groff -man -Tascii -P-cbou -rLL=2000n -rHY=0 "$page" 2> /dev/null > "$tmp/page.txt"
  "$root/bin/$p" --help > "$tmp/help.txt" 2>&1
  if [ "$p" = mooncake-cli ]; then
    for c in $(awk '/^(Sub)?[Cc]ommands:$/ { on = 1; next } on && /^$/ { on = 0 }
                    on && /^ +[a-z]/ { print $1 }' "$tmp/help.txt"); do
      "$root/bin/$p" "$c" --help >> "$tmp/help.txt" 2>&1
    done
  fi
  flags=$(grep -oE -- '--[a-z][a-z0-9_-]*' "$tmp/help.txt" | sort -u)
  [ "$(echo "$flags" | wc -l)" -ge 3 ] || fail "$p --help declares no flags?"
  for flag in $flags; do
    grep -qF -- "$flag" "$tmp/page.txt" || fail "$p.1 does not name $flag"
  done
done
echo PASS
