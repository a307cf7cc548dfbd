# shellcheck shell=bash
# The rxe interop harness (sourced by tests/interop/*.sh): a network namespace of the test's
# own holding a bridge, the tap of a qemu (TCG) guest running Linux soft-RoCE, and a veth whose
# other end a stack instance drives (DPDK net_af_packet); the guest's agent runs the guest's
# side of each case; a capture of the stack's veth; teardown of everything on every exit.
#
#   RXE_NAME=name; source scripts/rxe/lib.sh
#   rxe_require                        skip (exit 77, with the reason) without root, qemu or tun
#   rxe_up [GUEST_MTU]                 image (cached), namespace, guest booted and ready
#   rxe_guest T CMD / rxe_guest_bg N T CMD   run CMD in the guest (sync / background)
#   rxe_host T CMD...                  run CMD in the namespace, bounded by T seconds
#   rxe_capture_start FILE / rxe_capture_stop
#
# Inside namespace $RXE_NS:
#   br0 10.79.0.1/24 (the kernel: TCP for the tools' out-of-band exchanges)
#   ├── tap0  → guest eth0 10.79.0.2/24, MAC 52:54:00:79:00:02, rxe0 on it (GID 0 link-local,
#   │           GID 1 ::ffff:10.79.0.2)
#   └── v0 ══ s0 → the stack (ROCE_DEVICE = $(rxe_device)): 10.79.0.100, MAC 02:00:00:79:00:64,
#               addresses no kernel owns, so the stack answers ARP and ND itself
# Outputs (serial log, captures, each side's output) go to $RXE_OUT (default: a temporary
# directory, kept when the test fails).

set -euo pipefail

RXE_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RXE_REPO=$(cd "$RXE_LIB_DIR/../.." && pwd)
RXE_PY=/usr/bin/python3
RXE_NAME=${RXE_NAME:-rxe}
RXE_NS="rxi-${RXE_NAME}-$$"
RXE_CACHE=${RXE_CACHE:-$RXE_REPO/build/rxe-guest}
RXE_OUT=${RXE_OUT:-$(mktemp -d "/tmp/rxe-${RXE_NAME}.XXXXXX")}
mkdir -p "$RXE_OUT"
RXE_HOST_IP=10.79.0.1
RXE_GUEST_IP=10.79.0.2
RXE_GUEST_MAC=52:54:00:79:00:02
RXE_STACK_IP4=10.79.0.100
RXE_STACK_MAC=02:00:00:79:00:64
RXE_AGENT_PORT=7000
RXE_PIDS=()
RXE_QEMU_PID=
RXE_CAP_PID=
RXE_T0=$(date +%s%N)
RXE_FAILS=0

rxe_log() {
  local ds=$((($(date +%s%N) - RXE_T0) / 100000000))
  printf '[%s %4d.%ds] %s\n' "$RXE_NAME" $((ds / 10)) $((ds % 10)) "$*"
}
rxe_skip() {
  echo "SKIP: $*"
  exit 77
}
rxe_die() {
  echo "FAIL: $*"
  exit 1
}
in_ns() { ip netns exec "$RXE_NS" "$@"; }

rxe_teardown() {
  local rc=$?
  set +e
  trap - EXIT
  [[ -n $RXE_CAP_PID ]] && rxe_capture_stop
  for p in "${RXE_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  if [[ -n $RXE_QEMU_PID ]]; then
    kill "$RXE_QEMU_PID" 2>/dev/null
    wait "$RXE_QEMU_PID" 2>/dev/null
  fi
  for p in "${RXE_PIDS[@]}"; do wait "$p" 2>/dev/null; done
  if ip netns list 2>/dev/null | grep -q "^$RXE_NS\b"; then
    local pids
    pids=$(ip netns pids "$RXE_NS" 2>/dev/null)
    if [[ -n $pids ]]; then
      kill $pids 2>/dev/null
      sleep 0.5
      kill -9 $(ip netns pids "$RXE_NS" 2>/dev/null) 2>/dev/null
    fi
    ip netns del "$RXE_NS"
  fi
  if [[ $rc -ne 0 && $rc -ne 77 ]]; then
    echo "--- outputs kept in $RXE_OUT ---"
    [[ -f $RXE_OUT/serial.log ]] && { echo "== serial.log (tail)"; tail -n 30 "$RXE_OUT/serial.log"; }
  elif [[ -z ${RXE_KEEP:-} && $RXE_OUT == /tmp/rxe-* ]]; then
    rm -rf "$RXE_OUT"
  fi
  exit "$rc"
}
trap rxe_teardown EXIT
trap 'exit 130' INT TERM

