//! The timer structure: every armed expiry, retention horizon (of a waiting outcome or an
//! ended run's record), idle check and schedule fire, ordered by (instant, sequence
//! number).
//!
//! One structure rather than a task per timer: arming and disarming are `O(log n)`,
//! firing pops from the front. The order is a B-tree of keys, each pointing at its timer
//! in a slab: the tree's nodes are never full (a tree filled in deadline order keeps its
//! leaves a little over half full), so they hold only the 20-byte key and a slot number,
//! and the timers themselves sit densely in the slab. An armed expiry holds no string of
//! its own: its subject and interaction are the subject's own shared names.
//!
//! Disarming needs the key, which the arming subject keeps beside its entry; a fire
//! that races a disarm is harmless because the subject checks the key before acting.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use slab::Slab;

use crate::slot::Slot;

/// What a timer does when it fires, and whom it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Timer {
    /// An ask's deadline.
    Expiry {
        /// The asking subject.
        subject: Arc<str>,
        /// The ask.
        interaction: Arc<str>,
    },
    /// A waiting outcome's retention horizon.
    Retention {
        /// The subject the outcome waits on.
        subject: Arc<str>,
        /// The waiting entry.
        interaction: Arc<str>,
    },
    /// An ended run's record reached its retention horizon.
    Record {
        /// The run's subject.
        subject: Arc<str>,
        run: Arc<str>,
    },
    /// A subject's idle check.
    Idle { subject: Arc<str> },
    /// A subject on disk, not read back since the store was opened, has a timer due:
    /// read it back, and its own timers fire through it (`crate::subject::index`).
    Wake { subject: Arc<str> },
    /// An idempotency key or delivery id reached its retention horizon (`crate::keys`).
    Forget { key: Arc<str> },
    /// A schedule door's next fire.
    Schedule {
        /// The door's name.
        door: Arc<str>,
        /// The save of the door that armed it: a replaced door's timer does nothing.
        generation: u64,
    },
}

impl Timer {
    /// The subject the timer concerns, if it concerns one.
    pub(crate) fn subject(&self) -> Option<&Arc<str>> {
        match self {
            Timer::Expiry { subject, .. }
            | Timer::Retention { subject, .. }
            | Timer::Record { subject, .. }
            | Timer::Idle { subject }
            | Timer::Wake { subject } => Some(subject),
            Timer::Forget { .. } | Timer::Schedule { .. } => None,
        }
    }
}

/// A timer's identity: when it fires and its unique sequence number.
///
/// Packed to 4-byte alignment, so that it takes 20 bytes rather than 24: it is held by
/// every parked entry and is the timer tree's key.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[repr(C, packed(4))]
pub(crate) struct TimerKey {
    /// When it fires.
    pub(crate) at: DateTime<Utc>,
    /// Unique across the runtime; breaks ties in arming order.
    pub(crate) seq: u64,
}

/// Makes timer keys: the sequence that orders timers due at the same instant.
#[derive(Debug, Default)]
pub(crate) struct TimerKeys {
    next: std::sync::atomic::AtomicU64,
}

