#!/usr/bin/env bash
# scripts/mpi-netns-agent.sh HOST CMD...: mpirun's rsh agent (--mca plm_rsh_agent) on the
# testbed: HOST is an instance's kernel address (TB_OOB_ADDR, a.b.c.I) and CMD runs in that
# instance's namespace (ROCE_TB_PREFIX I) instead of over ssh. scripts/coll-baselines.sh runs
# Open MPI's ranks across the namespaces with it.
set -euo pipefail
case ${1-} in -h | --help) awk 'NR > 1 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;; esac
prefix=${ROCE_TB_PREFIX:?ROCE_TB_PREFIX names the testbed}
while [[ ${1-} == -* ]]; do shift; done  # ssh options mpirun may pass
host=${1:?HOST}
shift
i=${host##*.}
[[ $i =~ ^[0-9]+$ ]] || { echo "mpi-netns-agent: '$host' is not an instance's address" >&2; exit 2; }
exec ip netns exec "${prefix}${i}" /bin/sh -c "$*"
