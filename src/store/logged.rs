//! The disk engine behind the change log: a group is durable once its record in the log
//! is synced; the engine's keyed state catches up at *checkpoints*, on a thread of its
//! own, when a segment of the log fills.
//!
//! - **Write.** The group's record goes into the log (`super::changelog`), and its
//!   mutations into the overlay (`super::overlay`), which every read looks at before
//!   the engine. The engine is not written.
//! - **Sync.** An `fdatasync` of the segments written since the last: data only, since
//!   a segment never changes its size. Nothing the engine does in the background (a
//!   flush, a compaction, a journal's rotation) stands in front of it.
//! - **Checkpoint.** When a segment fills, the checkpoint thread writes the overlay into
//!   the engine as one write (each key's last mutation since the last checkpoint), with
//!   the number of its last group under [`APPLIED_KEY`], syncs the engine's journal, and
//!   frees the segments that logged nothing later.
//! - **Open.** The engine opens as it was last synced, and perhaps with a checkpoint
//!   after that its journal kept. The log's records of the groups after the last the
//!   engine holds are written into it again, in order; the engine is then synced, and
//!   every segment freed. A group missing from the log although a later record or a
//!   segment's header says it was acknowledged is damage: refused, or cut there when
//!   the operator asks ([`OnDamage::Truncate`]).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use super::batch::last_per_key;
use super::changelog::{self, ChangeLog, LOG_DIR};
use super::disk::{DROPPED_DIR, Disk, successor};
use super::engine::{Engine, ReadFailure, WriteFailure};
use super::layout::APPLIED_KEY;
use super::overlay::{self, Overlay};
use super::{Batch, Entries, OnDamage, Op, OpenError, Recovered, Space};
use crate::sync::lock;

/// How many of the log's groups an open replays into the engine in one write.
const REPLAYED_AT_ONCE: usize = 256;

/// The disk engine with the change log in front.
pub(super) struct Logged {
    /// The keyed state.
    disk: Arc<Disk>,
    /// Where groups are made durable.
    log: Arc<ChangeLog>,
    /// The groups logged and not yet in the engine.
    overlay: Arc<Overlay>,
    /// The last group logged.
    written: AtomicU64,
    /// The checkpoint thread and what it is asked.
    checkpoints: Arc<Checkpoints>,
    /// The checkpoint thread, until closed.
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// What the checkpoint thread is asked, and what it met.
#[derive(Default)]
struct Checkpoints {
    /// Asked for a checkpoint, or to stop.
    asked: Mutex<Asked>,
    /// Wakes the thread.
    wake: Condvar,
    /// A checkpoint that failed, told at the next sync: the store stops.
    failure: Mutex<Option<String>>,
}

/// What the checkpoint thread has been asked.
#[derive(Default)]
struct Asked {
    /// A checkpoint.
    checkpoint: bool,
    /// To stop.
    stop: bool,
}

impl Logged {
    /// Opens the store in `dir`: the engine, then the log, whose groups after the last
    /// the engine holds are replayed into it. What the open found and did.
    pub(super) fn open(dir: &Path, on_damage: OnDamage) -> Result<(Logged, Recovered), OpenError> {
        let (disk, mut recovered) = Disk::open_as(dir, on_damage)?;
        let directory = |source| OpenError::Directory {
            path: dir.to_path_buf(),
            source,
        };
        let applied = applied(dir, &disk)?;
        let folder = dir.join(LOG_DIR);
        let found = changelog::recover(&folder, true).map_err(directory)?;
        for path in &found.unreadable_headers {
            tracing::warn!(segment = %path.display(), "a log segment's header does not check; its records are read all the same");
        }
        let chain = changelog::Chain::of(&found.read, applied);
        check_damage(dir, &found, &chain, on_damage, &mut recovered)?;
        replay(dir, &disk, &chain.records)?;
        recovered.log_groups = chain.records.len() as u64;
        // Numbered above every group the log holds or names: a group after a gap (torn,
        // never acknowledged) or cut by the operator is dropped, and its number is never
        // given again, so a record of it left in a segment is not taken for a new one.
        let last = chain.end.max(found.highest);
        drop(chain);
        // Whatever the engine holds, replayed or kept by its journal, is made durable
        // before the log's segments are freed. The number is written even when nothing
        // was replayed, so the sync leaves a mark of this checkpoint (`super::mark`) in a
        // new directory too: the next open tells damage to the engine's journal after
        // it, which the log gives back, from damage before it.
        let corrupt = |cause: String| OpenError::Corrupt {
            path: dir.to_path_buf(),
            cause,
        };
        let mut mark = Batch::new();
        mark.put(Space::Meta, APPLIED_KEY, last.to_be_bytes().to_vec());
        disk.write(&mut vec![mark], 0)
            .map_err(|failure| corrupt(format!("writing the checkpoint's number: {failure:?}")))?;
        disk.sync()
            .map_err(|cause| corrupt(format!("syncing after the change log's replay: {cause}")))?;
        let log = ChangeLog::start(&folder, found.segments, last).map_err(directory)?;
        let logged = Logged {
            disk: Arc::new(disk),
            log: Arc::new(log),
            overlay: Arc::new(Overlay::new()),
            written: AtomicU64::new(last),
            checkpoints: Arc::new(Checkpoints::default()),
            thread: Mutex::new(None),
        };
        let thread = logged.spawn().map_err(|source| OpenError::Thread {
            path: dir.to_path_buf(),
            source,
        })?;
        *lock(&logged.thread) = Some(thread);
        // A first checkpoint, with nothing to write, makes the spare segments.
        logged.checkpoints.ask();
        Ok((logged, recovered))
    }

