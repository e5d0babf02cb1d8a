//! Where the CPUs' time went over a run, from `/proc/stat`: user, nice, system, irq,
//! softirq, idle, iowait and steal, per CPU and per sampling interval (paper 003
//! Figs 1 and 5: user/kernel/idle over time, start-up vs steady state).
//!
//! The kernel counts in USER_HZ ticks (normally 100 per second), so an interval of
//! 100 ms holds only about 10 ticks per CPU: fractions per interval are coarse
//! (10% steps), while sums over a phase are as good as the run is long.
//!
//! Fractions of a phase are computed from the summed ticks of its intervals, not as
//! the mean of per-interval fractions, so short tail intervals do not weigh as much as
//! full ones.

use serde::{Deserialize, Serialize};

use crate::CpuSet;

/// [`CpuTicks`] and [`CpuTimeFractions`] from one list of `/proc/stat`'s fields, with
/// the field-by-field arithmetic written once.
macro_rules! cpu_time {
    ($($field:ident),*) => {
        /// Time of one CPU in USER_HZ ticks, as `/proc/stat` counts it. `user` and `nice`
        /// include guest time (the kernel adds it to both), so guest is not listed apart.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        pub struct CpuTicks {
            $(pub $field: u64,)*
        }

        /// [`CpuTicks`] as fractions of the elapsed ticks (they sum to 1).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
        pub struct CpuTimeFractions {
            $(pub $field: f64,)*
        }

        impl CpuTicks {
            pub fn total(&self) -> u64 {
                0 $(+ self.$field)*
            }

            /// `self - earlier`, field by field. Saturates at zero: iowait is known to go
            /// backwards on some kernels, and a negative tick count means nothing.
            pub fn since(&self, earlier: &CpuTicks) -> CpuTicks {
                CpuTicks {
                    $($field: self.$field.saturating_sub(earlier.$field),)*
                }
            }

            pub fn add(&self, other: &CpuTicks) -> CpuTicks {
                CpuTicks {
                    $($field: self.$field + other.$field,)*
                }
            }

            /// Each field as a fraction of the total; `None` when no tick elapsed.
            pub fn fractions(&self) -> Option<CpuTimeFractions> {
                let t = self.total();
                (t > 0).then(|| CpuTimeFractions {
                    $($field: self.$field as f64 / t as f64,)*
                })
            }
        }
    };
}

cpu_time!(user, nice, system, idle, iowait, irq, softirq, steal);

impl CpuTimeFractions {
    /// Kernel time: system + irq + softirq.
    pub fn kernel(&self) -> f64 {
        self.system + self.irq + self.softirq
    }

    /// User time including niced processes.
    pub fn all_user(&self) -> f64 {
        self.user + self.nice
    }
}

/// Ticks of one CPU over some span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTicksOf {
    pub cpu: u32,
    pub ticks: CpuTicks,
}

/// One sampling interval: the ticks each sampled CPU spent between two reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsTimeInterval {
    /// Since the sampler started.
    pub start_ns: u64,
    pub end_ns: u64,
    pub per_cpu: Vec<CpuTicksOf>,
}

impl OsTimeInterval {
    /// Sum over the interval's CPUs.
    pub fn all_cpus(&self) -> CpuTicks {
        self.per_cpu
            .iter()
            .fold(CpuTicks::default(), |acc, c| acc.add(&c.ticks))
    }
}

/// How to cut a run into start-up and steady state.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum StartupSplit {
    /// The first fraction of the run's duration (0.1 = first 10%).
    Fraction(f64),
    /// The first N seconds.
    Seconds(f64),
}

impl Default for StartupSplit {
    /// The first 10% of the run.
    fn default() -> Self {
        StartupSplit::Fraction(0.1)
    }
}

/// Totals of one phase (start-up or steady state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseTimes {
    /// Sum of the lengths of the intervals in the phase.
    pub duration_ns: u64,
    pub intervals: usize,
    pub per_cpu: Vec<CpuTicksOf>,
    /// Sum over CPUs.
    pub all_cpus: CpuTicks,
    /// Fractions of `all_cpus`; `None` when no tick elapsed in the phase.
    pub fractions: Option<CpuTimeFractions>,
}

/// A run split into start-up and steady state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseBreakdown {
    pub split: StartupSplit,
    /// Where the split fell, since the sampler started.
    pub split_ns: u64,
    pub startup: PhaseTimes,
    pub steady: PhaseTimes,
}

