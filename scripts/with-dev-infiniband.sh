#!/usr/bin/env bash
# scripts/with-dev-infiniband.sh CMD...: runs CMD (as root) in a private mount namespace in which
# /dev/infiniband exists, for middleware that lists a verbs device only if
# /dev/infiniband/<dev_name> is a character device it may read and write (UCX 1.13). The verbs
# shim's devices name /dev/null that way (verbs_shim/README.md, "Middleware"), which resolves
# only where the directory exists: on a kernel with the RDMA core loaded (`modprobe rdma_ucm`
# creates /dev/infiniband/rdma_cm). On a kernel without it (containers, this project's CI VM)
# this script stands in: an empty /dev/infiniband over /dev (overlayfs, upper layer on a tmpfs),
# seen by CMD and everything it starts, and by nothing else; gone when they exit. Processes CMD
# starts in other network namespaces (ip netns exec) inherit it.
set -euo pipefail
case ${1-} in -h | --help | '') awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;; esac
[[ $(id -u) -eq 0 ]] || { echo "with-dev-infiniband: needs root (a mount namespace)" >&2; exit 2; }
if [[ -d /dev/infiniband ]]; then exec "$@"; fi
if [[ ${ROCE_DEVIB_INNER-} != 1 ]]; then
  ROCE_DEVIB_INNER=1 exec unshare --mount --propagation private "$0" "$@"
fi
unset ROCE_DEVIB_INNER
top=$(mktemp -d /tmp/roce-devib.XXXXXX)
mount -t tmpfs -o size=64k,mode=755 roce-devib "$top"
mkdir "$top/orig" "$top/upper" "$top/work" "$top/upper/infiniband"
mount --rbind /dev "$top/orig"
mount -t overlay roce-devib -o "lowerdir=$top/orig,upperdir=$top/upper,workdir=$top/work" /dev
# What was mounted below /dev (pts, shm: MPI's and UCX's shared memory, hugepages) again.
while read -r sub; do
  [[ $sub == /dev/* ]] && mount --rbind "$top/orig/${sub#/dev/}" "$sub"
done < <(findmnt -rno TARGET -R "$top/orig" | sed "s|^$top/orig|/dev|" | awk -F/ 'NF == 3')
# The overlay holds its layers; their mount point can go (and with it the directory in /tmp).
umount -l "$top"
rmdir "$top"
exec "$@"
