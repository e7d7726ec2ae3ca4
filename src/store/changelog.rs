//! The change log: where a group is made durable, one record per group, in segment
//! files written in place.
//!
//! A sync of the engine's own journal made every acknowledgement wait for what the engine
//! did in the background: the journal grows, so its sync commits the file system's
//! metadata, and that commit waits for every table a flush or a compaction was writing
//! (`docs/benchmarks.md`, "The durable tail"). Here a group is one record appended to a
//! segment: a file of fixed size, filled with zeros when it is made and reused once the
//! engine holds everything it logged, so appending never changes a file's size and its
//! sync writes data only. The engine's keyed state is written as before, but synced only
//! at a *checkpoint* (`super::logged`), off the path of any acknowledgement.
//!
//! A segment is `<n>.log` in `<dir>/log/`: a header of [`HEADER`] bytes, then records.
//! The header: [`SEGMENT_MAGIC`], whether the segment is in use, the first number it
//! logged, the last number known durable when the header was last written, and the
//! xxh3 of those. A record: [`RECORD_MAGIC`], the payload's length, the group's number,
//! the last number known durable when it was written, the xxh3 of those and the payload,
//! then the payload, padded to 8 bytes. The payload is the group's mutations, each key's
//! last ([`encode`]).
//!
//! Reading back ([`recover`]) finds, in each segment in use, the records in order from
//! its first; where they stop, it looks further for any record that still checks, since
//! the pages of a write that was cut by a crash reach the disk in any order. Damage is
//! told from a torn end by the numbers known durable: every record and header says how
//! far the log was durable when it was written, so a record missing below what any of
//! them says was acknowledged, and its loss is damage (`super::logged` refuses it).

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use std::collections::BTreeMap;

use super::{Op, OpenError, Space};
use crate::sync::lock;

/// The log's folder in a data directory.
pub(super) const LOG_DIR: &str = "log";
/// A segment's size as it is made; one record larger than that gets a segment its size.
pub(super) const SEGMENT: u64 = 16 * 1024 * 1024;
/// The free segments the checkpoint thread keeps ready: a segment fills while the
/// checkpoint of the one before is written, and one more covers a slow checkpoint.
const SPARES: usize = 2;
/// A segment header's size.
pub(super) const HEADER: u64 = 64;
/// What a segment starts with.
const SEGMENT_MAGIC: &[u8; 8] = b"PKWYLOG1";
/// What a record starts with.
const RECORD_MAGIC: u32 = 0x5257_4b50;
/// A record's header: magic, length, number, durable, checksum.
const RECORD_HEADER: usize = 32;
/// How a record is aligned in its segment.
const ALIGN: u64 = 8;

/// One segment file, open.
pub(super) struct Segment {
    /// Its number, in its name.
    pub(super) number: u64,
    /// Its path.
    pub(super) path: PathBuf,
    /// The file, open for reading and writing.
    file: Arc<File>,
    /// Its size.
    size: u64,
    /// The last group it logged (0: none).
    last: u64,
}

/// A segment header as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    /// Whether the segment holds records still to be checkpointed.
    in_use: bool,
    /// In use, the first group it logged since it was taken; free, the last it
    /// logged.
    base: u64,
    /// The last group known durable when the header was written.
    durable: u64,
}

impl Header {
    /// The header's bytes.
    fn bytes(self) -> [u8; HEADER as usize] {
        let mut out = [0u8; HEADER as usize];
        out[..8].copy_from_slice(SEGMENT_MAGIC);
        out[8..12].copy_from_slice(&u32::from(self.in_use).to_le_bytes());
        out[16..24].copy_from_slice(&self.base.to_le_bytes());
        out[24..32].copy_from_slice(&self.durable.to_le_bytes());
        let hash = xxhash_rust::xxh3::xxh3_64(&out[..32]);
        out[32..40].copy_from_slice(&hash.to_le_bytes());
        out
    }

