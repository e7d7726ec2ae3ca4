//! The store's keyspaces, and the big-endian sequence keys that make them sort.

/// A keyspace of the store: keys and values are bytes, and each space is kept apart, so a
/// key means something only in its space.
///
/// On disk each space is one fjall keyspace named by [`Space::name`]; renaming one is a
/// change of the format version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Space {
    /// The store's own facts: the format version, and whatever else names the data
    /// directory as a whole.
    Meta,
    /// Subject name → the rest of the subject's state (the place of its oldest
    /// resolution remembered, its wake); its entries, runs, groups and resolutions
    /// remembered are keys of their own.
    Subjects,
    /// Run id → the run's record.
    Records,
    /// Door name → the door's spec as saved.
    Doors,
    /// Event sequence ([`sequence_key`]) → the event.
    Events,
    /// Id kind → its high-water mark, so no id is issued twice across a restart.
    Ids,
    /// Subject and interaction → a resumed run's outcome handed to a receiver and not yet
    /// known to be delivered: a crash that loses the receiver leaves it waiting.
    Undelivered,
    /// Idempotency key or hook delivery (`crate::keys`) → what it named and when.
    Keys,
    /// Subject name → its head: what the subject counts against the ceilings and whether
    /// it must be read at open, so an open need not read the subject itself.
    Heads,
    /// Deadline ([`instant_key`]), a kind and a name → what is due then: a subject's
    /// earliest timer, or an ended run's retention horizon. Read in deadline order, a
    /// window at a time, so what is not yet due stays on disk.
    Wakes,
    /// Run id → the subject of a run that has not ended, so its record is found before
    /// its subject is read.
    Runs,
    /// Subject and interaction → a parked entry (a subject's state is kept a key per
    /// part, its rest in [`Space::Subjects`]).
    Entries,
    /// Subject and run id → a run living on the subject, with its journal.
    RunStates,
    /// Subject and place → a resolution the subject remembers.
    Resolved,
    /// Subject and group id → a group of asks one activation raised.
    Groups,
}

impl Space {
    /// Every space, in the order of their indices.
    pub(crate) const ALL: [Space; 15] = [
        Space::Meta,
        Space::Subjects,
        Space::Records,
        Space::Doors,
        Space::Events,
        Space::Ids,
        Space::Undelivered,
        Space::Keys,
        Space::Heads,
        Space::Wakes,
        Space::Runs,
        Space::Entries,
        Space::RunStates,
        Space::Resolved,
        Space::Groups,
    ];

    /// The number of spaces.
    pub(crate) const COUNT: usize = Space::ALL.len();

    /// The space's name on disk.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Space::Meta => "meta",
            Space::Subjects => "subjects",
            Space::Records => "records",
            Space::Doors => "doors",
            Space::Events => "events",
            Space::Ids => "ids",
            Space::Undelivered => "undelivered",
            Space::Keys => "keys",
            Space::Heads => "heads",
            Space::Wakes => "wakes",
            Space::Runs => "runs",
            Space::Entries => "entries",
            Space::RunStates => "run_states",
            Space::Resolved => "resolved",
            Space::Groups => "groups",
        }
    }

    /// The space's position in [`Space::ALL`], for tables indexed by space.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether the space's keys are [`named_key`]s: a subject's name, then the rest.
    pub(crate) fn has_named_keys(self) -> bool {
        matches!(
            self,
            Space::Undelivered
                | Space::Entries
                | Space::RunStates
                | Space::Resolved
                | Space::Groups
        )
    }
}

/// The key of a sequence number: eight bytes, big-endian, so keys sort as the numbers do.
pub(crate) fn sequence_key(sequence: u64) -> [u8; 8] {
    sequence.to_be_bytes()
}

/// The sequence number a [`sequence_key`] holds, or `None` if the key is not eight bytes.
pub(crate) fn sequence_of(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}

/// A key under `name`: the name with its length before it (four bytes, big-endian), so
/// the keys under one name are a range no other name enters, then `tail`.
pub(crate) fn named_key(name: &str, tail: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(4 + name.len() + tail.len());
    // A name here is far shorter than 4 GiB (the door's checks cap a subject's).
    key.extend_from_slice(&u32::try_from(name.len()).unwrap_or(u32::MAX).to_be_bytes());
    key.extend_from_slice(name.as_bytes());
    key.extend_from_slice(tail);
    key
}

/// The name a [`named_key`] starts with, or `None` if the key is damaged.
pub(crate) fn name_of(key: &[u8]) -> Option<&str> {
    let len = usize::try_from(u32::from_be_bytes(key.get(..4)?.try_into().ok()?)).ok()?;
    std::str::from_utf8(key.get(4..4usize.checked_add(len)?)?).ok()
}

/// The key of an instant: twelve bytes that sort as the instants do (the seconds since
/// the epoch with the sign bit flipped, eight bytes big-endian, then the nanoseconds,
/// four bytes big-endian).
pub(crate) fn instant_key(at: chrono::DateTime<chrono::Utc>) -> [u8; 12] {
    let mut key = [0u8; 12];
    // Flipping the sign bit maps i64's order onto u64's.
    let secs = at.timestamp().cast_unsigned() ^ (1 << 63);
    key[..8].copy_from_slice(&secs.to_be_bytes());
    key[8..].copy_from_slice(&at.timestamp_subsec_nanos().to_be_bytes());
    key
}

/// The instant an [`instant_key`] starts with, or `None` if the key is too short or out
/// of range.
pub(crate) fn instant_of(key: &[u8]) -> Option<chrono::DateTime<chrono::Utc>> {
    let secs = u64::from_be_bytes(key.get(..8)?.try_into().ok()?) ^ (1 << 63);
    let nanos = u32::from_be_bytes(key.get(8..12)?.try_into().ok()?);
    chrono::DateTime::from_timestamp(secs.cast_signed(), nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instant_keys_sort_as_their_instants_and_read_back() {
        let instants = [
            chrono::DateTime::<chrono::Utc>::MIN_UTC,
            chrono::DateTime::from_timestamp(-1, 999_999_999).unwrap(),
            chrono::DateTime::from_timestamp(0, 0).unwrap(),
            chrono::DateTime::from_timestamp(0, 1).unwrap(),
            chrono::DateTime::from_timestamp(1_800_000_000, 5).unwrap(),
            chrono::DateTime::<chrono::Utc>::MAX_UTC,
        ];
        for pair in instants.windows(2) {
            assert!(instant_key(pair[0]) < instant_key(pair[1]), "{pair:?}");
        }
        for at in instants {
            assert_eq!(instant_of(&instant_key(at)), Some(at));
        }
        assert_eq!(instant_of(b"short"), None);
    }
}
