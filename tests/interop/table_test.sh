#!/usr/bin/env bash
# The interop suite's last step: the pass/fail table of this run (every case the tests
# recorded in RESULTS_DIR/*.tsv), as the Markdown table docs/interop.md carries.
#
# Usage: table_test.sh RESULTS_DIR
set -euo pipefail
"$(dirname "$0")/../../scripts/rxe/results-table.sh" "${1:?results directory}" | tee "$1/table.md"
