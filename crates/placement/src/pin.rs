//! Pinning threads and child processes to CPUs with sched_setaffinity, and reading the
//! affinity back to verify it took.

use std::io;

use smtlab_model::CpuSet;

/// Why pinning failed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    #[error("cannot pin to CPUs {cpus}: {source}")]
    Set { cpus: String, source: io::Error },
    #[error("cannot read the CPU affinity back: {0}")]
    Get(io::Error),
    #[error("pinned to CPUs {wanted} but the kernel reports {actual}")]
    Mismatch { wanted: String, actual: String },
    #[error("empty CPU set: nothing to pin to")]
    Empty,
}

fn to_cpu_set(cpus: &CpuSet) -> Result<libc::cpu_set_t, PinError> {
    if cpus.is_empty() {
        return Err(PinError::Empty);
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>() as u32;
    for cpu in cpus {
        if cpu >= max {
            return Err(PinError::Set {
                cpus: cpus.to_list_string(),
                source: io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("CPU {cpu} is beyond the {max} CPUs cpu_set_t holds"),
                ),
            });
        }
        // SAFETY: cpu < CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    Ok(set)
}

/// Sets the affinity of thread or process `tid` (0 = the calling thread).
pub fn set_affinity(tid: libc::pid_t, cpus: &CpuSet) -> Result<(), PinError> {
    let set = to_cpu_set(cpus)?;
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(PinError::Set {
            cpus: cpus.to_list_string(),
            source: io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Reads the affinity of thread or process `tid` (0 = the calling thread).
pub fn get_affinity(tid: libc::pid_t) -> Result<CpuSet, PinError> {
    // SAFETY: zeroed cpu_set_t is valid; the kernel fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(PinError::Get(io::Error::last_os_error()));
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
}

/// Pins the calling thread to `cpus` and verifies by reading the affinity back.
pub fn pin_current_thread(cpus: &CpuSet) -> Result<(), PinError> {
    set_affinity(0, cpus)?;
    let actual = get_affinity(0)?;
    if &actual != cpus {
        return Err(PinError::Mismatch {
            wanted: cpus.to_list_string(),
            actual: actual.to_list_string(),
        });
    }
    Ok(())
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread_to(cpu: u32) -> Result<(), PinError> {
    pin_current_thread(&std::iter::once(cpu).collect())
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments; returns -1 on error.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}
