//! The disk engine: fjall in a data directory, behind a lock file, with a format version.
//!
//! Layout of a data directory:
//!
//! - `parkway.lock`: locked exclusively while a store has the directory open (an OS file
//!   lock, so it is released when the process ends however it ends).
//! - `data/`: the fjall database; each [`Space`] is one of its keyspaces, named by
//!   [`Space::name`]; [`Space::Meta`] holds `format_version` as decimal text.
//!
//! A group's batches are committed as one fjall write batch (one journal entry, one
//! sequence number, each key's last mutation across the group, so a later batch wins
//! over an earlier one) and flushed to the operating system (`persist(Buffer)`): a kill
//! keeps a group whole or not at all. fjall is opened with manual journal persistence,
//! so nothing is synced but by the sync, which syncs the journal files beside the engine
//! (`super::journal`), holding none of its locks, so that the next group can be written
//! meanwhile.
//!
//! Before the engine replays its journals, the open reads them itself (`super::damage`)
//! and checks them against the mark of the last acknowledged group (`super::mark`): a
//! torn last batch is left to the engine, which drops it; damage before the journals'
//! end, or a last acknowledged group missing, is refused naming the journal and the
//! offset, unless the operator asked to cut there ([`OnDamage::Truncate`]).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode};

use super::batch::last_per_key;
use super::damage::{self, Cut};
use super::engine::{Engine, ReadFailure, WriteFailure};
use super::journal::Journals;
use super::mark::{self, Mark};
use super::{
    Batch, Entries, FORMAT_VERSION, OnDamage, Op, OpenError, Recovered, Space, UPGRADES_FROM,
};

/// The lock file's name in a data directory.
pub(super) const LOCK_FILE: &str = "parkway.lock";
/// The fjall database's folder in a data directory.
pub(super) const DATA_DIR: &str = "data";
/// Where a cut keeps what it dropped from the journals, in a data directory.
pub(super) const DROPPED_DIR: &str = "dropped";
pub(super) use super::VERSION_KEY;

/// The journals kept before the oldest memtables are flushed into tables: an open after
/// a crash replays at most this much (the engine's least; its default is 512 MiB, which
/// took seconds to replay). Replaying 64 MiB took about a second on two cores.
const MAX_JOURNAL: u64 = 64 * 1024 * 1024;

/// An open data directory.
pub(super) struct Disk {
    /// The open engine and the lock; `None` once closed.
    open: std::sync::RwLock<Option<Open>>,
}

/// An open store's engine and lock, all released together when it is closed.
struct Open {
    /// The fjall keyspaces, indexed by [`Space::index`]. Declared before `db` and `lock`
    /// so they drop first.
    spaces: Vec<Keyspace>,
    /// The database; its drop stops fjall's threads.
    db: Database,
    /// Its journal files, synced beside it.
    journals: Journals,
    /// The mark of the last acknowledged group, written after each sync.
    mark: Mark,
    /// The locked lock file, released when the store is dropped, after the database.
    _lock: File,
}

/// What every use of a closed store says.
const CLOSED: &str = "the store is closed";

impl Disk {
    /// Opens (or creates) the store in `dir`, refusing a damaged journal.
    #[cfg(test)]
    pub(super) fn open(dir: &Path) -> Result<Disk, OpenError> {
        Disk::open_as(dir, OnDamage::Refuse).map(|(disk, _)| disk)
    }

