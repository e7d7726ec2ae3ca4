//! What a subject's transition asks the world to do, as data.
//!
//! A transition ([`super::state`]) reads the subject's state, one message, the time and
//! the id source, changes the state, and returns its effects in order: replies,
//! outcomes for receivers, events, the user asks the inbox projects, timers to arm or
//! disarm, activations to start or abort, links for the supervisor's run tree. The actor
//! ([`super::actor`]) applies them after the transition, in order; nothing of the
//! world changes inside a transition, so a transition is tested by looking at what it
//! returned, and a durable store can hold the effects back until the change is written.

use std::sync::Arc;

use super::reply::Answer;
use crate::entry::To;
use crate::event::Event;
use crate::ids::{Ids, Kind, ReplyId};
use crate::inbox::InboxItem;
use crate::record::RunRecord;
use crate::run::journal::JournalEntry;
use crate::run::stored::Stored;
use crate::settings::Settings;
use crate::slot::Slot;
use crate::supervisor::{Timer, TimerKey, TimerKeys};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// A resolved run's outcome, left waiting under the id that resumed it when nobody
/// receives it. Kept in the store while it is being delivered (`super::durable`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) struct Waiting {
    /// The interaction whose resolution resumed the run.
    pub(crate) id: String,
    pub(crate) run: Arc<str>,
    pub(crate) outcome: Result<Value, String>,
}

/// Everything an activation needs to start: the run's identity and its journal.
#[derive(Debug)]
pub(crate) struct Launch {
    pub(crate) run: Arc<str>,
    /// Which activation of the run this is; its `Ask` and `Ended` carry it back.
    pub(crate) epoch: u64,
    /// The target's name, looked up when the activation starts.
    pub(crate) target: Arc<str>,
    pub(crate) identity: Arc<str>,
    pub(crate) lineage: Arc<[String]>,
    pub(crate) parent: Option<Arc<str>>,
    pub(crate) journal: Vec<JournalEntry>,
    pub(crate) kwargs: Stored,
    pub(crate) extras: Stored,
}

/// One thing a transition asks for.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Answer whoever awaits the reply `id`.
    Reply(ReplyId, Answer),
    /// Hand a run's record to whoever takes its outcome under `id`; if that receiver has
    /// stopped waiting and the run's outcome can wait, the actor leaves it waiting
    /// (`State::leave_waiting`), so no outcome is lost between transition and delivery.
    Deliver(ReplyId, Box<RunRecord>, Option<Waiting>),
    /// Hand the answer of a `sync` ask to its blocked activation.
    Answer(ReplyId, Value),
    /// Let go of a channel the state kept and no longer needs: whoever waits on it
    /// learns no answer comes (a torn-down `sync` ask's activation, a receiver whose
    /// run will not resume).
    Drop(ReplyId),
    /// Publish a platform event. The inbox removes a user ask on its `ask_resolved`,
    /// and the count of live runs follows `run_started` and the three ends.
    Event(Event),
    /// A user ask was parked: the inbox lists it.
    Offer(Box<InboxItem>),
    /// Arm a timer.
    Arm(TimerKey, Timer),
    /// Disarm a timer.
    Disarm(TimerKey),
    /// Give back one unit of a ceiling (a waiting outcome's unit is a caller's).
    Release(To),
    /// Count a waiting outcome against the caller ceiling.
    CountWaiting,
    /// After a restart: count an entry read back against its ceiling (a waiting
    /// outcome's against the caller's), never refused.
    Occupy(To),
    /// After a restart: count a run read back as live.
    Alive,
    /// A run began on the subject: the hub notes where its record is read.
    Live(Arc<str>),
    /// Keep the record of a run that ended for good, for the retention horizon.
    Record(Box<RunRecord>),
    /// Start an activation; the actor hands its handle back with `State::attach`.
    Activate(Box<Launch>),
    /// The run's activation ended: it is no longer in flight.
    Gone(Arc<str>),
    /// Abort the run's executing activation (torn down); it is no longer in flight.
    Abort(Arc<str>),
    /// Link `run` under `parent` in the supervisor's run tree.
    Link {
        run: Arc<str>,
        parent: Option<Arc<str>>,
    },
    /// Forget `run` in the run tree: it ended, or was torn down.
    Unlink(Arc<str>),
    /// Ask the supervisor to walk the chains of `runs` for the waiting teardown `token`,
    /// each stopping below `canceller`; its answer comes back as `Op::Walked`.
    Walk {
        token: u64,
        runs: Vec<Arc<str>>,
        canceller: Option<Arc<str>>,
    },
    /// The outcome handed to a receiver under this interaction was delivered or left
    /// waiting: the store forgets it as undelivered (`super::durable`).
    Delivered(String),
    /// Keep an idempotency key (`crate::keys`) under its name, with the change that
    /// started its run.
    Keep(String, crate::keys::Kept),
}

