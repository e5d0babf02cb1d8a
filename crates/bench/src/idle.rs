//! What an SMT sibling does while the other thread works (paper 004 section 3, on the
//! cost of a hardware thread that has nothing useful to do): `spin` loops without a
//! hint, `spin-pause` loops with the CPU's spin-wait hint (PAUSE on x86, YIELD on Arm,
//! which gives the core's resources to the other thread), `idle-poll` polls for work
//! the way a polling idle loop does, yielding to the scheduler every round, and
//! `idle-kernel` sleeps, so the kernel's idle loop halts the thread (hlt/mwait).
//!
//! They are meant as partners: `smtlab penalty TASK --hogs
//! spin,spin-pause,idle-poll,idle-kernel` or `smtlab corun` puts one on the task's
//! sibling and shows what each costs the thread next to it. Alone, each reports the
//! rounds it made per second (a round of `idle-kernel` is one sleep of `sleep`
//! microseconds), which says only that it ran. They are in no suite.
//!
//! Parameters: `threads` (as the compute benchmarks), `sleep` (`idle-kernel` only).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use smtlab_model::{BenchInfo, Direction, ValueKind};

use crate::workers::{WorkerPool, WorkerState, threads_param};
use crate::{BenchContext, BenchError, Benchmark, Instance, Suite};

/// The sibling behaviours of the catalog.
pub fn benchmarks() -> Vec<Box<dyn Benchmark>> {
    crate::boxed(Idle::ALL)
}

smtlab_model::named_enum! {
    /// One way for a hardware thread to have nothing to do.
    pub enum Idle {
        /// A tight loop without a spin-wait hint.
        Spin = "spin",
        /// A loop with the spin-wait hint in every round.
        SpinPause = "spin-pause",
        /// A load of a flag that never comes, then a yield to the scheduler, every round.
        Poll = "idle-poll",
        /// A sleep every round: the kernel halts the thread in its idle loop.
        Kernel = "idle-kernel",
    }
}

impl Idle {
    fn what(self) -> &'static str {
        match self {
            Idle::Spin => {
                "a tight loop without a spin-wait hint (a busy-wait that competes \
                           for the core)"
            }
            Idle::SpinPause => {
                "a loop with the CPU's spin-wait hint (PAUSE on x86) every \
                                round, which leaves the core to the other thread"
            }
            Idle::Poll => {
                "polling for work: a load of a flag, then a yield to the \
                           scheduler, every round"
            }
            Idle::Kernel => {
                "idling in the kernel: a sleep every round, so the kernel's idle \
                             loop halts the thread (hlt/mwait)"
            }
        }
    }
}

/// Default length of one `idle-kernel` sleep.
const SLEEP_US_DEFAULT: &str = "100";

impl Benchmark for Idle {
    fn info(&self) -> BenchInfo {
        let mut params = vec![crate::params::declare(
            "threads",
            "auto",
            None,
            "threads; auto = one per CPU of the placement",
        )];
        if *self == Idle::Kernel {
            params.push(crate::params::declare(
                "sleep",
                SLEEP_US_DEFAULT,
                None,
                "microseconds of one sleep (1 to 1000000)",
            ));
        }
        BenchInfo {
            name: self.name().into(),
            group: "idle".into(),
            unit: "M rounds/s".into(),
            direction: Direction::Higher,
            value_kind: ValueKind::Rate { scale: 1e6 },
            description: format!(
                "A sibling with nothing to do, as a partner for penalty and corun: {}; \
                 alone, rounds per second",
                self.what()
            ),
            origin: "paper 004 s3".into(),
            params,
            main_param: None,
            report: Default::default(),
        }
    }

    /// A partner, not a measurement of its own: no suite runs it.
    fn in_suite(&self, _suite: Suite) -> bool {
        false
    }

    fn prepare(&self, ctx: &BenchContext<'_>) -> Result<Box<dyn Instance>, BenchError> {
        let name = self.name();
        let threads = threads_param(name, ctx)?;
        let kind = *self;
        let sleep = match kind {
            Idle::Kernel => {
                let us =
                    ctx.params
                        .get_u64_in("sleep", 1..=1_000_000, "1 to 1000000 microseconds")?;
                Duration::from_micros(us)
            }
            _ => Duration::ZERO,
        };
        let pool = WorkerPool::start(name, ctx.placement, Some(threads), move |_| {
            Ok(Rounds { kind, sleep })
        })?;
        Ok(Box::new(pool))
    }
}

/// A thread's rounds of its behaviour.
struct Rounds {
    kind: Idle,
    sleep: Duration,
}

/// Never set: what `idle-poll` waits for.
static WORK_ARRIVED: AtomicBool = AtomicBool::new(false);

impl WorkerState for Rounds {
    fn run(&mut self, rounds: u64) -> f64 {
        match self.kind {
            Idle::Spin => {
                let mut n = 0u64;
                for _ in 0..rounds {
                    n = black_box(n + 1);
                }
            }
            Idle::SpinPause => {
                for _ in 0..rounds {
                    std::hint::spin_loop();
                }
            }
            Idle::Poll => {
                for _ in 0..rounds {
                    if WORK_ARRIVED.load(Ordering::Relaxed) {
                        break;
                    }
                    std::thread::yield_now();
                }
            }
            Idle::Kernel => {
                for _ in 0..rounds {
                    std::thread::sleep(self.sleep);
                }
            }
        }
        rounds as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Params;
    use crate::workers::tests::{context, placement, topology};

    fn prepare(b: Idle, given: &[&str]) -> Result<Box<dyn Instance>, BenchError> {
        let info = b.info();
        let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
        let params = Params::resolve(&info, &given, false).unwrap();
        let p = placement(&[0]);
        let t = topology(None);
        b.prepare(&context(&params, &p, &t))
    }

    #[test]
    fn every_behaviour_counts_its_rounds() {
        for b in Idle::ALL {
            let mut inst = prepare(b, &[]).unwrap();
            let s = inst.sample(20).unwrap();
            assert_eq!(s.work, 20.0, "{}", b.name());
            assert_eq!(s.cpus, vec![0], "{}", b.name());
        }
    }

    #[test]
    fn idle_kernel_sleeps_its_rounds_and_checks_its_parameter() {
        let mut inst = prepare(Idle::Kernel, &["sleep=2000"]).unwrap();
        let s = inst.sample(3).unwrap();
        // Three sleeps of 2 ms take at least 6 ms: the thread was in the kernel.
        assert!(s.elapsed_ns >= 6_000_000, "{}", s.elapsed_ns);
        let e = prepare(Idle::Kernel, &["sleep=0"]).err().unwrap();
        assert!(e.to_string().contains("sleep"), "{e}");
    }

    #[test]
    fn partners_are_in_no_suite() {
        for b in benchmarks() {
            for suite in [Suite::Quick, Suite::Default, Suite::Full] {
                assert!(!b.in_suite(suite), "{}", b.info().name);
            }
            assert!(b.info().origin.contains("004"));
        }
    }
}
