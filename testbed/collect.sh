#!/usr/bin/env bash
# Records the testbed datasets in data/runs/ and the testbed profiles in data/profiles/ (root).
# Usage: testbed/collect.sh [link|collectives|mpi|training|trace|heldout|slow_host|three_leaf_200|
#   two_leaf_200|two_leaf_mixed|star3|star7|star5_10|captures|barrier|rerecord|rerecord_mixed|
#   rerecord_three_leaf|rerecord_two_level|rerecord_held_out|rerecord_star_held_out|
#   rerecord_star7_10|rerecord_two_leaf120|rerecord_last_topologies|
#   rerecord_star_rest|rerecord_star_sizes|rerecord_star_hosts|rerecord_star_many|
#   rerecord_star_main_rest|rerecord_training|rd_chain|two_level_4to1|rerecord_two_level_4to1|all]
# (default all)
# The link profiles come from `calibrate import iperf3` on the testbed's own iperf3 --json and
# ping-pong logs (suite.py link; logs in data/runs/calibration/). The host0-host1 path is two
# 200 Mbit/s links of 25 us nominal each in both topologies (host0 and host1 share a leaf in
# two_level_2to1), hence --nominal-bw 200Mbps --nominal-latency 50us. REPEATS sets repetitions.
# The hosts run TCP cubic (dtsim-testbed's default --tcp-congestion, Linux's own default), so a
# recording does not depend on this machine's root namespace; every row and log says which.
# Recordings made before 2026-11-26 ran bbr (this machine's default): data/runs/testbed_bbr/.
set -euo pipefail
cd "$(dirname "$0")/.."
TB=${DTSIM_TESTBED_BIN:-target/debug/dtsim-testbed}
PY=/usr/bin/python3
S=testbed/workloads/suite.py
STAR=testbed/topologies/star4_200mbit.toml
MP=data/profiles/testbed_star4_200mbit.json
TWO=testbed/topologies/two_level_2to1.toml
LEAF3=testbed/topologies/three_leaf_100mbit_uplinks.toml
# A gloo message's core time inside gloo's own collectives (docs/testbed.md, "A message's core
# time inside a collective"): all-reduces back to back on 4, 6 and 8 hosts of the star
# (recorded in the link section), imported into every profile that carries host costs.
COLL_CPU_LOGS=$(printf 'data/runs/calibration/testbed_star4_200mbit.cpu_costs_all_reduce_%shosts.json ' 4 6 8)
COLL_CPU_ON="the machine that runs the dtsim testbed's hosts (2 cores), $STAR with 4, 6 and 8 hosts"
# A held-out topology's profile, measured as every testbed profile is (README, "A testbed
# topology's profile"): link rate and latency, the FIFO head, the token bucket, the packet wait,
# then the machine's host and CPU costs. Usage: held_out_profile TOPOLOGY PROFILE NOMINAL_BW
# FANOUT_BYTES...
held_out_profile() {
  local topo=$1 prof=$2 bw=$3
  shift 3
  local t
  t=$(basename "$topo" .toml)
  $TB run $topo -- $PY $S link --profile $prof --nominal-bw $bw --nominal-latency 50us \
    --seconds 10
  $TB run $topo -- $PY testbed/workloads/fanout.py driver --k 2 --repeats 7 --bytes "$@" \
    --out data/runs/calibration/testbed_$t.fanout.json
  $CAL import fanout data/runs/calibration/testbed_$t.fanout.json \
    --measured-on "the dtsim testbed ($topo, shaper htb), host 0 sending to hosts 1 and 2 at once" \
    --out $prof
  $TB run $topo -- $PY $S shaper_gap --probes 0,48 --bytes 16384 32768 65536 131072 262144 \
    --repeats 40 --out data/runs/calibration/testbed_$t.shaper_gap.json
  $CAL import shaper data/runs/calibration/testbed_$t.shaper_gap.json \
    --measured-on "the dtsim testbed ($topo, shaper htb), host 0 to host 1" --out $prof
  $TB run $topo -- $PY $S packet_wait --pings 400 --launches 5
  $CAL import packet-wait data/runs/calibration/testbed_$t.packet_wait.json \
    --measured-on "the dtsim testbed ($topo, shaper htb), host 0 pinging host 1 while host 2 streams to host 1 (through host 1's downlink) and to host 3 (beside)" \
    --out $prof
  $CAL import host-costs data/runs/calibration/testbed_host_costs.json \
    --measured-on "the machine that runs the dtsim testbed's hosts ($(nproc) cores), one process, torch on one thread" \
    --out $prof
  $CAL import cpu-costs data/runs/calibration/testbed_star4_200mbit.cpu_costs.json --out $prof
  $CAL import collective-cpu-costs $COLL_CPU_LOGS --measured-on "$COLL_CPU_ON" --out $prof
  $CAL import wake-ups data/runs/calibration/testbed_star4_200mbit_4hosts.wakeup_load.json \
    data/runs/calibration/testbed_star4_200mbit_8hosts.wakeup_load.json \
    --measured-on "the machine that runs the dtsim testbed's hosts ($(nproc) cores), $STAR with 4 and 8 hosts" \
    --out $prof
}
# A host's FIFO head measured directly (docs/testbed.md, "A host's answer behind its own
# stream"): host FROM's 1-byte ping to host TO waiting behind its own stream to THROUGH (and,
# in the second phase, to BESIDE), three launches of 2 x 400 pings, imported into each PROFILE.
# Usage: own_egress TOPOLOGY_STEM NOMINAL_MBPS FROM:TO THROUGH BESIDE PROFILE...
own_egress() {
  local t=$1 mbps=$2 ping=$3 through=$4 beside=$5
  shift 5
  local from=${ping%%:*} to=${ping##*:}
  local log=data/runs/calibration/testbed_$t.packet_wait_own_egress.json
  local streams="host $through"
  if [[ $beside != "$through" ]]; then
    streams+=" and to host $beside"
  fi
  $TB run testbed/topologies/$t.toml -- $PY $S packet_wait --ping $ping --through $from:$through \
    --beside $from:$beside --pings 400 --launches 3 --out $log
  local p
  for p in "$@"; do
    $CAL import own-egress $log --nominal-bw ${mbps}Mbps --out $p \
      --measured-on "the dtsim testbed (testbed/topologies/$t.toml, shaper htb), host $from pinging host $to while it streams to $streams"
  done
}
# A held-out topology's collectives, recorded as every held-out topology's are: gloo's
# all-reduce, broadcast, all_gather and reduce, then OpenMPI's all-reduce (the rules, ring),
# all_gather (the rules, ring), broadcast (the rules and BCAST_ALGS) and reduce_scatter (the
# rules), at 256 KiB, 1 MiB and 4 MiB, five launches of 5, into
# data/runs/testbed_{gloo,mpi}_NAME_heldout.csv. Usage: held_out_collectives TOPOLOGY PROFILE
# NAME BCAST_ALGS [FOLDER, instead of data/runs]
held_out_collectives() {
  local topo=$1 prof=$2 name=$3 bcast=$4 dir=${5:-data/runs}
  $TB run $topo -- $PY $S collectives --out $dir/testbed_gloo_${name}_heldout.csv \
    --profile $prof --methods allreduce,broadcast,allgather,reduce --bytes 262144 1048576 4194304 \
    --repeats 5 --launches 5
  local op_algs
  for op_algs in "allreduce 0,4" "allgather 0,4" "bcast $bcast" "reduce_scatter 0"; do
    set -- $op_algs
    $TB run --prefix mp $topo -- $PY $S mpi --op $1 \
      --out $dir/testbed_mpi_${name}_heldout.csv --profile $prof --algorithms $2 \
      --bytes 262144 1048576 4194304 --repeats 5 --launches 5
  done
}
# A held-out topology recorded whole: its profile (held_out_profile, the fanout at the sizes every
# held-out topology's is measured at), its FIFO head (own_egress) and its collectives
# (held_out_collectives). Usage: held_out_topology TOPOLOGY_NAME MBPS PING THROUGH BESIDE NAME
# BCAST_ALGS (TOPOLOGY_NAME: testbed/topologies/TOPOLOGY_NAME.toml, profile
# data/profiles/testbed_TOPOLOGY_NAME.json).
held_out_topology() {
  local t=$1 mbps=$2 ping=$3 through=$4 beside=$5 name=$6 bcast=$7
  local topo=testbed/topologies/$t.toml prof=data/profiles/testbed_$t.json
  CAL=${DTSIM_CALIBRATE_BIN:-target/debug/calibrate}
  held_out_profile $topo $prof ${mbps}Mbps \
    262144 393216 524288 786432 1048576 1572864 2097152 4194304
  own_egress $t $mbps $ping $through $beside $prof
  held_out_collectives $topo $prof $name $bcast
}
# A second recording's rows ($RR's CSVs, or the files named) merged beside the datasets' as
# data/runs/calibration/testbed_NAME.rerecorded_<date>.csv (`rerecord.py merge`); $RR removed.
# Usage: merge_rerecording NAME [FILE...]
merge_rerecording() {
  local name=$1
  shift
  (($#)) || set -- "$RR"/*.csv
  $PY testbed/workloads/rerecord.py merge "$@" \
    --out data/runs/calibration/testbed_$name.rerecorded_$(date -u +%Y-%m-%d).csv
  rm -rf "$RR"
}
# The 2:1 leaves' rows and their what-ifs' (the uplinks doubled, halved), every row naming the
# 2:1 profile as a user asking "what if the uplinks were ...?" would: gloo's all-reduce,
# multiring, hierarchical and parameter server, five launches of 10 (two_level_gloo_rows), and
# OpenMPI's rules' and ring all-reduce and all_gather at 256 KiB-4 MiB, five launches of 5
# (two_level_mpi_rows). Usage: two_level_{gloo,mpi}_rows TOPOLOGY DATASET_CSV
two_level_gloo_rows() {
  $TB run $1 -- $PY $S collectives --out $2 \
    --profile data/profiles/testbed_two_level_2to1.json --methods allreduce,multiring,hierarchical,ps \
    --orders '[[0,1,2,3],[0,2,1,3]]' --groups '[[0,1],[2,3]]' --repeats 10 --launches 5
}
two_level_mpi_rows() {
  local topo=$1 out=$2 op_algs
  for op_algs in "allreduce 0,4" "allgather 0,4"; do
    set -- $op_algs
    $TB run --prefix mp $topo -- $PY $S mpi --op $1 --out $out \
      --profile data/profiles/testbed_two_level_2to1.json --algorithms $2 \
      --bytes 262144 1048576 4194304 --repeats 5 --launches 5
  done
}
what=${1:-all}
R=${REPEATS:-10}
LINK="--nominal-bw 200Mbps --nominal-latency 50us --seconds 10"
if [[ $what == all || $what == link || $what == collectives ]]; then
  $TB run $STAR -- $PY $S link --profile data/profiles/testbed_star4_200mbit.json $LINK
  $TB run $TWO -- $PY $S link --profile data/profiles/testbed_two_level_2to1.json $LINK
  $TB run $STAR -- $PY $S incast --profile data/profiles/testbed_star4_200mbit.json --seconds 10
  # Two flows through leaf 0's 2:1 uplink one way, then with two more the other way.
  $TB run $TWO -- $PY $S pairs --profile data/profiles/testbed_two_level_2to1.json --seconds 10 \
    --pairs 0:2,1:3 --name uplink_one_way
  $TB run $TWO -- $PY $S pairs --profile data/profiles/testbed_two_level_2to1.json --seconds 10 \
    --pairs 0:2,1:3,2:0,3:1 --name uplink_both_ways
  # gloo isend/irecv exchanges across the uplinks: every rank's post and finish times (the
  # order of a pair's posts decides whether it exchanges both ways at once).
  $TB run $TWO -- $PY $S gloo_p2p --pairs 0:2,1:3 --name cross_leaf --repeats 10 \
    --bytes 262144 1048576 4194304
  # host0-host1 share a leaf here: two 300 Mbit/s links.
  $TB run $LEAF3 -- $PY $S link --profile data/profiles/testbed_three_leaf_100mbit_uplinks.json \
    --nominal-bw 300Mbps --nominal-latency 50us --seconds 10
  # Host 0 sending to hosts 1 and 2 at once (gloo's broadcast root): the FIFO head bytes of
  # the host links, on both 200 Mbit/s topologies and on a star with the three-leaf topology's
  # 300 Mbit/s host links.
  FAN="testbed/workloads/fanout.py driver --k 2 --repeats 7 --bytes 262144 393216 524288 786432 1048576 1572864 2097152 4194304 16777216"
  CAL=${DTSIM_CALIBRATE_BIN:-target/debug/calibrate}
  $TB run $STAR -- $PY $FAN --out data/runs/calibration/testbed_star4_200mbit.fanout.json
  $CAL import fanout data/runs/calibration/testbed_star4_200mbit.fanout.json \
    --measured-on "the dtsim testbed ($STAR, shaper htb), host 0 sending to hosts 1 and 2 at once" \
    --out data/profiles/testbed_star4_200mbit.json
  $TB run $TWO -- $PY $FAN --out data/runs/calibration/testbed_two_level_2to1.fanout.json
  $CAL import fanout data/runs/calibration/testbed_two_level_2to1.fanout.json \
    --measured-on "the dtsim testbed ($TWO, shaper htb), host 0 sending to hosts 1 and 2 at once" \
    --out data/profiles/testbed_two_level_2to1.json
  $TB run --set 'generator.link.bandwidth="300Mbps"' $STAR -- $PY $FAN \
    --out data/runs/calibration/testbed_star4_300mbit.fanout.json
  $CAL import fanout data/runs/calibration/testbed_star4_300mbit.fanout.json \
    --measured-on "the dtsim testbed ($STAR with 300 Mbit/s links: the three-leaf topology's host link rate and shaper), host 0 sending to hosts 1 and 2 at once" \
    --out data/profiles/testbed_three_leaf_100mbit_uplinks.json
  # The shapers' token buckets: one send at a time after idle gaps (and after a small message),
  # host 0 to host 1; its depth replaces the shaper's setting in each topology's profiles.
  SG="$S shaper_gap --probes 0,48 --bytes 16384 32768 65536 131072 262144 --repeats 40"
  $TB run $STAR -- $PY $SG --probes 0,48,1024,16384 \
    --out data/runs/calibration/testbed_star4_200mbit.shaper_gap.json
  for t in two_level_2to1 three_leaf_100mbit_uplinks; do
    $TB run testbed/topologies/$t.toml -- $PY $SG --out data/runs/calibration/testbed_$t.shaper_gap.json
  done
  for p in testbed_star4_200mbit testbed_star4_200mbit_ddp testbed_star4_200mbit_allreduce_after_backward \
      testbed_star4_200mbit_parameter_server testbed_two_level_2to1 testbed_three_leaf_100mbit_uplinks; do
    t=${p#testbed_}; t=${t%_ddp}; t=${t%_allreduce_after_backward}; t=${t%_parameter_server}
    $CAL import shaper data/runs/calibration/testbed_$t.shaper_gap.json \
      --measured-on "the dtsim testbed (testbed/topologies/$t.toml, shaper htb), host 0 to host 1" \
      --out data/profiles/$p.json
  done
  # A small message's wait at a shaped link another connection streams through (the packet
  # the shaper has in service), five launches of 400 pings per phase (measured 2026-11-29; on
  # the three leaves across the spine's link to a leaf; the two leaves and the five hosts in
  # their own sections below).
  PW="$S packet_wait --pings 400 --launches 5"
  for t in star4_200mbit two_level_2to1; do
    $TB run testbed/topologies/$t.toml -- $PY $PW
  done
  $TB run $LEAF3 -- $PY $PW --ping 4:2 --through 0:3 --beside 0:1
  for p in testbed_star4_200mbit testbed_star4_200mbit_ddp testbed_star4_200mbit_allreduce_after_backward \
      testbed_star4_200mbit_parameter_server testbed_two_level_2to1; do
    t=${p#testbed_}; t=${t%_ddp}; t=${t%_allreduce_after_backward}; t=${t%_parameter_server}
    $CAL import packet-wait data/runs/calibration/testbed_$t.packet_wait.json \
      --measured-on "the dtsim testbed (testbed/topologies/$t.toml, shaper htb), host 0 pinging host 1 while host 2 streams to host 1 (through host 1's downlink) and to host 3 (beside)" \
      --out data/profiles/$p.json
  done
  $CAL import packet-wait data/runs/calibration/testbed_three_leaf_100mbit_uplinks.packet_wait.json \
    --measured-on "the dtsim testbed (testbed/topologies/three_leaf_100mbit_uplinks.toml, shaper htb), host 4 pinging host 2 while host 0 streams to host 3 (through the spine's 100 Mbit/s link to host 2's leaf) and to host 1 (beside); the host links' 300 Mbit/s not measured apart" \
    --out data/profiles/testbed_three_leaf_100mbit_uplinks.json
  # The host work gloo does around its transfers (staging copies, reductions), one process on
  # this machine's CPU, into every testbed profile.
  $PY testbed/workloads/host_costs.py --repeats 50
  for p in testbed_star4_200mbit testbed_two_level_2to1 testbed_three_leaf_100mbit_uplinks \
      testbed_star4_200mbit_ddp testbed_star4_200mbit_allreduce_after_backward \
      testbed_star4_200mbit_parameter_server; do
    $CAL import host-costs data/runs/calibration/testbed_host_costs.json \
      --measured-on "the machine that runs the dtsim testbed's hosts ($(nproc) cores), one process, torch on one thread" \
      --out data/profiles/$p.json
  done
  # gloo's messages inside its all-reduce: the machine's core-seconds per call, back to back.
  for n in 4 6 8; do
    $TB run --set generator.n=$n $STAR -- $PY $S cpu_costs --collective all_reduce --repeats 2 \
      --bytes 65536 131072 262144 524288 1048576 4194304
  done
  for p in data/profiles/testbed_*.json; do
    if grep -q '"host_cpu"' "$p"; then
      $CAL import collective-cpu-costs $COLL_CPU_LOGS --measured-on "$COLL_CPU_ON" --out "$p"
    fi
  done
fi
if [[ $what == all || $what == collectives ]]; then
  # Five launches pooled per row (suite.py's default; the star's and the 2:1 leaves' rows were
  # one launch until 2026-11-29).
  $TB run $STAR -- $PY $S collectives --out data/runs/testbed_gloo_collectives.csv \
    --profile data/profiles/testbed_star4_200mbit.json --methods allreduce,broadcast,allgather,reduce,ps \
    --repeats $R
  $TB run $TWO -- $PY $S collectives --out data/runs/testbed_gloo_collectives.csv \
    --profile data/profiles/testbed_two_level_2to1.json --methods allreduce,multiring,hierarchical,ps \
    --orders '[[0,1,2,3],[0,2,1,3]]' --groups '[[0,1],[2,3]]' --repeats $R
  # 8 hosts on one switch, and 6 hosts behind 100 Mbit/s uplinks (gloo's own collectives).
  # The 8 hosts' rows pool five launches (re-recorded so on 2026-11-28: one launch's 256 KiB
  # all-reduce took 29.9 ms, five others 21.1-25.4).
  $TB run --set generator.n=8 $STAR -- $PY $S collectives \
    --out data/runs/testbed_gloo_collectives.csv --profile data/profiles/testbed_star4_200mbit.json \
    --methods allreduce,broadcast,allgather,reduce --repeats $R --launches 5
  # The three leaves' rows pool five launches too (re-recorded so on 2026-11-29).
  $TB run $LEAF3 -- $PY $S collectives --out data/runs/testbed_gloo_collectives.csv \
    --profile data/profiles/testbed_three_leaf_100mbit_uplinks.json \
    --methods allreduce,broadcast,allgather,reduce --repeats $R --launches 5
fi
if [[ $what == all || $what == mpi ]]; then
  $TB run --prefix mp $STAR -- $PY $S mpi --out data/runs/testbed_mpi_allreduce.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,1,3,4,5,6 --repeats $R \
    --launches 5
  # OpenMPI's broadcast, all_gather and reduce_scatter, by the fixed rules (0) and forced, on
  # the star: five mpiruns pooled per row (since 2026-11-29; three before).
  $TB run --prefix mp $STAR -- $PY $S mpi --op bcast --out data/runs/testbed_mpi_collectives.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,1,2,3,5,6 --repeats 5 \
    --launches 5
  $TB run --prefix mp $STAR -- $PY $S mpi --op allgather \
    --out data/runs/testbed_mpi_collectives.csv --profile data/profiles/testbed_star4_200mbit.json \
    --algorithms 0,2,4,5 --repeats 5 --launches 5
  $TB run --prefix mp $STAR -- $PY $S mpi --op reduce_scatter \
    --out data/runs/testbed_mpi_collectives.csv --profile data/profiles/testbed_star4_200mbit.json \
    --algorithms 0,2,3 --repeats 5 --launches 5 --bytes 65536 262144 1048576 4194304 16777216
  # When each rank ends one timed call and starts the next (the Barrier between them): how
  # long the shapers' buckets refill before a timed call.
  $TB run --prefix mp $STAR -- $PY $S mpi_call_gaps --repeats 30 --bytes 65536 262144 1048576
  # The three leaves: five mpiruns pooled per row (since 2026-11-29; two before).
  for op_algs in "bcast 0,6" "allgather 0,4" "reduce_scatter 0,2"; do
    set -- $op_algs
    $TB run --prefix mp $LEAF3 -- $PY $S mpi --op $1 --out data/runs/testbed_mpi_collectives.csv \
      --profile data/profiles/testbed_three_leaf_100mbit_uplinks.json --algorithms $2 --repeats 5 \
      --launches 5 --bytes 262144 1048576 4194304
  done
  # Sizes the three leaves' rows above were not recorded at (held out from the forwarded
  # queue, which was built on the 1 MiB capture below).
  for op_algs in "allgather 4,2" "reduce_scatter 0"; do
    set -- $op_algs
    $TB run --prefix mp $LEAF3 -- $PY $S mpi --op $1 \
      --out data/runs/testbed_mpi_three_leaf_heldout.csv \
      --profile data/profiles/testbed_three_leaf_100mbit_uplinks.json --algorithms $2 --repeats 5 \
      --launches 5 --bytes 524280 2097144
  done
  # Every host and switch port captured during 1 MiB all_gathers: when each rendezvous
  # request, answer and block left and arrived (testbed_*.capture_mpi_*.json).
  $TB run --prefix mp $LEAF3 -- $PY $S capture_mpi --op allgather --algorithms 4 \
    --bytes 1048560 --repeats 10 --name ring_1m
  $TB run --prefix mp $LEAF3 -- $PY $S capture_mpi --op allgather --algorithms 2 \
    --bytes 1048560 --repeats 10 --name bruck_1m
  # bruck's steps through the link between two leaves, 4 MiB (2026-11-30).
  $TB run --prefix mp testbed/topologies/two_leaf_150mbit.toml -- $PY $S capture_mpi \
    --op allgather --algorithms 2 --bytes 4194288 --repeats 10 --name bruck_4m
  # The first steps of rabenseifner (4 MiB, five launches) and recursive halving (16 MiB, two)
  # on the star, after the median call (2026-11-30).
  for k in 1 2 3 4 5; do
    $TB run --prefix mp $STAR -- $PY $S capture_mpi --op allreduce --algorithms 6 \
      --bytes 4194304 --repeats 10 --name rab_allreduce_4m_launch$k
  done
  for k in 1 2; do
    $TB run --prefix mp $STAR -- $PY $S capture_mpi --op reduce_scatter --algorithms 2 \
      --bytes 16777216 --repeats 10 --name rh_16m_launch$k
  done
  # The pairwise exchange of 4 MiB with every rank first copying 0, 4 or 16 MiB into fresh
  # memory (whether the copy before an all-reduce's first exchange sets its mode).
  for k in 1 2 3 4 5; do
    for c in 0 4194304 16777216; do
      $TB run --prefix mp $STAR -- $PY $S mpi_p2p --ranks 4 --repeats 10 \
        --p2p-modes oneway,pairwise --copy-first $c --bytes 4194304 \
        --out data/runs/calibration/testbed_mpi_p2p_4ranks_copy${c}_launch$k.json
    done
  done
  # More launches of the same (2026-11-30, evening; docs/testbed.md, "A slow step leaves the
  # call slow"): a receive buffer allocated per repetition, 8 MiB exchanges, copies of 1 MiB,
  # and eight ranks. Launch numbers continue those above.
  P2P="$S mpi_p2p --repeats 10 --p2p-modes oneway,pairwise"
  CAL_P2P=data/runs/calibration/testbed_mpi_p2p
  for k in 1 2 3 4 5; do
    $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 4194304 \
      --out ${CAL_P2P}_4ranks_recvwarm_launch$k.json
    $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 4194304 --fresh-recv \
      --out ${CAL_P2P}_4ranks_recvfresh_launch$k.json
  done
  for k in 1 2 3 4 5; do
    for f in "0" "16777216" "16777216 --fresh-recv"; do
      set -- $f
      tag=copy$1${2:+_freshrecv}
      $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 8388608 --copy-first $f \
        --out ${CAL_P2P}_4ranks_8m_${tag}_launch$k.json
    done
    $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 8388608 --fresh-recv \
      --out ${CAL_P2P}_4ranks_8m_freshrecv_launch$k.json
  done
  for k in 6 7 8 9 10; do
    for c in 0 16777216; do
      $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 4194304 --copy-first $c \
        --out ${CAL_P2P}_4ranks_copy${c}_launch$k.json
    done
  done
  for k in 1 2 3 4 5; do
    for c in 0 1048576 4194304 16777216; do
      case $c in 0|16777216) l=$((k + 10));; 4194304) l=$((k + 5));; *) l=$k;; esac
      $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 4194304 --copy-first $c \
        --out ${CAL_P2P}_4ranks_copy${c}_launch$l.json
    done
  done
  # One launch of the 4 MiB pairwise exchange on N hosts of the star after a copy of C bytes.
  copy_exchange() {
    local n=$1 c=$2 k=$3
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $P2P --ranks $n --bytes 4194304 \
      --copy-first $c --out ${CAL_P2P}_${n}ranks_copy${c}_launch$k.json
  }
  for k in 1 2 3 4 5; do
    for c in 0 16777216; do
      copy_exchange 8 $c $k
    done
  done
  for k in 1 2 3 4 5; do
    for c in 0 16777216; do
      copy_exchange 6 $c $k
      $TB run --prefix mp $STAR -- $PY $P2P --ranks 4 --bytes 4194304 --copy-first $c \
        --bind share --out ${CAL_P2P}_4ranks_bind_share_copy${c}_launch$k.json
    done
  done
  $TB run --prefix mp $STAR -- $PY $S capture_mpi --op allgather --algorithms 4 \
    --bytes 1048576 --repeats 10 --name ring_1m
  # Which mode each exchange between partners runs in, by how far apart they post
  # (testbed/workloads/capture_exchanges.py reads the log).
  $TB run --prefix mp $STAR -- $PY $S capture_mpi --op allgather --algorithms 3 \
    --bytes 4194304 --repeats 10 --name rd_4m
  for i in 2 3 4 5; do
    $TB run --prefix mp $STAR -- $PY $S capture_mpi --op allgather --algorithms 3 \
      --bytes 4194304 --repeats 10 --name rd_4m_launch$i
  done
  for i in 1 2 3 4 5; do
    $TB run --prefix mp $STAR -- $PY $S capture_mpi --op allreduce --algorithms 3 \
      --bytes 4194304 --repeats 10 --name rd_allreduce_4m_launch$i
  done
  # The binomial broadcast's root serving its children in the order it posts them.
  $TB run --prefix mp $STAR -- $PY $S capture_mpi --op bcast --algorithms 6 \
    --bytes 262144 --repeats 20 --name bcast_binomial_256k
  $TB run --prefix mp $STAR -- $PY $S capture_mpi --op bcast --algorithms 3 \
    --bytes 262144 --repeats 20 --name bcast_pipeline_256k
  $TB run --prefix mp $LEAF3 -- $PY $S capture_mpi --op bcast --algorithms 6 \
    --bytes 262144 --repeats 20 --name bcast_binomial_256k
  $TB run --prefix mp $LEAF3 -- $PY $S capture_mpi --op bcast --algorithms 6 \
    --bytes 1048576 --repeats 10 --name bcast_binomial_1m
  # Send vs Sendrecv between two hosts, with two ranks and with four (then also a ring
  # exchange over all four): data/runs/calibration/testbed_mpi_p2p_{2,4}ranks.json.
  for n in 2 4; do
    $TB run --prefix mp $STAR -- $PY $S mpi_p2p --ranks $n --repeats $R \
      --bytes 16384 131072 1048576 4194304 16777216
  done
  # The four-rank pairwise exchange again in fresh launches (a launch tends to keep one of
  # its two modes): testbed_mpi_p2p_4ranks_launch{2..10}.json, counted by exchange_modes.py.
  for k in 2 3 4 5 6; do
    $TB run --prefix mp $STAR -- $PY $S mpi_p2p --ranks 4 --repeats $R \
      --out data/runs/calibration/testbed_mpi_p2p_4ranks_launch$k.json
  done
  for k in 7 8 9 10; do
    $TB run --prefix mp $STAR -- $PY $S mpi_p2p --ranks 4 --repeats $R --bytes 131072 262144 \
      --out data/runs/calibration/testbed_mpi_p2p_4ranks_launch$k.json
  done
  $PY testbed/workloads/exchange_modes.py
  # Eight and sixteen ranks' pairwise exchanges (four and eight pairs at once), five and three
  # launches: how often a step of k pairs runs slow, against two pairs' share
  # (testbed_mpi_p2p_{8,16}ranks_launch*.json).
  for spec in "8 5" "16 3"; do
    set -- $spec
    for k in $(seq 1 $2); do
      $TB run --prefix mp --set generator.n=$1 $STAR -- $PY $S mpi_p2p --ranks $1 --repeats $R \
        --p2p-modes oneway,pairwise --bytes 262144 1048576 4194304 \
        --out data/runs/calibration/testbed_mpi_p2p_$1ranks_launch$k.json
    done
    $PY testbed/workloads/exchange_modes.py data/runs/calibration/testbed_mpi_p2p_$1ranks_launch*.json
  done
fi
if [[ $what == all || $what == heldout ]]; then
  # A fourth topology, recorded after the models were built on the three above: its profile
  # measured the same way (link, fanout, the machine's host costs and CPU costs), then gloo's
  # and OpenMPI's collectives on it, scored as they are (testbed_*_two_leaf_heldout.csv).
  TWOLEAF=testbed/topologies/two_leaf_150mbit.toml
  PTWO=data/profiles/testbed_two_leaf_150mbit.json
  CAL=${DTSIM_CALIBRATE_BIN:-target/debug/calibrate}
  held_out_profile $TWOLEAF $PTWO 150Mbps \
    262144 393216 524288 786432 1048576 1572864 2097152 4194304 16777216
  # Every row pools five launches (re-recorded so on 2026-11-29; the first recordings were one
  # launch of gloo and two mpiruns: data/runs/calibration/*.single_launch*.csv and git history).
  $TB run $TWOLEAF -- $PY $S collectives --out data/runs/testbed_gloo_two_leaf_heldout.csv \
    --profile $PTWO --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5
  for op_algs in "allreduce 0,4" "allgather 0,4" "bcast 0" "reduce_scatter 0"; do
    set -- $op_algs
    $TB run --prefix mp $TWOLEAF -- $PY $S mpi --op $1 \
      --out data/runs/testbed_mpi_two_leaf_heldout.csv --profile $PTWO --algorithms $2 \
      --repeats 5 --launches 5
  done
  # A host count none of the other rows has: six hosts of the star (4 and 8 were recorded),
  # predicted with the star's profile as it is.
  $TB run --set generator.n=6 $STAR -- $PY $S collectives \
    --out data/runs/testbed_gloo_star6_heldout.csv --profile data/profiles/testbed_star4_200mbit.json \
    --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5
  $TB run --prefix mp --set generator.n=6 $STAR -- $PY $S mpi --op allreduce \
    --out data/runs/testbed_mpi_star6_heldout.csv --profile data/profiles/testbed_star4_200mbit.json \
    --algorithms 0,4 --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  # OpenMPI's butterfly reduce_scatter, which the fixed rules pick on 2 and 3 ranks from 64 to
  # 128 KiB, recorded on 2026-11-29 after dtsim's butterfly was built (sizes whole floats per
  # rank on both counts).
  for n in 3 2; do
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op reduce_scatter \
      --out data/runs/testbed_mpi_butterfly_heldout.csv \
      --profile data/profiles/testbed_star4_200mbit.json --algorithms 0 --repeats 20 \
      --launches 5 --bytes 65544 98304 131064
  done
  # OpenMPI's broadcasts on 16 hosts of the star, recorded on 2026-11-29 after dtsim's
  # scatter_allgather (the rules' choice there from 1 MiB), its ring variant and
  # split_binary_tree were built.
  $TB run --prefix mp --set generator.n=16 $STAR -- $PY $S mpi --op bcast \
    --out data/runs/testbed_mpi_bcast16_heldout.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,4,8,9 --repeats 10 \
    --launches 5 --bytes 262144 1048576 4194304
  # A fifth topology, recorded on 2026-11-29 (night) after the day's models were built: five
  # hosts on one switch at 100 Mbit/s (a rate and an odd host count nothing was fitted to),
  # its profile measured as the two leaves' was, then gloo's and OpenMPI's collectives on it.
  STAR5=testbed/topologies/star5_100mbit.toml
  P5=data/profiles/testbed_star5_100mbit.json
  held_out_profile $STAR5 $P5 100Mbps \
    262144 393216 524288 786432 1048576 1572864 2097152 4194304
  held_out_collectives $STAR5 $P5 star5 0,6
  # OpenMPI's all_gathers (the rules: recursive doubling; bruck; neighbor exchange) and
  # all-reduces (the rules, recursive doubling, rabenseifner) on 8 hosts of the star, recorded
  # on 2026-11-29 (night) after exchanges following the call's own steps were played at their
  # captured share.
  $TB run --prefix mp --set generator.n=8 $STAR -- $PY $S mpi --op allgather \
    --out data/runs/testbed_mpi_allgather8_heldout.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,2,5 --repeats 5 \
    --launches 5 --bytes 262144 1048576 4194304
  $TB run --prefix mp --set generator.n=8 $STAR -- $PY $S mpi --op allreduce \
    --out data/runs/testbed_mpi_allreduce8_heldout.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,3,6 --repeats 5 \
    --launches 5 --bytes 262144 1048576 4194304
  # OpenMPI's broadcasts on 8 hosts of the star (the rules, basic_linear, binary tree,
  # binomial), recorded on 2026-11-29 (night) after the trees were played in every order the
  # root's children may answer in.
  $TB run --prefix mp --set generator.n=8 $STAR -- $PY $S mpi --op bcast \
    --out data/runs/testbed_mpi_bcast8_heldout.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,1,5,6 --repeats 10 \
    --launches 5 --bytes 262144 1048576 4194304
  # Every host and port captured over ten 4 MiB recursive-halving reduce_scatters on the star.
  $TB run --prefix mp $STAR -- $PY $S capture_mpi --op reduce_scatter --algorithms 2 \
    --bytes 4194304 --repeats 10 --name rh_4m
  # OpenMPI's binary-tree and binomial broadcasts on the two leaves, the same night.
  $TB run --prefix mp $TWOLEAF -- $PY $S mpi --op bcast \
    --out data/runs/testbed_mpi_bcast_two_leaf_heldout.csv --profile $PTWO --algorithms 5,6 \
    --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  # OpenMPI's reduce on the star, by the fixed rules and each modelled algorithm forced,
  # recorded on 2026-11-29 after dtsim's reduce was built.
  $TB run --prefix mp $STAR -- $PY $S mpi --op reduce \
    --out data/runs/testbed_mpi_reduce_heldout.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,1,2,3,4,5 --repeats 10 \
    --launches 5 --bytes 262144 1048576 4194304
  # Sizes no other star row has (128 KiB, 512 KiB, 2 MiB), recorded on 2026-11-29 after the
  # shapers' buckets became a token level and each row timed in its loop: gloo's collectives,
  # OpenMPI's broadcasts (the rules, chain, pipeline, binomial) and all-reduces (the rules, ring).
  $TB run $STAR -- $PY $S collectives --out data/runs/testbed_gloo_sizes_heldout.csv \
    --profile data/profiles/testbed_star4_200mbit.json --methods allreduce,allgather,broadcast,reduce \
    --bytes 131072 524288 2097152 --repeats 10 --launches 5
  for op_algs in "bcast 0,2,3,6" "allreduce 0,4"; do
    set -- $op_algs
    $TB run --prefix mp $STAR -- $PY $S mpi --op $1 --algorithms $2 \
      --bytes 131072 524288 2097152 --repeats 10 --launches 5 \
      --out data/runs/testbed_mpi_sizes_heldout.csv --profile data/profiles/testbed_star4_200mbit.json
  done
  # Two ranks' Sendrecv around the rendezvous threshold, beside it.
  $TB run --prefix mp $STAR -- $PY $S mpi_p2p --ranks 2 --repeats 20 \
    --bytes 32768 65532 81920 98304 131072 196608 \
    --out data/runs/calibration/testbed_mpi_p2p_2ranks_near_eager.json
  # Every host's egress captured over gloo all-reduces of 1 and 4 MiB on it.
  $TB run $TWOLEAF -- $PY $S capture --methods allreduce --bytes 1048576 4194304 --repeats 5 \
    --name gloo_allreduce
  # Every host and port captured over ten 1 MiB OpenMPI ring all_gathers on it.
  $TB run --prefix mp $TWOLEAF -- $PY $S capture_mpi --op allgather --algorithms 4 \
    --bytes 1048560 --repeats 10 --name ring_1m
  # A sixth topology, recorded on 2026-11-29 (late) after the packet wait was built: two leaves
  # of 3 hosts at 120 Mbit/s joined by a 240 Mbit/s link (faster than the hosts', where the two
  # leaves' above is slower), its profile measured the same way, then the same collectives.
  LEAF120=testbed/topologies/two_leaf_120mbit.toml
  P120=data/profiles/testbed_two_leaf_120mbit.json
  held_out_profile $LEAF120 $P120 120Mbps \
    262144 393216 524288 786432 1048576 1572864 2097152 4194304
  held_out_collectives $LEAF120 $P120 two_leaf120 0
  # Where the packet wait applies (checks, not imported): a ping through a link that a slower
  # stream crosses without filling it, the three leaves' 300 Mbit/s host link (2026-11-29,
  # night) and the 120 Mbit/s leaves' 240 Mbit/s link between them (the next session).
  $TB run $LEAF3 -- $PY $S packet_wait --pings 400 --launches 5 --ping 0:1 --through 4:1 \
    --beside 4:3 --out data/runs/calibration/testbed_three_leaf_100mbit_uplinks.packet_wait_host_link.json
  $TB run $LEAF120 -- $PY $S packet_wait --pings 400 --launches 5 --ping 0:3 --through 1:4 \
    --beside 1:2 --out data/runs/calibration/testbed_two_leaf_120mbit.packet_wait_fast_link.json
  # Rings on 8 hosts of the star at sizes no 8-host row had (512 KiB, 2 MiB), recorded the same
  # night after the packet wait was built: gloo's all-reduce and all_gather, OpenMPI's ring
  # all-reduce and all_gather.
  $TB run --set generator.n=8 $STAR -- $PY $S collectives \
    --out data/runs/testbed_gloo_star8_sizes_heldout.csv --profile data/profiles/testbed_star4_200mbit.json \
    --methods allreduce,allgather --bytes 524288 2097152 --repeats 5 --launches 5
  for op in allreduce allgather; do
    $TB run --prefix mp --set generator.n=8 $STAR -- $PY $S mpi --op $op \
      --out data/runs/testbed_mpi_star8_rings_heldout.csv --profile data/profiles/testbed_star4_200mbit.json \
      --algorithms 4 --bytes 524288 2097152 --repeats 5 --launches 5
  done
  # A seventh topology, recorded on 2026-11-29 (late, the next session) with the models as they
  # were: the star's 4 hosts at 400 Mbit/s, twice its rate (a message's fixed costs weigh twice
  # as much against its bytes), its profile measured the same way, then the same collectives.
  STAR400=testbed/topologies/star4_400mbit.toml
  P400=data/profiles/testbed_star4_400mbit.json
  held_out_profile $STAR400 $P400 400Mbps \
    262144 393216 524288 786432 1048576 1572864 2097152 4194304
  held_out_collectives $STAR400 $P400 star400 0,6
  # The 2:1 topology's what-if, recorded the same night: its uplinks doubled (no leaf
  # oversubscribed), the same gloo methods as its own rows, the rows naming the 2:1 profile as a
  # user asking "what if the uplinks were not oversubscribed?" would.
  ONE=testbed/topologies/two_level_1to1.toml
  two_level_gloo_rows $ONE data/runs/testbed_gloo_two_level_1to1_whatif.csv
  # OpenMPI on the 2:1 leaves (no OpenMPI row had them) and on their what-if, both rows naming
  # the 2:1 profile: the rules' and the ring all-reduce and all_gather.
  two_level_mpi_rows $TWO data/runs/testbed_mpi_two_level_2to1_heldout.csv
  two_level_mpi_rows $ONE data/runs/testbed_mpi_two_level_1to1_whatif.csv
  # What the night's two studies rest on (logs in data/runs/calibration/, not imported): the
  # hierarchical and multiring all-reduces captured on both leaf topologies, a two-host send/recv
  # ring against gloo's own, OpenMPI's ring all-reduce captured on the star at 400 and 200
  # Mbit/s, and a ping's wait at its own streaming host's egress on both stars.
  for t in $ONE $TWO; do
    $TB run $t -- $PY $S capture --methods hierarchical --bytes 16777216 --repeats 5 \
      --name gloo_hierarchical_16m
    $TB run $t -- $PY $S capture --methods multiring --bytes 16777216 --repeats 5 \
      --name gloo_multiring_16m
  done
  $TB run $ONE -- $PY $S capture --methods hierarchical --bytes 1048576 --repeats 10 \
    --name gloo_hierarchical_1m
  $TB run $TWO -- $PY $S packet_wait --ping 2:1 --through 3:0 --beside 3:2 --pings 400 \
    --launches 3 --out data/runs/calibration/testbed_two_level_2to1.packet_wait_uplink.json
  $TB run --prefix mp $TWO -- $PY $S capture_mpi --op allgather --algorithms 4 --bytes 1048576 \
    --repeats 10 --name ring_ag_1m
  $TB run --set generator.n=2 $STAR -- $PY $S collectives \
    --out data/runs/calibration/testbed_star4_200mbit_2hosts.send_recv_ring_vs_gloo.csv \
    --profile data/profiles/testbed_star4_200mbit.json --methods allreduce,multiring \
    --orders '[[0,1]]' --bytes 1048576 4194304 16777216 --repeats 10 --launches 3
  for t in $STAR400 $STAR; do
    $TB run --prefix mp $t -- $PY $S capture_mpi --op allreduce --algorithms 4 --bytes 4194304 \
      --repeats 10 --name ring_4m
    $TB run $t -- $PY $S packet_wait --ping 2:0 --through 2:1 --beside 2:3 --pings 400 \
      --launches 3 --out data/runs/calibration/testbed_$(basename $t .toml).packet_wait_own_egress.json
  done
  # OpenMPI's all-reduces (the rules, recursive doubling, rabenseifner) and all_gathers (the
  # rules, bruck, recursive doubling) on 16 hosts of the star, recorded on 2026-11-30 after a
  # step of exchanges was played as slow as its slowest pair (eight pairs at once).
  for op in "allreduce 0,3,6" "allgather 0,2,3"; do
    set -- $op
    $TB run --prefix mp --set generator.n=16 $STAR -- $PY $S mpi --op $1 \
      --out data/runs/testbed_mpi_exchanges16_heldout.csv \
      --profile data/profiles/testbed_star4_200mbit.json --algorithms $2 --repeats 5 \
      --launches 5 --bytes 262144 1048576 4194304
  done
  # OpenMPI's folding algorithms on 6 and 7 hosts of the star (recursive doubling and
  # rabenseifner all-reduces, recursive halving reduce_scatter; 1 and 4 MiB), recorded on
  # 2026-11-30 after partners coming to a step apart were played at the polling share.
  for n in 6 7; do
    for op in "allreduce 3,6" "reduce_scatter 2"; do
      set -- $op
      $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op $1 \
        --out data/runs/testbed_mpi_folds_heldout.csv \
        --profile data/profiles/testbed_star4_200mbit.json --algorithms $2 --repeats 5 \
        --launches 5 --bytes 1048576 4194304
    done
  done
  # The median call, held out (recorded on 2026-11-30 after OpenMPI played it): recursive
  # doubling and rabenseifner all-reduces on 4, 5 and 12 hosts of the star and neighbor
  # exchange all_gathers on 4 and 6 (2 and 8 MiB; 1 and 2 MiB on 12 hosts).
  M=data/runs/testbed_mpi_median_heldout.csv
  for nb in "4 2097152 8388608" "5 2097152 8388608" "12 1048576 2097152"; do
    set -- $nb
    $TB run --prefix mp --set generator.n=$1 $STAR -- $PY $S mpi --op allreduce --out $M \
      --profile $MP --algorithms 3,6 --repeats 5 --launches 5 --bytes $2 $3
  done
  for n in 4 6; do
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op allgather --out $M \
      --profile $MP --algorithms 5 --repeats 5 --launches 5 --bytes 2097152 8388608
  done
  # Recursive doubling all_gathers of 4 MiB captured on the 2:1 leaves and their what-if (the
  # cross-leaf step's pairs run apart in time), and what an OpenMPI Send leaves in its socket
  # when it returns, at 100, 200 and 400 Mbit/s.
  for t in $TWO $ONE; do
    $TB run --prefix mp $t -- $PY $S capture_mpi --op allgather --algorithms 3 --bytes 4194304 \
      --repeats 10 --name rd_ag_4m
  done
  for t in testbed/topologies/star5_100mbit.toml $STAR $STAR400; do
    $TB run --prefix mp $t -- $PY $S mpi_p2p --ranks 4 --repeats $R --p2p-modes oneway,send_return \
      --bytes 262144 1048576 4194304 16777216 \
      --out data/runs/calibration/testbed_$(basename $t .toml).mpi_p2p_send_return.json
  done
  # The FIFO head measured directly (2026-11-30): a host's 1-byte ping waiting behind its own
  # stream, three launches of 2 x 400 pings on every topology (the streams within the host's
  # leaf, so that its own link is theirs to fill), imported into every testbed profile in place
  # of the fanout fit above (docs/testbed.md, "A host's answer behind its own stream").
  for spec in "star4_200mbit 200 1 3" "star4_400mbit 400 1 3" "star5_100mbit 100 1 3" \
      "two_level_2to1 200 1 3" "three_leaf_100mbit_uplinks 300 3 3" "two_leaf_120mbit 120 1 1" \
      "two_leaf_150mbit 150 1 1"; do
    set -- $spec
    own_egress $1 $2 2:0 $3 $4 data/profiles/testbed_$1*.json
  done
  # The same ping while host 2 streams across the 100 Mbit/s link between the leaves: its own
  # 150 Mbit/s link is not full, and nothing stands queued there (a check, not imported).
  $TB run $TWOLEAF -- $PY $S packet_wait --ping 2:0 --through 2:3 --beside 2:4 --pings 400 \
    --launches 3 --out data/runs/calibration/testbed_two_leaf_150mbit.packet_wait_own_egress_across.json
fi
if [[ $what == all || $what == heldout || $what == slow_host ]]; then
  # An eighth topology, recorded on 2026-11-30 (the thirty-seventh session) with the models as
  # they were: the star's 4 hosts with host 3's link at 100 Mbit/s and the others at 200 (the
  # straggler what-if; nothing was fitted to a topology of mixed rates). Its profile measured as
  # every held-out topology's (host 0 to host 1, both at 200 Mbit/s), the FIFO head by host 2
  # pinging host 0 while it streams to host 1 (both phases: a stream to the slow host would not
  # fill host 2's link), then the held-out collectives. `slow_host` records only this.
  held_out_topology star4_slow_host 200 2:0 1 1 slow_host 0,6
fi
if [[ $what == all || $what == heldout || $what == three_leaf_200 ]]; then
  # A ninth topology, recorded on 2026-11-30 (the thirty-eighth session) with the models as
  # they were: three leaves of 2 hosts with every link at 200 Mbit/s (each leaf 2:1, the 2:1
  # leaves with a third leaf). Its profile measured as every held-out topology's, the FIFO
  # head by host 2 pinging its leaf's other host while it streams to host 0 across the uplinks,
  # then the held-out collectives. `three_leaf_200` records only this.
  LEAF3_200=testbed/topologies/three_leaf_200mbit.toml
  held_out_topology three_leaf_200mbit 200 2:3 0 4 three_leaf_200 0,6
  # What its OpenMPI rings' answers wait for between the leaves, every host and switch port
  # captured (docs/testbed.md, "Held out: three leaves at 200 Mbit/s").
  $TB run --prefix mp $LEAF3_200 -- $PY $S capture_mpi --op allgather --algorithms 4 \
    --bytes 1048560 --repeats 10 --name ring_ag_1m
  # And gloo's all_gather's small messages, there and on the star.
  for t in $LEAF3_200 $STAR; do
    $TB run $t -- $PY $S capture_mpi --gloo-method allgather --bytes 1048576 --repeats 10 \
      --name allgather_1m
  done
fi
if [[ $what == all || $what == heldout || $what == two_leaf_200 ]]; then
  # A tenth topology, recorded on 2026-11-30 (the thirty-ninth session) with the models as they
  # were: two leaves of 3 hosts, every link at 200 Mbit/s (each leaf 3:1). Its profile measured
  # as every held-out topology's, the FIFO head by host 2 pinging host 0 while it streams to
  # host 1 (its own leaf, so that its link is theirs to fill), then the held-out collectives.
  # `two_leaf_200` records only this.
  held_out_topology two_leaf_200mbit 200 2:0 1 1 two_leaf_200 0,6
fi
if [[ $what == all || $what == heldout || $what == two_leaf_mixed ]]; then
  # An eleventh topology, recorded on 2026-11-30 (the thirty-ninth session) with the models as
  # they were: two leaves of 3 hosts joined at 200 Mbit/s, leaf 0's hosts at 200 Mbit/s and leaf
  # 1's at 100 (half the nodes on slower NICs). Its profile measured as every held-out
  # topology's (host 0 to host 1 on leaf 0), the FIFO head by host 2 pinging host 0 while it
  # streams to host 1, then the held-out collectives. `two_leaf_mixed` records only this.
  held_out_topology two_leaf_mixed 200 2:0 1 1 two_leaf_mixed 0,6
fi
# Held-out collectives on N hosts of the star with the star's profile as it is: gloo's four and
# OpenMPI's rules and rings at 256 KiB, 1 and 4 MiB, five launches of 5 (testbed_*_starN_heldout).
# Usage: star_hosts_collectives N [NAME, instead of starN] [FOLDER, instead of data/runs]
star_hosts_collectives() {
  local n=$1 name=${2:-star$1} dir=${3:-data/runs}
  $TB run --set generator.n=$n $STAR -- $PY $S collectives \
    --out $dir/testbed_gloo_${name}_heldout.csv --profile data/profiles/testbed_star4_200mbit.json \
    --methods allreduce,broadcast,allgather,reduce --bytes 262144 1048576 4194304 --repeats 5 \
    --launches 5
  local op_algs
  for op_algs in "allreduce 0,4" "allgather 0,4" "bcast 0" "reduce_scatter 0"; do
    set -- $op_algs
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op $1 \
      --out $dir/testbed_mpi_${name}_heldout.csv \
      --profile data/profiles/testbed_star4_200mbit.json --algorithms $2 \
      --bytes 262144 1048576 4194304 --repeats 5 --launches 5
  done
}
if [[ $what == all || $what == heldout || $what == star3 ]]; then
  # A twelfth held-out set, recorded on 2026-11-30 (the fortieth session) with the models as
  # they were: three hosts of the star (the smallest count that is not a power of two; 2, 4, 5,
  # 6, 8 and 16 were recorded). `star3` records only this.
  star_hosts_collectives 3
fi
if [[ $what == all || $what == heldout || $what == star7 ]]; then
  # A thirteenth, the same night: seven hosts of the star (odd, between the six and eight
  # recorded). `star7` records only this.
  star_hosts_collectives 7
fi
if [[ $what == all || $what == heldout || $what == star5_10 ]]; then
  # A fourteenth and fifteenth, recorded on 2026-12-01 with the models as they were, after the
  # launch noise was built: five hosts of the star at 200 Mbit/s (five were recorded only at
  # 100 Mbit/s, star5_100mbit) and ten (more processes on the 2 cores than any count but 12 and
  # 16). `star5_10` records only these.
  star_hosts_collectives 5 star5_200
  star_hosts_collectives 10
fi
if [[ $what == all || $what == captures ]]; then
  # Captures that explain single misses (docs/testbed.md, "Captured to explain single misses",
  # and the sections they name): every host's packets (capture_mpi: and every switch port's) over
  # a short loop of one collective, written to data/runs/calibration/testbed_<topology>*.capture_*.
  # OpenMPI's 6-rank ring all-reduce of 256 KiB on the star (which messages TCP sends as one packet).
  $TB run --prefix mp --set generator.n=6 $STAR -- $PY $S capture_mpi --op allreduce \
    --algorithms 4 --bytes 262144 --repeats 10 --name ring_ar_256k
  # OpenMPI's 4 MiB ring all-reduce on the mixed-rate two leaves (the slow leaf's answers).
  $TB run --prefix mp testbed/topologies/two_leaf_mixed.toml -- $PY $S capture_mpi --op allreduce \
    --algorithms 4 --bytes 4194304 --repeats 5 --name ring_ar_4m
  # gloo's broadcast of 256 KiB on five hosts at 100 Mbit/s (which child the root serves first).
  $TB run --prefix gb testbed/topologies/star5_100mbit.toml -- $PY $S capture_mpi \
    --gloo-method broadcast --bytes 262144 --repeats 10 --name bc256k
  # gloo's all_gather of 256 KiB on six hosts of the star: its half blocks, and each rank's call.
  $TB run --prefix gb --set generator.n=6 $STAR -- $PY $S capture_mpi --gloo-method allgather \
    --bytes 262144 --repeats 20 --name ag256k_6
  $TB run --prefix gc --set generator.n=6 $STAR -- $PY $S capture --methods allgather \
    --bytes 262144 --repeats 20 --name ag256k_6_marks
  # gloo's all_gather of 256 KiB on five hosts at 100 Mbit/s and on the two leaves at 150:
  # halves streaming at the link rate, notifications waiting at the receiver's downlink only
  # (docs/testbed.md, "A debt waited out hop by hop").
  $TB run --prefix gb testbed/topologies/star5_100mbit.toml -- $PY $S capture_mpi \
    --gloo-method allgather --bytes 262144 --repeats 10 --name ag256k
  $TB run --prefix gb testbed/topologies/two_leaf_150mbit.toml -- $PY $S capture_mpi \
    --gloo-method allgather --bytes 262144 --repeats 10 --name ag256k
  # gloo's reduce of 256 KiB on five hosts at 100 Mbit/s and on eight of the star: how the
  # gather's messages to the root leave (cut by TCP's window on the five, whole on the eight).
  $TB run --prefix gr testbed/topologies/star5_100mbit.toml -- $PY $S capture_mpi \
    --gloo-method reduce --bytes 262144 --repeats 10 --name red256k
  $TB run --prefix gr --set generator.n=8 $STAR -- $PY $S capture_mpi --gloo-method reduce \
    --bytes 262144 --repeats 10 --name red256k
  # gloo's reduce of 1 MiB on the two leaves at 150 Mbit/s (its ring and its gather).
  $TB run --prefix gr testbed/topologies/two_leaf_150mbit.toml -- $PY $S capture --methods reduce \
    --bytes 1048576 --repeats 10 --name reduce_1m
  # OpenMPI's ring all-reduce of 1 MiB on three hosts of the star (its answers).
  $TB run --prefix mp --set generator.n=3 $STAR -- $PY $S capture_mpi --op allreduce \
    --algorithms 4 --bytes 1048576 --repeats 10 --name ring3_ar_1m
  # OpenMPI's recursive doubling all_gather of 256 KiB on the star's 4 hosts (its two exchanges).
  $TB run --prefix mp $STAR -- $PY $S capture_mpi --op allgather --algorithms 3 --bytes 262144 \
    --repeats 20 --name rd_ag_256k
  # The largest packet TCP handed the shapers in these captures (a message no larger passes a
  # shaper out of debt whole: docs/testbed.md, "htb's debt, played"), into every testbed
  # profile with a token bucket: the kernel's GSO limit at the testbed's MSS, not a link's.
  C=data/runs/calibration
  CAL=${DTSIM_CALIBRATE_BIN:-target/debug/calibrate}
  for p in data/profiles/testbed_*.json; do
    grep -q '"shaper_burst"' $p || continue
    $CAL import shaper-packet $C/testbed_star4_200mbit.capture_mpi_ring_ar_256k.json \
      $C/testbed_two_leaf_mixed.capture_mpi_ring_ar_4m.json \
      $C/testbed_star5_100mbit.capture_gloo_bc256k.json \
      $C/testbed_star4_200mbit.capture_gloo_ag256k_6.json \
      $C/testbed_star4_200mbit.capture_mpi_ring3_ar_1m.json \
      $C/testbed_star4_200mbit.capture_mpi_rd_ag_256k.json \
      --measured-on "the dtsim testbed (tcpdump at each host's egress; star4_200mbit, two_leaf_mixed and star5_100mbit, shaper htb)" \
      --out $p
  done
fi
if [[ $what == all || $what == barrier ]]; then
  # Barriers, recorded after dtsim's barrier was built and scored as they are
  # (testbed_barrier.csv): gloo's on 2, 4 and 8 hosts of the star and on the three leaves,
  # OpenMPI's rules and forced algorithms on 4 and 8 hosts and on the three leaves.
  B=data/runs/testbed_barrier.csv
  for n in 2 4 8; do
    $TB run --set generator.n=$n $STAR -- $PY $S collectives --out $B \
      --profile data/profiles/testbed_star4_200mbit.json --methods barrier --bytes 0 --repeats 50
  done
  $TB run $LEAF3 -- $PY $S collectives --out $B --methods barrier --bytes 0 --repeats 50 \
    --profile data/profiles/testbed_three_leaf_100mbit_uplinks.json
  for n in 4 8; do
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op barrier --out $B \
      --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,1,2,3,4,6 --bytes 0 \
      --repeats 50 --launches 3
  done
  $TB run --prefix mp $LEAF3 -- $PY $S mpi --op barrier --out $B --algorithms 0,3,4,6 \
    --profile data/profiles/testbed_three_leaf_100mbit_uplinks.json --bytes 0 --repeats 50 \
    --launches 3
  # How late a thread a message wakes runs on the machine's shared cores (a small gloo exchange
  # between two hosts, alone and beside streaming pairs), on 4 and 8 hosts, into every testbed
  # profile with host costs (the level without load: `calibrate import wake-ups`).
  for n in 4 8; do
    $TB run --set generator.n=$n $STAR -- $PY $S wakeup_load --repeats 3000
  done
  for p in testbed_star4_200mbit testbed_two_level_2to1 testbed_three_leaf_100mbit_uplinks \
      testbed_star5_100mbit testbed_two_leaf_150mbit testbed_two_leaf_120mbit; do
    $CAL import wake-ups data/runs/calibration/testbed_star4_200mbit_4hosts.wakeup_load.json \
    data/runs/calibration/testbed_star4_200mbit_8hosts.wakeup_load.json \
      --measured-on "the machine that runs the dtsim testbed's hosts ($(nproc) cores), $STAR with 4 and 8 hosts" \
      --out data/profiles/$p.json
  done
  # What gloo's barriers cost the machine's cores, per call.
  for n in 2 4 8; do
    $TB run --set generator.n=$n $STAR -- $PY $S call_gaps --methods barrier --bytes 0 \
      --repeats 200 --out data/runs/calibration/testbed_star4_200mbit_${n}hosts.call_gaps_barrier.json
  done
fi
# The star's 4- and 8-host rows recorded a second time, set beside the datasets' (not replacing them):
# how far a recording's medians move from one day to the next (docs/testbed.md, "How
# reproducible a recorded row is"). Not part of `all`.
if [[ $what == rerecord ]]; then
  RR=$(mktemp -d)
  $TB run --prefix mp $STAR -- $PY $S mpi --op allgather --out $RR/mpi.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,2,4,5 --repeats 5 \
    --launches 5 --bytes 262144 1048576 4194304
  $TB run --prefix mp $STAR -- $PY $S mpi --op reduce_scatter --out $RR/mpi.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,2,3 --repeats 5 \
    --launches 5 --bytes 65536 262144 1048576 4194304
  $TB run --prefix mp $STAR -- $PY $S mpi --out $RR/mpi_allreduce.csv \
    --profile data/profiles/testbed_star4_200mbit.json --algorithms 0,3,4,6 --repeats 5 \
    --launches 5 --bytes 262144 1048576 4194304
  $TB run $STAR -- $PY $S collectives --out $RR/gloo.csv \
    --profile data/profiles/testbed_star4_200mbit.json \
    --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5 \
    --bytes 262144 1048576 4194304
  $TB run --set generator.n=8 $STAR -- $PY $S collectives --out $RR/gloo8.csv \
    --profile data/profiles/testbed_star4_200mbit.json \
    --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5 \
    --bytes 262144 1048576 4194304
  merge_rerecording star4_200mbit $RR/mpi.csv $RR/mpi_allreduce.csv $RR/gloo.csv $RR/gloo8.csv
fi
# The mixed leaves' rows recorded a second time (2026-12-02): both libraries' methods of the
# held-out datasets, five launches each, merged beside the recorded medians.
if [[ $what == rerecord_mixed ]]; then
  RR=$(mktemp -d)
  MIXED=testbed/topologies/two_leaf_mixed.toml
  MP_MIXED=data/profiles/testbed_two_leaf_mixed.json
  for spec in "allreduce 0,4" "allgather 0,4" "reduce_scatter 0" "bcast 0,6"; do
    set -- $spec
    $TB run --prefix mp $MIXED -- $PY $S mpi --op $1 --out $RR/mpi.csv --profile $MP_MIXED \
      --algorithms $2 --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  done
  $TB run $MIXED -- $PY $S collectives --out $RR/gloo.csv --profile $MP_MIXED \
    --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5 \
    --bytes 262144 1048576 4194304
  merge_rerecording two_leaf_mixed $RR/mpi.csv $RR/gloo.csv
fi
# The three leaves' (100 Mbit/s uplinks) scored rows recorded a second time (2026-12-03): every
# row of the three datasets that hold them, as each was recorded (gloo's four collectives five
# launches of 10, OpenMPI's five launches of 5), merged beside the recorded medians.
if [[ $what == rerecord_three_leaf ]]; then
  RR=$(mktemp -d)
  MP_LEAF3=data/profiles/testbed_three_leaf_100mbit_uplinks.json
  for spec in "bcast 0,6" "allgather 0,4" "reduce_scatter 0,2"; do
    set -- $spec
    $TB run --prefix mp $LEAF3 -- $PY $S mpi --op $1 --out $RR/mpi.csv --profile $MP_LEAF3 \
      --algorithms $2 --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  done
  for spec in "allgather 4,2" "reduce_scatter 0"; do
    set -- $spec
    $TB run --prefix mp $LEAF3 -- $PY $S mpi --op $1 --out $RR/mpi.csv --profile $MP_LEAF3 \
      --algorithms $2 --repeats 5 --launches 5 --bytes 524280 2097144
  done
  $TB run $LEAF3 -- $PY $S collectives --out $RR/gloo.csv --profile $MP_LEAF3 \
    --methods allreduce,broadcast,allgather,reduce --repeats 10 --launches 5 \
    --bytes 262144 1048576 4194304 16777216
  merge_rerecording three_leaf_100mbit_uplinks $RR/mpi.csv $RR/gloo.csv
fi
# The OpenMPI rows of the 2:1 leaves and of their 1:1 what-if recorded a second time
# (2026-12-03), as recorded (the rules' and the ring all-reduce and all_gather, five launches of
# 5, both naming the 2:1 profile), merged beside the recorded medians: what a what-if's two
# sides move by between recordings.
if [[ $what == rerecord_two_level ]]; then
  RR=$(mktemp -d)
  for t in $TWO testbed/topologies/two_level_1to1.toml; do
    two_level_mpi_rows $t $RR/mpi.csv
  done
  merge_rerecording two_level $RR/mpi.csv
fi
# Two held-out topologies' rows recorded a second time (2026-12-03), as recorded
# (held_out_collectives into a scratch folder), merged beside the recorded medians.
if [[ $what == rerecord_held_out ]]; then
  RR=$(mktemp -d)
  for spec in "three_leaf_200mbit three_leaf_200 0,6" "two_leaf_200mbit two_leaf_200 0,6"; do
    set -- $spec
    held_out_collectives testbed/topologies/$1.toml data/profiles/testbed_$1.json $2 $3 $RR
  done
  merge_rerecording held_out_200mbit_leaves
fi
# Three held-out star datasets recorded a second time (2026-12-03; the star's that record
# fastest, about 22 minutes of calls together: 4 hosts at 400 Mbit/s, 3 and 5 hosts at 200),
# as recorded, merged beside the recorded medians.
if [[ $what == rerecord_star_held_out ]]; then
  RR=$(mktemp -d)
  held_out_collectives testbed/topologies/star4_400mbit.toml data/profiles/testbed_star4_400mbit.json \
    star400 0,6 $RR
  star_hosts_collectives 3 star3 $RR
  star_hosts_collectives 5 star5_200 $RR
  merge_rerecording held_out_stars
fi
# The star's 7- and 10-host held-out datasets recorded a second time (2026-12-03), each merged
# beside its recorded medians as soon as it is done.
if [[ $what == rerecord_star7_10 ]]; then
  for n in 7 10; do
    RR=$(mktemp -d)
    star_hosts_collectives $n star$n $RR
    merge_rerecording star$n
  done
fi
# The 120 Mbit/s two leaves' held-out datasets recorded a second time (2026-12-03), as recorded,
# merged beside the recorded medians.
if [[ $what == rerecord_two_leaf120 ]]; then
  RR=$(mktemp -d)
  held_out_collectives testbed/topologies/two_leaf_120mbit.toml \
    data/profiles/testbed_two_leaf_120mbit.json two_leaf120 0 $RR
  merge_rerecording two_leaf_120mbit
fi
# The last four topologies' rows recorded a second time (2026-12-03), as recorded, each merged
# beside its recorded medians as soon as it is done: the slow host (both libraries), gloo on
# the 2:1 leaves and their 1:1 what-if (both naming the 2:1 profile, five launches of 10), the
# five hosts at 100 Mbit/s, and the two leaves at 150 Mbit/s (gloo's four and OpenMPI's rules
# and rings at 256 KiB-16 MiB, its binary-tree and binomial broadcasts at 256 KiB-4 MiB).
if [[ $what == rerecord_last_topologies ]]; then
  RR=$(mktemp -d)
  held_out_collectives testbed/topologies/star4_slow_host.toml \
    data/profiles/testbed_star4_slow_host.json slow_host 0,6 $RR
  merge_rerecording star4_slow_host
  RR=$(mktemp -d)
  for t in two_level_2to1 two_level_1to1; do
    two_level_gloo_rows testbed/topologies/$t.toml $RR/gloo_$t.csv
  done
  merge_rerecording two_level_gloo
  RR=$(mktemp -d)
  held_out_collectives testbed/topologies/star5_100mbit.toml \
    data/profiles/testbed_star5_100mbit.json star5 0,6 $RR
  merge_rerecording star5_100mbit
  RR=$(mktemp -d)
  TWOLEAF=testbed/topologies/two_leaf_150mbit.toml
  PTWO=data/profiles/testbed_two_leaf_150mbit.json
  $TB run $TWOLEAF -- $PY $S collectives --out $RR/gloo.csv --profile $PTWO \
    --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5
  for op_algs in "allreduce 0,4" "allgather 0,4" "bcast 0" "reduce_scatter 0"; do
    set -- $op_algs
    $TB run --prefix mp $TWOLEAF -- $PY $S mpi --op $1 --out $RR/mpi.csv --profile $PTWO \
      --algorithms $2 --repeats 5 --launches 5
  done
  $TB run --prefix mp $TWOLEAF -- $PY $S mpi --op bcast --out $RR/mpi_bcast.csv --profile $PTWO \
    --algorithms 5,6 --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  merge_rerecording two_leaf_150mbit
fi
# The star's remaining rows recorded a second time (2026-12-03), as recorded, in four parts each
# merged beside its recorded medians as soon as it is done, those with the most groups per
# minute of calls first: (1) the held-out sizes and OpenMPI's reduce, (2) 6 and 8 hosts and the
# butterfly on 2 and 3, (3) 16 hosts, the folds and the median call, (4) the 4- and 8-host
# datasets' rows the `rerecord` target left (gloo's parameter server and 16 MiB rows, OpenMPI's
# broadcasts, basic-linear and segmented-ring all-reduces and 16 MiB rows; a row recorded
# within a larger loop is recorded here alone at its size). The training steps: rerecord_training.
# Each part is also a target of its own: rerecord_star_sizes, rerecord_star_hosts,
# rerecord_star_many and rerecord_star_main_rest.
if [[ $what == rerecord_star_rest || $what == rerecord_star_sizes ]]; then
  RR=$(mktemp -d)
  $TB run $STAR -- $PY $S collectives --out $RR/gloo_sizes.csv --profile $MP \
    --methods allreduce,allgather,broadcast,reduce --bytes 131072 524288 2097152 --repeats 10 \
    --launches 5
  for op_algs in "bcast 0,2,3,6" "allreduce 0,4"; do
    set -- $op_algs
    $TB run --prefix mp $STAR -- $PY $S mpi --op $1 --algorithms $2 \
      --bytes 131072 524288 2097152 --repeats 10 --launches 5 --out $RR/mpi_sizes.csv --profile $MP
  done
  $TB run --prefix mp $STAR -- $PY $S mpi --op reduce --out $RR/mpi_reduce.csv --profile $MP \
    --algorithms 0,1,2,3,4,5 --repeats 10 --launches 5 --bytes 262144 1048576 4194304
  merge_rerecording star4_200mbit_sizes
fi
if [[ $what == rerecord_star_rest || $what == rerecord_star_hosts ]]; then
  RR=$(mktemp -d)
  $TB run --set generator.n=6 $STAR -- $PY $S collectives --out $RR/gloo6.csv --profile $MP \
    --methods allreduce,broadcast,allgather,reduce --repeats 5 --launches 5
  $TB run --prefix mp --set generator.n=6 $STAR -- $PY $S mpi --op allreduce --out $RR/mpi6.csv \
    --profile $MP --algorithms 0,4 --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  $TB run --set generator.n=8 $STAR -- $PY $S collectives --out $RR/gloo8.csv --profile $MP \
    --methods allreduce,allgather --bytes 524288 2097152 --repeats 5 --launches 5
  for op in allreduce allgather; do
    $TB run --prefix mp --set generator.n=8 $STAR -- $PY $S mpi --op $op --out $RR/mpi8_rings.csv \
      --profile $MP --algorithms 4 --bytes 524288 2097152 --repeats 5 --launches 5
  done
  for op_algs in "allgather 0,2,5 5" "allreduce 0,3,6 5" "bcast 0,1,5,6 10"; do
    set -- $op_algs
    $TB run --prefix mp --set generator.n=8 $STAR -- $PY $S mpi --op $1 --out $RR/mpi8_$1.csv \
      --profile $MP --algorithms $2 --repeats $3 --launches 5 --bytes 262144 1048576 4194304
  done
  for n in 3 2; do
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op reduce_scatter \
      --out $RR/mpi_butterfly.csv --profile $MP --algorithms 0 --repeats 20 --launches 5 \
      --bytes 65544 98304 131064
  done
  merge_rerecording star4_200mbit_hosts
fi
if [[ $what == rerecord_star_rest || $what == rerecord_star_many ]]; then
  RR=$(mktemp -d)
  for op in "allreduce 0,3,6" "allgather 0,2,3"; do
    set -- $op
    $TB run --prefix mp --set generator.n=16 $STAR -- $PY $S mpi --op $1 --out $RR/mpi16.csv \
      --profile $MP --algorithms $2 --repeats 5 --launches 5 --bytes 262144 1048576 4194304
  done
  $TB run --prefix mp --set generator.n=16 $STAR -- $PY $S mpi --op bcast --out $RR/mpi16_bcast.csv \
    --profile $MP --algorithms 0,4,8,9 --repeats 10 --launches 5 --bytes 262144 1048576 4194304
  for n in 6 7; do
    for op in "allreduce 3,6" "reduce_scatter 2"; do
      set -- $op
      $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op $1 --out $RR/mpi_folds.csv \
        --profile $MP --algorithms $2 --repeats 5 --launches 5 --bytes 1048576 4194304
    done
  done
  for nb in "4 2097152 8388608" "5 2097152 8388608" "12 1048576 2097152"; do
    set -- $nb
    $TB run --prefix mp --set generator.n=$1 $STAR -- $PY $S mpi --op allreduce \
      --out $RR/mpi_median.csv --profile $MP --algorithms 3,6 --repeats 5 --launches 5 --bytes $2 $3
  done
  for n in 4 6; do
    $TB run --prefix mp --set generator.n=$n $STAR -- $PY $S mpi --op allgather \
      --out $RR/mpi_median.csv --profile $MP --algorithms 5 --repeats 5 --launches 5 \
      --bytes 2097152 8388608
  done
  merge_rerecording star4_200mbit_many
fi
if [[ $what == rerecord_star_rest || $what == rerecord_star_main_rest ]]; then
  RR=$(mktemp -d)
  $TB run $STAR -- $PY $S collectives --out $RR/gloo.csv --profile $MP --methods ps \
    --repeats 10 --launches 5
  $TB run $STAR -- $PY $S collectives --out $RR/gloo.csv --profile $MP \
    --methods allreduce,broadcast,allgather,reduce --repeats 10 --launches 5 --bytes 16777216
  $TB run --set generator.n=8 $STAR -- $PY $S collectives --out $RR/gloo.csv --profile $MP \
    --methods allreduce,broadcast,allgather,reduce --repeats 10 --launches 5 --bytes 16777216
  $TB run --prefix mp $STAR -- $PY $S mpi --out $RR/mpi_allreduce.csv --profile $MP \
    --algorithms 1,5 --repeats 10 --launches 5
  $TB run --prefix mp $STAR -- $PY $S mpi --out $RR/mpi_allreduce.csv --profile $MP \
    --algorithms 0,3,4,6 --repeats 10 --launches 5 --bytes 16777216
  $TB run --prefix mp $STAR -- $PY $S mpi --op bcast --out $RR/mpi.csv --profile $MP \
    --algorithms 0,1,2,3,5,6 --repeats 5 --launches 5
  $TB run --prefix mp $STAR -- $PY $S mpi --op allgather --out $RR/mpi.csv --profile $MP \
    --algorithms 0,2,4,5 --repeats 5 --launches 5 --bytes 16777216
  $TB run --prefix mp $STAR -- $PY $S mpi --op reduce_scatter --out $RR/mpi.csv --profile $MP \
    --algorithms 0,2,3 --repeats 5 --launches 5 --bytes 16777216
  merge_rerecording star4_200mbit_rest
fi
# The training steps recorded a second time (2026-12-03), as recorded: the last scored rows
# the re-recordings above had left.
if [[ $what == rerecord_training ]]; then
  RR=$(mktemp -d)
  $TB run --prefix tr $STAR -- $PY $S training --out $RR/training.csv \
    --methods ddp,allreduce_after_backward,parameter_server --repeats $((R + 2)) --keep-files
  merge_rerecording training $RR/training.csv
fi
# A recursive-doubling all-reduce's steps call by call, without a packet capture (2026-12-03):
# written out in mpi4py with every rank's clock at each step (mpi_p2p.py rd_steps), beside
# OpenMPI's own recursive doubling in the same launch; counted by exchange_modes.py --steps.
if [[ $what == rd_chain ]]; then
  for k in $(seq 1 ${LAUNCHES:-20}); do
    $TB run --prefix mp $STAR -- $PY $S mpi_p2p --ranks 4 --repeats 10 \
      --p2p-modes oneway,rd_steps,rd_library --bytes 1048576 4194304 \
      --out data/runs/calibration/testbed_mpi_rd_steps_4ranks_launch$k.json
  done
fi
# The 2:1 topology's second what-if, recorded on 2026-12-03 (session 60) with the models as they
# were: its uplinks halved (4:1 at each leaf), the same collectives as the 1:1 what-if's, the
# rows naming the 2:1 profile as a user asking "what if the uplinks were twice as
# oversubscribed?" would (testbed/topologies/two_level_4to1.toml).
if [[ $what == all || $what == two_level_4to1 ]]; then
  FOUR=testbed/topologies/two_level_4to1.toml
  two_level_gloo_rows $FOUR data/runs/testbed_gloo_two_level_4to1_whatif.csv
  two_level_mpi_rows $FOUR data/runs/testbed_mpi_two_level_4to1_whatif.csv
fi
# The 4:1 what-if's rows recorded a second time (2026-12-03, the same session, after the first
# was scored), as recorded, merged beside the recorded medians.
if [[ $what == rerecord_two_level_4to1 ]]; then
  RR=$(mktemp -d)
  two_level_gloo_rows testbed/topologies/two_level_4to1.toml $RR/gloo.csv
  two_level_mpi_rows testbed/topologies/two_level_4to1.toml $RR/mpi.csv
  merge_rerecording two_level_4to1
fi
if [[ $what == all || $what == training ]]; then
  $TB run --prefix tr $STAR -- $PY $S training --out data/runs/testbed_training.csv \
    --methods ddp,allreduce_after_backward,parameter_server --repeats $((R + 2))
fi
if [[ $what == all || $what == trace ]]; then
  # A traced 2-rank DDP step (PyTorch ET + Kineto per rank), then the same step as Chakra ET.
  $TB run --prefix tc $STAR -- $PY $S trace --ranks 2 --out data/traces/testbed_ddp_cnn
  ${DTSIM_BIN:-target/debug/dtsim} trace convert data/traces/testbed_ddp_cnn \
    --out data/traces/testbed_ddp_cnn_chakra
fi
