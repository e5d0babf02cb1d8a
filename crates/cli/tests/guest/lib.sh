# Helpers for the guest scripts (busybox sh). Each check prints `ok: NAME` or
# `FAIL: NAME: ...`; sections for the host to parse start with `@@ NAME`.
C=/sys/devices/system/cpu
fails=0

ok() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { # NAME EXPECTED ACTUAL
  if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: expected '$2', got '$3'"; fi
}
# Waits until FILE reads VALUE, at most TENTHS tenths of a second.
wait_for() {
  i=0
  while [ "$i" -lt "$3" ]; do
    [ "$(cat "$1")" = "$2" ] && return 0
    sleep 0.1
    i=$((i + 1))
  done
  return 1
}
section() { echo "@@ $1"; }

# The kernel's own sibling lists, for the host to compare smtlab's answers with.
siblings() {
  section siblings
  for d in $C/cpu[0-9]*; do
    [ -r "$d/topology/thread_siblings_list" ] && echo "${d##*/cpu} $(cat "$d/topology/thread_siblings_list")"
  done
}

topo_and_placements() {
  siblings
  section topo
  smtlab topo --json || fail "smtlab topo --json exited with $?"
  section placements
  smtlab placements --json "$@" || fail "smtlab placements --json exited with $?"
  section checks
}

# smtlab smt off / on, persistently. $1: the CPUs online with SMT off.
smt_off_on() {
  all=$(cat $C/online)
  smtlab smt | grep -q '^SMT control  on' && ok "smtlab smt shows control on" || fail "smtlab smt: $(smtlab smt 2>&1 | head -n1)"
  smtlab smt off >/dev/null || fail "smtlab smt off exited with $?"
  check "smt off: control" off "$(cat $C/smt/control)"
  check "smt off: active" 0 "$(cat $C/smt/active)"
  check "smt off: online CPUs" "$1" "$(cat $C/online)"
  smtlab smt --json | grep -q '"control": "off"' && ok "smtlab smt --json shows off" || fail "smtlab smt --json does not show off"
  smtlab smt on >/dev/null || fail "smtlab smt on exited with $?"
  check "smt on: control" on "$(cat $C/smt/control)"
  check "smt on: online CPUs" "$all" "$(cat $C/online)"
}

# SMT off for a command, then back on.
smt_off_for_command() {
  all=$(cat $C/online)
  seen=$(smtlab smt off -- cat $C/smt/control 2>/dev/null)
  check "smt off -- CMD: the command saw" off "$seen"
  check "smt off -- CMD: control after" on "$(cat $C/smt/control)"
  check "smt off -- CMD: online after" "$all" "$(cat $C/online)"
}

# smt off --hold, ended by SIGTERM (restored before smtlab dies) and by SIGKILL
# (restored by the guardian).
smt_hold_killed() {
  all=$(cat $C/online)
  smtlab smt off --hold 60 2>/dev/null &
  pid=$!
  wait_for $C/smt/control off 100 && ok "hold: SMT off while held" || fail "hold: SMT never went off"
  kill -TERM "$pid"
  wait "$pid"
  check "SIGTERM: smtlab died of the signal" 143 "$?"
  check "SIGTERM: control restored" on "$(cat $C/smt/control)"
  check "SIGTERM: online restored" "$all" "$(cat $C/online)"

  smtlab smt off --hold 60 2>/dev/null &
  pid=$!
  wait_for $C/smt/control off 100 || fail "hold: SMT never went off (second time)"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  # The guardian restores once it sees smtlab gone; give it a moment.
  wait_for $C/smt/control on 100
  wait_for $C/online "$all" 100
  check "kill -9: control restored by the guardian" on "$(cat $C/smt/control)"
  check "kill -9: online restored by the guardian" "$all" "$(cat $C/online)"
}

