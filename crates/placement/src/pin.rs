//! Pinning threads and child processes to CPUs with `sched_setaffinity`, and reading the
//! affinity back to verify it took.
//!
//! Every pin is verified, because the kernel is lenient: asked for CPUs {0, 5} on a
//! two-CPU machine it silently applies {0}. A pinned measurement that runs elsewhere than
//! its placement says would be a wrong number, so a difference is an error
//! ([`PinError::Mismatch`]).
//!
//! * The calling thread: [`pin_current_thread`], [`pin_current_thread_to`].
//! * New threads: [`spawn_pinned`] pins *inside* the new thread before it runs the work
//!   (pinning the parent and letting the child inherit would move the parent), and
//!   returns only once the pin is confirmed.
//! * Child processes: [`CommandPinExt::pin_to`] on `std::process::Command` pins between
//!   fork and exec.
//!
//! The OS boundary is the [`Affinity`] trait, which [`SystemAffinity`] implements with the
//! kernel's calls; the free functions use it.
//!
//! Masks are sized to the CPU numbers involved (not glibc's fixed 1024-bit `cpu_set_t`),
//! so machines with more than 1024 CPUs work.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{OnceLock, mpsc};
use std::thread::{self, JoinHandle};

use smtlab_model::CpuSet;
use smtlab_model::cpuset::MAX_CPU;

/// Why pinning failed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("cannot pin {} to CPUs {cpus}: {error}{}", who(*tid), einval_hint(error))]
    Set {
        tid: libc::pid_t,
        cpus: String,
        error: io::Error,
    },
    // The cause is shown in the message and is not a `source`, so it is printed once.
    #[error("cannot read the CPU affinity of {}: {error}", who(*tid))]
    Get { tid: libc::pid_t, error: io::Error },
    #[error(
        "{} was pinned to CPUs {wanted} but the kernel reports {actual} \
         (CPUs offline, absent or outside this process's cpuset are dropped)",
        who(*tid)
    )]
    Mismatch {
        tid: libc::pid_t,
        wanted: String,
        actual: String,
    },
    #[error("thread pinned to CPU {wanted} is running on CPU {running}")]
    Running { wanted: u32, running: u32 },
    #[error("empty CPU set: nothing to pin to")]
    Empty,
    #[error("CPU {cpu} is above the largest CPU number smtlab supports ({MAX_CPU})")]
    TooLarge { cpu: u32 },
}

fn who(tid: libc::pid_t) -> String {
    if tid == 0 {
        "the calling thread".into()
    } else {
        format!("thread/process {tid}")
    }
}

fn einval_hint(e: &io::Error) -> &'static str {
    if e.raw_os_error() == Some(libc::EINVAL) {
        " (none of these CPUs is online and allowed for this process)"
    } else {
        ""
    }
}

impl From<PinError> for io::Error {
    fn from(e: PinError) -> Self {
        match e {
            PinError::Empty | PinError::TooLarge { .. } => {
                io::Error::new(io::ErrorKind::InvalidInput, e)
            }
            e => io::Error::other(e),
        }
    }
}

/// The OS boundary for CPU affinity. `tid` is a thread or process id; 0 is the calling
/// thread, as for `sched_setaffinity(2)`.
pub trait Affinity: Send + Sync {
    /// Sets the affinity (the kernel may apply only the online, allowed part: see
    /// [`Affinity::pin`]).
    fn set(&self, tid: libc::pid_t, cpus: &CpuSet) -> Result<(), PinError>;
    /// Reads the affinity.
    fn get(&self, tid: libc::pid_t) -> Result<CpuSet, PinError>;
    /// The CPU the calling thread runs on now, when the platform says.
    fn current_cpu(&self) -> Option<u32>;

    /// Sets the affinity and reads it back; a difference is [`PinError::Mismatch`].
    fn pin(&self, tid: libc::pid_t, cpus: &CpuSet) -> Result<(), PinError> {
        self.set(tid, cpus)?;
        self.verify(tid, cpus)
    }

