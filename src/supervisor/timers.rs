//! The timer structure: every armed expiry, retention horizon and idle check in one
//! ordered map, keyed by (instant, sequence number).
//!
//! One structure rather than a task per timer: arming and disarming are `O(log n)`
//! map operations, firing pops from the front, and an armed timer costs one map node.
//! Disarming needs the key, which the arming subject keeps beside its entry; a fire
//! that races a disarm is harmless because the subject checks the sequence number
//! before acting.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

/// What a timer does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// An ask's deadline.
    Expiry,
    /// A waiting outcome's retention horizon.
    Retention,
    /// A subject's idle check.
    Idle,
    /// A schedule door's next fire; `interaction` holds the door's name.
    Schedule {
        /// The save of the door that armed it.
        generation: u64,
    },
}

/// A timer's identity: when it fires and its unique sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct TimerKey {
    /// When it fires.
    pub(crate) at: DateTime<Utc>,
    /// Unique across the runtime; breaks ties in arming order.
    pub(crate) seq: u64,
}

/// A timer that fired, to be delivered to its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fired {
    /// Its key, checked by the subject.
    pub(crate) key: TimerKey,
    /// The subject it belongs to.
    pub(crate) subject: Arc<str>,
    /// The interaction it concerns (empty for an idle check).
    pub(crate) interaction: Arc<str>,
    /// What it does.
    pub(crate) kind: TimerKind,
}

/// Every armed timer.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    /// Ordered by key, earliest first.
    armed: BTreeMap<TimerKey, (Arc<str>, Arc<str>, TimerKind)>,
}

impl Timers {
    /// Arm a timer; returns whether it is now the earliest.
    pub(crate) fn arm(
        &mut self,
        key: TimerKey,
        subject: Arc<str>,
        interaction: Arc<str>,
        kind: TimerKind,
    ) -> bool {
        self.armed.insert(key, (subject, interaction, kind));
        self.armed.first_key_value().map(|(k, _)| *k) == Some(key)
    }

    /// Disarm a timer; a key that already fired is ignored.
    pub(crate) fn disarm(&mut self, key: TimerKey) {
        self.armed.remove(&key);
    }

    /// Remove and return every timer due at `now`, earliest first.
    pub(crate) fn fire_due(&mut self, now: DateTime<Utc>) -> Vec<Fired> {
        let mut fired = Vec::new();
        while let Some(entry) = self.armed.first_entry() {
            if entry.key().at > now {
                break;
            }
            let key = *entry.key();
            let (subject, interaction, kind) = entry.remove();
            fired.push(Fired {
                key,
                subject,
                interaction,
                kind,
            });
        }
        fired
    }

    /// When the earliest timer fires.
    pub(crate) fn next(&self) -> Option<DateTime<Utc>> {
        self.armed.first_key_value().map(|(k, _)| k.at)
    }

    /// How many timers are armed.
    pub(crate) fn len(&self) -> usize {
        self.armed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap_or_default()
    }

    #[test]
    fn fires_in_order_and_only_when_due() {
        let mut t = Timers::default();
        let s: Arc<str> = Arc::from("s");
        let k = |secs, seq| TimerKey { at: at(secs), seq };
        assert!(t.arm(k(20, 1), s.clone(), Arc::from("i-1"), TimerKind::Expiry));
        assert!(t.arm(k(10, 2), s.clone(), Arc::from("i-2"), TimerKind::Expiry));
        assert!(!t.arm(k(10, 3), s.clone(), Arc::from("i-3"), TimerKind::Retention));
        t.disarm(k(10, 2));
        assert!(t.fire_due(at(9)).is_empty());
        let fired: Vec<u64> = t.fire_due(at(15)).iter().map(|f| f.key.seq).collect();
        assert_eq!(fired, [3]);
        assert_eq!(t.next(), Some(at(20)));
        assert_eq!(t.fire_due(at(20)).len(), 1);
        assert_eq!(t.len(), 0);
    }
}
