//! The key layout: the store's keyspaces, and the one description of the bytes of every
//! key in them. Whatever builds or parses a key calls a function here; nothing else in the
//! crate puts key bytes together, so a change of the layout is a change of this file (and
//! of [`super::FORMAT_VERSION`]).
//!
//! | space | key | value |
//! |---|---|---|
//! | `meta` | [`VERSION_KEY`] / [`APPLIED_KEY`] | the format version, decimal text / the last group of the change log the engine holds, a big-endian `u64` |
//! | `subjects.4` | [`subject_key`]: the slot, the subject's name | the rest of its state (JSON) |
//! | `records.4` | [`run_key`]: the run's slot ([`run_slot`]), the run id | an ended run's record, with its subject (JSON) |
//! | `doors` | [`door_key`]: the door's name | the door's spec as saved (JSON) |
//! | `events` | [`chunk_key`]: the first entry's [`sequence_key`], then the count (four bytes, big-endian); versions 1 and 2 kept a [`sequence_key`] per entry | the entries, LZ4-compressed (`super::log`) |
//! | `ids` | [`SEQUENTIAL`] / [`TIMERS`] / [`node_timers_key`] | three high-water marks / the timer keys' next number (a node's, on a store nodes share), big-endian `u64`s |
//! | `undelivered.4` | [`undelivered_key`]: the slot, [`named_key`] of the subject, then the interaction id | the outcome waiting for its receiver (JSON) |
//! | `keys.4` | [`kept_key`]: an idempotency key's subject's slot, or a delivery id's name's, then the name (`start:…`, `hook:…`, `crate::keys`) | what it named and when (JSON) |
//! | `heads.4` | [`subject_key`]: the slot, the subject's name | three counts (big-endian `u32`s) and a byte of flags |
//! | `wakes.4` | [`wake_key`]: the slot, [`instant_key`] of the deadline, a [`WakeKind`] byte, then the subject's name or the run id | nothing (a subject's wake), or the run's subject (a record's horizon) |
//! | `runs.4` | [`run_key`]: the run's slot, the run id | the subject's name |
//! | `entries.4` | [`part_key`]: the slot, [`named_key`] of the subject, then the interaction id | a parked entry (JSON) |
//! | `run_states.4` | [`part_key`]: the slot, [`named_key`] of the subject, then the run id | a run and its journal (JSON) |
//! | `resolved.4` | [`resolved_key`]: the slot, [`named_key`] of the subject, then the place ([`sequence_key`]) | a resolution remembered (JSON) |
//! | `groups.4` | [`part_key`]: the slot, [`named_key`] of the subject, then the group id | a group of asks (JSON) |
//!
//! **Slots first.** Every key of what a subject owns starts with its slot
//! ([`crate::slot::Slot`], two bytes, big-endian), so one slot's keys are one prefix of
//! each space ([`slot_prefix`]), which a process that owns the slot reads and writes and
//! no other enters. A subject's parts are keyed by its slot; a run's record and its
//! entry in the run index by the slot its id names, which is its subject's
//! ([`run_slot`]; an id that names none, a sequential one or one made before version 4,
//! by the slot of the id itself); an idempotency key by its subject's slot, as it is the
//! subject's ([`kept_slot`]). A delivery id is the runtime's, one name for every node:
//! it is keyed by the slot of its own name but written by any node. The doors, the log
//! and the ids' counters are the runtime's, not a slot's.
//!
//! A space whose keys changed in version 4 took a new name (`subjects.4` for
//! `subjects`): its conversion writes beside the old space and drops that only once the
//! new version is durable (`super::disk`), so a conversion cut short is done again.
//!
//! Every integer in a key is big-endian, so keys sort as their numbers do; a subject's
//! name comes after its slot, with its length before it, wherever a space keeps a
//! subject's parts, so one subject's keys are one prefix ([`subject_prefix`]) no other
//! subject's enter. The layout speaks of names, ids, places and instants, never of the
//! types that hold them: the store is a leaf.

