# 1 socket x 2 cores x 2 threads on the SMP kernel built beside the uniprocessor one
# (smt-vm.sh --kernel sched-core): the run that `compare` sets beside up1.sh's.
. /bin/lib.sh
topo_and_placements 1c1t 1c2t
compare_run smp-run 1c1t,1c1t-up,1c2t
check "smp-run: every CPU online afterwards" 0-3 "$(cat $C/online)"
finish
