//! The key layout: the store's keyspaces, and the one description of the bytes of every
//! key in them. Whatever builds or parses a key calls a function here; nothing else in the
//! crate puts key bytes together, so a change of the layout is a change of this file (and
//! of [`super::FORMAT_VERSION`]).
//!
//! | space | key | value |
//! |---|---|---|
//! | `meta` | [`VERSION_KEY`] | the format version, decimal text |
//! | `subjects` | [`subject_key`]: the subject's name | the rest of its state (JSON) |
//! | `records` | [`run_key`]: the run id | an ended run's record, with its subject (JSON) |
//! | `doors` | [`door_key`]: the door's name | the door's spec as saved (JSON) |
//! | `events` | [`chunk_key`]: the first entry's [`sequence_key`], then the count (four bytes, big-endian); versions 1 and 2 kept a [`sequence_key`] per entry | the entries, LZ4-compressed (`super::log`) |
//! | `ids` | [`SEQUENTIAL`] / [`TIMERS`] | three high-water marks / the timer keys' next number, big-endian `u64`s |
//! | `undelivered` | [`undelivered_key`]: [`named_key`] of the subject, then the interaction id | the outcome waiting for its receiver (JSON) |
//! | `keys` | [`kept_key`]: the key's name (`run:…`, `hook:…`, `crate::keys`) | what it named and when (JSON) |
//! | `heads` | [`subject_key`]: the subject's name | three counts (big-endian `u32`s) and a byte of flags |
//! | `wakes` | [`wake_key`]: [`instant_key`] of the deadline, a [`WakeKind`] byte, then the subject's name or the run id | nothing (a subject's wake), or the run's subject (a record's horizon) |
//! | `runs` | [`run_key`]: the run id | the subject's name |
//! | `entries` | [`part_key`]: [`named_key`] of the subject, then the interaction id | a parked entry (JSON) |
//! | `run_states` | [`part_key`]: [`named_key`] of the subject, then the run id | a run and its journal (JSON) |
//! | `resolved` | [`resolved_key`]: [`named_key`] of the subject, then the place ([`sequence_key`]) | a resolution remembered (JSON) |
//! | `groups` | [`part_key`]: [`named_key`] of the subject, then the group id | a group of asks (JSON) |
//!
//! Every integer in a key is big-endian, so keys sort as their numbers do; a subject's
//! name comes first, with its length before it, wherever a space keeps a subject's parts,
//! so one subject's keys are one prefix ([`subject_prefix`]) no other subject's enter.
//! The layout speaks of names, ids, places and instants, never of the types that hold
//! them: the store is a leaf.

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

/// The key of the format version, decimal text, in [`Space::Meta`].
pub(crate) const VERSION_KEY: &[u8] = b"format_version";

/// The key of the sequential ids' high-water marks in [`Space::Ids`].
pub(crate) const SEQUENTIAL: &[u8] = b"sequential";

/// The key of the timer keys' next sequence number in [`Space::Ids`].
pub(crate) const TIMERS: &[u8] = b"timers";

/// The key of a sequence number: eight bytes, big-endian, so keys sort as the numbers do.
pub(crate) fn sequence_key(sequence: u64) -> [u8; 8] {
    sequence.to_be_bytes()
}

/// The sequence number a [`sequence_key`] holds, or `None` if the key is not eight bytes.
pub(crate) fn sequence_of(key: &[u8]) -> Option<u64> {
    <[u8; 8]>::try_from(key).ok().map(u64::from_be_bytes)
}

/// The key of a chunk of the log of `count` entries from sequence number `first`.
pub(crate) fn chunk_key(first: u64, count: u32) -> [u8; 12] {
    let mut key = [0u8; 12];
    key[..8].copy_from_slice(&sequence_key(first));
    key[8..].copy_from_slice(&count.to_be_bytes());
    key
}

/// The first sequence number and the count of a [`chunk_key`], or `None` for a key of
/// another length (an entry of an older version's log).
pub(crate) fn chunk_of(key: &[u8]) -> Option<(u64, u32)> {
    if key.len() != 12 {
        return None;
    }
    let first = sequence_of(&key[..8])?;
    let count = u32::from_be_bytes(key[8..].try_into().ok()?);
    Some((first, count))
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
    split_named(key).map(|(name, _)| name)
}

/// A [`named_key`] split into its name and its tail, or `None` if the key is damaged.
pub(crate) fn split_named(key: &[u8]) -> Option<(&str, &[u8])> {
    let len = usize::try_from(u32::from_be_bytes(key.get(..4)?.try_into().ok()?)).ok()?;
    let end = 4usize.checked_add(len)?;
    let name = std::str::from_utf8(key.get(4..end)?).ok()?;
    Some((name, key.get(end..)?))
}

/// The name or id a key of a space keyed by it alone holds ([`subject_key`],
/// [`run_key`], [`door_key`], [`kept_key`]), or why it is not text.
pub(crate) fn plain_of(key: &[u8]) -> Result<&str, std::str::Utf8Error> {
    std::str::from_utf8(key)
}

/// [`plain_of`], with any byte that is not text replaced, for a key read even when it
/// is damaged (named in a message, or kept as it reads).
pub(crate) fn plain_shown(key: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(key)
}

/// The key of a subject in [`Space::Subjects`] and [`Space::Heads`]: its name.
pub(crate) fn subject_key(subject: &str) -> Vec<u8> {
    subject.as_bytes().to_vec()
}

/// The key of a run in [`Space::Records`] and [`Space::Runs`]: its id.
pub(crate) fn run_key(run: &str) -> Vec<u8> {
    run.as_bytes().to_vec()
}