    /// The header in `bytes`, or `None` if it does not check.
    fn read(bytes: &[u8]) -> Option<Header> {
        let bytes = bytes.get(..HEADER as usize)?;
        if &bytes[..8] != SEGMENT_MAGIC
            || xxhash_rust::xxh3::xxh3_64(&bytes[..32]) != le64(bytes, 32)
        {
            return None;
        }
        Some(Header {
            in_use: le32(bytes, 8) == 1,
            base: le64(bytes, 16),
            durable: le64(bytes, 24),
        })
    }
}

/// A record that checks, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    /// The group's number.
    pub(super) seq: u64,
    /// The last group known durable when it was written.
    pub(super) durable: u64,
    /// Where it starts in its segment.
    pub(super) offset: u64,
    /// The encoded mutations.
    pub(super) payload: Vec<u8>,
}

/// What one segment in use holds.
pub(super) struct Read {
    /// The segment.
    pub(super) path: PathBuf,
    /// Its records in order from its first, up to where they stop.
    pub(super) records: Vec<Record>,
    /// Where they stop: the offset after the last, if bytes that are not zeros follow
    /// (a torn write, or damage), with how many.
    pub(super) stop: Option<(u64, u64)>,
    /// Records of this use of the segment that still check past the stop (without
    /// their payloads).
    pub(super) later: Vec<Record>,
    /// The last group its header says was durable.
    pub(super) durable: u64,
    /// The highest number of any record in it that checks, whatever its use.
    pub(super) highest: u64,
}

/// Everything an open found in the log.
pub(super) struct Found {
    /// Each segment in use, read.
    pub(super) read: Vec<Read>,
    /// Every segment file, for the log to use again.
    pub(super) segments: Vec<Segment>,
    /// Segment files whose header does not check (named in a warning; their records
    /// are read all the same).
    pub(super) unreadable_headers: Vec<PathBuf>,
    /// Segments in use shorter than a segment is made: cut short, so records may be
    /// missing from their end with nothing left to say so.
    pub(super) short: Vec<PathBuf>,
    /// The highest group number any segment holds or names, whatever its use: the log
    /// goes on above it, so a record left from before is never taken for a new one.
    pub(super) highest: u64,
}

/// Reads every segment in `folder`; with `writable`, the folder is made if missing and
/// the segments opened to be written again, and without, none is changed (a folder
/// missing is a log with nothing in it).
pub(super) fn recover(folder: &Path, writable: bool) -> std::io::Result<Found> {
    if writable {
        match std::fs::create_dir(folder) {
            Ok(()) => sync_folder(folder)?,
            Err(err) if err.kind() == ErrorKind::AlreadyExists => {}
            Err(err) => return Err(naming(folder, "making", err)),
        }
    }
    let mut found = Found {
        read: Vec::new(),
        segments: Vec::new(),
        unreadable_headers: Vec::new(),
        short: Vec::new(),
        highest: 0,
    };
    let listing = |err| naming(folder, "listing", err);
    let mut numbered = Vec::new();
    let entries = match std::fs::read_dir(folder) {
        Err(err) if !writable && err.kind() == ErrorKind::NotFound => return Ok(found),
        entries => entries.map_err(listing)?,
    };
    for entry in entries {
        let entry = entry.map_err(listing)?;
        if let Some(number) = segment_number(&entry.file_name()) {
            numbered.push((number, entry.path()));
        }
    }
    numbered.sort();
    for (number, path) in numbered {
        let mut file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(&path)
            .map_err(|err| naming(&path, "opening", err))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|err| naming(&path, "reading", err))?;
        let header = Header::read(&bytes);
        if header.is_none() && bytes.iter().any(|&b| b != 0) {
            found.unreadable_headers.push(path.clone());
        }
        // A free segment's records were all checkpointed, and its header names the
        // last; one whose header does not check is read, in case it held records still
        // needed. Every number a segment holds or names counts towards the highest,
        // which the log never numbers a group again.
        if header.is_some_and(|h| h.in_use) && (bytes.len() as u64) < SEGMENT {
            found.short.push(path.clone());
        }
        if header.is_none_or(|h| h.in_use) {
            let read = read_segment(&path, &bytes, header);
            found.highest = found.highest.max(read.highest);
            found.read.push(read);
        }
        if let Some(header) = header {
            // In use, the first number it logged; free, the last.
            let named = if header.in_use {
                header.base.saturating_sub(1)
            } else {
                header.base
            };
            found.highest = found.highest.max(named).max(header.durable);
        }
        found.segments.push(Segment {
            number,
            path,
            file: Arc::new(file),
            size: bytes.len() as u64,
            last: 0,
        });
    }
    Ok(found)
}

