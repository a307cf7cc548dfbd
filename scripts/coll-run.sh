#!/usr/bin/env bash
# scripts/coll-run.sh -n N [options] -- CMD [ARGS...]
# Runs CMD as N ranks on the built-in virtual testbed: one stack instance per rank, each in a
# network namespace of its own (scripts/testbed.sh: net_af_packet on a veth pair for 2 ranks, a
# bridge for more), started as a launcher starts ranks. Rank 0's output comes to stdout; every
# rank's goes to its log; the testbed is created first and removed on exit (unless --reuse
# names one that is up).
#   -n N                  ranks (2..50)
#   --launcher KIND       torchrun (default: RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
#                         openmpi (OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK) or slurm
#                         (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID); MASTER_ADDR and
#                         MASTER_PORT (rank 0's namespace, its kernel link) in every case
#   --reuse               use the testbed of ROCE_TB_PREFIX as it is (must be up, N instances)
#   --vdev af_packet|pcap|ovs
#                         the DPDK vdev of each instance (default af_packet); ovs: the fast
#                         testbed, net_virtio_user on a private Open vSwitch with DPDK
#                         (scripts/testbed.sh up N --ovs)
#   --device-extra "k=v"  more device keys for every instance (e.g. "drop=0.01"); %r in them
#                         becomes the rank (e.g. "pcap=/tmp/rank%r.pcap")
#   --logs DIR            keep every rank's output there (default: a temporary folder, kept
#                         when a rank fails)
#   --timeout SECONDS     each rank's limit (default 600)
# Each rank also gets ROCE_TB_OOB_ADDR, its namespace's address on the kernel's link (for
# programs that use kernel TCP, such as the baselines of scripts/coll-baselines.sh).
# Exit: 0 when every rank exits 0, else the first non-zero status among the ranks.
set -euo pipefail
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
die() { echo "coll-run: $*" >&2; exit 2; }

n= launcher=torchrun reuse=0 vdev=af_packet extra= logs= limit=600
while (($#)); do
  case $1 in
    -n) n=${2:-}; shift 2 ;;
    --launcher) launcher=${2:-}; shift 2 ;;
    --reuse) reuse=1; shift ;;
    --vdev) vdev=${2:-}; shift 2 ;;
    --device-extra) extra=${2:-}; shift 2 ;;
    --logs) logs=${2:-}; shift 2 ;;
    --timeout) limit=${2:-}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    *) die "unknown option '$1' (scripts/coll-run.sh --help)" ;;
  esac
done
[[ $n =~ ^[0-9]+$ && $n -ge 2 && $n -le 50 ]] || die "-n N: N must be 2..50"
[[ $launcher == torchrun || $launcher == openmpi || $launcher == slurm ]] ||
  die "--launcher '$launcher': torchrun, openmpi or slurm"
[[ $vdev =~ ^(af_packet|pcap|ovs)$ ]] || die "--vdev '$vdev': af_packet, pcap or ovs"
[[ $limit =~ ^[0-9]+$ ]] || die "--timeout '$limit': seconds"
(($#)) || die "no command after --"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"

root=$(cd "$(dirname "$0")/.." && pwd)
testbed=$root/scripts/testbed.sh
export ROCE_TB_PREFIX=${ROCE_TB_PREFIX:-roce-coll-}
keep_logs=0
[[ -n $logs ]] && keep_logs=1
logs=${logs:-$(mktemp -d /tmp/roce-coll-run.XXXXXX)}
mkdir -p "$logs"
pids=()
cleanup() {
  local rc=$?
  set +e
  for p in "${pids[@]}"; do pkill -TERM -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ((reuse)) || "$testbed" down >/dev/null 2>&1
  ((keep_logs || rc != 0)) || rm -rf "$logs"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if ((reuse)); then
  ip netns list | grep -q "^${ROCE_TB_PREFIX}${n}\b" || die "--reuse: no testbed ${ROCE_TB_PREFIX}1..$n is up"
else
  up=("$n")
  [[ $vdev == ovs ]] && up+=(--ovs)
  "$testbed" up "${up[@]}" >"$logs/testbed.log" 2>&1 || die "testbed up failed: $(tail -3 "$logs/testbed.log")"
fi

port=$((29500 + RANDOM % 1000))
master=$("$testbed" env 1 | sed -n "s/^TB_OOB_ADDR=//p")
for ((r = 0; r < n; r++)); do
  i=$((r + 1))
  device=$("$testbed" env "$i" "$vdev" | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p")
  [[ -n $extra ]] && device="$device; ${extra//%r/$r}"
  case $launcher in
    torchrun) vars=(RANK=$r WORLD_SIZE=$n LOCAL_RANK=0 LOCAL_WORLD_SIZE=1) ;;
    openmpi) vars=(OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=$n OMPI_COMM_WORLD_LOCAL_RANK=0) ;;
    slurm) vars=(SLURM_PROCID=$r SLURM_NTASKS=$n SLURM_LOCALID=0) ;;
  esac
  oob=$("$testbed" env "$i" | sed -n "s/^TB_OOB_ADDR=//p")
  ip netns exec "${ROCE_TB_PREFIX}$i" env "${vars[@]}" MASTER_ADDR="$master" MASTER_PORT="$port" \
    ROCE_DEVICE="$device" ROCE_TB_OOB_ADDR="$oob" timeout -k 5 "$limit" "$@" >"$logs/rank$r.log" 2>&1 &
  pids+=($!)
done
tail -n +1 -f "$logs/rank0.log" --pid "${pids[0]}" &
tailer=$!
status=0
for ((r = 0; r < n; r++)); do
  rc=0
  wait "${pids[r]}" || rc=$?
  if ((rc != 0)); then
    ((status == 0)) && status=$rc
    echo "coll-run: rank $r exited $rc; its log: $logs/rank$r.log" >&2
    ((r > 0)) && tail -n 5 "$logs/rank$r.log" | sed "s/^/  rank $r: /" >&2
  fi
done
wait "$tailer" 2>/dev/null || true
exit $status
