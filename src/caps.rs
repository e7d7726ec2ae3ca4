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

/// Take one from `counter` if it holds one; whether it did.
fn take_one(counter: &AtomicUsize) -> bool {
    counter
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
        .is_ok()
}

/// One ask admitted under its ceiling, given back if dropped before it is handed on
/// (the ask did not reach its subject: refused, or the asking activation stopped while
/// it was on its way).
#[must_use = "an admission not handed on is given back"]
pub(crate) struct Admission<'a> {
    caps: &'a Caps,
    slot: Slot,
    to: To,
    held: bool,
}

impl Admission<'_> {
    /// The ask reached its subject, which gives the unit back when the ask ends.
    pub(crate) fn handed_on(mut self) {
        self.held = false;
    }
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        if self.held {
            self.caps.release(self.slot, self.to);
        }
    }
}

impl Caps {
    fn share(&self, slot: Slot) -> &Counts {
        &self.shares[usize::from(slot.number())]
    }

    /// Count one ask of `to` on a subject of `slot` if the total stays within `limit`:
    /// the admission, or `None` at the ceiling.
    pub(crate) fn admit(&self, slot: Slot, to: To, limit: usize) -> Option<Admission<'_>> {
        self.total
            .of(to)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        self.share(slot).of(to).fetch_add(1, Ordering::AcqRel);
        Some(Admission {
            caps: self,
            slot,
            to,
            held: true,
        })
    }

    /// Count one of `to` on a subject of `slot`, without admission: an entry that
    /// already holds its place (a waiting outcome, an entry read back).
    pub(crate) fn occupy(&self, slot: Slot, to: To) {
        self.total.of(to).fetch_add(1, Ordering::AcqRel);
        self.share(slot).of(to).fetch_add(1, Ordering::AcqRel);
    }

    /// Give back one of `to` on a subject of `slot`. The total is the sum of the shares:
    /// a unit its slot's share no longer holds (the slot was given up since, taking its
    /// share out of the total) is not taken from the total again.
    pub(crate) fn release(&self, slot: Slot, to: To) {
        if take_one(self.share(slot).of(to)) {
            take_one(self.total.of(to));
        }
    }

    /// A run began on a subject of `slot`.
    pub(crate) fn run_began(&self, slot: Slot) {
        self.total.runs.fetch_add(1, Ordering::Relaxed);
        self.share(slot).runs.fetch_add(1, Ordering::Relaxed);
    }

    /// A run of a subject of `slot` ended.
    pub(crate) fn run_ended(&self, slot: Slot) {
        if take_one(&self.share(slot).runs) {
            take_one(&self.total.runs);
        }
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
        let admit = |slot| caps.admit(slot, To::Caller, 3).map(Admission::handed_on);
        assert!(admit(a).is_some());
        assert!(admit(b).is_some());
        caps.occupy(a, To::User);
        caps.run_began(a);
        caps.occupy_many(b, 0, 2, 4);
        // Not handed on: given back.
        drop(caps.admit(b, To::Caller, 3));
        assert_eq!(caps.totals(), (2, 3, 5));
        assert!(admit(b).is_some());
        assert!(admit(a).is_none(), "the ceiling is the runtime's");
        assert_eq!(caps.totals(), (3, 3, 5));
        // An admission on its way when its slot leaves is given back after: the total
        // loses it once, with the share.
        let late = caps.admit(a, To::User, 9);
        caps.leave(a);
        assert_eq!(caps.totals(), (2, 2, 4));
        drop(late);
        // Given up twice, or released after: nothing goes below what the others hold.
        caps.leave(a);
        caps.release(a, To::Caller);
        caps.run_ended(a);
        assert_eq!(caps.totals(), (2, 2, 4));
        caps.release(b, To::Caller);
        assert_eq!(caps.totals(), (1, 2, 4));
        caps.leave(b);
        assert_eq!(caps.totals(), (0, 0, 0));
    }
}
