//! The mark of the last acknowledged group: `<dir>/parkway.acked`, the sequence numbers
//! the newest group a sync made durable can have, written before that sync's acks were
//! called.
//!
//! The journal alone cannot tell a torn last batch (a kill inside a write that was never
//! acknowledged) from an acknowledged last batch damaged afterwards: both are a batch's
//! bytes that stop making sense, then zeros. The mark tells them apart. It is written
//! after each sync of the journal and before that sync's acks are called, so it is never
//! ahead of what is durable; it is not synced itself (a kill keeps it, as the operating
//! system holds it; a power loss may leave it behind, which makes the check weaker, never
//! wrong). At open, the disk engine compares it with what the journals hold
//! (`super::damage`, [`Acked::lost`]).
//!
//! A group's own sequence number is not told to its writer, and the engine's flushes and
//! compactions take numbers from the same counter without writing a journal entry. So the
//! writer reads the engine's visible number just before the group's commit and just after
//! it: the group's number lies between, inclusive ([`Acked`]). Every earlier group's
//! number is below the first, every later group's above the last, and the group is the
//! only journal batch between them; so the mark places the group among the journal's
//! batches exactly, however a flush fell.
//!
//! Twenty-four bytes: the least and the greatest number, and the xxh3 of both, all
//! little-endian. The sixteen bytes of a mark written before (one number and its xxh3)
//! read as that number alone. A mark that does not check is taken as absent, with a
//! warning.

use std::hash::Hasher;
use std::io::{ErrorKind, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::sync::lock;

/// The mark's file name in a data directory.
pub(super) const MARK_FILE: &str = "parkway.acked";

/// The sequence numbers an acknowledged group can have: its own is one of
/// `least..=greatest`, and no other journal batch has one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Acked {
    /// The engine's visible number just before the group's commit.
    pub(super) least: u64,
    /// The engine's visible number just after it, less one.
    pub(super) greatest: u64,
}

impl Acked {
    /// A group whose number is known exactly.
    pub(super) fn exactly(seqno: u64) -> Acked {
        Acked {
            least: seqno,
            greatest: seqno,
        }
    }

    /// The numbers as a range, for errors.
    pub(super) fn range(self) -> std::ops::RangeInclusive<u64> {
        self.least..=self.greatest
    }

    /// Whether the group is missing from journals whose whole batches end with
    /// `last_whole` and are followed by a batch numbered `at_cut` (if one reads there).
    ///
    /// With whole batches, the group is there if the last of them is numbered at least
    /// [`Acked::least`]: no other batch is numbered in the span, and none is missing
    /// before the last whole one. With none (the journals that held the group and what
    /// came before may have been flushed into tables and deleted), it is lost if the batch
    /// at the cut is numbered no more than [`Acked::greatest`]: it is the group itself,
    /// torn, or an earlier one, which the group came after.
    pub(super) fn lost(self, last_whole: Option<u64>, at_cut: Option<u64>) -> bool {
        match last_whole {
            Some(last) => last < self.least,
            None => at_cut.is_some_and(|seqno| seqno <= self.greatest),
        }
    }
}

/// The mark of an open store: the numbers of the last group written, and the file the
/// syncs write them to.
pub(super) struct Mark {
    /// The file's path, for errors.
    path: PathBuf,
    /// The file, open for writing, and what it holds.
    file: Mutex<(std::fs::File, Option<Acked>)>,
    /// The numbers of the newest group written to the engine (`None` before the first).
    written: Mutex<Option<Acked>>,
}

impl Mark {
    /// Opens (or creates) the mark of the data directory `dir`.
    pub(super) fn open(dir: &Path) -> std::io::Result<Mark> {
        let path = dir.join(MARK_FILE);
        let held = read(dir)?;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        Ok(Mark {
            path,
            file: Mutex::new((file, held)),
            written: Mutex::new(None),
        })
    }

    /// Notes that a group was written (not yet synced), the engine's visible number
    /// being `before` just before its commit and `after` just after it.
    pub(super) fn written(&self, before: u64, after: u64) {
        if let Some(greatest) = after.checked_sub(1).filter(|&greatest| greatest >= before) {
            *lock(&self.written) = Some(Acked {
                least: before,
                greatest,
            });
        }
    }

    /// The newest group written so far, read before a sync: the sync covers it.
    pub(super) fn covered(&self) -> Option<Acked> {
        *lock(&self.written)
    }

    /// Writes `acked` (from [`Mark::covered`], read before a sync that succeeded) as the
    /// last acknowledged group, unless it is already there. A failure names the file.
    pub(super) fn store(&self, acked: Option<Acked>) -> std::io::Result<()> {
        let Some(acked) = acked else {
            return Ok(());
        };
        let mut file = lock(&self.file);
        if file.1 == Some(acked) {
            return Ok(());
        }
        write_to(&mut file.0, acked).map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!("writing {}: {err}", self.path.display()),
            )
        })?;
        file.1 = Some(acked);
        Ok(())
    }
}

