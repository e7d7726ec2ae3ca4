//! Replies as data, and the channels they go back on.
//!
//! The state never holds a channel. A message brings its channels with it
//! ([`Brought`]), each under a [`ReplyId`] the operation names; the actor keeps them
//! ([`Channels`]) and the state keeps only the ids. A transition returns answers as
//! data ([`Answer`], in `Effect::Reply`), outcomes for receivers (`Effect::Deliver`) and
//! a `sync` ask's answer (`Effect::Answer`), each naming its id, and the actor sends each
//! on its channel when it applies the effect. A channel whose id the transition neither
//! answered nor kept is dropped when the message is handled, so whoever waits on it
//! learns at once that no answer comes; one the state kept and lets go of later is
//! dropped with `Effect::Drop`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;

use super::Ack;
use crate::door::plan::VisitProblem;
use crate::entry::Entry;
use crate::error::{AskError, IdProblem};
use crate::ids::ReplyId;
use crate::record::RunRecord;
use crate::services::Waiter;

/// Where a run's next outcome is awaited, once the actor made the channel.
pub(crate) type Outcome = oneshot::Receiver<RunRecord>;

/// The answer to a message. `R` names each outcome a visit's reply holds: an id in the
/// state's effect, the receiver the actor made for it in what the visitor gets.
#[derive(Debug)]
pub(crate) enum Answer<R = ReplyId> {
    /// A started run's id.
    Start(Arc<str>),
    /// A `sync` ask stored, or why not.
    Ask(Result<String, AskError>),
    /// The parked set.
    List(Vec<Entry>),
    /// Done, and durable.
    Done,
    /// A live run's record.
    Record(Option<RunRecord>),
    /// How an interaction was resolved, if remembered.
    Recall(Option<IdProblem>),
    /// A resume: started, buffered or refused.
    Resume(Result<Ack, IdProblem>),
    /// A take: the outcome, or why not.
    Take(Result<Result<Value, String>, IdProblem>),
    /// A cancel: done, or every problem.
    Cancel(Result<(), Vec<IdProblem>>),
    /// A visit: what was applied, or every problem.
    Visit(Result<Applied<R>, Vec<VisitProblem>>),
}

/// One resolution as applied; the visitor awaits its receiver, if any. `R` names the
/// run's next outcome: an id as the state returns it, a receiver as the visitor gets it
/// (`super::reply`).
#[derive(Debug)]
pub(crate) enum AppliedItem<R = ReplyId> {
    /// A resume.
    Resumed {
        /// The interaction.
        id: String,
        /// Started or buffered.
        ack: Ack,
        /// The run's next outcome, when the visit has a receiver and the run resumes.
        outcome: Option<R>,
    },
    /// A take.
    Taken {
        /// The interaction.
        id: String,
        /// The result or the raised error.
        result: Result<Value, String>,
    },
}

/// What a visit applied.
#[derive(Debug)]
pub(crate) struct Applied<R = ReplyId> {
    /// Cancelled interactions.
    pub(crate) cancelled: Vec<String>,
    /// The resolutions, when `resume_expr` yielded non-null.
    pub(crate) resolved: Option<Vec<AppliedItem<R>>>,
    /// The started run and, with a receiver, its first record.
    pub(crate) started: Option<(Arc<str>, Option<R>)>,
}

impl<R> Default for Applied<R> {
    fn default() -> Self {
        Self {
            cancelled: Vec::new(),
            resolved: None,
            started: None,
        }
    }
}

/// What one kind of answer carries, read back off an [`Answer`] by whoever asked.
pub(crate) trait Answered: Sized {
    /// The value, if `answer` is of this kind.
    fn read(answer: Answer<Outcome>) -> Option<Self>;
}

/// Each kind of answer is read back as the value it carries.
macro_rules! answered {
    ($($variant:ident($ty:ty)),* $(,)?) => {$(
        impl Answered for $ty {
            fn read(answer: Answer<Outcome>) -> Option<Self> {
                match answer {
                    Answer::$variant(value) => Some(value),
                    _ => None,
                }
            }
        }
    )*};
}

