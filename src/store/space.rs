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
    /// Subject name → the subject's packed state.
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
}

impl Space {
    /// Every space, in the order of their indices.
    pub(crate) const ALL: [Space; 8] = [
        Space::Meta,
        Space::Subjects,
        Space::Records,
        Space::Doors,
        Space::Events,
        Space::Ids,
        Space::Undelivered,
        Space::Keys,
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
        }
    }

    /// The space's position in [`Space::ALL`], for tables indexed by space.
    pub(crate) fn index(self) -> usize {
        self as usize
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
