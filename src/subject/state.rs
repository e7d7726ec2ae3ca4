//! One subject's state and every transition of it.
//!
//! The state is plain data: the parked set (oldest first), the runs living on the
//! subject with their journals and receivers, and the groups of asks each activation
//! raised. The actor calls one method per message; a method never awaits a run (the
//! run's own messages would then queue behind it): it records who receives the
//! outcome and returns, and the activation's `Ended` message completes the receiver.
//! The only await is on the supervisor during a teardown, which never waits on a
//! subject.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{Ack, Ending, Receiver};
use crate::ask::{Ask, Checked, OnExpiry};
use crate::entry::{Entry, Status, To};
use crate::error::{AskError, IdProblem, RunError};
use crate::event::{Event, Resolution, Settled};
use crate::ids::Kind;
use crate::record::{RunRecord, RunStatus, Suspended};
use crate::run::activation::{self, Activation};
use crate::run::ctx::{Ctx, EXPIRY_MARKER_KEY, expiry_marker};
use crate::run::journal::JournalEntry;
use crate::run::stored::Stored;
use crate::shared::{Parent, Shared};
use crate::supervisor::{SupervisorMsg, Timer, TimerKey};
use crate::target::Target;

mod visit;

pub(crate) use visit::{Applied, AppliedItem};

/// The most resolutions one subject remembers (`docs/semantics.md`, "Exactly-once
/// resolution"): past it the oldest is forgotten, and reads as unknown.
pub(crate) const REMEMBERED: usize = 1024;

/// How and when an interaction of the subject was resolved, remembered for the retention
/// horizon once its entry is gone, so a retry reads `already resolved`, not `unknown`.
#[derive(Debug, Serialize, Deserialize)]
struct Memory {
    /// The interaction.
    id: String,
    /// How it was resolved.
    how: Settled,
    /// When, on the runtime's clock.
    at: DateTime<Utc>,
}

/// One parked entry and what the runtime keeps beside it.
///
/// Serialized only to pack a passive subject (`super::packed`), which holds no
/// executing activation: the fields skipped are those of one.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Parked {
    /// The entry as the door contract sees it.
    pub(crate) entry: Entry,
    /// The run that asked (or whose outcome waits).
    run: Arc<str>,
    /// What the deadline does.
    on_expiry: OnExpiry,
    /// The armed timer: the deadline of an ask, the horizon of a waiting outcome.
    timer: Option<TimerKey>,
    /// The answer, once resolved and until the run resumes (boxed, like the outcome:
    /// most entries never hold one, and a JSON value held inline is 72 bytes).
    answer: Option<Box<Value>>,
    /// A waiting outcome's result or error.
    outcome: Option<Box<Result<Value, String>>>,
    /// A `sync` user ask: the blocked activation waiting for the answer.
    #[serde(skip)]
    waiter: Option<crate::shared::Waiter>,
    /// The entry converted for jq, kept until the entry changes: `$parked` is rebuilt
    /// from these whenever the set changes.
    #[serde(skip)]
    pub(crate) input: Option<crate::jq::Input>,
}

/// A group of asks raised by one activation.
#[derive(Debug, Serialize, Deserialize)]
struct Group {
    /// The asking run.
    run: Arc<str>,
    /// Its asks, in the order raised.
    members: Vec<String>,
    /// Whether the activation that raised them is still executing.
    open: bool,
    /// Set when the last ask was resolved while the activation was still executing:
    /// the receiver of the resumed run's outcome, and the ask resolved last.
    #[serde(skip)]
    pending: Option<(Option<Receiver>, String)>,
}

/// One run living on the subject.
#[derive(Debug, Serialize, Deserialize)]
struct RunState {
    /// The target's name: each activation runs the target registered under it then.
    target: Arc<str>,
    /// The calling run, for a child run.
    parent: Option<Arc<str>>,
    /// Whether the supervisor's run tree holds this run: a run is linked once it is part
    /// of a chain (it has a live caller, or it called a run). A run that is not linked
    /// is a chain of its own, which its subject tears down without asking.
    linked: bool,
    identity: Arc<str>,
    lineage: Arc<[String]>,
    /// Kept as text while the run waits (`crate::run::stored`).
    kwargs: Stored,
    extras: Stored,
    journal: Vec<JournalEntry>,
    status: RunStatus,
    /// Counts activations; an `Ended` or `Ask` of another epoch is stale.
    epoch: u64,
    /// The executing activation, if one is: a teardown aborts it. Dropped when the
    /// activation ends, so a parked run holds nothing of its task.
    #[serde(skip)]
    activation: Option<activation::Handle>,
    /// Who takes the outcome of the executing activation.
    #[serde(skip)]
    receiver: Option<Receiver>,
    /// The group the executing (or last) activation raised.
    group: Option<String>,
    /// The group whose resolution started the executing activation.
    resumed_group: Option<String>,
    /// The ask whose resolution started the executing activation; a waiting outcome
    /// waits under this id.
    resumed_by: Option<String>,
    started_at: DateTime<Utc>,
    /// Interactions this run resolved on its way.
    resumed_interactions: Vec<String>,
}