rxe_require() {
  [[ $(id -u) -eq 0 ]] || rxe_skip "needs root (network namespaces, tap)"
  command -v qemu-system-x86_64 >/dev/null ||
    rxe_skip "qemu-system-x86_64 is absent (scripts/install-deps.sh installs it)"
  [[ -c /dev/net/tun ]] || rxe_skip "/dev/net/tun is absent: qemu cannot have a tap"
  command -v ip >/dev/null || rxe_skip "needs iproute2"
  # Namespaces left by a test that was killed (SIGKILL skips the trap): their PID is gone.
  local n
  for n in $(ip netns list 2>/dev/null | awk '$1 ~ /^rxi-/ {print $1}'); do
    kill -0 "${n##*-}" 2>/dev/null && continue
    kill -9 $(ip netns pids "$n" 2>/dev/null) 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  ip netns add "$RXE_NS" 2>/dev/null || rxe_skip "cannot create network namespaces here"
}

# The stack's device string (ROCE_DEVICE / --device), plus extra "key=value; ..." settings.
rxe_device() {
  local s="name=roce0; port=net_af_packet0,iface=s0,blocksz=8192,framesz=8192,framecnt=512"
  s+="; mtu=4200; ipv4=${RXE_STACK_IP4}/24; mac=${RXE_STACK_MAC}"
  [[ -n ${1:-} ]] && s+="; $1"
  echo "$s"
}

rxe_ns_up() {
  ip netns list | grep -q "^$RXE_NS\b" || ip netns add "$RXE_NS"
  in_ns ip link set lo up
  in_ns ip link add br0 type bridge
  in_ns sysctl -qw net.ipv6.conf.br0.accept_dad=0
  in_ns ip tuntap add tap0 mode tap
  in_ns ip link add v0 type veth peer name s0
  in_ns sysctl -qw net.ipv6.conf.s0.disable_ipv6=1
  local l
  for l in tap0 v0; do in_ns ip link set "$l" mtu 9000 master br0 up; done
  in_ns ip link set s0 mtu 9000 up
  in_ns ip link set br0 mtu 9000 up
  in_ns ip addr add "$RXE_HOST_IP/24" dev br0
}

# rxe_up [GUEST_MTU]: image, namespace, guest; the guest's eth0 gets GUEST_MTU (default 9000:
# rxe's active MTU is then 4096; path MTU 1024 is chosen per case with the tools' flags).
rxe_up() {
  local mtu=${1:-9000}
  local t0=$SECONDS
  RXE_IMAGE=$("$RXE_LIB_DIR/build-image.sh" "$RXE_CACHE" 2>"$RXE_OUT/build-image.err") || {
    cat "$RXE_OUT/build-image.err"
    rxe_die "building the guest image failed"
  }
  rxe_ns_up
  rxe_log "image $RXE_IMAGE ($(cat "$RXE_IMAGE/abi")); booting the guest"
  # Programs of ours for the guest (RXE_EXTRA_BINS: paths) go to /usr/local/bin in an archive
  # appended to the initramfs (the kernel unpacks concatenated archives in order).
  local initrd=$RXE_IMAGE/initrd.img
  if [[ -n ${RXE_EXTRA_BINS:-} ]]; then
    rm -rf "$RXE_OUT/extra"
    mkdir -p "$RXE_OUT/extra/usr/local/bin"
    cp $RXE_EXTRA_BINS "$RXE_OUT/extra/usr/local/bin/"
    (cd "$RXE_OUT/extra" && find . | cpio -o -H newc --quiet --owner=0:0 | gzip -1) >"$RXE_OUT/extra.cpio.gz"
    cat "$initrd" "$RXE_OUT/extra.cpio.gz" >"$RXE_OUT/initrd.img"
    initrd=$RXE_OUT/initrd.img
  fi
  : >"$RXE_OUT/serial.log"
  in_ns qemu-system-x86_64 -accel tcg -cpu max -m 768M -smp 1 -display none -no-reboot \
    -kernel "$RXE_IMAGE/vmlinuz" -initrd "$initrd" \
    -append "console=ttyS0 panic=-1 quiet loglevel=4 rxe_ip4=$RXE_GUEST_IP/24 rxe_mtu=$mtu rxe_agent=$RXE_AGENT_PORT" \
    -netdev tap,id=n0,ifname=tap0,script=no,downscript=no \
    -device virtio-net-pci,netdev=n0,mac=$RXE_GUEST_MAC \
    -serial "file:$RXE_OUT/serial.log" -monitor none </dev/null >"$RXE_OUT/qemu.out" 2>&1 &
  RXE_QEMU_PID=$!
  local i
  for ((i = 0; i < 1200; i++)); do
    grep -q "RXE-GUEST-READY" "$RXE_OUT/serial.log" && break
    grep -q "RXE-GUEST-FAILED\|Kernel panic" "$RXE_OUT/serial.log" &&
      rxe_die "guest boot failed: $(grep -m1 "RXE-GUEST-FAILED\|Kernel panic" "$RXE_OUT/serial.log")"
    kill -0 "$RXE_QEMU_PID" 2>/dev/null || rxe_die "qemu exited: $(cat "$RXE_OUT/qemu.out")"
    sleep 0.1
  done
  grep -q "RXE-GUEST-READY" "$RXE_OUT/serial.log" || rxe_die "guest not ready after 120 s"
  RXE_GUEST_GID0=$(sed -n 's/^RXE-GID\[0\] \([^ \r]*\).*/\1/p' "$RXE_OUT/serial.log")
  rxe_log "guest ready after $((SECONDS - t0)) s: rxe0 GID0 $RXE_GUEST_GID0, $(grep -m1 '^RXE-PORT' "$RXE_OUT/serial.log" | tr -d '\r')"
}

