#!/bin/bash
# make install: `cmake --install` of this build under a prefix, into a scratch DESTDIR,
# installs exactly the expected files (the CLI when this build has it), with the units
# naming the binaries under the prefix and nothing naming DESTDIR; a program then compiles
# and links against the INSTALLED tree through pkg-config and through CMake's
# find_package(MooncakeStore), and resolves the installed library.
# Usage: install_test.sh SOURCE_DIR BUILD_DIR HAVE_CLI(0|1)
set -u
src=$1 build=$2 have_cli=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mc-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=/opt/mooncake-test
dest=$tmp/dest
root=$dest$prefix

DESTDIR=$dest cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" 2>&1 ||
  fail "cmake --install: $(cat "$tmp/install.log")"
[ -z "$(find "$dest" -mindepth 1 -maxdepth 1 ! -name opt)" ] || fail "files outside the prefix"

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
  share/doc/mooncake/README.md share/doc/mooncake/operations.md)
[ "$have_cli" = 1 ] && expected+=(bin/mooncake-cli)
for f in "${expected[@]}"; do
  [ -e "$root/$f" ] || fail "not installed: $f"
done
for f in mooncake-master mooncaked; do [ -x "$root/bin/$f" ] || fail "$f is not executable"; done
[ "$(readlink "$root/bin/mooncake_master")" = mooncake-master ] ||
  fail "bin/mooncake_master is not a link to mooncake-master"
[ "$(readlink "$root/lib/libmooncake_store.so")" = libmooncake_store.so.1 ] ||
  fail "the .so link does not name the soname"
# Nothing else in bin (the CLI only with its target).
extra=$(ls "$root/bin" | grep -vxE 'mooncake-master|mooncaked|mooncake_master|mooncake-cli')
[ -z "$extra" ] || fail "unexpected in bin: $extra"
[ "$have_cli" = 1 ] || [ ! -e "$root/bin/mooncake-cli" ] || fail "mooncake-cli without its target"
"$root/bin/mooncake_master" --version | grep -q '^mooncake-master [0-9]' ||
  fail "the installed master does not run"

for unit in mooncake-master mooncaked; do
  grep -q "^ExecStart=$prefix/bin/$unit " "$root/lib/systemd/system/$unit.service" ||
    fail "$unit.service does not start $prefix/bin/$unit"
done
if grep -rlI -- "$dest" "$root" > "$tmp/leaks"; then fail "DESTDIR named in: $(cat "$tmp/leaks")"; fi

# pkg-config, from the installed tree only.
cc=${CC:-cc}
export PKG_CONFIG_PATH=$root/lib/pkgconfig PKG_CONFIG_LIBDIR=$root/lib/pkgconfig
flags=$(pkg-config --cflags --libs mooncake_store) || fail "pkg-config knows no mooncake_store"
[ "$(realpath "$(pkg-config --variable=includedir mooncake_store)")" = "$root/include" ] &&
  [ "$(realpath "$(pkg-config --variable=libdir mooncake_store)")" = "$root/lib" ] ||
  fail "pkg-config does not point into the installed tree: $flags"
mkdir "$tmp/empty"
# -I of an empty dir first: the source tree's include/ must not be what is found.
$cc -I"$tmp/empty" "$src/examples/kvcache_demo.c" $flags -Wl,-rpath,"$root/lib" \
  -o "$tmp/demo_pkgconfig" 2> "$tmp/cc.log" || fail "compile with pkg-config: $(cat "$tmp/cc.log")"
ldd "$tmp/demo_pkgconfig" | grep -q "libmooncake_store.so.1 => $root/lib/libmooncake_store.so.1" ||
  fail "the demo does not load the installed library: $(ldd "$tmp/demo_pkgconfig")"

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
ldd "$tmp/consumer/build/demo" | grep -q "=> $root/lib/libmooncake_store.so.1" ||
  fail "the CMake demo does not load the installed library"
echo PASS