    /// Opens (or creates) the store in `dir`, doing with a damaged journal what
    /// `on_damage` says; what it found in the journals.
    pub(super) fn open_as(dir: &Path, on_damage: OnDamage) -> Result<(Disk, Recovered), OpenError> {
        let directory = |source| OpenError::Directory {
            path: dir.to_path_buf(),
            source,
        };
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(err) if err.kind() == ErrorKind::AlreadyExists && dir.is_dir() => {}
            Err(err) => return Err(directory(err)),
        }
        let data = dir.join(DATA_DIR);
        if !data.exists() {
            // A new store goes only into an empty directory (or one holding only our lock
            // file): nothing of anyone else's is written beside.
            let foreign = std::fs::read_dir(dir)
                .map_err(directory)?
                .filter_map(Result::ok)
                .any(|entry| entry.file_name() != LOCK_FILE);
            if foreign {
                return Err(OpenError::Foreign {
                    path: dir.to_path_buf(),
                });
            }
        }
        let lock = take_lock(dir)?;
        let recovered = check_journals(dir, &data, on_damage)?;
        let mark = Mark::open(dir).map_err(directory)?;
        let (db, spaces) = open_engine(dir, &data)?;
        let found = check_version(dir, &db, &spaces)?;
        convert(dir, &db, &spaces, found)?;
        let disk = Disk {
            open: std::sync::RwLock::new(Some(Open {
                spaces,
                db,
                journals: Journals::new(data),
                mark,
                _lock: lock,
            })),
        };
        Ok((disk, recovered))
    }

    /// Runs `f` on the open engine, or refuses if it is closed.
    fn with<T, E: From<String>>(&self, f: impl FnOnce(&Open) -> Result<T, E>) -> Result<T, E> {
        let open = self
            .open
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match open.as_ref() {
            Some(open) => f(open),
            None => Err(E::from(CLOSED.to_owned())),
        }
    }
}

impl Engine for Disk {
    /// Releases the engine and the directory's lock: a store opened on the directory
    /// from now on finds it free. Every later use is refused.
    ///
    /// With `flush`, what the memtables hold is first written into the keyspaces'
    /// tables, so the next open replays little of the journal (an open after a crash
    /// replays it, at most the journaling bound, [`MAX_JOURNAL`]).
    fn close(&self, flush: bool) {
        let open = self
            .open
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if flush && let Some(open) = &open {
            for space in &open.spaces {
                if let Err(error) = space.rotate_memtable_and_wait() {
                    tracing::warn!(%error, "a keyspace's memtable was not flushed at close; the next open replays it");
                }
            }
        }
        drop(open);
    }

    /// Commits a group's batches as one fjall batch, not yet synced; the writer drops
    /// them.
    fn write(&self, group: &mut Vec<Batch>, _: u64) -> Result<(), WriteFailure> {
        self.with(|open| open.write(group))?;
        Ok(())
    }

    /// Syncs the journal: everything written is durable when it returns `Ok`.
    fn sync(&self) -> Result<bool, String> {
        self.with(Open::sync).map(|()| true)
    }

    /// The sync thread syncs the journal while the writer writes the next group
    /// (`super::journal`).
    fn pipelined(&self) -> bool {
        true
    }

    /// What fjall is doing in the background: memtables sealed and being flushed,
    /// compactions, journals not yet released, and level-0 tables piling up towards its
    /// write stall.
    fn activity(&self, system: bool) -> Vec<String> {
        self.with(|open| Ok::<_, String>(open.activity(system)))
            .unwrap_or_default()
    }

    /// One key's value, as written.
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        self.with(|open| open.get(space, key))
    }

    /// Up to `limit` of a space's entries from `from` on, as written, in key order.
    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        self.with(|open| open.range_from(space, from, within, limit))
    }

    /// A space's entries whose keys start with `prefix`, as written, in key order.
    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        self.with(|open| read_entries(open.spaces[space.index()].prefix(prefix)))
    }

    /// A space's keys, as written, in key order.
    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        self.with(|open| {
            open.spaces[space.index()]
                .iter()
                .map(|guard| {
                    guard
                        .key()
                        .map(|k| k.to_vec())
                        .map_err(|err| ReadFailure::of(&err))
                })
                .collect()
        })
    }

    /// A space's contents, as written, in key order.
    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        self.with(|open| open.scan(space))
    }
}

impl Open {
    /// Commits a group's batches as one fjall batch and flushes it to the operating
    /// system, not yet synced: one journal entry and one sequence number for the group,
    /// each key's last mutation only.
    fn write(&self, batches: &[Batch]) -> Result<(), String> {
        self.write_then(batches, || ())
    }