# 1T-UP against 1c1t: the other CPUs offline during the 1T-UP cell only; and after
# kill -9 in the middle of a 1T-UP cell.
uniprocessor() {
  all=$(cat $C/online)
  smtlab bench null-syscall --quick -p 1T-UP -p 1c1t >/tmp/up.out 2>&1 &
  pid=$!
  seen_up=no
  seen_all=no
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 1200 ]; do
    case "$(cat $C/online)" in
      0) seen_up=yes ;;
      "$all") [ $seen_up = yes ] && seen_all=yes ;;
    esac
    sleep 0.05
    i=$((i + 1))
  done
  wait "$pid"
  check "1T-UP bench: exit status" 0 "$?"
  check "1T-UP bench: only CPU 0 online during the 1T-UP cell" yes "$seen_up"
  check "1T-UP bench: all CPUs back for the 1c1t cell" yes "$seen_all"
  check "1T-UP bench: online afterwards" "$all" "$(cat $C/online)"
  grep -q '^1c1t-up ' /tmp/up.out && grep -q '^1c1t ' /tmp/up.out \
    && ok "1T-UP bench: rows for 1c1t-up and 1c1t" || { fail "1T-UP bench: rows missing"; cat /tmp/up.out; }

  smtlab bench null-syscall -p 1T-UP >/dev/null 2>&1 &
  pid=$!
  wait_for $C/online 0 300 && ok "1T-UP: others offline before kill -9" || fail "1T-UP: the others never went offline"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  wait_for $C/online "$all" 100
  check "1T-UP kill -9: online restored by the guardian" "$all" "$(cat $C/online)"
}

finish() {
  section end
  echo "failures: $fails"
  [ "$fails" = 0 ]
}

# predict in both forms on a kernel with SMT siblings: two workloads that are no ruler,
# profiled against two rulers, two training pairs and one held out; the host checks the
# document (both forms, a model or the reason for none per form) and the CPUs of every
# stored cell against the kernel's sibling lists.
predict_checks() {
  if smtlab predict --quick stat aim-add-int --rulers int,syscall --train 2 --validate 1 \
    --json --db /tmp/pr.db >/tmp/pr.json 2>/tmp/pr.err; then
    ok "predict: profiles, model and validation in both forms"
    section predict
    cat /tmp/pr.json
    section predict-run
    smtlab report latest --json --db /tmp/pr.db || fail "report of the predict run exited with $?"
    section checks
  else
    fail "predict exited with $?"; tail -n 5 /tmp/pr.err
  fi
}

# Co-runs on real siblings: corun's sibling and two-core forms (the host checks the CPUs
# of every cell against the kernel's sibling lists), penalty's sibling form, and util's
# curve with SMT off and on (the state put back afterwards).
corun_checks() {
  all=$(cat $C/online)
  if smtlab corun null-syscall --quick --db /tmp/c.db >/tmp/c.out 2>&1; then
    grep -q 'partner on the SMT sibling' /tmp/c.out && ok "corun: sibling matrix shown" \
      || { fail "corun: no sibling matrix"; cat /tmp/c.out; }
    section corun
    smtlab report latest --json --db /tmp/c.db || fail "report of the corun run exited with $?"
    section checks
  else
    fail "corun exited with $?"; cat /tmp/c.out
  fi
  smtlab penalty --quick --json --cmd t=true --hogs null-syscall --samples 3 --forms sibling \
    --db /tmp/c.db >/tmp/p.out 2>/tmp/p.err \
    && grep -q '"form": "sibling"' /tmp/p.out && ok "penalty: sibling form measured" \
    || { fail "penalty"; cat /tmp/p.out /tmp/p.err; }
  # Paper 004 s3: siblings that spin (with and without PAUSE), poll or idle in the
  # kernel, each beside the task on its SMT sibling.
  smtlab penalty --quick --json --cmd t=true --hogs spin,spin-pause,idle-poll,idle-kernel \
    --samples 3 --forms sibling --db /tmp/c.db >/tmp/pi.out 2>/tmp/pi.err \
    || { fail "penalty with idle partners exited with $?"; cat /tmp/pi.err; }
  for hog in spin spin-pause idle-poll idle-kernel; do
    grep -q "\"hog\": \"$hog\"" /tmp/pi.out && ok "penalty: $hog on the sibling measured" \
      || fail "penalty: no $hog row"
  done
  check "penalty: idle partners all on the sibling" 4 "$(grep -c '"form": "sibling"' /tmp/pi.out)"
  smtlab util --json --steps 1 --step-ms 100 --samples 2 --smt off,on --db /tmp/c.db \
    >/tmp/u.out 2>/tmp/u.err || { fail "util --smt off,on exited with $?"; cat /tmp/u.err; }
  check "util: points with SMT off" 2 "$(grep -c '"smt": "off"' /tmp/u.out)"
  check "util: points with SMT on" 2 "$(grep -c '"smt": "on"' /tmp/u.out)"
  check "util: control restored" on "$(cat $C/smt/control)"
  check "util: online restored" "$all" "$(cat $C/online)"
}