/// The records of one segment's bytes.
fn read_segment(path: &Path, bytes: &[u8], header: Option<Header>) -> Read {
    let base = header.map_or(0, |h| h.base);
    let mut read = Read {
        path: path.to_path_buf(),
        records: Vec::new(),
        stop: None,
        later: Vec::new(),
        durable: header.map_or(0, |h| h.durable),
        highest: 0,
    };
    let mut offset = HEADER;
    let mut previous = base.saturating_sub(1);
    while let Some(record) = record_at(bytes, offset) {
        read.highest = read.highest.max(record.seq);
        // A record from the segment's use before, or out of order: the records of this
        // use end here.
        if record.seq < base || record.seq <= previous && !read.records.is_empty() {
            break;
        }
        previous = record.seq;
        offset = next_offset(offset, record.payload.len());
        read.records.push(record);
    }
    let rest = bytes.get(offset as usize..).unwrap_or_default();
    let nonzero = rest.iter().filter(|&&b| b != 0).count() as u64;
    if nonzero > 0 {
        read.stop = Some((offset, nonzero));
        let mut at = offset + ALIGN;
        while at + RECORD_HEADER as u64 <= bytes.len() as u64 {
            if let Some(mut record) = record_at(bytes, at) {
                at = next_offset(at, record.payload.len());
                read.highest = read.highest.max(record.seq);
                // One of the segment's use before says nothing of this one.
                if record.seq >= base {
                    record.payload = Vec::new();
                    read.later.push(record);
                }
            } else {
                at += ALIGN;
            }
        }
    }
    read
}

/// The record at `offset` of `bytes`, if one that checks starts there.
fn record_at(bytes: &[u8], offset: u64) -> Option<Record> {
    let start = usize::try_from(offset).ok()?;
    let head = bytes.get(start..start.checked_add(RECORD_HEADER)?)?;
    if le32(head, 0) != RECORD_MAGIC {
        return None;
    }
    let len = le32(head, 4) as usize;
    let body = start + RECORD_HEADER;
    let payload = bytes.get(body..body.checked_add(len)?)?;
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&head[4..24]);
    hasher.update(payload);
    if hasher.digest() != le64(head, 24) {
        return None;
    }
    Some(Record {
        seq: le64(head, 8),
        durable: le64(head, 16),
        offset,
        payload: payload.to_vec(),
    })
}

/// The offset after a record at `offset` with `len` bytes of payload.
fn next_offset(offset: u64, len: usize) -> u64 {
    (offset + RECORD_HEADER as u64 + len as u64).next_multiple_of(ALIGN)
}

/// The log's groups after the last the engine holds, as an open finds them.
pub(super) struct Chain<'a> {
    /// The records to replay, in order.
    pub(super) records: Vec<&'a Record>,
    /// The last group the engine holds once they are replayed.
    pub(super) end: u64,
    /// The last group any record or header says was acknowledged.
    pub(super) acknowledged: u64,
    /// Records found after a gap.
    pub(super) after: u64,
}

