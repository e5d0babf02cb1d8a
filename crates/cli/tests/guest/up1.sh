# One CPU on a uniprocessor kernel (CONFIG_SMP off): paper 000's own 1T-UP.
. /bin/lib.sh
topo_and_placements 1c1t
up_kernel_checks
finish