# bench --smt both: the cells of both states, 1c2t skipped with SMT off, the side-by-side
# table, the state put back afterwards and after kill -9 in the middle of the run.
smt_both_checks() {
  all=$(cat $C/online)
  smtlab bench null-syscall --quick --max-samples 3 -p 1c1t -p 1c2t --smt both --json \
    >/tmp/sb.json 2>/tmp/sb.err || { fail "bench --smt both --json exited with $?"; cat /tmp/sb.err; }
  grep -q '"smt": "off"' /tmp/sb.json && grep -q '"smt": "on"' /tmp/sb.json \
    && ok "bench --smt both: cells with SMT off and on" || { fail "bench --smt both: states missing"; head -c 2000 /tmp/sb.json; }
  grep -q 'with SMT off' /tmp/sb.json && ok "bench --smt both: 1c2t skipped with SMT off" \
    || fail "bench --smt both: no 1c2t skip with SMT off"
  check "bench --smt both: control restored" on "$(cat $C/smt/control)"
  check "bench --smt both: online restored" "$all" "$(cat $C/online)"
  smtlab bench null-syscall --quick --max-samples 3 -p 1c1t --smt on,off >/tmp/sb.out 2>&1 \
    && grep -q 'SMT off vs on' /tmp/sb.out && ok "bench --smt on,off: SMT off vs on table" \
    || { fail "bench --smt on,off: no table"; cat /tmp/sb.out; }
  check "bench --smt on,off: control restored" on "$(cat $C/smt/control)"
  smtlab run --suite quick --bench null-syscall --placements 1c1t --smt both --db /tmp/rs.db \
    >/tmp/rs.out 2>&1 || { fail "run --smt both exited with $?"; tail -n 5 /tmp/rs.out; }
  smtlab report latest --json --db /tmp/rs.db >/tmp/rs.json 2>&1
  grep -q '"smt": "off"' /tmp/rs.json && grep -q '"smt": "on"' /tmp/rs.json \
    && ok "run --smt both: stored cells with SMT off and on" || { fail "run --smt both: states missing"; tail -n 5 /tmp/rs.out; }
  smtlab report latest --db /tmp/rs.db 2>&1 | grep -q 'SMT off vs on' \
    && ok "report of the run --smt both: SMT off vs on table" || fail "report: no SMT off vs on table"
  check "run --smt both: control restored" on "$(cat $C/smt/control)"
  check "run --smt both: online restored" "$all" "$(cat $C/online)"
  smtlab exec --placements 1c1t --smt both --reps 2 --warmup 0 --db /tmp/es.db -- true >/tmp/es.out 2>&1 \
    && grep -q 'SMT off vs on' /tmp/es.out && ok "exec --smt both: SMT off vs on table" \
    || { fail "exec --smt both"; tail -n 5 /tmp/es.out; }
  check "exec --smt both: control restored" on "$(cat $C/smt/control)"
  smtlab run --bench null-syscall --placements 1c1t --smt off,on --db /tmp/rk.db >/dev/null 2>&1 &
  pid=$!
  wait_for $C/smt/control off 300 || fail "run --smt: SMT never went off"
  kill -TERM "$pid"
  wait "$pid"
  check "run --smt SIGTERM: interrupted (128 + SIGTERM)" 143 "$?"
  check "run --smt SIGTERM: control restored" on "$(cat $C/smt/control)"
  check "run --smt SIGTERM: online restored" "$all" "$(cat $C/online)"

  smtlab bench null-syscall -p 1c1t --smt off,on >/dev/null 2>&1 &
  pid=$!
  wait_for $C/smt/control off 300 && ok "bench --smt: SMT off during the run" || fail "bench --smt: SMT never went off"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  wait_for $C/smt/control on 100
  wait_for $C/online "$all" 100
  check "bench --smt kill -9: control restored by the guardian" on "$(cat $C/smt/control)"
  check "bench --smt kill -9: online restored by the guardian" "$all" "$(cat $C/online)"
}