    /// [`Engine::activity`], from fjall's counters (some of them marked experimental
    /// by fjall: they serve a diagnosis, nothing depends on them).
    fn activity(&self, system: bool) -> Vec<String> {
        let mut doing = Vec::new();
        let flushes = self.db.outstanding_flushes();
        if flushes > 0 {
            doing.push(format!("flushing {flushes} memtables"));
        }
        let sealed: usize = self
            .spaces
            .iter()
            .map(Keyspace::sealed_memtable_count)
            .sum();
        if sealed > 0 {
            doing.push(format!("sealed {sealed} memtables"));
        }
        let compactions = self.db.active_compactions();
        if compactions > 0 {
            doing.push(format!("compacting {compactions}"));
        }
        let journals = self.db.journal_count();
        if journals > 1 {
            doing.push(format!("journals {journals} not yet released"));
        }
        let l0: usize = self.spaces.iter().map(Keyspace::l0_table_count).sum();
        if l0 >= 4 {
            doing.push(format!("level0 {l0} tables"));
        }
        // The system writing dirty pages back (a flushed table's, say) competes with
        // the journal's sync.
        if system
            && let Some(writeback) = writeback_kib()
            && writeback >= 1024
        {
            doing.push(format!("writeback {} MiB by the system", writeback / 1024));
        }
        doing
    }

    /// [`Open::write`], running `meanwhile` between the group's commit and the mark's
    /// note of it: where the engine's own flushes may fall (a test puts one there).
    fn write_then(&self, batches: &[Batch], meanwhile: impl FnOnce()) -> Result<(), String> {
        // The group's number lies between the visible numbers around its commit (the
        // writer is the engine's only writer; its flushes take numbers too): `super::mark`.
        let before = self.db.snapshot().seqno();
        write_group(&self.db, &self.spaces, batches)?;
        self.db
            .persist(PersistMode::Buffer)
            .map_err(|err| describe(&err))?;
        meanwhile();
        self.mark.written(before, self.db.snapshot().seqno());
        Ok(())
    }

    /// Syncs the journal: everything written before the call is durable when it returns
    /// `Ok`. The journal files are synced directly, holding none of the engine's locks;
    /// if none is found, the engine syncs its own.
    /// The mark of the last group written before the sync is written after it, before
    /// the sync's acks are called, so it never names a group that is not durable.
    fn sync(&self) -> Result<(), String> {
        let covered = self.mark.covered();
        match self.journals.sync() {
            Ok(true) => Ok(()),
            Ok(false) => self
                .db
                .persist(PersistMode::SyncData)
                .map_err(|err| describe(&err)),
            Err(err) => Err(err.to_string()),
        }?;
        self.mark.store(covered).map_err(|err| err.to_string())
    }

    /// One key's value, as written.
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        self.spaces[space.index()]
            .get(key)
            .map(|value| value.map(|v| v.to_vec()))
            .map_err(|err| ReadFailure::of(&err))
    }

    /// Up to `limit` of a space's entries from `from` on, as written, in key order.
    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        let from = from.max(within);
        let space = &self.spaces[space.index()];
        // Keys that start with `within` sort before its successor, the first key of the
        // same length that does not (none if `within` is empty or all 0xff: every later
        // key).
        match successor(within) {
            Some(end) => read_entries(space.range(from..end.as_slice()).take(limit)),
            None => read_entries(space.range(from..).take(limit)),
        }
    }

    /// A space's contents, as written, in key order.
    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        read_entries(self.spaces[space.index()].iter())
    }
}

/// Commits `batches` as one fjall batch, not yet synced: one journal entry and one
/// sequence number, each key's last mutation only.
fn write_group(db: &Database, spaces: &[Keyspace], batches: &[Batch]) -> Result<(), String> {
    let mut write = db.batch();
    for op in last_per_key(batches) {
        let space = &spaces[op.space().index()];
        match op {
            Op::Put { key, value, .. } => write.insert(space, key.as_slice(), value.as_slice()),
            Op::Delete { key, .. } => write.remove(space, key.as_slice()),
        }
    }
    write.commit().map_err(|err| describe(&err))
}

/// The least key of `prefix`'s length greater than every key that starts with it, or
/// `None` if there is none (the prefix is all 0xff).
pub(super) fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The keys and values an iteration over a keyspace yields, copied out.
fn entries(iter: impl Iterator<Item = fjall::Guard>) -> Result<Entries, String> {
    iter.map(|guard| {
        guard
            .into_inner()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .map_err(|err| describe(&err))
    })
    .collect()
}

