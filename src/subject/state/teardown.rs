//! Cancels and killing expiries: the checks, the chain a teardown reaches, the teardown
//! itself, and, for a linked run, the teardown kept decided until the supervisor's walk
//! comes back, with the entries it claims (`docs/semantics.md`, "What cancel tears
//! down"; ARCHITECTURE.md, "The subject's protocol"). Also the two timer fires that end
//! an entry: an ask's deadline and a waiting outcome's retention horizon.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Chains, Deferred, State, Teardown};
use crate::ask::{OnExpiry, expiry_marker};
use crate::entry::EntryStatus;
use crate::error::IdProblem;
use crate::event::{Event, Resolution, Settled};
use crate::ids::ReplyId;
use crate::record::{RunRecord, RunStatus};
use crate::subject::Op;
use crate::subject::effect::{Effect, Step};
use crate::subject::reply::Answer;
use crate::supervisor::TimerKey;

impl State {
    /// Keep `what`, decided, until the supervisor's walk of the chains of `runs` comes
    /// back: claim the entries it names, and ask for the walk.
    pub(super) fn defer(
        &mut self,
        step: &mut Step<'_>,
        what: Deferred,
        claimed: Vec<String>,
        runs: Vec<Arc<str>>,
        canceller: Option<Arc<str>>,
    ) {
        let token = self.next_token;
        self.next_token += 1;
        for id in claimed {
            self.claims.insert(Arc::from(id), token);
        }
        // Its reply waits for the walk.
        match &what {
            Deferred::Cancel { reply, .. } => step.keep(Some(*reply)),
            Deferred::Visit(planned) => step.keep(planned.reply),
            Deferred::Expire { .. } => None,
        };
        step.push(Effect::Walk {
            token,
            runs: runs.clone(),
            canceller,
        });
        self.teardowns.push(Teardown { token, what, runs });
    }

    /// The supervisor's walk for the teardown `token` came back (each chain in the order
    /// asked): apply it. Its entries were claimed, so nothing but another teardown
    /// resolved them meanwhile; one that did leaves this one nothing to do there.
    pub(super) fn walked(&mut self, step: &mut Step<'_>, token: u64, answer: Vec<Vec<Arc<str>>>) {
        let Some(at) = self.teardowns.iter().position(|t| t.token == token) else {
            return;
        };
        let Teardown { what, runs, .. } = self.teardowns.remove(at);
        let mut released = Vec::new();
        self.claims.retain(|id, t| {
            let mine = *t == token;
            if mine {
                released.push(Arc::clone(id));
            }
            !mine
        });
        let chains: Chains = runs.into_iter().zip(answer).collect();
        match what {
            Deferred::Cancel {
                ids,
                canceller,
                reply,
            } => {
                self.cancel(step, ids, canceller, &chains);
                step.reply(reply, Answer::Cancel(Ok(())));
            }
            Deferred::Expire { interaction, key } => self.expire(step, &interaction, key, &chains),
            Deferred::Visit(planned) => self.visit_walked(planned, &chains, step),
        }
        // A deadline or horizon that fired while the entry was claimed, if the entry is
        // still there (a visit refused at its check leaves it), is handled now.
        for id in released {
            let due = self.entries.get(&id).and_then(|p| {
                let key = p.timer.filter(|key| key.at <= step.now)?;
                Some((key, p.outcome.is_some()))
            });
            match due {
                Some((key, true)) => self.retire(step, &id, key),
                Some((key, false)) => self.handle(
                    Op::Expire {
                        interaction: id,
                        key,
                    },
                    step,
                ),
                None => {}
            }
        }
    }

    /// The problem with resolving `id` while a waiting teardown claims it.
    pub(super) fn claimed(&self, id: &str) -> Option<IdProblem> {
        self.claims
            .contains_key(id)
            .then(|| IdProblem::BeingResolved {
                id: id.to_owned(),
                subject: self.subject(),
            })
    }