answered!(
    Start(Arc<str>),
    Ask(Result<String, AskError>),
    List(Vec<Entry>),
    Record(Option<RunRecord>),
    Recall(Option<IdProblem>),
    Resume(Result<Ack, IdProblem>),
    Take(Result<Result<Value, String>, IdProblem>),
    Cancel(Result<(), Vec<IdProblem>>),
    Visit(Result<Applied<Outcome>, Vec<VisitProblem>>),
);

impl Answered for () {
    fn read(answer: Answer<Outcome>) -> Option<Self> {
        matches!(answer, Answer::Done).then_some(())
    }
}

/// A channel the actor holds for its state.
#[derive(Debug)]
pub(crate) enum Channel {
    /// Whoever sent a message, awaiting its answer.
    Reply(oneshot::Sender<Answer<Outcome>>),
    /// Whoever takes a run's next outcome.
    Outcome(oneshot::Sender<RunRecord>),
    /// An activation blocked in a `sync` ask.
    Waiter(Waiter),
}

/// The channels one message brings, each under the id its operation names.
#[derive(Debug, Default)]
pub(crate) struct Brought(Vec<(ReplyId, Channel)>);

impl Brought {
    /// No channel.
    pub(crate) fn none() -> Self {
        Self(Vec::new())
    }

    /// Bring `channel` under `id` as well.
    pub(crate) fn with(mut self, id: ReplyId, channel: Channel) -> Self {
        self.0.push((id, channel));
        self
    }
}

/// The channels a subject's actor holds for its state, by id; and how many of the
/// subject's activations have started and not yet gone, each a unit in flight. Both go
/// with the state when it passes to the subject's next actor, as the effects that end
/// those activations and answer those channels do.
#[derive(Debug, Default)]
pub(crate) struct Channels {
    open: HashMap<ReplyId, Channel>,
    activations: usize,
}

impl Channels {
    /// Keep what a message brought; the ids, to sweep once it is handled.
    pub(crate) fn bring(&mut self, brought: Brought) -> Vec<ReplyId> {
        let mut ids = Vec::with_capacity(brought.0.len());
        for (id, channel) in brought.0 {
            self.open.insert(id, channel);
            ids.push(id);
        }
        ids
    }

    /// Whether no channel is held and no activation is counted.
    pub(crate) fn is_empty(&self) -> bool {
        self.open.is_empty() && self.activations == 0
    }

    /// An activation of the subject started.
    pub(crate) fn started(&mut self) {
        self.activations += 1;
    }

    /// An activation of the subject went (ended or was aborted).
    pub(crate) fn gone(&mut self) {
        self.activations = self.activations.saturating_sub(1);
    }

    /// How many activations have not gone; none from now on (the subject unloads).
    pub(crate) fn take_activations(&mut self) -> usize {
        std::mem::take(&mut self.activations)
    }

    /// Drop the channel `id`, if it is held: whoever waits on it learns no answer comes.
    pub(crate) fn drop_channel(&mut self, id: ReplyId) {
        self.open.remove(&id);
    }

    /// Send `answer` to whoever awaits `id`. A visit's outcomes get their channels now:
    /// the visitor receives each receiver, the actor keeps each sender under its id.
    pub(crate) fn reply(&mut self, id: ReplyId, answer: Answer) {
        let Some(Channel::Reply(tx)) = self.open.remove(&id) else {
            return;
        };
        let answer = match answer {
            Answer::Start(v) => Answer::Start(v),
            Answer::Ask(v) => Answer::Ask(v),
            Answer::List(v) => Answer::List(v),
            Answer::Done => Answer::Done,
            Answer::Record(v) => Answer::Record(v),
            Answer::Recall(v) => Answer::Recall(v),
            Answer::Resume(v) => Answer::Resume(v),
            Answer::Take(v) => Answer::Take(v),
            Answer::Cancel(v) => Answer::Cancel(v),
            Answer::Visit(v) => Answer::Visit(v.map(|applied| self.receivers(applied))),
        };
        // A sender that stopped waiting is no concern of the subject's.
        let _ = tx.send(answer);
    }