/// A subject's whole state.
///
/// Serialized only to pack a passive subject (`super::packed`): the fields skipped are
/// the name (the registry's key), and what a subject with nothing executing and no
/// idle check armed holds empty.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SubjectState {
    /// The subject's name.
    #[serde(skip)]
    pub(crate) name: Arc<str>,
    /// The parked set, oldest first. The key is the interaction id, shared with the
    /// entry's timer (until the subject is packed: unpacking allocates it anew).
    entries: IndexMap<Arc<str>, Box<Parked>>,
    /// Runs that have not ended (boxed, so the table's spare slots stay small).
    runs: HashMap<Arc<str>, Box<RunState>>,
    /// Open groups by id.
    groups: HashMap<String, Group>,
    /// The resolutions remembered, oldest first: at most [`REMEMBERED`], none older than
    /// the retention horizon.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    memory: VecDeque<Memory>,
    /// Executing activations.
    #[serde(skip)]
    live: usize,
    /// The armed idle check.
    #[serde(skip)]
    idle_timer: Option<TimerKey>,
    /// When the last message was handled.
    #[serde(skip)]
    last_active: Option<DateTime<Utc>>,
    /// `$parked` converted for jq, kept until the parked set changes.
    #[serde(skip)]
    parked: Option<crate::jq::Input>,
}

/// What the actor should do after a message.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Keep going.
    Stay,
    /// Passivate: nothing is executing and the subject has been idle long enough.
    Passivate,
}

impl SubjectState {
    /// An empty subject.
    pub(crate) fn new(name: Arc<str>) -> Self {
        Self {
            name,
            entries: IndexMap::new(),
            runs: HashMap::new(),
            groups: HashMap::new(),
            memory: VecDeque::new(),
            live: 0,
            idle_timer: None,
            last_active: None,
            parked: None,
        }
    }

    /// Whether anything of an executing activation is held: a count, an abort handle,
    /// a receiver or a blocked `sync` ask's waiter. Such a state is not packed.
    pub(crate) fn holds_activation(&self) -> bool {
        self.live > 0
            || self
                .runs
                .values()
                .any(|run| run.activation.is_some() || run.receiver.is_some())
            || self.entries.values().any(|parked| parked.waiter.is_some())
            || self.groups.values().any(|group| group.pending.is_some())
    }

