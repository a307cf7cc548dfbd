#!/usr/bin/env bash
# scripts/mpi-netns-agent.sh HOST CMD...: mpirun's rsh agent (--mca plm_rsh_agent) on the
# testbed: HOST is an instance's kernel address (TB_OOB_ADDR, a.b.c.I) and CMD runs in that
# instance's namespace (ROCE_TB_PREFIX I) instead of over ssh. scripts/coll-baselines.sh runs
# Open MPI's ranks across the namespaces with it.
# With ROCE_TB_VDEV set (af_packet, pcap or ovs), CMD also gets ROCE_DEVICE: instance I's device
# (scripts/testbed.sh env I VDEV) followed by ROCE_TB_DEVICE_EXTRA ("key=value; ...", each %I
# replaced by I), so that ranks over the verbs shim (pml ucx) take their own namespace's device
# where mpirun's environment holds its own (tests/verbs/ucx_test.sh, scripts/bench-middleware.sh).
set -euo pipefail
case ${1-} in -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;; esac
prefix=${ROCE_TB_PREFIX:?ROCE_TB_PREFIX names the testbed}
while [[ ${1-} == -* ]]; do shift; done  # ssh options mpirun may pass
host=${1:?HOST}
shift
i=${host##*.}
[[ $i =~ ^[0-9]+$ ]] || { echo "mpi-netns-agent: '$host' is not an instance's address" >&2; exit 2; }
if [[ -n ${ROCE_TB_VDEV-} ]]; then
  dev=$("$(dirname "$0")/testbed.sh" env "$i" "$ROCE_TB_VDEV" | sed -n "s/^TB_DEVICE='\(.*\)'$/\1/p")
  [[ -n ${ROCE_TB_DEVICE_EXTRA-} ]] && dev="$dev; ${ROCE_TB_DEVICE_EXTRA//%I/$i}"
  export ROCE_DEVICE=$dev
fi
exec ip netns exec "${prefix}${i}" /bin/sh -c "$*"