    /// Starts the checkpoint thread.
    fn spawn(&self) -> std::io::Result<JoinHandle<()>> {
        let disk = Arc::clone(&self.disk);
        let log = Arc::clone(&self.log);
        let overlay = Arc::clone(&self.overlay);
        let checkpoints = Arc::clone(&self.checkpoints);
        std::thread::Builder::new()
            .name("parkway-checkpoint".into())
            .spawn(move || {
                while checkpoints.next() {
                    let done = checkpoint(&disk, &log, &overlay)
                        .and_then(|()| log.keep_spares().map_err(|err| err.to_string()));
                    if let Err(cause) = done {
                        tracing::error!(%cause, "a checkpoint failed; the store stops");
                        *lock(&checkpoints.failure) = Some(format!("checkpoint: {cause}"));
                        return;
                    }
                }
            })
    }

    /// Stops the checkpoint thread, waiting for it.
    fn stop(&self) {
        lock(&self.checkpoints.asked).stop = true;
        self.checkpoints.wake.notify_all();
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

impl Checkpoints {
    /// Waits to be asked: `true` for a checkpoint, `false` to stop.
    fn next(&self) -> bool {
        let mut asked = lock(&self.asked);
        loop {
            if asked.stop {
                return false;
            }
            if std::mem::take(&mut asked.checkpoint) {
                return true;
            }
            asked = self
                .wake
                .wait(asked)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Asks for a checkpoint.
    fn ask(&self) {
        lock(&self.asked).checkpoint = true;
        self.wake.notify_one();
    }
}

impl Engine for Logged {
    /// Logs the group's record and lays its mutations over the engine.
    fn write(&self, group: &mut Vec<Batch>, _: u64) -> Result<(), WriteFailure> {
        let seq = self.written.load(Ordering::Acquire) + 1;
        let ops = last_per_key(group);
        self.log
            .append(seq, &ops)
            .map_err(|err| WriteFailure::Failed(err.to_string()))?;
        self.overlay.apply(seq, &ops);
        self.written.store(seq, Ordering::Release);
        Ok(())
    }

    /// Syncs the log's segments written since the last sync; asks for a checkpoint if
    /// one filled.
    fn sync(&self) -> Result<bool, String> {
        if let Some(failure) = lock(&self.checkpoints.failure).clone() {
            return Err(failure);
        }
        self.log.sync().map_err(|err| err.to_string())?;
        if self.log.wants_checkpoint() {
            self.checkpoints.ask();
        }
        Ok(true)
    }

    /// The log is synced while the next group is written.
    fn pipelined(&self) -> bool {
        true
    }

    /// What the engine is doing in the background, and a checkpoint being written.
    fn activity(&self, system: bool) -> Vec<String> {
        let mut doing = self.disk.activity(system);
        if let Some(len) = self.overlay.draining() {
            doing.push(format!("checkpointing {len} mutations"));
        }
        doing
    }

    /// Stops the checkpoints; with `flush`, writes a last one, so the next open
    /// replays nothing of the log.
    fn close(&self, flush: bool) {
        self.stop();
        if flush && let Err(error) = checkpoint(&self.disk, &self.log, &self.overlay) {
            tracing::warn!(%error, "the last checkpoint failed at close; the next open replays the log");
        }
        self.disk.close(flush);
    }

    /// The overlay's value, or the engine's.
    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        match self.overlay.get(space, key) {
            overlay::Found::Value(value) => Ok(Some(value)),
            overlay::Found::Deleted => Ok(None),
            overlay::Found::Absent => self.disk.get(space, key),
        }
    }

    /// The engine's entries with the overlay laid over them. Each delete in the
    /// overlay may hide one of the engine's, so as many more are read: then at least
    /// `limit` of the engine's are left whenever it had more, and the overlay's keys
    /// past its last sort after them.
    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        let from = from.max(within);
        let laid = self
            .overlay
            .range(space, from, successor(within).as_deref());
        let deletes = laid.values().filter(|value| value.is_none()).count();
        let engine = self
            .disk
            .range_from(space, from, within, limit.saturating_add(deletes))?;
        Ok(overlay::merge(engine, laid, limit))
    }

    /// The engine's entries under `prefix` with the overlay's laid over them.
    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        let laid = self
            .overlay
            .range(space, prefix, successor(prefix).as_deref());
        let engine = self.disk.prefixed(space, prefix)?;
        Ok(overlay::merge(engine, laid, usize::MAX))
    }

    /// The space's keys, the overlay's laid over the engine's.
    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        Ok(self.scan(space)?.into_iter().map(|(key, _)| key).collect())
    }

