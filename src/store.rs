//! The durable store: keyspaces of bytes, batches applied atomically, and one writer that
//! makes many batches durable with one sync (group commit).
//!
//! - `layout`: [`Space`], the keyspaces, and the bytes of every key in them: the one
//!   description of the key layout, which every caller builds and parses keys with.
//! - `batch`: [`Batch`], puts and deletes across spaces.
//! - `engine`: the `Engine` trait, the seam between the writer and what keeps the bytes.
//! - `writer`: the queue and the group commit, the same for every engine.
//! - `faulty`: the faults a test injects, as an engine wrapping another.
//! - `memory`: the engine of tests and simulations. It keeps what is durable apart from
//!   what is pending, so [`Store::crash`] can drop the pending.
//! - `disk`: the fjall engine behind [`Store::open`], with the lock file and the format
//!   version.
//! - `reader`: a directory opened to be read whole and changed in nothing (`parkway
//!   check`).
//! - `journal`: the engine's journal files, which the disk store's sync thread syncs
//!   itself, beside the engine's lock, while the writer writes the next group.
//! - `damage`: reads the journals before the engine replays them, and tells a torn last
//!   batch from damage before it; `mark`: the mark of the last acknowledged group, which
//!   tells a torn batch from an acknowledged one damaged.
//!
//! - `postgres`: the PostgreSQL engine behind [`Store::open_postgres`] (feature
//!   `postgres`): one table, a group commit in one statement.
//!
//! The five before `postgres` are the `disk` feature's. Without it, `disk` is `no_disk.rs`: an engine
//! that has no value and whose open refuses every directory, naming the feature, so the
//! writer and the rest of the crate compile the same either way.
//!
//! A caller submits a [`Batch`] with an [`Ack`] and goes on; the ack is called once,
//! from the writer (on disk, its sync thread), when the batch is durable or when it
//! never will be. Acks are called in submission order. A failed sync poisons the store:
//! that group's acks and every later one get an error, and nothing is acknowledged after
//! it.
//!
//! This module is a leaf: it knows keys and bytes, not subjects, runs or doors. What a
//! subject's change becomes in bytes is its caller's business.

mod batch;
#[cfg(feature = "disk")]
mod changelog;
pub(crate) mod cluster;
#[cfg(feature = "disk")]
mod damage;
#[cfg(feature = "disk")]
mod disk;
#[cfg(not(feature = "disk"))]
#[path = "store/no_disk.rs"]
mod disk;
mod engine;
mod faulty;
#[cfg(feature = "disk")]
mod journal;
pub(crate) mod layout;
mod log;
#[cfg(feature = "disk")]
mod logged;
#[cfg(feature = "disk")]
mod mark;
mod memory;
#[cfg(feature = "disk")]
mod overlay;
pub(crate) mod owners;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "disk")]
mod reader;
mod writer;

#[cfg(all(test, feature = "disk"))]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

pub(crate) use batch::{Batch, Op};
pub(crate) use layout::{Space, VERSION_KEY};
#[cfg(feature = "disk")]
pub(crate) use reader::Reader;

#[cfg(not(feature = "disk"))]
use disk::Disk as Logged;
use engine::Engine;
#[cfg(feature = "disk")]
use logged::Logged;
use memory::Memory;
use writer::Shared;

/// The format version of a data directory this build writes. It reads this one and the
/// older ones from [`UPGRADES_FROM`] on; any other is refused at open.
pub(crate) const FORMAT_VERSION: u32 = 5;

/// The oldest format version this build opens. Versions 1 and 2 kept a key per log
/// entry: the store converts their log into chunks as it opens them (`log`). Versions 1
/// to 3 keyed what a subject owns without its slot: the store puts the slot first as it
/// opens them (`layout`). Version 1 also had no [`Space::Heads`], [`Space::Wakes`] or
/// [`Space::Runs`]: the store's caller upgrades the rest of it. Version 5 added the
/// change log (`changelog`), which an older build would not replay: a version 4
/// directory needs nothing converted but its version.
pub(crate) const UPGRADES_FROM: u32 = 1;

