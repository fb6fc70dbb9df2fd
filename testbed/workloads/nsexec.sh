#!/bin/sh
# plm_rsh_agent for mpirun on the testbed: `nsexec.sh HOST COMMAND...` runs COMMAND inside the
# network namespace that owns address HOST (from $DTSIM_TESTBED_HOSTS), like ssh would on a
# real cluster. Options mpirun passes before the host (e.g. -x) are skipped.
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host="$1"; shift
ns=$(awk -F'\t' -v h="$host" '$3 == h { print $2 }' "$DTSIM_TESTBED_HOSTS")
if [ -z "$ns" ]; then echo "nsexec.sh: no testbed host with address $host" >&2; exit 1; fi
# Every emulated host gets its own OpenMPI session directory, as a separate machine would: the
# namespaces share /tmp and the hostname, and daemons creating the same session directory at
# once failed orte_init ("mkdir ... File exists", 1 start in 8 on 2026-11-25).
tmp="/tmp/dtsim-ompi-$ns"
mkdir -p "$tmp"
exec ip netns exec "$ns" env OMPI_MCA_orte_tmpdir_base="$tmp" sh -c "$*"
