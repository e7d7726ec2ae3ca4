//! Subjects: one actor per subject owns its parked set and handles one message at a time.
//!
//! - [`state`]: the parked set, the runs living on the subject, their groups and
//!   receivers, and every transition of them: a function of the state, one operation
//!   and a [`effect::Step`] (time, ids, settings) that returns effects as data.
//! - [`effect`]: the effects, and the step that collects them.
//! - [`actor`]: the actor that owns a state while the subject is active, evaluates a
//!   visit's contract, and applies the effects of each transition.
//! - [`registry`]: finds or spawns a subject's actor, and passivates idle ones without
//!   losing or double-handling a message that races the passivation.
//! - [`packed`]: a passive subject's state, packed into compact text.
//! - [`hub`]: the registry and what the subjects' effects feed (inbox, records,
//!   supervisor), beside the leaf services and the doors.
//! - [`client`]: the operations everything else goes through (start, park, list, resume,
//!   take, cancel, visit, answer), each a [`Msg`] to the subject and an await on its
//!   reply.
//! - [`records`]: where every run's record is read.
//! - [`durable`]: what a subject's change is in the store, and reading it back.
//! - [`index`]: what the store keeps beside each subject so an open reads only the
//!   subjects it needs: heads, the wake index, the run index.
//! - [`upgrade`]: a data directory of the older format upgraded when it is opened.

pub(crate) mod actor;
pub(crate) mod client;
// What `parkway check` decodes each value with (the `disk` feature's).
#[cfg(feature = "disk")]
pub(crate) mod decode;
pub(crate) mod durable;
pub(crate) mod effect;
pub(crate) mod hub;
pub(crate) mod index;
pub(crate) mod keyed;
pub(crate) mod open;
pub(crate) mod packed;
pub(crate) mod records;
pub(crate) mod registry;
pub(crate) mod reply;
pub(crate) mod slots;
pub(crate) mod state;
pub(crate) mod turn;
pub(crate) mod upgrade;

use std::sync::Arc;

use serde_json::Value;

use crate::ask::{Ask, Checked};
use crate::door::saved::Saved;
use crate::ids::ReplyId;
use crate::run::port::{Ending, Parent};
use crate::supervisor::TimerKey;
use crate::target::Target;
use reply::Brought;

pub(crate) use hub::Hub;

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

/// How long a subject whose slot is handed over waits for its running activations to
/// park or end before it unloads anyway (they are then replayed by the slot's next owner).
pub(crate) const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What a subject's mailbox takes.
#[derive(Debug)]
// Operations are nearly every message; boxing them would cost an allocation each.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Msg {
    /// An operation on the state, with the channels it names.
    Op(Op, Brought),
    /// A door visit: evaluate the contract, then check and apply, or refuse whole.
    Visit {
        /// The door, as the visit found it.
        door: Arc<Saved>,
        /// The input document.
        input: Value,
        /// What was applied, or every problem; `None` for a schedule's fire, whose
        /// refusal is published as an event.
        reply: Option<ReplyId>,
        /// The reply's channel.
        brought: Brought,
        /// For a schedule's fire, the boundary it was armed for: a boundary the subject
        /// fired already (another process's fire of it) is not applied.
        fire: Option<chrono::DateTime<chrono::Utc>>,
    },
    /// The store's acknowledgement of the oldest change not yet durable: its effects are
    /// released, or, on a failure, the runtime stops (or, when the store refused the
    /// subject's slot, the subject unloads). With the slot's epoch the change was made
    /// under: one of another epoch is an earlier actor's, and not this state's.
    Durable(Result<crate::store::Receipt, crate::store::StoreError>, u32),
    /// The runtime gave up the subject's slot: unload once nothing written is pending
    /// (`subject::slots`).
    Unload,
    /// The runtime hands the subject's slot over to another node: as [`Msg::Unload`],
    /// but the subject's running activations may first park or end (their messages
    /// are taken, and what they change written), for at most [`DRAIN_WAIT`]; then it
    /// unloads, as told by a [`Msg::Unload`] it sends itself.
    Drain,
    /// More subjects hold an actor than `max_live_subjects` and this one has been idle
    /// the longest: passivate if still idle (`Registry::evict_idlest`).
    Evict,
}

