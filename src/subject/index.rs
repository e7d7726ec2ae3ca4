//! What the store keeps beside each subject's state so that an open reads no subject it
//! does not need: the subject's head, its place in the wake index, and the run index.
//!
//! - **Heads** (`Space::Heads`): what a subject counts against the ceilings and whether
//!   it must be read at open (a run was executing, or it offers a user ask to the inbox).
//!   An open sums the heads and reads only the subjects that must be read.
//! - **Wakes** (`Space::Wakes`): a key per subject with timers, at or before its
//!   earliest deadline (early is harmless, late never: [`wake_for`]), and one per ended
//!   run's record, at its retention horizon. The ticker reads them in
//!   deadline order, a window at a time, and reads a subject back when its wake comes
//!   (its own timers are then armed again and fire through it).
//! - **Runs** (`Space::Runs`): the subject of each run that has not ended, so a record
//!   is found before its subject is read.
//!
//! Each is written in the same batch as the subject's change, so it never disagrees with
//! the state it describes.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::hub::Hub;
use super::state::{Counts, State};
use crate::slot::Slot;
use crate::store::layout::{self, WakeKind, subject_wake};
use crate::store::{Batch, Space};
use crate::supervisor::Timer;

/// What a subject's head says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// What it counts against the ceilings.
    pub(crate) counts: Counts,
    /// A run's activation was executing when it was written: an open replays it.
    pub(crate) executing: bool,
    /// It offers a user ask: an open reads it for the inbox.
    pub(crate) offers: bool,
}

/// The head's length in bytes: three counts of four bytes and a byte of flags.
const HEAD_LEN: usize = 13;

impl Head {
    /// The head of `state`.
    pub(crate) fn of(state: &State) -> Head {
        Head {
            counts: state.counts(),
            executing: state.executing_at_stop(),
            offers: state.offers(),
        }
    }

    /// The head as bytes: the counts as big-endian `u32`s, then the flags.
    pub(crate) fn to_bytes(self) -> [u8; HEAD_LEN] {
        let mut bytes = [0u8; HEAD_LEN];
        let Counts { caller, user, runs } = self.counts;
        for (i, n) in [caller, user, runs].into_iter().enumerate() {
            // A subject holds far fewer than 4 billion entries (the ceilings cap them).
            let n = u32::try_from(n).unwrap_or(u32::MAX);
            bytes[i * 4..i * 4 + 4].copy_from_slice(&n.to_be_bytes());
        }
        bytes[12] = u8::from(self.executing) | (u8::from(self.offers) << 1);
        bytes
    }

    /// A head back from its bytes, or `None` if they are damaged.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Head> {
        if bytes.len() != HEAD_LEN || bytes[12] > 3 {
            return None;
        }
        let count = |i: usize| -> Option<usize> {
            let n = u32::from_be_bytes(bytes.get(i * 4..i * 4 + 4)?.try_into().ok()?);
            usize::try_from(n).ok()
        };
        Some(Head {
            counts: Counts {
                caller: count(0)?,
                user: count(1)?,
                runs: count(2)?,
            },
            executing: bytes[12] & 1 != 0,
            offers: bytes[12] & 2 != 0,
        })
    }
}

/// What a wake says is due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Due {
    /// The subject's earliest timer: read it back, and its timers fire through it.
    Subject(Arc<str>),
    /// The retention horizon of an ended run's record, kept for `subject`.
    Record {
        /// The subject the run lived on.
        subject: Arc<str>,
        /// The run.
        run: Arc<str>,
    },
}

/// A wake read back: when, and what is due; `None` if the key or value is damaged.
pub(crate) fn due_of(key: &[u8], value: &[u8]) -> Option<(DateTime<Utc>, Due)> {
    let (at, kind, name) = layout::wake_of(key)?;
    let due = match kind {
        WakeKind::Subject => Due::Subject(Arc::from(name)),
        WakeKind::Record => Due::Record {
            subject: Arc::from(std::str::from_utf8(value).ok()?),
            run: Arc::from(name),
        },
    };
    Some((at, due))
}

