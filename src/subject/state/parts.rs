//! A subject's state in the store, a key per part: each parked entry, each run with its
//! journal, each group of asks, each resolution remembered, and the rest (the place of
//! the oldest resolution, the wake) under the subject's name. A change writes the parts it changed (`super::tracked`),
//! not the whole state, and a state is read back from its parts.
//!
//! A part's key is the subject's name with its length before it (four bytes,
//! big-endian), so one subject's keys are a range no other subject's name can enter,
//! then the entry's or run's id, or the resolution's place (eight bytes, big-endian).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::tracked::Tracked;
use super::{Memory, State, is_zero};
use crate::error::StoreFault;
use crate::store::{Batch, Space, Store, StoreError, layout};

/// The rest of a state, kept under the subject's name.
#[derive(Serialize, Deserialize)]
struct Rest {
    #[serde(default, skip_serializing_if = "is_zero")]
    memory_base: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wake: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    fired: BTreeMap<Arc<str>, DateTime<Utc>>,
}

impl State {
    /// Whether a part changed that no change has written yet.
    pub(crate) fn has_unwritten(&self) -> bool {
        self.entries.is_dirty()
            || self.runs.is_dirty()
            || self.groups.is_dirty()
            || self.memory_diff().is_some()
            || self.fired_dirty
    }

    /// Forget what changed (a runtime without a store writes nothing).
    pub(crate) fn discard_unwritten(&mut self) {
        self.entries.clear_dirty();
        self.runs.clear_dirty();
        self.groups.clear_dirty();
        self.memory_written = None;
        self.fired_dirty = false;
    }

    /// The remembered resolutions' places written and now, if they differ.
    fn memory_diff(&self) -> Option<((u64, usize), (u64, usize))> {
        let now = (self.memory_base, self.memory.len());
        let written = self.memory_written.unwrap_or(now);
        (written != now).then_some((written, now))
    }

    /// Write the parts changed since the last write into `batch`, and the rest if it
    /// changed (its delete when the subject holds nothing).
    pub(crate) fn write_parts(&mut self, batch: &mut Batch) -> Result<(), serde_json::Error> {
        let name = Arc::clone(&self.name);
        write_table(&mut self.entries, Space::Entries, &name, batch)?;
        write_table(&mut self.groups, Space::Groups, &name, batch)?;
        write_table(&mut self.runs, Space::RunStates, &name, batch)?;
        if let Some(((wb, wl), (b, l))) = self.memory_diff() {
            let written_end = wb + wl as u64;
            for ord in wb..b.min(written_end) {
                batch.delete(Space::Resolved, layout::resolved_key(&name, ord));
            }
            for ord in b.max(written_end)..b + l as u64 {
                let Some(memory) = usize::try_from(ord - b)
                    .ok()
                    .and_then(|i| self.memory.get(i))
                else {
                    continue;
                };
                batch.put(
                    Space::Resolved,
                    layout::resolved_key(&name, ord),
                    serde_json::to_vec(memory)?,
                );
            }
        }
        self.memory_written = Some((self.memory_base, self.memory.len()));
        self.fired_dirty = false;
        if self.is_empty() {
            batch.delete(Space::Subjects, layout::subject_key(&name));
            self.written.rest = None;
        } else {
            let rest = serde_json::to_vec(&Rest {
                memory_base: self.memory_base,
                wake: self.wake,
                fired: self.fired.clone(),
            })?;
            if self.written.rest.as_ref() != Some(&rest) {
                batch.put(Space::Subjects, layout::subject_key(&name), rest.clone());
                self.written.rest = Some(rest);
            }
        }
        Ok(())
    }

    /// Mark every part as changed, so the next write writes them all (a state read from
    /// the older format, which kept it whole, and whose entries had no places).
    pub(crate) fn mark_all_unwritten(&mut self) {
        self.entries.renumber();
        self.runs.mark_all();
        self.groups.mark_all();
        self.memory_written = Some((self.memory_base, 0));
        self.written = super::Written::default();
    }

