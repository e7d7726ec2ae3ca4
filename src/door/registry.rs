//! The saved doors: saving (compiled and checked, a schedule armed), removing, the hooks
//! on a topic with their condition and subject, and a schedule's next fire.
//!
//! A door can be saved, replaced or removed while the runtime runs; a visit uses the
//! definition it found when it started. Nothing here sends to a subject: the visits
//! themselves are `crate::subject::client`'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, SecondsFormat, Utc};
use dashmap::DashMap;
use serde_json::Value;

use super::contract;
use super::outcome::{SaveError, Visit, VisitError};
use super::plan::VisitProblem;
use super::saved::Saved;
use super::spec::{Kind, Spec};
use crate::error::Problems;
use crate::jq::{EvalError, Input, Limits, Program};
use crate::services::Services;
use crate::store::{Batch, Space, Store, layout};
use crate::supervisor::Timer;

#[derive(Debug, Default)]
pub(crate) struct Doors {
    /// By name.
    by_name: DashMap<String, Arc<Saved>>,
    /// Counts saves, so a schedule timer of a replaced door does nothing.
    generation: AtomicU64,
}

impl Doors {
    /// The door called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Saved>> {
        self.by_name.get(name).map(|d| Arc::clone(d.value()))
    }

    /// Forget the door called `name`; whether it existed.
    pub(crate) fn remove(&self, name: &str) -> bool {
        self.by_name.remove(name).is_some()
    }

    /// Every door's spec as saved, by name.
    pub(crate) fn specs(&self) -> Vec<Spec> {
        let mut specs: Vec<Spec> = self.by_name.iter().map(|d| d.spec.clone()).collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    /// The hooks on `topic`, by name.
    pub(crate) fn hooks(&self, topic: &str) -> Vec<Arc<Saved>> {
        let mut hooks: Vec<Arc<Saved>> = self
            .by_name
            .iter()
            .filter(|d| matches!(&d.spec.kind, Kind::Hook { topic: t, .. } if t == topic))
            .map(|d| Arc::clone(d.value()))
            .collect();
        hooks.sort_by(|a, b| a.name().cmp(b.name()));
        hooks
    }
}

/// What one hook did with a fire.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HookFire {
    /// The hook's name.
    pub door: String,
    /// The subject it visited, when its condition held.
    pub subject: Option<String>,
    /// `None` when the condition was false; else the visit.
    pub visit: Option<Result<Visit, VisitError>>,
}

/// What a hook's condition and subject say of one fire.
#[derive(Debug)]
pub(crate) enum Hooked {
    /// The condition does not hold, or the hook has no subject: no visit.
    No,
    /// Visit this subject.
    Subject(String),
    /// An expression failed or yielded the wrong shape: the fire is refused.
    Refused(VisitError),
}

impl Doors {
    /// Save (or replace) a door: compiled and checked now, every problem reported
    /// together; a schedule is armed from the clock's now.
    pub(crate) fn save(&self, services: &Services, spec: Spec) -> Result<(), SaveError> {
        let written = serde_json::to_vec(&spec).ok();
        let name = spec.name.clone();
        self.restore(services, spec)?;
        if let (Some(store), Some(bytes)) = (&services.store, written) {
            let mut batch = Batch::new();
            batch.put(Space::Doors, layout::door_key(&name), bytes);
            wait_durable(store, batch);
        }
        Ok(())
    }

    /// Forget the door called `name`, durably; whether it existed.
    pub(crate) fn remove_saved(&self, services: &Services, name: &str) -> bool {
        let existed = self.remove(name);
        if let Some(store) = &services.store {
            let mut batch = Batch::new();
            batch.delete(Space::Doors, layout::door_key(name));
            wait_durable(store, batch);
        }
        existed
    }

    /// Compile and keep `spec` (a save, or a door read back after a restart).
    pub(crate) fn restore(&self, services: &Services, spec: Spec) -> Result<(), SaveError> {
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        let name = spec.name.clone();
        let saved = Saved::compile(spec, &services.targets, generation).map_err(|problems| {
            SaveError::Invalid {
                door: name.clone(),
                problems: Problems(problems),
            }
        })?;
        let saved = Arc::new(saved);
        if let (Kind::Schedule { .. }, Some(interval)) = (&saved.spec.kind, saved.interval) {
            let now = services.clock.now();
            if let Some(at) = next_fire(now, now, interval) {
                arm_schedule_at(services, &saved, at);
            }
        }
        self.by_name.insert(name, saved);
        Ok(())
    }

