#!/usr/bin/env bash
# roce-pcap's command line: every bad argument is one line on stderr and exit 2; --help exits 0.
#
# Usage: roce_pcap_cli_test.sh ROCE_PCAP
set -uo pipefail
CLI_TOOL=${1:?roce-pcap binary}
source "$(dirname "$0")/../support/expect_cli.sh"

expect 2 "^roce-pcap: A subcommand is required$"
expect 2 "^roce-pcap: files is required$" check
expect 2 "^roce-pcap: files: File does not exist: /nonexistent.pcap$" check /nonexistent.pcap
expect 2 "^roce-pcap: files: File does not exist: /nonexistent.pcap$" dump /nonexistent.pcap
expect 2 "^roce-pcap: The following argument was not expected: --bogus$" dump /dev/null --bogus
expect 2 "^roce-pcap: cannot open /dev/null: " check /dev/null
for args in --help "check --help"; do
  if out=$(timeout 20 "$CLI_TOOL" $args 2>&1) && [[ $out == *"Usage"* ]]; then
    echo "ok: roce-pcap $args -> 0"
  else
    echo "FAIL: roce-pcap $args"
    fails=$((fails + 1))
  fi
done

((fails == 0)) || { echo "$fails failed"; exit 1; }
echo "PASS"