/// What the `/proc/stat` sampler recorded over a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OsTimeSeries {
    /// Ticks per second (`sysconf(_SC_CLK_TCK)`).
    pub user_hz: u64,
    /// The interval the sampler aimed for; the last interval is usually shorter.
    pub interval_ns: u64,
    pub cpus: CpuSet,
    pub intervals: Vec<OsTimeInterval>,
}

impl OsTimeSeries {
    /// End of the last interval.
    pub fn duration_ns(&self) -> u64 {
        self.intervals.last().map_or(0, |i| i.end_ns)
    }

    /// Totals over the whole run, per CPU and summed.
    pub fn total(&self) -> PhaseTimes {
        self.phase(|_| true)
    }

    /// Splits the run into start-up and steady state. An interval belongs to start-up
    /// when its midpoint is before the split point. Either phase may be empty (a run
    /// shorter than the start-up, or an interval longer than it).
    pub fn phases(&self, split: StartupSplit) -> PhaseBreakdown {
        let d = self.duration_ns();
        let split_ns = match split {
            StartupSplit::Fraction(f) => (d as f64 * f.clamp(0.0, 1.0)) as u64,
            StartupSplit::Seconds(s) => (s.max(0.0) * 1e9).min(d as f64) as u64,
        };
        let in_startup = |i: &OsTimeInterval| (i.start_ns + i.end_ns) / 2 < split_ns;
        PhaseBreakdown {
            split,
            split_ns,
            startup: self.phase(in_startup),
            steady: self.phase(|i| !in_startup(i)),
        }
    }

    fn phase(&self, keep: impl Fn(&OsTimeInterval) -> bool) -> PhaseTimes {
        let mut per_cpu: Vec<CpuTicksOf> = self
            .cpus
            .iter()
            .map(|cpu| CpuTicksOf {
                cpu,
                ticks: CpuTicks::default(),
            })
            .collect();
        let mut duration_ns = 0;
        let mut intervals = 0;
        for iv in self.intervals.iter().filter(|i| keep(i)) {
            duration_ns += iv.end_ns.saturating_sub(iv.start_ns);
            intervals += 1;
            for c in &iv.per_cpu {
                if let Some(slot) = per_cpu.iter_mut().find(|s| s.cpu == c.cpu) {
                    slot.ticks = slot.ticks.add(&c.ticks);
                }
            }
        }
        let all_cpus = per_cpu
            .iter()
            .fold(CpuTicks::default(), |acc, c| acc.add(&c.ticks));
        PhaseTimes {
            duration_ns,
            intervals,
            per_cpu,
            fractions: all_cpus.fractions(),
            all_cpus,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(start_ms: u64, end_ms: u64, user: u64, idle: u64) -> OsTimeInterval {
        OsTimeInterval {
            start_ns: start_ms * 1_000_000,
            end_ns: end_ms * 1_000_000,
            per_cpu: vec![CpuTicksOf {
                cpu: 0,
                ticks: CpuTicks {
                    user,
                    idle,
                    ..CpuTicks::default()
                },
            }],
        }
    }

    #[test]
    fn phases_split_by_interval_midpoint_and_sum_ticks() {
        let s = OsTimeSeries {
            user_hz: 100,
            interval_ns: 100_000_000,
            cpus: CpuSet::from_iter([0]),
            intervals: (0..10)
                .map(|i| {
                    if i == 0 {
                        iv(0, 100, 2, 8)
                    } else {
                        iv(i * 100, (i + 1) * 100, 10, 0)
                    }
                })
                .collect(),
        };
        let p = s.phases(StartupSplit::Fraction(0.1));
        assert_eq!(p.split_ns, 100_000_000);
        assert_eq!(p.startup.intervals, 1);
        assert_eq!(p.startup.fractions.unwrap().user, 0.2);
        assert_eq!(p.steady.intervals, 9);
        assert_eq!(p.steady.fractions.unwrap().user, 1.0);
        let p = s.phases(StartupSplit::Seconds(0.25));
        assert_eq!(p.startup.intervals, 2);
        assert_eq!(s.total().all_cpus.user, 92);
    }

    #[test]
    fn no_ticks_means_no_fractions() {
        assert_eq!(CpuTicks::default().fractions(), None);
        let a = CpuTicks {
            iowait: 5,
            ..CpuTicks::default()
        };
        let b = CpuTicks {
            iowait: 3,
            ..CpuTicks::default()
        };
        assert_eq!(b.since(&a).iowait, 0);
    }
}