/// [`entries`], its failure classified.
fn read_entries(iter: impl Iterator<Item = fjall::Guard>) -> Result<Entries, ReadFailure> {
    iter.map(|guard| {
        guard
            .into_inner()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .map_err(|err| ReadFailure::of(&err))
    })
    .collect()
}

/// Creates and locks the lock file of `dir`.
fn take_lock(dir: &Path) -> Result<File, OpenError> {
    let path = dir.join(LOCK_FILE);
    let lock_error = |source| OpenError::Lock {
        path: path.clone(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(lock_error)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(OpenError::Held {
            path: dir.to_path_buf(),
        }),
        Err(TryLockError::Error(source)) => Err(lock_error(source)),
    }
}

/// Reads the journals in `data` before the engine replays them and checks them against
/// the mark of the last acknowledged group: a torn last batch is left to the engine (which
/// drops it); damage before the end, or an acknowledged group missing, is refused, or cut
/// there under [`OnDamage::Truncate`].
pub(super) fn check_journals(
    dir: &Path,
    data: &Path,
    on_damage: OnDamage,
) -> Result<Recovered, OpenError> {
    let unreadable = |source| OpenError::Directory {
        path: data.to_path_buf(),
        source,
    };
    let scan = damage::scan(data).map_err(unreadable)?;
    let last_acknowledged = mark::read(dir).map_err(unreadable)?;
    let mut recovered = Recovered {
        journal_batches: scan.batches,
        ..Recovered::default()
    };
    // The last acknowledged group is lost if the last whole batch is older than it, or
    // (no whole batch in the journals, as after the older ones were flushed and deleted)
    // the batch at the cut is it or older.
    let acknowledged_lost = last_acknowledged.is_some_and(|acked| {
        acked.lost(scan.last_seqno, scan.cut.as_ref().and_then(|cut| cut.seqno))
    });
    let cut = match scan.cut {
        None if !acknowledged_lost => return Ok(recovered),
        Some(cut) if cut.torn && !acknowledged_lost => {
            tracing::info!(
                journal = %cut.path.display(),
                offset = cut.offset,
                bytes = cut.bytes_after,
                "the journal's last batch was torn by a crash before it was acknowledged; it is dropped"
            );
            recovered.torn_bytes = cut.bytes_after;
            return Ok(recovered);
        }
        // Damage after the last checkpointed group: a whole batch before the damage is
        // that group, and the batch at the damage reads as numbered after it (a number
        // damaged upwards could pass for the first alone). The change log holds every
        // group after it (`super::logged`): the journal is cut there, what followed
        // kept aside, and the log gives it back.
        Some(cut)
            if last_acknowledged.is_some_and(|acked| {
                scan.last_seqno.is_some_and(|last| last >= acked.least)
                    && cut.seqno.is_some_and(|at| at > acked.greatest)
            }) =>
        {
            let aside = cut_journal(dir, &cut).map_err(|source| OpenError::Directory {
                path: dir.to_path_buf(),
                source,
            })?;
            tracing::warn!(
                journal = %cut.path.display(),
                offset = cut.offset,
                reason = %cut.reason,
                kept_in = %aside.display(),
                "the engine's journal is damaged after the last checkpoint; it is cut there and the change log gives back what followed"
            );
            recovered.torn_bytes = cut.bytes_after;
            return Ok(recovered);
        }
        Some(cut) => cut,
        // Nothing follows the last whole batch, but the last acknowledged group is not
        // among them: the journal was cut short at a batch's end.
        None => {
            let (path, offset) = scan.end.clone().unwrap_or_else(|| (data.to_path_buf(), 0));
            Cut {
                path,
                offset,
                reason: match scan.last_seqno {
                    Some(last) => format!("the journal ends after batch {last}"),
                    None => "the journals hold no batch".to_owned(),
                },
                torn: false,
                seqno: None,
                batches_after: 0,
                bytes_after: 0,
                later: Vec::new(),
            }
        }
    };
    let refusal = OpenError::DamagedJournal {
        path: dir.to_path_buf(),
        journal: cut.path.clone(),
        offset: cut.offset,
        reason: cut.reason.as_str().into(),
        batches: cut.batches_after,
        bytes: cut.bytes_after,
        later: cut.later.len(),
        last_acknowledged: last_acknowledged.map(mark::Acked::range),
        acknowledged_lost,
    };
    if on_damage == OnDamage::Refuse {
        return Err(refusal);
    }
    let cutting = |source| OpenError::Directory {
        path: dir.to_path_buf(),
        source,
    };
    let aside = cut_journal(dir, &cut).map_err(cutting)?;
    // The mark must not name a group the cut dropped.
    if acknowledged_lost {
        mark::reset(dir, scan.last_seqno).map_err(cutting)?;
    }
    tracing::error!(
        journal = %cut.path.display(),
        offset = cut.offset,
        batches = cut.batches_after,
        bytes = cut.bytes_after,
        later = cut.later.len(),
        kept_in = %aside.display(),
        "{refusal}: cut there, as the operator asked; what was dropped is kept aside"
    );
    recovered.cuts = 1;
    recovered.dropped_batches = cut.batches_after;
    recovered.dropped_bytes = cut.bytes_after;
    Ok(recovered)
}

/// Cuts the journal at `cut`: its bytes from there are written to a file in
/// `<dir>/dropped/`, the journal is truncated there, and the later journals are moved
/// into that folder. The folder.
fn cut_journal(dir: &Path, cut: &Cut) -> std::io::Result<std::path::PathBuf> {
    let aside = dir.join(DROPPED_DIR);
    std::fs::create_dir_all(&aside)?;
    let name = |path: &Path| {
        path.file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let bytes = damage::load(&cut.path)?;
    let end = damage::data_end_of(&bytes);
    let from = usize::try_from(cut.offset).unwrap_or(usize::MAX);
    if let Some(tail) = bytes.get(from..end).filter(|tail| !tail.is_empty()) {
        let kept = free_name(&aside, &format!("{}.from-{}", name(&cut.path), cut.offset));
        let mut file = File::create_new(&kept)?;
        std::io::Write::write_all(&mut file, tail)?;
        file.sync_all()?;
    }
    let journal = OpenOptions::new().write(true).open(&cut.path)?;
    journal.set_len(cut.offset)?;
    journal.sync_all()?;
    for later in &cut.later {
        std::fs::rename(&later.path, free_name(&aside, &name(&later.path)))?;
    }
    sync_folder(&aside)?;
    if let Some(folder) = cut.path.parent() {
        sync_folder(folder)?;
    }
    Ok(aside)
}

/// `folder/base`, or `folder/base.2`, `.3`... if it is taken.
fn free_name(folder: &Path, base: &str) -> std::path::PathBuf {
    let mut path = folder.join(base);
    let mut n = 2;
    while path.exists() {
        path = folder.join(format!("{base}.{n}"));
        n += 1;
    }
    path
}

/// Syncs a folder, so the names in it are durable (where the system can sync a folder).
/// How many KiB of dirty pages the system is writing back now, where it says
/// (`/proc/meminfo` on Linux); `None` elsewhere.
fn writeback_kib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("Writeback:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn sync_folder(folder: &Path) -> std::io::Result<()> {
    match File::open(folder).and_then(|folder| folder.sync_all()) {
        // Some systems cannot sync a folder; the names are then as durable as they get.
        Err(err) if err.kind() == ErrorKind::PermissionDenied => Ok(()),
        other => other,
    }
}

/// Opens fjall in `data` and each space's keyspace; a refusal or a panic of the engine
/// while it recovers is a refusal naming `dir`.
fn open_engine(dir: &Path, data: &Path) -> Result<(Database, Vec<Keyspace>), OpenError> {
    let corrupt = |cause| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause,
    };
    let opened = catch_unwind(AssertUnwindSafe(|| {
        let db = Database::builder(data)
            .manual_journal_persist(true)
            .max_journaling_size(MAX_JOURNAL)
            .open()?;
        let spaces = Space::ALL
            .iter()
            .map(|space| db.keyspace(space.name(), KeyspaceCreateOptions::default))
            .collect::<fjall::Result<Vec<_>>>()?;
        Ok::<_, fjall::Error>((db, spaces))
    }));
    match opened {
        Ok(Ok(opened)) => Ok(opened),
        Ok(Err(err)) => Err(corrupt(describe(&err))),
        Err(panic) => Err(corrupt(format!(
            "the engine panicked while recovering: {}",
            panic_message(panic.as_ref())
        ))),
    }
}

/// Checks the format version, writing it into a store that holds nothing yet (a new one,
/// or one whose creation was interrupted before the version was synced); the version
/// found (or written).
fn check_version(dir: &Path, db: &Database, spaces: &[Keyspace]) -> Result<u32, OpenError> {
    let corrupt = |err: fjall::Error| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause: describe(&err),
    };
    let meta = &spaces[Space::Meta.index()];
    match meta.get(VERSION_KEY).map_err(corrupt)? {
        // An older version is opened and upgraded: the log here, the rest by the runtime.
        Some(found) => std::str::from_utf8(&found)
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .filter(|v| (UPGRADES_FROM..=FORMAT_VERSION).contains(v))
            .ok_or_else(|| OpenError::Version {
                path: dir.to_path_buf(),
                found: String::from_utf8_lossy(&found).into_owned(),
                expected: FORMAT_VERSION,
            }),
        None => {
            for space in spaces {
                if !space.is_empty().map_err(corrupt)? {
                    return Err(OpenError::Unversioned {
                        path: dir.to_path_buf(),
                    });
                }
            }
            meta.insert(VERSION_KEY, FORMAT_VERSION.to_string())
                .map_err(corrupt)?;
            db.persist(PersistMode::SyncAll).map_err(corrupt)?;
            Ok(FORMAT_VERSION)
        }
    }
}