advise_checks() {
  all=$(cat $C/online)
  smtlab advise null-syscall --quick --smt both --json --db /tmp/ad.db >/tmp/ad.json 2>/tmp/ad.err \
    || { fail "advise --smt both exited with $?"; cat /tmp/ad.err; }
  grep -q '"schema": "smtlab.advice/1"' /tmp/ad.json && grep -q 'speed-up, machine (SMT on/off)' /tmp/ad.json \
    && ok "advise --smt both: the whole machine with SMT off and on" \
    || { fail "advise --smt both: no SMT on/off figure"; head -c 2000 /tmp/ad.json; }
  check "advise --smt both: control restored" on "$(cat $C/smt/control)"
  check "advise --smt both: online restored" "$all" "$(cat $C/online)"
  smtlab advise web-slo --quick --slo p99=1s --param max_rate=2000 --sweep 50 --db /tmp/aw.db >/tmp/aw.txt 2>/tmp/aw.err \
    && grep -q '^1c2t ' /tmp/aw.txt && grep -q 'answer: .*at p99 <= 1s' /tmp/aw.txt \
    && ok "advise web-slo: 1c2t measured and an answer at the target (TCG figures mean nothing)" \
    || { fail "advise web-slo"; tail -n 5 /tmp/aw.err; head -c 3000 /tmp/aw.txt; }
  # Which partners give a pair's figure depends on how many of the partner's own samples
  # fit in the workload's (TCG timings), so what is checked is that the partners were
  # measured on the sibling and an answer came out.
  smtlab advise int-ops --quick --partners --json --db /tmp/ap.db >/tmp/ap.json 2>/tmp/ap.err \
    && grep -q '"schema": "smtlab.advice/1"' /tmp/ap.json \
    && smtlab report 1 --db /tmp/ap.db --json | grep -q '"form": "sibling"' \
    && ok "advise --partners: the workload measured beside partners on its sibling" \
    || { fail "advise --partners"; tail -n 5 /tmp/ap.err; head -c 2000 /tmp/ap.json; }
}

# irq=sibling / other-core on web-static (paper 004 s3): loopback's receive steering
# (rps_cpus) goes to the sibling of CPU 0 (or another core) during the cell, comes back
# after it, and after kill -9 in the middle of one (the guardian). The copying server
# (seda) serves the load.
irq_checks() {
  rps=/sys/class/net/lo/queues/rx-0/rps_cpus
  if [ ! -e "$rps" ]; then
    ok "irq: skipped, this kernel has no $rps (CONFIG_RPS off)"
    return
  fi
  before=$(cat $rps)
  for target in sibling other-core; do
    smtlab bench web-static --quick -p 1c1t --param server=seda --param irq=$target \
      --param duration=1s --max-samples 3 >/tmp/irq.out 2>&1 &
    pid=$!
    seen=no
    i=0
    while [ "$i" -lt 600 ] && kill -0 "$pid" 2>/dev/null; do
      now=$(cat $rps)
      [ "$now" != "$before" ] && { seen=$now; break; }
      sleep 0.05
      i=$((i + 1))
    done
    wait "$pid"
    rc=$?
    check "irq=$target: web-static server=seda exit" 0 "$rc"
    [ "$rc" = 0 ] || cat /tmp/irq.out
    grep -q '^1c1t ' /tmp/irq.out && ok "irq=$target: the seda cell was measured" || fail "irq=$target: no 1c1t row"
    [ "$seen" != no ] && ok "irq=$target: rps_cpus steered to $seen during the cell" || fail "irq=$target: rps_cpus never changed"
    check "irq=$target: rps_cpus restored after the cell" "$before" "$(cat $rps)"
  done
  smtlab bench web-static -p 1c1t --param server=seda --param irq=sibling \
    --param duration=2s --max-samples 20 >/dev/null 2>&1 &
  pid=$!
  i=0
  while [ "$i" -lt 600 ] && [ "$(cat $rps)" = "$before" ]; do sleep 0.05; i=$((i + 1)); done
  [ "$(cat $rps)" != "$before" ] && ok "irq kill -9: steered before the kill" || fail "irq kill -9: never steered"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  wait_for $rps "$before" 100
  check "irq kill -9: rps_cpus restored by the guardian" "$before" "$(cat $rps)"
}