/// The mark of `dir`: `None` if there is none, or it does not check (warned).
pub(super) fn read(dir: &Path) -> std::io::Result<Option<Acked>> {
    let path = dir.join(MARK_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let decoded = decode(&bytes);
    if decoded.is_none() && !bytes.is_empty() {
        tracing::warn!(path = %path.display(), "the mark of the last acknowledged group does not check; open goes on without it");
    }
    Ok(decoded)
}

/// A mark's bytes, if they check: twenty-four, or the sixteen of one exact number.
fn decode(bytes: &[u8]) -> Option<Acked> {
    let word = |at: usize| Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?));
    match bytes.len() {
        16 => {
            let seqno = word(0)?;
            (word(8)? == checksum(&[seqno])).then(|| Acked::exactly(seqno))
        }
        24 => {
            let (least, greatest) = (word(0)?, word(8)?);
            (least <= greatest && word(16)? == checksum(&[least, greatest]))
                .then_some(Acked { least, greatest })
        }
        _ => None,
    }
}

/// Replaces the mark of `dir` with `seqno`, or removes it (`None`), synced: after a cut,
/// the mark must not name a group the cut dropped.
pub(super) fn reset(dir: &Path, seqno: Option<u64>) -> std::io::Result<()> {
    let path = dir.join(MARK_FILE);
    match seqno {
        Some(seqno) => {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)?;
            write_to(&mut file, Acked::exactly(seqno))?;
            file.sync_all()
        }
        None => match std::fs::remove_file(&path) {
            Err(err) if err.kind() != ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        },
    }
}

/// Writes the twenty-four bytes of `acked` at the start of `file` (which is never shorter
/// than that afterwards: a mark only ever grows from sixteen bytes to twenty-four).
fn write_to(file: &mut std::fs::File, acked: Acked) -> std::io::Result<()> {
    let mut bytes = [0u8; 24];
    bytes[..8].copy_from_slice(&acked.least.to_le_bytes());
    bytes[8..16].copy_from_slice(&acked.greatest.to_le_bytes());
    bytes[16..].copy_from_slice(&checksum(&[acked.least, acked.greatest]).to_le_bytes());
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&bytes)
}

/// The check of a mark's numbers.
fn checksum(numbers: &[u64]) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    for number in numbers {
        hasher.update(&number.to_le_bytes());
    }
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_a_garbled_one_is_absent() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert_eq!(read(dir.path()).expect("reads"), None);
        let mark = Mark::open(dir.path()).expect("opens");
        mark.store(mark.covered()).expect("nothing to store");
        assert_eq!(read(dir.path()).expect("reads"), None);
        mark.written(41, 42);
        mark.written(42, 44);
        mark.store(mark.covered()).expect("stores");
        let read_back = read(dir.path()).expect("reads");
        assert_eq!(read_back.map(Acked::range), Some(42..=43));
        let path = dir.path().join(MARK_FILE);
        let mut bytes = std::fs::read(&path).expect("reads");
        bytes[3] ^= 1;
        std::fs::write(&path, bytes).expect("writes");
        assert_eq!(read(dir.path()).expect("reads"), None);
        reset(dir.path(), Some(7)).expect("resets");
        assert_eq!(read(dir.path()).expect("reads"), Some(Acked::exactly(7)));
        reset(dir.path(), None).expect("removes");
        assert_eq!(read(dir.path()).expect("reads"), None);
    }

    /// A mark of the sixteen bytes written before reads as its one number.
    #[test]
    fn a_mark_of_one_number_reads_as_that_number() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut bytes = 58060u64.to_le_bytes().to_vec();
        bytes.extend(checksum(&[58060]).to_le_bytes());
        std::fs::write(dir.path().join(MARK_FILE), bytes).expect("writes");
        assert_eq!(
            read(dir.path()).expect("reads"),
            Some(Acked::exactly(58060))
        );
    }

    /// A group whose commit shared the span with a flush's number: found whichever of the
    /// two numbers it had, and lost only when it is missing.
    #[test]
    fn a_span_places_the_group_among_the_journals_batches() {
        let acked = Acked {
            least: 100,
            greatest: 101,
        };
        // The group had 100 (the flush 101), or 101 (the flush 100): either is the last
        // whole batch, or a later group is.
        assert!(!acked.lost(Some(100), None));
        assert!(!acked.lost(Some(101), None));
        assert!(!acked.lost(Some(102), Some(103)));
        // The journal ends before the span: the group is missing.
        assert!(acked.lost(Some(99), None));
        assert!(acked.lost(Some(99), Some(100)));
        // No whole batch: a torn batch in the span is the group; one before it came
        // before the group; one after it came after the group, which was flushed.
        assert!(acked.lost(None, Some(101)));
        assert!(acked.lost(None, Some(100)));
        assert!(acked.lost(None, Some(50)));
        assert!(!acked.lost(None, Some(102)));
        assert!(!acked.lost(None, None));
    }
}
