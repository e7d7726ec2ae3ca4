//! Locking a mutex that a panicked thread may have held.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks `mutex`, going on if a thread panicked while holding it: every critical section
/// that uses this leaves its data consistent at each step.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