    /// Whether the subject holds nothing at all, so passivating can forget it: no entry,
    /// no run, and no resolution remembered.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.runs.is_empty() && self.memory.is_empty()
    }

    /// The parked set as the door contract sees it, oldest first.
    pub(crate) fn list(&self) -> Vec<Entry> {
        self.entries.values().map(|p| p.entry.clone()).collect()
    }

    fn publish(&self, shared: &Shared, event: Event) {
        shared.events.publish(event);
    }

    fn subject(&self) -> String {
        self.name.to_string()
    }

    /// Publish that the ask `id` was resolved, and how, and remember it.
    fn resolved(&mut self, shared: &Shared, id: &str, how: Resolution) {
        self.remember(shared, id, how.into());
        self.publish(
            shared,
            Event::AskResolved {
                subject: self.subject(),
                interaction: id.to_owned(),
                how,
            },
        );
    }

    // ----- the memory of resolutions ---------------------------------------------------

    /// Remember that `id` was resolved `how`, now. The oldest memory goes past
    /// [`REMEMBERED`].
    fn remember(&mut self, shared: &Shared, id: &str, how: Settled) {
        let at = shared.clock.now();
        self.forget_before(shared, at);
        if self.memory.len() >= REMEMBERED {
            self.memory.pop_front();
        }
        self.memory.push_back(Memory {
            id: id.to_owned(),
            how,
            at,
        });
    }

    /// Forget the resolutions past the retention horizon at `now`.
    fn forget_before(&mut self, shared: &Shared, now: DateTime<Utc>) {
        let horizon = chrono::Duration::from_std(shared.settings.waiting_retention)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        while self.memory.front().is_some_and(|m| m.at <= horizon) {
            self.memory.pop_front();
        }
    }

    /// The problem with naming `id`, which has no entry: already resolved, if the
    /// subject still remembers it, else unknown.
    fn gone(&self, shared: &Shared, id: &str) -> IdProblem {
        let now = shared.clock.now();
        // Newest first: an ask resumed and then its waiting outcome taken reads as taken.
        match self.memory.iter().rev().find(|m| m.id == id) {
            Some(m) if self.within_memory(shared, m.at, now) => IdProblem::AlreadyResolved {
                id: id.to_owned(),
                subject: self.subject(),
                how: m.how,
                at: m.at,
            },
            _ => IdProblem::Unknown {
                id: id.to_owned(),
                subject: self.subject(),
            },
        }
    }

    /// How the ask `id` was resolved, if the subject still remembers it: what the answer
    /// door tells a late answer. The ask's own resolution, not a later take of its
    /// waiting outcome; the entry may still be there, `running` or waiting.
    pub(crate) fn recall(&self, shared: &Shared, id: &str) -> Option<IdProblem> {
        let now = shared.clock.now();
        let m = self
            .memory
            .iter()
            .rev()
            .find(|m| m.id == id && m.how != Settled::Taken)?;
        self.within_memory(shared, m.at, now)
            .then(|| IdProblem::AlreadyResolved {
                id: id.to_owned(),
                subject: self.subject(),
                how: m.how,
                at: m.at,
            })
    }

    /// Whether a resolution at `at` is still remembered at `now`.
    fn within_memory(&self, shared: &Shared, at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        retention_end(shared, at) > now
    }

    // ----- starting and activations ---------------------------------------------------

    /// Start a run of `target`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &mut self,
        shared: &Arc<Shared>,
        target: Arc<Target>,
        kwargs: Value,
        extras: Value,
        identity: Arc<str>,
        parent: Parent,
        receiver: Option<Receiver>,
    ) -> Arc<str> {
        let run: Arc<str> = Arc::from(shared.id(Kind::Run));
        let (parent_run, lineage) = match parent {
            Parent::Top => (None, Arc::from(vec![target.name.to_string()])),
            Parent::Run { run, lineage } => {
                let mut chain = Vec::with_capacity(lineage.len() + 1);
                chain.push(target.name.to_string());
                chain.extend(lineage.iter().cloned());
                (Some(run), Arc::from(chain))
            }
        };
        // Only chains go to the supervisor's tree: a child whose caller is live here links
        // both; a run with no live caller stays a chain of its own until it calls a run.
        let caller = parent_run.as_ref().and_then(|p| self.runs.get_mut(p));
        let linked = if let Some(caller) = caller {
            caller.linked = true;
            let _ = shared.supervisor.cast(SupervisorMsg::Link {
                run: Arc::clone(&run),
                parent: parent_run.clone(),
            });
            true
        } else {
            false
        };
        shared.runs.fetch_add(1, Ordering::Relaxed);
        self.publish(
            shared,
            Event::RunStarted {
                subject: self.subject(),
                run: run.to_string(),
                target: target.name.to_string(),
            },
        );
        self.runs.insert(
            Arc::clone(&run),
            Box::new(RunState {
                target: Arc::clone(&target.name),
                parent: parent_run,
                linked,
                identity,
                lineage,
                kwargs: Stored::new(&kwargs),
                extras: Stored::new(&extras),
                journal: Vec::new(),
                status: RunStatus::Running,
                epoch: 0,
                activation: None,
                receiver,
                group: None,
                resumed_group: None,
                resumed_by: None,
                started_at: shared.clock.now(),
                resumed_interactions: Vec::new(),
            }),
        );
        if let Some(record) = self.record(&run, RunStatus::Running, None, None, None) {
            shared.records.put(record);
        }
        self.activate(shared, &run);
        run
    }

    /// Start a new activation of `run`, replaying its journal.
    fn activate(&mut self, shared: &Arc<Shared>, run_id: &Arc<str>) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.epoch += 1;
        run.status = RunStatus::Running;
        if run.epoch > 1 {
            shared.records.running(run_id);
        }
        self.live += 1;
        shared.inflight.add();
        let ctx = Ctx::new(
            Arc::clone(shared),
            Arc::clone(run_id),
            Arc::clone(&run.target),
            Arc::clone(&run.identity),
            Arc::clone(&self.name),
            Arc::clone(&run.lineage),
            run.parent.clone(),
            run.epoch,
            run.journal.clone(),
        );
        let activation = Activation {
            ctx,
            kwargs: run.kwargs.clone(),
            extras: run.extras.clone(),
        };
        run.activation = Some(activation::spawn(activation));
    }

    /// An activation ended: deliver its outcome, or resume at once if its group was
    /// resolved while it ran.
    pub(crate) fn ended(&mut self, shared: &Arc<Shared>, ending: Ending) -> Option<Arc<str>> {
        let Ending {
            run: run_id,
            epoch,
            result,
            replay,
        } = ending;
        let now = shared.clock.now();
        let run = self.runs.get_mut(&run_id)?;
        if run.epoch != epoch || run.activation.is_none() {
            return None;
        }
        run.activation = None;
        self.live = self.live.saturating_sub(1);
        shared.inflight.done();
        run.journal = replay.journal;
        // Kept while the run is parked, perhaps for long: no spare capacity.
        run.journal.shrink_to_fit();
        let resumed_group = run.resumed_group.take();
        let raised = run.group.clone();
        if let Some(g) = resumed_group {
            self.remove_group(shared, &g);
        }
        let run = self.runs.get_mut(&run_id)?;

        if let Some(diverged) = replay.diverged {
            if let Some(g) = raised {
                self.drop_group_asks(shared, &g, Resolution::Cancelled);
            }
            return self.finish(shared, &run_id, Err(diverged), now);
        }
        if let Some(refused) = replay.refused {
            // An ask of this activation was refused: nothing it raised stays parked, and
            // a run that parks anyway fails with the refusal where it was raised.
            let outcome = match result {
                Ok(value) => Ok(value),
                Err(RunError::Failed(message)) => Err(message),
                Err(RunError::Suspended(_)) => Err(refused),
            };
            let resumer = raised.and_then(|g| self.withdraw_group(shared, &g));
            if let Some(resumer) = resumer {
                // A resume of the group's last ask was held for this activation's end:
                // its resumer receives the same terminal as the run's receiver.
                let (status, result, error) = match &outcome {
                    Ok(v) => (RunStatus::Succeeded, Some(v.clone()), None),
                    Err(e) => (RunStatus::Failed, None, Some(e.clone())),
                };
                if let Some(mut record) = self.record(&run_id, status, result, error, None) {
                    record.finished_at = Some(now);
                    let _ = resumer.send(record);
                }
            }
            return self.finish(shared, &run_id, outcome, now);
        }
        if let Some(gid) = raised.filter(|g| self.groups.contains_key(g)) {
            run.status = RunStatus::Parked;
            let receiver = run.receiver.take();
            let group = self.groups.get_mut(&gid)?;
            group.open = false;
            let pending = group.pending.take();
            let (asks, user): (Vec<Entry>, Vec<Entry>) = group
                .members
                .iter()
                .filter_map(|id| self.entries.get(id.as_str()).map(|p| p.entry.clone()))
                .partition(|e| e.to != Some(To::User));
            // Parked when the run asked its caller; suspended when only user asks are
            // open, with the sentinel naming them.
            let (status, asks) = if asks.is_empty() {
                (RunStatus::Suspended, None)
            } else {
                (RunStatus::Parked, Some(asks))
            };
            run.status = status;
            let record = self.record(&run_id, status, None, None, asks).map(|mut r| {
                if !user.is_empty() {
                    r.suspension = Some(Suspended {
                        interactions: user.into_iter().map(|e| e.id).collect(),
                    });
                }
                r
            });
            if let Some(record) = record {
                shared.records.put(record.clone());
                if let Some(receiver) = receiver {
                    let _ = receiver.send(record);
                }
            }
            if let Some((receiver, last)) = pending {
                return self.prepare_resume(&run_id, &gid, receiver, last);
            }
            return None;
        }
        let outcome = match result {
            Ok(value) => Ok(value),
            Err(RunError::Failed(message)) => Err(message),
            Err(RunError::Suspended(s)) => Err(format!(
                "target {} returned the suspension of interaction {} without an open ask",
                run.target, s.interaction
            )),
        };
        self.finish(shared, &run_id, outcome, now)
    }

    /// End `run` for good with `outcome`, delivering it or leaving it waiting.
    fn finish(
        &mut self,
        shared: &Arc<Shared>,
        run_id: &Arc<str>,
        outcome: Result<Value, String>,
        now: DateTime<Utc>,
    ) -> Option<Arc<str>> {
        let (status, result, error) = match &outcome {
            Ok(v) => (RunStatus::Succeeded, Some(v.clone()), None),
            Err(e) => (RunStatus::Failed, None, Some(e.clone())),
        };
        let mut record = self.record(run_id, status, result, error.clone(), None)?;
        record.finished_at = Some(now);
        self.keep_ended(shared, &record, now);
        let run = self.runs.remove(run_id)?;
        shared.runs.fetch_sub(1, Ordering::Relaxed);
        if run.linked {
            let _ = shared.supervisor.cast(SupervisorMsg::Ended {
                run: Arc::clone(run_id),
            });
        }
        self.publish(
            shared,
            match &error {
                None => Event::RunFinished {
                    subject: self.subject(),
                    run: run_id.to_string(),
                },
                Some(e) => Event::RunFailed {
                    subject: self.subject(),
                    run: run_id.to_string(),
                    error: e.clone(),
                },
            },
        );
        let undelivered = match run.receiver {
            Some(receiver) => receiver.send(record).is_err(),
            None => true,
        };
        if undelivered && let Some(id) = run.resumed_by {
            self.store_waiting(shared, id, Arc::clone(run_id), outcome, now);
        }
        None
    }

    /// Leave a resolved run's terminal waiting under `id`.
    fn store_waiting(
        &mut self,
        shared: &Arc<Shared>,
        id: String,
        run: Arc<str>,
        outcome: Result<Value, String>,
        now: DateTime<Utc>,
    ) {
        let status = if outcome.is_ok() {
            Status::Finished
        } else {
            Status::Failed
        };
        let horizon = retention_end(shared, now);
        let key = shared.timer_key(horizon);
        let name: Arc<str> = Arc::from(id.as_str());
        shared.timers.arm(
            key,
            Timer::Retention {
                subject: Arc::clone(&self.name),
                interaction: Arc::clone(&name),
            },
        );
        shared.count_waiting();
        self.parked = None;
        self.entries.insert(
            name,
            Box::new(Parked {
                entry: Entry::waiting(id.clone(), status),
                run,
                on_expiry: OnExpiry::Kill,
                timer: Some(key),
                answer: None,
                outcome: Some(Box::new(outcome)),
                waiter: None,
                input: None,
            }),
        );
        self.publish(
            shared,
            Event::WaitingOutcomeStored {
                subject: self.subject(),
                interaction: id,
            },
        );
    }

    /// The record of `run` as it stands.
    fn record(
        &self,
        run_id: &str,
        status: RunStatus,
        result: Option<Value>,
        error: Option<String>,
        asks: Option<Vec<Entry>>,
    ) -> Option<RunRecord> {
        let run = self.runs.get(run_id)?;
        Some(RunRecord {
            run_id: run_id.to_owned(),
            target: run.target.to_string(),
            identity: run.identity.to_string(),
            status,
            started_at: run.started_at,
            finished_at: None,
            result,
            error,
            asks,
            suspension: None,
            resumed_interactions: run.resumed_interactions.clone(),
        })
    }

    /// Keep the record of a run that ended for good, and arm its retention horizon.
    fn keep_ended(&self, shared: &Shared, record: &RunRecord, now: DateTime<Utc>) {
        let horizon = retention_end(shared, now);
        shared.timers.arm(
            shared.timer_key(horizon),
            Timer::Record {
                subject: Arc::clone(&self.name),
                run: Arc::from(record.run_id.as_str()),
            },
        );
        shared.records.put(record.clone());
    }

    // ----- asks ----------------------------------------------------------------------

    /// Park an ask of `run`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ask(
        &mut self,
        shared: &Arc<Shared>,
        run_id: Arc<str>,
        epoch: u64,
        lineage: Arc<[String]>,
        ask: Ask,
        checked: Checked,
        id: String,
        waiter: Option<oneshot::Sender<Value>>,
    ) -> Result<String, AskError> {
        let Some(run) = self
            .runs
            .get_mut(&run_id)
            .filter(|r| r.activation.is_some() && r.epoch == epoch)
        else {
            shared.release(ask.to);
            return Err(AskError::Cancelled {
                run: run_id.to_string(),
            });
        };
        // A sync ask blocks its activation instead of parking it: it joins no group.
        let gid = match run.group.clone().filter(|g| self.groups.contains_key(g)) {
            _ if waiter.is_some() => String::new(),
            Some(g) => g,
            None => {
                let g = shared.id(Kind::Group);
                run.group = Some(g.clone());
                self.groups.insert(
                    g.clone(),
                    Group {
                        run: Arc::clone(&run_id),
                        // Most activations raise one ask.
                        members: Vec::with_capacity(1),
                        open: true,
                        pending: None,
                    },
                );
                g
            }
        };
        let key = shared.timer_key(checked.deadline);
        let name: Arc<str> = Arc::from(id.as_str());
        shared.timers.arm(
            key,
            Timer::Expiry {
                subject: Arc::clone(&self.name),
                interaction: Arc::clone(&name),
            },
        );
        if ask.to == To::User {
            shared.inbox.add(crate::inbox::InboxItem {
                id: id.clone(),
                subject: self.subject(),
                question: ask.question.clone(),
                answer_format: ask.format().to_owned(),
                options: ask.options.clone(),
                schema: ask.schema.clone(),
                asked_by: lineage.to_vec(),
                expiry_at: checked.deadline,
            });
        }
        let entry = Entry {
            id: id.clone(),
            status: Status::Asking,
            to: Some(ask.to),
            asked_by: Some(lineage.to_vec()),
            question: ask.question,
            answer_format: ask.answer_format,
            group_id: (!gid.is_empty()).then(|| gid.clone()),
            payload: ask.payload,
        };
        self.parked = None;
        self.entries.insert(
            name,
            Box::new(Parked {
                entry,
                run: Arc::clone(&run_id),
                on_expiry: checked.on_expiry,
                timer: Some(key),
                answer: None,
                outcome: None,
                waiter: waiter.map(|tx| crate::shared::Waiter::new(tx, &shared.inflight)),
                input: None,
            }),
        );
        if let Some(group) = self.groups.get_mut(&gid) {
            group.members.push(id.clone());
        }
        self.publish(
            shared,
            Event::AskParked {
                subject: self.subject(),
                interaction: id.clone(),
                run: run_id.to_string(),
            },
        );
        Ok(id)
    }

    /// Remove one entry, disarming its timer and giving back its unit of the ceiling.
    fn remove_entry(&mut self, shared: &Shared, id: &str) -> Option<Parked> {
        let parked = self.entries.shift_remove(id)?;
        self.parked = None;
        if parked.entry.to == Some(To::User) {
            // A no-op when the entry already left the inbox with its own reason.
            shared.inbox.remove(id, false, "cancelled");
        }
        if let Some(key) = parked.timer {
            shared.timers.disarm(key);
        }
        match parked.entry.to {
            Some(to) => shared.release(to),
            None => shared.release(To::Caller),
        }
        Some(*parked)
    }

    /// Remove a resolved group and its (running) entries.
    fn remove_group(&mut self, shared: &Shared, gid: &str) {
        if let Some(group) = self.groups.remove(gid) {
            for id in group.members {
                self.remove_entry(shared, &id);
            }
        }
    }

    /// Withdraw the asks of a group whose activation had an ask refused: those still
    /// asking are resolved `cancelled`. Returns the receiver of a resume held for the
    /// activation's end, if one was.
    fn withdraw_group(&mut self, shared: &Shared, gid: &str) -> Option<Receiver> {
        let pending = self.groups.get_mut(gid)?.pending.take();
        self.drop_group_asks(shared, gid, Resolution::Cancelled);
        pending.and_then(|(receiver, _)| receiver)
    }

    /// Remove a group whose asks will never be answered (the run diverged).
    fn drop_group_asks(&mut self, shared: &Shared, gid: &str, how: Resolution) {
        if let Some(group) = self.groups.remove(gid) {
            for id in group.members {
                if let Some(p) = self.remove_entry(shared, &id)
                    && p.entry.status == Status::Asking
                {
                    self.resolved(shared, &id, how);
                }
            }
        }
    }

    // ----- resume, take, cancel ------------------------------------------------------

    /// Check that `id` names an `asking` entry.
    fn check_asking(&self, shared: &Shared, id: &str) -> Result<(), IdProblem> {
        match self.entries.get(id) {
            None => Err(self.gone(shared, id)),
            Some(p) if p.entry.status != Status::Asking => Err(IdProblem::WrongStatus {
                id: id.to_owned(),
                wanted: "asking".into(),
                status: p.entry.status,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Check that `id` names a waiting outcome.
    pub(crate) fn check_waiting(&self, shared: &Shared, id: &str) -> Result<(), IdProblem> {
        match self.entries.get(id) {
            None => Err(self.gone(shared, id)),
            Some(p) if p.outcome.is_none() => Err(IdProblem::WrongStatus {
                id: id.to_owned(),
                wanted: "a waiting outcome (finished or failed)".into(),
                status: p.entry.status,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Resume the ask `id` with `payload`. Returns a run to activate, if the group is
    /// complete and its activation has ended.
    pub(crate) fn resume(
        &mut self,
        shared: &Arc<Shared>,
        id: &str,
        payload: Value,
        receiver: Option<Receiver>,
        resumer: Option<Arc<str>>,
    ) -> Result<(Ack, Option<Arc<str>>), IdProblem> {
        self.check_asking(shared, id)?;
        if payload.get(EXPIRY_MARKER_KEY).is_some() {
            return Err(IdProblem::ReservedKey {
                id: id.to_owned(),
                key: EXPIRY_MARKER_KEY.into(),
            });
        }
        if let Some(r) = resumer.and_then(|r| self.runs.get_mut(&r)) {
            r.resumed_interactions.push(id.to_owned());
        }
        Ok(self.resolve(shared, id, payload, receiver, Resolution::Resumed))
    }

    /// Record `answer` for the asking entry `id`; resume its run if that completes the
    /// group.
    fn resolve(
        &mut self,
        shared: &Arc<Shared>,
        id: &str,
        answer: Value,
        receiver: Option<Receiver>,
        how: Resolution,
    ) -> (Ack, Option<Arc<str>>) {
        let Some(parked) = self.entries.get_mut(id) else {
            return (Ack::Buffered { remaining: 0 }, None);
        };
        if parked.entry.to == Some(To::User) {
            shared
                .inbox
                .remove(id, how == Resolution::Resumed, "expired");
        }
        if let Some(waiter) = parked.waiter.take() {
            // A sync ask: hand the answer to the blocked activation; no group resumes.
            self.remove_entry(shared, id);
            waiter.send(answer);
            self.resolved(shared, id, how);
            return (Ack::Started, None);
        }
        parked.entry.status = Status::Running;
        parked.input = None;
        parked.answer = Some(Box::new(answer));
        self.parked = None;
        if let Some(key) = parked.timer.take() {
            shared.timers.disarm(key);
        }
        let run_id = Arc::clone(&parked.run);
        let gid = parked.entry.group_id.clone().unwrap_or_default();
        self.resolved(shared, id, how);
        let Some(group) = self.groups.get_mut(&gid) else {
            return (Ack::Buffered { remaining: 0 }, None);
        };
        let remaining = group
            .members
            .iter()
            .filter(|m| {
                self.entries
                    .get(m.as_str())
                    .is_some_and(|p| p.entry.status == Status::Asking)
            })
            .count();
        if remaining > 0 {
            return (Ack::Buffered { remaining }, None);
        }
        if group.open {
            group.pending = Some((receiver, id.to_owned()));
            return (Ack::Started, None);
        }
        (
            Ack::Started,
            self.prepare_resume(&run_id, &gid, receiver, id.to_owned()),
        )
    }

    /// Fill the group's answers into the journal and attach the receiver; the caller
    /// then activates the returned run.
    fn prepare_resume(
        &mut self,
        run_id: &Arc<str>,
        gid: &str,
        receiver: Option<Receiver>,
        last: String,
    ) -> Option<Arc<str>> {
        let group = self.groups.get(gid)?;
        let answers: HashMap<&str, &Value> = group
            .members
            .iter()
            .filter_map(|m| {
                let p = self.entries.get(m.as_str())?;
                Some((m.as_str(), p.answer.as_deref()?))
            })
            .collect();
        let run = self.runs.get_mut(run_id)?;
        for entry in &mut run.journal {
            if let JournalEntry::Ask {
                interaction,
                answer,
                ..
            } = entry
                && answer.is_none()
                && let Some(a) = answers.get(interaction.as_str())
            {
                *answer = Some((*a).clone());
            }
        }
        run.receiver = receiver;
        run.resumed_by = Some(last);
        run.group = None;
        run.resumed_group = Some(gid.to_owned());
        Some(Arc::clone(run_id))
    }

    /// Activate a run that [`SubjectState::resume`] or [`SubjectState::ended`] prepared.
    pub(crate) fn activate_prepared(&mut self, shared: &Arc<Shared>, run: Option<Arc<str>>) {
        if let Some(run) = run {
            self.activate(shared, &run);
        }
    }

    /// Take the waiting outcome `id`.
    pub(crate) fn take(
        &mut self,
        shared: &Arc<Shared>,
        id: &str,
        taker: Option<Arc<str>>,
    ) -> Result<Result<Value, String>, IdProblem> {
        self.check_waiting(shared, id)?;
        let parked = self.remove_entry(shared, id);
        self.remember(shared, id, Settled::Taken);
        if let Some(r) = taker.and_then(|r| self.runs.get_mut(&r)) {
            r.resumed_interactions.push(id.to_owned());
        }
        self.publish(
            shared,
            Event::WaitingOutcomeTaken {
                subject: self.subject(),
                interaction: id.to_owned(),
            },
        );
        Ok(parked
            .and_then(|p| p.outcome)
            .map_or_else(|| Err(format!("interaction {id} held no outcome")), |o| *o))
    }

    /// Check a cancel of `ids`: every problem is reported.
    pub(crate) fn check_cancel(
        &self,
        shared: &Shared,
        ids: &[String],
    ) -> Result<(), Vec<IdProblem>> {
        let mut problems = Vec::new();
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id.as_str()) {
                problems.push(IdProblem::Duplicate { id: id.clone() });
            } else {
                match self.entries.get(id.as_str()) {
                    None => problems.push(self.gone(shared, id)),
                    // Already resolved by a resume: a cancel would resolve it twice.
                    Some(p) if p.entry.status == Status::Running => {
                        problems.push(IdProblem::WrongStatus {
                            id: id.clone(),
                            wanted: "asking or a waiting outcome".into(),
                            status: p.entry.status,
                        })
                    }
                    Some(_) => {}
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Cancel each of `ids` (already checked): a waiting outcome is removed, an ask tears
    /// its chain down.
    pub(crate) async fn cancel(
        &mut self,
        shared: &Arc<Shared>,
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
    ) {
        if let Some(r) = canceller.as_ref().and_then(|r| self.runs.get_mut(r)) {
            r.resumed_interactions.extend(ids.iter().cloned());
        }
        for id in ids {
            let Some(parked) = self.entries.get(id.as_str()) else {
                // Already torn down with an earlier id's chain.
                continue;
            };
            if parked.outcome.is_some() {
                self.remove_entry(shared, &id);
                self.remember(shared, &id, Settled::Cancelled);
                self.publish(
                    shared,
                    Event::WaitingOutcomeDropped {
                        subject: self.subject(),
                        interaction: id,
                        reason: "cancelled".into(),
                    },
                );
                continue;
            }
            let owner = Arc::clone(&parked.run);
            self.tear_down(
                shared,
                &owner,
                canceller.clone(),
                &id,
                Resolution::Cancelled,
            )
            .await;
        }
    }

    /// Whether the supervisor's run tree holds `run`, that is, whether it is part of a
    /// chain longer than itself.
    pub(crate) fn is_linked(&self, run: &str) -> bool {
        self.runs.get(run).is_some_and(|r| r.linked)
    }

    /// Tear down the chain of the park `interaction` raised by `owner`.
    async fn tear_down(
        &mut self,
        shared: &Arc<Shared>,
        owner: &Arc<str>,
        canceller: Option<Arc<str>>,
        interaction: &str,
        how: Resolution,
    ) {
        let mut runs = if self.is_linked(owner) {
            let (reply, rx) = oneshot::channel();
            let asked = shared.supervisor.cast(SupervisorMsg::TearDown {
                run: Arc::clone(owner),
                canceller,
                reply,
            });
            match asked {
                Ok(()) => rx.await.unwrap_or_default(),
                Err(_) => Vec::new(),
            }
        } else {
            // A chain of its own: no caller, no callee, nothing above or below to walk.
            Vec::new()
        };
        if !runs.iter().any(|r| r == owner) {
            runs.insert(0, Arc::clone(owner));
        }
        let now = shared.clock.now();
        let verb = match how {
            Resolution::Expired => "expired",
            _ => "was cancelled",
        };
        let error = format!("cancelled: interaction {interaction} {verb}");
        let torn: HashSet<Arc<str>> = runs.iter().cloned().collect();
        // The entries those runs own: their asks, asking or running.
        let owned: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, p)| p.outcome.is_none() && torn.contains(&p.run))
            .map(|(_, p)| p.entry.id.clone())
            .collect();
        for id in owned {
            if id == interaction && how == Resolution::Expired {
                shared.inbox.remove(&id, false, "expired");
            }
            if let Some(p) = self.remove_entry(shared, &id)
                && p.entry.status == Status::Asking
            {
                let how = if id == interaction {
                    how
                } else {
                    Resolution::Cancelled
                };
                self.resolved(shared, &id, how);
            }
        }
        // Receivers waiting on a group that was resolved while its activation ran.
        let mut pending: HashMap<Arc<str>, Vec<Receiver>> = HashMap::new();
        self.groups.retain(|_, g| {
            if !torn.contains(&g.run) {
                return true;
            }
            if let Some((Some(r), _)) = g.pending.take() {
                pending.entry(Arc::clone(&g.run)).or_default().push(r);
            }
            false
        });
        for run_id in &runs {
            let Some(run) = self.runs.remove(run_id) else {
                continue;
            };
            shared.runs.fetch_sub(1, Ordering::Relaxed);
            if let Some(activation) = run.activation {
                // Dropped wherever the target's future stands.
                activation.abort();
                self.live = self.live.saturating_sub(1);
                shared.inflight.done();
            }
            self.publish(
                shared,
                Event::RunCancelled {
                    subject: self.subject(),
                    run: run_id.to_string(),
                    interaction: interaction.to_owned(),
                },
            );
            let record = RunRecord {
                run_id: run_id.to_string(),
                target: run.target.to_string(),
                identity: run.identity.to_string(),
                status: RunStatus::Cancelled,
                started_at: run.started_at,
                finished_at: Some(now),
                result: None,
                error: Some(error.clone()),
                asks: None,
                suspension: None,
                resumed_interactions: run.resumed_interactions,
            };
            self.keep_ended(shared, &record, now);
            let receivers = run
                .receiver
                .into_iter()
                .chain(pending.remove(run_id).into_iter().flatten());
            for receiver in receivers {
                let _ = receiver.send(record.clone());
            }
        }
    }

    // ----- timers ----------------------------------------------------------------------

    /// An ask's deadline fired: whichever of expiry and resume the subject handles first
    /// wins, so a resolved ask or a re-armed timer makes this a no-op.
    pub(crate) async fn expire(&mut self, shared: &Arc<Shared>, id: &str, key: TimerKey) {
        let Some(parked) = self.entries.get_mut(id) else {
            return;
        };
        if parked.entry.status != Status::Asking || parked.timer != Some(key) {
            return;
        }
        parked.timer = None;
        let on_expiry = parked.on_expiry;
        let owner = Arc::clone(&parked.run);
        self.publish(
            shared,
            Event::ExpiryFired {
                subject: self.subject(),
                interaction: id.to_owned(),
            },
        );
        match on_expiry {
            OnExpiry::Kill => {
                self.tear_down(shared, &owner, None, id, Resolution::Expired)
                    .await;
            }
            OnExpiry::Resume => {
                let (_, run) = self.resolve(shared, id, expiry_marker(), None, Resolution::Expired);
                self.activate_prepared(shared, run);
            }
        }
    }

    /// A waiting outcome's retention horizon passed: drop it, with an event.
    pub(crate) fn retire(&mut self, shared: &Arc<Shared>, id: &str, key: TimerKey) {
        let due = self
            .entries
            .get(id)
            .is_some_and(|p| p.outcome.is_some() && p.timer == Some(key));
        if due {
            if let Some(p) = self.entries.get_mut(id) {
                p.timer = None;
            }
            self.remove_entry(shared, id);
            self.publish(
                shared,
                Event::WaitingOutcomeDropped {
                    subject: self.subject(),
                    interaction: id.to_owned(),
                    reason: "retention".into(),
                },
            );
        }
    }

    /// After each message: decide whether to passivate, or arm the idle check.
    pub(crate) fn after(&mut self, shared: &Shared, idle_fired: Option<TimerKey>) -> After {
        let now = shared.clock.now();
        if let Some(key) = idle_fired {
            if self.idle_timer == Some(key) {
                self.idle_timer = None;
            } else if self.idle_timer.is_some() {
                // Superseded: the armed check stands.
                return After::Stay;
            }
            // Else a check from before the subject last passivated woke it: it counts
            // from its waking (not from each check), and arms the next check below, so
            // the subject does not keep its actor for good.
            self.last_active.get_or_insert(now);
        } else {
            self.last_active = Some(now);
        }
        if self.live > 0 {
            return After::Stay;
        }
        let after = shared.settings.passivate_after;
        let idle_since = self.last_active.unwrap_or(now);
        let due = chrono::Duration::from_std(after)
            .ok()
            .and_then(|d| idle_since.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        if due <= now {
            self.forget_before(shared, now);
            if self.entries.is_empty() && self.runs.is_empty() {
                self.arm_forgetting(shared);
            }
            return After::Passivate;
        }
        if self.idle_timer.is_none() {
            let key = shared.timer_key(due);
            self.idle_timer = Some(key);
            shared.timers.arm(
                key,
                Timer::Idle {
                    subject: Arc::clone(&self.name),
                },
            );
        }
        After::Stay
    }

    /// The runtime is shutting down: abort every executing activation and hand back
    /// their handles, so the subject can wait for them to end.
    pub(crate) fn stop_activations(&mut self) -> Vec<activation::Handle> {
        let handles: Vec<activation::Handle> = self
            .runs
            .values_mut()
            .filter_map(|run| run.activation.take())
            .collect();
        for handle in &handles {
            handle.abort();
        }
        handles
    }

    /// A subject that passivates holding only resolutions it remembers is woken once
    /// the newest of them passes the retention horizon, so it can forget them and itself
    /// (a wake from an idle check armed before it passivated, which the actor handles as
    /// any such check). A subject holding entries forgets its old resolutions when
    /// something else wakes it; [`REMEMBERED`] bounds them meanwhile.
    fn arm_forgetting(&self, shared: &Shared) {
        let Some(newest) = self.memory.back() else {
            return;
        };
        let due = retention_end(shared, newest.at);
        shared.timers.arm(
            shared.timer_key(due),
            Timer::Idle {
                subject: Arc::clone(&self.name),
            },
        );
    }

    /// Drop `$parked` and each entry's conversion for jq: a passive subject keeps plain
    /// data only, and the next visit converts again.
    pub(crate) fn forget_conversions(&mut self) {
        self.parked = None;
        for parked in self.entries.values_mut() {
            parked.input = None;
        }
    }

    /// Forget the idle check before passivating; a passive subject arms nothing.
    pub(crate) fn clear_idle(&mut self, shared: &Shared) {
        if let Some(key) = self.idle_timer.take() {
            shared.timers.disarm(key);
        }
    }
}

/// When the retention horizon that starts at `at` ends (the end of time if it overflows).
fn retention_end(shared: &Shared, at: DateTime<Utc>) -> DateTime<Utc> {
    chrono::Duration::from_std(shared.settings.waiting_retention)
        .ok()
        .and_then(|d| at.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
