#!/usr/bin/env bash
# scripts/coll-bottleneck.sh [-n N] [--iters I] [--bytes B] [--rate RATE] [--limit BYTES]
#                            [--modes LIST] [--scenarios LIST] [--out DIR] [--build-dir DIR]
# A congested port that is real: N stack instances (default 4) on the testbed's bridge, whose
# port toward instance 1 (rank 0) is a bottleneck made by Linux traffic control: a TBF shaper at
# RATE (default 1gbit, or Nmbit) with a finite queue of --limit bytes (default 300000: tail
# drops beyond), and ECN marking in front of it: a tc egress BPF program
# (scripts/bottleneck_ecn.bpf.c, built here with clang) that keeps a virtual queue draining at
# RATE and marks CE on the stack's ECT frames as RED does, from limit / 5 of queue, with
# probability rising to 20 % at 3 x limit / 5, every frame above. (The kernel this was built on
# has no RED or fq_codel qdisc: CONFIG_NET_SCH_RED and _FQ_CODEL are off.) Through it,
# roce-coll-times runs each scenario (default: alltoall, incast) in each mode (default:
# none,dcqcn,admission,both):
#   none       no congestion control: DCQCN off, every grant at once (256 slots x 256 KiB a
#              peer, no receive budget): senders write as fast as the grants let them
#   dcqcn      DCQCN in the stack (ECT frames, CNPs, rate cuts; line rate 5 Gb/s), grants as none
#   admission  receiver-driven admission only: 64 KiB chunks, 2 grants a peer, at most 128 KiB
#              granted by a receiver over all its peers (under the queue's marking threshold)
#   both       DCQCN and admission
# --bytes B (default 1M): alltoall, B a rank in all; incast, B from each rank to rank 0. For each
# run: completion time p50 / p99 / max over I iterations (default 50), the TBF's sent packets,
# drops and peak backlog (`tc -s qdisc`, the backlog sampled every 10 ms), the CE marks that
# arrived (the stack's rx_ce, all ranks), frames the instances' af_packet rings had no room for,
# and the stack's retransmitted packets and local ACK timeouts (all ranks), beside the ideal
# time (the bytes that must cross the bottleneck, at its rate); results.tsv and bottleneck.png (gnuplot) in DIR. Exit 1 if a run was
# not exact or the qdisc saw no traffic. Needs root, clang and libbpf-dev.
set -euo pipefail
usage() { awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; }
die() { echo "coll-bottleneck: $*" >&2; exit 2; }
n=4 iters=50 bytes=1M rate=1gbit limit=300000 modes=none,dcqcn,admission,both
scenarios=alltoall,incast out= build=
while (($#)); do
  case $1 in
    -n) n=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --bytes) bytes=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (--help)" ;;
  esac
done
[[ $n =~ ^[0-9]+$ && $n -ge 2 ]] || die "-n N: at least 2"
[[ $iters =~ ^[0-9]+$ && $iters -ge 1 ]] || die "--iters: a count"
[[ $limit =~ ^[0-9]+$ && $limit -ge 20000 ]] || die "--limit: bytes, at least 20000"
for m in ${modes//,/ }; do [[ $m =~ ^(none|dcqcn|admission|both)$ ]] || die "mode '$m': none, dcqcn, admission or both"; done
for s in ${scenarios//,/ }; do [[ $s =~ ^(alltoall|incast)$ ]] || die "scenario '$s': alltoall or incast"; done
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, tc)"
root=$(cd "$(dirname "$0")/.." && pwd)
build=${build:-$root/build}
times=$build/apps/roce-coll-times
[[ -x $times ]] || die "no $times (build roce-coll-times first)"
case $rate in
  *gbit) rate_bps=$(awk -v r="${rate%gbit}" 'BEGIN { printf "%d", r * 1e9 / 8 }') ;;
  *mbit) rate_bps=$(awk -v r="${rate%mbit}" 'BEGIN { printf "%d", r * 1e6 / 8 }') ;;
  *) die "--rate '$rate': Ngbit or Nmbit" ;;
