#!/usr/bin/env bash
# scripts/bench-middleware.sh: Debian's UCX and Open MPI over the verbs shim beside UCX over the
# kernel's TCP, on the same two-namespace testbed (scripts/testbed.sh, a veth pair; the shim on
# net_af_packet, TCP on the same veth's kernel addresses) (docs/middleware.md):
#   ucx_perftest tag_lat 8 B (median and average of the run), tag_bw 64 KiB and 1 MiB (MB/s);
#   MPI_Allreduce latency, 2 ranks (tests/verbs/mpi_exact allreduce_lat: osu_allreduce's figure)
# each over: the shim in threaded mode (UCX_TLS=rc_v), the shim in inline mode (mode = inline),
# UCX over TCP (UCX_TLS=tcp on tb0, Debian's libibverbs); every figure the median of N runs.
#
#   scripts/bench-middleware.sh [-n N] [--build DIR] [--sizes "8 ... 1048576"]
#     -n N      runs of each ucx_perftest figure and repeats of each MPI size (default 5)
#     --build   the build directory (default build/; needs ibverbs and verbs_mpi_exact)
#
# Needs root, ucx-utils, openmpi-bin; runs itself under scripts/with-dev-infiniband.sh where
# /dev/infiniband is missing. Uses ROCE_TB_PREFIX (default bench-mw-PID-) and tears it down.
set -euo pipefail
case ${1-} in -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
n=5 build=$root/build
while (($#)); do
  case $1 in
    -n) n=$2; shift 2 ;;
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    *) echo "bench-middleware: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench-middleware: -n must be a positive number" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "bench-middleware: needs root" >&2; exit 2; }
exe=$build/tests/verbs/verbs_mpi_exact
[[ -e $build/verbs_shim/libibverbs.so.1 && -x $exe ]] ||
  { echo "bench-middleware: build first: ninja -C $build ibverbs verbs_mpi_exact" >&2; exit 2; }
command -v ucx_perftest >/dev/null && command -v mpirun >/dev/null ||
  { echo "bench-middleware: needs ucx-utils and openmpi-bin" >&2; exit 2; }
[[ -d /dev/infiniband ]] || exec "$root/scripts/with-dev-infiniband.sh" "$0" -n "$n" --build "$build"

export ROCE_TB_PREFIX=${ROCE_TB_PREFIX:-bench-mw-$$-}
tb=$root/scripts/testbed.sh
work=$(mktemp -d /tmp/roce-bench-mw.XXXXXX)
cleanup() {
  "$tb" down >/dev/null 2>&1 || true
  echo "bench-middleware: outputs in $work" >&2
}
trap cleanup EXIT
"$tb" up 2 >"$work/testbed.out"
ns1=${ROCE_TB_PREFIX}1 ns2=${ROCE_TB_PREFIX}2
dev() { "$tb" env "$1" af_packet | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p"; }

# cfg_env CONFIG I ARRAY: sets ARRAY to the environment of a process in namespace I for CONFIG.
cfg_env() {
  local -n out=$3
  case $1 in
    thread) out=("LD_LIBRARY_PATH=$build/verbs_shim" UCX_NET_DEVICES=roce0:1 UCX_IB_GID_INDEX=1
      "ROCE_DEVICE=$(dev "$2")") ;;
    inline) out=("LD_LIBRARY_PATH=$build/verbs_shim" UCX_NET_DEVICES=roce0:1 UCX_IB_GID_INDEX=1
      "ROCE_DEVICE=$(dev "$2"); mode=inline") ;;
    tcp) out=(UCX_NET_DEVICES=tb0) ;;
  esac
}
tls() { [[ $1 == tcp ]] && echo tcp || echo rc_v; }

