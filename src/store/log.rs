//! The event log as kept in [`Space::Events`]: one key per committed group, not per
//! entry.
//!
//! The writer numbers a group's entries in commit order and writes them as one *chunk*:
//! the key is the first entry's sequence number and the count (twelve bytes, big-endian,
//! so chunks sort as their numbers do); the value is the entries, each with its length
//! before it (four bytes, little-endian), compressed with LZ4. A log entry thus costs no
//! key of its own: a group of a hundred changes writes one key for their events, and
//! trimming deletes a chunk once every entry in it is past the log's capacity.
//!
//! Format versions 1 and 2 kept an entry per key (eight bytes, the sequence number).
//! [`convert`] turns such keys into chunks when a directory of those versions is opened;
//! the key lengths tell the two apart, so a conversion cut short by a crash goes on from
//! where it stopped.

use std::collections::VecDeque;

use super::layout::{chunk_key, chunk_of, sequence_key};
use super::{Batch, Space};

/// The most LZ4 can shrink a block by: a chunk whose size before compression claims
/// more than this many times its compressed length is damaged, and is refused before
/// anything is allocated for it.
const MAX_RATIO: usize = 255;

/// A chunk's value holding `entries`.
pub(super) fn encode<'a>(entries: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut text = Vec::new();
    for entry in entries {
        // An event is far shorter than 4 GiB: the runtime caps the values it holds.
        let len = u32::try_from(entry.len()).unwrap_or(u32::MAX);
        text.extend_from_slice(&len.to_le_bytes());
        text.extend_from_slice(entry);
    }
    lz4_flex::compress_prepend_size(&text)
}

/// The `count` entries a chunk's value holds, or what is wrong with it.
pub(super) fn decode(value: &[u8], count: u32) -> Result<Vec<Vec<u8>>, String> {
    let size = value
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or("a chunk of the log is shorter than its size")?;
    if usize::try_from(size).map_or(true, |size| size > value.len().saturating_mul(MAX_RATIO)) {
        return Err(format!("a chunk of the log claims {size} bytes"));
    }
    let text = lz4_flex::decompress_size_prepended(value)
        .map_err(|e| format!("a chunk of the log is damaged: {e}"))?;
    let mut entries = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1024));
    let mut rest = text.as_slice();
    while !rest.is_empty() {
        let (len, tail) = rest
            .split_first_chunk::<4>()
            .ok_or("a chunk of the log ends inside an entry's length")?;
        let len = usize::try_from(u32::from_le_bytes(*len)).unwrap_or(usize::MAX);
        let entry = tail
            .get(..len)
            .ok_or("a chunk of the log ends inside an entry")?;
        entries.push(entry.to_vec());
        rest = &tail[len..];
    }
    if entries.len() != usize::try_from(count).unwrap_or(usize::MAX) {
        return Err(format!(
            "a chunk of the log holds {} entries where its key says {count}",
            entries.len()
        ));
    }
    Ok(entries)
}

/// What one [`Log::append`] changed.
#[derive(Debug)]
pub(super) struct Appended {
    /// The number the next entry got before it.
    next: u64,
    /// Whether it added a chunk.
    chunk: bool,
    /// The chunks it deleted, oldest first.
    deleted: Vec<(u64, u32)>,
}

/// The writer's account of the log: where it ends, its chunks, and how much it keeps.
#[derive(Debug)]
pub(super) struct Log {
    /// The sequence number the next entry gets.
    next: u64,
    /// One past the last entry durable: readers see no further.
    durable: u64,
    /// Every chunk written, oldest first: first sequence number and count.
    chunks: VecDeque<(u64, u32)>,
    /// How many entries the log keeps: a chunk all of whose entries are further back
    /// than this from the end is deleted.
    capacity: u64,
}

impl Log {
    /// The log whose chunks are `keys` (in key order; any other key is ignored), keeping
    /// `capacity` entries.
    pub(super) fn new(keys: impl IntoIterator<Item = Vec<u8>>, capacity: u64) -> Log {
        let chunks: VecDeque<(u64, u32)> =
            keys.into_iter().filter_map(|key| chunk_of(&key)).collect();
        let next = chunks
            .back()
            .map_or(1, |(first, count)| first + u64::from(*count));
        Log {
            next,
            durable: next,
            chunks,
            capacity,
        }
    }

    /// How many entries the log keeps.
    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Sets how many entries the log keeps.
    pub(super) fn set_capacity(&mut self, entries: u64) {
        self.capacity = entries.max(1);
    }