impl<'a> Chain<'a> {
    /// The records of `read` that follow group `applied` without a gap.
    pub(super) fn of(read: &'a [Read], applied: u64) -> Chain<'a> {
        let mut by_seq = BTreeMap::new();
        let mut acknowledged = 0;
        for segment in read {
            acknowledged = acknowledged.max(segment.durable);
            for record in segment.records.iter().chain(&segment.later) {
                acknowledged = acknowledged.max(record.durable);
            }
            for record in &segment.records {
                by_seq.entry(record.seq).or_insert(record);
            }
        }
        let mut records = Vec::new();
        let mut end = applied;
        while let Some(record) = by_seq.remove(&(end + 1)) {
            records.push(record);
            end += 1;
        }
        let after = by_seq.range(end + 1..).count() as u64;
        Chain {
            records,
            end,
            acknowledged,
            after,
        }
    }

    /// The refusal of an open that would drop acknowledged groups.
    pub(super) fn refusal(&self, dir: &Path, read: &[Read]) -> OpenError {
        // Where the missing group should be: after the last record replayed, or where
        // a segment's records stop.
        let place = read
            .iter()
            .find_map(|segment| {
                let last = segment.records.iter().find(|r| r.seq == self.end)?;
                Some((segment.path.clone(), last.offset))
            })
            .or_else(|| {
                read.iter()
                    .find_map(|segment| Some((segment.path.clone(), segment.stop?.0)))
            })
            .unwrap_or_else(|| (dir.join(LOG_DIR), 0));
        OpenError::DamagedLog {
            path: dir.to_path_buf(),
            segment: place.0,
            offset: place.1,
            missing: self.end + 1,
            acknowledged: self.acknowledged,
            after: self.after,
        }
    }
}

/// The log as it is written: the segment being appended to, the ones filled and not yet
/// checkpointed, and the free ones.
pub(super) struct ChangeLog {
    /// Where the segments are.
    folder: PathBuf,
    /// The segments and the position.
    state: Mutex<Segments>,
}

/// The log's segments and where the next record goes.
struct Segments {
    /// The one appended to.
    current: Segment,
    /// Where the next record goes in it.
    offset: u64,
    /// Filled since, oldest first, each to be freed once checkpointed.
    full: Vec<Segment>,
    /// Free, to be taken in turn.
    free: Vec<Segment>,
    /// The next segment file's number.
    next_number: u64,
    /// The last group appended.
    written: u64,
    /// The last group synced.
    durable: u64,
    /// The first group the current segment logged.
    base: u64,
    /// Files written since the last sync.
    dirty: Vec<Arc<File>>,
    /// The record being encoded, kept for its capacity.
    buffer: Vec<u8>,
}

impl ChangeLog {
    /// Starts the log in `folder` after an open replayed and checkpointed everything
    /// `segments` held, the last group being `last`: every segment is freed, and the
    /// first one (or a new one) is taken for the group after `last`.
    pub(super) fn start(
        folder: &Path,
        segments: Vec<Segment>,
        last: u64,
    ) -> std::io::Result<ChangeLog> {
        let mut next_number = segments.iter().map(|s| s.number + 1).max().unwrap_or(0);
        let mut free = Vec::new();
        for segment in segments {
            if segment.size < SEGMENT {
                // Made larger than the rest for one large record, or cut short: let go.
                drop(segment.file);
                std::fs::remove_file(&segment.path)
                    .map_err(|err| naming(&segment.path, "removing", err))?;
                continue;
            }
            write_header(
                &segment,
                Header {
                    in_use: false,
                    base: last,
                    durable: last,
                },
            )?;
            segment
                .file
                .sync_data()
                .map_err(|err| naming(&segment.path, "syncing", err))?;
            free.push(segment);
        }
        free.reverse();
        let current = match free.pop() {
            Some(segment) => segment,
            None => make_segment(folder, &mut next_number, SEGMENT)?,
        };
        let mut state = Segments {
            current,
            offset: HEADER,
            full: Vec::new(),
            free,
            next_number,
            written: last,
            durable: last,
            base: last + 1,
            dirty: Vec::new(),
            buffer: Vec::new(),
        };
        state.take_current(last + 1)?;
        Ok(ChangeLog {
            folder: folder.to_path_buf(),
            state: Mutex::new(state),
        })
    }

