//! The calling process's CPU affinity (what cpusets, `taskset` or a container allow).

use smtlab_model::CpuSet;

/// The CPUs this thread may run on, or `None` if the kernel will not say.
pub(crate) fn current() -> Option<CpuSet> {
    // The kernel refuses (EINVAL) a buffer smaller than its NR_CPUS; grow until it fits.
    let mut words = 1024 / 64;
    while words <= (1 << 20) / 64 {
        let mut buf = vec![0u64; words];
        let bytes = words * std::mem::size_of::<u64>();
        // SAFETY: the pointer and length describe `buf`, which outlives the call; the
        // kernel writes at most `bytes` bytes and treats the buffer as a bit array.
        let rc = unsafe { libc::sched_getaffinity(0, bytes, buf.as_mut_ptr().cast()) };
        if rc == 0 {
            let mut set = CpuSet::new();
            for (w, bits) in buf.iter().enumerate() {
                for b in 0..64 {
                    if bits & (1u64 << b) != 0
                        && let Ok(cpu) = u32::try_from(w * 64 + b)
                    {
                        set.insert(cpu);
                    }
                }
            }
            return Some(set);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
            return None;
        }
        words *= 2;
    }
    None
}