/// Write `state`'s change into `batch`: its wake moved if it must be (noted in
/// `state.wake` before the rest is written, so the state read back knows which key its
/// next change moves; see [`wake_for`]), the parts it changed (`State::write_parts`) and
/// its head if it changed; or, when it holds nothing, the deletes of all of them. An
/// error only if a part cannot be written (not expected: it was built from checked
/// values).
pub(crate) fn write_subject(
    state: &mut State,
    now: DateTime<Utc>,
    batch: &mut Batch,
) -> Result<(), serde_json::Error> {
    let name = Arc::clone(&state.name);
    let empty = state.is_empty();
    let earliest = if empty { None } else { state.earliest_timer() };
    let wake = wake_for(state.wake, earliest, now);
    if wake != state.wake {
        if let Some(old) = state.wake {
            batch.delete(Space::Wakes, subject_wake(old, &name));
        }
        if let Some(new) = wake {
            batch.put(Space::Wakes, subject_wake(new, &name), Vec::new());
        }
        state.wake = wake;
    }
    state.write_parts(batch)?;
    if empty {
        batch.delete(Space::Heads, layout::subject_key(&name));
        state.written.head = None;
    } else {
        let head = Head::of(state).to_bytes().to_vec();
        if state.written.head.as_ref() != Some(&head) {
            batch.put(Space::Heads, layout::subject_key(&name), head.clone());
            state.written.head = Some(head);
        }
    }
    Ok(())
}

/// Where a subject's wake should be, written at `written`, with its earliest timer at
/// `earliest`, at `now`: a wake may come early (a subject read back by it finds nothing
/// due, and its own timers are armed) but never late, so a wake written is kept while it
/// is no later than the earliest timer and not yet passed. Most changes then move no
/// wake (resolving the ask whose timer was the earliest would otherwise move it, two
/// keys a resolution). It is kept only while a timer remains: that timer's firing is a
/// change, which moves a wake left behind, so a wake that has passed does not read its
/// subject back at every open. A subject that holds nothing has no timer, so no wake.
fn wake_for(
    written: Option<DateTime<Utc>>,
    earliest: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    match written {
        Some(at) if at >= now && earliest.is_some_and(|e| at <= e) => Some(at),
        _ => earliest,
    }
}

/// How far ahead of the clock the ticker reads the wake index: what is due within it is
/// armed in memory, the rest stays on disk.
pub(crate) const WINDOW: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// How many wakes the pager reads at a time.
const PAGE: usize = 1024;

/// The ticker's reader of the wake index: it arms, as timers in memory, the wakes due
/// within [`WINDOW`] of the clock of what no subject or record in memory covers.
///
/// Only what was on disk when the store was opened needs it: a subject read back since
/// has its own timers armed, and so has a record kept since. So once the pager has read
/// to the end of the index it is done: every wake written after that is of something in
/// memory.
///
/// The index is kept by slot, each slot's wakes in deadline order, so the pager reads
/// each slot apart, and reads one again only when its next wake (as the last read of it
/// found) comes within the window.
#[derive(Debug)]
pub(crate) struct Pager {
    /// Each slot's place in its reading, by slot number.
    slots: Vec<SlotPage>,
}

/// Where the pager is in one slot's wakes.
#[derive(Debug, Clone, Default)]
struct SlotPage {
    /// How many times the slot had been taken back when this reading began
    /// (`crate::slot::Away::taken`): a slot taken back since is read again from its start.
    taken: u32,
    /// The next key to read; empty before the first read.
    from: Vec<u8>,
    /// The deadline of the next wake, which the last read found beyond the window;
    /// `None` before the first read.
    next: Option<DateTime<Utc>>,
    /// Read to the end.
    done: bool,
}

impl Default for Pager {
    fn default() -> Self {
        Pager {
            slots: vec![SlotPage::default(); usize::from(Slot::COUNT)],
        }
    }
}

impl Pager {
    /// Arm what the index holds due by `now` plus [`WINDOW`]; when to read again (`None`
    /// once done, or with no store). A read that fails is logged and tried at the next
    /// round.
    pub(crate) fn page(&mut self, hub: &Arc<Hub>, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let store = hub.services.store.as_ref()?;
        // Before the open is done the index may not be whole (an upgrade writes it); the
        // runtime kicks the ticker once it is.
        if !hub.opened.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let until = now
            .checked_add_signed(WINDOW)
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        let mut again: Option<DateTime<Utc>> = None;
        let away = &hub.services.away;
        for (slot, page) in Slot::all().zip(self.slots.iter_mut()) {
            // A slot given up is not read; one taken back is read again whole.
            if away.is_away(slot) {
                continue;
            }
            let taken = away.taken(slot);
            if page.taken != taken {
                *page = SlotPage {
                    taken,
                    ..SlotPage::default()
                };
            }
            if page.done {
                continue;
            }
            let at = match page.next.filter(|next| *next > until) {
                // Not due yet: read again when it comes within the window.
                Some(next) => next.checked_sub_signed(WINDOW).unwrap_or(now),
                None => match page.read(hub, store, slot, until) {
                    Ok(Some(next)) => next.checked_sub_signed(WINDOW).unwrap_or(now),
                    Ok(None) => continue,
                    // Tried again at the next round.
                    Err(()) => now.checked_add_signed(WINDOW).unwrap_or(now),
                },
            };
            again = Some(again.map_or(at, |again| again.min(at)));
        }
        again
    }
}