    /// A schedule's timer fired at `at`: the door and its subject, if the timer is the
    /// door's current one, with its next fire armed (every boundary missed meanwhile is
    /// skipped, not replayed).
    pub(crate) fn schedule_fired(
        &self,
        services: &Services,
        name: &str,
        generation: u64,
        at: DateTime<Utc>,
    ) -> Option<(Arc<Saved>, Arc<str>)> {
        let door = self.get(name).filter(|d| d.generation == generation)?;
        let (Kind::Schedule { subject, .. }, Some(interval)) = (&door.spec.kind, door.interval)
        else {
            return None;
        };
        if let Some(next) = next_fire(at, services.clock.now(), interval) {
            arm_schedule_at(services, &door, next);
        }
        let subject: Arc<str> = Arc::from(subject.as_str());
        Some((door, subject))
    }
}

/// Submit `batch` and wait until it is durable (or the store failed, which the store
/// logs): a door's save is rare, and its caller is told only once it is kept.
fn wait_durable(store: &Store, batch: Batch) {
    let (tx, rx) = std::sync::mpsc::channel();
    store.submit(
        batch,
        Box::new(move |result| {
            let _ = tx.send(result);
        }),
    );
    if let Ok(Err(error)) = rx.recv() {
        tracing::error!(%error, "a door's change could not be made durable");
    }
}

/// Arm `door`'s fire at `at`.
fn arm_schedule_at(services: &Services, door: &Saved, at: DateTime<Utc>) {
    services.timers.arm(
        services.keys.key(at),
        Timer::Schedule {
            door: Arc::from(door.name()),
            generation: door.generation,
        },
    );
}

/// The first boundary of `interval` after `now`, counting from `boundary`, in one step
/// (a clock that jumped a year ahead costs no more than one that did not).
pub(crate) fn next_fire(
    boundary: DateTime<Utc>,
    now: DateTime<Utc>,
    interval: std::time::Duration,
) -> Option<DateTime<Utc>> {
    const NANOS: i128 = 1_000_000_000;
    let step = i128::try_from(interval.as_nanos())
        .ok()
        .filter(|s| *s > 0)?;
    let behind = now.signed_duration_since(boundary);
    let behind = i128::from(behind.num_seconds()) * NANOS + i128::from(behind.subsec_nanos());
    // Every boundary up to now is missed but the one that fires: skipped, not replayed.
    let steps = if behind < 0 { 1 } else { behind / step + 1 };
    let ahead = steps.checked_mul(step)?;
    let secs = i64::try_from(ahead / NANOS).ok()?;
    let nanos = u32::try_from(ahead % NANOS).ok()?;
    let ahead = chrono::TimeDelta::new(secs, nanos)?;
    boundary.checked_add_signed(ahead)
}

impl Saved {
    /// Whether a visit with `input` may go ahead: the door is not broken and the input
    /// is within `max` bytes as JSON text.
    pub(crate) fn admit(&self, input: &Value, max: usize) -> Result<(), VisitError> {
        let name = self.name().to_owned();
        if self.is_broken() {
            return Err(VisitError::Broken { door: name });
        }
        let bytes = json_len(input);
        if bytes > max {
            return Err(VisitError::InputTooLarge {
                door: name,
                bytes,
                max,
            });
        }
        Ok(())
    }