# perftest CONFIG NAME ARGS...: one ucx_perftest run, its "Final:" line in $work/NAME.
perftest() {
  local c=$1 name=$2 port=$((13500 + RANDOM % 400))
  shift 2
  local -a e1 e2
  cfg_env "$c" 1 e1
  cfg_env "$c" 2 e2
  ip netns exec "$ns1" env "${e1[@]}" UCX_TLS="$(tls "$c")" timeout -k 5 120 ucx_perftest -p "$port" \
    >"$work/$name.server" 2>&1 &
  local spid=$!
  for _ in $(seq 100); do
    [[ -n $(ip netns exec "$ns1" ss -Hltn "sport = :$port") ]] && break
    sleep 0.1
  done
  ip netns exec "$ns2" env "${e2[@]}" UCX_TLS="$(tls "$c")" timeout -k 5 120 ucx_perftest 10.78.0.1 \
    -p "$port" "$@" >"$work/$name.client" 2>&1 || true
  wait "$spid" || true
  grep "^Final:" "$work/$name.client" >"$work/$name" || echo "Final: failed" >"$work/$name"
}

# median FILE...: the median of the first field of each file (a number per file), or "-".
median() { cat "$@" 2>/dev/null | grep -E '^[0-9.]+$' | sort -g | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }'; }

configs="thread inline tcp"
for c in $configs; do
  for ((r = 1; r <= n; r++)); do
    echo "bench-middleware: $c, run $r/$n" >&2
    perftest "$c" "$c.lat.$r" -t tag_lat -s 8 -n 20000 -w 2000
    perftest "$c" "$c.bw64k.$r" -t tag_bw -s 65536 -n 2000 -w 100
    perftest "$c" "$c.bw1m.$r" -t tag_bw -s 1048576 -n 300 -w 20
    awk '{ print $3 > "'"$work/$c.p50.$r"'"; print $5 > "'"$work/$c.avg.$r"'" }' "$work/$c.lat.$r"
    awk '{ print $7 }' "$work/$c.bw64k.$r" >"$work/$c.b64.$r"
    awk '{ print $7 }' "$work/$c.bw1m.$r" >"$work/$c.b1m.$r"
  done
  echo "bench-middleware: $c, MPI_Allreduce" >&2
  (
    cfg_env "$c" 1 e1
    export "${e1[@]}" UCX_TLS="self,$(tls "$c")"
    # The rank the agent starts in namespace 2 takes that namespace's device (ROCE_TB_VDEV).
    # pml ucx runs on a transport outside its list (rc_verbs, ud_verbs, ..., not tcp) only
    # when told to.
    any=()
    if [[ $c != tcp ]]; then
      export ROCE_TB_VDEV=af_packet ROCE_TB_DEVICE_EXTRA=""
      [[ $c == inline ]] && ROCE_TB_DEVICE_EXTRA="mode=inline"
    else
      any=(--mca pml_ucx_tls any --mca pml_ucx_devices any)
    fi
    timeout -k 5 900 ip netns exec "$ns1" mpirun --allow-run-as-root -np 2 --host 10.78.0.1,10.78.0.2 \
      --mca plm_rsh_agent "$root/scripts/mpi-netns-agent.sh" --mca pml ucx "${any[@]}" --mca btl self \
      --mca oob_tcp_if_include mg0 "$exe" allreduce_lat 8 1048576 200 "$n"
  ) >"$work/$c.allreduce" 2>&1 || echo "bench-middleware: $c: mpirun failed ($work/$c.allreduce)" >&2
done

echo "## ucx_perftest, 2 namespaces, medians of $n runs ($(date -u +%F), load $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| transport | tag_lat 8 B median (us) | tag_lat 8 B average (us) | tag_bw 64 KiB (MB/s) | tag_bw 1 MiB (MB/s) |"
echo "|---|---|---|---|---|"
for c in $configs; do
  label="shim, $c mode (rc_v)"
  [[ $c == tcp ]] && label="UCX over TCP (tcp, tb0)"
  echo "| $label | $(median "$work/$c".p50.*) | $(median "$work/$c".avg.*) | $(median "$work/$c".b64.*) | $(median "$work/$c".b1m.*) |"
done
echo
echo "## MPI_Allreduce (Open MPI 4.1, pml ucx), 2 ranks: us per call, median of $n repeats"
echo
printf '| bytes |'; for c in $configs; do printf ' %s |' "$c"; done; echo
printf '|---|'; for c in $configs; do printf -- '---|'; done; echo
for b in $(awk '/^ +[0-9]/ { print $1 }' "$work/thread.allreduce"); do
  printf '| %s |' "$b"
  for c in $configs; do printf ' %s |' "$(awk -v b="$b" '$1 == b { print $2 }' "$work/$c.allreduce")"; done
  echo
done
