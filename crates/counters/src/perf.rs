//! The real [`CounterSource`]: counting perf events on a thread (and its children) or
//! on a set of CPUs.
//!
//! Each event is opened once per privilege mode it is counted in (user and kernel for
//! the split, else once with nothing excluded) and once per CPU for CPU-wide counting.
//! Related hardware events are grouped (see [`crate::events::GROUPS`]), but every fd
//! is read on its own with `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`: group reads
//! (`PERF_FORMAT_GROUP`) cannot be combined with `inherit`, which counting a child
//! process tree needs, and one read path is simpler than two.

use smtlab_model::counters::named::{EventEncoding, NamedReading, NamedUnavailable};
use smtlab_model::counters::{
    CountMode, CounterEvent, CounterTarget, CounterValues, Reading, UnavailableEvent,
};

use crate::error::{CounterError, Needs, classify};
use crate::events::{plan_groups, type_config};
use crate::source::CounterSource;
use crate::sys::{self, PerfFd};

/// What to count.
#[derive(Debug, Clone, PartialEq)]
pub struct PerfOptions {
    pub events: Vec<CounterEvent>,
    /// Count events that allow it twice, in user and in kernel mode, so both the
    /// split and the sum are known. Without it every event is counted once with
    /// nothing excluded, which halves the pressure on hardware counters.
    pub split_user_kernel: bool,
    /// Events asked for by name (`--events`), resolved against the machine's PMUs.
    pub named: Vec<ResolvedEvent>,
}

impl PerfOptions {
    /// Every event smtlab knows, split into user and kernel.
    pub fn all() -> PerfOptions {
        PerfOptions::events(&CounterEvent::ALL)
    }

    pub fn events(events: &[CounterEvent]) -> PerfOptions {
        PerfOptions {
            events: events.to_vec(),
            split_user_kernel: true,
            named: Vec::new(),
        }
    }
}

/// One named event ready to open, as the `--events` list resolved it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedEvent {
    pub name: String,
    /// `sysfs alias`, `raw terms`, `built-in table (Zen 4: EX_RET_OPS)`.
    pub source: String,
    /// One per PMU instance; the counts are summed.
    pub encodings: Vec<EventEncoding>,
    pub mode: CountMode,
    pub scale: Option<f64>,
    pub unit: Option<String>,
    /// CPUs to count on, CPU-wide, for uncore PMUs (their `cpumask`); `None`: per task.
    pub cpus: Option<Vec<u32>>,
    /// Events with the same group number are opened as one perf group.
    pub group: u32,
    /// A tracepoint filter (`reason == 4`), set on each descriptor after it opens.
    pub filter: Option<String>,
}

impl ResolvedEvent {
    /// A per-task event with no scale, unit or filter.
    pub(crate) fn new(
        name: impl Into<String>,
        source: String,
        encodings: Vec<EventEncoding>,
        mode: CountMode,
        group: u32,
    ) -> ResolvedEvent {
        ResolvedEvent {
            name: name.into(),
            source,
            encodings,
            mode,
            scale: None,
            unit: None,
            cpus: None,
            group,
            filter: None,
        }
    }
}

/// One event in one mode: its fd on every CPU of the target (one fd for a thread).
#[derive(Debug)]
struct OpenEvent {
    event: CounterEvent,
    mode: CountMode,
    /// `(fd, is_group_leader)`.
    fds: Vec<(PerfFd, bool)>,
}

/// Counters opened on a target. Dropping it closes them.
#[derive(Debug)]
pub struct PerfCounters {
    target: CounterTarget,
    opened: Vec<OpenEvent>,
    unavailable: Vec<UnavailableEvent>,
    named: Vec<OpenNamed>,
    named_unavailable: Vec<NamedUnavailable>,
    started: bool,
}

/// A named event: its fds over every PMU instance and CPU (summed when read).
#[derive(Debug)]
struct OpenNamed {
    event: ResolvedEvent,
    scope: String,
    fds: Vec<(PerfFd, bool)>,
}

