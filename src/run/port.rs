//! What a run's activation needs of the runtime, as a trait: the operations of its
//! [`Ctx`](super::Ctx) and the report of its end. The subjects implement it
//! (`crate::subject::client`), so this module, and the run beside it, never name a
//! subject, and nothing imports in a circle.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::ask::Ask;
use crate::depth;
use crate::entry::Entry;
use crate::error::{AskError, CancelError, IdProblem, ResumeError, StartError, TakeError};
use crate::record::{Resumed, RunRecord};
use crate::run::journal::JournalEntry;
use crate::services::{Services, Waiter};

/// A boxed future, as the port's methods return.
pub(crate) type Boxed<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The runtime as an activation sees it. The operations take the port by `Arc`, so a
/// subject's actor can be spawned from inside one.
pub(crate) trait Port: Send + Sync {
    /// The leaf services.
    fn services(&self) -> &Services;

    /// Park an ask of `run` on `subject`; returns the interaction id. For a `sync` ask,
    /// `waiter` is where the answer goes.
    fn park<'a>(
        self: Arc<Self>,
        asker: Asker<'a>,
        ask: Ask,
        waiter: Option<Waiter>,
    ) -> Boxed<'a, Result<String, AskError>>;

    /// Start a run and wait for the record its first activation ends with.
    fn run_to_end(
        self: Arc<Self>,
        spec: StartSpec,
    ) -> Boxed<'static, Result<RunRecord, StartError>>;

    /// Every parked entry on `subject`, oldest first.
    fn list<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
    ) -> Boxed<'a, Result<Vec<Entry>, StartError>>;

    /// Resume the ask `interaction` with `payload`; `resumer` receives the outcome.
    fn resume<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
        interaction: &'a str,
        payload: Value,
        resumer: Option<Arc<str>>,
    ) -> Boxed<'a, Result<Resumed, ResumeError>>;

    /// Take the waiting outcome `interaction`.
    fn take<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
        interaction: &'a str,
        taker: Option<Arc<str>>,
    ) -> Boxed<'a, Result<Value, TakeError>>;

    /// Cancel each of `ids`: all are checked first, and any problem refuses them all.
    fn cancel<'a>(
        self: Arc<Self>,
        subject: &'a Arc<str>,
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
    ) -> Boxed<'a, Result<(), CancelError>>;

    /// Report an activation's end to its subject.
    fn ended(self: Arc<Self>, subject: Arc<str>, ending: Ending) -> Boxed<'static, ()>;
}

/// The activation raising an ask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asker<'a> {
    pub(crate) subject: &'a Arc<str>,
    pub(crate) run: &'a Arc<str>,
    pub(crate) epoch: u64,
    /// The run's lineage, for `asked_by`.
    pub(crate) lineage: &'a Arc<[String]>,
}

/// What an activation did, handed back at its end.
#[derive(Debug, Default)]
pub(crate) struct Replay {
    /// The journal, replayed and extended.
    pub(crate) journal: Vec<JournalEntry>,
    /// The next journal entry a replay meets.
    pub(crate) cursor: usize,
    /// Why the replay left its journal, if it did.
    pub(crate) diverged: Option<String>,
    /// An ask of this activation refused at a ceiling or as invalid: the run fails
    /// with it if it parks anyway.
    pub(crate) refused: Option<String>,
}

/// The end of one activation, as its run reports it.
#[derive(Debug)]
pub(crate) struct Ending {
    pub(crate) run: Arc<str>,
    /// Which activation.
    pub(crate) epoch: u64,
    /// What the target returned.
    pub(crate) result: Result<Value, crate::error::RunError>,
    /// Its journal and what it did.
    pub(crate) replay: Replay,
}

/// Who started a run.
#[derive(Debug, Clone)]
pub(crate) enum Parent {
    /// A door visit or the public API: the top of a chain.
    Top,
    /// Another run, through `ctx.call`.
    Run {
        /// The calling run.
        run: Arc<str>,
        /// Its lineage, which the child extends.
        lineage: Arc<[String]>,
    },
}

/// What to start.
#[derive(Debug, Clone)]
pub(crate) struct StartSpec {
    /// The subject to run on.
    pub(crate) subject: Arc<str>,
    /// The target's name.
    pub(crate) target: String,
    /// Its kwargs (a JSON object).
    pub(crate) kwargs: Value,
    /// Its extras (a JSON object of declared keys).
    pub(crate) extras: Value,
    /// The principal it runs as.
    pub(crate) identity: Arc<str>,
    /// Who started it.
    pub(crate) parent: Parent,
    /// The idempotency key it is started under, kept with its start.
    pub(crate) key: Option<Keyed>,
}

/// An idempotency key claimed for a start: its name in the key table, and the request's
/// fingerprint.
#[derive(Debug, Clone)]
pub(crate) struct Keyed {
    pub(crate) name: String,
    pub(crate) fingerprint: u64,
}

impl StartSpec {
    /// The spec back if its kwargs and extras are within the depth limit; else both are
    /// dropped level by level and the start is refused (`crate::depth`).
    pub(crate) fn checked(mut self) -> Result<Self, StartError> {
        let what = if depth::too_deep(&self.kwargs) {
            "kwargs"
        } else if depth::too_deep(&self.extras) {
            "extras"
        } else {
            return Ok(self);
        };
        depth::drop_deep(std::mem::take(&mut self.kwargs));
        depth::drop_deep(std::mem::take(&mut self.extras));
        Err(StartError::TooDeep {
            what,
            limit: depth::MAX_VALUE_DEPTH,
        })
    }
}

/// The resume payload for `interaction` if it is within the depth limit; else it is
/// dropped level by level and the resume refused (`crate::depth`).
pub(crate) fn checked_payload(interaction: &str, payload: Value) -> Result<Value, ResumeError> {
    depth::check(payload, || {
        ResumeError::Refused(IdProblem::TooDeep {
            id: interaction.to_owned(),
            limit: depth::MAX_VALUE_DEPTH,
        })
    })
}