/// Called once with a submitted batch's fate: its receipt when it is durable, the error
/// when it never will be. It runs on the writer's thread, so it must not block: send a
/// message, complete a oneshot.
pub(crate) type Ack = Box<dyn FnOnce(Result<Receipt, StoreError>) + Send>;

/// What a durable batch was given when it was committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Receipt {
    /// The sequence number of its first log entry (the next ones follow it); if it
    /// appended none, the number the next entry would have had (0 where the engine
    /// numbers a log other processes write too).
    pub(crate) log: u64,
    /// When the acknowledgement was given, on the store's thread.
    pub(crate) at: std::time::Instant,
}

/// Called on the first batch of each group as it is committed, after every batch of the
/// group was made: what it adds is at least as new as anything they hold, and is written
/// before any of them.
pub(crate) type Stamp = Box<dyn Fn(&mut Batch) + Send + Sync>;

/// How many entries the log keeps by default: appending one more deletes the oldest.
pub(crate) const LOG_CAPACITY: u64 = 100_000;

/// A space's keys and values, in key order, as a scan reads them.
pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The durable store: a cheap handle (clones share one store) over the memory or the
/// disk engine and its writer.
///
/// Dropping the last handle lets the writer finish what is queued (those batches are
/// synced and acknowledged), stops it, and, for the disk engine, releases the directory.
#[derive(Clone)]
pub(crate) struct Store {
    /// The shared store and the writer thread, stopped when the last handle drops.
    handle: Arc<Handle>,
}

/// What the store's handles share; its drop stops the writer.
struct Handle {
    /// The queue, the engine, the poison, the figures.
    shared: Arc<Shared>,
    /// The writer thread, if syncing is automatic; taken when the store is closed.
    thread: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// What the open found in the journals and did about them.
    recovered: Recovered,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.close();
        let thread = self
            .thread
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // The last handle may be dropped by an ack, on the writer itself (or its
            // sync thread): it then finishes the queue and stops on its own.
            if !self.shared.runs_here(&thread) {
                // A writer that panicked has already lost its acks; there is nothing to add.
                let _ = thread.join();
            }
        }
    }
}

/// When a memory store's batches become durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Syncing {
    /// A writer thread syncs whatever is queued as soon as it is queued, as on disk.
    #[default]
    Automatic,
    /// Batches stay pending until [`Store::sync_now`], so a test decides exactly which
    /// are durable when it crashes.
    Manual,
    /// Each batch is durable as it is submitted, on the submitter's thread: the order
    /// of batches is the order of submissions, so a simulation on one thread crashes
    /// at the same batch every time it replays a seed.
    Inline,
}

/// Failures a test injects, by a wrapper engine (`faulty`) the writer knows nothing of.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Faults {
    /// Make the sync after this many successful ones fail (`Some(0)`: the first), and
    /// every one after it.
    pub(crate) fail_sync_after: Option<u64>,
    /// Only that one sync fails: the engine would sync again after it (the store must
    /// not acknowledge anything it did).
    pub(crate) only_once: bool,
    /// Refuse every group with a batch of one of these slots, as an engine does for a
    /// slot this process does not own (the set can change while the store is open).
    pub(crate) not_owner: Option<NotOwned>,
}

/// The slots a faulty engine refuses to write, shared with the test that sets them.
#[derive(Debug, Clone, Default)]
pub(crate) struct NotOwned(Arc<std::sync::Mutex<std::collections::BTreeSet<crate::slot::Slot>>>);

impl NotOwned {
    /// From now on `slot` is refused (`true`) or written (`false`).
    pub(crate) fn set(&self, slot: crate::slot::Slot, refused: bool) {
        let mut slots = crate::sync::lock(&self.0);
        if refused {
            slots.insert(slot);
        } else {
            slots.remove(&slot);
        }
    }

    /// The slots refused among those `group`'s batches name.
    fn among(&self, group: &[Batch]) -> Vec<crate::slot::Slot> {
        let slots = crate::sync::lock(&self.0);
        let mut refused: Vec<_> = group
            .iter()
            .filter_map(Batch::slot)
            .filter(|slot| slots.contains(slot))
            .collect();
        refused.sort_unstable();
        refused.dedup();
        refused
    }
}

