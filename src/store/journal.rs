//! The engine's journal files, synced beside the engine rather than through it.
//!
//! fjall's `persist` holds its journal writer's lock while the file is synced, and its
//! batch commit takes the same lock, so no group could be written while the one before it
//! was being synced: each cycle of the writer cost a write plus a sync, one after the
//! other. Here a group is committed and flushed to the operating system
//! (`persist(Buffer)`, a short hold of the lock), and its sync is an `fdatasync` of the
//! journal files themselves, which holds no lock of the engine's: the writer thread
//! writes the next group while the sync thread syncs the last (`super::writer`).
//!
//! Which files: fjall keeps its journals in its folder as `<n>.jnl`, numbered upwards,
//! and writes only to the highest. Each sync syncs every journal numbered at or above
//! the highest that the sync before it saw, so what was flushed before a rotation is
//! synced even if the rotation came between two syncs (fjall syncs a journal as it seals
//! it, too). Where no journal file is found (an engine that laid them out otherwise), the
//! sync falls back to the engine's own `persist(SyncData)`, which is always right.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Mutex;

use super::writer::lock;

/// The journal files of one engine folder, as the syncs have found them.
pub(super) struct Journals {
    /// The engine's folder, where its journals are.
    folder: PathBuf,
    /// The journals open for syncing.
    files: Mutex<Files>,
}

/// The journals a sync found.
#[derive(Default)]
struct Files {
    /// The highest journal number the last sync saw: lower ones are sealed and synced.
    from: u64,
    /// The journals numbered from `from` on, open for syncing.
    open: BTreeMap<u64, File>,
}

impl Journals {
    /// The journals of the engine in `folder`.
    pub(super) fn new(folder: PathBuf) -> Journals {
        Journals {
            folder,
            files: Mutex::new(Files::default()),
        }
    }

    /// Syncs every journal numbered from the last sync's highest on: everything flushed
    /// to them before the call is durable when it returns `Ok(true)`. `Ok(false)` if the
    /// folder holds no journal file, so nothing was synced.
    pub(super) fn sync(&self) -> std::io::Result<bool> {
        let mut files = lock(&self.files);
        for entry in std::fs::read_dir(&self.folder)? {
            let entry = entry?;
            let Some(number) = journal_number(&entry.file_name()) else {
                continue;
            };
            if number < files.from || files.open.contains_key(&number) {
                continue;
            }
            match OpenOptions::new().write(true).open(entry.path()) {
                Ok(file) => {
                    files.open.insert(number, file);
                }
                // Deleted since it was listed: its contents were flushed into tables,
                // which the engine synced before it deleted the journal.
                Err(err) if err.kind() == ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
        }
        let Some(&highest) = files.open.keys().next_back() else {
            return Ok(false);
        };
        for file in files.open.values() {
            file.sync_data()?;
        }
        files.open.retain(|&number, _| number >= highest);
        files.from = highest;
        Ok(true)
    }
}

/// The number of a journal file's name, `<n>.jnl`.
fn journal_number(name: &std::ffi::OsStr) -> Option<u64> {
    name.to_str()?.strip_suffix(".jnl")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbered_journal_files_count() {
        assert_eq!(journal_number("12.jnl".as_ref()), Some(12));
        assert_eq!(journal_number("0.jnl".as_ref()), Some(0));
        assert_eq!(journal_number("version".as_ref()), None);
        assert_eq!(journal_number("x.jnl".as_ref()), None);
        assert_eq!(journal_number("12.jnl.tmp".as_ref()), None);
    }

    #[test]
    fn a_sync_keeps_the_journals_from_the_highest_it_saw() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let journals = Journals::new(dir.path().to_path_buf());
        assert!(!journals.sync().expect("syncs"), "no journal yet");
        std::fs::write(dir.path().join("3.jnl"), b"a").expect("writes");
        std::fs::write(dir.path().join("lock"), b"").expect("writes");
        assert!(journals.sync().expect("syncs"));
        std::fs::write(dir.path().join("4.jnl"), b"b").expect("writes");
        assert!(journals.sync().expect("syncs"));
        let files = lock(&journals.files);
        assert_eq!(files.from, 4);
        assert_eq!(files.open.keys().copied().collect::<Vec<_>>(), vec![4]);
        drop(files);
        // A journal numbered below the highest seen is sealed: it is not opened again.
        std::fs::write(dir.path().join("2.jnl"), b"c").expect("writes");
        assert!(journals.sync().expect("syncs"));
        assert_eq!(lock(&journals.files).open.len(), 1);
    }
}
