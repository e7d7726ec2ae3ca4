//! A data directory opened to be read whole and changed in nothing: what `parkway check`
//! walks.
//!
//! The engine changes a directory as it opens it, even to read it: it deletes the
//! manifests and tables no longer in use, and cuts a torn journal tail off. So
//! [`Reader::open`] takes the directory's lock (a directory a server holds is refused,
//! and no server opens it meanwhile) and opens the engine on a *shadow* of it: a fresh
//! folder beside it (or in the system's temporary folder if none can be made there) in
//! which each table is a hard link to the directory's own (a table is never written
//! once made; it is copied where a link cannot be made) and every other file (journals,
//! manifests) a copy. The engine runs without its worker threads, so nothing is flushed
//! or compacted while it reads. The shadow is removed when the reader drops.
//!
//! It does not decode parkway's values: that is its caller's business.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fjall::{Database, Keyspace, KeyspaceCreateOptions};

use super::changelog::{self, LOG_DIR};
use super::disk::{DATA_DIR, LOCK_FILE, SLOT_FIRST, check_journals, describe};
use super::engine::ReadFailure;
use super::layout::APPLIED_KEY;
use super::{OnDamage, Op, OpenError, Space, StoreError, VERSION_KEY};

/// What a walk reads at each step: a key and its value, or a failure.
pub(crate) type Walked<'a> = Result<(&'a [u8], &'a [u8]), StoreError>;

/// A data directory open for reading only.
pub(crate) struct Reader {
    /// The damage found in the journals, as a runtime's open would refuse it.
    journal: Option<String>,
    /// Each space's keyspace with its name on disk, `None` where the directory has
    /// none; declared before `db` so they drop first.
    spaces: Vec<Option<(&'static str, Keyspace)>>,
    /// The engine, without worker threads.
    db: Database,
    /// The directory's locked lock file, released when the reader drops; `None` if the
    /// directory has none (a copy that left it out: no open store holds it then).
    _lock: Option<File>,
    /// The directory, as errors name it.
    name: Arc<str>,
    /// The shadow's `data/` and the directory's, to name a keyspace's folder.
    data: (PathBuf, PathBuf),
    /// The shadow, removed when the reader drops (after the engine).
    _shadow: Shadow,
}

impl Reader {
    /// Opens the store in `dir` to read it; refused, changing nothing, if the directory
    /// is missing, holds no store, is held by an open store, or the engine refuses it.
    pub(crate) fn open(dir: &Path) -> Result<Reader, OpenError> {
        let data = dir.join(DATA_DIR);
        match std::fs::metadata(dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(OpenError::Directory {
                    path: dir.to_path_buf(),
                    source: std::io::Error::new(ErrorKind::NotADirectory, "not a directory"),
                });
            }
            Err(source) => {
                return Err(OpenError::Directory {
                    path: dir.to_path_buf(),
                    source,
                });
            }
        }
        if !data.is_dir() {
            return Err(OpenError::NoStore {
                path: dir.to_path_buf(),
            });
        }
        let lock = lock_if_present(dir)?;
        // The journals are read as an open reads them: damage a runtime's open would
        // refuse is reported, and the shadow's journal is cut there so that what came
        // before it, and the tables, can still be read.
        let journal = match check_journals(dir, &data, OnDamage::Refuse) {
            Ok(_) => None,
            Err(damaged @ OpenError::DamagedJournal { .. }) => Some(damaged.to_string()),
            Err(other) => return Err(other),
        };
        let shadow = shadow_of(dir, &data).map_err(|source| OpenError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
        let shadow_data = shadow.path().join(DATA_DIR);
        if journal.is_some() {
            // The cut of the shadow is the reader's own business: no log line says an
            // operator asked for it.
            tracing::subscriber::with_default(
                tracing::subscriber::NoSubscriber::default(),
                || check_journals(shadow.path(), &shadow_data, OnDamage::Truncate),
            )?;
        }
        let (db, spaces) = open_engine(dir, &shadow_data)?;
        let log = replay_log(dir, &db, &spaces)?;
        // Damage to the log is what the open refuses too; with the journal's, both.
        let journal = match (journal, log) {
            (Some(journal), Some(log)) => Some(format!("{journal}; {log}")),
            (journal, log) => journal.or(log),
        };
        Ok(Reader {
            journal,
            spaces,
            db,
            _lock: lock,
            name: Arc::from(dir.display().to_string()),
            data: (shadow_data, data),
            _shadow: shadow,
        })
    }

    /// The damage found in the journals, as a runtime's open would refuse it: the
    /// journal, the offset and what would be lost; the walk reads what came before it.
    pub(crate) fn journal_damage(&self) -> Option<&str> {
        self.journal.as_deref()
    }

