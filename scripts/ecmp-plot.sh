#!/usr/bin/env bash
# Regenerates docs/ecmp.png from the simulator's ECMP scenario (docs/ecmp.md): 4 senders on one
# leaf, 4 receivers on the other, 4 paths of 25 Gb/s, 16 MiB per peer over K = 1 .. 32 QPs, hash
# seeds 1-32, with DCQCN (connectx) and without congestion control. Prints the tables.
# Usage: scripts/ecmp-plot.sh [build dir]   (needs gnuplot: scripts/install-deps.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
sim=$build/apps/roce-sim
out=docs
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run=(--scenario ecmp --qps-per-peer 1,2,4,8,16,32 --hash-seeds 1-32)
"$sim" "${run[@]}" --csv "$tmp/dcqcn.csv" >"$tmp/dcqcn.txt"
"$sim" "${run[@]}" --profile none --csv "$tmp/none.csv" >"$tmp/none.txt"

# Columns (roce_sim_ecmp.cc): 1 qps, 5 completion_x_ideal, 8 imbalance, 9 jain,
# 10 fabric_utilisation, 11 busiest_path_utilisation, 12 idlest_path_utilisation.
# "smooth unique" averages the 32 seeds of each K.
gnuplot <<GP
set datafile separator ','
set terminal pngcairo size 1500,520 noenhanced
set output '$out/ecmp.png'
set multiplot layout 1,3 title 'ECMP, 4 peers over 4 paths of 25 Gb/s, 16 MiB per peer dealt over K QPs; 32 hash seeds (points), their mean (lines)'
set logscale x 2
set xtics (1, 2, 4, 8, 16, 32)
set xrange [0.8:40]
set xlabel 'QPs per peer (K)'
set grid
set key top right
set ylabel 'busiest path bytes / mean'
set yrange [1:*]
plot '$tmp/dcqcn.csv' every ::1 using 1:8 with points pt 7 ps 0.5 lc rgb '#9999cc' notitle, \
     '' every ::1 using 1:8 smooth unique with linespoints lw 2 lc rgb '#333399' title 'imbalance (mean)'
set key bottom right
set ylabel 'path utilisation (DCQCN)'
set yrange [0:1.05]
plot '$tmp/dcqcn.csv' every ::1 using 1:11 smooth unique with linespoints lw 2 title 'busiest path', \
     '' every ::1 using 1:10 smooth unique with linespoints lw 2 title 'mean of paths', \
     '' every ::1 using 1:12 smooth unique with linespoints lw 2 title 'idlest path'
set key top right
set ylabel 'completion time / ideal'
set yrange [1:*]
plot '$tmp/dcqcn.csv' every ::1 using 1:5 with points pt 7 ps 0.5 lc rgb '#cc9999' notitle, \
     '' every ::1 using 1:5 smooth unique with linespoints lw 2 lc rgb '#993333' title 'DCQCN (connectx)', \
     '$tmp/none.csv' every ::1 using 1:5 with points pt 7 ps 0.5 lc rgb '#99cc99' notitle, \
     '' every ::1 using 1:5 smooth unique with linespoints lw 2 lc rgb '#339933' title 'no congestion control'
unset multiplot
GP
for f in dcqcn none; do
  echo "== $f"
  sed -n '/over .* hash seeds:/,$p' "$tmp/$f.txt"
done
echo "plot written to $out/ecmp.png"
