//! The queue and the group commit, the same for every engine ([`Engine`]).
//!
//! Submitters append to one FIFO and return. The committer (the writer thread, or the
//! caller of `sync_now`) takes everything queued, writes it, syncs once, then calls the
//! acks in submission order. It never waits to gather more: while one sync runs, new
//! batches queue and form the next group, so groups grow with the load and a lone batch
//! is synced at once (RocksDB's rule).
//!
//! On an engine that allows it ([`Engine::pipelined`], the disk), the writer thread only
//! writes: it hands each group it wrote to a sync thread,
//! which syncs everything handed since its last sync at once and then calls those acks,
//! in order, while the writer writes the next group (`super::journal` says why the
//! engine allows it). A group's cycle costs the longer of its write and the sync, not
//! their sum.
//!
//! A failed write or sync poisons the store: the group's acks get the failure, every
//! later ack gets `StoreError::Poisoned` naming it, and nothing is written once the
//! writer has seen it (nor synced: a group written in the moment before is refused).

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use super::engine::{Engine, ReadFailure, WriteFailure};
use super::layout;
use super::log::{self, Log};
use crate::slot::Slot;
use crate::stages::{Stage, StageSink};
use crate::sync::lock;

use super::{Ack, Batch, Entries, Receipt, Space, Stamp, Stats, StoreError};

/// A submitted batch and its ack.
struct Pending {
    /// The batch.
    batch: Batch,
    /// Called once with its fate.
    ack: Ack,
    /// When it was submitted.
    submitted: Instant,
}

/// A group written to the engine, its acks waiting for it to be durable.
struct Written {
    /// Its acks, in submission order.
    acks: Vec<Ack>,
    /// For each ack, its batch's first log number, or its refusal: a batch of a slot
    /// this process does not own, written without (`StoreError::NotOwner`).
    firsts: Vec<Result<u64, StoreError>>,
    /// The log number after its last entry.
    log_end: u64,
    /// Bytes in its batches.
    bytes: u64,
    /// Mutations in its batches.
    keys: u64,
    /// When its write began.
    started: Instant,
    /// Not written: what its acks are told (its own failed write, or the refusal of a
    /// poisoned store). It still goes the way of a written group, so its acks are
    /// called after those of every group taken before it.
    failed: Option<StoreError>,
}

/// Why the engine did not write a group.
enum Refused {
    /// For slots this process does not own: written again without them.
    NotOwner(Vec<Slot>),
    /// The engine failed: the store stops.
    Failed(StoreError),
}

/// Where the writer thread hands each group it wrote to the sync thread.
#[derive(Default)]
struct Handoff {
    /// The groups written and not yet taken by the sync thread.
    state: Mutex<Handed>,
    /// Wakes the sync thread when a group is handed or the writer stops.
    ready: Condvar,
    /// Wakes whoever waits for the sync thread to settle everything handed.
    settled: Condvar,
}

/// The groups handed and not yet taken, oldest first.
#[derive(Default)]
struct Handed {
    /// Written, not yet synced.
    written: Vec<Written>,
    /// The sync thread is syncing or settling groups it took.
    busy: bool,
    /// The writer stopped: nothing more comes.
    closed: bool,
}

/// The FIFO between submitters and the committer.
#[derive(Default)]
struct Queue {
    /// Submitted and not yet taken, oldest first.
    pending: Vec<Pending>,
    /// The last handle dropped: the writer finishes what is queued and stops.
    closed: bool,
}

/// Everything a store's handles and its writer share.
pub(super) struct Shared {
    /// The directory, or `memory`, as errors name it.
    name: Arc<str>,
    /// Where groups are written.
    engine: Arc<dyn Engine>,
    /// Submitted batches not yet taken by a committer.
    queue: Mutex<Queue>,
    /// Wakes the writer when the queue fills or closes.
    filled: Condvar,
    /// Held by whoever commits a group, from taking it to its last ack (on disk, to its
    /// hand-off to the sync thread, which settles groups in the order handed), so groups
    /// are committed and acknowledged in the order they were taken.
    committing: Mutex<()>,
    /// Between the writer and sync threads on disk.
    handoff: Handoff,
    /// The sync thread, once started.
    sync_thread: std::sync::OnceLock<std::thread::ThreadId>,
    /// The failure that stopped the store.
    poison: Mutex<Option<Arc<StoreError>>>,
    /// Whether `poison` is set, read without the lock.
    poisoned: AtomicBool,
    /// Successful syncs.
    syncs: AtomicU64,
    /// Batches acknowledged durable.
    batches: AtomicU64,
    /// Bytes in those batches.
    bytes: AtomicU64,
    /// Mutations (puts and deletes) in those batches.
    keys: AtomicU64,
    /// The largest group synced.
    largest_group: AtomicU64,
    /// For each sync, microseconds from the start of the write of the first group it
    /// covered to its acks, summed.
    commit_micros: AtomicU64,
    /// Each batch is committed alone, on its submitter's thread, as it is submitted.
    inline: bool,
    /// The log's end, its chunks and its capacity (`super::log`).
    log: Mutex<Log>,
    /// Called on each group's first batch as it is committed (the id counters' marks).
    stamp: Mutex<Option<Stamp>>,
    /// A simulated crash to come: how many more batches become durable before it.
    crash_budget: Mutex<Option<u64>>,
    /// The simulated crash came: nothing submitted since is kept or acknowledged.
    crashed: AtomicBool,
    /// Wakes whoever waits for the simulated crash.
    crash: tokio::sync::Notify,
    /// Where the stages of each batch are measured, if they are.
    stages: std::sync::OnceLock<Arc<dyn StageSink>>,
    /// Each slot's epoch: moved on when the engine refuses the slot, or when the slot is
    /// taken back. A fenced batch of an epoch that has passed is not written.
    epochs: Box<[AtomicU32]>,
}