/// One transition's inputs besides the state and the message, and the effects it
/// collects.
pub(crate) struct Step<'a> {
    /// The clock's now, read once for the message.
    pub(crate) now: DateTime<Utc>,
    pub(crate) settings: &'a Settings,
    ids: &'a Ids,
    keys: &'a TimerKeys,
    /// In the order the transition made them.
    pub(crate) effects: Vec<Effect>,
    /// The channels the message named that the state now holds (`super::reply`).
    pub(crate) kept: Vec<ReplyId>,
}

impl<'a> Step<'a> {
    /// A step at `now`.
    pub(crate) fn new(
        now: DateTime<Utc>,
        settings: &'a Settings,
        ids: &'a Ids,
        keys: &'a TimerKeys,
    ) -> Self {
        Self {
            now,
            settings,
            ids,
            keys,
            // No allocation for a step that makes no effect (most passivation checks).
            effects: Vec::new(),
            kept: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, effect: Effect) {
        self.effects.push(effect);
    }

    pub(crate) fn publish(&mut self, event: Event) {
        self.effects.push(Effect::Event(event));
    }

    /// Answer whoever awaits `id`.
    pub(crate) fn reply(&mut self, id: ReplyId, answer: Answer) {
        self.effects.push(Effect::Reply(id, answer));
    }

    /// The state holds the channel `id`, which the message named, past this transition.
    pub(crate) fn keep(&mut self, id: Option<ReplyId>) -> Option<ReplyId> {
        if let Some(id) = id {
            self.kept.push(id);
        }
        id
    }

    /// Whether the state holds `id` past this transition.
    pub(crate) fn holds(&self, id: ReplyId) -> bool {
        self.kept.contains(&id)
    }

    /// Let go of the channel `id`, if there is one.
    pub(crate) fn drop_channel(&mut self, id: Option<ReplyId>) {
        if let Some(id) = id {
            self.effects.push(Effect::Drop(id));
        }
    }

    /// A fresh reply id, for an outcome the transition hands out itself (a visit's).
    pub(crate) fn reply_id(&self) -> ReplyId {
        self.ids.reply()
    }

    /// A fresh id.
    pub(crate) fn id(&self, kind: Kind) -> String {
        self.ids.next(kind)
    }

    /// A fresh run id for a run on a subject of `slot` ([`Ids::run`]).
    pub(crate) fn run_id(&self, slot: Slot) -> String {
        self.ids.run(slot)
    }

    /// Arm `timer` at `at`; its key disarms it.
    pub(crate) fn arm(&mut self, at: DateTime<Utc>, timer: Timer) -> TimerKey {
        let key = self.keys.key(at);
        self.effects.push(Effect::Arm(key, timer));
        key
    }

    /// Arm `timer` again under `key`, a key kept in the store (the keys made from now on
    /// come after every key the store keeps: `durable::stamp`).
    pub(crate) fn rearm(&mut self, key: TimerKey, timer: Timer) {
        self.effects.push(Effect::Arm(key, timer));
    }

    pub(crate) fn disarm(&mut self, key: TimerKey) {
        self.effects.push(Effect::Disarm(key));
    }

    /// When the retention horizon that starts at `at` ends (the end of time if it
    /// overflows).
    pub(crate) fn retention_end(&self, at: DateTime<Utc>) -> DateTime<Utc> {
        chrono::Duration::from_std(self.settings.waiting_retention)
            .ok()
            .and_then(|d| at.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// The effects, in order.
    pub(crate) fn into_effects(self) -> Vec<Effect> {
        self.effects
    }
}
