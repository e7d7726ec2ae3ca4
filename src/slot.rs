//! The slot: the unit of state that can move between processes.
//!
//! Every subject belongs to one of [`Slot::COUNT`] slots, by its name: the xxh3-64 hash
//! of the name's bytes, modulo the count. xxh3's output is specified, so every build on
//! every platform puts a subject in the same slot; the count is a format constant
//! (`docs/durability.md`, "Slots and several processes"). What a subject owns (its state,
//! its runs and their records, its wakes, its idempotency keys) is its slot's, and a
//! random run id names its slot, so a run's record is found from its id alone.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// One of the [`Slot::COUNT`] slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Slot(u16);

/// The hex digits a run id spends on its slot: three, as the count is 1024.
const RUN_DIGITS: usize = 3;

/// The random part of an id: sixteen hex digits.
const RANDOM_DIGITS: usize = 16;

impl Slot {
    /// How many slots there are: a format constant.
    pub(crate) const COUNT: u16 = 1024;

    /// The slot of the subject named `subject`.
    pub(crate) fn of(subject: &str) -> Slot {
        let hash = xxhash_rust::xxh3::xxh3_64(subject.as_bytes());
        // The remainder is below the count, which fits a u16.
        Slot((hash % u64::from(Slot::COUNT)) as u16)
    }

    /// The slot a run id names: a random run id is `r-`, three hex digits of its slot,
    /// then sixteen random ones. `None` for an id that names none (a sequential `r-1`).
    pub(crate) fn of_run(run: &str) -> Option<Slot> {
        Slot::named_by(run, "r-")
    }

    /// The slot an interaction id names: a random one is `i-`, three hex digits of its
    /// subject's slot, then sixteen random ones. `None` for an id that names none (a
    /// sequential `i-1`, or one made before ids named their slot).
    pub(crate) fn of_interaction(id: &str) -> Option<Slot> {
        Slot::named_by(id, "i-")
    }

    /// The slot an id of `prefix` names.
    fn named_by(id: &str, prefix: &str) -> Option<Slot> {
        let digits = id.strip_prefix(prefix)?;
        if digits.len() != RUN_DIGITS + RANDOM_DIGITS
            || !digits
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        {
            return None;
        }
        let slot = u16::from_str_radix(&digits[..RUN_DIGITS], 16).ok()?;
        (slot < Slot::COUNT).then_some(Slot(slot))
    }

    /// A random run id of this slot, its random part `random`.
    pub(crate) fn run_id(self, random: u64) -> String {
        format!("r-{:03x}{random:016x}", self.0)
    }

    /// A random interaction id of this slot, its random part `random`.
    pub(crate) fn interaction_id(self, random: u64) -> String {
        format!("i-{:03x}{random:016x}", self.0)
    }

    /// Every slot, in order of their numbers.
    pub(crate) fn all() -> impl Iterator<Item = Slot> {
        (0..Slot::COUNT).map(Slot)
    }

    /// The slot numbered `number`, if it is below [`Slot::COUNT`].
    pub(crate) fn numbered(number: u16) -> Option<Slot> {
        (number < Slot::COUNT).then_some(Slot(number))
    }

    /// The slot's number, below [`Slot::COUNT`].
    pub(crate) fn number(self) -> u16 {
        self.0
    }
}

/// The slots this runtime does not own: their subjects are not loaded, and an operation
/// on one is refused as [`StoreFault::NotOwner`](crate::StoreFault::NotOwner). Every slot is
/// owned until it is given up (`crate::subject::slots`); checking a subject costs one load
/// while none is away.
#[derive(Debug)]
pub(crate) struct Away {
    /// One bit per slot, set while it is away.
    bits: Box<[AtomicU64]>,
    /// How many slots are away.
    count: AtomicUsize,
    /// How many times each slot was taken back: a reader of a slot's keys that began
    /// before sees its reading is stale.
    taken: Box<[AtomicU32]>,
}

impl Default for Away {
    fn default() -> Self {
        let slots = usize::from(Slot::COUNT);
        Away {
            bits: (0..slots.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
            taken: (0..slots).map(|_| AtomicU32::new(0)).collect(),
        }
    }
}

impl Away {
    /// Where `slot`'s bit is.
    fn bit(&self, slot: Slot) -> (&AtomicU64, u64) {
        let n = usize::from(slot.0);
        (&self.bits[n / 64], 1 << (n % 64))
    }

