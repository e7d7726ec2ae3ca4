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
//! Which files: fjall keeps its journals in its folder as `<n>.jnl`. Each sync syncs
//! every journal file the folder holds, so what was flushed before a rotation is synced
//! however the rotation fell between two syncs (a sealed journal, which fjall synced as
//! it sealed it, costs a sync with nothing to write). Where no journal file is found (an
//! engine that laid them out otherwise), the sync falls back to the engine's own
//! `persist(SyncData)`, which is always right.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::sync::lock;

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
    /// Every journal file the folder held at the last sync, by number: its path and the
    /// file, open for syncing.
    open: BTreeMap<u64, (PathBuf, File)>,
}

impl Journals {
    /// The journals of the engine in `folder`.
    pub(super) fn new(folder: PathBuf) -> Journals {
        Journals {
            folder,
            files: Mutex::new(Files::default()),
        }
    }

    /// Syncs every journal file in the folder: everything flushed to them before the
    /// call is durable when it returns `Ok(true)`. `Ok(false)` if the folder holds no
    /// journal file, so nothing was synced. A failure names the file.
    pub(super) fn sync(&self) -> std::io::Result<bool> {
        let mut files = lock(&self.files);
        let mut present = BTreeSet::new();
        let listing = |err| naming(&self.folder, "listing", err);
        for entry in std::fs::read_dir(&self.folder).map_err(listing)? {
            let entry = entry.map_err(listing)?;
            let Some(number) = journal_number(&entry.file_name()) else {
                continue;
            };
            if let std::collections::btree_map::Entry::Vacant(slot) = files.open.entry(number) {
                let path = entry.path();
                match OpenOptions::new().write(true).open(&path) {
                    Ok(file) => {
                        slot.insert((path, file));
                    }
                    // Deleted since it was listed: its contents were flushed into
                    // tables, which the engine synced before it deleted the journal.
                    Err(err) if err.kind() == ErrorKind::NotFound => continue,
                    Err(err) => return Err(naming(&path, "opening", err)),
                }
            }
            present.insert(number);
        }
        // Journals the engine deleted since the last sync are let go.
        files.open.retain(|number, _| present.contains(number));
        if files.open.is_empty() {
            return Ok(false);
        }
        for (path, file) in files.open.values() {
            file.sync_data()
                .map_err(|err| naming(path, "syncing", err))?;
        }
        Ok(true)
    }
}

/// `err`, met `doing` the journal file (or folder) at `path`, saying so.
fn naming(path: &Path, doing: &str, err: std::io::Error) -> std::io::Error {
    std::io::Error::new(err.kind(), format!("{doing} {}: {err}", path.display()))
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
    fn a_sync_syncs_every_journal_file_the_folder_holds() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let journals = Journals::new(dir.path().to_path_buf());
        assert!(!journals.sync().expect("syncs"), "no journal yet");
        std::fs::write(dir.path().join("3.jnl"), b"a").expect("writes");
        std::fs::write(dir.path().join("lock"), b"").expect("writes");
        assert!(journals.sync().expect("syncs"));
        std::fs::write(dir.path().join("4.jnl"), b"b").expect("writes");
        // Even one numbered below the others is synced.
        std::fs::write(dir.path().join("2.jnl"), b"c").expect("writes");
        assert!(journals.sync().expect("syncs"));
        let open = |journals: &Journals| {
            lock(&journals.files)
                .open
                .keys()
                .copied()
                .collect::<Vec<_>>()
        };
        assert_eq!(open(&journals), vec![2, 3, 4]);
        // A journal the engine deleted is let go.
        std::fs::remove_file(dir.path().join("3.jnl")).expect("removes");
        assert!(journals.sync().expect("syncs"));
        assert_eq!(open(&journals), vec![2, 4]);
    }

    #[test]
    fn a_failure_names_what_it_was_doing_and_where() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let gone = dir.path().join("gone");
        let err = Journals::new(gone.clone()).sync().expect_err("no folder");
        let text = err.to_string();
        assert!(text.starts_with("listing "), "{text}");
        assert!(text.contains(&gone.display().to_string()), "{text}");
    }
}
