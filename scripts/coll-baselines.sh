#!/usr/bin/env bash
# scripts/coll-baselines.sh [-n N] [--runs R] [-b MIN] [-e MAX] [--testbed bridge|ovs]
#                           [--out DIR] [--build-dir DIR]
# The collectives beside their baselines on one testbed, in one run: N ranks (default 4) of
#   ours      roce-coll-perf all_reduce / alltoall (the stack through scripts/coll-run.sh:
#             net_af_packet on the kernel's bridge, or with --testbed ovs net_virtio_user on a
#             private Open vSwitch with DPDK, scripts/ovs-switch.sh)
#   Gloo      gloo-bench all_reduce (AllreduceRingChunked) / alltoall over kernel TCP on the
#             testbed's kernel link (Debian's libgloo-dev; skipped, saying so, without it)
#   Open MPI  mpi-bench (MPI_Allreduce / MPI_Alltoall, --mca pml ob1 --mca btl tcp,self) on the
#             same link, mpirun entering the namespaces through scripts/mpi-netns-agent.sh
#             (openmpi-bin and libopenmpi-dev; skipped, saying so, without them)
#   ceiling   roce-perf write_bw between two of the instances at the largest size (the
#             transport's one-way bandwidth on this testbed)
# R times each (default 3), alternating; prints the median busbw per size (GB/s) of each series
# beside the others, and writes DIR/baselines.tsv and DIR/busbw.png (gnuplot). Needs root.
set -euo pipefail
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
die() { echo "coll-baselines: $*" >&2; exit 2; }
n=4 runs=3 min=1K max=64M out= build= testbed=bridge
while (($#)); do
  case $1 in
    -n) n=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -b) min=$2; shift 2 ;;
    -e) max=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --testbed) testbed=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (--help)" ;;
  esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
