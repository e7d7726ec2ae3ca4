//! Where a durable change spends its time, stage by stage, and what the store's engine
//! was doing when a stage stalled: told, only when asked
//! ([`Builder::measure_stages`](crate::Builder::measure_stages)), to a [`StageSink`] the
//! embedder gives (the load tool keeps histograms of them).
//!
//! A subject's change goes through these stages:
//!
//! - `turn`: the subject's own turn, from taking a message to handing its change to the
//!   store (the transition, its keys, and the turn's other messages);
//! - `queued`: from the hand-off to the moment the writer takes the group it is in;
//! - `write`: the group's write into the engine (per group);
//! - `sync`: the sync that makes it durable (per sync; on disk, while the writer writes
//!   the next group);
//! - `durable`: from the hand-off to the acknowledgement (the three before, and the wait
//!   for the sync thread);
//! - `delivery`: from the acknowledgement, on the store's thread, to the subject taking it
//!   from its mailbox and releasing the change's effects.
//!
//! A stall is a group's write, or a sync, longer than [`STALL`]: the engine's activity as
//! it began and as it ended goes with it (`Engine::activity`).

use std::time::{Duration, Instant};

/// A write or a sync longer than this is a stall, told with the engine's activity.
pub const STALL: Duration = Duration::from_millis(5);

/// One stage of a durable change.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The subject's own turn.
    Turn,
    /// Waiting for the writer.
    Queued,
    /// The engine's write of a group.
    Write,
    /// A sync.
    Sync,
    /// From the hand-off to the acknowledgement.
    Durable,
    /// From the acknowledgement to the subject.
    Delivery,
}

impl Stage {
    /// Every stage, in the order a change goes through them.
    pub const ALL: [Stage; 6] = [
        Stage::Turn,
        Stage::Queued,
        Stage::Write,
        Stage::Sync,
        Stage::Durable,
        Stage::Delivery,
    ];

    /// The stage's name in a report.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Turn => "turn",
            Stage::Queued => "queued",
            Stage::Write => "write",
            Stage::Sync => "sync",
            Stage::Durable => "durable",
            Stage::Delivery => "delivery",
        }
    }
}

/// Told how long each stage of each durable change took, from the runtime's and the
/// store's threads: each call must be short.
#[doc(hidden)]
pub trait StageSink: Send + Sync + 'static {
    /// `stage` took `took`.
    fn record(&self, stage: Stage, took: Duration);

    /// A write or a sync (`stage`) took `took`, longer than [`STALL`]; the engine was
    /// doing `began` as it began and `ended` as it ended (each thing it does named, its
    /// kind first: `flushing 2 memtables`). Also told to [`StageSink::record`].
    fn stalled(&self, stage: Stage, took: Duration, began: &[String], ended: &[String]);

    /// `stage` began at `since` and ends now.
    fn since(&self, stage: Stage, since: Instant) {
        self.record(stage, since.elapsed());
    }
}