    /// Whether `slot` is away.
    pub(crate) fn is_away(&self, slot: Slot) -> bool {
        if self.count.load(Ordering::Acquire) == 0 {
            return false;
        }
        let (word, bit) = self.bit(slot);
        word.load(Ordering::Acquire) & bit != 0
    }

    /// The slot of `subject` if it is away.
    pub(crate) fn of(&self, subject: &str) -> Option<Slot> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let slot = Slot::of(subject);
        self.is_away(slot).then_some(slot)
    }

    /// `subject` may be served: its slot is not away; the fault that refuses it if it is.
    pub(crate) fn check(&self, subject: &str) -> Result<(), crate::StoreFault> {
        match self.of(subject) {
            Some(slot) => Err(crate::StoreFault::not_owner(subject, slot)),
            None => Ok(()),
        }
    }

    /// Give `slot` up; whether it was owned until now.
    pub(crate) fn leave(&self, slot: Slot) -> bool {
        let (word, bit) = self.bit(slot);
        let was = word.fetch_or(bit, Ordering::AcqRel);
        let left = was & bit == 0;
        if left {
            self.count.fetch_add(1, Ordering::AcqRel);
        }
        left
    }

    /// Take `slot` back; whether it was away until now.
    pub(crate) fn take(&self, slot: Slot) -> bool {
        let (word, bit) = self.bit(slot);
        let was = word.fetch_and(!bit, Ordering::AcqRel);
        let taken = was & bit != 0;
        if taken {
            self.taken[usize::from(slot.0)].fetch_add(1, Ordering::AcqRel);
            self.count.fetch_sub(1, Ordering::AcqRel);
        }
        taken
    }

    /// How many slots are away.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Whether any slot is away.
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// How many times `slot` was taken back.
    pub(crate) fn taken(&self, slot: Slot) -> u32 {
        self.taken[usize::from(slot.0)].load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hash is the format: these slots are what data directories hold.
    #[test]
    fn a_subject_s_slot_is_its_name_s_xxh3_modulo_the_count() {
        for name in ["", "a", "orders/42", "ünïcode", &"x".repeat(10_000)] {
            let slot = Slot::of(name);
            assert!(slot.number() < Slot::COUNT);
            assert_eq!(
                u64::from(slot.number()),
                xxhash_rust::xxh3::xxh3_64(name.as_bytes()) % 1024
            );
        }
        assert_eq!(Slot::of("a"), Slot::of("a"));
        // Names spread over the slots.
        let used: std::collections::HashSet<_> = (0..4096)
            .map(|n| Slot::of(&format!("subject-{n}")))
            .collect();
        assert!(used.len() > 900, "{} slots used", used.len());
    }

    #[test]
    fn a_random_run_id_names_its_slot_and_a_sequential_one_none() {
        for number in [0, 1, 0x3ff] {
            let slot = Slot(number);
            let id = slot.run_id(0xdead_beef);
            assert_eq!(id.len(), 2 + 3 + 16, "{id}");
            assert_eq!(Slot::of_run(&id), Some(slot), "{id}");
        }
        assert_eq!(Slot(5).run_id(1), "r-0050000000000000001");
        for id in [
            "r-1",
            "r-12",
            "i-0050000000000000001",
            "r-4000000000000000001",
            "r-0050000000000000001x",
            "r-005000000000000000G",
            "r-005000000000000000A",
            "r-+050000000000000001",
            "",
        ] {
            assert_eq!(Slot::of_run(id), None, "{id}");
        }
    }

    #[test]
    fn a_random_interaction_id_names_its_slot_and_an_older_one_none() {
        for number in [0, 7, 0x3ff] {
            let slot = Slot(number);
            let id = slot.interaction_id(u64::MAX);
            assert_eq!(Slot::of_interaction(&id), Some(slot), "{id}");
            assert_eq!(Slot::of_run(&id), None, "{id}");
        }
        assert_eq!(Slot(5).interaction_id(1), "i-0050000000000000001");
        // Sequential ids, and the random ids made before ids named their slot.
        for id in [
            "i-1",
            "i-00000000deadbeef",
            "r-0050000000000000001",
            "i-4000000000000000001",
        ] {
            assert_eq!(Slot::of_interaction(id), None, "{id}");
        }
    }
}