/// Starts the writer thread of `shared`.
pub(super) fn spawn(shared: &Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    let shared = Arc::clone(shared);
    std::thread::Builder::new()
        .name("parkway-store".into())
        .spawn(move || shared.run())
}

impl Shared {
    /// A store over `engine`, named `name` in its errors.
    pub(super) fn new(name: Arc<str>, engine: Arc<dyn Engine>) -> Shared {
        Shared {
            name,
            engine,
            queue: Mutex::new(Queue::default()),
            filled: Condvar::new(),
            committing: Mutex::new(()),
            handoff: Handoff::default(),
            sync_thread: std::sync::OnceLock::new(),
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            syncs: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            largest_group: AtomicU64::new(0),
            commit_micros: AtomicU64::new(0),
            inline: false,
            log: Mutex::new(Log::new(Vec::new(), super::LOG_CAPACITY)),
            stamp: Mutex::new(None),
            crash_budget: Mutex::new(None),
            crashed: AtomicBool::new(false),
            crash: tokio::sync::Notify::new(),
            stages: std::sync::OnceLock::new(),
            epochs: (0..Slot::COUNT).map(|_| AtomicU32::new(0)).collect(),
        }
    }

    /// `slot`'s current epoch.
    pub(super) fn epoch(&self, slot: Slot) -> u32 {
        self.epochs[usize::from(slot.number())].load(Ordering::Acquire)
    }

    /// Moves `slot`'s epoch on under `committing`, so no group is half written: every
    /// group taken before is in the engine, every group taken after is fenced by the
    /// new epoch. The new epoch.
    pub(super) fn next_epoch(&self, slot: Slot) -> u32 {
        let _committing = lock(&self.committing);
        self.epochs[usize::from(slot.number())].fetch_add(1, Ordering::AcqRel) + 1
    }

    /// Whether `batch` is fenced under an epoch of its slot that has passed.
    fn is_stale(&self, batch: &Batch) -> bool {
        match (batch.slot(), batch.epoch()) {
            (Some(slot), Some(epoch)) => self.epoch(slot) != epoch,
            _ => false,
        }
    }

    /// Reads the log's chunks, so the next entry follows the last one kept (an engine
    /// that numbers the log keeps its own account: it is told the capacity).
    pub(super) fn find_log_end(&self) -> Result<(), StoreError> {
        if self.engine.numbers_log() {
            self.engine.keep_log(lock(&self.log).capacity());
            return Ok(());
        }
        let chunks = self.read(Space::Events, None, |e| e.keys(Space::Events))?;
        let mut log = lock(&self.log);
        *log = Log::new(chunks, log.capacity());
        Ok(())
    }

    /// Sets how many entries the log keeps.
    pub(super) fn set_log_capacity(&self, entries: u64) {
        let mut log = lock(&self.log);
        log.set_capacity(entries);
        self.engine.keep_log(log.capacity());
    }

    /// Sets the stamp called on each group's first batch.
    pub(super) fn set_stamp(&self, stamp: Stamp) {
        *lock(&self.stamp) = Some(stamp);
    }

    /// Measures the stages of every batch submitted from now on into `stages`.
    pub(super) fn set_stages(&self, stages: Arc<dyn StageSink>) {
        let _ = self.stages.set(stages);
    }

    /// `ack`, which records, when stages are measured, the time from `submitted` to its
    /// call.
    fn timed(&self, ack: Ack, submitted: Instant) -> Ack {
        match self.stages.get() {
            None => ack,
            Some(stages) => {
                let stages = Arc::clone(stages);
                Box::new(move |fate| {
                    stages.since(Stage::Durable, submitted);
                    ack(fate);
                })
            }
        }
    }

    /// What the engine is doing, when stages are measured: taken as a stage begins, so a
    /// stall is told what was going on when it began as well as when it ended.
    fn activity(&self) -> Option<Vec<String>> {
        self.stages.get().map(|_| self.engine.activity(false))
    }

    /// Records how long `stage` took, from `began`, and notes what the engine was doing
    /// as it began (`before`) and is doing now if that is a stall.
    fn measure(&self, stage: Stage, began: Instant, before: Option<Vec<String>>) {
        let Some(stages) = self.stages.get() else {
            return;
        };
        let took = began.elapsed();
        stages.record(stage, took);
        if took > crate::stages::STALL {
            let began = before.unwrap_or_default();
            let ended = self.engine.activity(true);
            tracing::debug!(store = %self.name, stage = ?stage, ms = took.as_millis(), began = ?began, ended = ?ended, "a write or a sync stalled");
            stages.stalled(stage, took, &began, &ended);
        }
    }

