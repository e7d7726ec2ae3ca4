//! A state read back from the store after a restart, brought into this process: asks of
//! activations that were executing withdrawn, timers armed again, counts and the inbox
//! restored, the run tree linked again, and the stopped runs replayed; and what the open
//! reads off a state (`docs/durability.md`, "Recovery").

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{Counts, Run, State};
use crate::entry::{EntryStatus, To};
use crate::event::Resolution;
use crate::record::RunStatus;
use crate::subject::effect::{Effect, Step};
use crate::supervisor::Timer;

impl State {
    /// Bring a state read back from the store after a restart into this process: the
    /// runs whose activation was executing when the process stopped are replayed from
    /// their journal (the asks that activation had raised were never completed: they
    /// are withdrawn, each resolved `cancelled`); every deadline and retention horizon is
    /// armed again with a fresh key, so a timer of the old process cannot match; the
    /// ceilings count the entries again, the inbox lists the user asks, the supervisor's
    /// tree links the chains, and the live runs are counted.
    pub(crate) fn recover(&mut self, step: &mut Step<'_>) {
        for run in &self.stopped_runs() {
            let orphans: Vec<Arc<str>> = self
                .entries
                .iter()
                .filter(|(_, p)| p.run == *run && p.entry.status == EntryStatus::Asking)
                .map(|(id, _)| Arc::clone(id))
                .collect();
            for id in orphans {
                // Never counted in this process: removed without giving a unit back.
                let to = self.entries.shift_remove(&id).and_then(|p| p.entry.to);
                self.resolved(step, &id, Resolution::Cancelled, to);
            }
            if let Some(r) = self.runs.get_mut(run) {
                r.group = None;
            }
        }
        let entries = &self.entries;
        self.groups
            .retain(|_, g| g.members.iter().any(|m| entries.contains_key(m.as_str())));
        self.forget_conversions();
        let name = Arc::clone(&self.name);
        for (id, parked) in self.entries.iter() {
            let to = parked.entry.to.unwrap_or(To::Caller);
            step.push(Effect::Occupy(to));
            let Some(old) = parked.timer else {
                continue;
            };
            let timer = if parked.outcome.is_some() {
                Timer::Retention {
                    subject: Arc::clone(&name),
                    interaction: Arc::clone(id),
                }
            } else {
                Timer::Expiry {
                    subject: Arc::clone(&name),
                    interaction: Arc::clone(id),
                }
            };
            step.rearm(old, timer);
        }
        for parked in self.entries.values() {
            if let Some(item) = parked
                .offered
                .as_ref()
                .filter(|_| parked.entry.status == EntryStatus::Asking)
            {
                step.push(Effect::Offer(item.clone()));
            }
        }
        let mut linked: Vec<(&Arc<str>, &Box<Run>)> =
            self.runs.iter().filter(|(_, r)| r.linked).collect();
        linked.sort_by(|a, b| a.0.cmp(b.0));
        for (id, run) in linked {
            step.push(Effect::Link {
                run: Arc::clone(id),
                parent: run.parent.clone(),
            });
        }
        let mut runs: Vec<&Arc<str>> = self.runs.keys().collect();
        runs.sort();
        for run in runs {
            step.push(Effect::Alive);
            step.push(Effect::Live(Arc::clone(run)));
        }
    }

    /// Whether a run's activation was executing when the state was written: read back,
    /// it is replayed ([`State::replay`]).
    pub(crate) fn executing_at_stop(&self) -> bool {
        self.runs
            .values()
            .any(|run| run.status == RunStatus::Running)
    }

    /// What the subject counts against the ceilings, as [`State::recover`] counts it
    /// again: its entries addressed to the caller (waiting outcomes among them) and to a
    /// user, and its runs that have not ended.
    pub(crate) fn counts(&self) -> Counts {
        let user = self
            .entries
            .values()
            .filter(|p| p.entry.to == Some(To::User))
            .count();
        Counts {
            caller: self.entries.len() - user,
            user,
            runs: self.runs.len(),
        }
    }

    /// The ids of the runs that have not ended.
    pub(crate) fn run_ids(&self) -> impl Iterator<Item = &Arc<str>> {
        self.runs.keys()
    }

    /// Whether a user ask is open here: the inbox lists it.
    pub(crate) fn offers(&self) -> bool {
        self.entries
            .values()
            .any(|p| p.offered.is_some() && p.entry.status == EntryStatus::Asking)
    }

    /// The earliest deadline of the subject's timers (its asks' expiries and its waiting
    /// outcomes' horizons), if it has any.
    pub(crate) fn earliest_timer(&self) -> Option<DateTime<Utc>> {
        self.entries
            .values()
            .filter_map(|p| p.timer.map(|key| key.at))
            .min()
    }

    /// After every subject has been recovered (so the ceilings count everything read
    /// back before any replay asks again): replay the runs whose activation was executing
    /// when the process stopped, from their journals.
    pub(crate) fn replay(&mut self, step: &mut Step<'_>) {
        for run in self.stopped_runs() {
            self.activate(step, &run);
        }
    }

    /// The runs that were executing when the state was written and have no activation
    /// in this process, in id order.
    pub(super) fn stopped_runs(&self) -> Vec<Arc<str>> {
        let mut runs: Vec<Arc<str>> = self
            .runs
            .iter()
            .filter(|(_, run)| run.status == RunStatus::Running && !run.executing)
            .map(|(id, _)| Arc::clone(id))
            .collect();
        runs.sort();
        runs
    }

    /// Drop `$parked` and each entry's conversion for jq: a passive subject keeps plain
    /// data only, and the next visit converts again.
    pub(crate) fn forget_conversions(&mut self) {
        self.parked = None;
        self.entries
            .for_each_unkept(|_, parked| parked.input = None);
    }
}