# nfs-sfs on the kernel's nfsd (paper 004 s4), where the guest was given it
# (scripts/smt-vm.sh --nfsd): the skip reason while the module is not loaded, then cells
# on 1c1t and 1c2t with nfsd's threads pinned to the placement's core, a cell over UDP
# (SFS97's transport), and nothing left afterwards nor after kill -9 in the middle of a
# cell: no nfsd thread, daemon or mount.
nfsd_threads() { grep -l '^nfsd$' /proc/[0-9]*/comm 2>/dev/null | wc -l; }
nfs_left() { # what a finished or killed cell must not leave
  n=$(nfsd_threads)
  [ "$n" = 0 ] || echo "$n nfsd threads"
  # The daemons, and the namespace's holder (a shell whose script mounts smtlab-nfs-run).
  for d in /proc/[0-9]*; do
    name=$(sed -n 's/^Name:[[:space:]]*//p' "$d/status" 2>/dev/null)
    case "$name" in
      rpcbind|rpc.mountd|rpc.nfsd|exportfs) ;;
      *) grep -q smtlab-nfs-run "$d/cmdline" 2>/dev/null || continue ;;
    esac
    echo "$name ${d#/proc/} $(sed -n 's/^State:[[:space:]]*//p' "$d/status" 2>/dev/null) parent $(sed -n 's/^PPid:[[:space:]]*//p' "$d/status" 2>/dev/null)"
  done
  grep smtlab-nfs /proc/mounts
  ls -d /tmp/smtlab-nfs-* 2>/dev/null
}
nfs_checks() {
  if [ ! -x /usr/sbin/rpc.nfsd ]; then
    ok "nfs: skipped, the guest has no nfs-kernel-server programs (smt-vm.sh --nfsd)"
    return
  fi
  smtlab bench nfs-sfs --quick -p 1c1t --param server=kernel >/tmp/nfs0.out 2>&1
  grep -q 'but not loaded (modprobe nfsd)' /tmp/nfs0.out \
    && ok "nfs: the module not loaded is said" || { fail "nfs: no 'not loaded' reason"; cat /tmp/nfs0.out; }
  modprobe nfsd || { fail "nfs: modprobe nfsd exited with $?"; return; }
  smtlab bench nfs-sfs --quick -p 1c1t -p 1c2t --param server=kernel --max-samples 3 \
    --json >/tmp/nfs.json 2>/tmp/nfs.err &
  pid=$!
  # Each nfsd thread's affinity as last seen: threads start on every CPU and are pinned
  # once the server is up; they live until their cell ends.
  : >/tmp/nfsd.masks
  i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 1200 ]; do
    for c in $(grep -l '^nfsd$' /proc/[0-9]*/comm 2>/dev/null); do
      t=${c%/comm}
      t=${t#/proc/}
      m=$(taskset -p "$t" 2>/dev/null | sed 's/.*: //')
      [ -n "$m" ] || continue
      sed -i "/^$t /d" /tmp/nfsd.masks
      echo "$t $m" >>/tmp/nfsd.masks
    done
    sleep 0.1
    i=$((i + 1))
  done
  masks=$(cut -d' ' -f2 /tmp/nfsd.masks | sort -u | tr '\n' ' ')
  wait "$pid"
  rc=$?
  check "nfs: bench nfs-sfs server=kernel exit" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 /tmp/nfs.err
  section nfs
  cat /tmp/nfs.json
  section checks
  echo "nfs: nfsd affinity masks last seen: $masks"
  # Pinned to CPUs of one core: 1c1t's threads to one CPU, 1c2t's to its two siblings
  # (CPUs 0-1 or 2-3 here); never all four.
  bad=""
  one=no
  two=no
  for m in $masks; do
    case "$m" in
      1|2|4|8) one=yes ;;
      3|c) two=yes ;;
      *) bad="$bad $m" ;;
    esac
  done
  [ "$one$two" = yesyes ] && [ -z "$bad" ] && ok "nfs: nfsd threads pinned to one CPU, then to a core's two siblings ($masks)" \
    || fail "nfs: nfsd affinity masks '$masks' (not one CPU and one core:$bad)"
  left=$(nfs_left)
  check "nfs: nothing left after the cells" "" "$left"
  # SFS97's transport: MOUNT and NFS calls as UDP datagrams.
  smtlab bench nfs-sfs --quick -p 1c2t --param server=kernel --param transport=udp \
    --max-samples 3 --json >/tmp/nfsu.json 2>/tmp/nfsu.err
  rc=$?
  check "nfs: bench nfs-sfs transport=udp exit" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 /tmp/nfsu.err
  section nfs-udp
  cat /tmp/nfsu.json
  section checks
  # SFS's peak search on nfsd: a probe, then load points at rising requested rates.
  smtlab bench nfs-sfs --quick -p 1c1t --param server=kernel --param search=peak \
    --max-samples 3 --json >/tmp/nfsp.json 2>/tmp/nfsp.err
  rc=$?
  check "nfs: bench nfs-sfs search=peak exit" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 /tmp/nfsp.err
  grep -q '"point2_achieved_ops_per_s"' /tmp/nfsp.json && grep -q '"peak_point"' /tmp/nfsp.json \
    && ok "nfs: search=peak reports its load points and the peak" \
    || { fail "nfs: search=peak: no load points"; head -c 1500 /tmp/nfsp.json; }
  smtlab bench nfs-sfs -p 1c1t --param server=kernel --param duration=5s --max-samples 20 \
    >/dev/null 2>&1 &
  pid=$!
  i=0
  while [ "$i" -lt 600 ] && [ "$(nfsd_threads)" = 0 ]; do sleep 0.1; i=$((i + 1)); done
  [ "$(nfsd_threads)" != 0 ] && ok "nfs kill -9: nfsd running before the kill" || fail "nfs kill -9: nfsd never started"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  i=0
  while [ "$i" -lt 100 ] && [ -n "$(nfs_left | grep -v '^/tmp/smtlab-nfs-')" ]; do sleep 0.1; i=$((i + 1)); done
  # The scratch directory of a killed run is the one thing left (in the temporary
  # directory; the next nfs-sfs cell sweeps it).
  left=$(nfs_left | grep -v '^/tmp/smtlab-nfs-')
  check "nfs kill -9: no nfsd thread, daemon or mount left" "" "$left"
  # nfsd's shutdown did not leave its lock held: the next server starts and serves.
  smtlab bench nfs-sfs --quick -p 1c1t --param server=kernel --max-samples 3 >/tmp/nfsk.out 2>&1
  rc=$?
  check "nfs kill -9: the next cell on nfsd runs" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 /tmp/nfsk.out
}