esac
((rate_bps > 0)) || die "--rate '$rate': must be positive"
out=${out:-$(mktemp -d /tmp/roce-coll-bottleneck.XXXXXX)}
mkdir -p "$out"
export ROCE_TB_PREFIX=${ROCE_TB_PREFIX:-roce-bneck-}
tb=$root/scripts/testbed.sh
br="${ROCE_TB_PREFIX}br"
sampler=
cleanup() {
  [[ -n $sampler ]] && kill "$sampler" 2>/dev/null
  "$tb" down >/dev/null 2>&1
}
trap cleanup EXIT
"$tb" up "$n" --bridge >"$out/testbed.log"
clang -O2 -g -target bpf -I/usr/include/x86_64-linux-gnu -DRATE_BPS="${rate_bps}ull" \
  -DKMIN="$((limit / 5))ull" -DKMAX="$((limit * 3 / 5))ull" -DPMAX_PCT=20ull \
  -c "$root/scripts/bottleneck_ecn.bpf.c" -o "$out/ecn.o" || die "clang could not build the ECN marker"

# The bottleneck, fresh (counters at zero) for each run: the bridge's egress toward instance 1.
# (The marker's virtual queue starts empty each time it is loaded.)
shape() {
  ip netns exec "$br" tc qdisc del dev p1 root 2>/dev/null || true
  ip netns exec "$br" tc qdisc del dev p1 clsact 2>/dev/null || true
  ip netns exec "$br" tc qdisc add dev p1 root handle 1: tbf rate "$rate" burst 32kb limit "$limit"
  ip netns exec "$br" tc qdisc add dev p1 clsact
  ip netns exec "$br" tc filter add dev p1 egress bpf da obj "$out/ecn.o" sec tc
}
# The TBF's counters as "sent_pkts drops backlog_bytes".
tbf_stats() {
  ip netns exec "$br" tc -s qdisc show dev p1 | awk '
    /^qdisc tbf/ { q = 1; next }
    /^qdisc/ { q = 0 }
    q && /Sent/ { pk = $4; dr = $7; sub(",", "", dr) }
    q && /backlog/ { bl = $2; sub("b", "", bl); if (bl ~ /K$/) { sub("K", "", bl); bl *= 1000 } }
    END { print pk + 0, dr + 0, bl + 0 }'
}

mode_env() {  # mode -> ROCE_COLL_* assignments and extra device keys
  local adm=0 cc=0
  case $1 in
    dcqcn) cc=1 ;;
    admission) adm=1 ;;
    both) adm=1 cc=1 ;;
  esac
  if ((adm)); then
    env_vars=(ROCE_COLL_CHUNK=64K ROCE_COLL_SLOTS=2 ROCE_COLL_GRANTS=2 ROCE_COLL_RECV_BYTES=128K)
  else
    env_vars=(ROCE_COLL_CHUNK=256K ROCE_COLL_SLOTS=256 ROCE_COLL_GRANTS=256 ROCE_COLL_RECV_BYTES=1024G)
  fi
  extra="counters=$out/run.r%r.counters"
  ((cc)) && extra+="; cc=dcqcn; ecn=1; cc_params=line_gbps=5"
  return 0
}