/// The key of a door in [`Space::Doors`]: its name.
pub(crate) fn door_key(door: &str) -> Vec<u8> {
    door.as_bytes().to_vec()
}

/// The key of an idempotency key or a hook delivery in [`Space::Keys`]: its name
/// (`crate::keys` makes it).
pub(crate) fn kept_key(name: &str) -> Vec<u8> {
    name.as_bytes().to_vec()
}

/// The prefix of every key of `subject`'s parts ([`Space::Entries`],
/// [`Space::RunStates`], [`Space::Groups`], [`Space::Resolved`]) and of its outcomes in
/// [`Space::Undelivered`].
pub(crate) fn subject_prefix(subject: &str) -> Vec<u8> {
    named_key(subject, b"")
}

/// The key of a part of `subject`'s state kept by id: an entry by its interaction id, a
/// run by its run id, a group by its group id.
pub(crate) fn part_key(subject: &str, id: &str) -> Vec<u8> {
    named_key(subject, id.as_bytes())
}

/// The subject and the id a [`part_key`] (or an [`undelivered_key`]) holds, or `None`
/// if the key is damaged.
pub(crate) fn part_of(key: &[u8]) -> Option<(&str, &str)> {
    let (subject, id) = split_named(key)?;
    Some((subject, std::str::from_utf8(id).ok()?))
}

/// The key of a resolution `subject` remembers, at `place` in [`Space::Resolved`].
pub(crate) fn resolved_key(subject: &str, place: u64) -> Vec<u8> {
    named_key(subject, &sequence_key(place))
}

/// The key of an outcome being delivered in [`Space::Undelivered`]: the interaction
/// under the subject's name.
pub(crate) fn undelivered_key(subject: &str, interaction: &str) -> Vec<u8> {
    named_key(subject, interaction.as_bytes())
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

/// What a key of [`Space::Wakes`] is due for, its byte after the instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeKind {
    /// A subject's earliest timer (`s`); the name is the subject's.
    Subject,
    /// An ended run's retention horizon (`r`); the name is the run id.
    Record,
}

impl WakeKind {
    /// The kind's byte in a key.
    fn byte(self) -> u8 {
        match self {
            WakeKind::Subject => b's',
            WakeKind::Record => b'r',
        }
    }
}

/// The key of a wake: the instant, the kind, then the name.
pub(crate) fn wake_key(at: chrono::DateTime<chrono::Utc>, kind: WakeKind, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(13 + name.len());
    key.extend_from_slice(&instant_key(at));
    key.push(kind.byte());
    key.extend_from_slice(name.as_bytes());
    key
}

/// The key of `subject`'s wake at `at`.
pub(crate) fn subject_wake(at: chrono::DateTime<chrono::Utc>, subject: &str) -> Vec<u8> {
    wake_key(at, WakeKind::Subject, subject)
}

/// The key of `run`'s record horizon at `at`.
pub(crate) fn record_wake(at: chrono::DateTime<chrono::Utc>, run: &str) -> Vec<u8> {
    wake_key(at, WakeKind::Record, run)
}

/// A [`wake_key`] read back: the instant, the kind and the name; `None` if it is damaged.
pub(crate) fn wake_of(key: &[u8]) -> Option<(chrono::DateTime<chrono::Utc>, WakeKind, &str)> {
    let at = instant_of(key)?;
    let name = std::str::from_utf8(key.get(13..)?).ok()?;
    let kind = match *key.get(12)? {
        b's' => WakeKind::Subject,
        b'r' => WakeKind::Record,
        _ => return None,
    };
    Some((at, kind, name))
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

    #[test]
    fn part_keys_read_back_and_one_subject_is_one_prefix() {
        let key = part_key("a", "i-1");
        assert_eq!(part_of(&key), Some(("a", "i-1")));
        assert!(key.starts_with(&subject_prefix("a")));
        assert!(!part_key("ab", "c").starts_with(&subject_prefix("a")));
        assert_eq!(part_of(&key[..3]), None);
        assert_eq!(part_of(&undelivered_key("s", "i-2")), Some(("s", "i-2")));
    }

    #[test]
    fn wake_keys_sort_by_instant_and_read_back() {
        let at = |s| chrono::DateTime::from_timestamp(s, 0).unwrap();
        let early = record_wake(at(10), "r-9");
        let late = subject_wake(at(20), "a");
        assert!(early < late);
        assert_eq!(wake_of(&early), Some((at(10), WakeKind::Record, "r-9")));
        assert_eq!(wake_of(&late), Some((at(20), WakeKind::Subject, "a")));
        assert_eq!(wake_of(&late[..12]), None);
    }

    /// The bytes are the format: a change here is a change of the format version, so
    /// each builder is pinned to the bytes data directories hold.
    #[test]
    fn keys_are_the_bytes_data_directories_hold() {
        assert_eq!(part_key("ab", "i-1"), b"\0\0\0\x02abi-1");
        assert_eq!(undelivered_key("ab", "i-1"), part_key("ab", "i-1"));
        assert_eq!(resolved_key("a", 258), b"\0\0\0\x01a\0\0\0\0\0\0\x01\x02");
        assert_eq!(subject_prefix("a"), b"\0\0\0\x01a");
        assert_eq!(subject_key("s"), b"s");
        assert_eq!(run_key("r-1"), b"r-1");
        assert_eq!(chunk_key(258, 3), *b"\0\0\0\0\0\0\x01\x02\0\0\0\x03");
        let epoch = chrono::DateTime::from_timestamp(1, 2).unwrap();
        assert_eq!(
            subject_wake(epoch, "a"),
            b"\x80\0\0\0\0\0\0\x01\0\0\0\x02sa"
        );
        assert_eq!(record_wake(epoch, "r")[12], b'r');
    }
}