# Core scheduling (issue: the price of SMT safety), on a kernel built with
# CONFIG_SCHED_CORE (smt-vm.sh's default kernel). `smtlab smt --cookies` is the
# observer: the kernel's own answer (PR_SCHED_CORE_GET) for every task.
cookies_line() { smtlab smt --cookies 2>&1 | head -n1; }
# Polls the cookies until /tmp/watch.stop exists; each sighting as "TASKS COOKIES" in $1.
watch_cookies() {
  : >"$1"
  while [ ! -e /tmp/watch.stop ]; do
    cookies_line | awk '$3 ~ /^[0-9]+$/ { print $3, $6 }' >>"$1"
    sleep 0.1
  done
}
# Runs the command given with the cookie watcher beside it; the most cookies seen at
# once in $seen_cookies, the most tasks in $seen_tasks, its status in $rc.
watched() {
  rm -f /tmp/watch.stop
  watch_cookies /tmp/watch.out &
  wpid=$!
  "$@"
  rc=$?
  touch /tmp/watch.stop
  wait "$wpid"
  seen_tasks=$(cut -d' ' -f1 /tmp/watch.out | sort -n | tail -n1)
  seen_cookies=$(cut -d' ' -f2 /tmp/watch.out | sort -n | tail -n1)
  seen_tasks=${seen_tasks:-0}
  seen_cookies=${seen_cookies:-0}
}
# advise --security=SCOPE on WORKLOAD, as section security-NAME: $1 name, $2 workload,
# $3 scope, $4 whether tasks must hold a cookie during the run (yes|no), the rest more
# options.
security_cell() {
  name=$1 workload=$2 scope=$3 held=$4
  shift 4
  watched smtlab advise "$workload" --quick --security="$scope" "$@" --json \
    --db "/tmp/sec-$name.db" >"/tmp/sec-$name.json" 2>"/tmp/sec-$name.err"
  check "security $name: advise exit" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 "/tmp/sec-$name.err"
  if [ "$held" = yes ]; then
    [ "$seen_tasks" -gt 0 ] && ok "security $name: tasks held a cookie during the run ($seen_tasks tasks, $seen_cookies cookies at most)" \
      || fail "security $name: no task was seen holding a cookie"
  else
    check "security $name: no task held a cookie during the run" 0 "$seen_tasks"
  fi
  check "security $name: no cookie left after the run" "core scheduling: no task holds a cookie" "$(cookies_line)"
  check "security $name: control restored" on "$(cat $C/smt/control)"
  check "security $name: online restored" "$all" "$(cat $C/online)"
  section "security-$name"
  cat "/tmp/sec-$name.json"
  section "cookies-$name"
  echo "$seen_tasks $seen_cookies"
  section checks
}
security_checks() {
  all=$(cat $C/online)
  check "cookies: none before" "core scheduling: no task holds a cookie" "$(cookies_line)"
  # Without schedstats the kernel keeps no forced idle: smtlab switches them on for the
  # run, and back off after.
  echo 0 >/proc/sys/kernel/sched_schedstats
  security_cell thread-schedstats-off int-ops thread yes
  check "security: schedstats back off" 0 "$(cat /proc/sys/kernel/sched_schedstats)"
  echo 1 >/proc/sys/kernel/sched_schedstats
  # The workload's one thread on CPU 0 and a task of no cookie busy on its sibling,
  # CPU 1: whenever the workload runs, CPU 1 must stand idle rather than run that task
  # beside the cookie, and the kernel charges the workload for it.
  taskset 2 sh -c 'while :; do :; done' &
  busy=$!
  security_cell thread int-ops thread yes --param threads=1
  kill "$busy"
  wait "$busy" 2>/dev/null
  security_cell process null-syscall process yes
  # null-syscall's measuring process leads a process group of its own (not smtlab's,
  # which is this shell's): that group gets the cookie.
  security_cell pgroup null-syscall pgroup yes
  # The measuring process in the cgroup smtlab makes for what it starts, on CPU 0, and a
  # task of no cookie busy on CPU 1: the cgroup's cookie keeps CPU 1 idle, and its
  # cpu.stat charges the cgroup for it.
  taskset 2 sh -c 'while :; do :; done' &
  busy=$!
  security_cell cgroup null-syscall cgroup yes
  kill "$busy"
  wait "$busy" 2>/dev/null
  # Two tenants on the siblings of one core, a cookie each.
  security_cell partners int-ops thread yes --partners
  [ "$seen_cookies" -ge 2 ] && ok "security partners: two cookies held at once ($seen_cookies)" \
    || fail "security partners: at most $seen_cookies cookie held at once"
  security_killed
}
# kill -9 in the middle of a coresched cell: the guardian ends the tasks that held the
# cookie, and puts SMT back.
security_killed() {
  smtlab advise null-syscall --security=process --db /tmp/seck.db >/dev/null 2>&1 &
  pid=$!
  i=0
  while [ "$i" -lt 1200 ] && ! cookies_line | grep -q '^core scheduling: [0-9]'; do
    sleep 0.1
    i=$((i + 1))
  done
  held=$(smtlab smt --cookies 2>/dev/null | awk 'NR > 2 { print $1 }' | sort -u | tr '\n' ' ')
  [ -n "$held" ] && ok "security kill -9: processes held a cookie before the kill ($held)" \
    || fail "security kill -9: no cookie seen before the kill"
  kill -9 "$pid"
  wait "$pid" 2>/dev/null
  i=0
  while [ "$i" -lt 100 ] && [ "$(cookies_line)" != "core scheduling: no task holds a cookie" ]; do
    sleep 0.1
    i=$((i + 1))
  done
  check "security kill -9: no cookie left" "core scheduling: no task holds a cookie" "$(cookies_line)"
  left=""
  for p in $held; do [ -d "/proc/$p" ] && left="$left $p"; done
  check "security kill -9: the processes that held it gone" "" "$left"
  wait_for $C/smt/control on 100
  check "security kill -9: control restored" on "$(cat $C/smt/control)"
  check "security kill -9: online restored" "$all" "$(cat $C/online)"
}

