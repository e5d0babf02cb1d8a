//! Where a network workload's interrupts go (paper 004 s3): the `irq` parameter of the
//! network workloads, and the CPUs it names on a machine.
//!
//! * `none`: left as the machine has them (nothing is written);
//! * `sibling`: the idle SMT siblings of the placement's CPUs (the other hardware
//!   threads of the cores the server runs on);
//! * `other-core`: as many CPUs (one per core) on cores the placement does not use,
//!   those apart from the client side first.
//!
//! A device list may follow after a colon (`sibling:eth0+eth1`); without one, `lo`: the
//! network workloads talk over loopback.

use smtlab_model::{CpuSet, Topology};

/// The parameter's name, declared by the network workloads; the runner steers the cells
/// of any benchmark that declares it.
pub const PARAM: &str = "irq";

/// What `irq=` accepts.
pub const EXPECTED: &str = "none, sibling or other-core, optionally :DEV[+DEV] (default device lo)";

/// The device steered when the value names none: the loopback the workloads use.
pub const DEFAULT_DEVICE: &str = "lo";

smtlab_model::named_enum! {
    /// Where the interrupts go, by the word `irq=` names it with.
    pub enum IrqTarget {
        None = "none",
        Sibling = "sibling",
        OtherCore = "other-core",
    }
}

/// A parsed `irq=` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqSpec {
    pub target: IrqTarget,
    pub devices: Vec<String>,
}

impl IrqSpec {
    /// Parses `none`, `sibling`, `other-core`, each optionally `:DEV[+DEV]`; `None` for
    /// anything else (the caller names the parameter and [`EXPECTED`]).
    pub fn parse(text: &str) -> Option<IrqSpec> {
        let (target, devs) = match text.split_once(':') {
            Some((t, d)) => (t, Some(d)),
            None => (text, None),
        };
        let target = IrqTarget::parse(target)?;
        let devices: Vec<String> = match devs {
            None => vec![DEFAULT_DEVICE.to_string()],
            Some(d) => d.split('+').map(str::to_string).collect(),
        };
        // A device name as the kernel allows it: no path separators, no dots alone.
        let valid = |d: &str| {
            !d.is_empty()
                && d.len() < 16
                && d != "."
                && d != ".."
                && !d.contains(['/', ':', '+'])
                && !d.chars().any(char::is_whitespace)
        };
        if !devices.iter().all(|d| valid(d)) {
            return None;
        }
        Some(IrqSpec { target, devices })
    }
}

/// The CPUs `target` names for a server on `placement` with its client side on
/// `client`; an error saying why there are none (`sibling` on a placement that uses
/// every thread of its cores, or a machine without SMT; `other-core` with every core
/// in the placement). `None` for [`IrqTarget::None`].
pub fn irq_cpus(
    topo: &Topology,
    placement: &[u32],
    client: &CpuSet,
    target: IrqTarget,
) -> Result<Option<CpuSet>, NoIrqCpus> {
    let online =
        |c: u32| topo.cpus.contains(c) && topo.allowed_cpus.as_ref().is_none_or(|a| a.contains(c));
    let used_cores: Vec<&smtlab_model::Core> = topo
        .cores()
        .filter(|core| placement.iter().any(|&c| core.cpus.contains(c)))
        .collect();
    match target {
        IrqTarget::None => Ok(None),
        IrqTarget::Sibling => {
            let siblings: CpuSet = used_cores
                .iter()
                .flat_map(|core| core.cpus.iter())
                .filter(|&c| online(c) && !placement.contains(&c))
                .collect();
            if siblings.is_empty() {
                return Err(if topo.smt_visible() {
                    NoIrqCpus::SiblingsBusy
                } else {
                    NoIrqCpus::NoSmt
                });
            }
            Ok(Some(siblings))
        }
        IrqTarget::OtherCore => {
            let want = used_cores.len().max(1);
            let others: Vec<&smtlab_model::Core> = topo
                .cores()
                .filter(|core| !used_cores.iter().any(|u| std::ptr::eq(*u, *core)))
                .collect();
            // One CPU per other core, those apart from the client first.
            let mut apart: Vec<u32> = Vec::new();
            let mut with_client: Vec<u32> = Vec::new();
            for core in others {
                let Some(first) = core.cpus.iter().find(|&c| online(c)) else {
                    continue;
                };
                if core.cpus.iter().any(|c| client.contains(c)) {
                    with_client.push(first);
                } else {
                    apart.push(first);
                }
            }
            let chosen: CpuSet = apart.into_iter().chain(with_client).take(want).collect();
            if chosen.is_empty() {
                return Err(NoIrqCpus::EveryCore);
            }
            Ok(Some(chosen))
        }
    }
}

