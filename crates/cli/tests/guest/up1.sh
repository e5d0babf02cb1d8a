# One CPU on a uniprocessor kernel (CONFIG_SMP off): paper 000's own 1T-UP.
. /bin/lib.sh
topo_and_placements 1c1t
up_kernel_checks
# 1c1t and 1t-up-kernel are one placement here: measured once.
compare_run up-run 1c1t,1t-up-kernel
grep -q '1t-up-kernel: the same placement as 1c1t here' /tmp/up-run.out \
  && ok "up: 1c1t and 1t-up-kernel measured once" || { fail "up: no note on 1t-up-kernel"; head -n 20 /tmp/up-run.out; }
finish
