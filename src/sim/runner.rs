//! The scenario runner: a scenario's steps played on a [`Driver`], step by step; after
//! each step the driver settles, so every consequence of the step (activations,
//! expiries, retention drops, schedule fires) has happened and its events are in that
//! step's line.

use serde_json::{Value, json};

use super::driver::{Driver, HANG, InProcess, Outcome};
use super::expect::contains;
use super::scenario::{Action, Scenario, StartSpec, Step};
use super::template::{Bindings, resolve};
use super::transcript::{Check, Failure, Line, Transcript};
use crate::error::BuildError;

/// Run `scenario` on a fresh runtime in this process and return its transcript.
pub async fn run(scenario: &Scenario) -> Result<Transcript, BuildError> {
    let mut driver = InProcess::open(scenario).await?;
    let transcript = play(scenario, &mut driver).await;
    driver.shutdown().await;
    Ok(transcript)
}

/// Play `scenario`'s doors and timeline on `driver` and return the transcript. The
/// scenario's doors are saved first, each as a step that must succeed.
pub async fn play<D: Driver>(scenario: &Scenario, driver: &mut D) -> Transcript {
    let mut bindings = Bindings::new();
    let mut lines = Vec::new();
    for door in &scenario.doors {
        let step = Step {
            action: Action::SaveDoor(Box::new(door.clone())),
            expect: Some(Value::Null),
            expect_error: None,
            note: None,
            bind: None,
        };
        let number = lines.len() + 1;
        lines.push(one(driver, &mut bindings, number, &step).await);
    }
    for step in &scenario.timeline {
        let number = lines.len() + 1;
        lines.push(one(driver, &mut bindings, number, step).await);
    }
    Transcript {
        scenario: scenario.name.clone(),
        about: scenario.about.clone(),
        lines,
    }
}

fn template_failure(message: String) -> Failure {
    Failure {
        kind: "template".to_owned(),
        message,
    }
}

fn hung(what: &str) -> Failure {
    Failure {
        kind: "hung".to_owned(),
        message: format!(
            "the step did not complete: {what} waits on something no later step can give \
             it (a `run` of a target blocked in a sync ask? use `submit`)"
        ),
    }
}

/// Play one step: fill its templates, perform it (bounded), settle, check.
async fn one<D: Driver>(
    driver: &mut D,
    bindings: &mut Bindings,
    number: usize,
    step: &Step,
) -> Line {
    let mut outcome = match filled(&step.action, bindings) {
        Err(f) => Err(f),
        Ok(action) => match tokio::time::timeout(HANG, driver.perform(&action)).await {
            Ok(done) => done,
            Err(_) => Err(hung("an operation")),
        },
    };
    let after = driver.settle().await;
    if after.hung && outcome.is_ok() {
        outcome = Err(hung("settling the runtime"));
    }
    // Expectations are templates too, so they can name ids bound earlier.
    let check = match step.expect.as_ref().map(|e| fill(e, bindings)).transpose() {
        Ok(expect) => check(step, expect.as_ref(), &outcome),
        Err(f) => Some(Check::Failed(format!("the expectation: {}", f.message))),
    };
    if let Some(name) = &step.bind {
        let value = match &outcome {
            Ok(v) => v.clone(),
            Err(f) => json!({"error": f}),
        };
        bindings.insert(name.clone(), value);
    }
    let (output, error) = match outcome {
        Ok(v) => (Some(v), None),
        Err(f) => (None, Some(f)),
    };
    Line {
        step: number,
        note: step.note.clone(),
        action: key(&step.action).to_owned(),
        summary: describe(&step.action),
        at: after.now,
        output,
        error,
        events: after.events,
        notes: after.notes,
        check,
    }
}

fn fill(value: &Value, bindings: &Bindings) -> Result<Value, Failure> {
    resolve(value, bindings).map_err(template_failure)
}