    /// Numbers the log entries of a group's `batches` in order and writes them as one
    /// chunk into `head`, the group's own batch, deleting every chunk then wholly past
    /// the capacity; each batch's first number, and what to [`Log::undo`] if the group
    /// is not written after all.
    pub(super) fn append(&mut self, batches: &[Batch], head: &mut Batch) -> (Vec<u64>, Appended) {
        let first = self.next;
        let mut appended = Appended {
            next: first,
            chunk: false,
            deleted: Vec::new(),
        };
        let mut firsts = Vec::with_capacity(batches.len());
        let mut count = 0usize;
        for batch in batches {
            firsts.push(self.next);
            self.next += batch.log().len() as u64;
            count += batch.log().len();
        }
        if count > 0 {
            // A group's batches are far fewer than 4 billion entries.
            let count = u32::try_from(count).unwrap_or(u32::MAX);
            let entries = batches.iter().flat_map(|batch| batch.log().iter());
            let value = encode(entries.map(Vec::as_slice));
            head.put(Space::Events, chunk_key(first, count), value);
            self.chunks.push_back((first, count));
            appended.chunk = true;
        }
        let floor = self.floor(self.next);
        while let Some(&(first, count)) = self.chunks.front() {
            if first + u64::from(count) > floor {
                break;
            }
            head.delete(Space::Events, chunk_key(first, count));
            appended.deleted.extend(self.chunks.pop_front());
        }
        (firsts, appended)
    }

    /// Takes back an [`Log::append`] whose group was not written: the numbers it gave
    /// are given again to the group written in its place, so the log has no gap.
    pub(super) fn undo(&mut self, appended: Appended) {
        for chunk in appended.deleted.into_iter().rev() {
            self.chunks.push_front(chunk);
        }
        if appended.chunk {
            self.chunks.pop_back();
        }
        self.next = appended.next;
    }

    /// The number the next entry gets.
    pub(super) fn end(&self) -> u64 {
        self.next
    }

    /// The number of the last entry durable and kept, 0 if there is none.
    pub(super) fn last(&self) -> u64 {
        if self.durable <= self.floor(self.durable) {
            return 0;
        }
        self.durable - 1
    }

    /// Everything numbered before `end` is durable.
    pub(super) fn made_durable(&mut self, end: u64) {
        self.durable = self.durable.max(end);
    }

    /// The oldest number the log keeps when it ends before `end`.
    fn floor(&self, end: u64) -> u64 {
        end.saturating_sub(self.capacity).max(1)
    }

    /// Where a read from `from` starts: the key of the chunk holding the oldest entry
    /// to show, and the numbers shown, `from..end` clipped to what the log keeps and is
    /// durable; `None` if there is nothing to show.
    pub(super) fn read_from(&self, from: u64) -> Option<([u8; 12], std::ops::Range<u64>)> {
        let start = from.max(self.floor(self.durable));
        if start >= self.durable {
            return None;
        }
        let at = self
            .chunks
            .partition_point(|(first, count)| first + u64::from(*count) <= start);
        let &(first, count) = self.chunks.get(at)?;
        Some((chunk_key(first, count), start.max(first)..self.durable))
    }
}

/// Puts the log entries of a group's `batches` as one chunk into `head` under the key of
/// `(0, n)`, for an engine that numbers the log itself after the commit
/// ([`super::engine::Engine::numbers_log`]).
pub(super) fn unnumbered(batches: &[Batch], head: &mut Batch) {
    let next: u64 = batches.iter().map(|batch| batch.log().len() as u64).sum();
    if next > 0 {
        // A group's batches are far fewer than 4 billion entries.
        let count = u32::try_from(next).unwrap_or(u32::MAX);
        let entries = batches.iter().flat_map(|batch| batch.log().iter());
        head.put(
            Space::Events,
            chunk_key(0, count),
            encode(entries.map(Vec::as_slice)),
        );
    }
}

