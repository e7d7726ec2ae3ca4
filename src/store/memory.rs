//! The memory engine: what is durable, kept apart from what is pending.
//!
//! Pending batches live in the writer's queue (or in a group the writer has taken); only
//! a sync moves them here. A crash bumps the epoch, so a group taken before the crash and
//! synced after it is lost, as it would be on a disk.

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{Batch, Entries, Op, Space};
use crate::sync::lock;

/// The durable contents of a memory store.
pub(super) struct Memory {
    /// The spaces and the crash epoch, under one lock.
    data: Mutex<Data>,
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
            data: Mutex::new(Data::default()),
        }
    }

    /// The current crash epoch.
    pub(super) fn epoch(&self) -> u64 {
        lock(&self.data).epoch
    }

    /// Makes `batches` durable, in order, unless a crash since `epoch` lost them.
    pub(super) fn apply(&self, batches: Vec<Batch>, epoch: u64) -> bool {
        let mut data = lock(&self.data);
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

    /// Loses every group not yet applied.
    pub(super) fn crash(&self) {
        lock(&self.data).epoch += 1;
    }

    /// One key's durable value.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Option<Vec<u8>> {
        lock(&self.data).spaces[space.index()].get(key).cloned()
    }

    /// Up to `limit` of a space's durable entries from `from` on, in key order.
    pub(super) fn range_from(&self, space: Space, from: &[u8], limit: usize) -> Entries {
        lock(&self.data).spaces[space.index()]
            .range(from.to_vec()..)
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// A space's durable entries whose keys start with `prefix`, in key order.
    pub(super) fn prefixed(&self, space: Space, prefix: &[u8]) -> Entries {
        lock(&self.data).spaces[space.index()]
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// A space's durable keys, in key order.
    pub(super) fn keys(&self, space: Space) -> Vec<Vec<u8>> {
        lock(&self.data).spaces[space.index()]
            .keys()
            .cloned()
            .collect()
    }

    /// A space's durable contents, in key order.
    pub(super) fn scan(&self, space: Space) -> Entries {
        lock(&self.data).spaces[space.index()]
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}
