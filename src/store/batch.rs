//! A batch of mutations across spaces, applied atomically.

use super::Space;
use crate::slot::Slot;

/// Puts and deletes across spaces, built by the caller and applied all or nothing, in
/// the order they were added (a later mutation of a key wins over an earlier one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The mutations, in the order they were added.
    ops: Vec<Op>,
    /// Entries for the end of the log ([`Space::Events`]): numbered by the writer when
    /// it commits the batch, in commit order, so the log has no gap a reader could pass.
    log: Vec<Vec<u8>>,
    /// The slot whose owner writes the batch: a subject's change names its subject's
    /// slot. A batch of the runtime's own (a door, the upgrade) names none. An engine
    /// may refuse a group for a slot this process does not own (`super::engine`), and
    /// the writer then writes it again without that slot's batches.
    slot: Option<Slot>,
    /// The epoch of [`Batch::slot`] the change was made under, for a change of a subject's
    /// state: the writer refuses it once the slot's epoch moved on (the slot was refused,
    /// or taken back), as the subject's later changes build on what it had written.
    /// `None` for a batch that stands alone.
    epoch: Option<u32>,
}

/// One mutation of a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Set `key` in `space` to `value`.
    Put {
        /// The space written.
        space: Space,
        /// The key set.
        key: Vec<u8>,
        /// Its new value.
        value: Vec<u8>,
    },
    /// Remove `key` from `space` (nothing if it is absent).
    Delete {
        /// The space written.
        space: Space,
        /// The key removed.
        key: Vec<u8>,
    },
}

impl Op {
    /// The space the mutation writes.
    pub(crate) fn space(&self) -> Space {
        match self {
            Op::Put { space, .. } | Op::Delete { space, .. } => *space,
        }
    }

    /// The key the mutation writes.
    pub(crate) fn key(&self) -> &[u8] {
        match self {
            Op::Put { key, .. } | Op::Delete { key, .. } => key,
        }
    }
}

impl Batch {
    /// An empty batch.
    pub(crate) fn new() -> Batch {
        Batch::default()
    }

    /// An empty batch of `slot`'s: a change of one of its subjects.
    pub(crate) fn of_slot(slot: Slot) -> Batch {
        Batch {
            slot: Some(slot),
            ..Batch::default()
        }
    }

    /// An empty batch of `slot`'s, a change of one of its subjects' state read or made
    /// under the slot's `epoch`: refused once the epoch moved on.
    pub(crate) fn fenced(slot: Slot, epoch: u32) -> Batch {
        Batch {
            slot: Some(slot),
            epoch: Some(epoch),
            ..Batch::default()
        }
    }

    /// The slot whose owner writes the batch, if it names one.
    pub(crate) fn slot(&self) -> Option<Slot> {
        self.slot
    }

    /// The slot's epoch the change was made under, for a fenced batch.
    pub(crate) fn epoch(&self) -> Option<u32> {
        self.epoch
    }

    /// Sets `key` in `space` to `value`.
    pub(crate) fn put(
        &mut self,
        space: Space,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> &mut Batch {
        self.ops.push(Op::Put {
            space,
            key: key.into(),
            value: value.into(),
        });
        self
    }

    /// Removes `key` from `space`.
    pub(crate) fn delete(&mut self, space: Space, key: impl Into<Vec<u8>>) -> &mut Batch {
        self.ops.push(Op::Delete {
            space,
            key: key.into(),
        });
        self
    }

    /// Appends `value` to the log ([`Space::Events`]) under the next sequence number,
    /// given when the batch is committed.
    pub(crate) fn append_log(&mut self, value: impl Into<Vec<u8>>) -> &mut Batch {
        self.log.push(value.into());
        self
    }

    /// Adds `other`'s mutations and log entries after this batch's own (the two are of
    /// one subject's, so of one slot's).
    pub(crate) fn append(&mut self, other: Batch) {
        self.ops.extend(other.ops);
        self.log.extend(other.log);
        self.slot = self.slot.or(other.slot);
        self.epoch = self.epoch.or(other.epoch);
    }

    /// The log entries waiting for their numbers.
    pub(crate) fn log(&self) -> &[Vec<u8>] {
        &self.log
    }

    /// The mutations, in the order they were added.
    pub(crate) fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The mutations, taken.
    pub(crate) fn into_ops(self) -> Vec<Op> {
        self.ops
    }

    /// The number of mutations.
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether the batch holds no mutation.
    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.log.is_empty()
    }

    /// The bytes of keys and values the batch writes, for the store's figures.
    pub(crate) fn bytes(&self) -> u64 {
        self.ops
            .iter()
            .map(|op| match op {
                Op::Put { key, value, .. } => key.len() + value.len(),
                Op::Delete { key, .. } => key.len(),
            })
            .sum::<usize>() as u64
    }
}

/// The mutations of `batches`, taken in order as if they were one batch, each key's last
/// only, in the order they were added: what an engine that gives every mutation of a
/// group one sequence number must be handed.
pub(crate) fn last_per_key(batches: &[Batch]) -> Vec<&Op> {
    let ops = batches.iter().flat_map(|batch| batch.ops.iter());
    let len: usize = batches.iter().map(Batch::len).sum();
    if len < 2 {
        return ops.collect();
    }
    let mut seen = std::collections::HashSet::with_capacity(len);
    let mut last: Vec<&Op> = batches
        .iter()
        .rev()
        .flat_map(|batch| batch.ops.iter().rev())
        .filter(|op| seen.insert((op.space(), op.key())))
        .collect();
    last.reverse();
    last
}
