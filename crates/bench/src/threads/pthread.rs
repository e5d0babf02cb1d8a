//! Minimal owners of a POSIX mutex and condition variable with default attributes.
//!
//! The benchmarks measure the C library's primitives (what paper 002 measured and what
//! C and C++ programs use), not `std::sync`, whose futex-based implementation differs.
//! Each object lives in a `Box` because a pthread object must not move once initialised.

use std::cell::UnsafeCell;
use std::io;

/// A `pthread_mutex_t` with default attributes (a "normal" glibc mutex: no spinning, no
/// error checking).
pub(crate) struct PMutex(Box<UnsafeCell<libc::pthread_mutex_t>>);

// SAFETY: a pthread mutex is made to be shared between threads; all access goes through
// the pthread functions, which synchronise internally.
unsafe impl Send for PMutex {}
// SAFETY: as above.
unsafe impl Sync for PMutex {}

impl PMutex {
    pub(crate) fn new() -> io::Result<Self> {
        let cell = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        // SAFETY: the pointer is to a live, boxed (so never moved) mutex object; a null
        // attribute pointer asks for the defaults.
        let rc = unsafe { libc::pthread_mutex_init(cell.get(), std::ptr::null()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Self(cell))
    }

    #[inline(always)]
    pub(crate) fn lock(&self) {
        // SAFETY: the mutex is initialised and outlives this call. A default mutex's lock
        // can only fail with EINVAL for an uninitialised object, which `new` rules out.
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
    }

    #[inline(always)]
    pub(crate) fn unlock(&self) {
        // SAFETY: as in `lock`; callers only unlock a mutex their thread locked.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
    }

    fn raw(&self) -> *mut libc::pthread_mutex_t {
        self.0.get()
    }
}

impl Drop for PMutex {
    fn drop(&mut self) {
        // SAFETY: the mutex is initialised; `&mut self` proves no thread still uses it.
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

/// A `pthread_cond_t` with default attributes.
pub(crate) struct PCond(Box<UnsafeCell<libc::pthread_cond_t>>);

// SAFETY: a condition variable is made to be shared between threads; all access goes
// through the pthread functions.
unsafe impl Send for PCond {}
// SAFETY: as above.
unsafe impl Sync for PCond {}

impl PCond {
    pub(crate) fn new() -> io::Result<Self> {
        let cell = Box::new(UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER));
        // SAFETY: pointer to a live boxed object; null attributes mean the defaults.
        let rc = unsafe { libc::pthread_cond_init(cell.get(), std::ptr::null()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(Self(cell))
    }

    /// Waits; the caller must hold `mutex`, which is released while waiting and held
    /// again on return.
    pub(crate) fn wait(&self, mutex: &PMutex) {
        // SAFETY: both objects are initialised and outlive the call; the caller holds
        // `mutex`, as pthread_cond_wait requires.
        unsafe { libc::pthread_cond_wait(self.0.get(), mutex.raw()) };
    }

    #[inline(always)]
    pub(crate) fn signal(&self) {
        // SAFETY: the condition variable is initialised and outlives the call.
        unsafe { libc::pthread_cond_signal(self.0.get()) };
    }

    #[inline(always)]
    pub(crate) fn broadcast(&self) {
        // SAFETY: as in `signal`.
        unsafe { libc::pthread_cond_broadcast(self.0.get()) };
    }
}

impl Drop for PCond {
    fn drop(&mut self) {
        // SAFETY: initialised; `&mut self` proves no thread waits on it any more.
        unsafe { libc::pthread_cond_destroy(self.0.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutex_and_condvar_work_across_threads() {
        let m = PMutex::new().unwrap();
        let c = PCond::new().unwrap();
        let flag = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                m.lock();
                flag.store(true, std::sync::atomic::Ordering::Relaxed);
                m.unlock();
                c.broadcast();
            });
            m.lock();
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                c.wait(&m);
            }
            m.unlock();
        });
    }
}
