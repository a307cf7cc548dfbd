#!/usr/bin/env bash
# Prints the Markdown pass/fail table of the interop cases recorded in DIR/*.tsv (one line per
# case: operation, GID family, direction, path MTU, size, result, reproducing command), as
# written by scripts/rxe/lib.sh's rxe_result. Exits 1 if any case failed or none was recorded.
#
#   scripts/rxe/results-table.sh DIR
set -euo pipefail
dir=${1:?results directory}
shopt -s nullglob
files=("$dir"/*.tsv)
((${#files[@]})) || { echo "no results in $dir"; exit 1; }
echo "| operation | GID | direction | path MTU | result | reproduce |"
echo "|---|---|---|---|---|---|"
awk -F'\t' '{printf "| %s | %s | %s | %s | %s | `%s` |\n", $1, $2, $3, $4, ($6 == "PASS" ? "pass" : "**FAIL**"), $7}' "${files[@]}"
pass=$(cat "${files[@]}" | awk -F'\t' '$6 == "PASS"' | wc -l)
total=$(cat "${files[@]}" | wc -l)
echo
echo "$pass of $total cases passed ($(date -u +%Y-%m-%d))."
((pass == total && total > 0))