/// The first format version that keeps the log in chunks (`super::log`).
const LOG_IN_CHUNKS: u32 = 3;

/// The first format version that keys what a subject owns by its slot first
/// (`super::layout`).
pub(super) const SLOT_FIRST: u32 = 4;

/// How many entries of an older log one chunk of the conversion holds.
const CONVERTED_PER_CHUNK: usize = 1024;

/// How many keys of an older space one write of the conversion carries.
const CONVERTED_PER_WRITE: usize = 4096;

/// Converts what a directory `found` at an older version keeps differently: the log
/// into chunks (before version 3), then every key of what a subject owns into its slot
/// first (before version 4), into the spaces of this version's names beside the old
/// ones. A directory found at version 2 or 3, which differs from this one only there,
/// is then marked as this version; a version 1 directory keeps its version for the
/// runtime's upgrade, which writes this one last. The old spaces are dropped once the
/// directory is at this version, at this open or a later one: until then a conversion
/// cut short is done again, whole, from them.
fn convert(dir: &Path, db: &Database, spaces: &[Keyspace], found: u32) -> Result<(), OpenError> {
    let corrupt = |cause: String| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause,
    };
    let commit = |batch: Batch| -> Result<(), String> {
        write_group(db, spaces, std::slice::from_ref(&batch))?;
        db.persist(PersistMode::SyncData)
            .map_err(|err| describe(&err))
    };
    if found < LOG_IN_CHUNKS {
        let events = &spaces[Space::Events.index()];
        let old = entries(events.iter())
            .map_err(&corrupt)?
            .into_iter()
            .filter_map(|(key, value)| Some((super::layout::sequence_of(&key)?, value)));
        super::log::convert(old, CONVERTED_PER_CHUNK, commit).map_err(&corrupt)?;
    }
    if found < SLOT_FIRST {
        slots_first(db, &commit).map_err(&corrupt)?;
    }
    let now = if (UPGRADES_FROM + 1..FORMAT_VERSION).contains(&found) {
        let meta = &spaces[Space::Meta.index()];
        meta.insert(VERSION_KEY, FORMAT_VERSION.to_string())
            .map_err(|err| corrupt(describe(&err)))?;
        db.persist(PersistMode::SyncAll)
            .map_err(|err| corrupt(describe(&err)))?;
        tracing::info!(path = %dir.display(), "the data directory was converted from format version {found} to {FORMAT_VERSION}");
        FORMAT_VERSION
    } else {
        found
    };
    if now == FORMAT_VERSION {
        drop_unslotted(db).map_err(&corrupt)?;
    }
    Ok(())
}