use crate::slot::Slot;

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
            Space::Subjects => "subjects.4",
            Space::Records => "records.4",
            Space::Doors => "doors",
            Space::Events => "events",
            Space::Ids => "ids",
            Space::Undelivered => "undelivered.4",
            Space::Keys => "keys.4",
            Space::Heads => "heads.4",
            Space::Wakes => "wakes.4",
            Space::Runs => "runs.4",
            Space::Entries => "entries.4",
            Space::RunStates => "run_states.4",
            Space::Resolved => "resolved.4",
            Space::Groups => "groups.4",
        }
    }

    /// The name the space had before version 4, where its keys had no slot: the space a
    /// directory of an older version holds, converted at open (`super::disk`). `None` for
    /// a space whose keys did not change.
    pub(crate) fn unslotted_name(self) -> Option<&'static str> {
        let name = self.name().strip_suffix(".4")?;
        Some(name)
    }

    /// The space's position in [`Space::ALL`], for tables indexed by space.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether the space's keys start with a slot.
    pub(crate) fn is_slotted(self) -> bool {
        self.unslotted_name().is_some()
    }

    /// Whether the space's keys are a slot and a [`named_key`]: a subject's name, then
    /// the rest.
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

/// The key of the last group the change log made durable that the engine holds, a
/// big-endian `u64`, in [`Space::Meta`] (`super::logged`).
pub(crate) const APPLIED_KEY: &[u8] = b"log_applied";

/// The key of the sequential ids' high-water marks in [`Space::Ids`].
pub(crate) const SEQUENTIAL: &[u8] = b"sequential";

/// The key of the timer keys' next sequence number in [`Space::Ids`].
pub(crate) const TIMERS: &[u8] = b"timers";

/// The key of the next sequence number of the timer keys node `node` makes, in
/// [`Space::Ids`], on a store nodes share: each node keeps its own, so a node never
/// reads another's and makes keys in its range.
pub(crate) fn node_timers_key(node: u32) -> Vec<u8> {
    [TIMERS, b"/", &node.to_be_bytes()].concat()
}

/// Whether `key` is a node's timer keys' counter ([`node_timers_key`]).
pub(crate) fn is_node_timers_key(key: &[u8]) -> bool {
    key.len() == TIMERS.len() + 5 && key.starts_with(TIMERS) && key[TIMERS.len()] == b'/'
}

/// The prefix of every key of `slot` in a slotted space: its number, two bytes,
/// big-endian.
pub(crate) fn slot_prefix(slot: Slot) -> [u8; 2] {
    slot.number().to_be_bytes()
}

/// `slot`'s prefix, then `rest`.
fn slotted(slot: Slot, rest: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(2 + rest.len());
    key.extend_from_slice(&slot_prefix(slot));
    key.extend_from_slice(rest);
    key
}

/// A key of a slotted space split into its slot and the rest, or `None` if it is too
/// short or names no slot.
pub(crate) fn split_slot(key: &[u8]) -> Option<(Slot, &[u8])> {
    let number = u16::from_be_bytes(key.get(..2)?.try_into().ok()?);
    Some((Slot::numbered(number)?, key.get(2..)?))
}

/// The slot of a run's record and of its entry in the run index: the slot its id names
/// (its subject's), or, for an id that names none (a sequential one, or one made before
/// version 4), the slot of the id itself.
pub(crate) fn run_slot(run: &str) -> Slot {
    Slot::of_run(run).unwrap_or_else(|| Slot::of(run))
}

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

/// The subject a slot and a [`named_key`] start with ([`undelivered_key`],
/// [`part_key`]), or `None` if the key is damaged.
pub(crate) fn name_of(key: &[u8]) -> Option<&str> {
    split_part(key).map(|(name, _)| name)
}

/// A key of a slot and a [`named_key`] split into the subject's name and the tail, or
/// `None` if the key is damaged or its slot is not the subject's.
pub(crate) fn split_part(key: &[u8]) -> Option<(&str, &[u8])> {
    let (slot, rest) = split_slot(key)?;
    let (name, tail) = split_named(rest)?;
    (Slot::of(name) == slot).then_some((name, tail))
}

