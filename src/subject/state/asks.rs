//! Asks and the parked set: an ask parked in its activation's group, a resume (the
//! group's answers replayed once its last ask is resolved), a take of a waiting outcome,
//! and the removal of entries and groups (`docs/semantics.md`, "Asks and groups").

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Group, Parked, State};
use crate::ask::{Ask, Checked, EXPIRY_MARKER_KEY};
use crate::entry::{Entry, EntryStatus, To};
use crate::error::{AskError, IdProblem};
use crate::event::{Event, Resolution, Settled};
use crate::ids::Kind;
use crate::ids::ReplyId;
use crate::inbox::InboxItem;
use crate::run::journal::JournalEntry;
use crate::subject::Ack;
use crate::subject::effect::{Effect, Step};
use crate::supervisor::Timer;

impl State {
    /// Park an ask of `run`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ask(
        &mut self,
        step: &mut Step<'_>,
        run_id: Arc<str>,
        epoch: u64,
        lineage: Arc<[String]>,
        ask: Ask,
        checked: Checked,
        id: String,
        waiter: Option<ReplyId>,
    ) -> Result<String, AskError> {
        let Some(run) = self
            .runs
            .get_mut(&run_id)
            .filter(|r| r.executing && r.epoch == epoch)
        else {
            step.push(Effect::Release(ask.to));
            return Err(AskError::Cancelled {
                run: run_id.to_string(),
            });
        };
        let waiter = step.keep(waiter);
        // A sync ask blocks its activation instead of parking it: it joins no group.
        let gid = match run.group.clone().filter(|g| self.groups.contains_key(g)) {
            _ if waiter.is_some() => String::new(),
            Some(g) => g,
            None => {
                let g = step.id(Kind::Group);
                run.group = Some(g.clone());
                self.groups.insert(
                    Arc::from(g.as_str()),
                    Box::new(Group {
                        run: Arc::clone(&run_id),
                        // Most activations raise one ask.
                        members: Vec::with_capacity(1),
                        open: true,
                        pending: None,
                    }),
                );
                g
            }
        };
        let name: Arc<str> = Arc::from(id.as_str());
        let key = step.arm(
            checked.deadline,
            Timer::Expiry {
                subject: Arc::clone(&self.name),
                interaction: Arc::clone(&name),
            },
        );
        let offered = (ask.to == To::User).then(|| {
            Box::new(InboxItem {
                id: id.clone(),
                subject: self.subject(),
                question: ask.question.clone(),
                answer_format: ask.format().to_owned(),
                options: ask.options.clone(),
                schema: ask.schema.clone(),
                asked_by: lineage.to_vec(),
                // Filled by the inbox, which knows the tools.
                asked_by_titles: Default::default(),
                expiry_at: checked.deadline,
                asked_at: Some(step.now),
            })
        });
        if let Some(item) = &offered {
            step.push(Effect::Offer(item.clone()));
        }
        let offered_item = offered.clone();
        let entry = Entry {
            id: id.clone(),
            status: EntryStatus::Asking,
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
                waiter,
                offered,
                input: None,
                ord: 0,
            }),
        );
        if let Some(group) = self.groups.get_mut(&gid) {
            group.members.push(id.clone());
        }
        step.publish(Event::AskParked {
            subject: self.subject(),
            interaction: id.clone(),
            run: run_id.to_string(),
            to: ask.to,
            item: offered_item,
        });
        Ok(id)
    }

    /// Remove one entry, disarming its timer and giving back its unit of the ceiling.
    pub(super) fn remove_entry(&mut self, step: &mut Step<'_>, id: &str) -> Option<Parked> {
        let mut parked = self.entries.shift_remove(id)?;
        self.parked = None;
        // A `sync` ask torn down: its activation learns no answer comes.
        step.drop_channel(parked.waiter.take());
        // A user ask leaves the inbox with its `ask_resolved`, which every removal of an
        // asking entry publishes.
        if let Some(key) = parked.timer {
            step.disarm(key);
        }
        step.push(Effect::Release(parked.entry.to.unwrap_or(To::Caller)));
        Some(*parked)
    }

    /// Remove a resolved group and its (running) entries.
    pub(super) fn remove_group(&mut self, step: &mut Step<'_>, gid: &str) {
        if let Some(group) = self.groups.shift_remove(gid) {
            step.drop_channel(group.pending.and_then(|(receiver, _)| receiver));
            for id in group.members {
                self.remove_entry(step, &id);
            }
        }
    }

    /// Withdraw the asks of a group whose activation had an ask refused: those still
    /// asking are resolved `cancelled`. Returns the receiver of a resume held for the
    /// activation's end, if one was.
    pub(super) fn withdraw_group(&mut self, step: &mut Step<'_>, gid: &str) -> Option<ReplyId> {
        let pending = self.groups.get_mut(gid)?.pending.take();
        self.drop_group_asks(step, gid, Resolution::Cancelled);
        pending.and_then(|(receiver, _)| receiver)
    }

    /// Remove a group whose asks will never be answered (the run diverged).
    pub(super) fn drop_group_asks(&mut self, step: &mut Step<'_>, gid: &str, how: Resolution) {
        if let Some(group) = self.groups.shift_remove(gid) {
            step.drop_channel(group.pending.and_then(|(receiver, _)| receiver));
            for id in group.members {
                if let Some(p) = self.remove_entry(step, &id)
                    && p.entry.status == EntryStatus::Asking
                {
                    self.resolved(step, &id, how, p.entry.to);
                }
            }
        }
    }

    /// Check that `id` names an `asking` entry.
    pub(super) fn check_asking(&self, step: &Step<'_>, id: &str) -> Result<(), IdProblem> {
        if let Some(problem) = self.claimed(id) {
            return Err(problem);
        }
        match self.entries.get(id) {
            None => Err(self.gone(step, id)),
            Some(p) if p.entry.status != EntryStatus::Asking => Err(IdProblem::WrongStatus {
                id: id.to_owned(),
                wanted: "asking".into(),
                status: p.entry.status,
            }),
            Some(_) => Ok(()),
        }
    }

    /// Check that `id` names a waiting outcome.
    pub(crate) fn check_waiting(&self, step: &Step<'_>, id: &str) -> Result<(), IdProblem> {
        if let Some(problem) = self.claimed(id) {
            return Err(problem);
        }
        match self.entries.get(id) {
            None => Err(self.gone(step, id)),
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
        step: &mut Step<'_>,
        id: &str,
        payload: Value,
        receiver: Option<ReplyId>,
        resumer: Option<Arc<str>>,
    ) -> Result<(Ack, Option<Arc<str>>), IdProblem> {
        self.check_asking(step, id)?;
        if payload.get(EXPIRY_MARKER_KEY).is_some() {
            return Err(IdProblem::ReservedKey {
                id: id.to_owned(),
                key: EXPIRY_MARKER_KEY.into(),
            });
        }
        if let Some(r) = resumer.and_then(|r| self.runs.get_mut(&r)) {
            r.resumed_interactions.push(id.to_owned());
        }
        Ok(self.resolve(step, id, payload, receiver, Resolution::Resumed))
    }

    /// Record `answer` for the asking entry `id`; resume its run if that completes the
    /// group.
    pub(super) fn resolve(
        &mut self,
        step: &mut Step<'_>,
        id: &str,
        answer: Value,
        receiver: Option<ReplyId>,
        how: Resolution,
    ) -> (Ack, Option<Arc<str>>) {
        let Some(parked) = self.entries.get_mut(id) else {
            return (Ack::Buffered { remaining: 0 }, None);
        };
        let to = parked.entry.to;
        if let Some(waiter) = parked.waiter.take() {
            // A sync ask: hand the answer to the blocked activation; no group resumes.
            self.remove_entry(step, id);
            step.push(Effect::Answer(waiter, answer));
            self.resolved(step, id, how, to);
            return (Ack::Started, None);
        }
        parked.entry.status = EntryStatus::Running;
        parked.input = None;
        parked.answer = Some(Box::new(answer));
        self.parked = None;
        if let Some(key) = parked.timer.take() {
            step.disarm(key);
        }
        let run_id = Arc::clone(&parked.run);
        let gid = parked.entry.group_id.clone().unwrap_or_default();
        self.resolved(step, id, how, to);
        let Some(group) = self.groups.get_mut(&gid) else {
            return (Ack::Buffered { remaining: 0 }, None);
        };
        let remaining = group
            .members
            .iter()
            .filter(|m| {
                self.entries
                    .get(m.as_str())
                    .is_some_and(|p| p.entry.status == EntryStatus::Asking)
            })
            .count();
        if remaining > 0 {
            return (Ack::Buffered { remaining }, None);
        }
        if group.open {
            group.pending = Some((step.keep(receiver), id.to_owned()));
            return (Ack::Started, None);
        }
        let run = self.prepare_resume(step, &run_id, &gid, receiver, id.to_owned());
        if run.is_some() {
            step.keep(receiver);
        }
        (Ack::Started, run)
    }

    /// Fill the group's answers into the journal and attach the receiver; the caller
    /// then activates the returned run.
    pub(super) fn prepare_resume(
        &mut self,
        step: &mut Step<'_>,
        run_id: &Arc<str>,
        gid: &str,
        receiver: Option<ReplyId>,
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
        step.drop_channel(run.receiver.take());
        run.receiver = receiver;
        run.resumed_by = Some(last);
        run.group = None;
        run.resumed_group = Some(gid.to_owned());
        Some(Arc::clone(run_id))
    }

    /// Activate a run that [`State::resume`] or [`State::ended`] prepared.
    pub(crate) fn activate_prepared(&mut self, step: &mut Step<'_>, run: Option<Arc<str>>) {
        if let Some(run) = run {
            self.activate(step, &run);
        }
    }

    /// Take the waiting outcome `id`.
    pub(crate) fn take(
        &mut self,
        step: &mut Step<'_>,
        id: &str,
        taker: Option<Arc<str>>,
    ) -> Result<Result<Value, String>, IdProblem> {
        self.check_waiting(step, id)?;
        let parked = self.remove_entry(step, id);
        self.remember(step, id, Settled::Taken);
        if let Some(r) = taker.and_then(|r| self.runs.get_mut(&r)) {
            r.resumed_interactions.push(id.to_owned());
        }
        step.publish(Event::WaitingOutcomeTaken {
            subject: self.subject(),
            interaction: id.to_owned(),
        });
        Ok(parked
            .and_then(|p| p.outcome)
            .map_or_else(|| Err(format!("interaction {id} held no outcome")), |o| *o))
    }
}
