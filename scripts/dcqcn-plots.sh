#!/usr/bin/env bash
# Regenerates the DCQCN plots in docs/ from the simulator (issue: DCQCN on a simulated switch):
#   docs/dcqcn_fairness_16.png  16 long flows through one 25 Gb/s bottleneck
#   docs/dcqcn_incast.png       16:1 incast of 1 MiB WRITEs, with and without DCQCN
#   docs/dcqcn_joinleave.png    4 flows joining every 40 ms, then two leaving
# Usage: scripts/dcqcn-plots.sh [build dir]   (needs gnuplot: scripts/install-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sim=$build/apps/roce-sim
out=docs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$sim" --scenario fairness --flows 16 --csv "$tmp/fair.csv" >"$tmp/fair.txt"
"$sim" --scenario incast --flows 16 --csv "$tmp/incast.csv" >"$tmp/incast.txt"
"$sim" --scenario incast --flows 16 --profile none --csv "$tmp/incast_none.csv" >"$tmp/incast_none.txt" || true
"$sim" --scenario joinleave --flows 4 --csv "$tmp/join.csv" >"$tmp/join.txt"

plot_rates() {  # csv png title flows
  local csv=$1 png=$2 title=$3 n=$4
  local cols=""
  for ((i = 0; i < n; i++)); do
    cols+="'$csv' using 1:$((3 + i)) with lines lw 1 notitle, "
  done
  gnuplot <<GP
set datafile separator ','
set terminal pngcairo size 1100,700 noenhanced
set output '$png'
set multiplot layout 2,1 title '$title'
set ylabel 'throughput [Gb/s]'
set xlabel 'time [ms]'
set grid
plot ${cols%, }
set ylabel 'bottleneck queue [KB]'
plot '$csv' using 1:2 with lines lw 1 title 'queue'
unset multiplot
GP
}

plot_rates "$tmp/fair.csv" "$out/dcqcn_fairness_16.png" \
  "DCQCN (ConnectX-like): 16 flows, 25 Gb/s bottleneck, per-flow throughput (100 us samples)" 16
plot_rates "$tmp/join.csv" "$out/dcqcn_joinleave.png" \
  "DCQCN (ConnectX-like): 4 flows join every 40 ms, two leave" 4
gnuplot <<GP
set datafile separator ','
set terminal pngcairo size 1100,700 noenhanced
set output '$out/dcqcn_incast.png'
set multiplot layout 2,1 title '16:1 incast of 1 MiB WRITEs, 25 Gb/s, 4 MB buffer'
set ylabel 'bottleneck queue [KB]'
set xlabel 'time [ms]'
set grid
plot '$tmp/incast.csv' using 1:2 with lines title 'with DCQCN', '$tmp/incast_none.csv' using 1:2 with lines title 'without'
set ylabel 'sum of flows [Gb/s]'
plot '$tmp/incast.csv' using 1:(sum [c=3:18] column(c)) with lines title 'with DCQCN', '$tmp/incast_none.csv' using 1:(sum [c=3:18] column(c)) with lines title 'without'
unset multiplot
GP
grep -h -E "^PASS|^FAIL|Jain|completion|recovery|without DCQCN" "$tmp"/*.txt
echo "plots written to $out/"
