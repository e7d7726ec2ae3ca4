//! The mark of the last acknowledged group: `<dir>/parkway.acked`, the engine's sequence
//! number of the newest group a sync made durable before its acks were called.
//!
//! The journal alone cannot tell a torn last batch (a kill inside a write that was never
//! acknowledged) from an acknowledged last batch damaged afterwards: both are a batch's
//! bytes that stop making sense, then zeros. The mark tells them apart. It is written
//! after each sync of the journal and before that sync's acks are called, so it is never
//! ahead of what is durable; it is not synced itself (a kill keeps it, as the operating
//! system holds it; a power loss may leave it behind, which makes the check weaker, never
//! wrong). At open, the disk engine compares it with what the journals hold
//! (`super::damage`): a mark newer than the last whole batch before the journals' end
//! means acknowledged work would be lost there.
//!
//! Sixteen bytes: the sequence number and its xxh3, both little-endian. A mark that does
//! not check is taken as absent, with a warning.

use std::hash::Hasher;
use std::io::{ErrorKind, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sync::lock;

/// The mark's file name in a data directory.
pub(super) const MARK_FILE: &str = "parkway.acked";

/// No group written yet.
const NONE: u64 = u64::MAX;

/// The mark of an open store: the sequence number of the last group written, and the
/// file the syncs write it to.
pub(super) struct Mark {
    /// The file's path, for errors.
    path: PathBuf,
    /// The file, open for writing, and the number it holds.
    file: Mutex<(std::fs::File, u64)>,
    /// The sequence number of the newest group written to the engine ([`NONE`] before
    /// the first).
    written: AtomicU64,
}

impl Mark {
    /// Opens (or creates) the mark of the data directory `dir`.
    pub(super) fn open(dir: &Path) -> std::io::Result<Mark> {
        let path = dir.join(MARK_FILE);
        let held = read(dir)?.unwrap_or(NONE);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        Ok(Mark {
            path,
            file: Mutex::new((file, held)),
            written: AtomicU64::new(NONE),
        })
    }

    /// Notes that the group with sequence number `seqno` was written (not yet synced).
    pub(super) fn written(&self, seqno: u64) {
        self.written.store(seqno, Ordering::Release);
    }

    /// The newest group written so far, read before a sync: the sync covers it.
    pub(super) fn covered(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Writes `seqno` (from [`Mark::covered`], read before a sync that succeeded) as the
    /// last acknowledged group, unless it is already there. A failure names the file.
    pub(super) fn store(&self, seqno: u64) -> std::io::Result<()> {
        if seqno == NONE {
            return Ok(());
        }
        let mut file = lock(&self.file);
        if file.1 == seqno {
            return Ok(());
        }
        write_to(&mut file.0, seqno).map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!("writing {}: {err}", self.path.display()),
            )
        })?;
        file.1 = seqno;
        Ok(())
    }
}

/// The mark of `dir`: `None` if there is none, or it does not check (warned).
pub(super) fn read(dir: &Path) -> std::io::Result<Option<u64>> {
    let path = dir.join(MARK_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let decoded = (bytes.len() == 16)
        .then(|| {
            let seqno = u64::from_le_bytes(bytes[..8].try_into().ok()?);
            let check = u64::from_le_bytes(bytes[8..].try_into().ok()?);
            (check == checksum(seqno)).then_some(seqno)
        })
        .flatten();
    if decoded.is_none() && !bytes.is_empty() {
        tracing::warn!(path = %path.display(), "the mark of the last acknowledged group does not check; open goes on without it");
    }
    Ok(decoded)
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
            write_to(&mut file, seqno)?;
            file.sync_all()
        }
        None => match std::fs::remove_file(&path) {
            Err(err) if err.kind() != ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        },
    }
}

/// Writes the sixteen bytes of `seqno` at the start of `file`.
fn write_to(file: &mut std::fs::File, seqno: u64) -> std::io::Result<()> {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&seqno.to_le_bytes());
    bytes[8..].copy_from_slice(&checksum(seqno).to_le_bytes());
    file.seek(SeekFrom::Start(0))?;
    file.write_all(&bytes)
}

/// The check of a mark.
fn checksum(seqno: u64) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&seqno.to_le_bytes());
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
        mark.written(41);
        mark.written(42);
        mark.store(mark.covered()).expect("stores");
        assert_eq!(read(dir.path()).expect("reads"), Some(42));
        let path = dir.path().join(MARK_FILE);
        let mut bytes = std::fs::read(&path).expect("reads");
        bytes[3] ^= 1;
        std::fs::write(&path, bytes).expect("writes");
        assert_eq!(read(dir.path()).expect("reads"), None);
        reset(dir.path(), Some(7)).expect("resets");
        assert_eq!(read(dir.path()).expect("reads"), Some(7));
        reset(dir.path(), None).expect("removes");
        assert_eq!(read(dir.path()).expect("reads"), None);
    }
}