    /// `applied` with a receiver made for each outcome it names.
    fn receivers(&mut self, applied: Applied) -> Applied<Outcome> {
        let mut receiver = |id: Option<ReplyId>| {
            id.map(|id| {
                let (tx, rx) = oneshot::channel();
                self.open.insert(id, Channel::Outcome(tx));
                rx
            })
        };
        Applied {
            cancelled: applied.cancelled,
            resolved: applied.resolved.map(|items| {
                items
                    .into_iter()
                    .map(|item| match item {
                        AppliedItem::Resumed { id, ack, outcome } => AppliedItem::Resumed {
                            id,
                            ack,
                            outcome: receiver(outcome),
                        },
                        AppliedItem::Taken { id, result } => AppliedItem::Taken { id, result },
                    })
                    .collect()
            }),
            started: applied.started.map(|(run, id)| (run, receiver(id))),
        }
    }

    /// Hand `record` to whoever takes the outcome `id`: whether somebody took it (not if
    /// the receiver stopped waiting, or none is held under the id).
    pub(crate) fn deliver(&mut self, id: ReplyId, record: RunRecord) -> bool {
        match self.open.remove(&id) {
            Some(Channel::Outcome(tx)) => tx.send(record).is_ok(),
            _ => false,
        }
    }

    /// Hand `answer` to the blocked activation `id`.
    pub(crate) fn answer(&mut self, id: ReplyId, answer: Value) {
        if let Some(Channel::Waiter(waiter)) = self.open.remove(&id) {
            waiter.send(answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Ids;

    fn record(run: &str) -> RunRecord {
        serde_json::from_value(serde_json::json!({
            "run_id": run,
            "target": "t",
            "identity": "me",
            "status": "succeeded",
            "started_at": "2026-01-01T00:00:00Z",
        }))
        .unwrap_or_else(|e| panic!("a record: {e}"))
    }

    #[test]
    fn a_visits_reply_hands_the_visitor_a_receiver_for_each_outcome_it_names() {
        let ids = Ids::sequential();
        let mut channels = Channels::default();
        let (reply, outcome) = (ids.reply(), ids.reply());
        let (tx, mut rx) = oneshot::channel();
        channels.bring(Brought::none().with(reply, Channel::Reply(tx)));
        let applied = Applied {
            started: Some((Arc::from("r-1"), Some(outcome))),
            ..Applied::default()
        };
        channels.reply(reply, Answer::Visit(Ok(applied)));
        let Ok(Answer::Visit(Ok(Applied {
            started: Some((_, Some(mut receiver))),
            ..
        }))) = rx.try_recv()
        else {
            panic!("the visitor gets the applied visit with a receiver");
        };
        // The actor holds the sender under the id the state named.
        assert!(channels.deliver(outcome, record("r-1")));
        assert_eq!(
            receiver.try_recv().map(|r| r.run_id).ok(),
            Some("r-1".into())
        );
        assert!(channels.is_empty());
    }

    #[test]
    fn an_outcome_nobody_takes_comes_back_and_a_dropped_channel_tells_its_waiter() {
        let ids = Ids::sequential();
        let mut channels = Channels::default();
        // No channel under the id: nobody took it, so it is left waiting.
        assert!(!channels.deliver(ids.reply(), record("r-1")));
        // A receiver that stopped waiting: the same.
        let (id, (tx, rx)) = (ids.reply(), oneshot::channel());
        channels.bring(Brought::none().with(id, Channel::Outcome(tx)));
        drop(rx);
        assert!(!channels.deliver(id, record("r-1")));
        // A channel let go of: whoever waits learns no answer comes.
        let (id, (tx, mut rx)) = (ids.reply(), oneshot::channel());
        channels.bring(Brought::none().with(id, Channel::Reply(tx)));
        channels.drop_channel(id);
        assert!(matches!(
            rx.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
    }
}