    /// The format version as written in [`Space::Meta`], as text; `None` if none is.
    pub(crate) fn version(&self) -> Result<Option<String>, StoreError> {
        Ok(self
            .get(Space::Meta, VERSION_KEY)?
            .map(|v| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Whether the directory has `space`'s keyspace.
    pub(crate) fn has(&self, space: Space) -> bool {
        self.spaces[space.index()].is_some()
    }

    /// The name on disk of the keyspace the reader reads for `space`: its name in this
    /// version, or in the directory's, before the slots.
    pub(crate) fn name(&self, space: Space) -> &'static str {
        self.spaces[space.index()]
            .as_ref()
            .map_or(space.name(), |(name, _)| name)
    }

    /// The folder of `space`'s keyspace in the directory, where its tables are.
    pub(crate) fn folder(&self, space: Space) -> Option<PathBuf> {
        let (shadow, data) = &self.data;
        let path = self.spaces[space.index()].as_ref()?.1.path();
        Some(match path.strip_prefix(shadow) {
            Ok(inside) => data.join(inside),
            Err(_) => path.to_path_buf(),
        })
    }

    /// One key's value, looked up as the runtime looks it up (through the table's filter
    /// and index).
    pub(crate) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let Some((_, keyspace)) = &self.spaces[space.index()] else {
            return Ok(None);
        };
        keyspace
            .get(key)
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|err| self.failed(space, Some(key), &err))
    }

    /// Walks `space` whole, in key order: `each` gets every key and value read, or a
    /// failure, and says whether to go on. A block that cannot be read is a failure, and
    /// the walk goes on past it (the engine's iterator steps over it).
    pub(crate) fn walk(&self, space: Space, each: &mut dyn FnMut(Walked<'_>) -> bool) {
        let Some((_, keyspace)) = &self.spaces[space.index()] else {
            return;
        };
        for guard in keyspace.iter() {
            let go_on = match guard.into_inner() {
                Ok((key, value)) => each(Ok((&key, &value))),
                Err(err) => each(Err(self.failed(space, None, &err))),
            };
            if !go_on {
                return;
            }
        }
    }

    /// A failed read of `space`: damage, or another failure.
    fn failed(&self, space: Space, key: Option<&[u8]>, err: &fjall::Error) -> StoreError {
        ReadFailure::of(err).into_error(&self.name, space, key)
    }
}

/// Writes the change log's groups after the last the engine holds into the shadow's
/// engine (never synced, never flushed: the shadow is thrown away), as an open replays
/// them, so the walk reads every acknowledged group. The log's damage, as an open would
/// refuse it; what comes before it is replayed.
fn replay_log(dir: &Path, db: &Database, spaces: &Spaces) -> Result<Option<String>, OpenError> {
    let corrupt = |cause: String| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause,
    };
    let found =
        changelog::recover(&dir.join(LOG_DIR), false).map_err(|source| OpenError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
    let applied = match &spaces[Space::Meta.index()] {
        Some((_, meta)) => match meta.get(APPLIED_KEY) {
            Ok(Some(bytes)) => <[u8; 8]>::try_from(&*bytes)
                .map(u64::from_be_bytes)
                .map_err(|_| {
                    corrupt("the number of the last group logged does not read as one".into())
                })?,
            Ok(None) => 0,
            Err(err) => return Err(corrupt(describe(&err))),
        },
        None => 0,
    };
    let chain = changelog::Chain::of(&found.read, applied);
    let mut damage: Vec<String> = found
        .short
        .iter()
        .map(|p| changelog::cut_short(p))
        .collect();
    if chain.acknowledged > chain.end {
        damage.push(chain.refusal(dir, &found.read).to_string());
    }
    let damage = (!damage.is_empty()).then(|| damage.join("; "));
    for record in &chain.records {
        let ops = changelog::decode(&record.payload)
            .map_err(|cause| corrupt(format!("group {} of the change log: {cause}", record.seq)))?;
        let mut write = db.batch();
        for op in &ops {
            let Some((_, keyspace)) = &spaces[op.space().index()] else {
                continue;
            };
            match op {
                Op::Put { key, value, .. } => {
                    write.insert(keyspace, key.as_slice(), value.as_slice())
                }
                Op::Delete { key, .. } => write.remove(keyspace, key.as_slice()),
            }
        }
        write.commit().map_err(|err| corrupt(describe(&err)))?;
    }
    Ok(damage)
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("store", &self.name)
            .field("seqno", &self.db.seqno())
            .finish_non_exhaustive()
    }
}

/// A shadow of `dir`'s `data` folder, in a fresh folder beside `dir` or, if none can be
/// made there, in the system's temporary folder: tables linked, other files copied.
fn shadow_of(dir: &Path, data: &Path) -> std::io::Result<Shadow> {
    let mirrored = |shadow: Shadow| -> std::io::Result<Shadow> {
        mirror(data, &shadow.path().join(DATA_DIR))?;
        Ok(shadow)
    };
    // Beside the directory first (its tables can be linked there); where that fails (no
    // room on a full disk, no right to write there), in the system's temporary folder.
    let beside = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .and_then(|parent| Shadow::make(parent, ".parkway-check").ok())
        .and_then(|shadow| mirrored(shadow).ok());
    match beside {
        Some(shadow) => Ok(shadow),
        None => mirrored(Shadow::make(&std::env::temp_dir(), "parkway-check")?),
    }
}

/// A folder made for the reader, removed with all it holds when dropped.
#[derive(Debug)]
struct Shadow(PathBuf);

impl Shadow {
    /// A new folder in `parent`, named `prefix`, the process id and a number.
    fn make(parent: &Path, prefix: &str) -> std::io::Result<Shadow> {
        let pid = std::process::id();
        let mut n = 0u32;
        loop {
            let path = parent.join(format!("{prefix}-{pid}-{n}"));
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(Shadow(path)),
                Err(err) if err.kind() == ErrorKind::AlreadyExists && n < 1000 => n += 1,
                Err(err) => return Err(err),
            }
        }
    }