/// The same set of slots.
impl PartialEq for NotOwned {
    fn eq(&self, other: &NotOwned) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for NotOwned {}

/// The store's figures since it was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Stats {
    /// Successful syncs: groups made durable.
    pub(crate) syncs: u64,
    /// Batches made durable and acknowledged.
    pub(crate) batches: u64,
    /// Bytes of keys and values in those batches.
    pub(crate) bytes: u64,
    /// Mutations (puts and deletes) in those batches, the log's chunks among them.
    pub(crate) keys: u64,
    /// The most batches one sync made durable.
    pub(crate) largest_group: u64,
    /// For each sync, microseconds from the start of the write of the first group it
    /// covered to its acks, summed (`StoreStats::commit_time`).
    pub(crate) commit_micros: u64,
}

impl Stats {
    /// Batches per sync: how much group commit saved.
    pub(crate) fn mean_group(&self) -> f64 {
        if self.syncs == 0 {
            0.0
        } else {
            self.batches as f64 / self.syncs as f64
        }
    }
}

/// What a disk store's open does with a damaged journal (`docs/durability.md`, "Damaged
/// journals").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum OnDamage {
    /// Refuse to open, naming the journal, the offset and what would be dropped.
    #[default]
    Refuse,
    /// Cut the journal at the damage, keep what is dropped aside, and open (logged, and
    /// counted in [`Recovered`]). The operator's choice, after reading a refusal.
    Truncate,
}

/// What a disk store's open found in its journals and what it did about them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Recovered {
    /// Whole batches the journals held for the engine to replay (those already in its
    /// tables among them).
    pub(crate) journal_batches: u64,
    /// Bytes of a torn last batch, never acknowledged, that the engine dropped.
    pub(crate) torn_bytes: u64,
    /// Damaged journals cut at open under [`OnDamage::Truncate`] (0 or 1).
    pub(crate) cuts: u64,
    /// Whole batches found after those cuts, and dropped with them.
    pub(crate) dropped_batches: u64,
    /// Bytes dropped by those cuts (kept aside in `<dir>/dropped/`).
    pub(crate) dropped_bytes: u64,
    /// Groups the change log held after the last the engine held, written into it again.
    pub(crate) log_groups: u64,
}

/// A failure of a store that is open: a write, a sync or a read.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum StoreError {
    /// Writing a group failed; the store is poisoned.
    #[error("store {store}: writing a batch failed: {cause}")]
    Write {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// What the engine said.
        cause: String,
    },
    /// The sync of a group failed; the store is poisoned.
    #[error("store {store}: sync failed: {cause}")]
    Sync {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// What the engine said.
        cause: String,
    },
    /// An earlier failure poisoned the store; nothing is written or acknowledged after it.
    #[error("store {store} is stopped by an earlier failure: {first}")]
    Poisoned {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// The failure that poisoned it.
        first: Arc<StoreError>,
    },
    /// A read failed, and not for damage: the disk or the system refused it.
    #[error("store {store}: reading {space} failed: {cause}")]
    Read {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// The space read, by its name on disk.
        space: &'static str,
        /// What the engine said.
        cause: String,
    },
    /// A read met damaged data: a table block whose checksum does not match, or bytes
    /// the engine cannot decode. The store goes on; what it read there is lost to it.
    #[error("store {store}: keyspace {space} is damaged{}: {detail}", at_key(key.as_deref()))]
    Corrupt {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// The space read, by its name on disk.
        space: &'static str,
        /// The key read (a key, or where a range began), if the read named one.
        key: Option<Vec<u8>>,
        /// What was found, in words.
        detail: String,
    },
    /// The batch was not written: it is a change of a slot this process does not own.
    /// The store goes on with the other slots.
    #[error("store {store}: this process does not own slot {slot}; the change was not written")]
    NotOwner {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// The slot's number.
        slot: u16,
    },
    /// The batch was not written: it changes a subject's state read or made under an
    /// epoch of its slot that has passed (the slot was refused or taken back since), so
    /// it may build on a change that was never written.
    #[error(
        "store {store}: the change was made under epoch {epoch} of slot {slot}, which has passed; it was not written"
    )]
    Stale {
        /// The directory, or `memory`.
        store: Arc<str>,
        /// The slot's number.
        slot: u16,
        /// The epoch the change was made under.
        epoch: u32,
    },
}

