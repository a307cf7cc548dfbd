#!/usr/bin/env bash
# Installs the project into a temporary prefix (cmake --install), checks the layout (tools in
# bin/ with nccl-tests' names, the shim in lib/roce-stack/, the collectives library, headers,
# pkg-config file, CMake package), then builds two programs against the installed library, one
# through pkg-config (C API) and one through find_package (C++ API), and runs them over the
# installed shim (two ranks as threads on a net_null device); and CPack's .deb.
#
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build directory}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/roce-install-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
prefix=$work/prefix
cmake --install "$BUILD" --prefix "$prefix" >"$work/install.log" 2>&1 || fail "install: $(tail -5 "$work/install.log")"
lib=$prefix/lib
for f in bin/roce-perf bin/roce-coll-perf bin/all_reduce_perf bin/alltoall_perf \
  lib/roce-stack/libibverbs.so.1 lib/libroce_coll.so.0 include/collectives/communicator.h \
  include/collectives/roce_coll.h lib/pkgconfig/roce_coll.pc lib/cmake/roce_coll/roce_collConfig.cmake; do
  [[ -e $prefix/$f ]] || fail "not installed: $f"
done
[[ -e $prefix/lib/libibverbs.so.1 ]] && fail "the shim must not shadow libibverbs in lib/ itself"

export ROCE_DEVICE="name=inst0; port=net_null0,no-rx=1; ipv4=10.66.0.1/24; mtu=4200"
export LD_LIBRARY_PATH=$lib:$lib/roce-stack
# 1. pkg-config, the C API.
cflags_libs=$(PKG_CONFIG_PATH=$lib/pkgconfig pkg-config --cflags --libs roce_coll) ||
  fail "pkg-config roce_coll"
cc -o "$work/c_consumer" "$here/install/c_consumer.c" $cflags_libs -lpthread || fail "cc"
mkdir "$work/store1"
timeout 60 "$work/c_consumer" "$work/store1" || fail "c_consumer"
# 2. find_package, the C++ API.
cmake -S "$here/install" -B "$work/cpp" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >"$work/cmake.log" 2>&1 ||
  fail "find_package: $(tail -5 "$work/cmake.log")"
ninja -C "$work/cpp" >"$work/ninja.log" 2>&1 || fail "build: $(tail -5 "$work/ninja.log")"
mkdir "$work/store2"
timeout 60 "$work/cpp/cpp_consumer" "$work/store2" || fail "cpp_consumer"
# The installed tool finds the installed shim by itself (RUNPATH $ORIGIN/../lib/roce-stack).
found=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/roce-coll-perf" | sed -n 's/.*libibverbs.so.1 => \([^ ]*\).*/\1/p')
[[ $(realpath "$found") == "$(realpath "$prefix/lib/roce-stack/libibverbs.so.1")" ]] ||
  fail "roce-coll-perf finds libibverbs at '$found', not the installed shim"
# CPack's .deb holds the same layout under /usr.
cpack --config "$BUILD/CPackConfig.cmake" -B "$work/deb" >"$work/cpack.log" 2>&1 || fail "cpack: $(tail -5 "$work/cpack.log")"
deb=$(ls "$work"/deb/roce-stack_*.deb) || fail "no .deb"
contents=$(dpkg-deb -c "$deb")
for f in ./usr/lib/roce-stack/libibverbs.so.1 ./usr/lib/libroce_coll.so.0 ./usr/bin/all_reduce_perf \
  ./usr/lib/pkgconfig/roce_coll.pc ./usr/include/collectives/roce_coll.h; do
  grep -q " $f" <<<"$contents" || fail "not in the .deb: $f"
done
dpkg-deb -f "$deb" Depends | grep -q libibverbs1 || fail "the .deb does not depend on libibverbs1"
echo "PASS: installed; built through pkg-config and find_package; both ran; $(basename "$deb") holds it"