    /// The folder.
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        if let Err(error) = std::fs::remove_dir_all(&self.0) {
            tracing::warn!(path = %self.0.display(), %error, "the check's shadow folder was not removed");
        }
    }
}

/// Mirrors the folder `from` into `to`: a file in a `tables` or `blobs` folder (never
/// written once made) as a hard link, or a copy where a link cannot be made; any other
/// file as a copy.
fn mirror(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    let immutable = matches!(
        from.file_name().and_then(|n| n.to_str()),
        Some("tables" | "blobs")
    );
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            mirror(&source, &target)?;
        } else if !(immutable && std::fs::hard_link(&source, &target).is_ok()) {
            std::fs::copy(&source, &target)?;
        }
    }
    Ok(())
}

/// Locks `dir`'s lock file if it has one, without creating it.
fn lock_if_present(dir: &Path) -> Result<Option<File>, OpenError> {
    let path = dir.join(LOCK_FILE);
    let file = match OpenOptions::new().read(true).open(&path) {
        Ok(file) => file,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(OpenError::Lock { path, source }),
    };
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Err(OpenError::Held {
            path: dir.to_path_buf(),
        }),
        Err(TryLockError::Error(source)) => Err(OpenError::Lock { path, source }),
    }
}

/// Opens fjall in `data` with no worker threads (nothing flushed or compacted behind the
/// reader's back) and each space's keyspace that exists; a refusal or a panic of the
/// engine is a refusal naming `dir`.
/// The keyspaces the reader reads.
type Spaces = Vec<Option<(&'static str, Keyspace)>>;

/// The name `space` has on disk in a directory of this version, or (`unslotted`) of a
/// version before the slots ([`Space::unslotted_name`]).
fn space_name(space: Space, unslotted: bool) -> &'static str {
    match space.unslotted_name() {
        Some(old) if unslotted => old,
        _ => space.name(),
    }
}

fn open_engine(dir: &Path, data: &Path) -> Result<(Database, Spaces), OpenError> {
    let corrupt = |cause| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause,
    };
    let opened = catch_unwind(AssertUnwindSafe(|| {
        // `worker_threads_unchecked(0)` is the engine's own way to open without its
        // flush and compaction workers (its tests use it); `worker_threads` refuses 0.
        let db = Database::builder(data)
            .manual_journal_persist(true)
            .worker_threads_unchecked(0)
            .open()?;
        // A directory of a version before the slots keeps its spaces under their old
        // names (its conversion, at a runtime's open, copies them): those are read.
        let unslotted = db.keyspace_exists(Space::Meta.name())
            && db
                .keyspace(Space::Meta.name(), KeyspaceCreateOptions::default)?
                .get(VERSION_KEY)?
                .and_then(|v| std::str::from_utf8(&v).ok()?.parse::<u32>().ok())
                .is_some_and(|version| version < SLOT_FIRST);
        let spaces = Space::ALL
            .iter()
            .map(|space| {
                let name = space_name(*space, unslotted);
                if db.keyspace_exists(name) {
                    db.keyspace(name, KeyspaceCreateOptions::default)
                        .map(|keyspace| Some((name, keyspace)))
                } else {
                    Ok(None)
                }
            })
            .collect::<fjall::Result<Vec<_>>>()?;
        Ok::<_, fjall::Error>((db, spaces))
    }));
    match opened {
        Ok(Ok(opened)) => Ok(opened),
        Ok(Err(err)) => Err(corrupt(ReadFailure::of(&err).cause)),
        Err(_) => Err(corrupt(
            "the engine panicked while opening the directory".to_owned(),
        )),
    }
}
