//! The facts of a run's environment, listed once ([`facts`]): the report's machine
//! table, the comparison's two columns and the facts `compare` finds different
//! (`differs:`, [`crate::compare_sides`]) all read this list, each fact with its
//! label, its field name and how it counts in a comparison ([`Role`]).

use std::fmt::Write;

use smtlab_model::{RunMeta, Topology};

/// How a fact counts when two runs are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Part of the setup: runs that differ in it are not repeats of one setup, and
    /// `compare` lists it (`differs: kernel: ...`).
    Setup,
    /// Part of the setup, compared by the factor `HANDOFF_CHANGE` rather than its text
    /// (a pair measured again reads a few nanoseconds apart).
    Sharing,
    /// Marked where the two runs' texts differ; not part of the setup.
    Shown,
    /// Never marked: it differs between any two runs (the start time) or by a little
    /// each time it is measured (the core clock).
    Info,
}

/// One fact of a run's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fact {
    /// The field name `compare` reports it by (`differs: kernel`).
    pub key: &'static str,
    /// How a page or a table labels it.
    pub label: &'static str,
    pub role: Role,
    /// Its text; `None` where it was not recorded or cannot be read.
    pub value: Option<String>,
}

/// The environment facts of run `m`, in the order every output lists them.
pub fn facts(m: &RunMeta) -> Vec<Fact> {
    let e = &m.environment;
    let t = &m.topology;
    let fact = |key, label, role, value: Option<String>| Fact {
        key,
        label,
        role,
        value,
    };
    let cpu_model = e.cpu_model.clone().or_else(|| t.cpu_model.clone());
    let clock = e.core_clock_ghz.map(crate::units::core_clock_text);
    let handoff = crate::units::handoff_text(&e.cpu_handoff);
    let paranoid = e.perf_event_paranoid.map(|v| v.to_string());
    let virt = e.virtualization.as_ref().or(t.virtualization.as_ref());
    let virt = virt.map_or("none detected", String::as_str).to_string();
    let started = crate::fmt::utc(m.started_unix_s);
    let version = e.tool_version.clone();
    let paranoid_key = "perf_event_paranoid";
    use Role::{Info, Setup, Sharing, Shown};
    vec![
        fact("hostname", "host", Setup, e.hostname.clone()),
        fact("cpu_model", "CPU model", Setup, cpu_model),
        fact("vendor", "vendor", Shown, t.vendor.clone()),
        fact("topology", "machine", Setup, Some(shape(t))),
        fact("kernel", "kernel", Setup, e.kernel.clone()),
        fact("microcode", "microcode", Setup, e.microcode.clone()),
        fact("smt_control", "SMT control", Setup, smt_control(m)),
        fact("governor", "governor", Setup, e.governor.clone()),
        fact("boost", "boost / turbo", Setup, e.boost.clone()),
        fact("core_clock_ghz", "core clock", Info, clock),
        fact("cpu_handoff", "cache-line handoff", Sharing, handoff),
        fact("clocksource", "clocksource", Setup, e.clocksource.clone()),
        fact(paranoid_key, paranoid_key, Shown, paranoid),
        fact("virtualization", "virtualisation", Setup, Some(virt)),
        fact("tool_version", "tool version", Setup, Some(version)),
        fact("git_commit", "commit", Shown, e.git_commit.clone()),
        fact("suite", "suite", Shown, m.suite.clone()),
        fact("started", "started", Info, Some(started)),
    ]
}

/// The SMT control state when the run started, with whether SMT was active
/// (`on (active: true)`), else the topology's control file, else `absent`.
fn smt_control(m: &RunMeta) -> Option<String> {
    let text = match (&m.environment.smt_control, m.topology.smt.active) {
        (Some(c), Some(a)) => format!("{c} (active: {a})"),
        (Some(c), None) => c.clone(),
        (None, _) => m.topology.smt.control.clone().unwrap_or("absent".into()),
    };
    Some(text)
}

/// `1 package x 4 cores x 2 threads = 8 CPUs`, with ranges where packages or cores differ.
pub fn shape(t: &Topology) -> String {
    let pk = t.packages.len();
    let per_pkg: Vec<usize> = t.packages.iter().map(|p| p.cores.len()).collect();
    let (cmin, cmax) = (
        per_pkg.iter().copied().min().unwrap_or(0),
        per_pkg.iter().copied().max().unwrap_or(0),
    );
    let range = |a: u32, b: u32| {
        if a == b {
            a.to_string()
        } else {
            format!("{a}-{b}")
        }
    };
    let mut s = format!(
        "{} x {} cores x {} thread{} = {} CPUs",
        smtlab_model::unit::plural(pk, "package"),
        range(cmin as u32, cmax as u32),
        range(t.smt.threads_per_core_min, t.smt.threads_per_core_max),
        if t.smt.threads_per_core_max == 1 {
            ""
        } else {
            "s"
        },
        t.cpus.len()
    );
    if !t.cores_without_package.is_empty() {
        let _ = write!(
            s,
            " (+{} cores in no package)",
            t.cores_without_package.len()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_fixtures::fleet::{FakeHost, run};
    use smtlab_model::Handoff;

    fn meta(host: &str) -> RunMeta {
        run(&FakeHost::new(host, "Xeon", 1.2)).run
    }

    #[test]
    fn only_setup_facts_make_another_setup_and_info_is_never_marked() {
        let a = meta("h1");
        let mut b = meta("h1");
        b.started_unix_s += 3600;
        b.environment.core_clock_ghz = Some(3.1);
        b.environment.git_commit = Some("abc1234".into());
        b.suite = Some("quick".into());
        // Shown and informational facts differ; no setup fact does.
        assert!(crate::compare_sides::env_diffs(&a, &b).is_empty());
        b.environment.kernel = Some("6.9".into());
        let handoff = |ns| {
            vec![Handoff {
                from_cpu: 0,
                to_cpu: 1,
                ns,
            }]
        };
        let mut a = a;
        a.environment.cpu_handoff = handoff(24.0);
        b.environment.cpu_handoff = handoff(30.0);
        let fields = |a: &RunMeta, b: &RunMeta| -> Vec<String> {
            let diffs = crate::compare_sides::env_diffs(a, b);
            diffs.into_iter().map(|d| d.field).collect()
        };
        assert_eq!(fields(&a, &b), ["kernel"]);
        b.environment.cpu_handoff = handoff(240.0);
        assert_eq!(fields(&a, &b), ["kernel", "cpu_handoff"]);
    }

    #[test]
    fn every_fact_has_a_key_and_a_label_of_its_own() {
        let f = facts(&meta("h1"));
        let keys: std::collections::BTreeSet<_> = f.iter().map(|f| f.key).collect();
        let labels: std::collections::BTreeSet<_> = f.iter().map(|f| f.label).collect();
        assert_eq!((keys.len(), labels.len()), (f.len(), f.len()));
        let machine = f.iter().find(|f| f.key == "topology").unwrap();
        assert!(machine.value.as_deref().unwrap().ends_with("CPUs"));
    }
}
