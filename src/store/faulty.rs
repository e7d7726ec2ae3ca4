//! Fault injection as an engine: [`Faulty`] wraps another [`Engine`] and fails its syncs
//! as [`Faults`] say, so the writer knows nothing of faults and a test sees the failures
//! a real engine would report, through the same seam.
//!
//! A store opened with [`Faults::default()`] has no wrapper.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::engine::{Engine, ReadFailure, WriteFailure};
use super::{Batch, Entries, Faults, Space};

/// An engine that fails as `faults` say and otherwise does what the engine it wraps does.
pub(super) struct Faulty {
    /// The engine wrapped.
    inner: Arc<dyn Engine>,
    /// The failures to inject.
    faults: Faults,
    /// Syncs tried so far, counted for `faults` (the injected failures among them).
    tried: AtomicU64,
}

impl Faulty {
    /// `inner`, failing as `faults` say.
    pub(super) fn new(inner: Arc<dyn Engine>, faults: Faults) -> Faulty {
        Faulty {
            inner,
            faults,
            tried: AtomicU64::new(0),
        }
    }

    /// Syncs tried so far.
    #[cfg(test)]
    pub(super) fn syncs_tried(&self) -> u64 {
        self.tried.load(Ordering::Relaxed)
    }
}

impl Engine for Faulty {
    /// Refuses a group with a batch of a slot [`Faults::not_owner`] holds, before the
    /// engine wrapped sees it; otherwise writes it.
    fn write(&self, group: &mut Vec<Batch>, generation: u64) -> Result<(), WriteFailure> {
        if let Some(not_owned) = &self.faults.not_owner {
            let refused = not_owned.among(group);
            if !refused.is_empty() {
                return Err(WriteFailure::NotOwner(refused));
            }
        }
        self.inner.write(group, generation)
    }

    /// Fails the sync after [`Faults::fail_sync_after`] successful ones (and every one
    /// after it, unless [`Faults::only_once`]), before the engine wrapped syncs
    /// anything; otherwise syncs it.
    fn sync(&self) -> Result<bool, String> {
        let attempt = self.tried.fetch_add(1, Ordering::Relaxed);
        match self.faults.fail_sync_after {
            Some(after) if attempt == after || (attempt > after && !self.faults.only_once) => {
                Err(format!("injected failure of sync {}", attempt + 1))
            }
            _ => self.inner.sync(),
        }
    }

    fn pipelined(&self) -> bool {
        self.inner.pipelined()
    }

    fn numbers_log(&self) -> bool {
        self.inner.numbers_log()
    }

    fn keep_log(&self, entries: u64) {
        self.inner.keep_log(entries);
    }

    fn number_log(&self) -> Result<u64, String> {
        self.inner.number_log()
    }

    fn log_next(&self) -> Result<u64, ReadFailure> {
        self.inner.log_next()
    }

    fn log_chunks(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<Vec<super::engine::LogChunk>, ReadFailure> {
        self.inner.log_chunks(from, limit)
    }

    fn activity(&self, system: bool) -> Vec<String> {
        self.inner.activity(system)
    }

    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    fn crash(&self) -> bool {
        self.inner.crash()
    }

    /// The engine wrapped, as the next process finds it: the faults were this process's.
    fn reopened(&self) -> Option<Arc<dyn Engine>> {
        self.inner.reopened()
    }

    fn close(&self, flush: bool) {
        self.inner.close(flush);
    }

    fn owners(&self) -> Option<super::owners::Owners> {
        self.inner.owners()
    }

    fn release(&self, slot: crate::slot::Slot) -> Result<(), String> {
        self.inner.release(slot)
    }

    fn serves(&self, slot: crate::slot::Slot) -> bool {
        self.inner.serves(slot)
    }

    fn owner(&self, slot: crate::slot::Slot) -> Option<Arc<str>> {
        self.inner.owner(slot)
    }

    #[cfg(test)]
    fn lease_round(&self) -> Result<(), String> {
        self.inner.lease_round()
    }

    #[cfg(test)]
    fn lapse_served(&self, slot: crate::slot::Slot) {
        self.inner.lapse_served(slot);
    }

    #[cfg(test)]
    fn send_next_twice(&self, between: &'static str) {
        self.inner.send_next_twice(between);
    }

    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        self.inner.get(space, key)
    }

    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        self.inner.range_from(space, from, within, limit)
    }

    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        self.inner.prefixed(space, prefix)
    }

    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        self.inner.keys(space)
    }

    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        self.inner.scan(space)
    }
}
