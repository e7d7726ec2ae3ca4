//! The saved doors, and the operations that drive them: a visit, a hook fire, a
//! schedule fire.
//!
//! A door can be saved, replaced or removed while the runtime runs; a visit uses the
//! definition it found when it started. Hooks and schedules visit with no receiver.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::SecondsFormat;
use dashmap::DashMap;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::plan::{self, VisitProblem};
use super::saved::Saved;
use super::spec::{Kind, Spec};
use super::visit::{ItemOutcome, SaveError, Visit, VisitError, VisitOutcome};
use crate::error::Problems;
use crate::event::Event;
use crate::jq::{EvalError, Input, Limits, Program};
use crate::record::{Buffered, Resumed};
use crate::shared::Shared;
use crate::subject::SubjectMsg;
use crate::subject::state::AppliedItem;
use crate::supervisor::Timer;

/// Every saved door.
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

/// Save (or replace) a door; a schedule is armed from now.
pub(crate) fn save(shared: &Arc<Shared>, spec: Spec) -> Result<(), SaveError> {
    let generation = shared.doors.generation.fetch_add(1, Ordering::Relaxed) + 1;
    let name = spec.name.clone();
    let saved = Saved::compile(spec, &shared.targets, generation).map_err(|problems| {
        SaveError::Invalid {
            door: name.clone(),
            problems: Problems(problems),
        }
    })?;
    let saved = Arc::new(saved);
    if let (Kind::Schedule { .. }, Some(interval)) = (&saved.spec.kind, saved.interval) {
        arm_schedule(shared, &saved, shared.clock.now(), interval);
    }
    shared.doors.by_name.insert(name, saved);
    Ok(())
}

fn arm_schedule(
    shared: &Shared,
    door: &Saved,
    from: chrono::DateTime<chrono::Utc>,
    interval: std::time::Duration,
) {
    if let Some(at) = next_fire(from, from, interval) {
        arm_schedule_at(shared, door, at);
    }
}

fn arm_schedule_at(shared: &Shared, door: &Saved, at: chrono::DateTime<chrono::Utc>) {
    shared.timers.arm(
        shared.timer_key(at),
        Timer::Schedule {
            door: Arc::from(door.name()),
            generation: door.generation,
        },
    );
}