/// The entries of a chunk of the log, from its key and value, or what is wrong with it.
pub(crate) fn chunk_entries(key: &[u8], value: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let (_, count) = layout::chunk_of(key).ok_or("the key is not a chunk's")?;
    log::decode(value, count)
}

/// ` at key "…"` for a key read, as text (bytes that are not UTF-8 shown escaped).
pub(crate) fn at_key(key: Option<&[u8]>) -> String {
    match key {
        Some(key) => format!(" at key {}", key_text(key)),
        None => String::new(),
    }
}

/// A key as quoted text: UTF-8 as is, escaped where needed, any other byte as `\xNN`.
pub(crate) fn key_text(key: &[u8]) -> String {
    let mut text = String::from("\"");
    for chunk in key.utf8_chunks() {
        text.extend(chunk.valid().escape_debug());
        for byte in chunk.invalid() {
            text.push_str(&format!("\\x{byte:02x}"));
        }
    }
    text.push('"');
    text
}

/// Why [`Store::open`] refused a directory. Nothing is left open, and nothing in the
/// directory was overwritten.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum OpenError {
    /// The directory could not be created or read (a missing parent, no permission).
    #[error("cannot use store directory {path}: {source}")]
    Directory {
        /// The data directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The directory holds files and is not a parkway store.
    #[error("store directory {path} is not empty and holds no parkway store")]
    Foreign {
        /// The data directory.
        path: PathBuf,
    },
    /// Another open store, in this process or another, holds the directory's lock.
    #[error("store directory {path} is held by another process")]
    Held {
        /// The data directory.
        path: PathBuf,
    },
    /// The lock file could not be created or locked.
    #[error("cannot lock store directory {path}: {source}")]
    Lock {
        /// The lock file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The directory was written by another format version.
    #[error(
        "store directory {path} has format version {found}, this build reads version {expected} \
         (and upgrades the older ones from version {older})",
        older = UPGRADES_FROM
    )]
    Version {
        /// The data directory.
        path: PathBuf,
        /// The version found, as written.
        found: String,
        /// The version this build reads.
        expected: u32,
    },
    /// The directory holds data but no format version.
    #[error("store directory {path} holds data but no format version")]
    Unversioned {
        /// The data directory.
        path: PathBuf,
    },
    /// The engine refused the data: corrupt, truncated, or not its own.
    #[error("store directory {path} cannot be recovered: {cause}")]
    Corrupt {
        /// The data directory.
        path: PathBuf,
        /// What the engine said.
        cause: String,
    },
    /// A journal is damaged before its end: opening would drop what follows the damage
    /// (the engine takes the first batch it cannot read for a torn tail), or the last
    /// acknowledged group is missing from it.
    #[cfg(feature = "disk")]
    #[error(
        "store directory {path}: the journal {journal} is damaged at byte {offset}: {reason}; {}",
        damage::dropped(*.batches, *.bytes, *.later, .last_acknowledged.as_ref(), *.acknowledged_lost)
    )]
    DamagedJournal {
        /// The data directory.
        path: PathBuf,
        /// The journal file.
        journal: PathBuf,
        /// Where, in that file, the last whole batch before the damage ends.
        offset: u64,
        /// What is wrong there.
        reason: Box<str>,
        /// Whole batches found after the damage.
        batches: u64,
        /// Bytes from the damage to the end of what was written, in that file and the
        /// later journals.
        bytes: u64,
        /// Later journal files, dropped whole by a cut.
        later: usize,
        /// The sequence numbers the last acknowledged group can have, as the directory's
        /// mark of it says, if it has one: one number, or a few when the engine's own
        /// flush took one while the group was committed.
        last_acknowledged: Option<std::ops::RangeInclusive<u64>>,
        /// Whether that group is at or after the damage.
        acknowledged_lost: bool,
    },
    /// The change log misses a group that a later record, or a segment's header, says
    /// was acknowledged: opening would lose it, and every group after it.
    #[cfg(feature = "disk")]
    #[error(
        "store directory {path}: the change log is damaged: group {missing} is missing (it would follow byte {offset} of {segment}), but groups up to {acknowledged} were acknowledged; opening would drop it and {after} later group(s) found"
    )]
    DamagedLog {
        /// The data directory.
        path: PathBuf,
        /// The segment where the missing group should be.
        segment: PathBuf,
        /// Where in it.
        offset: u64,
        /// The first group missing.
        missing: u64,
        /// The last group known acknowledged.
        acknowledged: u64,
        /// Groups found after the missing one.
        after: u64,
    },
    /// The writer thread could not be started.
    #[error("cannot start the writer of store directory {path}: {source}")]
    Thread {
        /// The data directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A directory opened only to be read holds no store (no `data/` folder).
    #[error("store directory {path} holds no parkway store")]
    NoStore {
        /// The data directory.
        path: PathBuf,
    },
    /// The database could not be used: unreachable, refused, or holding another format.
    #[error("database {database}: {cause}")]
    Database {
        /// The database, as its URL without the password.
        database: String,
        /// What was wrong, in words.
        cause: String,
    },
    /// This build has no PostgreSQL engine: it was built without the `postgres` feature.
    #[cfg(not(feature = "postgres"))]
    #[error(
        "this build of parkway has no PostgreSQL store: enable the `postgres` feature to use a database"
    )]
    NoPostgres,
    /// This build has no disk engine: it was built without the `disk` feature.
    #[cfg(not(feature = "disk"))]
    #[error(
        "store directory {path}: this build of parkway has no disk store: enable the `disk` \
         feature to use a data directory"
    )]
    NoDisk {
        /// The data directory.
        path: PathBuf,
    },
}

