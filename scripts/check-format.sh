#!/usr/bin/env bash
# Checks that every C and C++ source git tracks is formatted by .clang-format (Google-based).
# Prints each file that is not, and exits 1 if any is. With --fix, formats them in place.
#   scripts/check-format.sh [--fix]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (scripts/install-deps.sh)" >&2; exit 2; }
fix=0
[[ ${1:-} == --fix ]] && fix=1
bad=0
while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    if ((fix)); then clang-format -i "$f"; echo "formatted: $f"; else echo "not formatted: $f"; bad=1; fi
  fi
done < <(git ls-files -z -- '*.c' '*.cc' '*.h')
((bad == 0)) && echo "check-format: all sources formatted"
exit $bad