    /// The space, the overlay laid over the engine.
    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        let laid = self.overlay.range(space, &[], None);
        let engine = self.disk.scan(space)?;
        Ok(overlay::merge(engine, laid, usize::MAX))
    }
}

/// Writes the overlay into the engine as one write, with the number of its last group,
/// syncs the engine, and frees the log's segments it covers.
fn checkpoint(disk: &Disk, log: &ChangeLog, overlay: &Overlay) -> Result<(), String> {
    let layer = match overlay.start_drain() {
        Ok(layer) => layer,
        Err(drained) => return log.checkpointed(drained).map_err(|err| err.to_string()),
    };
    let mut batch = layer.batch();
    batch.put(Space::Meta, APPLIED_KEY, layer.last.to_be_bytes().to_vec());
    disk.write(&mut vec![batch], 0)
        .map_err(|failure| format!("writing into the engine: {failure:?}"))?;
    disk.sync()?;
    overlay.drained();
    log.checkpointed(layer.last).map_err(|err| err.to_string())
}

impl Drop for Logged {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last group of the log the engine of `dir` holds (0: none).
pub(super) fn applied(dir: &Path, disk: &Disk) -> Result<u64, OpenError> {
    let corrupt = |cause: String| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause,
    };
    match disk.get(Space::Meta, APPLIED_KEY) {
        Ok(None) => Ok(0),
        Ok(Some(bytes)) => <[u8; 8]>::try_from(bytes.as_slice())
            .map(u64::from_be_bytes)
            .map_err(|_| {
                corrupt("the number of the last group logged does not read as one".into())
            }),
        Err(failure) => Err(corrupt(failure.cause)),
    }
}