impl Store {
    /// A memory store whose writer thread syncs as soon as batches are queued.
    pub(crate) fn memory() -> Store {
        Store::memory_with(Syncing::Automatic, Faults::default())
    }

    /// A memory store that syncs when it is told, and fails as `faults` say.
    pub(crate) fn memory_with(syncing: Syncing, faults: Faults) -> Store {
        let mut shared = Shared::new(
            Arc::from("memory"),
            with_faults(Arc::new(Memory::new()), faults),
        );
        if syncing == Syncing::Inline {
            shared = shared.inline();
        }
        let shared = Arc::new(shared);
        let thread = match syncing {
            Syncing::Manual | Syncing::Inline => None,
            // A memory store has no directory to name; a thread that cannot start is a
            // process out of resources, and the memory engine is for tests.
            Syncing::Automatic => Some(
                writer::spawn(&shared)
                    .unwrap_or_else(|err| panic!("cannot start the memory store's writer: {err}")),
            ),
        };
        Store {
            handle: Arc::new(Handle {
                shared,
                thread: std::sync::Mutex::new(thread),
                recovered: Recovered::default(),
            }),
        }
    }

    /// A store over `node`, a process's hold on a [`cluster::Cluster`] (the random
    /// simulation's nodes), committing each batch on its submitter's thread.
    pub(crate) fn on_cluster(node: Arc<cluster::Node>) -> Result<Store, StoreError> {
        let name = Arc::from(format!("node {}", node.name()));
        let shared = Arc::new(Shared::new(name, node).inline());
        shared.find_log_end()?;
        Ok(Store {
            handle: Arc::new(Handle {
                shared,
                thread: std::sync::Mutex::new(None),
                recovered: Recovered::default(),
            }),
        })
    }

    /// Opens the store in `dir`, creating the directory (not its parent) if it is
    /// missing; see [`OpenError`] for what is refused.
    pub(crate) fn open(dir: &Path) -> Result<Store, OpenError> {
        Store::open_with(dir, Faults::default())
    }

    /// [`Store::open`], failing as `faults` say.
    pub(crate) fn open_with(dir: &Path, faults: Faults) -> Result<Store, OpenError> {
        Store::open_as(dir, OnDamage::Refuse, faults)
    }

