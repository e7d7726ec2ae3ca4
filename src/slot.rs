//! The slot: the unit of state that can move between processes.
//!
//! Every subject belongs to one of [`Slot::COUNT`] slots, by its name: the xxh3-64 hash
//! of the name's bytes, modulo the count. xxh3's output is specified, so every build on
//! every platform puts a subject in the same slot; the count is a format constant
//! (`docs/durability.md`, "Slots and several processes"). What a subject owns (its state,
//! its runs and their records, its wakes, its idempotency keys) is its slot's, and a
//! random run id names its slot, so a run's record is found from its id alone.

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
        let digits = run.strip_prefix("r-")?;
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
}
