//! Runs on the subject: a start, each activation, an activation's end (park, finish,
//! fail, or resume at once), a resolved run's outcome left waiting, and the records read
//! off a run as it stands or as it ended (`docs/semantics.md`, "Run records").

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{Parked, Run, State};
use crate::ask::OnExpiry;
use crate::entry::{Entry, EntryStatus, To};
use crate::error::RunError;
use crate::event::{Event, Resolution};
use crate::ids::ReplyId;
use crate::record::{RunRecord, RunStatus, Suspended};
use crate::run::port::{Ending, Parent};
use crate::run::stored::Stored;
use crate::slot::Slot;
use crate::subject::effect::{Effect, Launch, Step, Waiting};
use crate::supervisor::Timer;
use crate::target::Target;

impl State {
    /// Start a run of `target`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start(
        &mut self,
        step: &mut Step<'_>,
        target: Arc<Target>,
        kwargs: Value,
        extras: Value,
        identity: Arc<str>,
        parent: Parent,
        receiver: Option<ReplyId>,
    ) -> Arc<str> {
        let receiver = step.keep(receiver);
        let run: Arc<str> = Arc::from(step.run_id(Slot::of(&self.name)));
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
            step.push(Effect::Link {
                run: Arc::clone(&run),
                parent: parent_run.clone(),
            });
            true
        } else {
            false
        };
        step.publish(Event::RunStarted {
            subject: self.subject(),
            run: run.to_string(),
            target: target.name.to_string(),
        });
        self.runs.insert(
            Arc::clone(&run),
            Box::new(Run {
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
                executing: false,
                receiver,
                group: None,
                resumed_group: None,
                resumed_by: None,
                started_at: step.now,
                resumed_interactions: Vec::new(),
            }),
        );
        step.push(Effect::Live(Arc::clone(&run)));
        self.activate(step, &run);
        run
    }

    /// Start a new activation of `run`, replaying its journal.
    pub(super) fn activate(&mut self, step: &mut Step<'_>, run_id: &Arc<str>) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        run.epoch += 1;
        run.status = RunStatus::Running;
        self.live += 1;
        run.executing = true;
        step.push(Effect::Activate(Box::new(Launch {
            run: Arc::clone(run_id),
            epoch: run.epoch,
            target: Arc::clone(&run.target),
            identity: Arc::clone(&run.identity),
            lineage: Arc::clone(&run.lineage),
            parent: run.parent.clone(),
            journal: run.journal.clone(),
            kwargs: run.kwargs.clone(),
            extras: run.extras.clone(),
        })));
    }

    /// An activation ended: deliver its outcome, or resume at once if its group was
    /// resolved while it ran.
    pub(super) fn ended(&mut self, step: &mut Step<'_>, ending: Ending) -> Option<Arc<str>> {
        let Ending {
            run: run_id,
            epoch,
            result,
            replay,
        } = ending;
        let now = step.now;
        let run = self.runs.get_mut(&run_id)?;
        if run.epoch != epoch || !run.executing {
            return None;
        }
        run.executing = false;
        self.live = self.live.saturating_sub(1);
        step.push(Effect::Gone(Arc::clone(&run_id)));
        run.journal = replay.journal;
        // Kept while the run is parked, perhaps for long: no spare capacity.
        run.journal.shrink_to_fit();
        let resumed_group = run.resumed_group.take();
        let raised = run.group.clone();
        if let Some(g) = resumed_group {
            self.remove_group(step, &g);
        }
        let run = self.runs.get_mut(&run_id)?;

        if let Some(diverged) = replay.diverged {
            if let Some(g) = raised {
                self.drop_group_asks(step, &g, Resolution::Cancelled);
            }
            return self.finish(step, &run_id, Err(diverged), now);
        }
        if let Some(refused) = replay.refused {
            // An ask of this activation was refused: nothing it raised stays parked, and
            // a run that parks anyway fails with the refusal where it was raised.
            let outcome = match result {
                Ok(value) => Ok(value),
                Err(RunError::Failed(message)) => Err(message),
                Err(RunError::Suspended(_)) => Err(refused),
            };
            let resumer = raised.and_then(|g| self.withdraw_group(step, &g));
            if let Some(resumer) = resumer {
                // A resume of the group's last ask was held for this activation's end:
                // its resumer receives the same terminal as the run's receiver.
                let (status, result, error) = match &outcome {
                    Ok(v) => (RunStatus::Succeeded, Some(v.clone()), None),
                    Err(e) => (RunStatus::Failed, None, Some(e.clone())),
                };
                match self.record(&run_id, status, result, error, None) {
                    Some(mut record) => {
                        record.finished_at = Some(now);
                        step.push(Effect::Deliver(resumer, Box::new(record), None));
                    }
                    None => step.drop_channel(Some(resumer)),
                }
            }
            return self.finish(step, &run_id, outcome, now);
        }
        if let Some(gid) = raised.filter(|g| self.groups.contains_key(g)) {
            run.status = RunStatus::Parked;
            let receiver = run.receiver.take();
            let group = self.groups.get_mut(&gid)?;
            group.open = false;
            let pending = group.pending.take();
            let record = self
                .groups
                .get(&gid)
                .and_then(|g| self.parked_record(&run_id, &g.members));
            match (record, receiver) {
                (Some(record), receiver) => {
                    if let Some(run) = self.runs.get_mut(&run_id) {
                        run.status = record.status;
                    }
                    if let Some(receiver) = receiver {
                        step.push(Effect::Deliver(receiver, Box::new(record), None));
                    }
                }
                (None, receiver) => step.drop_channel(receiver),
            }
            if let Some((receiver, last)) = pending {
                return self.prepare_resume(step, &run_id, &gid, receiver, last);
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
        self.finish(step, &run_id, outcome, now)
    }

    /// End `run` for good with `outcome`, delivering it or leaving it waiting.
    pub(super) fn finish(
        &mut self,
        step: &mut Step<'_>,
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
        self.keep_ended(step, &record, now);
        let run = self.runs.shift_remove(run_id)?;
        if run.linked {
            step.push(Effect::Unlink(Arc::clone(run_id)));
        }
        step.publish(match &error {
            None => Event::RunFinished {
                subject: self.subject(),
                run: run_id.to_string(),
            },
            Some(e) => Event::RunFailed {
                subject: self.subject(),
                run: run_id.to_string(),
                error: e.clone(),
            },
        });
        let waiting = run.resumed_by.map(|id| Waiting {
            id,
            run: Arc::clone(run_id),
            outcome,
        });
        match run.receiver {
            // Left waiting if the receiver stopped waiting before the actor delivers it.
            Some(receiver) => step.push(Effect::Deliver(receiver, Box::new(record), waiting)),
            None => {
                if let Some(waiting) = waiting {
                    self.leave_waiting(step, waiting);
                }
            }
        }
        None
    }

    /// Leave a resolved run's terminal waiting under the id that resumed it: its
    /// receiver was gone, or it had none.
    pub(crate) fn leave_waiting(&mut self, step: &mut Step<'_>, waiting: Waiting) {
        let Waiting { id, run, outcome } = waiting;
        let now = step.now;
        let status = if outcome.is_ok() {
            EntryStatus::Finished
        } else {
            EntryStatus::Failed
        };
        let name: Arc<str> = Arc::from(id.as_str());
        let key = step.arm(
            step.retention_end(now),
            Timer::Retention {
                subject: Arc::clone(&self.name),
                interaction: Arc::clone(&name),
            },
        );
        step.push(Effect::CountWaiting);
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
                offered: None,
                input: None,
                ord: 0,
            }),
        );
        step.publish(Event::WaitingOutcomeStored {
            subject: self.subject(),
            interaction: id,
        });
    }

    /// The record of the parked run `run_id` whose group is `members`: `parked` with the
    /// caller asks still standing, or `suspended` with the sentinel naming its user asks
    /// when only those are open.
    pub(super) fn parked_record(&self, run_id: &str, members: &[String]) -> Option<RunRecord> {
        let (asks, user): (Vec<Entry>, Vec<Entry>) = members
            .iter()
            .filter_map(|id| self.entries.get(id.as_str()).map(|p| p.entry.clone()))
            .partition(|e| e.to != Some(To::User));
        let (status, asks) = if asks.is_empty() {
            (RunStatus::Suspended, None)
        } else {
            (RunStatus::Parked, Some(asks))
        };
        let mut record = self.record(run_id, status, None, None, asks)?;
        if !user.is_empty() {
            record.suspension = Some(Suspended {
                interactions: user.into_iter().map(|e| e.id).collect(),
            });
        }
        Some(record)
    }

    /// The record of the run `run_id` as it stands now, if it lives on this subject; a
    /// run that ended for good has its record kept by the hub.
    pub(crate) fn record_of(&self, run_id: &str) -> Option<RunRecord> {
        let run = self.runs.get(run_id)?;
        match run.status {
            RunStatus::Parked | RunStatus::Suspended => {
                let members = run
                    .group
                    .as_ref()
                    .and_then(|g| self.groups.get(g))
                    .map_or(&[][..], |g| g.members.as_slice());
                self.parked_record(run_id, members)
            }
            status => self.record(run_id, status, None, None, None),
        }
    }

    /// The record of `run` as it stands.
    pub(super) fn record(
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
    pub(super) fn keep_ended(&self, step: &mut Step<'_>, record: &RunRecord, now: DateTime<Utc>) {
        step.arm(
            step.retention_end(now),
            Timer::Record {
                subject: Arc::clone(&self.name),
                run: Arc::from(record.run_id.as_str()),
            },
        );
        step.push(Effect::Record(Box::new(record.clone())));
    }
}
