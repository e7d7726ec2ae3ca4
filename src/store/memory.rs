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
    /// Each space's durable keys and values, indexed by [`Space::index`].
    spaces: [BTreeMap<Vec<u8>, Vec<u8>>; Space::COUNT],
    /// Crashes so far: a group taken in an earlier epoch is lost.
    epoch: u64,
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
                let space = &mut data.spaces[op.space().index()];
                match op {
                    Op::Put { key, value, .. } => {
                        space.insert(key, value);
                    }
                    Op::Delete { key, .. } => {
                        space.remove(&key);
                    }
                }
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
        Ok(lock(&self.data).spaces[space.index()].get(key).cloned())
    }

    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        Ok(lock(&self.data).spaces[space.index()]
            .range(from.max(within).to_vec()..)
            .take_while(|(k, _)| k.starts_with(within))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        Ok(lock(&self.data).spaces[space.index()]
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        Ok(lock(&self.data).spaces[space.index()]
            .keys()
            .cloned()
            .collect())
    }

    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        Ok(lock(&self.data).spaces[space.index()]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }
}