    /// The log's entries from sequence `from` on, at most `limit`, as durable and kept.
    pub(super) fn log_from(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        if self.engine.numbers_log() {
            return self.shared_log_from(from, limit);
        }
        let Some((mut key, shown)) = lock(&self.log).read_from(from) else {
            return Ok(Vec::new());
        };
        let mut entries = Vec::new();
        // Chunks are read a few at a time: a read of one entry reads one chunk.
        const CHUNKS: usize = 4;
        'read: loop {
            let chunks = self.range_from(Space::Events, &key, b"", CHUNKS)?;
            let read = chunks.len();
            for (chunk, value) in chunks {
                let Some((first, count)) = layout::chunk_of(&chunk) else {
                    continue;
                };
                let values = log::decode(&value, count).map_err(|cause| StoreError::Corrupt {
                    store: Arc::clone(&self.name),
                    space: Space::Events.name(),
                    key: Some(chunk.clone()),
                    detail: format!(
                        "the chunk of the log from entry {first} does not decode: {cause}"
                    ),
                })?;
                for (seq, value) in (first..).zip(values) {
                    if seq >= shown.end || entries.len() >= limit {
                        break 'read;
                    }
                    if seq >= shown.start {
                        entries.push((seq, value));
                    }
                }
                key = layout::chunk_key(first + u64::from(count), 0);
            }
            if read < CHUNKS {
                break;
            }
        }
        Ok(entries)
    }

    /// Whether the engine numbers the log as it commits.
    pub(super) fn shares_log(&self) -> bool {
        self.engine.numbers_log()
    }

    /// The number of the log's last entry durable and kept, 0 if it has none.
    pub(super) fn log_last(&self) -> Result<u64, StoreError> {
        if !self.engine.numbers_log() {
            return Ok(lock(&self.log).last());
        }
        self.number_staged()?;
        let next = self.read(Space::Events, None, |e| e.log_next())?;
        Ok(next.saturating_sub(1))
    }

    /// Has the engine number what its log holds staged, so a read sees every group
    /// committed before it.
    fn number_staged(&self) -> Result<u64, StoreError> {
        self.read(Space::Events, None, |e| {
            e.number_log().map_err(ReadFailure::from)
        })
    }

    /// The entries of a log the engine numbers from sequence `from` on, at most
    /// `limit`, within its capacity: everything it holds was committed.
    fn shared_log_from(&self, from: u64, limit: usize) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let mut entries = Vec::new();
        self.number_staged()?;
        let next = self.read(Space::Events, None, |e| e.log_next())?;
        let floor = next.saturating_sub(lock(&self.log).capacity()).max(1);
        let mut from = from.max(floor);
        // Chunks are read a few at a time: a read of one entry reads one chunk.
        const CHUNKS: usize = 4;
        while entries.len() < limit {
            let chunks = self.read(Space::Events, None, |e| e.log_chunks(from, CHUNKS))?;
            let mut read = false;
            for (first, count, value) in chunks {
                let values = log::decode(&value, count).map_err(|cause| StoreError::Corrupt {
                    store: Arc::clone(&self.name),
                    space: Space::Events.name(),
                    key: Some(layout::chunk_key(first, count).to_vec()),
                    detail: format!(
                        "the chunk of the log from entry {first} does not decode: {cause}"
                    ),
                })?;
                for (seq, value) in (first..).zip(values) {
                    if seq >= from && entries.len() < limit {
                        entries.push((seq, value));
                    }
                }
                let end = first + u64::from(count);
                read |= end > from;
                from = from.max(end);
            }
            if !read {
                break;
            }
        }
        Ok(entries)
    }

    /// Numbers the log entries of `batches` in order, as one chunk written by `head`
    /// (with the deletion of the chunks then past the log's capacity); each batch's
    /// first number, the number after the last, and what takes the numbers back. For
    /// an engine that numbers the log after the commit, the chunk's key says 0 and no
    /// number is known (0 each).
    fn number(
        &self,
        batches: &[Batch],
        head: &mut Batch,
    ) -> (Vec<u64>, u64, Option<log::Appended>) {
        if self.engine.numbers_log() {
            // Numbered by the engine after the commit: no number is known here.
            log::unnumbered(batches, head);
            return (vec![0; batches.len()], 0, None);
        }
        let mut log = lock(&self.log);
        let (firsts, appended) = log.append(batches, head);
        (firsts, log.end(), Some(appended))
    }

    /// Commit each batch alone, on its submitter's thread, as it is submitted.
    pub(super) fn inline(mut self) -> Shared {
        self.inline = true;
        self
    }

    /// The directory, or `memory`.
    pub(super) fn name(&self) -> &str {
        &self.name
    }

    /// Queues a batch and wakes the writer; or, inline, commits it now. After a
    /// simulated crash it is dropped, its ack uncalled, as a dead process tells no one.
    pub(super) fn submit(&self, batch: Batch, ack: Ack) {
        if self.crashed.load(Ordering::Acquire) {
            return;
        }
        if self.inline {
            let _committing = lock(&self.committing);
            let generation = self.engine.generation();
            let submitted = Instant::now();
            self.commit(
                vec![Pending {
                    batch,
                    ack: self.timed(ack, submitted),
                    submitted,
                }],
                generation,
            );
            return;
        }
        let mut queue = lock(&self.queue);
        if queue.closed {
            drop(queue);
            ack(Err(StoreError::Write {
                store: Arc::clone(&self.name),
                cause: "the store is closed".to_owned(),
            }));
            return;
        }
        let submitted = Instant::now();
        queue.pending.push(Pending {
            batch,
            ack: self.timed(ack, submitted),
            submitted,
        });
        drop(queue);
        self.filled.notify_one();
    }

    /// Crash (as [`Shared::crash`] does, and for good) once `batches` more are durable.
    pub(super) fn crash_after(&self, batches: u64) {
        *lock(&self.crash_budget) = Some(batches);
    }

    /// Whether the simulated crash came.
    pub(super) fn has_crashed(&self) -> bool {
        self.crashed.load(Ordering::Acquire)
    }

    /// Wait for the simulated crash.
    pub(super) async fn crashed(&self) {
        loop {
            let notified = self.crash.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.has_crashed() {
                return;
            }
            notified.await;
        }
    }

    /// Whether each batch is committed as it is submitted.
    pub(super) fn is_inline(&self) -> bool {
        self.inline
    }

    /// The batches of a group of `len` that may become durable before a simulated crash
    /// (all of them if none is due), counted off the budget.
    fn before_crash(&self, len: usize) -> usize {
        let mut budget = lock(&self.crash_budget);
        match budget.as_mut() {
            None => len,
            Some(left) => {
                let now = len.min(usize::try_from(*left).unwrap_or(usize::MAX));
                *left -= now as u64;
                now
            }
        }
    }

    /// The simulated crash: every batch pending is lost, and nothing is kept or
    /// acknowledged from now on.
    pub(super) fn crash_now(&self) {
        self.crashed.store(true, Ordering::Release);
        self.crash();
        self.crash.notify_waiters();
    }

    /// The engine the writer writes to.
    pub(super) fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// Releases the engine (a disk's lock) after the writer stopped: every later use
    /// is refused.
    pub(super) fn release(&self) {
        // A poisoned store writes nothing more, not even a disk's memtables.
        self.engine.close(!self.is_poisoned());
    }

    /// Lets the writer finish what is queued and stop.
    pub(super) fn close(&self) {
        lock(&self.queue).closed = true;
        self.filled.notify_one();
    }

    /// The writer thread: commit whatever is queued, as soon as it is, until closed and
    /// empty. On a pipelined engine (the disk), a sync thread beside it syncs each group
    /// while the next is written (`super::journal`); otherwise the writer does both.
    fn run(&self) {
        if self.engine.pipelined() && self.run_with_syncer() {
            return;
        }
        while self.wait_for_queued() {
            let _committing = lock(&self.committing);
            let (group, generation) = self.take();
            self.commit(group, generation);
        }
    }

    /// Waits until something is queued; `false` once the queue is closed and empty.
    fn wait_for_queued(&self) -> bool {
        let mut queue = lock(&self.queue);
        while queue.pending.is_empty() && !queue.closed {
            queue = self
                .filled
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
        !queue.pending.is_empty()
    }

    /// The writer thread on disk: writes each group and hands it to a sync thread, which
    /// syncs whatever was handed since its last sync at once; `false` (nothing done) if
    /// that thread could not start. Returns once both are done.
    fn run_with_syncer(&self) -> bool {
        let handoff = &self.handoff;
        std::thread::scope(|scope| {
            let syncer = std::thread::Builder::new()
                .name("parkway-sync".into())
                .spawn_scoped(scope, || self.sync_handed(handoff));
            match syncer {
                Ok(syncer) => {
                    let _ = self.sync_thread.set(syncer.thread().id());
                }
                Err(error) => {
                    tracing::warn!(store = %self.name, %error, "no sync thread: the writer syncs each group itself");
                    return false;
                }
            }
            while self.wait_for_queued() {
                let _committing = lock(&self.committing);
                let (group, generation) = self.take();
                if let Some(written) = self.write_group(group, generation) {
                    // A refused group is handed too, so the sync thread calls every ack,
                    // in submission order.
                    lock(&handoff.state).written.push(written);
                    handoff.ready.notify_one();
                }
            }
            lock(&handoff.state).closed = true;
            handoff.ready.notify_one();
            true
        })
    }

    /// The sync thread: syncs the groups handed since its last sync, once, and settles
    /// them in order; returns when the writer stopped and nothing is left. After a
    /// failure, groups written before the writer saw it are refused, not synced.
    fn sync_handed(&self, handoff: &Handoff) {
        loop {
            let mut handed = lock(&handoff.state);
            while handed.written.is_empty() && !handed.closed {
                handed = handoff
                    .ready
                    .wait(handed)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if handed.written.is_empty() {
                return;
            }
            let groups = std::mem::take(&mut handed.written);
            handed.busy = true;
            drop(handed);
            // A refused group was handed after the poison was set, so it is refused
            // here with every group handed beside it.
            let synced = match self.refusal() {
                Some(refused) => Err(refused),
                None => self.sync(),
            };
            self.settle(groups, synced);
            lock(&handoff.state).busy = false;
            handoff.settled.notify_all();
        }
    }

    /// Waits until the sync thread has settled every group handed to it. The caller
    /// holds `committing`, so no more are handed meanwhile.
    fn wait_for_handed(&self) {
        let mut handed = lock(&self.handoff.state);
        while handed.busy || !handed.written.is_empty() {
            handed = self
                .handoff
                .settled
                .wait(handed)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Whether the calling thread is the writer `thread` or its sync thread (an ack,
    /// which must not wait for the writer to stop).
    pub(super) fn runs_here(&self, thread: &JoinHandle<()>) -> bool {
        let here = std::thread::current().id();
        thread.thread().id() == here || self.sync_thread.get() == Some(&here)
    }

    /// Commits everything queued now, on the caller's thread, after whatever the writer
    /// thread took before; returns how many batches it acknowledged durable. Not to be
    /// called from an ack.
    pub(super) fn sync_now(&self) -> usize {
        let _committing = lock(&self.committing);
        // On disk, the groups the writer thread handed to its sync thread are
        // acknowledged first.
        self.wait_for_handed();
        let (group, generation) = self.take();
        self.commit(group, generation)
    }

    /// Takes everything queued, with the engine's generation at that moment (a
    /// simulated crash after it loses the group). The caller holds `committing`.
    /// How many batches are submitted and not yet taken by a committer.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        lock(&self.queue).pending.len()
    }

    fn take(&self) -> (Vec<Pending>, u64) {
        let mut queue = lock(&self.queue);
        let generation = self.engine.generation();
        (std::mem::take(&mut queue.pending), generation)
    }

    /// Writes `group`, syncs once, and calls its acks in order; returns how many batches
    /// it acknowledged durable.
    fn commit(&self, mut group: Vec<Pending>, generation: u64) -> usize {
        if group.is_empty() || self.has_crashed() {
            return 0;
        }
        let kept = self.before_crash(group.len());
        if kept < group.len() {
            // The batches after the crash point are lost with their acks; the ones
            // before it are committed first, as a disk would have.
            let lost = group.split_off(kept);
            let done = self.commit_group(group, generation);
            drop(lost);
            self.crash_now();
            return done;
        }
        self.commit_group(group, generation)
    }

    /// [`Shared::commit`] of a group no crash cuts.
    fn commit_group(&self, group: Vec<Pending>, generation: u64) -> usize {
        let Some(written) = self.write_group(group, generation) else {
            return 0;
        };
        if let Some(err) = written.failed.clone() {
            self.fail(vec![written], &err);
            return 0;
        }
        let synced = self.sync();
        self.settle(vec![written], synced)
    }

    /// Numbers, stamps and writes a group taken in `generation`, not yet durable; `None`
    /// if it is empty. A group refused (a poisoned store) or whose write failed (which
    /// poisons the store) comes back with `failed` set and its acks not yet called:
    /// whoever settles groups calls them in turn, so refusals keep submission order too.
    ///
    /// The log's numbers and the stamp go into a batch of the group's own, written first
    /// (an engine that keeps a batch written before a crash, on disk a journal write the
    /// kill did not undo, keeps the group whole). If the engine refuses the group for
    /// slots this process does not own, the numbers are taken back and the group is
    /// written again without those slots' batches, whose acks are told
    /// `StoreError::NotOwner`: the numbers a write gives are those of the write that
    /// commits, so the log has no gap.
    fn write_group(&self, group: Vec<Pending>, generation: u64) -> Option<Written> {
        if group.is_empty() {
            return None;
        }
        if let Some(stages) = self.stages.get() {
            for pending in &group {
                stages.since(Stage::Queued, pending.submitted);
            }
        }
        let (mut batches, acks): (Vec<Batch>, Vec<Ack>) =
            group.into_iter().map(|p| (p.batch, p.ack)).unzip();
        if let Some(err) = self.refusal() {
            return Some(Written {
                firsts: Vec::new(),
                acks,
                log_end: 0,
                bytes: 0,
                keys: 0,
                started: Instant::now(),
                failed: Some(err),
            });
        }
        let started = Instant::now();
        // For each ack, where its batch is in `batches` (`Ok`), or its refusal.
        let mut places: Vec<Result<usize, StoreError>> = (0..batches.len()).map(Ok).collect();
        // A change made under an epoch of its slot that has passed is not written: it may
        // build on one the engine refused.
        if batches.iter().any(|b| self.is_stale(b)) {
            let group = std::mem::take(&mut batches);
            self.without(group, |b| self.stale(b), &mut batches, &mut places);
        }
        loop {
            let mut head = Batch::new();
            // Numbered and stamped as committed: in commit order, and after every batch
            // of the group was made.
            let (firsts, log_end, appended) = self.number(&batches, &mut head);
            if let Some(stamp) = lock(&self.stamp).as_ref() {
                stamp(&mut head);
            }
            let places_now = places.clone();
            let bytes = head.bytes() + batches.iter().map(Batch::bytes).sum::<u64>();
            let keys = (head.len() + batches.iter().map(Batch::len).sum::<usize>()) as u64;
            let mut group = Vec::with_capacity(batches.len() + 1);
            group.push(head);
            group.append(&mut batches);
            let mut written = Written {
                acks: Vec::new(),
                firsts: Vec::new(),
                log_end,
                bytes,
                keys,
                started,
                failed: None,
            };
            // Written into the engine, which may take the batches; what it leaves is no
            // longer needed.
            let (writing, before) = (Instant::now(), self.activity());
            let wrote = self.write(&mut group, generation);
            self.measure(Stage::Write, writing, before);
            written.firsts = places_now
                .iter()
                .map(|place| place.clone().map(|at| firsts[at]))
                .collect();
            match wrote {
                Ok(_) => {}
                Err(Refused::NotOwner(slots)) => {
                    if let Some(appended) = appended {
                        lock(&self.log).undo(appended);
                    }
                    let left = group.split_off(1);
                    let refused = |batch: &Batch| {
                        let slot = batch.slot().filter(|slot| slots.contains(slot))?;
                        tracing::warn!(store = %self.name, slot = slot.number(), "a change of a slot this process does not own was not written");
                        Some(StoreError::NotOwner {
                            store: Arc::clone(&self.name),
                            slot: slot.number(),
                        })
                    };
                    if self.without(left, refused, &mut batches, &mut places) {
                        // The subjects' later changes may build on the refused ones:
                        // none of the epoch they were made under is written any more.
                        for slot in &slots {
                            self.epochs[usize::from(slot.number())].fetch_add(1, Ordering::AcqRel);
                        }
                        continue;
                    }
                    // The engine refused a slot no batch names: not an engine's answer.
                    let err = StoreError::Write {
                        store: Arc::clone(&self.name),
                        cause: format!(
                            "the engine refused slots {slots:?}, which no batch of the group names"
                        ),
                    };
                    self.poison_with(&err);
                    written.failed = Some(err);
                }
                Err(Refused::Failed(err)) => {
                    // Poisoned now, so nothing is written after it; its acks are told
                    // in turn.
                    self.poison_with(&err);
                    written.failed = Some(err);
                }
            }
            written.acks = acks;
            return Some(written);
        }
    }

    /// The refusal of `batch` if it is fenced under an epoch of its slot that has
    /// passed.
    fn stale(&self, batch: &Batch) -> Option<StoreError> {
        let (slot, epoch) = (batch.slot()?, batch.epoch()?);
        self.is_stale(batch).then(|| {
            tracing::warn!(store = %self.name, slot = slot.number(), epoch, "a change made under an epoch of its slot that has passed was not written");
            StoreError::Stale {
                store: Arc::clone(&self.name),
                slot: slot.number(),
                epoch,
            }
        })
    }

    /// Takes out of `group` (batches in order) those `refuse` refuses, their places
    /// told the refusal; the rest are `batches`, to be written. `false` if none was
    /// taken out.
    fn without(
        &self,
        group: Vec<Batch>,
        refuse: impl Fn(&Batch) -> Option<StoreError>,
        batches: &mut Vec<Batch>,
        places: &mut [Result<usize, StoreError>],
    ) -> bool {
        let mut taken = false;
        let mut kept = Vec::with_capacity(group.len());
        // Where each batch of `group` goes now: kept at its new index, or refused.
        let mut moved: Vec<Result<usize, StoreError>> = Vec::with_capacity(group.len());
        for batch in group {
            match refuse(&batch) {
                Some(refusal) => {
                    taken = true;
                    moved.push(Err(refusal));
                }
                None => {
                    moved.push(Ok(kept.len()));
                    kept.push(batch);
                }
            }
        }
        for place in places.iter_mut() {
            if let Ok(at) = *place
                && let Some(now) = moved.get(at)
            {
                *place = now.clone();
            }
        }
        *batches = kept;
        taken
    }

    /// Tells the acks of `groups`, written in this order, the fate of the sync that
    /// covered them all; how many batches it acknowledged durable.
    fn settle(&self, groups: Vec<Written>, synced: Result<bool, StoreError>) -> usize {
        match synced {
            Ok(true) => {
                let Some(last) = groups.last() else {
                    return 0;
                };
                lock(&self.log).made_durable(last.log_end);
                // Batches refused as not owned were not written.
                let count = groups
                    .iter()
                    .flat_map(|g| g.firsts.iter())
                    .filter(|first| first.is_ok())
                    .count();
                self.syncs.fetch_add(1, Ordering::Relaxed);
                self.batches.fetch_add(count as u64, Ordering::Relaxed);
                self.largest_group
                    .fetch_max(count as u64, Ordering::Relaxed);
                let micros =
                    u64::try_from(groups[0].started.elapsed().as_micros()).unwrap_or(u64::MAX);
                self.commit_micros.fetch_add(micros, Ordering::Relaxed);
                let at = Instant::now();
                for group in groups {
                    self.bytes.fetch_add(group.bytes, Ordering::Relaxed);
                    self.keys.fetch_add(group.keys, Ordering::Relaxed);
                    for (ack, first) in group.acks.into_iter().zip(group.firsts) {
                        ack(first.map(|log| Receipt { log, at }));
                    }
                }
                count
            }
            // Lost in a crash: no one is told, as no one would be.
            Ok(false) => 0,
            Err(err) => {
                self.fail(groups, &err);
                0
            }
        }
    }

    /// Stops the store after `err`, a failed write or sync, and tells the acks of
    /// `groups`, in order: a group that failed on its own is told its own failure.
    fn fail(&self, groups: Vec<Written>, err: &StoreError) {
        self.poison_with(err);
        for group in groups {
            let told = group.failed.unwrap_or_else(|| err.clone());
            let mut firsts = group.firsts.into_iter();
            for ack in group.acks {
                // A batch refused for its slot was never written: it is told so.
                match firsts.next() {
                    Some(Err(
                        refused @ (StoreError::NotOwner { .. } | StoreError::Stale { .. }),
                    )) => ack(Err(refused)),
                    _ => ack(Err(told.clone())),
                }
            }
        }
    }

    /// Stops the store after `err`; only the first failure is kept as the poison.
    fn poison_with(&self, err: &StoreError) {
        {
            let mut poison = lock(&self.poison);
            if poison.is_none() {
                tracing::error!(store = %self.name, error = %err, "store stopped: nothing is acknowledged after a failed write or sync");
                *poison = Some(Arc::new(err.clone()));
            }
        }
        self.poisoned.store(true, Ordering::Release);
    }

    /// Hands the group to the engine, not yet durable.
    fn write(&self, batches: &mut Vec<Batch>, generation: u64) -> Result<(), Refused> {
        self.engine
            .write(batches, generation)
            .map_err(|failure| match failure {
                WriteFailure::NotOwner(slots) => Refused::NotOwner(slots),
                WriteFailure::Failed(cause) => Refused::Failed(StoreError::Write {
                    store: Arc::clone(&self.name),
                    cause,
                }),
            })
    }

    /// Makes the groups written durable; `false` if a simulated crash since they were
    /// taken lost them.
    fn sync(&self) -> Result<bool, StoreError> {
        let (syncing, before) = (Instant::now(), self.activity());
        let synced = self.engine.sync();
        self.measure(Stage::Sync, syncing, before);
        synced.map_err(|cause| StoreError::Sync {
            store: Arc::clone(&self.name),
            cause,
        })
    }

    /// The refusal of a read on a poisoned store: on disk it could see what was written
    /// and never made durable.
    fn refuse_if_poisoned(&self) -> Result<(), StoreError> {
        self.refusal().map_or(Ok(()), Err)
    }

    /// The failure that stopped the store, if one did.
    pub(crate) fn failure(&self) -> Option<Arc<StoreError>> {
        lock(&self.poison).clone()
    }

    /// What everything is told once a failure stopped the store, naming it.
    fn refusal(&self) -> Option<StoreError> {
        lock(&self.poison)
            .clone()
            .map(|first| StoreError::Poisoned {
                store: Arc::clone(&self.name),
                first,
            })
    }

    /// A read of `space` by `read`, refused on a poisoned store; a failure names the
    /// space (and `key`, if the read named one).
    fn read<T>(
        &self,
        space: Space,
        key: Option<&[u8]>,
        read: impl FnOnce(&dyn Engine) -> Result<T, ReadFailure>,
    ) -> Result<T, StoreError> {
        self.refuse_if_poisoned()?;
        read(&*self.engine).map_err(|failure| self.failed(space, key, failure))
    }

    /// One key's value.
    pub(super) fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.read(space, Some(key), |e| e.get(space, key))
    }

    /// Up to `limit` entries of a space from `from` on, in key order.
    pub(super) fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, StoreError> {
        self.read(space, Some(from), |e| {
            e.range_from(space, from, within, limit)
        })
    }

    /// A space's entries whose keys start with `prefix`, in key order.
    pub(super) fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, StoreError> {
        self.read(space, Some(prefix), |e| e.prefixed(space, prefix))
    }

    /// A whole space, in key order.
    pub(super) fn scan(&self, space: Space) -> Result<Entries, StoreError> {
        self.read(space, None, |e| e.scan(space))
    }

    /// A failed read of `space` (at `key`, if it named one): damage, or another failure.
    fn failed(&self, space: Space, key: Option<&[u8]>, failure: ReadFailure) -> StoreError {
        failure.into_error(&self.name, space, key)
    }

    /// The engine as the next process finds it after a simulated crash, if it has one.
    pub(super) fn reopened(&self) -> Option<Arc<dyn Engine>> {
        self.engine.reopened()
    }

    /// Drops every pending batch of an engine that simulates crashes (the memory
    /// engine), and clears the poison.
    pub(super) fn crash(&self) {
        // The queue lock first, as `take` does: a group taken before this is lost by the
        // generation, one not taken is dropped here.
        let mut queue = lock(&self.queue);
        if !self.engine.crash() {
            return;
        }
        let lost = std::mem::take(&mut queue.pending);
        drop(queue);
        drop(lost);
        *lock(&self.poison) = None;
        self.poisoned.store(false, Ordering::Release);
    }

    /// Whether a failure stopped the store.
    pub(super) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    /// The figures so far.
    pub(super) fn stats(&self) -> Stats {
        Stats {
            syncs: self.syncs.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            keys: self.keys.load(Ordering::Relaxed),
            largest_group: self.largest_group.load(Ordering::Relaxed),
            commit_micros: self.commit_micros.load(Ordering::Relaxed),
        }
    }
}

// Both run the sync thread, which only the disk engine has.
#[cfg(all(test, feature = "disk"))]
mod tests {
    use super::*;
    use crate::store::Faults;
    use crate::store::disk::Disk;
    use crate::store::faulty::Faulty;

    /// A group the writer wrote before it saw a failed sync reaches the sync thread
    /// after it: the sync thread refuses it rather than sync it and acknowledge it.
    #[test]
    fn the_sync_thread_refuses_a_group_handed_after_a_failure() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let disk = Disk::open(&tmp.path().join("data")).expect("opens");
        let faulty = Arc::new(Faulty::new(Arc::new(disk), Faults::default()));
        let shared = Shared::new(Arc::from("data"), Arc::clone(&faulty) as Arc<dyn Engine>);
        let failure = StoreError::Sync {
            store: Arc::from("data"),
            cause: "an earlier sync failed".to_owned(),
        };
        shared.fail(Vec::new(), &failure);
        let (tx, rx) = std::sync::mpsc::channel();
        let written = Written {
            acks: vec![Box::new(move |fate| {
                let _ = tx.send(fate);
            })],
            firsts: vec![Ok(1)],
            log_end: 1,
            bytes: 0,
            keys: 0,
            started: Instant::now(),
            failed: None,
        };
        {
            let mut handed = lock(&shared.handoff.state);
            handed.written.push(written);
            handed.closed = true;
        }
        shared.sync_handed(&shared.handoff);
        let fate = rx.try_recv().expect("the ack was called");
        assert!(
            matches!(&fate, Err(StoreError::Poisoned { first, .. }) if first.to_string().contains("an earlier sync failed")),
            "{fate:?}"
        );
        assert_eq!(shared.stats().syncs, 0, "nothing was synced");
        assert_eq!(faulty.syncs_tried(), 0, "nor tried");
        shared.release();
    }

    /// A group whose own write failed, handed behind one written before it, is told its
    /// own failure after the earlier group is refused: acks keep submission order, and
    /// each is told what happened to its own batch. Before, the writer called a refused
    /// group's acks itself, ahead of the groups the sync thread had not settled.
    #[test]
    fn refusals_reach_their_acks_in_the_order_handed() {
        let tmp = tempfile::tempdir().expect("a temporary directory");
        let disk = Disk::open(&tmp.path().join("data")).expect("opens");
        let shared = Shared::new(Arc::from("data"), Arc::new(disk));
        let (tx, rx) = std::sync::mpsc::channel();
        let group = |tag: u32, failed: Option<StoreError>| {
            let tx = tx.clone();
            Written {
                acks: vec![Box::new(move |fate| {
                    let _ = tx.send((tag, fate));
                })],
                firsts: vec![Ok(1)],
                log_end: 1,
                bytes: 0,
                keys: 0,
                started: Instant::now(),
                failed,
            }
        };
        let write_failed = StoreError::Write {
            store: Arc::from("data"),
            cause: "no space left on device".to_owned(),
        };
        let earlier = group(0, None);
        shared.poison_with(&write_failed);
        let failed = group(1, Some(write_failed));
        let refused = shared.write_group(
            vec![Pending {
                batch: Batch::new(),
                ack: Box::new(move |fate| {
                    let _ = tx.send((2, fate));
                }),
                submitted: Instant::now(),
            }],
            0,
        );
        let refused = refused.expect("a refused group is handed, not told at once");
        assert!(rx.try_recv().is_err(), "no ack was called yet");
        {
            let mut handed = lock(&shared.handoff.state);
            handed.written.extend([earlier, failed, refused]);
            handed.closed = true;
        }
        shared.sync_handed(&shared.handoff);
        let fates: Vec<_> = rx.try_iter().collect();
        assert_eq!(
            fates.iter().map(|(tag, _)| *tag).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(
            matches!(&fates[0].1, Err(StoreError::Poisoned { .. })),
            "{fates:?}"
        );
        assert!(
            matches!(&fates[1].1, Err(StoreError::Write { .. })),
            "{fates:?}"
        );
        assert!(
            matches!(&fates[2].1, Err(StoreError::Poisoned { .. })),
            "{fates:?}"
        );
        assert_eq!(shared.stats().syncs, 0, "nothing was synced");
        shared.release();
    }
}