impl Msg {
    /// Whether the message answers something the subject started: the store's
    /// acknowledgement, or the supervisor's walk.
    pub(crate) fn is_answer(&self) -> bool {
        matches!(self, Msg::Durable(..) | Msg::Op(Op::Walked { .. }, _))
    }

    /// Whether the message is one of the subject's own activations': a run parking an
    /// ask, ending, or calling a child (a chain never leaves its subject).
    pub(crate) fn is_from_activation(&self) -> bool {
        matches!(
            self,
            Msg::Op(Op::Ask { .. } | Op::Ended(_), _)
                | Msg::Op(
                    Op::Start {
                        parent: crate::run::port::Parent::Run { .. },
                        ..
                    },
                    _
                )
        )
    }

    /// An operation that names no channel.
    pub(crate) fn op(op: Op) -> Msg {
        Msg::Op(op, Brought::none())
    }
}

/// One operation on a subject's state (`State::handle`).
#[derive(Debug)]
pub(crate) enum Op {
    /// Start a run on this subject.
    Start {
        target: Arc<Target>,
        kwargs: Value,
        extras: Value,
        /// The principal.
        identity: Arc<str>,
        parent: Parent,
        /// Who takes the outcome of its first activation.
        receiver: Option<ReplyId>,
        /// The idempotency key it is started under, kept in the same change.
        key: Option<crate::run::port::Keyed>,
        /// The new run's id.
        reply: ReplyId,
    },
    /// A run parks an ask.
    Ask {
        run: Arc<str>,
        /// The asking activation.
        epoch: u64,
        /// The run's lineage, for `asked_by`.
        lineage: Arc<[String]>,
        ask: Ask,
        /// What validation settled.
        checked: Checked,
        /// The interaction id the asking run made for it.
        id: String,
        /// For a `sync` user ask: where the answer goes.
        waiter: Option<ReplyId>,
        /// For a `sync` user ask, whether it was stored or why not. An async ask awaits
        /// no reply: a refusal can only mean its run was torn down, and the teardown
        /// aborts the run's activation.
        reply: Option<ReplyId>,
    },
    /// An activation ended.
    Ended(Box<Ending>),
    /// Read the parked set, oldest first.
    List { reply: ReplyId },
    /// The record of a run living on the subject, as it stands.
    Record { run: String, reply: ReplyId },
    /// Recall how an interaction was resolved, for the answer door.
    Recall {
        interaction: String,
        /// `already resolved`, if the subject remembers it.
        reply: ReplyId,
    },
    /// Resume an ask with an answer.
    Resume {
        interaction: String,
        payload: Value,
        /// Who takes the run's next outcome.
        receiver: Option<ReplyId>,
        /// The run doing the resume, if a run is.
        resumer: Option<Arc<str>>,
        reply: ReplyId,
    },
    /// Take a waiting outcome.
    Take {
        interaction: String,
        /// The run doing the take, if a run is.
        taker: Option<Arc<str>>,
        /// The result or the raised error, or why not.
        reply: ReplyId,
    },
    /// Cancel parked interactions.
    Cancel {
        ids: Vec<String>,
        /// The run doing the cancel, below which chains stop.
        canceller: Option<Arc<str>>,
        /// Done, or every problem.
        reply: ReplyId,
    },
    /// An ask's deadline timer fired.
    Expire {
        interaction: Arc<str>,
        key: TimerKey,
    },
    /// A waiting outcome's retention timer fired.
    Retire {
        interaction: Arc<str>,
        key: TimerKey,
    },
    /// The idle check fired.
    Idle { key: TimerKey },
    /// The state was read back from the store after a restart (`State::recover`): the
    /// reply says it is recovered and counted.
    Recover { reply: ReplyId },
    /// After a restart: a resumed run's outcome was durable but its receiver was lost in
    /// the crash. It is left waiting under the interaction that resumed the run.
    Undelivered {
        waiting: effect::Waiting,
        reply: ReplyId,
    },
    /// Every subject is recovered: replay the runs that were executing
    /// (`State::replay`).
    Replay,
    /// The supervisor's walk for a waiting teardown (`State::walked`): the chain of each
    /// run it asked about, in the order asked.
    Walked {
        /// The teardown's token.
        token: u64,
        /// The chains, each asker first.
        chains: Vec<Vec<Arc<str>>>,
    },
}