    /// Appends the record of group `seq` with `ops`, not yet durable. Groups are
    /// appended in order by one thread.
    pub(super) fn append(&self, seq: u64, ops: &[&Op]) -> std::io::Result<()> {
        let mut state = lock(&self.state);
        let state = &mut *state;
        let mut buffer = std::mem::take(&mut state.buffer);
        buffer.clear();
        buffer.resize(RECORD_HEADER, 0);
        encode(ops, &mut buffer);
        let len = buffer.len() - RECORD_HEADER;
        let padded = (buffer.len() as u64).next_multiple_of(ALIGN);
        buffer.resize(padded as usize, 0);
        buffer[0..4].copy_from_slice(&RECORD_MAGIC.to_le_bytes());
        buffer[4..8].copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_le_bytes());
        buffer[8..16].copy_from_slice(&seq.to_le_bytes());
        buffer[16..24].copy_from_slice(&state.durable.to_le_bytes());
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        hasher.update(&buffer[4..24]);
        hasher.update(&buffer[RECORD_HEADER..RECORD_HEADER + len]);
        buffer[24..32].copy_from_slice(&hasher.digest().to_le_bytes());
        let result = state.place(&self.folder, seq, &buffer);
        state.buffer = buffer;
        result
    }

    /// Syncs every record appended before the call.
    pub(super) fn sync(&self) -> std::io::Result<()> {
        let (files, written) = {
            let mut state = lock(&self.state);
            (std::mem::take(&mut state.dirty), state.written)
        };
        for file in &files {
            file.sync_data()?;
        }
        let mut state = lock(&self.state);
        if written > state.durable {
            state.durable = written;
            // Not synced itself: the next sync carries it; an older one only weakens
            // the check of the next open.
            let header = Header {
                in_use: true,
                base: state.base,
                durable: written,
            };
            write_header(&state.current, header)?;
        }
        Ok(())
    }

    /// Whether a filled segment waits for a checkpoint to be freed.
    pub(super) fn wants_checkpoint(&self) -> bool {
        !lock(&self.state).full.is_empty()
    }

    /// The engine holds every group up to `through`, synced: the filled segments that
    /// logged nothing later are freed.
    pub(super) fn checkpointed(&self, through: u64) -> std::io::Result<()> {
        let mut state = lock(&self.state);
        let (freed, kept): (Vec<Segment>, Vec<Segment>) = std::mem::take(&mut state.full)
            .into_iter()
            .partition(|segment| segment.last <= through);
        state.full = kept;
        for segment in freed {
            if segment.size != SEGMENT {
                // Made for one large record: let go.
                drop(segment.file);
                std::fs::remove_file(&segment.path)
                    .map_err(|err| naming(&segment.path, "removing", err))?;
                continue;
            }
            // Not synced: a segment found in use at an open, its records all held by the
            // engine, replays nothing. Its last number is kept, so an open need not read
            // a free segment to know the highest.
            let header = Header {
                in_use: false,
                base: segment.last,
                durable: state.durable,
            };
            write_header(&segment, header)?;
            state.free.insert(0, segment);
        }
        Ok(())
    }

    /// Makes free segments until [`SPARES`] are, so the appender rarely makes one (a
    /// segment is 16 MiB of zeros written and synced): called by the checkpoint thread,
    /// off the path of any acknowledgement.
    pub(super) fn keep_spares(&self) -> std::io::Result<()> {
        loop {
            let number = {
                let mut state = lock(&self.state);
                if state.free.len() >= SPARES {
                    return Ok(());
                }
                // Taken under the lock: an appender making one meanwhile takes the next.
                state.next_number += 1;
                state.next_number - 1
            };
            let segment = make_segment(&self.folder, &mut { number }, SEGMENT)?;
            lock(&self.state).free.push(segment);
        }
    }

