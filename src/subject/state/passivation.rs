//! When the subject is idle: what each message says of its activity, the idle check, and
//! the decision to passivate (`docs/semantics.md`, "Passivation").

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::{After, State, Touch};
use crate::subject::effect::Step;
use crate::supervisor::Timer;

impl State {
    /// Note what a message said of the subject's activity: whether an idle check that
    /// fired was superseded by a later one (which then stands).
    pub(super) fn note(&mut self, now: DateTime<Utc>, touch: Touch) -> bool {
        match touch {
            Touch::Idle(key) => {
                if self.idle_timer == Some(key) {
                    self.idle_timer = None;
                } else if self.idle_timer.is_some() {
                    return true;
                }
                // Else a check from before the subject last passivated woke it: it
                // counts from its waking (not from each check), and arms the next check,
                // so the subject does not keep its actor for good.
                self.last_active.get_or_insert(now);
            }
            Touch::Active => self.last_active = Some(now),
            // A change made durable is the end of earlier work, not new work: a subject
            // woken only to take it passivates as it would have without the store. A
            // timer of its own is the clock's, not work either.
            Touch::Ack | Touch::Timer | Touch::Crowded => {}
        }
        false
    }

    /// After a message the actor cannot decide on yet (a change is not yet durable, an
    /// operation waits, the actor drains): note its activity, so the decision made later
    /// counts it, and consume a fired idle check, so the next decision arms a new one.
    pub(crate) fn deferred(&mut self, now: DateTime<Utc>, touch: Touch) {
        self.note(now, touch);
    }

    /// Whether an activation is executing (not parked): the subject is not idle.
    pub(crate) fn executing(&self) -> bool {
        self.live > 0
    }

    /// After each message: decide whether to passivate, or arm the idle check.
    pub(crate) fn after(&mut self, step: &mut Step<'_>, touch: Touch) -> After {
        let now = step.now;
        if self.note(now, touch) {
            // Superseded: the armed check stands.
            return After::Stay;
        }
        if self.live > 0 {
            return After::Stay;
        }
        // A subject woken only to take an acknowledgement, or by a timer of its own, has
        // had no work since it last passivated: it is idle already.
        let idle_since = match (self.last_active, touch) {
            (Some(at), _) => at,
            (None, Touch::Ack | Touch::Timer | Touch::Crowded) => DateTime::<Utc>::MIN_UTC,
            (None, _) => now,
        };
        // Evicted (more live subjects than `max_live_subjects`): idle is enough.
        let due = if touch == Touch::Crowded {
            now
        } else {
            chrono::Duration::from_std(step.settings.passivate_after)
                .ok()
                .and_then(|d| idle_since.checked_add_signed(d))
                .unwrap_or(DateTime::<Utc>::MAX_UTC)
        };
        if due <= now {
            self.forget_before(step, now);
            if self.entries.is_empty() && self.runs.is_empty() {
                self.arm_forgetting(step);
            }
            // A passive subject arms nothing: the idle check is forgotten.
            if let Some(key) = self.idle_timer.take() {
                step.disarm(key);
            }
            return After::Passivate;
        }
        if self.idle_timer.is_none() {
            let timer = Timer::Idle {
                subject: Arc::clone(&self.name),
            };
            self.idle_timer = Some(step.arm(due, timer));
        }
        After::Stay
    }

    /// A subject that passivates holding only resolutions it remembers is woken once
    /// the newest of them passes the retention horizon, so it can forget them and itself
    /// (a wake from an idle check armed before it passivated, which the actor handles as
    /// any such check). A subject holding entries forgets its old resolutions when
    /// something else wakes it; [`REMEMBERED`] bounds them meanwhile.
    pub(super) fn arm_forgetting(&self, step: &mut Step<'_>) {
        let Some(newest) = self.memory.back() else {
            return;
        };
        let due = step.retention_end(newest.at);
        step.arm(
            due,
            Timer::Idle {
                subject: Arc::clone(&self.name),
            },
        );
    }
}
