//! What smtlab changes on the system, and how it is always put back.
//!
//! Two kernel switches matter for SMT experiments:
//!
//! * **SMT control** (`/sys/devices/system/cpu/smt/control`): `on` / `off` take every
//!   core's secondary hardware threads offline or bring them back, so one kernel can be
//!   measured with SMT off and on in one run (paper 004's HMT off/on, paper 001's
//!   noht/ht kernels). `forceoff` (boot parameter `nosmt=force`), `notsupported` (no
//!   siblings: most VMs) and `notimplemented` (no kernel support) cannot be switched.
//! * **CPU hotplug** (`/sys/devices/system/cpu/cpuN/online`): taking every CPU but one
//!   offline is the closest a running SMP kernel gets to the uniprocessor kernel of
//!   paper 000's `1T-UP` configuration (its SMP-only code still runs, but no other CPU
//!   exists for the scheduler, IPIs and shared cache lines).
//!
//! [`state::read`] reads both. Changes go through one guard, [`SmtSwitch`]: it snapshots
//! the state before its first change, lets the caller switch SMT as often as it likes
//! ([`SmtSwitch::set`], for runs where SMT off and on take turns) and take CPUs
//! offline ([`SmtSwitch::offline_all_but`], [`uniprocessor`]), and puts the snapshot
//! back however the process ends:
//!
//! * normally, on error and on unwinding: [`Drop`] (or [`SmtSwitch::restore`] to see
//!   errors);
//! * SIGINT / SIGTERM: a watcher thread restores, then lets the signal take its default
//!   action ([`signals`]);
//! * SIGKILL and crashes: a **guardian** process forked before the first change
//!   ([`guardian`]) blocks on a pipe whose write end only smtlab holds. When smtlab
//!   finishes normally it says so and the guardian exits without touching anything; if
//!   the pipe reaches end-of-file first, smtlab died, and the guardian writes the
//!   snapshot back and exits.
//!
//! Everything takes the sysfs root as a parameter ([`Sysfs`]), so tests run against fake
//! trees in temporary directories; writes into such a tree only change files, or also do
//! what the kernel would ([`Sysfs::emulating_kernel`], [`emulation`]: a fake machine).
//!
//! Network interrupt steering (paper 004 s3: a device's interrupts and receive
//! processing on the serving thread's SMT sibling or on another core) goes through a
//! [`FileWrites`] guard ([`irq`], [`writes`]), protected the same three ways, as is
//! `kernel.sched_schedstats`, which a core-scheduling cell needs on to count forced
//! idle ([`coresched::schedstats_on`]).
//!
//! Core scheduling ([`coresched`]) changes nothing to put back: a workload's cookie
//! belongs to its tasks and dies with them.
//!
//! [`fork`] is the one place smtlab forks (the guardian here, the os benchmarks' children
//! and the built-in processes server above): what a child of a multithreaded process may
//! do, said once.

pub mod cgroup;
pub mod coresched;
pub mod emulation;
pub mod error;
pub mod fork;
pub mod guard;
pub mod guardian;
pub mod irq;
pub mod signals;
pub mod state;
pub mod sysfs;
pub mod writes;

pub use error::ControlError;
pub use guard::{SmtSwitch, switch_refusal, uniprocessor, uniprocessor_plan};
pub use state::{CoreThreads, SmtControl, SmtSnapshot};
pub use sysfs::Sysfs;
pub use writes::FileWrites;