# rxe_guest SECONDS CMD: runs CMD in the guest; its output on stdout; its status.
rxe_guest() {
  local t=$1
  shift
  in_ns "$RXE_PY" "$RXE_LIB_DIR/guest.py" --timeout "$t" "$RXE_GUEST_IP" "$RXE_AGENT_PORT" "$*"
}
# rxe_guest_bg FILE SECONDS CMD: the same in the background, output to FILE; sets RXE_BG.
rxe_guest_bg() {
  local f=$1 t=$2
  shift 2
  rxe_guest "$t" "$@" >"$f" 2>&1 &
  RXE_BG=$!
  RXE_PIDS+=("$RXE_BG")
}
# rxe_host SECONDS CMD...: CMD in the namespace (the stack's side), killed after SECONDS.
rxe_host() {
  local t=$1
  shift
  timeout -k 5 "$t" ip netns exec "$RXE_NS" "$@"
}
rxe_host_bg() {
  local f=$1 t=$2
  shift 2
  rxe_host "$t" "$@" >"$f" 2>&1 &
  RXE_BG=$!
  RXE_PIDS+=("$RXE_BG")
}

# rxe_wait_file FILE PATTERN SECONDS PID: until FILE matches PATTERN (1 if PID ends first).
rxe_wait_file() {
  local f=$1 pat=$2 t=$3 pid=$4 i
  for ((i = 0; i < t * 20; i++)); do
    grep -q -- "$pat" "$f" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { grep -q -- "$pat" "$f" 2>/dev/null; return; }
    sleep 0.05
  done
  return 1
}
# rxe_wait_listen PORT SECONDS PID: until a process in the namespace listens on TCP PORT.
rxe_wait_listen() {
  local port=$1 t=$2 pid=$3 i
  for ((i = 0; i < t * 20; i++)); do
    in_ns ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# A capture of every RoCE frame on v0 (the stack's link), independent of the stack.
# rxe_capture_start FILE [FILTER]: FILTER defaults to RoCEv2 only; "" captures everything.
rxe_capture_start() {
  RXE_CAP_FILE=$1
  local filter=("-f" "${2-udp port 4791}")
  [[ -n ${filter[1]} ]] || filter=()
  ip netns exec "$RXE_NS" dumpcap -q -i v0 -P "${filter[@]}" -w "$RXE_CAP_FILE" \
    >"$RXE_OUT/dumpcap.out" 2>&1 &
  RXE_CAP_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    [[ -s $RXE_CAP_FILE ]] && return 0
    sleep 0.05
  done
  rxe_die "dumpcap did not start: $(cat "$RXE_OUT/dumpcap.out")"
}
rxe_capture_stop() {
  [[ -n $RXE_CAP_PID ]] || return 0
  sleep 0.2 # frames still in flight
  # SIGTERM: dumpcap finishes the file. (SIGINT is ignored by background jobs of a script.)
  kill -TERM "$RXE_CAP_PID" 2>/dev/null
  local i
  for ((i = 0; i < 100; i++)); do kill -0 "$RXE_CAP_PID" 2>/dev/null || break; sleep 0.05; done
  kill -KILL "$RXE_CAP_PID" 2>/dev/null || true
  wait "$RXE_CAP_PID" 2>/dev/null || true
  RXE_CAP_PID=
}
# rxe_icrc FILE: scripts/icrc_check.py on a capture; its summary line on stdout.
rxe_icrc() {
  local out
  out=$("$RXE_PY" "$RXE_REPO/scripts/icrc_check.py" "$1" 2>&1) || {
    echo "$out" | tail -n 5
    return 1
  }
  head -n 1 <<<"$out"
}

# Results: one TSV line per case (op, gid, direction, mtu, size, result, command) in
# $RXE_RESULTS/$RXE_NAME.tsv (docs/interop.md's table is made from them).
RXE_RESULTS=${RXE_RESULTS:-$RXE_OUT}
mkdir -p "$RXE_RESULTS"
: >"$RXE_RESULTS/$RXE_NAME.tsv"
rxe_result() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RXE_RESULTS/$RXE_NAME.tsv"
  [[ $6 == PASS ]] || RXE_FAILS=$((RXE_FAILS + 1))
}

# rxe_ll6 MAC: the IPv6 link-local address made from MAC (EUI-64), as rxe's GID 0.
rxe_ll6() {
  local IFS=:
  # shellcheck disable=SC2206
  local b=($1)
  printf 'fe80::%x:%x:%x:%x\n' $(((0x${b[0]} ^ 2) << 8 | 0x${b[1]})) $((0x${b[2]} << 8 | 0xff)) \
    $((0xfe << 8 | 0x${b[3]})) $((0x${b[4]} << 8 | 0x${b[5]}))
}