    /// Evaluate this hook's condition and subject for a fire with `input`. An
    /// expression that passes its deadline breaks the hook, as it would a visit's.
    pub(crate) async fn hooked(&self, input: &Value, services: &Services) -> Hooked {
        let Kind::Hook { subject, .. } = &self.spec.kind else {
            return Hooked::No;
        };
        if self.is_broken() {
            return Hooked::Refused(VisitError::Broken {
                door: self.name().to_owned(),
            });
        }
        let now = services.clock.now();
        let vars = [
            Input::string(self.name()),
            Input::string(&now.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        ];
        let limits = Limits {
            deadline: services.settings.jq_deadline,
            max_input_bytes: services.settings.max_input_bytes,
        };
        let doc = Input::from_json(input);
        let holds = match &self.condition {
            None => Ok(true),
            Some(p) => self
                .one("condition", p, &doc, &vars, &limits)
                .await
                .and_then(|v| match v {
                    Value::Bool(b) => Ok(b),
                    other => Err(shape(
                        "condition",
                        &other,
                        "condition must yield one boolean",
                    )),
                }),
        };
        let target = match holds {
            Err(problem) => Err(problem),
            Ok(false) => Ok(None),
            Ok(true) => match (&self.subject_expr, subject) {
                (Some(p), _) => self
                    .one("subject_expr", p, &doc, &vars, &limits)
                    .await
                    .and_then(|v| match v {
                        Value::String(s) if !s.is_empty() => {
                            match crate::name::problem("subject", &s) {
                                None => Ok(Some(s)),
                                Some(why) => Err(shape(
                                    "subject_expr",
                                    &Value::String(s),
                                    &format!("subject_expr must yield a subject: {why}"),
                                )),
                            }
                        }
                        other => Err(shape(
                            "subject_expr",
                            &other,
                            "subject_expr must yield one non-empty string",
                        )),
                    }),
                (None, Some(s)) => Ok(Some(s.clone())),
                (None, None) => Ok(None),
            },
        };
        match target {
            Ok(None) => Hooked::No,
            Ok(Some(s)) => Hooked::Subject(s),
            Err(problem) => Hooked::Refused(VisitError::Refused {
                door: self.name().to_owned(),
                problems: Problems(vec![problem]),
            }),
        }
    }

    /// The one output of `program`, or the problem with it; a deadline passed breaks
    /// the door.
    async fn one(
        &self,
        expr: &str,
        program: &Program,
        doc: &Input,
        vars: &[Input],
        limits: &Limits,
    ) -> Result<Value, VisitProblem> {
        let result = Program::run_batch(&[program], doc, vars, limits)
            .await
            .into_iter()
            .next()
            .unwrap_or(Err(EvalError::Internal(
                "the evaluation reported no result".to_owned(),
            )));
        if let Err(EvalError::Deadline { .. }) = &result {
            self.break_door();
        }
        let out = result.map_err(|e| VisitProblem::Eval {
            expr: expr.to_owned(),
            error: e.to_string(),
        })?;
        if out.more {
            return Err(VisitProblem::Many {
                expr: expr.to_owned(),
                first: out.first.as_ref().map(contract::shown).unwrap_or_default(),
            });
        }
        out.first.ok_or_else(|| VisitProblem::NoOutput {
            expr: expr.to_owned(),
        })
    }
}

/// The problem of an expression that yielded `v` where it should not.
fn shape(expr: &str, v: &Value, why: &str) -> VisitProblem {
    VisitProblem::Shape {
        expr: expr.to_owned(),
        emitted: contract::shown(v),
        why: why.to_owned(),
    }
}

/// The length of `value` as JSON text, without writing it anywhere.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{DateTime, TimeDelta, Utc};

    use super::next_fire;

    fn at(secs: i64, nanos: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, nanos).unwrap_or_default()
    }

    #[test]
    fn the_next_fire_is_the_first_boundary_after_now() {
        let minute = Duration::from_secs(60);
        // On time: one interval on.
        assert_eq!(next_fire(at(0, 0), at(0, 0), minute), Some(at(60, 0)));
        // Late by less than an interval, or exactly on a later boundary.
        assert_eq!(next_fire(at(0, 0), at(59, 0), minute), Some(at(60, 0)));
        assert_eq!(next_fire(at(0, 0), at(120, 0), minute), Some(at(180, 0)));
        // A clock behind the boundary still moves forward by one interval.
        assert_eq!(next_fire(at(100, 0), at(40, 0), minute), Some(at(160, 0)));
        // Sub-second parts of the interval and of the clock are kept.
        let odd = Duration::from_millis(1500);
        assert_eq!(next_fire(at(0, 0), at(4, 0), odd), Some(at(4, 500_000_000)));
    }

    /// A year's jump over a one-nanosecond interval (shorter than any schedule may have)
    /// is one division, not 3e16 steps.
    #[test]
    fn a_jump_is_computed_in_one_step() {
        let start = at(1_000, 0);
        let year = TimeDelta::days(365);
        let now = start + year + TimeDelta::nanoseconds(7);
        assert_eq!(
            next_fire(start, now, Duration::from_nanos(1)),
            Some(now + TimeDelta::nanoseconds(1))
        );
    }

    #[test]
    fn past_the_end_of_time_nothing_is_armed() {
        let end = DateTime::<Utc>::MAX_UTC;
        assert_eq!(next_fire(end, end, Duration::from_secs(1)), None);
        assert_eq!(next_fire(at(0, 0), at(0, 0), Duration::ZERO), None);
        assert_eq!(next_fire(at(0, 0), at(0, 0), Duration::MAX), None);
    }
}