    /// The segments in use and free, for a test.
    #[cfg(test)]
    pub(super) fn counts(&self) -> (usize, usize) {
        let state = lock(&self.state);
        (state.full.len() + 1, state.free.len())
    }
}

impl Segments {
    /// Writes the record in `bytes` for group `seq`, moving to the next segment if it
    /// does not fit in this one.
    fn place(&mut self, folder: &Path, seq: u64, bytes: &[u8]) -> std::io::Result<()> {
        let len = bytes.len() as u64;
        if self.offset + len > self.current.size {
            let size = (HEADER + len).max(SEGMENT);
            let next = match self.free.pop() {
                Some(segment) if segment.size >= size => segment,
                Some(segment) => {
                    self.free.push(segment);
                    make_segment(folder, &mut self.next_number, size)?
                }
                None => make_segment(folder, &mut self.next_number, size)?,
            };
            let filled = std::mem::replace(&mut self.current, next);
            if filled.last > 0 {
                self.full.push(filled);
            } else {
                self.free.push(filled);
            }
            self.take_current(seq)?;
        }
        write_at(&self.current.file, bytes, self.offset)
            .map_err(|err| naming(&self.current.path, "writing", err))?;
        self.offset += len;
        self.current.last = seq;
        self.written = seq;
        if !self
            .dirty
            .iter()
            .any(|file| Arc::ptr_eq(file, &self.current.file))
        {
            self.dirty.push(Arc::clone(&self.current.file));
        }
        Ok(())
    }

    /// Takes the current segment for records from `base` on: its header says so (synced
    /// with its first record).
    fn take_current(&mut self, base: u64) -> std::io::Result<()> {
        self.offset = HEADER;
        self.current.last = 0;
        self.base = base;
        write_header(
            &self.current,
            Header {
                in_use: true,
                base,
                durable: self.durable,
            },
        )
    }
}

/// Makes segment file number `*number` of `size` bytes, all zeros and synced, and moves
/// the number on.
fn make_segment(folder: &Path, number: &mut u64, size: u64) -> std::io::Result<Segment> {
    let path = folder.join(format!("{:08}.log", *number));
    *number += 1;
    let making = |err| naming(&path, "making", err);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(making)?;
    // Written, not only sized: a hole would be allocated as records are written, and
    // each sync would then commit the file system's metadata.
    let zeros = vec![0u8; 1024 * 1024];
    let mut at = 0;
    while at < size {
        let n = (size - at).min(zeros.len() as u64) as usize;
        write_at(&file, &zeros[..n], at).map_err(making)?;
        at += n as u64;
    }
    let segment = Segment {
        number: *number - 1,
        path,
        file: Arc::new(file),
        size,
        last: 0,
    };
    // Free until taken: an open reads no more than its header.
    write_header(
        &segment,
        Header {
            in_use: false,
            base: 0,
            durable: 0,
        },
    )?;
    segment
        .file
        .sync_all()
        .map_err(|err| naming(&segment.path, "making", err))?;
    sync_folder(folder)?;
    Ok(segment)
}

/// What a segment in use cut short (`Found::short`) says: records may be missing from its
/// end with nothing left to say so. For the open's refusal and `parkway check` alike.
pub(super) fn cut_short(path: &Path) -> String {
    format!(
        "the change log's segment {} is {} bytes, shorter than a segment is made ({SEGMENT}): it was cut short, and what it logged at its end may be lost",
        path.display(),
        std::fs::metadata(path).map_or(0, |meta| meta.len()),
    )
}

/// Writes `header` at the start of `segment`.
fn write_header(segment: &Segment, header: Header) -> std::io::Result<()> {
    write_at(&segment.file, &header.bytes(), 0)
        .map_err(|err| naming(&segment.path, "writing the header of", err))
}