impl SlotPage {
    /// Read `slot`'s wakes from where the last read stopped, arming those due by `until`:
    /// the deadline of the first one after, `None` once read to the end, `Err` if a read
    /// failed (logged and counted).
    fn read(
        &mut self,
        hub: &Arc<Hub>,
        store: &crate::store::Store,
        slot: Slot,
        until: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>, ()> {
        let prefix = layout::slot_prefix(slot);
        loop {
            let chunk = match store.range_from(Space::Wakes, &self.from, &prefix, PAGE) {
                Ok(chunk) => chunk,
                Err(error) => {
                    tracing::error!(%error, "the wake index could not be read");
                    hub.services.damage.read_failed(&error);
                    return Err(());
                }
            };
            let full = chunk.len() == PAGE;
            for (key, value) in chunk {
                let Some((at, due)) = due_of(&key, &value) else {
                    tracing::error!(key = ?key, "a damaged wake is skipped");
                    hub.services.damage.met(&crate::error::StoreFault::corrupt(
                        Space::Wakes.name(),
                        &crate::health::shown_key(Space::Wakes.name(), &key),
                        "a wake does not decode",
                    ));
                    self.from = next_key(key);
                    continue;
                };
                if at > until {
                    self.next = Some(at);
                    return Ok(Some(at));
                }
                arm(hub, at, due);
                self.from = next_key(key);
            }
            if !full {
                self.done = true;
                return Ok(None);
            }
        }
    }
}

/// Arm `due` at `at`, unless what it is for is in memory with its own timer.
fn arm(hub: &Arc<Hub>, at: DateTime<Utc>, due: Due) {
    let s = &hub.services;
    let timer = match due {
        Due::Subject(subject) if !hub.registry.holds(&subject) => Timer::Wake { subject },
        Due::Record { subject, run } if !hub.records.holds_ended(&run) => {
            Timer::Record { subject, run }
        }
        _ => return,
    };
    s.timers.arm(s.keys.key(at), timer);
}

/// The key just after `key`.
fn next_key(mut key: Vec<u8>) -> Vec<u8> {
    key.push(0);
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::layout::{instant_key, record_wake};

    #[test]
    fn a_head_reads_back_and_damage_is_refused() {
        let head = Head {
            counts: Counts {
                caller: 7,
                user: 2,
                runs: 5,
            },
            executing: false,
            offers: true,
        };
        assert_eq!(Head::from_bytes(&head.to_bytes()), Some(head));
        assert_eq!(Head::from_bytes(&head.to_bytes()[..12]), None);
        let mut flags = head.to_bytes();
        flags[12] = 9;
        assert_eq!(Head::from_bytes(&flags), None);
    }

    #[test]
    fn a_wake_comes_early_but_never_late() {
        let at = |s| DateTime::from_timestamp(s, 0).unwrap_or_default();
        let now = at(100);
        // None written: the earliest timer, if any.
        assert_eq!(wake_for(None, Some(at(150)), now), Some(at(150)));
        assert_eq!(wake_for(None, None, now), None);
        // Written before the earliest and not passed: kept.
        assert_eq!(wake_for(Some(at(120)), Some(at(150)), now), Some(at(120)));
        // No timer left: none (nothing would move it once it passed).
        assert_eq!(wake_for(Some(at(120)), None, now), None);
        // Later than the earliest: moved to it.
        assert_eq!(wake_for(Some(at(200)), Some(at(150)), now), Some(at(150)));
        // Passed: moved to the earliest, or dropped.
        assert_eq!(wake_for(Some(at(90)), Some(at(150)), now), Some(at(150)));
        assert_eq!(wake_for(Some(at(90)), None, now), None);
    }

    #[test]
    fn wakes_read_back_in_deadline_order() {
        let at = |s| DateTime::from_timestamp(s, 0).unwrap_or_default();
        let early = subject_wake(at(10), "a");
        let late = subject_wake(at(20), "a");
        assert!(early < late);
        // After the slot, the instant.
        assert!(
            instant_key(at(10)).as_slice() <= &early[2..]
                && instant_key(at(11)).as_slice() > &early[2..]
        );
        let early = record_wake(at(10), "r-9");
        assert_eq!(
            due_of(&early, b"s"),
            Some((
                at(10),
                Due::Record {
                    subject: Arc::from("s"),
                    run: Arc::from("r-9")
                }
            ))
        );
        assert_eq!(
            due_of(&late, b""),
            Some((at(20), Due::Subject(Arc::from("a"))))
        );
        assert_eq!(due_of(&late[..12], b""), None);
    }
}
