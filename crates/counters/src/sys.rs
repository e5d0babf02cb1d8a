//! The thin unsafe layer over `perf-event-open-sys`: building attributes with every
//! relevant bit set explicitly, the system call, the ioctls and `read(2)`. Everything
//! above this module is safe code.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use perf_event_open_sys as sys;
use smtlab_model::counters::CountMode;
use sys::bindings as b;

pub(crate) use b::perf_event_attr as Attr;

/// A counting attribute: disabled until `start`, with enabled/running times so
/// multiplexing can be scaled and shown.
///
/// The privilege bits are always written, for every mode: the perf crates' builders
/// default to `exclude_kernel=1`, which silently zeroes tracepoints and context
/// switches, so nothing here relies on a default.
pub(crate) fn counting_attr(type_: u32, config: u64, mode: CountMode, inherit: bool) -> Attr {
    let mut a = Attr {
        size: std::mem::size_of::<Attr>() as u32,
        type_,
        config,
        read_format: (b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64,
        ..Attr::default()
    };
    a.set_disabled(1);
    a.set_inherit(u64::from(inherit));
    set_mode(&mut a, mode);
    a
}

/// A sampling attribute for the tracers: every occurrence (`sample_period` 1) with
/// `sample_type`, stamped with `CLOCK_MONOTONIC` so records of different CPUs merge in
/// order, disabled until started, nothing excluded (tracepoints fire in the kernel:
/// excluding kernel mode would record nothing).
pub(crate) fn sampling_attr(type_: u32, config: u64, sample_type: u64, inherit: bool) -> Attr {
    let mut a = Attr {
        size: std::mem::size_of::<Attr>() as u32,
        type_,
        config,
        sample_type,
        clockid: libc::CLOCK_MONOTONIC,
        ..Attr::default()
    };
    a.__bindgen_anon_1.sample_period = 1;
    a.set_disabled(1);
    a.set_inherit(u64::from(inherit));
    set_mode(&mut a, CountMode::All);
    a.set_use_clockid(1);
    a
}

/// A counting attribute for an encoded named event: type and all three config words.
pub(crate) fn named_attr(
    enc: &smtlab_model::counters::named::EventEncoding,
    mode: CountMode,
    inherit: bool,
) -> Attr {
    let mut a = counting_attr(enc.type_, enc.config, mode, inherit);
    a.__bindgen_anon_3.config1 = enc.config1;
    a.__bindgen_anon_4.config2 = enc.config2;
    a
}

/// Writes the three exclude bits for `mode`. `All` excludes nothing (not even the
/// hypervisor): it is the "everything" count.
pub(crate) fn set_mode(a: &mut Attr, mode: CountMode) {
    let (exclude_user, exclude_kernel, exclude_hv) = match mode {
        CountMode::All => (0, 0, 0),
        CountMode::User => (0, 1, 1),
        CountMode::Kernel => (1, 0, 1),
    };
    a.set_exclude_user(exclude_user);
    a.set_exclude_kernel(exclude_kernel);
    a.set_exclude_hv(exclude_hv);
}

/// An open perf_event file descriptor; closed on drop.
#[derive(Debug)]
pub(crate) struct PerfFd {
    fd: OwnedFd,
}

/// `cpu` as `perf_event_open`'s CPU argument.
pub(crate) fn cpu_arg(cpu: u32) -> Result<i32, crate::CounterError> {
    i32::try_from(cpu)
        .map_err(|_| crate::CounterError::State(format!("CPU number {cpu} is out of range")))
}

/// `perf_event_open(attr, pid, cpu, group, PERF_FLAG_FD_CLOEXEC)`; the error is the
/// raw errno so callers can classify it.
pub(crate) fn open(
    attr: &mut Attr,
    pid: i32,
    cpu: i32,
    group: Option<&PerfFd>,
) -> Result<PerfFd, i32> {
    let group_fd = group.map_or(-1, |g| g.fd.as_raw_fd());
    // SAFETY: `attr` is a fully initialised perf_event_attr whose `size` is the size
    // of the struct we pass; the kernel reads it and at most writes `size` back
    // (E2BIG). `group_fd` is -1 or a perf fd we keep open for the duration of the call.
    let fd = unsafe {
        sys::perf_event_open(
            attr,
            pid,
            cpu,
            group_fd,
            b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    Ok(PerfFd {
        // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
        fd: unsafe { OwnedFd::from_raw_fd(fd) },
    })
}

/// `perf-event-open-sys`'s ioctls with an integer argument.
type Ioctl = unsafe fn(libc::c_int, libc::c_uint) -> libc::c_int;

fn check(ret: libc::c_int, what: &str) -> io::Result<()> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(())
    }
}

impl PerfFd {
    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// One of the ioctls that take `PERF_IOC_FLAG_GROUP` (with `group`: every event of
    /// this one's group) or 0.
    fn flag_ioctl(&self, ioctl: Ioctl, name: &str, group: bool) -> io::Result<()> {
        let flag = if group { b::PERF_IOC_FLAG_GROUP } else { 0 };
        // SAFETY: ioctl on a perf fd we own, with an integer argument.
        check(unsafe { ioctl(self.raw(), flag) }, name)
    }

    /// Enables the event (and with `group`, every event of its group).
    pub(crate) fn enable(&self, group: bool) -> io::Result<()> {
        self.flag_ioctl(sys::ioctls::ENABLE, "PERF_EVENT_IOC_ENABLE", group)
    }

    pub(crate) fn disable(&self, group: bool) -> io::Result<()> {
        self.flag_ioctl(sys::ioctls::DISABLE, "PERF_EVENT_IOC_DISABLE", group)
    }

    pub(crate) fn reset(&self, group: bool) -> io::Result<()> {
        self.flag_ioctl(sys::ioctls::RESET, "PERF_EVENT_IOC_RESET", group)
    }

    /// Sets a tracepoint filter (`reason == 4`); the errno when the kernel refuses it.
    pub(crate) fn set_filter(&self, filter: &str) -> Result<(), i32> {
        let text = std::ffi::CString::new(filter).map_err(|_| libc::EINVAL)?;
        // SAFETY: ioctl on a perf fd we own; the kernel only reads the NUL-terminated
        // string, which lives until the call returns.
        let ret = unsafe { sys::ioctls::SET_FILTER(self.raw(), text.as_ptr().cast_mut()) };
        if ret < 0 {
            Err(io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL))
        } else {
            Ok(())
        }
    }

    /// Sends this event's samples into `target`'s ring buffer (same CPU required).
    pub(crate) fn set_output(&self, target: &PerfFd) -> io::Result<()> {
        // SAFETY: ioctl on two perf fds we own; the argument is a descriptor number.
        check(
            unsafe { sys::ioctls::SET_OUTPUT(self.raw(), target.raw()) },
            "PERF_EVENT_IOC_SET_OUTPUT",
        )
    }

    /// The kernel's id of this event, as sample records carry it.
    pub(crate) fn id(&self) -> io::Result<u64> {
        let mut id = 0u64;
        // SAFETY: ioctl on a perf fd we own; the kernel writes one u64 to `id`, which
        // lives across the call.
        let ret = unsafe { sys::ioctls::ID(self.raw(), &mut id) };
        check(ret, "PERF_EVENT_IOC_ID")?;
        Ok(id)
    }

    /// Reads `(value, time_enabled, time_running)` of a counting event opened with
    /// [`counting_attr`]'s read format.
    pub(crate) fn read_counting(&self) -> io::Result<(u64, u64, u64)> {
        let mut buf = [0u64; 3];
        // SAFETY: `buf` is 24 writable bytes that live across the call, and we pass
        // exactly that length.
        let n = unsafe {
            libc::read(
                self.raw(),
                buf.as_mut_ptr().cast(),
                std::mem::size_of_val(&buf),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != std::mem::size_of_val(&buf) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("short read of a counter: {n} of 24 bytes"),
            ));
        }
        Ok((buf[0], buf[1], buf[2]))
    }
}

/// Resets every event, then enables them all; `what` names them in errors.
pub(crate) fn reset_then_enable<'a>(
    fds: impl Iterator<Item = &'a PerfFd> + Clone,
    what: &str,
) -> Result<(), crate::CounterError> {
    for fd in fds.clone() {
        fd.reset(false)
            .map_err(|e| crate::CounterError::io(format!("reset {what}"), e))?;
    }
    for fd in fds {
        fd.enable(false)
            .map_err(|e| crate::CounterError::io(format!("enable {what}"), e))?;
    }
    Ok(())
}

/// The errno's symbolic name for messages (`ENOENT`), or `errno N`.
pub(crate) fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::ENOENT => "ENOENT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENODEV => "ENODEV",
        libc::EACCES => "EACCES",
        libc::EPERM => "EPERM",
        libc::EINVAL => "EINVAL",
        libc::E2BIG => "E2BIG",
        libc::EBUSY => "EBUSY",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::ESRCH => "ESRCH",
        libc::ENOSPC => "ENOSPC",
        libc::ENOMEM => "ENOMEM",
        libc::ENOSYS => "ENOSYS",
        libc::EOVERFLOW => "EOVERFLOW",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}