# A kernel built without CONFIG_SMP (smt-vm.sh --kernel up): smtlab sees it, names its
# one CPU 1t-up-kernel (1c1t and 1c1t-up too, with no CPU to take offline), and measures
# a micro-benchmark and a server there, the server's load generator on the same CPU
# (the guest has no other: --client-cpus 0 --client-share).
up_kernel_checks() {
  case " $(uname -v) " in
    *" SMP "*) fail "up: the kernel says SMP: $(uname -v)" ;;
    *) ok "up: uname -v has no SMP ($(uname -v))" ;;
  esac
  smtlab topo --json | grep -q '"uniprocessor_kernel": true' \
    && ok "up: smtlab topo sees a uniprocessor kernel" || fail "up: topo --json has no uniprocessor_kernel"
  # The table cuts the name to its column; the line under it gives it whole.
  smtlab bench null-syscall --quick -p 1t-up-kernel >/tmp/upk.out 2>&1 \
    && grep -q '^1t-up-kernel: ' /tmp/upk.out \
    && ok "up: bench null-syscall on 1t-up-kernel" || { fail "up: bench null-syscall"; tail -n 5 /tmp/upk.out; }
  smtlab bench int-ops --quick -p 1c1t-up >/tmp/upk2.out 2>&1 \
    && grep -q '^1t-up-kernel: ' /tmp/upk2.out \
    && ok "up: 1c1t-up is 1t-up-kernel here" || { fail "up: bench -p 1c1t-up"; tail -n 5 /tmp/upk2.out; }
  check "up: the one CPU still online" 0 "$(cat $C/online)"
  smtlab bench web-static --quick -p 1t-up-kernel --client-cpus 0 --client-share --json \
    >/tmp/upw.json 2>/tmp/upw.err
  rc=$?
  check "up: bench web-static on 1t-up-kernel exit" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 /tmp/upw.err
  section up-web
  cat /tmp/upw.json
  section checks
}

# The runs `smtlab compare` sets side by side for paper 000's 2T vs 1T-UP: the same
# workloads on the SMP kernel's 1c1t, 1c1t-up and 1c2t and on the uniprocessor
# kernel's one CPU, the load generator sharing CPU 0 in every cell (on the
# uniprocessor kernel there is no other). $1: the section, $2: the placements.
compare_run() {
  smtlab run --suite quick --bench null-syscall,web-static --placements "$2" \
    --client-cpus 0 --client-share --db "/tmp/$1.db" >"/tmp/$1.out" 2>&1
  rc=$?
  check "$1: run exit" 0 "$rc"
  [ "$rc" = 0 ] || tail -n 5 "/tmp/$1.out"
  section "$1"
  smtlab report --json --db "/tmp/$1.db" || fail "$1: report --json exited with $?"
  section checks
}