/// A [`named_key`] split into its name and its tail, or `None` if the key is damaged.
pub(crate) fn split_named(key: &[u8]) -> Option<(&str, &[u8])> {
    let len = usize::try_from(u32::from_be_bytes(key.get(..4)?.try_into().ok()?)).ok()?;
    let end = 4usize.checked_add(len)?;
    let name = std::str::from_utf8(key.get(4..end)?).ok()?;
    Some((name, key.get(end..)?))
}

/// The subject a [`subject_key`] names, or why it does not: it is too short, its name
/// is not text, or its slot is not the name's.
pub(crate) fn subject_of(key: &[u8]) -> Result<&str, String> {
    let (slot, name) = split_slot(key).ok_or("the key is shorter than a slot")?;
    let name = std::str::from_utf8(name).map_err(|e| format!("the name is not text: {e}"))?;
    if Slot::of(name) != slot {
        return Err(format!("the key's slot is not subject {name}'s"));
    }
    Ok(name)
}

/// What a key of a slotted space holds after its slot ([`kept_key`]'s name,
/// [`run_key`]'s id), shown even when it is damaged.
pub(crate) fn unslotted_shown(key: &[u8]) -> std::borrow::Cow<'_, str> {
    plain_shown(split_slot(key).map_or(key, |(_, name)| name))
}

/// A key of [`Space::Doors`] as text, any byte that is not text replaced: a key read
/// even when it is damaged (named in a message, or kept as it reads).
pub(crate) fn plain_shown(key: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(key)
}

/// The key of a subject in [`Space::Subjects`] and [`Space::Heads`]: its slot, then its
/// name.
pub(crate) fn subject_key(subject: &str) -> Vec<u8> {
    slotted(Slot::of(subject), subject.as_bytes())
}

/// The key of a run in [`Space::Records`] and [`Space::Runs`]: its slot ([`run_slot`]),
/// then its id.
pub(crate) fn run_key(run: &str) -> Vec<u8> {
    slotted(run_slot(run), run.as_bytes())
}

/// The key of a door in [`Space::Doors`]: its name.
pub(crate) fn door_key(door: &str) -> Vec<u8> {
    door.as_bytes().to_vec()
}

/// The key of an idempotency key or a hook delivery in [`Space::Keys`]: its slot
/// ([`kept_slot`]), then the name (`crate::keys` makes it).
pub(crate) fn kept_key(name: &str) -> Vec<u8> {
    slotted(kept_slot(name), name.as_bytes())
}

/// The slot of an idempotency key or a hook delivery: an idempotency key's subject's
/// (`crate::keys::start_key`), so the subject's owner keeps it; else the name's own.
pub(crate) fn kept_slot(name: &str) -> Slot {
    Slot::of(crate::keys::subject_of(name).unwrap_or(name))
}

/// Whether the key named `name` is its slot's, written under its owner's fencing (an
/// idempotency key), rather than the runtime's, written by any node (a delivery id).
pub(crate) fn kept_by_slot(name: &str) -> bool {
    crate::keys::subject_of(name).is_some()
}

/// The prefix of every key of `subject`'s parts ([`Space::Entries`],
/// [`Space::RunStates`], [`Space::Groups`], [`Space::Resolved`]) and of its outcomes in
/// [`Space::Undelivered`]: its slot, then [`named_key`] of its name.
pub(crate) fn subject_prefix(subject: &str) -> Vec<u8> {
    part(subject, b"")
}

/// `subject`'s slot, then [`named_key`] of its name with `tail`.
fn part(subject: &str, tail: &[u8]) -> Vec<u8> {
    slotted(Slot::of(subject), &named_key(subject, tail))
}

/// The key of a part of `subject`'s state kept by id: an entry by its interaction id, a
/// run by its run id, a group by its group id.
pub(crate) fn part_key(subject: &str, id: &str) -> Vec<u8> {
    part(subject, id.as_bytes())
}

/// The subject and the id a [`part_key`] (or an [`undelivered_key`]) holds, or `None`
/// if the key is damaged.
pub(crate) fn part_of(key: &[u8]) -> Option<(&str, &str)> {
    let (subject, id) = split_part(key)?;
    Some((subject, std::str::from_utf8(id).ok()?))
}

/// The key of a resolution `subject` remembers, at `place` in [`Space::Resolved`].
pub(crate) fn resolved_key(subject: &str, place: u64) -> Vec<u8> {
    part(subject, &sequence_key(place))
}

