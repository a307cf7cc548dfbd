#!/usr/bin/env bash
# Installs every build and test dependency from Debian 12 packages. Idempotent:
# packages already present are skipped, and apt-get runs only when something is missing.
#   scripts/install-deps.sh            build + test dependencies (with the qemu/rxe guest tooling)
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev googletest libbenchmark-dev libcli11-dev
  zlib1g-dev libisal-dev libpcap-dev
  dpdk dpdk-dev libdpdk-dev
  libibverbs-dev ibverbs-utils rdma-core python3-pyverbs
  clang clang-format libclang-rt-14-dev llvm
  tshark python3 python3-scapy gnuplot-nox perftest
  iproute2 iputils-ping procps valgrind qemu-system-x86 busybox-static cpio kmod
  iperf3 sockperf
  libbsd-dev libnuma-dev librdmacm1
  libgloo-dev openvswitch-switch-dpdk libbpf-dev bsdextrautils
  ucx-utils openmpi-bin libopenmpi-dev
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || {
    echo "install-deps: run as root (or install sudo) to install ${missing[*]}" >&2
    exit 1
  }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer once, non-interactively.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
