//! The groups logged and not yet in the engine, in memory, read before the engine.
//!
//! A group is durable once the change log holds it (`super::changelog`); the engine's
//! keyed state only has to catch up by the next checkpoint. So the writer puts each
//! group's mutations here, each key's last, and the checkpoint writes them into the
//! engine in one write: a key changed many times between two checkpoints (a subject's
//! head, its wake, the id counters) is written once, and the engine's journal, flushes
//! and compactions work at the pace of checkpoints rather than of acknowledgements.
//!
//! Two layers: the *active* one the writer adds to, and the one a checkpoint is writing
//! (*draining*), which stays readable until the engine holds it. A read looks at the
//! active layer, then the draining one, then the engine; a range read merges them.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use super::{Batch, Entries, Op, Space};

/// One layer: for each space, each key's last mutation (`None`: deleted).
#[derive(Default)]
pub(super) struct Layer {
    /// By [`Space::index`].
    spaces: Vec<BTreeMap<Vec<u8>, Option<Vec<u8>>>>,
    /// The last group it holds.
    pub(super) last: u64,
    /// Mutations it holds.
    pub(super) len: usize,
}

impl Layer {
    /// An empty layer.
    fn new() -> Layer {
        Layer {
            spaces: Space::ALL.iter().map(|_| BTreeMap::new()).collect(),
            last: 0,
            len: 0,
        }
    }

    /// The layer as one batch for the engine, each key's last mutation, in key order.
    pub(super) fn batch(&self) -> Batch {
        let mut batch = Batch::new();
        for (space, keys) in Space::ALL.iter().zip(&self.spaces) {
            for (key, value) in keys {
                match value {
                    Some(value) => batch.put(*space, key.clone(), value.clone()),
                    None => batch.delete(*space, key.clone()),
                };
            }
        }
        batch
    }

    /// The mutation of `key` in `space`, if the layer has one.
    fn get(&self, space: Space, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.spaces[space.index()].get(key)
    }

    /// The layer's mutations of `space` from `from` on, below `end` (`None`: no end).
    fn range<'a>(
        &'a self,
        space: Space,
        from: &[u8],
        end: Option<&[u8]>,
    ) -> impl Iterator<Item = (&'a Vec<u8>, &'a Option<Vec<u8>>)> + 'a {
        let upper = match end {
            Some(end) => Bound::Excluded(end.to_vec()),
            None => Bound::Unbounded,
        };
        self.spaces[space.index()].range((Bound::Included(from.to_vec()), upper))
    }
}

/// The two layers.
struct Layers {
    /// Written to.
    active: Layer,
    /// Being written into the engine.
    draining: Option<Arc<Layer>>,
    /// The last group the engine holds, as of the last layer drained.
    drained: u64,
}

/// The groups logged and not yet in the engine.
pub(super) struct Overlay {
    /// The layers.
    layers: RwLock<Layers>,
}

/// What a read of the overlay found of one key.
pub(super) enum Found {
    /// A value.
    Value(Vec<u8>),
    /// Deleted.
    Deleted,
    /// Not in the overlay: the engine's value stands.
    Absent,
}

impl Overlay {
    /// An empty overlay.
    pub(super) fn new() -> Overlay {
        Overlay {
            layers: RwLock::new(Layers {
                active: Layer::new(),
                draining: None,
                drained: 0,
            }),
        }
    }

    /// Adds group `seq`'s mutations, each key's last.
    pub(super) fn apply(&self, seq: u64, ops: &[&Op]) {
        let mut layers = self.write();
        let active = &mut layers.active;
        for op in ops {
            let value = match op {
                Op::Put { value, .. } => Some(value.clone()),
                Op::Delete { .. } => None,
            };
            active.spaces[op.space().index()].insert(op.key().to_vec(), value);
        }
        active.len += ops.len();
        active.last = seq;
    }

    /// Starts a checkpoint: the active layer becomes the draining one, unless one is
    /// still draining or the active one is empty. The layer to write into the engine,
    /// or the last group the engine holds already.
    pub(super) fn start_drain(&self) -> Result<Arc<Layer>, u64> {
        let mut layers = self.write();
        if layers.draining.is_some() || layers.active.len == 0 {
            return Err(layers.drained);
        }
        let layer = Arc::new(std::mem::replace(&mut layers.active, Layer::new()));
        layers.draining = Some(Arc::clone(&layer));
        Ok(layer)
    }

    /// The engine holds the draining layer: it is let go.
    pub(super) fn drained(&self) {
        let mut layers = self.write();
        if let Some(layer) = layers.draining.take() {
            layers.drained = layer.last;
        }
    }

    /// The mutations a checkpoint is writing into the engine, if one is.
    pub(super) fn draining(&self) -> Option<usize> {
        self.read().draining.as_ref().map(|layer| layer.len)
    }

    /// What the overlay holds of `key` in `space`.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Found {
        let layers = self.read();
        let found = layers.active.get(space, key).or_else(|| {
            layers
                .draining
                .as_ref()
                .and_then(|layer| layer.get(space, key))
        });
        match found {
            Some(Some(value)) => Found::Value(value.clone()),
            Some(None) => Found::Deleted,
            None => Found::Absent,
        }
    }

    /// The overlay's mutations of `space` from `from` on, below `end`, the active
    /// layer's over the draining one's, in key order.
    pub(super) fn range(
        &self,
        space: Space,
        from: &[u8],
        end: Option<&[u8]>,
    ) -> BTreeMap<Vec<u8>, Option<Vec<u8>>> {
        let layers = self.read();
        let mut merged = BTreeMap::new();
        if let Some(draining) = &layers.draining {
            for (key, value) in draining.range(space, from, end) {
                merged.insert(key.clone(), value.clone());
            }
        }
        for (key, value) in layers.active.range(space, from, end) {
            merged.insert(key.clone(), value.clone());
        }
        merged
    }

    /// The layers, to read.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Layers> {
        self.layers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The layers, to change.
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Layers> {
        self.layers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `engine`'s entries (in key order) with `overlay`'s mutations laid over them, in key
/// order, at most `limit`.
pub(super) fn merge(
    engine: Entries,
    overlay: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    limit: usize,
) -> Entries {
    if overlay.is_empty() {
        let mut engine = engine;
        engine.truncate(limit);
        return engine;
    }
    let mut merged: BTreeMap<Vec<u8>, Vec<u8>> = engine.into_iter().collect();
    for (key, value) in overlay {
        match value {
            Some(value) => {
                merged.insert(key, value);
            }
            None => {
                merged.remove(&key);
            }
        }
    }
    merged.into_iter().take(limit).collect()
}