/// Copies every key of each space that took a new name in version 4 from the space of
/// its old name, its slot put first (`super::layout::slot_first`), `commit`ting a
/// write at a time. Copying again writes the same; a key that does not read as the old
/// version's is refused, naming the space and the key.
fn slots_first(db: &Database, commit: &dyn Fn(Batch) -> Result<(), String>) -> Result<(), String> {
    for space in Space::ALL {
        let Some(old_name) = space.unslotted_name() else {
            continue;
        };
        if !db.keyspace_exists(old_name) {
            continue;
        }
        let old = db
            .keyspace(old_name, KeyspaceCreateOptions::default)
            .map_err(|err| format!("space {old_name}: {}", describe(&err)))?;
        let mut batch = Batch::new();
        let mut count = 0;
        for guard in old.iter() {
            let (key, value) = guard
                .into_inner()
                .map_err(|err| format!("space {old_name}: {}", describe(&err)))?;
            let new = super::layout::slot_first(space, &key)
                .map_err(|why| {
                    format!(
                        "space {old_name}: key {}: {why}",
                        super::layout::plain_shown(&key)
                    )
                })?
                .ok_or_else(|| format!("space {old_name} has no slot-first keys"))?;
            batch.put(space, new, value.to_vec());
            count += 1;
            if count % CONVERTED_PER_WRITE == 0 {
                commit(std::mem::take(&mut batch))?;
            }
        }
        commit(batch)?;
    }
    Ok(())
}