/// The key of an outcome being delivered in [`Space::Undelivered`]: the interaction
/// under the subject's name.
pub(crate) fn undelivered_key(subject: &str, interaction: &str) -> Vec<u8> {
    part(subject, interaction.as_bytes())
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

/// The key of a wake: the slot of what it is for, the instant, the kind, then the name.
/// One slot's wakes are one prefix, in deadline order.
pub(crate) fn wake_key(at: chrono::DateTime<chrono::Utc>, kind: WakeKind, name: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(15 + name.len());
    key.extend_from_slice(&slot_prefix(wake_slot(kind, name)));
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

/// A [`wake_key`] read back: the instant, the kind and the name; `None` if it is
/// damaged (its slot among it: a slot that is not the name's).
pub(crate) fn wake_of(key: &[u8]) -> Option<(chrono::DateTime<chrono::Utc>, WakeKind, &str)> {
    let (slot, rest) = split_slot(key)?;
    let at = instant_of(rest)?;
    let name = std::str::from_utf8(rest.get(13..)?).ok()?;
    let kind = match *rest.get(12)? {
        b's' => WakeKind::Subject,
        b'r' => WakeKind::Record,
        _ => return None,
    };
    (wake_slot(kind, name) == slot).then_some((at, kind, name))
}

/// The slot of a wake: its subject's, or its record's.
fn wake_slot(kind: WakeKind, name: &str) -> Slot {
    match kind {
        WakeKind::Subject => Slot::of(name),
        WakeKind::Record => run_slot(name),
    }
}

/// The key a key `old` of `space` as version 3 wrote it has now: the same, with the slot
/// of what it is for before it. `None` for a space whose keys did not change, and an
/// error naming what is wrong for a key that does not read as version 3's.
pub(crate) fn slot_first(space: Space, old: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let text = |bytes: &[u8]| {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| format!("the key is not text: {e}"))
    };
    Ok(Some(match space {
        Space::Meta | Space::Doors | Space::Events | Space::Ids => return Ok(None),
        Space::Subjects | Space::Heads => subject_key(&text(old)?),
        Space::Records | Space::Runs => run_key(&text(old)?),
        Space::Keys => kept_key(&text(old)?),
        Space::Undelivered
        | Space::Entries
        | Space::RunStates
        | Space::Resolved
        | Space::Groups => {
            let (name, _) = split_named(old).ok_or("the key does not start with a name")?;
            slotted(Slot::of(name), old)
        }
        Space::Wakes => {
            let at = instant_of(old).ok_or("the key does not start with an instant")?;
            let kind = match old.get(12) {
                Some(b's') => WakeKind::Subject,
                Some(b'r') => WakeKind::Record,
                _ => return Err("the key has no wake's kind after its instant".to_owned()),
            };
            wake_key(at, kind, &text(&old[13..])?)
        }
    }))
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
        assert!(key.starts_with(&slot_prefix(Slot::of("a"))));
        assert!(!part_key("ab", "c").starts_with(&subject_prefix("a")));
        assert_eq!(part_of(&key[..5]), None);
        assert_eq!(part_of(&undelivered_key("s", "i-2")), Some(("s", "i-2")));
        // A slot that is not the subject's is damage.
        let mut moved = key.clone();
        moved[1] ^= 1;
        assert_eq!(part_of(&moved), None);
        assert_eq!(subject_of(&subject_key("a")), Ok("a"));
        let mut moved = subject_key("a");
        moved[1] ^= 1;
        assert!(subject_of(&moved).is_err());
    }

    #[test]
    fn wake_keys_sort_by_instant_within_a_slot_and_read_back() {
        let at = |s| chrono::DateTime::from_timestamp(s, 0).unwrap();
        let early = subject_wake(at(10), "a");
        let late = subject_wake(at(20), "a");
        assert!(early < late);
        assert!(early.starts_with(&slot_prefix(Slot::of("a"))));
        assert_eq!(wake_of(&early), Some((at(10), WakeKind::Subject, "a")));
        let record = record_wake(at(10), "r-9");
        assert!(record.starts_with(&slot_prefix(run_slot("r-9"))));
        assert_eq!(wake_of(&record), Some((at(10), WakeKind::Record, "r-9")));
        assert_eq!(wake_of(&late[..14]), None);
        let mut moved = late.clone();
        moved[1] ^= 1;
        assert_eq!(wake_of(&moved), None);
    }

    /// A run's record is under its subject's slot when its id names it, and under the
    /// id's own slot when it names none.
    #[test]
    fn a_run_s_key_is_under_the_slot_its_id_names() {
        let slot = Slot::of("orders/7");
        let id = slot.run_id(42);
        assert_eq!(run_slot(&id), slot);
        assert!(run_key(&id).starts_with(&slot_prefix(slot)));
        assert_eq!(run_slot("r-1"), Slot::of("r-1"));
        assert_eq!(
            run_slot("r-0e2c1a002aae913d"),
            Slot::of("r-0e2c1a002aae913d")
        );
    }

    /// Version 3's keys, given their slots: each converts to this version's key of the
    /// same thing, and what does not read as version 3's is refused by name.
    #[test]
    fn version_three_keys_convert_to_slot_first_keys() {
        let at = chrono::DateTime::from_timestamp(1, 2).unwrap();
        let v3_wake = |kind: u8, name: &str| {
            let mut key = instant_key(at).to_vec();
            key.push(kind);
            key.extend_from_slice(name.as_bytes());
            key
        };
        let cases: [(Space, Vec<u8>, Vec<u8>); 8] = [
            (Space::Subjects, b"s".to_vec(), subject_key("s")),
            (Space::Heads, b"s".to_vec(), subject_key("s")),
            (Space::Records, b"r-1".to_vec(), run_key("r-1")),
            (Space::Runs, b"r-1".to_vec(), run_key("r-1")),
            (Space::Keys, b"run:k".to_vec(), kept_key("run:k")),
            (
                Space::Entries,
                named_key("ab", b"i-1"),
                part_key("ab", "i-1"),
            ),
            (Space::Wakes, v3_wake(b's', "a"), subject_wake(at, "a")),
            (Space::Wakes, v3_wake(b'r', "r-2"), record_wake(at, "r-2")),
        ];
        for (space, old, new) in cases {
            assert_eq!(slot_first(space, &old), Ok(Some(new)), "{space:?}");
        }
        assert_eq!(slot_first(Space::Doors, b"d"), Ok(None));
        assert!(slot_first(Space::Subjects, b"\xff").is_err());
        assert!(slot_first(Space::Entries, b"\0\0\0\x09ab").is_err());
        assert!(slot_first(Space::Wakes, b"short").is_err());
    }

    /// The bytes are the format: a change here is a change of the format version, so
    /// each builder is pinned to the bytes data directories hold.
    #[test]
    fn keys_are_the_bytes_data_directories_hold() {
        let a = slot_prefix(Slot::of("a"));
        assert_eq!(a, [0x02, 0x1f]);
        let ab = slot_prefix(Slot::of("ab"));
        assert_eq!(
            part_key("ab", "i-1"),
            [&ab[..], b"\0\0\0\x02abi-1"].concat()
        );
        assert_eq!(undelivered_key("ab", "i-1"), part_key("ab", "i-1"));
        assert_eq!(
            resolved_key("a", 258),
            [&a[..], b"\0\0\0\x01a\0\0\0\0\0\0\x01\x02"].concat()
        );
        assert_eq!(subject_prefix("a"), [&a[..], b"\0\0\0\x01a"].concat());
        assert_eq!(subject_key("a"), [&a[..], b"a"].concat());
        let r1 = slot_prefix(Slot::of("r-1"));
        assert_eq!(run_key("r-1"), [&r1[..], b"r-1"].concat());
        assert_eq!(chunk_key(258, 3), *b"\0\0\0\0\0\0\x01\x02\0\0\0\x03");
        let epoch = chrono::DateTime::from_timestamp(1, 2).unwrap();
        assert_eq!(
            subject_wake(epoch, "a"),
            [&a[..], b"\x80\0\0\0\0\0\0\x01\0\0\0\x02sa"].concat()
        );
        assert_eq!(record_wake(epoch, "r")[14], b'r');
    }
}