    /// [`Store::open`], doing with a damaged journal what `on_damage` says.
    pub(crate) fn open_as(
        dir: &Path,
        on_damage: OnDamage,
        faults: Faults,
    ) -> Result<Store, OpenError> {
        let (disk, recovered) = Logged::open(dir, on_damage)?;
        let shared = Arc::new(Shared::new(
            Arc::from(dir.display().to_string()),
            with_faults(Arc::new(disk), faults),
        ));
        shared.find_log_end().map_err(|err| OpenError::Corrupt {
            path: dir.to_path_buf(),
            cause: err.to_string(),
        })?;
        let thread = writer::spawn(&shared).map_err(|source| OpenError::Thread {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(Store {
            handle: Arc::new(Handle {
                shared,
                thread: std::sync::Mutex::new(Some(thread)),
                recovered,
            }),
        })
    }

    /// Opens the store kept in the PostgreSQL database at `url` (creating its tables in
    /// the connection's schema if they are missing); see [`OpenError`] for what is
    /// refused.
    #[cfg(feature = "postgres")]
    pub(crate) fn open_postgres(url: &str) -> Result<Store, OpenError> {
        Store::open_postgres_as(url, &owners::Leasing::default())
    }

    /// [`Store::open_postgres`] as the node `leasing` names, holding its slots under
    /// leases of its length.
    #[cfg(feature = "postgres")]
    pub(crate) fn open_postgres_as(
        url: &str,
        leasing: &owners::Leasing,
    ) -> Result<Store, OpenError> {
        let database = postgres::shown(url);
        let engine = postgres::Postgres::open(url, leasing)?;
        let shared = Arc::new(Shared::new(Arc::from(database.as_str()), Arc::new(engine)));
        let refused = |cause: String| OpenError::Database {
            database: database.clone(),
            cause,
        };
        shared
            .find_log_end()
            .map_err(|err| refused(err.to_string()))?;
        let thread = writer::spawn(&shared)
            .map_err(|err| refused(format!("cannot start its writer: {err}")))?;
        Ok(Store {
            handle: Arc::new(Handle {
                shared,
                thread: std::sync::Mutex::new(Some(thread)),
                recovered: Recovered::default(),
            }),
        })
    }

    /// Refuses: this build has no PostgreSQL engine.
    #[cfg(not(feature = "postgres"))]
    pub(crate) fn open_postgres(_url: &str) -> Result<Store, OpenError> {
        Err(OpenError::NoPostgres)
    }

    /// Refuses: this build has no PostgreSQL engine.
    #[cfg(not(feature = "postgres"))]
    pub(crate) fn open_postgres_as(
        _url: &str,
        _leasing: &owners::Leasing,
    ) -> Result<Store, OpenError> {
        Err(OpenError::NoPostgres)
    }

    /// What the open found in the journals and did about them (all zero in memory).
    pub(crate) fn recovered(&self) -> Recovered {
        self.handle.recovered
    }

    /// Queues `batch`; `on_durable` is called once, from the writer (on disk, its sync
    /// thread), when it is durable or failed. Never blocks on the disk.
    pub(crate) fn submit(&self, batch: Batch, on_durable: Ack) {
        self.handle.shared.submit(batch, on_durable);
    }

    /// The current epoch of `slot` in this store: a subject's state read or made now
    /// writes its changes under it ([`Batch::fenced`]).
    pub(crate) fn epoch(&self, slot: crate::slot::Slot) -> u32 {
        self.handle.shared.epoch(slot)
    }

    /// Moves `slot`'s epoch on, as the slot is taken back, once every group taken
    /// before is written: a change of the earlier epoch is refused from now on, and a
    /// read from now on sees every change of it that was written. Blocks while a group
    /// is being written.
    pub(crate) fn next_epoch(&self, slot: crate::slot::Slot) -> u32 {
        self.handle.shared.next_epoch(slot)
    }

    /// How many batches are submitted and not yet taken by the writer (or a sync).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.handle.shared.queued()
    }

    /// Makes everything queued durable in one sync now, on this thread, and returns how
    /// many batches that acknowledged. This is how a [`Syncing::Manual`] store syncs; on
    /// an automatic one it syncs what the writer has not taken yet.
    pub(crate) fn sync_now(&self) -> usize {
        self.handle.shared.sync_now()
    }

    /// The value of `key` in `space`, as durable (for disk: as written).
    pub(crate) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.handle.shared.get(space, key)
    }

