# 1 socket x 2 cores x 2 threads on a kernel with core scheduling: each security mode
# (smt-on, coresched per thread, process, process group and cgroup, smt-off), two
# distrusting tenants with a cookie each, forced idle with and without schedstats, and
# no cookie left after a run nor after kill -9.
. /bin/lib.sh
# cgroup v2, where smtlab makes a cgroup for the programs it starts (a cookie per cgroup,
# forced idle read from the cgroup's cpu.stat).
mount -t cgroup2 none /sys/fs/cgroup
topo_and_placements 1c1t 1c2t
security_checks
finish
