# 1 socket x 2 cores x 2 threads: everything.
. /bin/lib.sh
topo_and_placements 1c1t 1c2t 2c1t 2c2t
smt_off_on 0,2
smt_off_for_command
smt_hold_killed
uniprocessor
smtlab bench int-ops --quick -p 1c1t -p 1c2t >/tmp/b.out 2>&1 \
  && grep -q '^1c2t ' /tmp/b.out && ok "bench int-ops on 1c1t and 1c2t" || { fail "bench int-ops"; cat /tmp/b.out; }
smtlab run --suite quick --bench null-syscall --placements 1c1t,1c2t --db /tmp/run.db >/tmp/r.out 2>&1 \
  && ok "run --suite quick on null-syscall, 1c1t and 1c2t" || { fail "run --suite quick"; tail -n 5 /tmp/r.out; }
smtlab exec --placements 1c1t,1c2t --reps 2 --warmup 0 --db /tmp/exec.db -- true >/tmp/e.out 2>&1 \
  && grep -q 'SMT yield (1c2t/1c1t)' /tmp/e.out && ok "exec -- true on 1c1t and 1c2t" || { fail "exec"; tail -n 5 /tmp/e.out; }
corun_checks
smt_both_checks
advise_checks
irq_checks
finish