    /// Up to `limit` entries of `space` from `from` on whose keys start with `within`
    /// (empty: any key), in key order, as durable (for disk: as written).
    pub(crate) fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, StoreError> {
        self.handle.shared.range_from(space, from, within, limit)
    }

    /// Every entry of `space` whose key starts with `prefix`, in key order, as durable
    /// (for disk: as written).
    pub(crate) fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, StoreError> {
        self.handle.shared.prefixed(space, prefix)
    }

    /// The format version of the data as read: [`FORMAT_VERSION`] unless the directory
    /// was opened at [`UPGRADES_FROM`] and not yet upgraded (a version 2 directory is
    /// upgraded as it opens; a memory store is always current).
    pub(crate) fn format_version(&self) -> Result<u32, StoreError> {
        Ok(self
            .get(Space::Meta, VERSION_KEY)?
            .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
            .unwrap_or(FORMAT_VERSION))
    }

    /// Every key and value of `space`, in key order, as durable (for disk: as written).
    pub(crate) fn scan(&self, space: Space) -> Result<Entries, StoreError> {
        self.handle.shared.scan(space)
    }

    /// Models a crash of a memory store: every batch not yet durable is dropped and its
    /// ack with it, uncalled, as a process that dies tells no one; the poison, which is
    /// the process's, is cleared. Reads then see only what was durable. A disk store is
    /// crashed by ending the process; here it is left as it is.
    pub(crate) fn crash(&self) {
        self.handle.shared.crash();
    }

    /// Models a crash of a memory store and the start of the next process on it: this
    /// handle loses every batch not yet durable (their acks uncalled) and keeps nothing
    /// more, ever (the crashed runtime can make nothing more durable); the store returned
    /// reads what was durable and takes new batches, syncing as this one did. A disk
    /// store is crashed by ending the process: for it this is `None`.
    pub(crate) fn crash_and_reopen(&self) -> Option<Store> {
        let old = &self.handle.shared;
        let engine = old.reopened()?;
        if !old.has_crashed() {
            old.crash_now();
        }
        let mut shared = Shared::new(Arc::from("memory"), engine);
        if old.is_inline() {
            shared = shared.inline();
        }
        let shared = Arc::new(shared);
        // A memory engine's read cannot fail.
        shared.find_log_end().ok()?;
        // As for `memory_with`: the memory engine is for tests.
        let thread = self.has_writer().then(|| {
            writer::spawn(&shared)
                .unwrap_or_else(|err| panic!("cannot start the memory store's writer: {err}"))
        });
        Some(Store {
            handle: Arc::new(Handle {
                shared,
                thread: std::sync::Mutex::new(thread),
                recovered: Recovered::default(),
            }),
        })
    }

    /// Crash (see [`Store::crash_and_reopen`]) once `batches` more are durable: the next
    /// batch after them and every later one are lost.
    pub(crate) fn crash_after(&self, batches: u64) {
        self.handle.shared.crash_after(batches);
    }

    /// Wait until a crash set by [`Store::crash_after`] came.
    pub(crate) async fn crashed(&self) {
        self.handle.shared.crashed().await;
    }

    /// Sets how many entries the log keeps (at least one): appending one past it deletes
    /// the oldest.
    pub(crate) fn set_log_capacity(&self, entries: u64) {
        self.handle.shared.set_log_capacity(entries);
    }

    /// Sets the stamp called on the first batch of each group as it is committed.
    pub(crate) fn set_stamp(&self, stamp: Stamp) {
        self.handle.shared.set_stamp(stamp);
    }

    /// Measure the stages of every batch from now on into `stages`.
    pub(crate) fn set_stages(&self, stages: Arc<dyn crate::StageSink>) {
        self.handle.shared.set_stages(stages);
    }