    /// Checks that `tid`'s affinity is exactly `cpus`.
    fn verify(&self, tid: libc::pid_t, cpus: &CpuSet) -> Result<(), PinError> {
        let actual = self.get(tid)?;
        if &actual == cpus {
            Ok(())
        } else {
            Err(PinError::Mismatch {
                tid,
                wanted: cpus.to_list_string(),
                actual: actual.to_list_string(),
            })
        }
    }

    /// Pins the calling thread to one CPU, verifies the mask, and checks that the thread
    /// now runs there (the kernel migrates a thread before `sched_setaffinity` returns).
    fn pin_current_to(&self, cpu: u32) -> Result<(), PinError> {
        self.pin(0, &std::iter::once(cpu).collect())?;
        match self.current_cpu() {
            Some(running) if running != cpu => Err(PinError::Running {
                wanted: cpu,
                running,
            }),
            _ => Ok(()),
        }
    }
}

/// The real kernel interface.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemAffinity;

impl Affinity for SystemAffinity {
    fn set(&self, tid: libc::pid_t, cpus: &CpuSet) -> Result<(), PinError> {
        CpuMask::from_set(cpus)?
            .apply(tid)
            .map_err(|error| PinError::Set {
                tid,
                cpus: cpus.to_list_string(),
                error,
            })
    }

    fn get(&self, tid: libc::pid_t) -> Result<CpuSet, PinError> {
        let mut mask = CpuMask::zeroed(kernel_mask_words());
        mask.read(tid)
            .map_err(|error| PinError::Get { tid, error })?;
        Ok(mask.to_set())
    }

    fn current_cpu(&self) -> Option<u32> {
        // SAFETY: no arguments; returns -1 on error.
        let c = unsafe { libc::sched_getcpu() };
        u32::try_from(c).ok()
    }
}