/// `action` with every template filled from `bindings`: subjects, ids and runs as text.
fn filled(action: &Action, bindings: &Bindings) -> Result<Action, Failure> {
    let f = |v: &Value| fill(v, bindings);
    let t = |v: &Value| fill(v, bindings).map(|v| Value::String(text(&v)));
    let start = |s: &StartSpec| -> Result<StartSpec, Failure> {
        Ok(StartSpec {
            target: s.target.clone(),
            subject: t(&s.subject)?,
            kwargs: f(&s.kwargs)?,
            extras: f(&s.extras)?,
            identity: s.identity.clone(),
        })
    };
    Ok(match action {
        Action::Visit {
            door,
            subject,
            input,
        } => Action::Visit {
            door: door.clone(),
            subject: t(subject)?,
            input: f(input)?,
        },
        Action::Fire { topic, input } => Action::Fire {
            topic: topic.clone(),
            input: f(input)?,
        },
        Action::Answer { id, answer } => Action::Answer {
            id: t(id)?,
            answer: f(answer)?,
        },
        Action::Parked { subject } => Action::Parked {
            subject: t(subject)?,
        },
        Action::Record { run } => Action::Record { run: t(run)? },
        Action::Run(spec) => Action::Run(start(spec)?),
        Action::Submit(spec) => Action::Submit(start(spec)?),
        Action::Resume {
            subject,
            id,
            payload,
            detached,
        } => Action::Resume {
            subject: t(subject)?,
            id: t(id)?,
            payload: f(payload)?,
            detached: *detached,
        },
        Action::Take { subject, id } => Action::Take {
            subject: t(subject)?,
            id: t(id)?,
        },
        Action::Cancel { subject, ids } => Action::Cancel {
            subject: t(subject)?,
            ids: Value::Array(match f(ids)? {
                Value::Array(items) => items.iter().map(|v| Value::String(text(v))).collect(),
                one => vec![Value::String(text(&one))],
            }),
        },
        other => other.clone(),
    })
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The action's key in the file.
fn key(action: &Action) -> &'static str {
    match action {
        Action::Visit { .. } => "visit",
        Action::Fire { .. } => "fire",
        Action::Advance { .. } => "advance",
        Action::Answer { .. } => "answer",
        Action::Parked { .. } => "parked",
        Action::Record { .. } => "record",
        Action::Run(_) => "run",
        Action::Submit(_) => "submit",
        Action::Resume { .. } => "resume",
        Action::Take { .. } => "take",
        Action::Cancel { .. } => "cancel",
        Action::SaveDoor(_) => "save_door",
        Action::RemoveDoor(_) => "remove_door",
        Action::Inbox { .. } => "inbox",
        Action::Stats => "stats",
        Action::Frames => "frames",
        Action::Restart => "restart",
    }
}

/// What the step does, in words (templates shown as written).
fn describe(action: &Action) -> String {
    let t = |v: &Value| text(v);
    match action {
        Action::Visit {
            door,
            subject,
            input,
        } => format!("visit door {door} on {} with {input}", t(subject)),
        Action::Fire { topic, input } => format!("fire topic {topic} with {input}"),
        Action::Advance { text, .. } => format!("advance the clock {text}"),
        Action::Answer { id, answer } => format!("answer {} with {answer}", t(id)),
        Action::Parked { subject } => format!("read the parked set of {}", t(subject)),
        Action::Record { run } => format!("read the record of {}", t(run)),
        Action::Run(s) => format!(
            "run_tool {} on {} with {}",
            s.target,
            t(&s.subject),
            s.kwargs
        ),
        Action::Submit(s) => format!("submit {} on {} with {}", s.target, t(&s.subject), s.kwargs),
        Action::Resume {
            subject,
            id,
            payload,
            detached,
        } => format!(
            "resume {} on {} with {payload}{}",
            t(id),
            t(subject),
            if *detached { " (no receiver)" } else { "" }
        ),
        Action::Take { subject, id } => format!("take {} on {}", t(id), t(subject)),
        Action::Cancel { subject, ids } => format!("cancel {ids} on {}", t(subject)),
        Action::SaveDoor(spec) => format!("save door {}", spec.name),
        Action::RemoveDoor(name) => format!("remove door {name}"),
        Action::Inbox { page, .. } => format!("read inbox page {page}"),
        Action::Stats => "read the runtime's counters".to_owned(),
        Action::Frames => "read the inbox frames not yet read".to_owned(),
        Action::Restart => "stop the runtime and build it again on its data directory".to_owned(),
    }
}

/// The verdict on a step's expectation.
fn check(step: &Step, expect: Option<&Value>, outcome: &Outcome) -> Option<Check> {
    if let Some(want) = &step.expect_error {
        return Some(match outcome {
            Ok(v) => Check::Failed(format!(
                "expected an error, but the step succeeded with {v}"
            )),
            Err(f) => {
                let kind_ok = want.kind.as_ref().is_none_or(|k| *k == f.kind);
                let message_ok = want.message.as_ref().is_none_or(|m| f.message.contains(m));
                if kind_ok && message_ok {
                    Check::Passed
                } else {
                    Check::Failed(format!(
                        "expected an error{}{}, got {}: {}",
                        want.kind
                            .as_ref()
                            .map(|k| format!(" of kind {k}"))
                            .unwrap_or_default(),
                        want.message
                            .as_ref()
                            .map(|m| format!(" containing {m:?}"))
                            .unwrap_or_default(),
                        f.kind,
                        f.message
                    ))
                }
            }
        });
    }
    let want = expect?;
    Some(match outcome {
        Err(f) => Check::Failed(format!(
            "expected {want}, but the step failed: {}: {}",
            f.kind, f.message
        )),
        Ok(v) => match contains(v, want) {
            None => Check::Passed,
            Some(why) => Check::Failed(format!("{why} (expected {want}, got {v})")),
        },
    })
}