impl TimerKeys {
    /// A key firing at `at`, after every key made before it for the same instant.
    pub(crate) fn key(&self, at: DateTime<Utc>) -> TimerKey {
        TimerKey {
            at,
            seq: self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The next key's sequence number.
    pub(crate) fn next(&self) -> u64 {
        self.next.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Make every key from now on come after `next` (read back after a restart, so a
    /// key kept in the store and armed again is never made twice).
    pub(crate) fn raise(&self, next: u64) {
        self.next
            .fetch_max(next, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A timer that fired, to be delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fired {
    /// Its key, checked by the subject.
    pub(crate) key: TimerKey,
    /// What it does.
    pub(crate) timer: Timer,
}

/// Every armed timer.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// Every key, earliest first, with its timer's slot.
    order: BTreeMap<TimerKey, usize>,
    timers: Slab<Timer>,
}

impl Timers {
    /// Arm a timer. A key armed twice keeps the later timer.
    pub(crate) fn arm(&mut self, key: TimerKey, timer: Timer) {
        let slot = self.timers.insert(timer);
        if let Some(old) = self.order.insert(key, slot) {
            self.timers.try_remove(old);
        }
    }

    /// Disarm a timer; a key that already fired is ignored.
    pub(crate) fn disarm(&mut self, key: TimerKey) {
        if let Some(slot) = self.order.remove(&key) {
            self.timers.try_remove(slot);
        }
    }

    /// Disarm every timer of a subject of `slot`, which the runtime gave up.
    pub(crate) fn leave(&mut self, slot: Slot) {
        let timers = &mut self.timers;
        self.order.retain(|_, at| {
            let stays = timers
                .get(*at)
                .and_then(Timer::subject)
                .is_none_or(|subject| Slot::of(subject) != slot);
            if !stays {
                timers.try_remove(*at);
            }
            stays
        });
    }

    /// Remove and return every timer due at `now`, earliest first.
    pub(crate) fn fire_due(&mut self, now: DateTime<Utc>) -> Vec<Fired> {
        let mut fired = Vec::new();
        while let Some(entry) = self.order.first_entry() {
            if entry.key().at > now {
                break;
            }
            let key = *entry.key();
            let slot = entry.remove();
            if let Some(timer) = self.timers.try_remove(slot) {
                fired.push(Fired { key, timer });
            }
        }
        fired
    }

    /// When the earliest timer fires.
    pub(crate) fn next(&self) -> Option<DateTime<Utc>> {
        self.order.first_key_value().map(|(k, _)| k.at)
    }

    /// How many timers are armed.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap_or_default()
    }

    fn expiry(interaction: &str) -> Timer {
        Timer::Expiry {
            subject: Arc::from("s"),
            interaction: Arc::from(interaction),
        }
    }

    #[test]
    fn fires_in_order_and_only_when_due() {
        let mut t = Timers::default();
        let k = |secs, seq| TimerKey { at: at(secs), seq };
        t.arm(k(20, 1), expiry("i-1"));
        t.arm(k(10, 2), expiry("i-2"));
        assert_eq!(t.next(), Some(at(10)));
        let retention = Timer::Retention {
            subject: Arc::from("s"),
            interaction: Arc::from("i-3"),
        };
        t.arm(k(10, 3), retention.clone());
        t.disarm(k(10, 2));
        t.disarm(k(10, 2));
        assert!(t.fire_due(at(9)).is_empty());
        let fired = t.fire_due(at(15));
        assert_eq!(
            fired,
            [Fired {
                key: k(10, 3),
                timer: retention
            }]
        );
        assert_eq!(t.next(), Some(at(20)));
        let fired = t.fire_due(at(20));
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].timer, expiry("i-1"));
        assert_eq!((t.len(), t.timers.len()), (0, 0));
    }

    #[test]
    fn a_slot_that_leaves_takes_its_subjects_timers_and_no_others() {
        let mut t = Timers::default();
        let (a, b) = (Arc::<str>::from("a"), Arc::<str>::from("b"));
        assert_ne!(Slot::of(&a), Slot::of(&b));
        let k = |seq| TimerKey { at: at(1), seq };
        t.arm(
            k(1),
            Timer::Idle {
                subject: Arc::clone(&a),
            },
        );
        t.arm(
            k(2),
            Timer::Wake {
                subject: Arc::clone(&b),
            },
        );
        t.arm(
            k(3),
            Timer::Forget {
                key: Arc::clone(&a),
            },
        );
        t.arm(
            k(4),
            Timer::Record {
                subject: Arc::clone(&a),
                run: Arc::from("r-1"),
            },
        );
        t.leave(Slot::of(&a));
        assert_eq!((t.len(), t.timers.len()), (2, 2));
        let fired: Vec<u64> = t.fire_due(at(1)).iter().map(|f| f.key.seq).collect();
        assert_eq!(fired, [2, 3]);
    }

    #[test]
    fn a_key_armed_twice_keeps_one_timer() {
        let mut t = Timers::default();
        let key = TimerKey { at: at(5), seq: 1 };
        t.arm(key, expiry("i-1"));
        t.arm(key, expiry("i-2"));
        assert_eq!((t.len(), t.timers.len()), (1, 1));
        assert_eq!(t.fire_due(at(5))[0].timer, expiry("i-2"));
    }

    #[test]
    fn keys_order_by_instant_then_sequence() {
        let early = TimerKey { at: at(1), seq: 9 };
        let late = TimerKey { at: at(2), seq: 1 };
        let tie = TimerKey { at: at(2), seq: 2 };
        assert!(early < late && late < tie);
        assert_eq!(std::mem::size_of::<TimerKey>(), 20);
    }
}
