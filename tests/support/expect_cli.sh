# Shared by the command-line tests (sourced): set CLI_TOOL to the binary first.
# expect CODE PATTERN ARGS...: CLI_TOOL ARGS exits CODE within 20 s, with exactly one line on
# stderr, matching PATTERN. Counts failures in $fails.
fails=0
CLI_NAME=$(basename "$CLI_TOOL")

expect() {
  local code=$1 pattern=$2
  shift 2
  local err rc lines
  err=$(timeout 20 "$CLI_TOOL" "$@" 2>&1 >/dev/null)
  rc=$?
  lines=$(printf '%s' "$err" | grep -c '')
  if [[ $rc -ne $code || $lines -ne 1 || ! $err =~ $pattern ]]; then
    echo "FAIL: $CLI_NAME $*: exit $rc (want $code), stderr ($lines lines): $err"
    fails=$((fails + 1))
  else
    echo "ok: $CLI_NAME $* -> $code: $err"
  fi
}