    /// `subject`'s state read back from its parts; `None` when the store holds no rest
    /// for it (it holds nothing). The state's timers and runs are not yet known outside
    /// it: that is its recovery (`State::recover`). A read that fails, or a part that
    /// does not decode, is the [`StoreError`] read or the damage found, naming the
    /// keyspace and the key.
    pub(crate) fn read_parts(
        store: &Store,
        subject: &Arc<str>,
    ) -> Result<Option<Box<State>>, Unread> {
        // Taken before the read: a change written under a later epoch is not read.
        let epoch = store.epoch(crate::slot::Slot::of(subject));
        let Some(rest) = store.get(Space::Subjects, &layout::subject_key(subject))? else {
            return Ok(None);
        };
        let rest: Rest = serde_json::from_slice(&rest).map_err(|e| {
            Unread::Damaged(StoreFault::corrupt(
                Space::Subjects.name(),
                subject,
                format!("the rest of subject {subject}'s state does not decode: {e}"),
            ))
        })?;
        let prefix = layout::subject_prefix(subject);
        let entries = read_table(store, Space::Entries, &prefix, "an entry")?;
        let runs = read_table(store, Space::RunStates, &prefix, "a run")?;
        let groups = read_table(store, Space::Groups, &prefix, "a group")?;
        let mut memory = VecDeque::new();
        for (key, value) in store.prefixed(Space::Resolved, &prefix)? {
            let remembered: Memory = serde_json::from_slice(&value)
                .map_err(|e| damaged(Space::Resolved, &key, "a resolution remembered", &e))?;
            memory.push_back(remembered);
        }
        let mut state = Box::new(State::new(Arc::clone(subject)));
        state.entries = Tracked::from_items(entries);
        state.runs = Tracked::from_items(runs);
        state.memory_written = Some((rest.memory_base, memory.len()));
        state.memory = memory;
        state.memory_base = rest.memory_base;
        state.groups = Tracked::from_items(groups);
        state.wake = rest.wake;
        state.fired = rest.fired;
        state.slot_epoch = Some(epoch);
        Ok(Some(state))
    }
}

/// Why a subject's state was not read back: the store's read failed, or a part read does
/// not decode.
#[derive(Debug)]
pub(crate) enum Unread {
    /// The store's read failed (damage it found, or another failure).
    Store(StoreError),
    /// A part read does not decode.
    Damaged(StoreFault),
}

impl From<StoreError> for Unread {
    fn from(err: StoreError) -> Unread {
        Unread::Store(err)
    }
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::Store(err) => write!(f, "{err}"),
            Unread::Damaged(fault) => write!(f, "{fault}"),
        }
    }
}

/// The damage of a part under `key` in `space` (`what` names it) that does not decode.
fn damaged(space: Space, key: &[u8], what: &str, e: &dyn std::fmt::Display) -> Unread {
    let shown = crate::health::shown_key(space.name(), key);
    Unread::Damaged(StoreFault::corrupt(
        space.name(),
        &shown,
        format!("{what} does not decode: {e}"),
    ))
}

/// Write the values of `table` changed since the last write into `batch`, each under
/// `subject`'s prefix and its id in `space` (a removed one as a delete).
fn write_table<V: Serialize>(
    table: &mut Tracked<V>,
    space: Space,
    subject: &str,
    batch: &mut Batch,
) -> Result<(), serde_json::Error> {
    for (id, value) in table.take_dirty() {
        let key = layout::part_key(subject, &id);
        match value {
            Some(value) => batch.put(space, key, serde_json::to_vec(value)?),
            None => batch.delete(space, key),
        };
    }
    Ok(())
}

/// A value of a table read back, with its id.
type Read<V> = (Arc<str>, Box<V>);

/// The values a table kept under `prefix` in `space`, with their ids; `what` names one
/// in an error.
fn read_table<V: serde::de::DeserializeOwned>(
    store: &Store,
    space: Space,
    prefix: &[u8],
    what: &str,
) -> Result<Vec<Read<V>>, Unread> {
    let mut values = Vec::new();
    for (key, value) in store.prefixed(space, prefix)? {
        let read: Box<V> =
            serde_json::from_slice(&value).map_err(|e| damaged(space, &key, what, &e))?;
        let id = layout::part_of(&key)
            .map(|(_, id)| Arc::from(id))
            .ok_or_else(|| damaged(space, &key, "a part's key", &"its id is not text"))?;
        values.push((id, read));
    }
    Ok(values)
}

/// Decodes a part as `space` keeps it (a subject's rest, an entry, a run, a group, a
/// resolution remembered), to check it; `Ok(false)` for a space that keeps no part.
#[cfg(feature = "disk")]
pub(crate) fn check_part(space: Space, value: &[u8]) -> Result<bool, serde_json::Error> {
    match space {
        Space::Subjects => serde_json::from_slice::<Rest>(value).map(drop)?,
        Space::Entries => serde_json::from_slice::<super::Parked>(value).map(drop)?,
        Space::RunStates => serde_json::from_slice::<super::Run>(value).map(drop)?,
        Space::Groups => serde_json::from_slice::<super::Group>(value).map(drop)?,
        Space::Resolved => serde_json::from_slice::<Memory>(value).map(drop)?,
        _ => return Ok(false),
    }
    Ok(true)
}