printf 'scenario\tmode\tideal_ms\tp50_ms\tp99_ms\tmax_ms\tqdisc_pkts\tdrops\tce_marks\tpeak_backlog_B\tring_drops\tretransmits\tack_timeouts\twrong\n' >"$out/results.tsv"
bytes_n=$(numfmt --from=iec "$bytes")
# The ideal: the bytes that must cross the bottleneck (into rank 0), at its rate.
ideal() {
  local into=$((bytes_n * (n - 1) / n))
  [[ $1 == incast ]] && into=$((bytes_n * (n - 1)))
  awk -v b="$into" -v r="$rate_bps" 'BEGIN { printf "%.3f", b / r * 1000 }'
}
status=0
for s in ${scenarios//,/ }; do
  for m in ${modes//,/ }; do
    mode_env "$m"
    shape
    rm -f "$out"/run.r*.counters
    # Peak backlog: sampled while the run lasts.
    (peak=0; while :; do b=$(tbf_stats | cut -d' ' -f3); ((b > peak)) && peak=$b && echo "$peak" >"$out/peak"; sleep 0.01; done) &
    sampler=$!
    echo 0 >"$out/peak"
    rc=0
    env "${env_vars[@]}" ROCE_COLL_TIMEOUT_MS=60000 "$root/scripts/coll-run.sh" -n "$n" --reuse \
      --device-extra "$extra" --timeout 900 -- "$times" --op "$s" --bytes "$bytes" \
      --iters "$iters" --csv "$out/$s.$m.csv" >"$out/$s.$m.txt" 2>&1 || rc=$?
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
    sampler=
    read -r pkts drops _ < <(tbf_stats)
    peak=$(cat "$out/peak")
    rtx=$(cat "$out"/run.r*.counters 2>/dev/null | awk '/retransmitted_packets/ { s += $2 } END { print s + 0 }')
    tmo=$(cat "$out"/run.r*.counters 2>/dev/null | awk '/local_ack_timeouts/ { s += $2 } END { print s + 0 }')
    marks=$(cat "$out"/run.r*.counters 2>/dev/null | awk '/^ *rx_ce / { s += $3 } END { print s + 0 }')
    # Frames the receiving instances' af_packet rings had no room for (not the bottleneck's).
    ring=$(cat "$out"/run.r*.counters 2>/dev/null | awk '/^ *imissed / { s += $2 } END { print s + 0 }')
    line=$(grep '^roce-coll-times:' "$out/$s.$m.txt" || true)
    p50=$(sed -n 's/.* p50 \([0-9.]*\) ms.*/\1/p' <<<"$line")
    p99=$(sed -n 's/.* p99 \([0-9.]*\) ms.*/\1/p' <<<"$line")
    max=$(sed -n 's/.* max \([0-9.]*\) ms.*/\1/p' <<<"$line")
    wrong=$(sed -n 's/.* wrong \([0-9]*\);.*/\1/p' <<<"$line")
    if ((rc != 0)) || [[ -z $line || $wrong != 0 ]]; then
      echo "coll-bottleneck: $s / $m failed (exit $rc): $(tail -3 "$out/$s.$m.txt")" >&2
      status=1
    fi
    ((pkts > 0)) || { echo "coll-bottleneck: $s / $m: the qdisc saw no traffic" >&2; status=1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$m" "$(ideal "$s")" \
      "${p50:-nan}" "${p99:-nan}" "${max:-nan}" "$pkts" "$drops" "$marks" "$peak" "$ring" "$rtx" \
      "$tmo" "${wrong:-?}" >>"$out/results.tsv"
    echo "coll-bottleneck: $s / $m: p50 ${p50:-?} ms, p99 ${p99:-?} ms (ideal $(ideal "$s") ms); qdisc $pkts frames, $drops dropped, $marks CE-marked, peak backlog $peak B; $ring ring drops, $rtx retransmitted, $tmo ACK timeouts" >&2
  done
done
column -t -s $'\t' "$out/results.tsv"
if command -v gnuplot >/dev/null; then
  gnuplot -e "set terminal png size 900,520; set output '$out/bottleneck.png';
    set datafile separator '\t'; set style data histograms; set style histogram clustered gap 1;
    set style fill solid 0.8; set ylabel 'completion time (ms)'; set key top left noenhanced;
    set xtics noenhanced rotate by -25; set logscale y; set yrange [1:*]; set bmargin 5;
    set title 'Through a $rate bottleneck: $n ranks, $bytes (p50 and p99 of $iters iterations)' noenhanced;
    plot '$out/results.tsv' every ::1 using 4:xtic(stringcolumn(1).' / '.stringcolumn(2)) title 'p50',
      '' every ::1 using 5 title 'p99', '' every ::1 using 3 title 'ideal (bytes / rate)'" &&
    echo "coll-bottleneck: $out/bottleneck.png"
fi
echo "coll-bottleneck: outputs in $out"
exit $status
