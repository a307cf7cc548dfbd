#!/usr/bin/env bash
# Draws docs/soak.png from two runs of scripts/soak.sh (docs/soak.md): one over net_af_packet,
# one over net_memif. Six panels against the run's minutes, each side of each run a line: the
# mbufs out of the pool (the least and the most seen between two samples), the resident memory,
# the open descriptors, the longest wait for a completion between two samples against the limit
# the QPs' timeout and retries allow, and the bytes verified so far.
# Usage: scripts/soak-plot.sh AF_PACKET_OUT_DIR MEMIF_OUT_DIR [PNG]   (needs gnuplot:
#        scripts/install-deps.sh)
set -euo pipefail
case "${1-}" in -h | --help | "")
  awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"
  [[ -n ${1-} ]] && exit 0
  exit 2
  ;;
esac
af=$1 mf=${2:?the memif run\'s directory} png=${3:-$(cd "$(dirname "$0")/.." && pwd)/docs/soak.png}
for d in "$af" "$mf"; do
  for s in server client; do [[ -s $d/$s.csv ]] || { echo "soak-plot: no $d/$s.csv" >&2; exit 2; }; done
done
lines() {  # the four lines of one panel: af_packet / memif, server / client
  local expr=$1 out=""
  out+="'$af/server.csv' using (column('t_s')/60):($expr) with linespoints lw 2 pt 7 ps 0.4 lc rgb '#1f77b4' title 'af_packet server', "
  out+="'$af/client.csv' using (column('t_s')/60):($expr) with linespoints lw 2 pt 7 ps 0.4 lc rgb '#aec7e8' title 'af_packet client', "
  out+="'$mf/server.csv' using (column('t_s')/60):($expr) with linespoints lw 2 pt 7 ps 0.4 lc rgb '#d62728' title 'memif server', "
  out+="'$mf/client.csv' using (column('t_s')/60):($expr) with linespoints lw 2 pt 7 ps 0.4 lc rgb '#ff9896' title 'memif client'"
  echo "$out"
}
gnuplot <<GP
set datafile separator ','
set datafile columnheaders
set terminal pngcairo size 1400,1200 noenhanced
set output '$png'
set multiplot layout 3,2 title 'roce-soak: every RC operation on 8 QPs, 1 B - 1 MiB, 1 % loss each way, two processes (samples every minute)'
set grid
set xlabel 'minutes'
set key bottom right
set ylabel 'mbufs out of the pool (least between samples)'
set yrange [0:*]
plot $(lines "column('mbufs_min')")
set ylabel 'mbufs out of the pool (most between samples)'
plot $(lines "column('mbufs_max')")
set ylabel 'resident memory [MiB]'
plot $(lines "column('rss_kib')/1024")
set ylabel 'open descriptors'
set yrange [0:*]
plot $(lines "column('fds')")
set ylabel 'longest wait for a completion [ms]'
plot $(lines "column('max_wait_ms')"), '$af/server.csv' using (column('t_s')/60):(column('wait_limit_ms')) with lines dt 2 lw 2 lc rgb 'black' title 'limit: (retry + 1) x timeout'
set ylabel 'verified so far [GiB]'
plot $(lines "column('bytes_verified')/1073741824")
unset multiplot
GP
echo "plot written to $png"