/// Drops the spaces of the names version 4 replaced, once nothing needs them.
fn drop_unslotted(db: &Database) -> Result<(), String> {
    for old_name in Space::ALL.iter().filter_map(|space| space.unslotted_name()) {
        if db.keyspace_exists(old_name) {
            let old = db
                .keyspace(old_name, KeyspaceCreateOptions::default)
                .map_err(|err| describe(&err))?;
            db.delete_keyspace(old).map_err(|err| describe(&err))?;
        }
    }
    Ok(())
}

/// A fjall error as a reason a reader can act on.
pub(super) fn describe(err: &fjall::Error) -> String {
    match err {
        fjall::Error::Io(io) => io.to_string(),
        fjall::Error::JournalRecovery(cause) => format!("the journal is damaged ({cause:?})"),
        fjall::Error::InvalidVersion(found) => {
            format!("the engine's files are of another version ({found:?})")
        }
        fjall::Error::Poisoned => "the engine stopped after an earlier failure".to_owned(),
        fjall::Error::Locked => "the engine's own lock is held".to_owned(),
        other => format!("{other:?}"),
    }
}

impl ReadFailure {
    /// A fjall error, classified.
    pub(super) fn of(err: &fjall::Error) -> ReadFailure {
        use fjall::LsmError as Lsm;
        let damaged = match err {
            fjall::Error::Storage(Lsm::Io(io)) | fjall::Error::Io(io) => {
                // A table cut short, or bytes the system itself calls invalid.
                matches!(io.kind(), ErrorKind::UnexpectedEof | ErrorKind::InvalidData)
            }
            fjall::Error::Storage(_)
            | fjall::Error::Decompress(_)
            | fjall::Error::InvalidTrailer
            | fjall::Error::InvalidTag(_)
            | fjall::Error::Unrecoverable
            | fjall::Error::JournalRecovery(_) => true,
            _ => false,
        };
        ReadFailure {
            damaged,
            cause: describe_read(err),
        }
    }
}

