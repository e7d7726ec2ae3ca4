//! The memory of resolutions: how and when each interaction of the subject was
//! resolved, kept for the retention horizon (at most [`REMEMBERED`]), so a retry reads
//! `already resolved`, not `unknown` (`docs/semantics.md`, "Exactly-once resolution").

use chrono::{DateTime, Utc};

use super::{Memory, REMEMBERED, State};
use crate::entry::To;
use crate::error::IdProblem;
use crate::event::{Event, Resolution, Settled};
use crate::subject::effect::Step;

impl State {
    /// Publish that the ask `id` was resolved, and how, and remember it.
    pub(super) fn resolved(
        &mut self,
        step: &mut Step<'_>,
        id: &str,
        how: Resolution,
        to: Option<To>,
    ) {
        self.remember(step, id, how.into());
        step.publish(Event::AskResolved {
            subject: self.subject(),
            interaction: id.to_owned(),
            how,
            to: to.unwrap_or(To::Caller),
        });
    }

    /// Remember that `id` was resolved `how`, now. The oldest memory goes past
    /// [`REMEMBERED`].
    pub(super) fn remember(&mut self, step: &mut Step<'_>, id: &str, how: Settled) {
        let at = step.now;
        self.forget_before(step, at);
        if self.memory.len() >= REMEMBERED {
            self.forget_oldest();
        }
        self.memory.push_back(Memory {
            id: id.to_owned(),
            how,
            at,
        });
    }

    /// Forget the resolutions past the retention horizon at `now`.
    pub(super) fn forget_before(&mut self, step: &Step<'_>, now: DateTime<Utc>) {
        let horizon = chrono::Duration::from_std(step.settings.waiting_retention)
            .ok()
            .and_then(|d| now.checked_sub_signed(d))
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        while self.memory.front().is_some_and(|m| m.at <= horizon) {
            self.forget_oldest();
        }
    }

    /// Forget the oldest resolution remembered.
    pub(super) fn forget_oldest(&mut self) {
        if self.memory.pop_front().is_some() {
            self.memory_base += 1;
        }
    }

    /// The problem with naming `id`, which has no entry: already resolved, if the
    /// subject still remembers it, else unknown.
    pub(super) fn gone(&self, step: &Step<'_>, id: &str) -> IdProblem {
        let now = step.now;
        // Newest first: an ask resumed and then its waiting outcome taken reads as taken.
        match self.memory.iter().rev().find(|m| m.id == id) {
            Some(m) if self.within_memory(step, m.at, now) => IdProblem::AlreadyResolved {
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
    pub(crate) fn recall(&self, step: &Step<'_>, id: &str) -> Option<IdProblem> {
        let now = step.now;
        let m = self
            .memory
            .iter()
            .rev()
            .find(|m| m.id == id && m.how != Settled::Taken)?;
        self.within_memory(step, m.at, now)
            .then(|| IdProblem::AlreadyResolved {
                id: id.to_owned(),
                subject: self.subject(),
                how: m.how,
                at: m.at,
            })
    }

    /// Whether a resolution at `at` is still remembered at `now`.
    pub(super) fn within_memory(
        &self,
        step: &Step<'_>,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> bool {
        step.retention_end(at) > now
    }
}