/// Refuses what the open of `dir` found damaged in the log, a segment cut short or a
/// group missing below one acknowledged, or, as the operator asked, goes on without
/// what is lost and counts the cut (the segments kept aside).
fn check_damage(
    dir: &Path,
    found: &changelog::Found,
    chain: &changelog::Chain<'_>,
    on_damage: OnDamage,
    recovered: &mut Recovered,
) -> Result<(), OpenError> {
    if let Some(short) = found.short.first() {
        let cause = changelog::cut_short(short);
        if on_damage == OnDamage::Refuse {
            return Err(OpenError::Corrupt {
                path: dir.to_path_buf(),
                cause,
            });
        }
        tracing::error!("{cause}: opened all the same, as the operator asked");
        // One cut of the directory, whatever was cut.
        recovered.cuts = 1;
    }
    if chain.acknowledged <= chain.end {
        return Ok(());
    }
    let refusal = chain.refusal(dir, &found.read);
    if on_damage == OnDamage::Refuse {
        return Err(refusal);
    }
    let place = match &refusal {
        OpenError::DamagedLog { segment, .. } => segment.clone(),
        _ => dir.join(LOG_DIR),
    };
    let aside =
        keep_aside(dir, &found.read, &place, chain.end).map_err(|source| OpenError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
    tracing::error!(kept_in = %aside.display(), "{refusal}: cut there, as the operator asked; the segments are kept aside");
    recovered.cuts = 1;
    recovered.dropped_batches += chain.after;
    Ok(())
}

/// Writes `records`, the log's groups the engine of `dir` lacks, into it in order, a
/// few hundred at a time with each key's last mutation among them (one by one, each
/// cost a write of the engine's journal), each write with the number of its last group.
fn replay(dir: &Path, disk: &Disk, records: &[&changelog::Record]) -> Result<(), OpenError> {
    let corrupt = |cause: String| OpenError::Corrupt {
        path: dir.to_path_buf(),
        cause,
    };
    for records in records.chunks(REPLAYED_AT_ONCE) {
        let mut group = Vec::with_capacity(records.len() + 1);
        for record in records {
            let ops = changelog::decode(&record.payload).map_err(|cause| {
                corrupt(format!("group {} of the change log: {cause}", record.seq))
            })?;
            let mut batch = Batch::new();
            for op in ops {
                match op {
                    Op::Put { space, key, value } => batch.put(space, key, value),
                    Op::Delete { space, key } => batch.delete(space, key),
                };
            }
            group.push(batch);
        }
        let Some(last) = records.last().map(|record| record.seq) else {
            continue;
        };
        let mut mark = Batch::new();
        mark.put(Space::Meta, APPLIED_KEY, last.to_be_bytes().to_vec());
        group.push(mark);
        disk.write(&mut group, 0).map_err(|failure| {
            corrupt(format!(
                "replaying the change log up to group {last}: {failure:?}"
            ))
        })?;
    }
    Ok(())
}

/// Copies into `<dir>/dropped/` the segment where the missing group should be (`place`)
/// and every segment holding a record after group `end` (of this use, or found past a
/// stop), before the open frees them. The folder.
fn keep_aside(
    dir: &Path,
    read: &[changelog::Read],
    place: &Path,
    end: u64,
) -> std::io::Result<std::path::PathBuf> {
    let aside = dir.join(DROPPED_DIR);
    std::fs::create_dir_all(&aside)?;
    let holding = read.iter().filter(|segment| {
        segment.path == place
            || segment
                .records
                .iter()
                .chain(&segment.later)
                .any(|record| record.seq > end)
    });
    for segment in holding {
        if let Some(name) = segment.path.file_name() {
            std::fs::copy(&segment.path, aside.join(name))?;
        }
    }
    Ok(aside)
}