    /// The log's entries from sequence number `from` on, at most `limit`, in order, as
    /// durable.
    pub(crate) fn log_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        self.handle.shared.log_from(from, limit)
    }

    /// Whether the engine numbers the log as it commits: a log every node sharing the
    /// database writes, whose entries a node reads back to show them
    /// (`crate::event::tail`).
    pub(crate) fn shares_log(&self) -> bool {
        self.handle.shared.shares_log()
    }

    /// The number of the log's last entry durable and kept, 0 if it has none.
    pub(crate) fn log_last(&self) -> Result<u64, StoreError> {
        self.handle.shared.log_last()
    }

    /// Whether a writer thread commits (rather than `sync_now` or each submitter).
    pub(crate) fn has_writer(&self) -> bool {
        crate::sync::lock(&self.handle.thread).is_some()
    }

    /// Closes the store: the writer commits what is queued and stops, and a disk store
    /// releases its engine and the directory's lock, so a store opened on the directory
    /// from now on finds it free. Whatever is submitted later is refused. Blocks until
    /// the writer has stopped.
    pub(crate) fn close(&self) {
        self.handle.shared.close();
        let thread = crate::sync::lock(&self.handle.thread).take();
        if let Some(thread) = thread
            && !self.handle.shared.runs_here(&thread)
        {
            // A writer that panicked has already lost its acks; there is nothing to add.
            let _ = thread.join();
        }
        self.handle.shared.release();
    }

    /// The slots this process owns as the store opened and the changes since, once;
    /// `None` for a store that owns every slot while open (every engine but a database
    /// shared by nodes).
    pub(crate) fn owners(&self) -> Option<owners::Owners> {
        self.handle.shared.engine().owners()
    }

    /// Whether `slot` may be served here now ([`engine::Engine::serves`]); one found
    /// past its time to be served is given up.
    pub(crate) fn serves(&self, slot: crate::slot::Slot) -> bool {
        self.handle.shared.engine().serves(slot)
    }

    /// Gives `slot` back, unloaded after [`owners::Change::Drain`], so another node may
    /// take it.
    pub(crate) fn release(&self, slot: crate::slot::Slot) -> Result<(), String> {
        self.handle.shared.engine().release(slot)
    }

    /// Where `slot` is served, if another node owns it.
    pub(crate) fn owner(&self, slot: crate::slot::Slot) -> Option<Arc<str>> {
        self.handle.shared.engine().owner(slot)
    }

    /// Keeps the leases once now (tests, which cannot wait for the engine's own rounds).
    #[cfg(test)]
    pub(crate) fn lease_round(&self) -> Result<(), String> {
        self.handle.shared.engine().lease_round()
    }

    /// Ends the time `slot` is served here, as a renewal that came back too late does
    /// (tests).
    #[cfg(test)]
    pub(crate) fn lapse_served(&self, slot: crate::slot::Slot) {
        self.handle.shared.engine().lapse_served(slot);
    }

    /// Sends the next group commit twice, running `between` (SQL) between the two
    /// (tests).
    #[cfg(test)]
    pub(crate) fn send_next_twice(&self, between: &'static str) {
        self.handle.shared.engine().send_next_twice(between);
    }

    /// The store as errors name it: its directory, its database, or `memory`.
    pub(crate) fn name(&self) -> &str {
        self.handle.shared.name()
    }

    /// Whether a failure has stopped the store.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.handle.shared.is_poisoned()
    }

    /// The failed write or sync that stopped the store, if one did, naming the store.
    pub(crate) fn failure(&self) -> Option<String> {
        self.handle.shared.failure().map(|e| e.to_string())
    }

    /// The store's figures since it was opened.
    pub(crate) fn stats(&self) -> Stats {
        self.handle.shared.stats()
    }
}

/// `engine`, wrapped to fail as `faults` say if they say anything.
fn with_faults(engine: Arc<dyn Engine>, faults: Faults) -> Arc<dyn Engine> {
    if faults == Faults::default() {
        engine
    } else {
        Arc::new(faulty::Faulty::new(engine, faults))
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("store", &self.handle.shared.name())
            .field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}
