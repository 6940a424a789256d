//! Small concurrency helpers every plane uses: a statistics counter and
//! taking a lock that a panicking thread left poisoned.
//!
//! A worker that panicked while holding a lock has already ended the
//! daemon's usefulness for that connection, but the state under the lock
//! is plain data that stays consistent between our short critical
//! sections, so every other thread carries on with it
//! ([`lock_unpoisoned`]) instead of panicking in turn.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Monotonic counter, relaxed ordering: counters are statistics.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        if n != 0 {
            self.0.fetch_add(n, Relaxed);
        }
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Locks `m`, taking the data even if another thread panicked holding it.
pub fn lock_unpoisoned<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Reads `l`, taking the data even if a writer panicked holding it.
pub fn read_unpoisoned<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    match l.read() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Writes `l`, taking the data even if another thread panicked holding it.
pub fn write_unpoisoned<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    match l.write() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}