/// Opens one counting event. task-clock in [`CountMode::All`] is retried with
/// `exclude_kernel=1` when kernel counting is not permitted (perf_event_paranoid 2,
/// not root): the kernel's clock events ignore the exclude bits, so the count is the
/// same whole task time. Context switches get no such retry: their user-only count
/// is always zero, which would be a made-up number.
pub(crate) fn open_counting(
    event: CounterEvent,
    mode: CountMode,
    pid: i32,
    cpu: i32,
    inherit: bool,
    group: Option<&PerfFd>,
) -> Result<PerfFd, i32> {
    let (type_, config) = type_config(event);
    let mut attr = sys::counting_attr(type_, config, mode, inherit);
    match sys::open(&mut attr, pid, cpu, group) {
        Err(libc::EACCES | libc::EPERM)
            if event == CounterEvent::TaskClock && mode == CountMode::All =>
        {
            let mut attr = sys::counting_attr(type_, config, CountMode::User, inherit);
            sys::open(&mut attr, pid, cpu, group)
        }
        other => other,
    }
}

fn modes_for(event: CounterEvent, split: bool) -> &'static [CountMode] {
    if split && event.splits_by_privilege() {
        &[CountMode::User, CountMode::Kernel]
    } else {
        &[CountMode::All]
    }
}

/// A recorded target was counted elsewhere: there is nothing here to open.
pub(crate) fn recorded() -> CounterError {
    CounterError::State("counts read from a file cannot be counted again".into())
}

fn needs(target: &CounterTarget, mode: CountMode) -> Needs {
    match (target, mode) {
        (CounterTarget::Cpus { .. }, _) => Needs::CpuWide,
        (_, CountMode::User) => Needs::User,
        (_, _) => Needs::Kernel,
    }
}

impl PerfCounters {
    /// Opens every requested event that this machine and these permissions allow, and
    /// records a one-line reason for every one it could not. Opening nothing at all is
    /// not an error here: [`CounterValues::unavailable`] says why. Fails only when the
    /// target itself is wrong (no such thread, no CPUs) or file descriptors run out.
    pub fn open(
        target: CounterTarget,
        options: &PerfOptions,
    ) -> Result<PerfCounters, CounterError> {
        let (pid, cpus, inherit): (i32, Vec<i32>, bool) = match &target {
            CounterTarget::Thread { tid, inherit } => (*tid, vec![-1], *inherit),
            CounterTarget::Recorded => return Err(recorded()),
            CounterTarget::Cpus { cpus } => {
                if cpus.is_empty() {
                    return Err(CounterError::State(
                        "CPU-wide counting needs at least one CPU".into(),
                    ));
                }
                let list = cpus
                    .iter()
                    .map(sys::cpu_arg)
                    .collect::<Result<Vec<_>, _>>()?;
                (-1, list, false)
            }
        };

        let mut me = PerfCounters {
            target,
            opened: Vec::new(),
            unavailable: Vec::new(),
            named: Vec::new(),
            named_unavailable: Vec::new(),
            started: false,
        };
        for group in plan_groups(&options.events) {
            // Every event of a group shares its modes: groups only pair hardware
            // events, which all split.
            for &mode in modes_for(group[0], options.split_user_kernel) {
                me.open_group(&group, mode, pid, &cpus, inherit)?;
            }
        }
        // Each group once, where its first event stands.
        for (i, g) in options.named.iter().map(|e| e.group).enumerate() {
            if options.named[..i].iter().all(|e| e.group != g) {
                let members: Vec<&ResolvedEvent> =
                    options.named.iter().filter(|e| e.group == g).collect();
                me.open_named_group(&members, pid, &cpus, inherit)?;
            }
        }
        Ok(me)
    }