/// The kernel thread id of the calling thread (what `perf_event_open`, `tgkill` and
/// `/proc/PID/task/TID` take).
pub fn gettid() -> libc::pid_t {
    // SAFETY: gettid takes no arguments and cannot fail. Called through syscall(2)
    // because the libc wrapper needs glibc 2.30.
    unsafe { libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// CPU time thread `tid` (of any process, kernel threads too) has run so far, in
/// nanoseconds: the scheduler's own count, the first field of `/proc/TID/schedstat`.
/// `None` once the thread is gone (or without schedstats).
pub fn thread_cpu_ns(tid: libc::pid_t) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Sets the affinity of thread or process `tid` (0 = the calling thread), unverified.
pub fn set_affinity(tid: libc::pid_t, cpus: &CpuSet) -> Result<(), PinError> {
    SystemAffinity.set(tid, cpus)
}

/// Reads the affinity of thread or process `tid` (0 = the calling thread).
pub fn get_affinity(tid: libc::pid_t) -> Result<CpuSet, PinError> {
    SystemAffinity.get(tid)
}

/// Pins the calling thread to `cpus` and verifies by reading the affinity back.
pub fn pin_current_thread(cpus: &CpuSet) -> Result<(), PinError> {
    SystemAffinity.pin(0, cpus)
}

/// Pins the calling thread to one CPU, verified (see [`Affinity::pin_current_to`]).
pub fn pin_current_thread_to(cpu: u32) -> Result<(), PinError> {
    SystemAffinity.pin_current_to(cpu)
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Option<u32> {
    SystemAffinity.current_cpu()
}

/// Spawns a thread named `name` that pins itself to `cpu` (verified) before running `f`;
/// `None` runs unpinned (the `os` placement). Returns once the pin is confirmed, so a
/// caller never measures a thread that runs elsewhere.
///
/// If pinning fails, `f` never runs and the error is returned. The failed thread ends by
/// unwinding (`resume_unwind`: no panic message), so this relies on the workspace's
/// default `panic = "unwind"`.
pub fn spawn_pinned<F, T>(
    cpu: Option<u32>,
    name: impl Into<String>,
    f: F,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let pin = move || cpu.map_or(Ok(()), |c| SystemAffinity.pin_current_to(c));
    spawn_pinned_by(thread::Builder::new().name(name.into()), pin, f)
}

/// [`spawn_pinned`] with the thread's `builder` (its name, its stack) and its own `pin`,
/// run first in the new thread (pinning to a set of CPUs, say).
pub fn spawn_pinned_by<F, T>(
    builder: thread::Builder,
    pin: impl FnOnce() -> Result<(), PinError> + Send + 'static,
    f: F,
) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel(1);
    let handle = builder.spawn(move || {
        let result = pin();
        let failed = result.is_err();
        // The receiver lives until this message arrives; a send error cannot happen.
        let _ = tx.send(result);
        drop(tx);
        if failed {
            std::panic::resume_unwind(Box::new(PinFailed));
        }
        f()
    })?;
    let reported = match rx.recv() {
        Ok(result) => result.map_err(io::Error::from),
        Err(_) => Err(io::Error::other(
            "pinned thread ended before reporting its pin",
        )),
    };
    // A thread whose pin failed has stopped (or is stopping) without running its work.
    if let Err(e) = reported {
        drop(handle.join());
        return Err(e);
    }
    Ok(handle)
}

/// Marker payload of a thread that ended because its pin failed.
struct PinFailed;

/// Pinning for child processes.
pub trait CommandPinExt {
    /// Makes the child run on exactly `cpus`, set between fork and exec so that not one
    /// instruction of the program runs elsewhere. The child reads its affinity back before
    /// exec; if the kernel applied a different set (a CPU offline or outside the cpuset)
    /// `spawn` fails with `EINVAL`. Errors here are for sets that cannot be expressed
    /// (empty, CPU number too large).
    fn pin_to(&mut self, cpus: &CpuSet) -> Result<&mut Self, PinError>;
}

impl CommandPinExt for Command {
    fn pin_to(&mut self, cpus: &CpuSet) -> Result<&mut Self, PinError> {
        // Everything is allocated here, in the parent: between fork and exec only
        // async-signal-safe calls are allowed, so the hook must not touch the allocator.
        let words = kernel_mask_words();
        let mut want = CpuMask::from_set(cpus)?;
        want.grow(words);
        let mut got = CpuMask::zeroed(want.words.len());
        let hook = move || -> io::Result<()> {
            want.apply(0)?;
            got.words.fill(0);
            got.read(0)?;
            if got.words == want.words {
                Ok(())
            } else {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            }
        };
        // SAFETY: the hook only issues two raw syscalls and compares preallocated
        // buffers: no allocation, no locks, nothing that is unsafe after fork.
        unsafe { self.pre_exec(hook) };
        Ok(self)
    }
}

/// A kernel CPU bitmask: `unsigned long` words, CPU n at bit n % BITS of word n / BITS,
/// as `sched_setaffinity(2)` and `pthread_attr_setaffinity_np(3)` take it, sized to the
/// highest CPU in it rather than to glibc's 1024-bit `cpu_set_t`.
///
/// Built before a `fork`, [`CpuMask::apply`] pins the child without allocating.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMask {
    words: Vec<libc::c_ulong>,
}

const WORD_BITS: usize = libc::c_ulong::BITS as usize;

impl CpuMask {
    fn zeroed(words: usize) -> Self {
        Self {
            words: vec![0; words.max(1)],
        }
    }

    /// The mask of `cpus`; an error when empty or above [`MAX_CPU`].
    pub fn from_set(cpus: &CpuSet) -> Result<Self, PinError> {
        let last = cpus.last().ok_or(PinError::Empty)?;
        if last > MAX_CPU {
            return Err(PinError::TooLarge { cpu: last });
        }
        let mut mask = Self::zeroed(last as usize / WORD_BITS + 1);
        for cpu in cpus {
            let cpu = cpu as usize;
            mask.words[cpu / WORD_BITS] |= 1 << (cpu % WORD_BITS);
        }
        Ok(mask)
    }

    fn grow(&mut self, words: usize) {
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
    }

    /// The mask of one CPU.
    pub fn of_cpu(cpu: u32) -> Result<Self, PinError> {
        Self::from_set(&std::iter::once(cpu).collect())
    }

    /// Size of the mask in bytes, the `cpusetsize` the kernel and glibc take with it.
    pub fn bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<libc::c_ulong>()
    }

    /// The words, for `pthread_attr_setaffinity_np` and raw system calls; valid for
    /// [`CpuMask::bytes`] bytes.
    pub fn as_ptr(&self) -> *const libc::c_ulong {
        self.words.as_ptr()
    }

    pub fn to_set(&self) -> CpuSet {
        self.words
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| {
                (0..WORD_BITS)
                    .filter(move |b| w & (1 << b) != 0)
                    .map(move |b| (i * WORD_BITS + b) as u32)
            })
            .collect()
    }

    /// Sets the affinity of `tid` (0 = the calling thread), unverified.
    /// Async-signal-safe: one raw syscall, no allocation (the error is errno only), so a
    /// child may call it between `fork` and `exec` or `_exit`.
    pub fn apply(&self, tid: libc::pid_t) -> io::Result<()> {
        // SAFETY: the pointer and length describe our own buffer; the kernel only reads.
        syscall_result(unsafe {
            libc::syscall(
                libc::SYS_sched_setaffinity,
                tid,
                self.bytes(),
                self.words.as_ptr(),
            )
        })
    }

    /// Async-signal-safe. The buffer must hold the kernel's whole mask, else `EINVAL`.
    fn read(&mut self, tid: libc::pid_t) -> io::Result<()> {
        // SAFETY: the kernel writes at most `bytes()` bytes into our buffer.
        syscall_result(unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                tid,
                self.bytes(),
                self.words.as_mut_ptr(),
            )
        })
    }
}

