#!/bin/bash
# `pip install ./bindings/python` installs what the engines import: into a scratch --target,
# against this build tree's library (MOONCAKE_STORE_BUILD_DIR), it must install the
# extension mooncake_store and the package mooncake (__init__.py, store.py) and nothing
# else, and from there alone (another working directory, PYTHONPATH the target only, no
# LD_LIBRARY_PATH) `import mooncake.store` must give every public name of the extension,
# which must load this build's libmooncake_store through its RPATH.
# Usage: pip_install_test.sh SOURCE_DIR BUILD_DIR PYTHON
set -u
src=$1 build=$2 python=$3
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/mc-pip-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# setuptools' own objects live in $TMPDIR (setup.py). ccache, where it is installed, keeps
# a second run short; install-deps.sh does not install it, so a fresh machine compiles
# with the plain compilers (CC/CXX from the environment when set, as CMake would).
# What is checked is the installed layout and the import, not the code generated: no
# debug info (-g0 after Python's own -g) makes each compile much cheaper.
cc=${CC:-gcc} cxx=${CXX:-g++}
if command -v ccache > /dev/null; then cc="ccache $cc" cxx="ccache $cxx"; fi
MOONCAKE_STORE_BUILD_DIR=$build CC="$cc" CXX="$cxx" CFLAGS="${CFLAGS:-} -g0" PIP_NO_INDEX=1 \
  "$python" -m pip install -q --no-build-isolation --no-deps --target "$tmp/site" \
  "$src/bindings/python" > "$tmp/pip.log" 2>&1 || fail "pip install: $(cat "$tmp/pip.log")"

installed=$(cd "$tmp/site" && find . -path ./mooncake_store-*.dist-info -prune -o \
  -name __pycache__ -prune -o -type f -print | sort | tr '\n' ' ')
# The modules of the tensor calls (docs/mooncake-api.md, "Tensors"): installed, then set aside.
for f in _safetensors.py _tensor_codec.py _tensor_io.py _tensor_parallel_read.py \
         _tensor_parallel_write.py _tensor_parallelism.py _tensor_store.py _tensor_tp.py; do
  [ -f "$tmp/site/mooncake/$f" ] || fail "mooncake/$f is not installed"
  installed=${installed/.\/mooncake\/$f /}
done
case "$installed" in
  "./mooncake/__init__.py ./mooncake/store.py ./mooncake_store.cpython-"*".so ") ;;
  *) fail "installed: $installed" ;;
esac

cd "$tmp" && env -u LD_LIBRARY_PATH PYTHONPATH="$tmp/site" PYTHONDONTWRITEBYTECODE=1 "$python" -c '
import os, sys
import mooncake.store, mooncake_store
site = sys.argv[1]
assert mooncake.store.__file__.startswith(site), mooncake.store.__file__
assert mooncake_store.__file__.startswith(site), mooncake_store.__file__
public = sorted(n for n in dir(mooncake_store) if not n.startswith("_"))
assert mooncake.store.__all__ == public, (mooncake.store.__all__, public)
from mooncake.store import MooncakeDistributedStore, ReplicateConfig, ReplicaStatus
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libmooncake_store.so" in l]
want = os.path.realpath(os.path.join(sys.argv[2], "libmc"))
assert libs and all(os.path.realpath(l).startswith(want) for l in libs), libs
' "$tmp/site" "$build" || fail "import from the installed tree"
echo PASS
