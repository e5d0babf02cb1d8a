# 2 sockets x 2 cores x 2 threads, one NUMA node per socket.
. /bin/lib.sh
topo_and_placements 1c2t 2c2t 2c1t/scatter 4c2t
smt_off_on 0,2,4,6
uniprocessor
predict_checks
finish
