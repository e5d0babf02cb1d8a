//! The runtime's two task queues, both LIFO stacks of task ids so they differ only in
//! how they are guarded.
//!
//! * [`MutexStack`]: a `Vec` behind a mutex. `try_lock` first, so a lock that was held
//!   is counted (`contended`) before waiting for it.
//! * [`CasStack`]: a Treiber stack over a fixed arena of nodes, with a second Treiber
//!   stack as the free list. A head is one 64-bit word, `tag << 32 | (index + 1)`: the
//!   tag grows with every change, so a pop that read a node which was popped and
//!   pushed again meanwhile (ABA) fails its compare-exchange instead of corrupting the
//!   stack. Nodes are never freed while the stack lives, so reading a stale node's
//!   `next` is harmless. Every failed compare-exchange is counted (`retries`).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crossbeam_utils::CachePadded;

/// What one thread saw on the queue: failed compare-exchanges, contended locks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    pub retries: u64,
    pub contended: u64,
}

/// A stack of `u32` task ids shared by the workers.
pub trait TaskStack: Sync + Send {
    /// Pushes `v`; `false` when the stack is full (the arena was sized too small).
    fn push(&self, v: u32, stats: &mut QueueStats) -> bool;
    fn pop(&self, stats: &mut QueueStats) -> Option<u32>;
}

/// The mutex-guarded stack.
#[derive(Debug)]
pub struct MutexStack {
    items: CachePadded<Mutex<Vec<u32>>>,
}

impl MutexStack {
    pub fn new(capacity: usize) -> Self {
        Self {
            items: CachePadded::new(Mutex::new(Vec::with_capacity(capacity))),
        }
    }

    fn lock(&self, stats: &mut QueueStats) -> std::sync::MutexGuard<'_, Vec<u32>> {
        match self.items.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::WouldBlock) => {
                stats.contended += 1;
                self.items.lock().unwrap_or_else(|p| p.into_inner())
            }
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
        }
    }
}

impl TaskStack for MutexStack {
    fn push(&self, v: u32, stats: &mut QueueStats) -> bool {
        self.lock(stats).push(v);
        true
    }
    fn pop(&self, stats: &mut QueueStats) -> Option<u32> {
        self.lock(stats).pop()
    }
}

const EMPTY: u32 = 0;

fn pack(tag: u32, slot_plus_one: u32) -> u64 {
    (u64::from(tag) << 32) | u64::from(slot_plus_one)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

/// The lock-free stack.
#[derive(Debug)]
pub struct CasStack {
    head: CachePadded<AtomicU64>,
    free: CachePadded<AtomicU64>,
    next: Box<[AtomicU32]>,
    value: Box<[AtomicU32]>,
}

impl CasStack {
    /// A stack that holds up to `capacity` ids at once.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize - 1);
        // Every slot starts on the free list: slot i links to slot i + 1.
        let next: Box<[AtomicU32]> = (0..capacity)
            .map(|i| {
                AtomicU32::new(if i + 1 < capacity {
                    i as u32 + 2
                } else {
                    EMPTY
                })
            })
            .collect();
        Self {
            head: CachePadded::new(AtomicU64::new(pack(0, EMPTY))),
            free: CachePadded::new(AtomicU64::new(pack(0, 1))),
            next,
            value: (0..capacity).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    fn push_slot(&self, list: &AtomicU64, slot: u32, stats: &mut QueueStats) {
        let mut h = list.load(Ordering::Relaxed);
        loop {
            let (tag, top) = unpack(h);
            self.next[slot as usize].store(top, Ordering::Relaxed);
            match list.compare_exchange_weak(
                h,
                pack(tag.wrapping_add(1), slot + 1),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => {
                    stats.retries += 1;
                    h = now;
                }
            }
        }
    }

    fn pop_slot(&self, list: &AtomicU64, stats: &mut QueueStats) -> Option<u32> {
        let mut h = list.load(Ordering::Acquire);
        loop {
            let (tag, top) = unpack(h);
            if top == EMPTY {
                return None;
            }
            // May be stale if another thread took this node meanwhile: then the tag
            // has moved and the exchange below fails.
            let next = self.next[(top - 1) as usize].load(Ordering::Relaxed);
            match list.compare_exchange_weak(
                h,
                pack(tag.wrapping_add(1), next),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(top - 1),
                Err(now) => {
                    stats.retries += 1;
                    h = now;
                }
            }
        }
    }
}

impl TaskStack for CasStack {
    fn push(&self, v: u32, stats: &mut QueueStats) -> bool {
        let Some(slot) = self.pop_slot(&self.free, stats) else {
            return false;
        };
        self.value[slot as usize].store(v, Ordering::Relaxed);
        // The Release of the push publishes the value with the node.
        self.push_slot(&self.head, slot, stats);
        true
    }

    fn pop(&self, stats: &mut QueueStats) -> Option<u32> {
        let slot = self.pop_slot(&self.head, stats)?;
        let v = self.value[slot as usize].load(Ordering::Relaxed);
        self.push_slot(&self.free, slot, stats);
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn lifo(s: &dyn TaskStack) {
        let mut st = QueueStats::default();
        assert_eq!(s.pop(&mut st), None);
        for v in [5, 6, 7] {
            assert!(s.push(v, &mut st));
        }
        assert_eq!(s.pop(&mut st), Some(7));
        assert!(s.push(8, &mut st));
        assert_eq!(s.pop(&mut st), Some(8));
        assert_eq!(s.pop(&mut st), Some(6));
        assert_eq!(s.pop(&mut st), Some(5));
        assert_eq!(s.pop(&mut st), None);
        assert_eq!(st, QueueStats::default(), "one thread never retries");
    }

    #[test]
    fn both_stacks_are_lifo() {
        lifo(&MutexStack::new(4));
        lifo(&CasStack::new(4));
    }

    #[test]
    fn a_full_cas_stack_says_so() {
        let s = CasStack::new(2);
        let mut st = QueueStats::default();
        assert!(s.push(1, &mut st) && s.push(2, &mut st));
        assert!(!s.push(3, &mut st));
        assert_eq!(s.pop(&mut st), Some(2));
        assert!(s.push(3, &mut st));
    }

    /// Every id pushed by any thread is popped exactly once, under contention.
    fn no_loss_no_duplicate(s: &dyn TaskStack) {
        const PER: u32 = 20_000;
        const THREADS: u32 = 4;
        let popped: Vec<Vec<u32>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..THREADS)
                .map(|t| {
                    sc.spawn(move || {
                        let mut st = QueueStats::default();
                        let mut got = Vec::new();
                        for i in 0..PER {
                            while !s.push(t * PER + i, &mut st) {
                                std::hint::spin_loop();
                            }
                            if i % 2 == 1 {
                                got.extend(s.pop(&mut st));
                                got.extend(s.pop(&mut st));
                            }
                        }
                        got
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<u32> = popped.into_iter().flatten().collect();
        let mut st = QueueStats::default();
        while let Some(v) = s.pop(&mut st) {
            all.push(v);
        }
        let n = all.len();
        let set: BTreeSet<u32> = all.into_iter().collect();
        assert_eq!(n, (PER * THREADS) as usize, "lost or duplicated ids");
        assert_eq!(set.len(), n);
    }

    #[test]
    fn concurrent_pushes_and_pops_lose_nothing() {
        no_loss_no_duplicate(&MutexStack::new(1024));
        no_loss_no_duplicate(&CasStack::new(80_000));
    }
}