    /// Opens the named events of one `--events` group. They are a perf group (so the
    /// kernel schedules them together and their ratios come from the same time) when
    /// each has one encoding and they share a scope; otherwise each opens alone. An
    /// uncore event (its PMU has a `cpumask`) counts CPU-wide on those CPUs whatever
    /// the target, as perf does.
    fn open_named_group(
        &mut self,
        members: &[&ResolvedEvent],
        pid: i32,
        cpus: &[i32],
        inherit: bool,
    ) -> Result<(), CounterError> {
        let groupable = members.len() > 1
            && members
                .iter()
                .all(|e| e.encodings.len() == 1 && e.cpus == members[0].cpus);
        // Leaders per CPU index when grouping.
        let mut leader: Option<usize> = None;
        for e in members {
            let (pid, cpus, inherit, needs_cpu_wide): (i32, Vec<i32>, bool, bool) = match &e.cpus {
                Some(list) => (
                    -1,
                    list.iter()
                        .map(|&c| i32::try_from(c).unwrap_or(i32::MAX))
                        .collect(),
                    false,
                    true,
                ),
                None => (pid, cpus.to_vec(), inherit, pid == -1),
            };
            let needs = if needs_cpu_wide {
                Needs::CpuWide
            } else {
                needs(&self.target, e.mode)
            };
            let mut fds: Vec<(PerfFd, bool)> = Vec::new();
            let mut failure: Option<String> = None;
            'open: for enc in &e.encodings {
                for (i, &cpu) in cpus.iter().enumerate() {
                    let lead = if groupable {
                        leader.map(|l| &self.named[l].fds[i].0)
                    } else {
                        None
                    };
                    let mut attr = sys::named_attr(enc, e.mode, inherit);
                    let opened =
                        sys::open(&mut attr, pid, cpu, lead).and_then(|fd| match &e.filter {
                            Some(f) => fd.set_filter(f).map(|()| fd),
                            None => Ok(fd),
                        });
                    match opened {
                        Ok(fd) => fds.push((fd, lead.is_none())),
                        Err(errno) => {
                            if matches!(errno, libc::EMFILE | libc::ENFILE | libc::ESRCH) {
                                return Err(CounterError::open(
                                    format!("{} on {}", e.name, self.target),
                                    errno,
                                    needs,
                                ));
                            }
                            let mut reason = classify(errno, needs);
                            if cpu >= 0 {
                                reason = format!("{reason} on cpu {cpu}");
                            }
                            failure = Some(format!("{reason} ({enc})"));
                            break 'open;
                        }
                    }
                }
            }
            match failure {
                Some(reason) => self.named_unavailable.push(NamedUnavailable {
                    name: e.name.clone(),
                    reason,
                }),
                None => {
                    let scope = match &e.cpus {
                        Some(c) => format!(
                            "cpus {} (CPU-wide)",
                            c.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
                        ),
                        None => self.target.to_string(),
                    };
                    self.named.push(OpenNamed {
                        event: (*e).clone(),
                        scope,
                        fds,
                    });
                    if groupable && leader.is_none() {
                        leader = Some(self.named.len() - 1);
                    }
                }
            }
        }
        Ok(())
    }

    fn open_group(
        &mut self,
        group: &[CounterEvent],
        mode: CountMode,
        pid: i32,
        cpus: &[i32],
        inherit: bool,
    ) -> Result<(), CounterError> {
        // The first event that opens on every CPU leads the group on each CPU; an
        // event that fails on any CPU is dropped everywhere, so a group never loses
        // its leader after members joined it.
        let mut leader: Option<usize> = None;
        for &event in group {
            let mut fds: Vec<(PerfFd, bool)> = Vec::with_capacity(cpus.len());
            let mut failure = None;
            for (i, &cpu) in cpus.iter().enumerate() {
                let lead_fd = leader.map(|l| &self.opened[l].fds[i].0);
                match open_counting(event, mode, pid, cpu, inherit, lead_fd) {
                    Ok(fd) => fds.push((fd, leader.is_none())),
                    Err(errno) => {
                        failure = Some((errno, cpu));
                        break;
                    }
                }
            }
            match failure {
                None => {
                    self.opened.push(OpenEvent { event, mode, fds });
                    if leader.is_none() {
                        leader = Some(self.opened.len() - 1);
                    }
                }
                Some((errno, cpu)) => {
                    if matches!(errno, libc::EMFILE | libc::ENFILE | libc::ESRCH) {
                        return Err(CounterError::open(
                            format!("{event} ({mode}) on {}", self.target),
                            errno,
                            needs(&self.target, mode),
                        ));
                    }
                    let mut reason = classify(errno, needs(&self.target, mode));
                    if cpu >= 0 && cpus.len() > 1 {
                        reason = format!("{reason} on cpu {cpu}");
                    }
                    self.unavailable.push(UnavailableEvent {
                        event,
                        mode,
                        reason,
                    });
                }
            }
        }
        Ok(())
    }

    /// What the counters are attached to.
    pub fn target(&self) -> &CounterTarget {
        &self.target
    }

    /// Whether no event at all could be opened.
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty() && self.named.is_empty()
    }

    /// Events (and modes) that are open.
    pub fn opened(&self) -> Vec<(CounterEvent, CountMode)> {
        self.opened.iter().map(|o| (o.event, o.mode)).collect()
    }

    /// Events that could not be opened, with reasons.
    pub fn unavailable(&self) -> &[UnavailableEvent] {
        &self.unavailable
    }

    /// Named events that could not be opened, with reasons.
    pub fn named_unavailable(&self) -> &[NamedUnavailable] {
        &self.named_unavailable
    }

    fn each_leader(
        &self,
        what: &str,
        f: impl Fn(&PerfFd) -> std::io::Result<()>,
    ) -> Result<(), CounterError> {
        for o in &self.named {
            for (fd, is_leader) in &o.fds {
                if *is_leader {
                    f(fd).map_err(|e| {
                        CounterError::io(format!("{what} {} on {}", o.event.name, o.scope), e)
                    })?;
                }
            }
        }
        for o in &self.opened {
            for (fd, is_leader) in &o.fds {
                if *is_leader {
                    f(fd).map_err(|e| {
                        CounterError::io(
                            format!("{what} {} ({}) on {}", o.event, o.mode, self.target),
                            e,
                        )
                    })?;
                }
            }
        }
        Ok(())
    }
}