/// A raw system call's return as a result: negative is the error in `errno`.
/// Async-signal-safe (reads `errno`, allocates nothing).
fn syscall_result(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Words needed to read the kernel's affinity mask (its `nr_cpu_ids`, rounded up): the
/// kernel refuses shorter buffers, and the number cannot change while we run.
fn kernel_mask_words() -> usize {
    static WORDS: OnceLock<usize> = OnceLock::new();
    *WORDS.get_or_init(|| {
        let max_words = (MAX_CPU as usize + 1) / WORD_BITS;
        let mut words = 1024 / WORD_BITS;
        while words < max_words {
            let mut probe = CpuMask::zeroed(words);
            match probe.read(0) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => words *= 2,
                _ => break,
            }
        }
        words
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(v: &[u32]) -> CpuSet {
        v.iter().copied().collect()
    }

    fn online() -> CpuSet {
        let n = thread::available_parallelism().map_or(1, |n| n.get() as u32);
        get_affinity(0).unwrap_or_else(|_| (0..n).collect())
    }

    /// Runs `f` on a fresh thread so tests that pin do not leave the test harness's
    /// worker threads pinned.
    fn on_fresh_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        smtlab_fixtures::bounded::join(thread::spawn(f), "a test thread")
    }

    #[test]
    fn cpu_2000_is_encoded_as_the_kernel_reads_it() {
        // The kernel's layout: CPU n is bit n % BITS of word n / BITS, the byte length
        // passed with the words covering the highest CPU (no 1,024-bit cap).
        let m = CpuMask::of_cpu(2000).unwrap();
        assert_eq!(m.words.len(), 2000 / WORD_BITS + 1);
        assert_eq!(
            m.bytes(),
            m.words.len() * std::mem::size_of::<libc::c_ulong>()
        );
        assert!(m.bytes() * 8 > 2000 && m.bytes() * 8 > 1024);
        for (i, &w) in m.words.iter().enumerate() {
            let want = if i == 2000 / WORD_BITS {
                1 << (2000 % WORD_BITS)
            } else {
                0
            };
            assert_eq!(w, want, "word {i}");
        }
        // The same bits as bytes, as the kernel sees the buffer (little-endian words).
        if cfg!(target_endian = "little") {
            // SAFETY: `as_ptr` is valid for `bytes()` bytes while `m` lives.
            let raw = unsafe { std::slice::from_raw_parts(m.as_ptr().cast::<u8>(), m.bytes()) };
            assert_eq!(raw[2000 / 8], 1 << (2000 % 8));
            assert_eq!(raw.iter().filter(|&&b| b != 0).count(), 1);
        }
        assert_eq!(m.to_set(), set(&[2000]));
    }

    #[test]
    fn masks_round_trip_beyond_1024_cpus() {
        let s = set(&[0, 63, 64, 1023, 1024, 4000, MAX_CPU]);
        let m = CpuMask::from_set(&s).unwrap();
        assert_eq!(m.to_set(), s);
        assert_eq!(m.words.len(), (MAX_CPU as usize) / WORD_BITS + 1);
        assert!(matches!(
            CpuMask::from_set(&CpuSet::new()),
            Err(PinError::Empty)
        ));
        assert!(matches!(
            CpuMask::from_set(&set(&[MAX_CPU + 1])),
            Err(PinError::TooLarge { .. })
        ));
    }

    #[test]
    fn one_cpu_above_1024_is_a_mask_of_the_right_size_and_bit() {
        let cpu = 1500;
        let m = CpuMask::of_cpu(cpu).unwrap();
        let word = cpu as usize / WORD_BITS;
        assert_eq!(m.bytes(), (word + 1) * std::mem::size_of::<libc::c_ulong>());
        // SAFETY: the pointer is valid for `bytes()` bytes, so for `word + 1` words.
        let w = unsafe { *m.as_ptr().add(word) };
        assert_eq!(w, 1 << (cpu as usize % WORD_BITS));
        assert_eq!(m.to_set().to_vec(), [cpu]);
        assert!(CpuMask::of_cpu(MAX_CPU + 1).is_err());
    }

    #[test]
    fn pin_current_thread_to_cpu0_then_back_to_all() {
        let all = online();
        on_fresh_thread(move || {
            let first = all.first().unwrap();
            pin_current_thread(&set(&[first])).unwrap();
            assert_eq!(get_affinity(0).unwrap(), set(&[first]));
            assert_eq!(current_cpu(), Some(first));
            pin_current_thread(&all).unwrap();
            assert_eq!(get_affinity(0).unwrap(), all);
            pin_current_thread_to(all.last().unwrap()).unwrap();
            assert_eq!(current_cpu(), all.last());
        });
    }

    #[test]
    fn empty_sets_and_absent_cpus_are_errors() {
        on_fresh_thread(|| {
            let before = get_affinity(0).unwrap();
            assert!(matches!(
                pin_current_thread(&CpuSet::new()),
                Err(PinError::Empty)
            ));
            // Beyond the machine but representable: the kernel refuses it.
            let e = pin_current_thread(&set(&[MAX_CPU])).unwrap_err();
            assert!(matches!(e, PinError::Set { .. }), "{e:?}");
            let msg = e.to_string();
            assert!(
                msg.starts_with("cannot pin the calling thread to CPUs 65535:"),
                "{msg}"
            );
            assert!(msg.contains("none of these CPUs is online"), "{msg}");
            // Beyond what smtlab represents at all.
            let e = set_affinity(0, &set(&[MAX_CPU + 1])).unwrap_err();
            assert!(matches!(e, PinError::TooLarge { .. }), "{e:?}");
            // Partly absent: the kernel keeps the online part; verification catches it.
            let first = before.first().unwrap();
            let e = pin_current_thread(&set(&[first, MAX_CPU])).unwrap_err();
            assert!(matches!(e, PinError::Mismatch { .. }), "{e:?}");
            assert!(e.to_string().contains("but the kernel reports"), "{e}");
            // Nothing above changed the thread's affinity to something unexpected.
            assert!(get_affinity(0).unwrap().is_subset(&before));
        });
    }

    #[test]
    fn spawn_pinned_threads_run_on_their_cpu() {
        let all = online();
        let handles: Vec<_> = all
            .iter()
            .map(|cpu| {
                let h = spawn_pinned(Some(cpu), format!("pinned-{cpu}"), move || {
                    // Busy long enough that a wrong mask would show as a migration.
                    let mut seen = CpuSet::new();
                    for _ in 0..1000 {
                        seen.insert(current_cpu().unwrap());
                        std::hint::black_box(seen.len());
                    }
                    (
                        thread::current().name().map(String::from),
                        seen,
                        get_affinity(0).unwrap(),
                    )
                })
                .unwrap();
                (cpu, h)
            })
            .collect();
        for (cpu, h) in handles {
            let (name, seen, mask) = smtlab_fixtures::bounded::join(h, "a test thread");
            assert_eq!(name.as_deref(), Some(format!("pinned-{cpu}").as_str()));
            assert_eq!(seen, set(&[cpu]));
            assert_eq!(mask, set(&[cpu]));
        }
    }

    #[test]
    fn spawn_pinned_none_leaves_the_thread_unpinned() {
        let inherited = get_affinity(0).unwrap();
        let h = spawn_pinned(None, "free", || get_affinity(0).unwrap()).unwrap();
        let mask = smtlab_fixtures::bounded::join(h, "the unpinned thread");
        assert_eq!(mask, inherited);
    }

    #[test]
    fn spawn_pinned_reports_failures_without_running_the_work() {
        let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = ran.clone();
        let e = spawn_pinned(Some(MAX_CPU), "doomed", move || {
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        })
        .unwrap_err();
        assert!(e.to_string().contains("cannot pin"), "{e}");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[test]
    fn child_process_is_pinned_before_exec() {
        let all = online();
        let cpu = all.last().unwrap();
        let out = Command::new("sh")
            .args(["-c", "grep Cpus_allowed_list /proc/self/status"])
            .pin_to(&set(&[cpu]))
            .unwrap()
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.trim(), format!("Cpus_allowed_list:\t{cpu}"));
    }

    #[test]
    fn child_pinned_to_cpu1_reports_1() {
        let all = online();
        if !all.contains(1) {
            return; // single-CPU machine: covered by child_process_is_pinned_before_exec
        }
        let mut child = Command::new("sleep")
            .arg("5")
            .pin_to(&set(&[1]))
            .unwrap()
            .spawn()
            .unwrap();
        let verified = SystemAffinity.verify(child.id() as i32, &set(&[1]));
        let wrong = SystemAffinity.verify(child.id() as i32, &set(&[0]));
        child.kill().unwrap();
        smtlab_fixtures::bounded::wait(&mut child, "a test child");
        verified.unwrap();
        let wrong = wrong.unwrap_err();
        assert!(matches!(wrong, PinError::Mismatch { .. }), "{wrong:?}");
        assert!(wrong.to_string().contains("reports 1"), "{wrong}");
    }

    #[test]
    fn child_pin_errors() {
        assert!(matches!(
            Command::new("true").pin_to(&CpuSet::new()),
            Err(PinError::Empty)
        ));
        // Representable but absent: the child refuses to exec, spawn reports EINVAL.
        let e = Command::new("true")
            .pin_to(&set(&[MAX_CPU]))
            .unwrap()
            .status()
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
        // Partly absent: the kernel would drop a CPU, so the child refuses too.
        let first = online().first().unwrap();
        let e = Command::new("true")
            .pin_to(&set(&[first, MAX_CPU]))
            .unwrap()
            .status()
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn verifying_a_missing_process_names_it() {
        // pid_max is at most 2^22, so this pid cannot exist.
        let e = SystemAffinity.verify(1 << 30, &set(&[0])).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("thread/process 1073741824"), "{msg}");
        assert!(matches!(e, PinError::Get { .. }));
    }
}