/// A read's failure in words: damage is said as what was found, not as the engine's type.
fn describe_read(err: &fjall::Error) -> String {
    use fjall::LsmError as Lsm;
    match err {
        fjall::Error::Storage(Lsm::ChecksumMismatch { .. }) => {
            "a table block's checksum does not match its bytes".to_owned()
        }
        fjall::Error::Storage(Lsm::Decompress(_)) | fjall::Error::Decompress(_) => {
            "a table block does not decompress".to_owned()
        }
        fjall::Error::Storage(Lsm::InvalidTag((what, tag)))
        | fjall::Error::InvalidTag((what, tag)) => {
            format!("a table holds an unknown {what} tag ({tag})")
        }
        fjall::Error::Storage(Lsm::InvalidTrailer) | fjall::Error::InvalidTrailer => {
            "a table's trailer is damaged".to_owned()
        }
        fjall::Error::Storage(Lsm::InvalidHeader(what)) => {
            format!("a table's {what} header is damaged")
        }
        fjall::Error::Storage(Lsm::Utf8(e)) => format!("a table holds invalid text: {e}"),
        fjall::Error::Storage(Lsm::Unrecoverable) | fjall::Error::Unrecoverable => {
            "a table's files cannot be read back".to_owned()
        }
        fjall::Error::Storage(Lsm::InvalidVersion(v)) => {
            format!("a table is of an unknown format version ({v})")
        }
        fjall::Error::Storage(Lsm::Io(io)) => io.to_string(),
        other => describe(other),
    }
}

/// The text of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine keeps its journals where `super::journal` looks for them, so a sync
    /// syncs the journal files itself rather than fall back to the engine's own sync
    /// (an engine upgrade that moved them fails here).
    #[test]
    fn the_sync_finds_the_engine_s_journal_files() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let disk = Disk::open(&tmp.path().join("store")).expect("opens");
        let mut batch = Batch::new();
        batch.put(Space::Ids, "k", "v");
        disk.write(&mut vec![batch], 0).expect("writes");
        let found = disk.with(|open| open.journals.sync().map_err(|err| err.to_string()));
        assert_eq!(found, Ok(true), "no journal file found");
        disk.sync().expect("syncs");
        disk.close(true);
    }

    /// The engine's flushes number their table versions from the journal's counter
    /// without writing a journal entry. One that falls between a group's commit and the
    /// mark's note of it leaves the group the last batch of the journal, below the
    /// engine's visible number less one; the mark still names it, and the directory
    /// opens as a kill left it (where a mark of that one number refused it as lost).
    #[test]
    fn a_flush_while_a_group_commits_leaves_the_mark_on_the_group() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let dir = tmp.path().join("store");
        let disk = Disk::open(&dir).expect("opens");
        let group = |value: &str| {
            let mut batch = Batch::new();
            batch.put(Space::Ids, "k", value);
            batch.put(Space::Meta, "k", value);
            vec![batch]
        };
        disk.write(&mut group("first"), 0).expect("writes");
        disk.sync().expect("syncs");
        let (before, after) = disk
            .with(|open| {
                let before = open.db.snapshot().seqno();
                open.write_then(&group("second"), || {
                    // Only one keyspace flushed: the journal, holding the other's
                    // memtable too, is kept.
                    open.spaces[Space::Ids.index()]
                        .rotate_memtable_and_wait()
                        .expect("flushes");
                })?;
                Ok::<_, String>((before, open.db.snapshot().seqno()))
            })
            .expect("writes");
        assert!(
            after > before + 1,
            "the flush took no number: {before}..{after}"
        );
        disk.sync().expect("syncs");
        let acked = mark::read(&dir).expect("reads").expect("a mark");
        assert_eq!(acked.range(), before..=after - 1);
        // As a kill leaves it: the journals and the mark, the engine not closed cleanly.
        disk.close(false);
        let data = dir.join(DATA_DIR);
        let scan = damage::scan(&data).expect("scans");
        assert_eq!(
            scan.last_seqno,
            Some(before),
            "the group is the journal's last batch"
        );
        check_journals(&dir, &data, OnDamage::Refuse).expect("opens: nothing acknowledged is lost");
        // The mark of the visible number less one alone names the flush's number, after
        // the journal's end: what a mark of one number did, and refused.
        mark::reset(&dir, Some(after - 1)).expect("resets");
        let refused = check_journals(&dir, &data, OnDamage::Refuse).expect_err("refused");
        assert!(matches!(
            refused,
            OpenError::DamagedJournal {
                acknowledged_lost: true,
                ..
            }
        ));
    }
}
