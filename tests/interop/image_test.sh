#!/usr/bin/env bash
# The interop suite's fixture: builds the rxe guest image (or finds it in its cache) once per
# ctest run, so the tests that boot it do not pay for it. Skips (77) where the suite cannot run.
#
# Usage: image_test.sh CACHE_DIR
set -euo pipefail
CACHE=${1:?cache directory}
command -v qemu-system-x86_64 >/dev/null ||
  { echo "SKIP: qemu-system-x86_64 is absent (scripts/install-deps.sh installs qemu-system-x86)"; exit 77; }
[[ -c /dev/net/tun ]] || { echo "SKIP: /dev/net/tun is absent: the guest cannot have a tap"; exit 77; }
t0=$SECONDS
img=$("$(dirname "$0")/../../scripts/rxe/build-image.sh" "$CACHE")
echo "guest image: $img ($(cat "$img/abi"), $((SECONDS - t0)) s)"
sed 's/^/  /' "$img/manifest"
