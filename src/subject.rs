//! Subjects: one actor per subject owns its parked set and handles one message at a time.
//!
//! - [`state`]: the parked set, the runs living on the subject, their groups and
//!   receivers, and every transition of them. Plain data, so a passive subject is just
//!   this value, packed, in the registry.
//! - [`actor`]: the actor that owns a state while the subject is active.
//! - [`registry`]: finds or spawns a subject's actor, and passivates idle ones without
//!   losing or double-handling a message that races the passivation.
//! - [`packed`]: a passive subject's state, packed into compact text.

pub(crate) mod actor;
pub(crate) mod packed;
pub(crate) mod registry;
pub(crate) mod state;

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use crate::ask::{Ask, Checked};
use crate::entry::Entry;
use crate::error::{AskError, IdProblem, RunError};
use crate::record::RunRecord;
use crate::run::ctx::Replay;
use crate::shared::Parent;
use crate::supervisor::TimerKey;
use crate::target::Target;

pub(crate) use registry::Subjects;

/// Whoever takes a run's next outcome inline.
pub(crate) type Receiver = oneshot::Sender<RunRecord>;

/// The answer to a resume, before the run's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ack {
    /// The run resumes (or will, when its running activation ends); the receiver gets
    /// the outcome.
    Started,
    /// Other asks of the group are still open.
    Buffered {
        /// How many.
        remaining: usize,
    },
}

/// The end of one activation, as its run actor reports it.
#[derive(Debug)]
pub(crate) struct Ending {
    /// The run.
    pub(crate) run: Arc<str>,
    /// Which activation.
    pub(crate) epoch: u64,
    /// What the target returned.
    pub(crate) result: Result<Value, RunError>,
    /// Its journal and what it did.
    pub(crate) replay: Replay,
}

/// What a subject actor is asked to do.
#[derive(Debug)]
pub(crate) enum SubjectMsg {
    /// Start a run on this subject.
    Start {
        /// The target.
        target: Arc<Target>,
        /// Its kwargs.
        kwargs: Value,
        /// Its extras.
        extras: Value,
        /// The principal.
        identity: Arc<str>,
        /// Who started it.
        parent: Parent,
        /// Who takes the outcome of its first activation.
        receiver: Option<Receiver>,
        /// The new run's id.
        reply: oneshot::Sender<Arc<str>>,
    },
    /// A run parks an ask.
    Ask {
        /// The asking run.
        run: Arc<str>,
        /// Its activation.
        epoch: u64,
        /// Its lineage, for `asked_by`.
        lineage: Arc<[String]>,
        /// The ask.
        ask: Ask,
        /// What validation settled.
        checked: Checked,
        /// The interaction id the asking run made for it.
        id: String,
        /// For a `sync` user ask: where the answer goes.
        waiter: Option<oneshot::Sender<Value>>,
        /// For a `sync` user ask, whether it was stored or why not. An async ask awaits
        /// no reply: a refusal can only mean its run was torn down, and the teardown
        /// aborts the run's activation.
        reply: Option<oneshot::Sender<Result<String, AskError>>>,
    },
    /// An activation ended.
    Ended(Box<Ending>),
    /// Read the parked set.
    List {
        /// The entries, oldest first.
        reply: oneshot::Sender<Vec<Entry>>,
    },
    /// Recall how an interaction was resolved, for the answer door.
    Recall {
        /// The interaction.
        interaction: String,
        /// `already resolved`, if the subject remembers it.
        reply: oneshot::Sender<Option<IdProblem>>,
    },
    /// Resume an ask with an answer.
    Resume {
        /// The interaction.
        interaction: String,
        /// The answer.
        payload: Value,
        /// Who takes the run's next outcome.
        receiver: Option<Receiver>,
        /// The run doing the resume, if a run is.
        resumer: Option<Arc<str>>,
        /// Started, buffered, or refused.
        reply: oneshot::Sender<Result<Ack, IdProblem>>,
    },
    /// Take a waiting outcome.
    Take {
        /// The interaction.
        interaction: String,
        /// The run doing the take, if a run is.
        taker: Option<Arc<str>>,
        /// The result or the raised error, or why not.
        reply: oneshot::Sender<Result<Result<Value, String>, IdProblem>>,
    },
    /// Cancel parked interactions.
    Cancel {
        /// The interactions.
        ids: Vec<String>,
        /// The run doing the cancel, below which chains stop.
        canceller: Option<Arc<str>>,
        /// Done, or every problem.
        reply: oneshot::Sender<Result<(), Vec<IdProblem>>>,
    },
    /// An ask's deadline timer fired.
    Expire {
        /// The interaction.
        interaction: Arc<str>,
        /// The timer.
        key: TimerKey,
    },
    /// A waiting outcome's retention timer fired.
    Retire {
        /// The interaction.
        interaction: Arc<str>,
        /// The timer.
        key: TimerKey,
    },
    /// A door visit: evaluate, check, and apply, or refuse whole.
    Visit {
        /// The door.
        door: Arc<crate::door::saved::Saved>,
        /// The input document.
        input: Value,
        /// What was applied, or every problem.
        reply: oneshot::Sender<Result<state::Applied, Vec<crate::door::plan::VisitProblem>>>,
    },
    /// A schedule fired: visit with no receiver, without anybody waiting on the visit; a
    /// refusal is published as an event.
    Scheduled {
        /// The schedule.
        door: Arc<crate::door::saved::Saved>,
        /// The fire's input document.
        input: Value,
    },
    /// The idle check fired.
    Idle {
        /// The timer.
        key: TimerKey,
    },
}
