# 1 core with 4 threads.
. /bin/lib.sh
topo_and_placements 1c2t 1c4t
smt_off_on 0
smt_hold_killed
finish
