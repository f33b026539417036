#!/usr/bin/env bash
# Installs every Debian package the project builds, tests and benchmarks with.
# Idempotent and fast: when everything is already installed it touches no network.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libibverbs-dev librdmacm-dev          # RDMA transport (compiled always, used when a device exists)
  libboost-dev                          # Boost.Interprocess allocators, small_vector
  thrift-compiler libthrift-dev         # master RPC (IDL compiled at build time)
  libssl-dev                            # HMAC-SHA256 of the cluster key (libcrypto)
  libevent-dev                          # Thrift's non-blocking server
  liburing-dev                          # SSD tier I/O
  libzstd-dev libmsgpack-cxx-dev        # snapshots, Unix-socket protocol
  libre2-dev                            # the master's RemoveByRegex (linear-time matching)
  libyaml-cpp-dev                       # --config FILE (YAML or JSON)
  libabsl-dev                           # flat hash tables of the read cache and cache holders
  libcmocka-dev                         # C/C++ unit and ABI tests
  clang libfuzzer-14-dev                # fuzz harnesses (make fuzz; make test runs them briefly)
  pybind11-dev python3-pybind11 python3-pytest python3-numpy python3-dev
  python3-pip python3-venv python3-setuptools python3-wheel   # pip install ./bindings/python
  python3-msgpack python3-aiohttp       # mooncake.structured_object_store's msgpack codec,
                                        # mooncake.mooncake_store_service's REST server
  python3-torch                         # the tensor calls (put_tensor ...) and their tests (CPU)
  openjdk-17-jdk-headless junit4        # Java binding (JNI) and its tests
  etcd-server                           # master HA
  libcurl4-openssl-dev nlohmann-json3-dev   # etcd's JSON gateway (common/etcd/etcd_client.cc)
  libcli11-dev                          # command-line parsing (common/flags, cli/)
  gnuplot-nox                           # benchmark plots
  fio                                   # bench/ssd_bench's raw-disk baseline
  redis-server                          # bench/store_bench's side-by-side Redis (issue 18); its unit
                                        # is the hardening yardstick of deploy_units_test
  prometheus                            # promtool check metrics, and a real scrape in a test
  systemd                               # systemd-analyze verify/security of deploy/*.service
  libsystemd-dev                        # sd_notify: the units are Type=notify (common/service_notify)
  help2man                              # man pages from --help (man/CMakeLists.txt)
  man-db groff-base                     # install_test checks the pages (man -l, lexgrog, groff -ww)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# Rust binding (bindings/rust, rust-version 1.63): any cargo will do, rustup's in ~/.cargo/bin
# or Debian's (cargo 1.65 / rustc 1.63 on Debian 12, rustdoc included). Debian's package only
# when neither is there, so an existing toolchain is never shadowed or duplicated.
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "${HOME:-/root}/.cargo/bin/cargo" ]; then
  missing+=(cargo)
fi

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