/// Encodes `ops` after what `out` holds: each a space's index, 0 for a put or 1 for a
/// delete, the key's length (4 bytes, little-endian) and the key, and for a put the
/// value's length and the value.
pub(super) fn encode(ops: &[&Op], out: &mut Vec<u8>) {
    for op in ops {
        out.push(op.space().index() as u8);
        let key = op.key();
        match op {
            Op::Put { value, .. } => {
                out.push(0);
                put_bytes(out, key);
                put_bytes(out, value);
            }
            Op::Delete { .. } => {
                out.push(1);
                put_bytes(out, key);
            }
        }
    }
}

/// The mutations in a record's payload, or what is wrong with it.
pub(super) fn decode(mut payload: &[u8]) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    while let Some((&space, rest)) = payload.split_first() {
        let space = *Space::ALL.get(usize::from(space)).ok_or_else(|| {
            format!("a mutation of space {space}, which this build does not know")
        })?;
        let (&kind, rest) = rest
            .split_first()
            .ok_or("a mutation cut short before its kind")?;
        let (key, rest) = take_bytes(rest)?;
        payload = match kind {
            0 => {
                let (value, rest) = take_bytes(rest)?;
                ops.push(Op::Put {
                    space,
                    key: key.to_vec(),
                    value: value.to_vec(),
                });
                rest
            }
            1 => {
                ops.push(Op::Delete {
                    space,
                    key: key.to_vec(),
                });
                rest
            }
            other => return Err(format!("a mutation of unknown kind {other}")),
        };
    }
    Ok(ops)
}

/// Appends `bytes` with its length.
fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Bytes with their length off the front of `from`, and the rest.
fn take_bytes(from: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let (len, rest) = from.split_first_chunk::<4>().ok_or("a length cut short")?;
    let len = u32::from_le_bytes(*len) as usize;
    if rest.len() < len {
        return Err(format!("{len} bytes announced, {} left", rest.len()));
    }
    Ok(rest.split_at(len))
}

/// The number of a segment file's name, `<n>.log`.
fn segment_number(name: &std::ffi::OsStr) -> Option<u64> {
    name.to_str()?.strip_suffix(".log")?.parse().ok()
}

/// The little-endian `u32` at `at` of `bytes` (which holds it).
fn le32(bytes: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(word)
}

/// The little-endian `u64` at `at` of `bytes` (which holds it).
fn le64(bytes: &[u8], at: usize) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(word)
}

/// Writes all of `bytes` at `offset` of `file`, leaving its cursor alone.
#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

/// Writes all of `bytes` at `offset` of `file`.
#[cfg(windows)]
fn write_at(file: &File, mut bytes: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !bytes.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(file, bytes, offset)?;
        if n == 0 {
            return Err(ErrorKind::WriteZero.into());
        }
        bytes = &bytes[n..];
        offset += n as u64;
    }
    Ok(())
}

/// Syncs `folder`, so a file made or removed in it stays so.
fn sync_folder(folder: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    File::open(folder)
        .and_then(|dir| dir.sync_all())
        .map_err(|err| naming(folder, "syncing", err))?;
    let _ = folder;
    Ok(())
}

