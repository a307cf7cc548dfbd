# shellcheck shell=bash
# Shared by the tests of the bench scripts' reports on recorded samples (bench_report_test.sh,
# bench_shim_report_test.sh; sourced): REPO, a WORK directory removed on exit, a count of
# failures and the check of a table row's verdict.
# shellcheck disable=SC2034 # for the tests that source this file
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fails=0

# fail NAME WHAT: counts a failure.
fail() {
  echo "FAIL: $1: $2"
  fails=$((fails + 1))
}
# expect NAME OUTPUT ROW_PREFIX VERDICT [NOTE]: the first row that starts with ROW_PREFIX ends
# with VERDICT and, given NOTE, OUTPUT holds NOTE (a fixed string).
expect() {
  local name=$1 out=$2 row=$3 verdict=$4 note=${5-}
  local line
  line=$(grep -F "| $row" <<<"$out" | head -n 1)
  if [[ $line != *"$verdict" ]]; then
    fail "$name" "want '$verdict' in: $line"
  elif [[ -n $note ]] && ! grep -qF "$note" <<<"$out"; then
    fail "$name" "no '$note' in the output"
  else
    echo "ok: $name"
  fi
}