impl CounterSource for PerfCounters {
    /// Zeroes and enables every counter.
    fn start(&mut self) -> Result<(), CounterError> {
        self.each_leader("reset", |fd| fd.reset(true))?;
        self.each_leader("enable", |fd| fd.enable(true))?;
        self.started = true;
        Ok(())
    }

    fn stop(&mut self) -> Result<(), CounterError> {
        if !self.started {
            return Err(CounterError::State("stop before start".into()));
        }
        self.each_leader("disable", |fd| fd.disable(true))?;
        self.started = false;
        Ok(())
    }

    /// Enables every counter again without zeroing it.
    fn resume(&mut self) -> Result<(), CounterError> {
        if self.started {
            return Err(CounterError::State("resume while counting".into()));
        }
        self.each_leader("enable", |fd| fd.enable(true))?;
        self.started = true;
        Ok(())
    }

    /// Reads every counter (running or stopped). CPU-wide counts are summed over the
    /// CPUs, each CPU's part scaled by its own enabled/running ratio.
    fn read(&mut self) -> Result<CounterValues, CounterError> {
        let mut values = CounterValues::new(self.target.clone());
        for o in &self.opened {
            let what = || format!("read {} ({}) on {}", o.event, o.mode, self.target);
            if let Some(t) = read_sum(&o.fds, what)? {
                values.set(o.event, o.mode, t);
            }
        }
        values.unavailable = self.unavailable.clone();
        for o in &self.named {
            let what = || format!("read {} on {}", o.event.name, o.scope);
            if let Some(reading) = read_sum(&o.fds, what)? {
                values.named.push(NamedReading {
                    name: o.event.name.clone(),
                    source: o.event.source.clone(),
                    encodings: o.event.encodings.clone(),
                    mode: o.event.mode,
                    scale: o.event.scale,
                    unit: o.event.unit.clone(),
                    scope: o.scope.clone(),
                    reading,
                    parts: u32::try_from(o.fds.len()).unwrap_or(u32::MAX),
                });
            }
        }
        values.named_unavailable = self.named_unavailable.clone();
        Ok(values)
    }
}

/// The counts of `fds` summed, each scaled by its own enabled/running ratio; `None`
/// without descriptors. `what` says what was read, in errors.
fn read_sum(
    fds: &[(PerfFd, bool)],
    what: impl Fn() -> String,
) -> Result<Option<Reading>, CounterError> {
    let mut total: Option<Reading> = None;
    for (fd, _) in fds {
        let (raw, enabled, running) = fd
            .read_counting()
            .map_err(|e| CounterError::io(what(), e))?;
        let r = Reading::new(raw, enabled, running);
        total = Some(total.map_or(r, |t| t.sum(&r)));
    }
    Ok(total)
}