/// The first fire of a schedule whose boundaries are `boundary + k * interval` that is
/// strictly after `now`, computed in one step however far the clock jumped; `None` past
/// the end of time (the schedule fires no more).
pub(crate) fn next_fire(
    boundary: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
    interval: std::time::Duration,
) -> Option<chrono::DateTime<chrono::Utc>> {
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

/// A schedule's timer, armed for the boundary `at`, fired: arm the next fire and return
/// the visit as a message for the schedule's subject, which evaluates and applies it
/// without the ticker waiting (`None` when the door was replaced or removed, or the visit
/// is refused before it reaches the subject). A clock that jumped several intervals fires
/// once, and the next fire is the first boundary after now.
pub(crate) fn schedule_fired(
    shared: &Arc<Shared>,
    name: &str,
    generation: u64,
    at: chrono::DateTime<chrono::Utc>,
) -> Option<(Arc<str>, SubjectMsg)> {
    let door = shared
        .doors
        .get(name)
        .filter(|d| d.generation == generation)?;
    let (Kind::Schedule { subject, .. }, Some(interval)) = (&door.spec.kind, door.interval) else {
        return None;
    };
    let now = shared.clock.now();
    if let Some(next) = next_fire(at, now, interval) {
        arm_schedule_at(shared, &door, next);
    }
    let input = json!({
        "schedule": name,
        "fired_at": now.to_rfc3339_opts(SecondsFormat::AutoSi, true),
    });
    let subject: Arc<str> = Arc::from(subject.as_str());
    // A refusal is published as an event; a schedule has nobody to tell.
    if let Err(error) = admit(&door, &input, shared.settings.max_input_bytes) {
        refused(shared, &subject, error);
        return None;
    }
    Some((subject, SubjectMsg::Scheduled { door, input }))
}

/// A schedule's visit, at its subject: `visit`'s refusals are published as events.
pub(crate) async fn scheduled_visit(
    shared: &Arc<Shared>,
    state: &mut crate::subject::state::SubjectState,
    door: &Saved,
    input: Value,
) {
    if let Err(problems) = state.visit(shared, door, input).await {
        let error = VisitError::Refused {
            door: door.name().to_owned(),
            problems: Problems(problems),
        };
        refused(shared, &state.name, error);
    }
}

/// Whether a visit of `door` with `input` may go to its subject: the door is not broken
/// and the input is within the cap.
fn admit(door: &Saved, input: &Value, max: usize) -> Result<(), VisitError> {
    let name = door.name().to_owned();
    if door.is_broken() {
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

/// Visit `door` on `subject` with `input`.
pub(crate) async fn visit(
    shared: &Arc<Shared>,
    door: &Arc<Saved>,
    subject: &Arc<str>,
    input: Value,
) -> Result<Visit, VisitError> {
    let name = door.name().to_owned();
    admit(door, &input, shared.settings.max_input_bytes)
        .map_err(|error| refused(shared, subject, error))?;
    let (reply, rx) = oneshot::channel();
    let msg = SubjectMsg::Visit {
        door: Arc::clone(door),
        input,
        reply,
    };
    shared
        .subjects
        .send(shared, subject, msg)
        .await
        .map_err(|_| VisitError::Stopped)?;
    let applied = match rx.await.map_err(|_| VisitError::Stopped)? {
        Ok(applied) => applied,
        Err(problems) => {
            return Err(refused(
                shared,
                subject,
                VisitError::Refused {
                    door: name,
                    problems: Problems(problems),
                },
            ));
        }
    };
    let outcome = if let Some(items) = applied.resolved {
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            results.push(match item {
                AppliedItem::Resumed { id, ack, outcome } => {
                    let outcome = match (ack, outcome) {
                        (crate::subject::Ack::Buffered { remaining }, _) => {
                            Some(Resumed::Buffered {
                                status: Buffered::Buffered,
                                remaining,
                            })
                        }
                        (_, Some(rx)) => {
                            Some(Resumed::Outcome(rx.await.map_err(|_| VisitError::Stopped)?))
                        }
                        (_, None) => None,
                    };
                    ItemOutcome::Resumed { id, outcome }
                }
                AppliedItem::Taken { id, result } => match result {
                    Ok(result) => ItemOutcome::Taken { id, result },
                    Err(error) => ItemOutcome::TakeFailed { id, error },
                },
            });
        }
        VisitOutcome::Resolved { results }
    } else if let Some((run, rx)) = applied.started {
        let record = match rx {
            Some(rx) => Some(rx.await.map_err(|_| VisitError::Stopped)?),
            None => None,
        };
        VisitOutcome::Started {
            run_id: run.to_string(),
            record,
        }
    } else {
        VisitOutcome::Nothing
    };
    Ok(Visit {
        cancelled: applied.cancelled,
        outcome,
    })
}

/// The length of `value` as compact JSON, counted without building the text: the cap is
/// checked on every visit.
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

fn refused(shared: &Shared, subject: &str, error: VisitError) -> VisitError {
    let door = match &error {
        VisitError::UnknownDoor { door }
        | VisitError::Broken { door }
        | VisitError::InputTooLarge { door, .. }
        | VisitError::InputTooDeep { door, .. }
        | VisitError::Refused { door, .. } => door.clone(),
        VisitError::Stopped | VisitError::EmptySubject => String::new(),
    };
    shared.events.publish(Event::VisitRefused {
        subject: subject.to_owned(),
        door,
        error: error.to_string(),
    });
    error
}

/// Fire `topic`: each hook on it, by name, checks its condition, finds its subject, and
/// visits with no receiver.
pub(crate) async fn fire(shared: &Arc<Shared>, topic: &str, input: Value) -> Vec<HookFire> {
    let mut fires = Vec::new();
    let now = shared.clock.now();
    let now_text = Input::string(&now.to_rfc3339_opts(SecondsFormat::AutoSi, true));
    let limits = Limits {
        deadline: shared.settings.jq_deadline,
        max_input_bytes: shared.settings.max_input_bytes,
    };
    let doc = Input::from_json(&input);
    for door in shared.doors.hooks(topic) {
        let Kind::Hook { subject, .. } = &door.spec.kind else {
            continue;
        };
        let vars = [Input::string(door.name()), now_text.clone()];
        let shape = |expr: &str, v: &Value, why: &str| VisitProblem::Shape {
            expr: expr.to_owned(),
            emitted: plan::shown(v),
            why: why.to_owned(),
        };
        let holds = match &door.condition {
            None => Ok(true),
            Some(p) => one("condition", p, &doc, &vars, &limits)
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
            Ok(true) => match (&door.subject_expr, subject) {
                (Some(p), _) => one("subject_expr", p, &doc, &vars, &limits)
                    .await
                    .and_then(|v| match v {
                        Value::String(s) if !s.is_empty() => Ok(Some(s)),
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
        let fire = match target {
            Ok(None) => HookFire {
                door: door.name().to_owned(),
                subject: None,
                visit: None,
            },
            Ok(Some(s)) => {
                let subject: Arc<str> = Arc::from(s.as_str());
                let result = visit(shared, &door, &subject, input.clone()).await;
                HookFire {
                    door: door.name().to_owned(),
                    subject: Some(s),
                    visit: Some(result),
                }
            }
            Err(problem) => {
                let error = VisitError::Refused {
                    door: door.name().to_owned(),
                    problems: Problems(vec![problem]),
                };
                HookFire {
                    door: door.name().to_owned(),
                    subject: None,
                    visit: Some(Err(refused(shared, "", error))),
                }
            }
        };
        fires.push(fire);
    }
    fires
}

/// Evaluate a hook's `condition` or `subject_expr` through the visits' evaluation path (in
/// place when shallow, else awaited on the evaluation pool): it must emit exactly one value.
async fn one(
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
    let out = result.map_err(|e| VisitProblem::Eval {
        expr: expr.to_owned(),
        error: e.to_string(),
    })?;
    if out.more {
        return Err(VisitProblem::Many {
            expr: expr.to_owned(),
            first: out.first.as_ref().map(plan::shown).unwrap_or_default(),
        });
    }
    out.first.ok_or_else(|| VisitProblem::NoOutput {
        expr: expr.to_owned(),
    })
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
