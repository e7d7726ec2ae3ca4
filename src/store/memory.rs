//! The memory engine: what is durable, kept apart from what is pending.
//!
//! Pending batches live in the writer's queue, in a group the writer has taken, or here,
//! written and not yet synced; only a sync makes them durable. A crash bumps the epoch
//! (the engine's generation), so a group taken before the crash and synced after it is
//! lost, as it would be on a disk.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::engine::{Engine, ReadFailure, WriteFailure};
use super::{Batch, Entries, Op, Space};
use crate::sync::lock;

/// The durable contents of a memory store, and the groups written and not yet synced.
///
/// What is durable is shared (an [`Arc`]) with the store reopened after a simulated
/// crash; what is written and not synced is not.
pub(super) struct Memory {
    /// The spaces and the crash epoch, under one lock.
    data: Arc<Mutex<Data>>,
    /// The groups written since the last sync, each with the epoch it was taken in.
    written: Mutex<Vec<(u64, Vec<Batch>)>>,
}

/// What a [`Memory`] guards.
#[derive(Default)]
struct Data {
    /// The durable keys and values.
    spaces: Spaces,
    /// Crashes so far: a group taken in an earlier epoch is lost.
    epoch: u64,
}

/// Each space's keys and values in memory, indexed by [`Space::index`]: what the memory
/// engine and the cluster engine (`super::cluster`) keep.
#[derive(Default)]
pub(super) struct Spaces([BTreeMap<Vec<u8>, Vec<u8>>; Space::COUNT]);

impl Spaces {
    /// Applies `op`.
    pub(super) fn apply(&mut self, op: Op) {
        let space = &mut self.0[op.space().index()];
        match op {
            Op::Put { key, value, .. } => {
                space.insert(key, value);
            }
            Op::Delete { key, .. } => {
                space.remove(&key);
            }
        }
    }

    /// One key's value.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Option<Vec<u8>> {
        self.0[space.index()].get(key).cloned()
    }

    /// Up to `limit` entries from `from` on whose keys start with `within`.
    pub(super) fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Entries {
        self.0[space.index()]
            .range(from.max(within).to_vec()..)
            .take_while(|(k, _)| k.starts_with(within))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The entries whose keys start with `prefix`.
    pub(super) fn prefixed(&self, space: Space, prefix: &[u8]) -> Entries {
        self.range_from(space, prefix, prefix, usize::MAX)
    }

    /// A space's keys.
    pub(super) fn keys(&self, space: Space) -> Vec<Vec<u8>> {
        self.0[space.index()].keys().cloned().collect()
    }

    /// A space's contents.
    pub(super) fn scan(&self, space: Space) -> Entries {
        self.range_from(space, b"", b"", usize::MAX)
    }
}

impl Memory {
    /// An empty store.
    pub(super) fn new() -> Memory {
        Memory {
            data: Arc::new(Mutex::new(Data::default())),
            written: Mutex::new(Vec::new()),
        }
    }

    /// Makes `batches` durable, in order, unless a crash since `epoch` lost them.
    fn apply(data: &mut Data, batches: Vec<Batch>, epoch: u64) -> bool {
        if data.epoch != epoch {
            return false;
        }
        for batch in batches {
            for op in batch.into_ops() {
                data.spaces.apply(op);
            }
        }
        true
    }
}

/// A memory store's reads see only what is durable, and cannot fail.
impl Engine for Memory {
    /// Keeps the group, taken, for the sync.
    fn write(&self, group: &mut Vec<Batch>, generation: u64) -> Result<(), WriteFailure> {
        lock(&self.written).push((generation, std::mem::take(group)));
        Ok(())
    }

    /// Makes the groups written durable, in order; `false` if a crash since one was
    /// taken lost it (and every one written with it).
    fn sync(&self) -> Result<bool, String> {
        let written = std::mem::take(&mut *lock(&self.written));
        let mut data = lock(&self.data);
        let mut kept = true;
        for (epoch, batches) in written {
            kept &= Memory::apply(&mut data, batches, epoch);
        }
        Ok(kept)
    }

    fn generation(&self) -> u64 {
        lock(&self.data).epoch
    }

    /// Loses every group not yet synced.
    fn crash(&self) -> bool {
        lock(&self.data).epoch += 1;
        true
    }

    fn reopened(&self) -> Option<Arc<dyn Engine>> {
        Some(Arc::new(Memory {
            data: Arc::clone(&self.data),
            written: Mutex::new(Vec::new()),
        }))
    }

    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        Ok(lock(&self.data).spaces.get(space, key))
    }

    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        Ok(lock(&self.data)
            .spaces
            .range_from(space, from, within, limit))
    }

    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        Ok(lock(&self.data).spaces.prefixed(space, prefix))
    }

    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        Ok(lock(&self.data).spaces.keys(space))
    }

    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        Ok(lock(&self.data).spaces.scan(space))
    }
}
