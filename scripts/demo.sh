#!/usr/bin/env bash
# The stack in one command, on a fresh Debian 12 machine: installs what is missing, builds
# roce-perf and roce-coll-perf, creates two network namespaces joined by a veth pair, runs a
# userspace RoCEv2 stack instance in each (DPDK net_af_packet on the veth), and runs perftest's
# write_bw and send_lat between them with roce-perf; then four instances on a bridge run the
# collectives' AllReduce and AlltoAll (roce-coll-perf through scripts/coll-run.sh), printing
# nccl-tests' tables; removes everything on the way out.
#
#   scripts/demo.sh [--build-dir DIR] [--skip-build] [--vdev af_packet|pcap]
#
# Needs root for the namespaces (sudo is used when run as another user). About 40 s after the
# build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

build_dir=$root/build
skip_build=0
vdev=af_packet
while (($#)); do
  case $1 in
    --build-dir) build_dir=${2:?--build-dir DIR}; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --vdev) vdev=${2:?--vdev af_packet|pcap}; shift 2 ;;
    -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "demo: unknown argument '$1' (--build-dir DIR, --skip-build, --vdev af_packet|pcap)" >&2; exit 2 ;;
  esac
done
[[ $vdev == af_packet || $vdev == pcap ]] || { echo "demo: --vdev is af_packet or pcap" >&2; exit 2; }

SUDO=
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "demo: needs root (network namespaces), or sudo" >&2; exit 2; }
  SUDO=sudo
fi
step() { printf '\n=== %s ===\n' "$*"; }

if ((skip_build == 0)); then
  step "dependencies"
  "$root/scripts/install-deps.sh"
  step "build roce-perf and roce-coll-perf ($build_dir, RelWithDebInfo)"
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "$build_dir" roce-perf roce-coll-perf
fi
perf=$build_dir/apps/roce-perf
coll_perf=$build_dir/apps/roce-coll-perf
for t in "$perf" "$coll_perf"; do
  [[ -x $t ]] || { echo "demo: no $t (build it, or drop --skip-build)" >&2; exit 1; }
done

export ROCE_TB_PREFIX=${ROCE_DEMO_PREFIX:-roce-demo-}
# One demo per prefix at a time: a second would tear down the first's namespaces on its way up.
# The lock goes with the process, so a demo that was killed never blocks the next one.
lock=${TMPDIR:-/tmp}/roce-demo.${ROCE_TB_PREFIX//\//_}lock
# Opened for reading: a lock file another user made in /tmp cannot be opened to write
# (fs.protected_regular), and flock needs no more.
[[ -e $lock ]] || : >>"$lock" 2>/dev/null || true
exec 9<"$lock"
flock -n 9 || {
  echo "demo: another demo is running with namespaces ${ROCE_TB_PREFIX}1 and ${ROCE_TB_PREFIX}2;" \
    "wait for it, or give this one its own prefix with ROCE_DEMO_PREFIX" >&2
  exit 2
}
logs=$(mktemp -d /tmp/roce-demo.XXXXXX)
server_pid=
cleanup() {
  local rc=$?
  set +e
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  $SUDO env ROCE_TB_PREFIX="$ROCE_TB_PREFIX" "$root/scripts/testbed.sh" down >/dev/null 2>&1
  rm -rf "$logs"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "testbed: two namespaces, one veth pair ($vdev)"
$SUDO env ROCE_TB_PREFIX="$ROCE_TB_PREFIX" "$root/scripts/testbed.sh" up 2 | grep -v "^TB_DEVICE"
dev1=$("$root/scripts/testbed.sh" env 1 "$vdev" | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p")
dev2=$("$root/scripts/testbed.sh" env 2 "$vdev" | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p")
oob=$("$root/scripts/testbed.sh" env 1 | sed -n 's/^TB_OOB_ADDR=//p')

# run NAME ARGS...: the server in namespace 1, the client in namespace 2; prints the client's
# perftest output and the server's result lines.
run() {
  local name=$1
  shift
  echo "\$ roce-perf $* --device \"<instance 1>\"            # server, namespace ${ROCE_TB_PREFIX}1"
  echo "\$ roce-perf $* --device \"<instance 2>\" $oob   # client, namespace ${ROCE_TB_PREFIX}2"
  $SUDO timeout -k 5 60 ip netns exec "${ROCE_TB_PREFIX}1" "$perf" "$@" --device "$dev1" \
    --timeout 30 >"$logs/$name.server" 2>&1 &
  server_pid=$!
  local rc=0
  $SUDO timeout -k 5 60 ip netns exec "${ROCE_TB_PREFIX}2" "$perf" "$@" --device "$dev2" \
    --timeout 30 "$oob" >"$logs/$name.client" 2>&1 || rc=$?
  wait "$server_pid" || rc=$((rc ? rc : $?))
  server_pid=
  echo
  cat "$logs/$name.client"
  echo "(server side:)"
  grep -E '^ [0-9]+ +[0-9]+ ' "$logs/$name.server" || true
  if ((rc != 0)); then
    echo "--- server output ---"
    cat "$logs/$name.server"
    echo "demo: $name failed" >&2
    exit 1
  fi
}

step "RDMA WRITE bandwidth (perftest's ib_write_bw)"
run write_bw write_bw -s 65536 -n 5000
step "SEND latency (perftest's ib_send_lat), the engine driven by the test thread"
run send_lat send_lat -s 2 -n 1000 --inline-engine

# coll NAME ARGS...: roce-coll-perf as 4 ranks, one stack instance each, on a bridge.
coll() {
  echo "\$ scripts/coll-run.sh -n 4 -- roce-coll-perf $*"
  $SUDO env ROCE_TB_PREFIX="$ROCE_TB_PREFIX" "$root/scripts/coll-run.sh" -n 4 --vdev "$vdev" \
    --timeout 120 -- "$coll_perf" "$@" || { echo "demo: roce-coll-perf $1 failed" >&2; exit 1; }
}
step "collectives: AllReduce across 4 stack instances (nccl-tests' all_reduce_perf)"
coll all_reduce -b 8 -e 16M -f 8 -n 5
step "collectives: AlltoAll across 4 stack instances (nccl-tests' alltoall_perf)"
coll alltoall -b 1K -e 16M -f 4 -n 5

step "done"
echo "More: $perf --help, $coll_perf --help; scripts/testbed.sh, scripts/coll-run.sh;"
echo "tests/e2e/ and tests/collectives/ (verified transfers and collectives, faults, captures)."