    /// Check a cancel of `ids`: every problem is reported.
    pub(crate) fn check_cancel(
        &self,
        step: &Step<'_>,
        ids: &[String],
    ) -> Result<(), Vec<IdProblem>> {
        let mut problems = Vec::new();
        let mut seen = HashSet::new();
        for id in ids {
            if !seen.insert(id.as_str()) {
                problems.push(IdProblem::Duplicate { id: id.clone() });
            } else if let Some(problem) = self.claimed(id) {
                problems.push(problem);
            } else {
                match self.entries.get(id.as_str()) {
                    None => problems.push(self.gone(step, id)),
                    // Already resolved by a resume: a cancel would resolve it twice.
                    Some(p) if p.entry.status == EntryStatus::Running => {
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
    /// its chain down. `chains` holds the supervisor's chain of every linked owner.
    pub(super) fn cancel(
        &mut self,
        step: &mut Step<'_>,
        ids: Vec<String>,
        canceller: Option<Arc<str>>,
        chains: &Chains,
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
                self.remove_entry(step, &id);
                self.remember(step, &id, Settled::Cancelled);
                step.publish(Event::WaitingOutcomeDropped {
                    subject: self.subject(),
                    interaction: id,
                    reason: "cancelled".into(),
                });
                continue;
            }
            let owner = Arc::clone(&parked.run);
            self.tear_down(step, &owner, chains, &id, Resolution::Cancelled);
        }
    }

    /// Whether the supervisor's run tree holds `run`, that is, whether it is part of a
    /// chain longer than itself.
    pub(super) fn is_linked(&self, run: &str) -> bool {
        self.runs.get(run).is_some_and(|r| r.linked)
    }

    /// The linked runs owning the asks among `ids`: the chains a teardown of them needs
    /// from the supervisor. A run that is not linked is a chain of its own.
    pub(crate) fn linked_owners<'i>(
        &self,
        ids: impl IntoIterator<Item = &'i str>,
    ) -> Vec<Arc<str>> {
        let mut owners: Vec<Arc<str>> = Vec::new();
        for id in ids {
            if let Some(p) = self.entries.get(id).filter(|p| p.outcome.is_none())
                && self.is_linked(&p.run)
                && !owners.contains(&p.run)
            {
                owners.push(Arc::clone(&p.run));
            }
        }
        owners
    }

    /// The runs a teardown of `owner`'s park reaches: the supervisor's chain if the
    /// owner is linked, else the owner alone; runs started on the subject under one of
    /// them since the supervisor answered are reached too (asker first).
    pub(crate) fn chain_of(&self, owner: &Arc<str>, chains: &Chains) -> Vec<Arc<str>> {
        let mut runs = chains.get(owner).cloned().unwrap_or_default();
        if !runs.iter().any(|r| r == owner) {
            runs.insert(0, Arc::clone(owner));
        }
        let mut at = 0;
        while at < runs.len() {
            let parent = Arc::clone(&runs[at]);
            for (id, run) in self.runs.iter() {
                if run.parent.as_ref() == Some(&parent) && !runs.contains(id) {
                    runs.push(Arc::clone(id));
                }
            }
            at += 1;
        }
        runs
    }

    /// Tear down the chain of the park `interaction` raised by `owner`.
    pub(super) fn tear_down(
        &mut self,
        step: &mut Step<'_>,
        owner: &Arc<str>,
        chains: &Chains,
        interaction: &str,
        how: Resolution,
    ) {
        let runs = self.chain_of(owner, chains);
        let now = step.now;
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
            if let Some(p) = self.remove_entry(step, &id)
                && p.entry.status == EntryStatus::Asking
            {
                let how = if id == interaction {
                    how
                } else {
                    Resolution::Cancelled
                };
                self.resolved(step, &id, how, p.entry.to);
            }
        }
        // Receivers waiting on a group that was resolved while its activation ran.
        let mut pending: HashMap<Arc<str>, Vec<ReplyId>> = HashMap::new();
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
            let Some(run) = self.runs.shift_remove(run_id) else {
                continue;
            };
            if run.executing {
                // Dropped wherever the target's future stands.
                step.push(Effect::Abort(Arc::clone(run_id)));
                self.live = self.live.saturating_sub(1);
            }
            if run.linked {
                step.push(Effect::Unlink(Arc::clone(run_id)));
            }
            step.publish(Event::RunCancelled {
                subject: self.subject(),
                run: run_id.to_string(),
                interaction: interaction.to_owned(),
            });
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
            self.keep_ended(step, &record, now);
            let receivers = run
                .receiver
                .into_iter()
                .chain(pending.remove(run_id).into_iter().flatten());
            for receiver in receivers {
                step.push(Effect::Deliver(receiver, Box::new(record.clone()), None));
            }
        }
    }

    /// The linked owner of the ask `id` if its deadline firing at `key` would tear its
    /// chain down: the chain the expiry needs from the supervisor.
    pub(super) fn expiry_needs(&self, id: &str, key: TimerKey) -> Option<Arc<str>> {
        if self.claims.contains_key(id) {
            return None;
        }
        let parked = self.entries.get(id)?;
        let due = parked.entry.status == EntryStatus::Asking
            && parked.timer == Some(key)
            && parked.on_expiry == OnExpiry::Kill;
        (due && self.is_linked(&parked.run)).then(|| Arc::clone(&parked.run))
    }

    /// An ask's deadline fired: whichever of expiry and resume the subject handles first
    /// wins, so a resolved ask or a re-armed timer makes this a no-op.
    pub(super) fn expire(&mut self, step: &mut Step<'_>, id: &str, key: TimerKey, chains: &Chains) {
        // A waiting teardown claims it: the deadline is looked at again once that is
        // applied (`State::walked`).
        if self.claims.contains_key(id) {
            return;
        }
        let Some(parked) = self.entries.get_mut(id) else {
            return;
        };
        if parked.entry.status != EntryStatus::Asking || parked.timer != Some(key) {
            return;
        }
        parked.timer = None;
        let on_expiry = parked.on_expiry;
        let wait = parked.entry.is_wait();
        let owner = Arc::clone(&parked.run);
        step.publish(Event::ExpiryFired {
            subject: self.subject(),
            interaction: id.to_owned(),
        });
        match on_expiry {
            OnExpiry::Kill => self.tear_down(step, &owner, chains, id, Resolution::Expired),
            OnExpiry::Resume => {
                let (_, run) = self.resolve(step, id, expiry_marker(), None, Resolution::Expired);
                // A wait that ran out resumes its run for the run's own sake: nobody
                // resumed it to receive its outcome, so none is left waiting.
                if wait && let Some(r) = run.as_ref().and_then(|r| self.runs.get_mut(r)) {
                    r.resumed_by = None;
                }
                self.activate_prepared(step, run);
            }
        }
    }

    /// A waiting outcome's retention horizon passed: drop it, with an event.
    pub(super) fn retire(&mut self, step: &mut Step<'_>, id: &str, key: TimerKey) {
        // As for an expiry, a claimed entry's horizon is looked at again later.
        if self.claims.contains_key(id) {
            return;
        }
        let due = self
            .entries
            .get(id)
            .is_some_and(|p| p.outcome.is_some() && p.timer == Some(key));
        if due {
            if let Some(p) = self.entries.get_mut(id) {
                p.timer = None;
            }
            self.remove_entry(step, id);
            step.publish(Event::WaitingOutcomeDropped {
                subject: self.subject(),
                interaction: id.to_owned(),
                reason: "retention".into(),
            });
        }
    }
}
