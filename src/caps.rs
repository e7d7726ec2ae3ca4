//! The counts the ceilings and the statistics read: caller asks and waiting outcomes,
//! open user asks, and runs not ended, for the whole runtime and for each slot.
//!
//! The runtime's totals are what admission compares with the ceilings, atomically, so a
//! burst is admitted exactly. Each slot's share is counted beside them, so a slot the
//! runtime gives up takes its share out of the totals whole, and one taken back adds
//! what its subjects' heads hold (`crate::subject::slots`).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::entry::To;
use crate::slot::Slot;

/// One set of counts.
#[derive(Debug, Default)]
struct Counts {
    /// Caller asks (`asking`, `running`) and waiting outcomes.
    caller: AtomicUsize,
    /// Open user asks.
    user: AtomicUsize,
    /// Runs not ended.
    runs: AtomicUsize,
}

impl Counts {
    fn of(&self, to: To) -> &AtomicUsize {
        match to {
            To::Caller => &self.caller,
            To::User => &self.user,
        }
    }
}

/// The runtime's counts, and each slot's share of them.
#[derive(Debug)]
pub(crate) struct Caps {
    total: Counts,
    /// By slot number.
    shares: Box<[Counts]>,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            total: Counts::default(),
            shares: (0..Slot::COUNT).map(|_| Counts::default()).collect(),
        }
    }
}

/// Take one from `counter`, never below zero, even if miscounted.
fn take_one(counter: &AtomicUsize) {
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
}

impl Caps {
    fn share(&self, slot: Slot) -> &Counts {
        &self.shares[usize::from(slot.number())]
    }

    /// Count one ask of `to` on a subject of `slot` if the total stays within `limit`;
    /// whether it was counted.
    pub(crate) fn admit(&self, slot: Slot, to: To, limit: usize) -> bool {
        let admitted = self
            .total
            .of(to)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok();
        if admitted {
            self.share(slot).of(to).fetch_add(1, Ordering::AcqRel);
        }
        admitted
    }

    /// Count one of `to` on a subject of `slot`, without admission: an entry that
    /// already holds its place (a waiting outcome, an entry read back).
    pub(crate) fn occupy(&self, slot: Slot, to: To) {
        self.total.of(to).fetch_add(1, Ordering::AcqRel);
        self.share(slot).of(to).fetch_add(1, Ordering::AcqRel);
    }

    /// Give back one of `to` on a subject of `slot`.
    pub(crate) fn release(&self, slot: Slot, to: To) {
        take_one(self.total.of(to));
        take_one(self.share(slot).of(to));
    }

    /// A run began on a subject of `slot`.
    pub(crate) fn run_began(&self, slot: Slot) {
        self.total.runs.fetch_add(1, Ordering::Relaxed);
        self.share(slot).runs.fetch_add(1, Ordering::Relaxed);
    }

    /// A run of a subject of `slot` ended.
    pub(crate) fn run_ended(&self, slot: Slot) {
        take_one(&self.total.runs);
        take_one(&self.share(slot).runs);
    }

    /// Count what subjects of `slot` on disk hold, summed from their heads: entries of
    /// each kind, and runs not ended.
    pub(crate) fn occupy_many(&self, slot: Slot, caller: usize, user: usize, runs: usize) {
        let share = self.share(slot);
        for (total, share, n) in [
            (&self.total.caller, &share.caller, caller),
            (&self.total.user, &share.user, user),
            (&self.total.runs, &share.runs, runs),
        ] {
            total.fetch_add(n, Ordering::AcqRel);
            share.fetch_add(n, Ordering::AcqRel);
        }
    }

    /// `slot` was given up: its share leaves the totals.
    pub(crate) fn leave(&self, slot: Slot) {
        let share = self.share(slot);
        for (total, share) in [
            (&self.total.caller, &share.caller),
            (&self.total.user, &share.user),
            (&self.total.runs, &share.runs),
        ] {
            let n = share.swap(0, Ordering::AcqRel);
            let _ = total.fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| {
                Some(t.saturating_sub(n))
            });
        }
    }

    /// The totals: caller asks and waiting outcomes, open user asks, runs not ended.
    pub(crate) fn totals(&self) -> (usize, usize, usize) {
        (
            self.total.caller.load(Ordering::Acquire),
            self.total.user.load(Ordering::Acquire),
            self.total.runs.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_that_leaves_takes_its_share_and_nothing_else() {
        let caps = Caps::default();
        let (a, b) = (Slot::of("a"), Slot::of("b"));
        assert_ne!(a, b);
        assert!(caps.admit(a, To::Caller, 3));
        assert!(caps.admit(b, To::Caller, 3));
        caps.occupy(a, To::User);
        caps.run_began(a);
        caps.occupy_many(b, 0, 2, 4);
        assert!(caps.admit(b, To::Caller, 3));
        assert!(
            !caps.admit(a, To::Caller, 3),
            "the ceiling is the runtime's"
        );
        assert_eq!(caps.totals(), (3, 3, 5));
        caps.leave(a);
        assert_eq!(caps.totals(), (2, 2, 4));
        // Given up twice, or released after: nothing goes below what the others hold.
        caps.leave(a);
        caps.release(a, To::Caller);
        caps.run_ended(a);
        assert_eq!(caps.totals(), (1, 2, 3));
        caps.leave(b);
        assert_eq!(caps.totals(), (0, 0, 0));
    }
}