/// Converts the older versions' log (a key per entry, [`sequence_key`]) into chunks of
/// up to `per_chunk` entries: `entries` yields the remaining old entries in order, and
/// `commit` writes each chunk with the deletion of the keys it replaces, as one batch.
pub(super) fn convert<E>(
    entries: impl IntoIterator<Item = (u64, Vec<u8>)>,
    per_chunk: usize,
    mut commit: impl FnMut(Batch) -> Result<(), E>,
) -> Result<(), E> {
    let mut pending: Vec<(u64, Vec<u8>)> = Vec::with_capacity(per_chunk);
    let mut flush = |pending: &mut Vec<(u64, Vec<u8>)>| {
        let Some(&(first, _)) = pending.first() else {
            return Ok(());
        };
        let mut batch = Batch::new();
        let count = u32::try_from(pending.len()).unwrap_or(u32::MAX);
        batch.put(
            Space::Events,
            chunk_key(first, count),
            encode(pending.iter().map(|(_, v)| v.as_slice())),
        );
        for (seq, _) in pending.drain(..) {
            batch.delete(Space::Events, sequence_key(seq));
        }
        commit(batch)
    };
    for (seq, value) in entries {
        // An older log has no gaps; a chunk holds consecutive numbers only.
        let follows = pending.last().is_none_or(|(last, _)| *last + 1 == seq);
        if !follows || pending.len() >= per_chunk {
            flush(&mut pending)?;
        }
        pending.push((seq, value));
    }
    flush(&mut pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_reads_back_as_written_and_damage_is_named() {
        let entries: [&[u8]; 3] = [b"one", b"", b"three"];
        let value = encode(entries);
        let read = decode(&value, 3).expect("reads");
        assert_eq!(read, [b"one".to_vec(), Vec::new(), b"three".to_vec()]);
        assert!(decode(&value, 2).unwrap_err().contains("says 2"));
        assert!(decode(&value[..value.len() - 1], 3).is_err());
        assert!(decode(&[1, 2], 1).unwrap_err().contains("shorter"));
        let huge = [0xff, 0xff, 0xff, 0xff, 0];
        assert!(decode(&huge, 1).unwrap_err().contains("claims"));
        // As compressible as anything can be, and still within the ratio allowed.
        let zeros = vec![0u8; 1 << 20];
        assert_eq!(
            decode(&encode([zeros.as_slice()]), 1).expect("reads"),
            [zeros]
        );
        assert_eq!(chunk_of(&chunk_key(7, 3)), Some((7, 3)));
        assert_eq!(chunk_of(&sequence_key(7)), None);
    }

    /// Numbers follow on across groups, each group is one chunk in its head batch, a
    /// chunk is deleted once all its entries are past the capacity, and reads are
    /// clipped to what is kept and durable.
    #[test]
    fn groups_are_chunks_trimmed_whole_and_read_within_the_capacity() {
        let mut log = Log::new(Vec::new(), 3);
        let mut group = [Batch::new(), Batch::new()];
        group[0].append_log(b"a".to_vec()).append_log(b"b".to_vec());
        group[1].append_log(b"c".to_vec());
        let mut head = Batch::new();
        assert_eq!(log.append(&group, &mut head).0, [1, 3]);
        assert_eq!(head.ops().len(), 1, "one chunk, in the head");
        assert!(group.iter().all(|batch| batch.ops().is_empty()));
        assert_eq!(log.read_from(1), None, "nothing is durable yet");
        log.made_durable(log.end());
        assert_eq!(log.read_from(1), Some((chunk_key(1, 3), 1..4)));

        let mut next = [Batch::new()];
        next[0].append_log(b"d".to_vec());
        let mut head = Batch::new();
        assert_eq!(log.append(&next, &mut head).0, [4]);
        log.made_durable(log.end());
        // Entry 1 is past the capacity, but its chunk still holds 2 and 3.
        assert_eq!(head.ops().len(), 1);
        assert_eq!(log.read_from(1), Some((chunk_key(1, 3), 2..5)));

        let mut last = [Batch::new()];
        last[0].append_log(b"e".to_vec()).append_log(b"f".to_vec());
        let mut head = Batch::new();
        log.append(&last, &mut head);
        log.made_durable(log.end());
        assert!(
            head.ops()
                .iter()
                .any(|op| op.key() == chunk_key(1, 3)
                    && matches!(op, super::super::Op::Delete { .. })),
            "the first chunk is wholly past the capacity: deleted"
        );
        assert_eq!(log.read_from(1), Some((chunk_key(4, 1), 4..7)));
        assert_eq!(log.read_from(7), None);

        let reopened = Log::new(vec![chunk_key(4, 1).to_vec(), chunk_key(5, 2).to_vec()], 3);
        assert_eq!(reopened.next, 7);
    }

    /// An append taken back leaves the log as it was: the next append gives the same
    /// numbers and writes and deletes the same chunks, whatever the first one deleted.
    #[test]
    fn an_append_undone_is_as_if_it_never_was() {
        for capacity in [1, 2, 3, 100] {
            let mut log = Log::new(
                vec![chunk_key(1, 2).to_vec(), chunk_key(3, 1).to_vec()],
                capacity,
            );
            let before = (log.next, log.chunks.clone());
            let mut group = [Batch::new(), Batch::new()];
            group[0].append_log(b"a".to_vec()).append_log(b"b".to_vec());
            group[1].append_log(b"c".to_vec());
            let mut head = Batch::new();
            let (firsts, appended) = log.append(&group, &mut head);
            log.undo(appended);
            assert_eq!(
                (log.next, log.chunks.clone()),
                before,
                "capacity {capacity}"
            );
            let mut again = Batch::new();
            assert_eq!(log.append(&group, &mut again).0, firsts);
            assert_eq!(again, head, "capacity {capacity}");
        }
    }

    /// The older log converts into chunks of consecutive numbers, each replacing its
    /// keys in one batch.
    #[test]
    fn an_older_log_converts_into_chunks() {
        let old = [
            (4u64, b"x".to_vec()),
            (5, b"y".to_vec()),
            (6, b"z".to_vec()),
            (9, b"w".to_vec()),
        ];
        let mut batches = Vec::new();
        convert(old, 2, |batch| {
            batches.push(batch);
            Ok::<_, ()>(())
        })
        .unwrap();
        let keys: Vec<Vec<Vec<u8>>> = batches
            .iter()
            .map(|b| b.ops().iter().map(|op| op.key().to_vec()).collect())
            .collect();
        assert_eq!(
            keys,
            [
                vec![
                    chunk_key(4, 2).to_vec(),
                    sequence_key(4).to_vec(),
                    sequence_key(5).to_vec()
                ],
                vec![chunk_key(6, 1).to_vec(), sequence_key(6).to_vec()],
                vec![chunk_key(9, 1).to_vec(), sequence_key(9).to_vec()],
            ]
        );
    }
}