build=${build:-$root/build}
out=${out:-$(mktemp -d /tmp/roce-coll-baselines.XXXXXX)}
mkdir -p "$out"
[[ $testbed == bridge || $testbed == ovs ]] || die "--testbed '$testbed': bridge or ovs"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"
[[ -x $build/apps/roce-coll-perf && -x $build/apps/roce-perf ]] || die "build roce-coll-perf and roce-perf first"
export ROCE_TB_PREFIX=roce-cbase-
tb=$root/scripts/testbed.sh
trap '"$tb" down >/dev/null 2>&1' EXIT
vdev=af_packet up=("$n")
[[ $testbed == ovs ]] && vdev=ovs up+=(--ovs)
"$tb" up "${up[@]}" >"$out/testbed.log"
run_coll() { "$root/scripts/coll-run.sh" -n "$n" --reuse --vdev "$vdev" --timeout 900 -- "$@"; }
dev() { "$tb" env "$1" "$vdev" | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p"; }
size=16777216  # write_bw's message: the largest size the collectives are compared at
gloo=$build/apps/gloo-bench
[[ -x $gloo ]] || echo "coll-baselines: no $gloo (apt-get install libgloo-dev, rebuild): Gloo skipped"
mpi=$build/apps/mpi-bench
[[ -x $mpi ]] && command -v mpirun >/dev/null ||
  echo "coll-baselines: no $mpi or mpirun (apt-get install openmpi-bin libopenmpi-dev, rebuild): Open MPI skipped"
hosts=$(for ((i = 1; i <= n; i++)); do "$tb" env "$i" | sed -n 's/^TB_OOB_ADDR=//p'; done | paste -sd,)
run_mpi() {
  timeout 900 ip netns exec "${ROCE_TB_PREFIX}1" mpirun --allow-run-as-root -np "$n" --host "$hosts" \
    --mca plm_rsh_agent "$root/scripts/mpi-netns-agent.sh" --mca pml ob1 --mca btl tcp,self \
    --mca btl_tcp_if_include mg0 --mca oob_tcp_if_include mg0 "$mpi" "$@"
}
# perf_pair TEST RUN ARGS...: roce-perf TEST between instances 1 (server) and 2 (client).
perf_pair() {
  local test=$1 r=$2 spid
  shift 2
  timeout 120 ip netns exec "${ROCE_TB_PREFIX}1" "$build/apps/roce-perf" "$test" "$@" \
    --device "$(dev 1)" >"$out/$test.server.$r.txt" 2>&1 &
  spid=$!
  sleep 1
  timeout 120 ip netns exec "${ROCE_TB_PREFIX}2" "$build/apps/roce-perf" "$test" "$@" \
    --device "$(dev 2)" 10.78.0.1 >"$out/$test.$r.txt" 2>&1 || true
  wait "$spid" || true
}
for ((r = 1; r <= runs; r++)); do
  for op in all_reduce alltoall; do
    echo "coll-baselines: run $r: ours $op" >&2
    run_coll "$build/apps/roce-coll-perf" "$op" -b "$min" -e "$max" -f 4 -n 10 -w 2 -c 0 \
      >"$out/ours.$op.$r.txt"
    if [[ -x $gloo ]]; then
      echo "coll-baselines: run $r: gloo $op" >&2
      store=$(mktemp -d "$out/store.XXXXXX")
      run_coll "$gloo" "$op" --store "$store" -b "$min" -e "$max" -f 4 -n 10 -w 2 >"$out/gloo.$op.$r.txt"
      rm -rf "$store"
    fi
    if [[ -x $mpi ]] && command -v mpirun >/dev/null; then
      echo "coll-baselines: run $r: mpi $op" >&2
      run_mpi "$op" -b "$min" -e "$max" -f 4 -n 10 -w 2 >"$out/mpi.$op.$r.txt"
    fi
  done
  echo "coll-baselines: run $r: write_bw, send_lat" >&2
  perf_pair write_bw "$r" -s $size -n 200
  perf_pair send_lat "$r" -s 8 -n 2000
done

# Medians: busbw (out of place) per series and size; write_bw's MiB/s in GB/s.
/usr/bin/python3 - "$out" "$runs" "$n" <<'PY'
import glob, os, re, statistics, sys
out, runs, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rows(path):
    d = {}
    for l in open(path):
        f = l.split()
        if len(f) == 13 and re.match(r"^\d+$", f[0]):
            d[int(f[0])] = float(f[7])
    return d
series = {}
for who in ("ours", "gloo", "mpi"):
    for op in ("all_reduce", "alltoall"):
        files = sorted(glob.glob(f"{out}/{who}.{op}.*.txt"))
        if not files:
            continue
        per = [rows(p) for p in files]
        sizes = sorted(set().union(*per))
        series[f"{who}-{op}"] = {s: statistics.median([p[s] for p in per if s in p]) for s in sizes}
wbw = []
for p in glob.glob(f"{out}/write_bw.*.txt"):
    if ".server." in p:
        continue
    for l in open(p):
        f = l.split()
        if len(f) >= 4 and f[0] == "16777216":
            wbw.append(float(f[3]) * 1048576 / 1e9)
ceiling = statistics.median(wbw) if wbw else float("nan")
lat = []  # send_lat's t_typical (half a round trip, us) at 8 bytes
for p in glob.glob(f"{out}/send_lat.*.txt"):
    if ".server." in p:
        continue
    for l in open(p):
        f = l.split()
        if len(f) >= 5 and f[0] == "8" and re.match(r"^\d+$", f[1]):
            lat.append(float(f[4]))
half_rtt = statistics.median(lat) if lat else float("nan")
names = list(series)
sizes = sorted(set().union(*[set(v) for v in series.values()]))
with open(f"{out}/baselines.tsv", "w") as t:
    t.write("size\t" + "\t".join(names) + "\twrite_bw\n")
    for s in sizes:
        t.write(f"{s}\t" + "\t".join(f"{series[k].get(s, float('nan')):.4f}" for k in names) + f"\t{ceiling:.4f}\n")
print(f"# busbw (GB/s), medians of {runs} runs, {n} ranks; write_bw (2 instances, 16 MiB): {ceiling:.3f} GB/s;"
      f" send_lat (8 B, t_typical): {half_rtt:.2f} us")
print("# %10s  " % "size" + "  ".join("%16s" % k for k in names))
for s in sizes:
    print("%12d  " % s + "  ".join("%16.3f" % series[k].get(s, float("nan")) for k in names))
PY
if command -v gnuplot >/dev/null; then
  cols=$(head -1 "$out/baselines.tsv" | awk -F'\t' '{ print NF }')
  plot=""
  for ((c = 2; c <= cols; c++)); do
    plot+="${plot:+, }'$out/baselines.tsv' using 1:$c with linespoints title columnheader($c)"
  done
  gnuplot -e "set terminal png size 900,560; set output '$out/busbw.png'; set logscale x 2;
    set format x '%.0b%BB'; set xlabel 'size'; set ylabel 'busbw (GB/s)'; set key top left noenhanced;
    set title 'AllReduce and AlltoAll busbw, $n ranks, $testbed testbed (medians of $runs runs)' noenhanced;
    plot $plot" && echo "coll-baselines: $out/busbw.png"
fi
echo "coll-baselines: outputs in $out"