/// Why `irq=` names no CPU on this placement; one line each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoIrqCpus {
    #[error(
        "irq=sibling: the placement uses every thread of its cores, so no sibling is \
         idle to take the interrupts (use one thread per core: 1c1t, 2c1t)"
    )]
    SiblingsBusy,
    #[error("irq=sibling: this machine shows no SMT siblings")]
    NoSmt,
    #[error("irq=other-core: every core of this machine is in the placement")]
    EveryCore,
}

#[cfg(test)]
mod tests {
    use super::*;
    use smtlab_fixtures::build;

    fn set(v: &[u32]) -> CpuSet {
        v.iter().copied().collect()
    }

    #[test]
    fn values_parse_with_and_without_devices() {
        let s = IrqSpec::parse("sibling").unwrap();
        assert_eq!(
            (s.target, s.devices),
            (IrqTarget::Sibling, vec!["lo".to_string()])
        );
        let s = IrqSpec::parse("other-core:eth0+veth1").unwrap();
        assert_eq!(s.target, IrqTarget::OtherCore);
        assert_eq!(s.devices, ["eth0", "veth1"]);
        for bad in [
            "",
            "both",
            "sibling:",
            "sibling:../x",
            "none:a+",
            "sibling:a b",
        ] {
            assert_eq!(IrqSpec::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_sibling_is_the_idle_thread_of_the_servers_core_and_other_core_another_core() {
        // Intel numbering, 4 cores x 2: core n holds n and n + 4.
        let t = build::intel(1, 4, 2);
        let none = CpuSet::new();
        let cpus = |p: &[u32], client: &CpuSet, target| irq_cpus(&t, p, client, target);
        assert_eq!(cpus(&[0], &none, IrqTarget::Sibling), Ok(Some(set(&[4]))));
        assert_eq!(
            cpus(&[0, 1], &none, IrqTarget::Sibling),
            Ok(Some(set(&[4, 5])))
        );
        assert_eq!(cpus(&[0], &none, IrqTarget::None), Ok(None));
        // 1c2t uses both threads: no idle sibling, and the error says so.
        let e = cpus(&[0, 4], &none, IrqTarget::Sibling).unwrap_err();
        assert_eq!(e, NoIrqCpus::SiblingsBusy);
        assert!(e.to_string().contains("every thread of its cores"), "{e}");
        // Another core, the client's cores last.
        assert_eq!(
            cpus(&[0], &set(&[1, 5]), IrqTarget::OtherCore),
            Ok(Some(set(&[2])))
        );
        assert_eq!(
            cpus(&[0, 1], &none, IrqTarget::OtherCore),
            Ok(Some(set(&[2, 3])))
        );
        let e = irq_cpus(&build::intel(1, 1, 2), &[0], &none, IrqTarget::OtherCore).unwrap_err();
        assert_eq!(e, NoIrqCpus::EveryCore);
        // Without SMT there is no sibling.
        let flat = build::one_cpu_per_core(&[0, 1]);
        let e = irq_cpus(&flat, &[0], &none, IrqTarget::Sibling).unwrap_err();
        assert_eq!(e, NoIrqCpus::NoSmt);
    }
}