/// `err`, met `doing` the file (or folder) at `path`, saying so.
fn naming(path: &Path, doing: &str, err: std::io::Error) -> std::io::Error {
    std::io::Error::new(err.kind(), format!("{doing} {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A put of `len` bytes, each `byte`, under `key` in the events.
    fn put(key: &[u8], byte: u8, len: usize) -> Op {
        Op::Put {
            space: Space::Events,
            key: key.to_vec(),
            value: vec![byte; len],
        }
    }

    /// The numbers of the records `found` holds in its segments in use, in order.
    fn numbers(found: &Found) -> Vec<u64> {
        let mut numbers: Vec<u64> = found
            .read
            .iter()
            .flat_map(|read| read.records.iter().map(|record| record.seq))
            .collect();
        numbers.sort_unstable();
        numbers
    }

    #[test]
    fn records_read_back_across_segments_and_a_checkpointed_segment_is_used_again() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(LOG_DIR);
        let found = recover(&folder, true).unwrap();
        assert_eq!(found.highest, 0);
        let log = ChangeLog::start(&folder, found.segments, 0).unwrap();
        let mib = 1024 * 1024;
        let append = |seq: u64| {
            let op = put(&seq.to_be_bytes(), seq as u8, mib);
            log.append(seq, &[&op]).unwrap();
        };
        // Records of a MiB: how many a segment holds.
        let mut payload = Vec::new();
        encode(&[&put(&0u64.to_be_bytes(), 0, mib)], &mut payload);
        let per = (SEGMENT - HEADER) / next_offset(0, payload.len());
        // A segment and a half.
        let first = per + per / 2;
        (1..=first).for_each(append);
        log.sync().unwrap();
        assert!(log.wants_checkpoint(), "a segment filled");
        assert_eq!(log.counts(), (2, 0));
        let found = recover(&folder, true).unwrap();
        assert_eq!(numbers(&found), (1..=first).collect::<Vec<_>>());
        let last = found
            .read
            .iter()
            .flat_map(|read| &read.records)
            .find(|record| record.seq == first)
            .unwrap();
        assert_eq!(
            decode(&last.payload).unwrap(),
            vec![put(&first.to_be_bytes(), first as u8, mib)]
        );
        log.checkpointed(first).unwrap();
        assert!(!log.wants_checkpoint());
        assert_eq!(log.counts(), (1, 1), "the filled segment is free");
        // A segment more: the free one is taken again, and no file is made.
        let second = first + per;
        (first + 1..=second).for_each(append);
        log.sync().unwrap();
        assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 2);
        let found = recover(&folder, true).unwrap();
        // The free segment's header was overwritten as it was taken: what it holds of
        // its use before is not this use's.
        let after: Vec<u64> = numbers(&found).into_iter().filter(|&n| n > first).collect();
        assert_eq!(after, (first + 1..=second).collect::<Vec<_>>());
        assert_eq!(found.highest, second);
    }

    #[test]
    fn a_damaged_record_stops_the_records_and_those_past_it_are_still_found() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(LOG_DIR);
        let log = ChangeLog::start(&folder, recover(&folder, true).unwrap().segments, 0).unwrap();
        let mut offsets = Vec::new();
        for seq in 1..=3u64 {
            offsets.push(lock(&log.state).offset);
            let op = put(b"k", seq as u8, 100);
            log.append(seq, &[&op]).unwrap();
            log.sync().unwrap();
        }
        drop(log);
        let path = folder.join("00000000.log");
        let mut bytes = std::fs::read(&path).unwrap();
        // One byte of the second record's payload.
        bytes[offsets[1] as usize + RECORD_HEADER + 10] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let found = recover(&folder, true).unwrap();
        let read = &found.read[0];
        assert_eq!(read.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1]);
        assert_eq!(read.stop.map(|(at, _)| at), Some(offsets[1]));
        let later: Vec<(u64, u64)> = read.later.iter().map(|r| (r.seq, r.durable)).collect();
        // The third says the second was durable when it was written.
        assert_eq!(later, [(3, 2)]);
        assert_eq!(read.durable, 3, "the header, written after each sync");
    }

    #[test]
    fn a_payload_that_does_not_read_is_an_error_naming_why() {
        let op = put(b"key", 7, 3);
        let mut bytes = Vec::new();
        encode(&[&op], &mut bytes);
        assert_eq!(decode(&bytes).unwrap(), vec![op]);
        for cut in 1..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut unknown = bytes.clone();
        unknown[0] = 200;
        assert!(decode(&unknown).unwrap_err().contains("space 200"));
        let mut kind = bytes;
        kind[1] = 9;
        assert!(decode(&kind).unwrap_err().contains("kind 9"));
    }
}
