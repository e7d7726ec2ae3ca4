//! The scenario runner: one runtime on a manual clock with sequential ids, driven step
//! by step; after each step the runtime is settled, so every consequence of the step
//! (activations, expiries, retention drops, schedule fires) has happened and its events
//! are in that step's line.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::expect::contains;
use super::scenario::{Action, Scenario, StartSpec, Step};
use super::script::{self, Notes};
use super::template::{Bindings, resolve};
use super::transcript::{Check, Failure, Line, Transcript};
use crate::clock::ManualClock;
use crate::error::BuildError;
use crate::event::Event;
use crate::ids::Ids;
use crate::inbox::Frame;
use crate::runtime::{Runtime, Start};

/// How long one step may take in real time before it is reported as hung (a `run` of a
/// target blocked in a sync user ask, say). Virtual time never moves on its own.
const HANG: Duration = Duration::from_secs(20);

/// Run `scenario` on a fresh runtime and return its transcript.
pub async fn run(scenario: &Scenario) -> Result<Transcript, BuildError> {
    let clock = ManualClock::at(scenario.start);
    let data = match scenario.settings.durable {
        true => Some(DataDir::fresh().map_err(BuildError::Store)?),
        false => None,
    };
    let notes = Notes::default();
    let rt = open(scenario, &clock, &notes, data.as_ref()).await?;
    let mut harness = Harness {
        events: rt.events(),
        frames: rt.inbox_frames(),
        rt,
        clock,
        notes,
        bindings: Bindings::new(),
        scenario,
        data,
    };
    let mut lines = Vec::new();
    // The scenario's doors are saved first, each as a step that must succeed.
    for door in &scenario.doors {
        let step = Step {
            action: Action::SaveDoor(Box::new(door.clone())),
            expect: Some(Value::Null),
            expect_error: None,
            note: None,
            bind: None,
        };
        let number = lines.len() + 1;
        lines.push(harness.step(number, &step).await);
    }
    for step in &scenario.timeline {
        let number = lines.len() + 1;
        lines.push(harness.step(number, step).await);
    }
    harness.rt.shutdown().await;
    Ok(Transcript {
        scenario: scenario.name.clone(),
        about: scenario.about.clone(),
        lines,
    })
}

/// A runtime for `scenario` on `clock`, its targets registered, on `data` if durable.
async fn open(
    scenario: &Scenario,
    clock: &ManualClock,
    notes: &Notes,
    data: Option<&DataDir>,
) -> Result<Runtime, BuildError> {
    let s = &scenario.settings;
    let mut builder = Runtime::builder()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .passivate_after(s.passivate_after.unwrap_or(Duration::from_secs(3600)));
    if let Some(n) = s.max_concurrent_caller {
        builder = builder.max_concurrent_caller(n);
    }
    if let Some(n) = s.max_concurrent {
        builder = builder.max_concurrent(n);
    }
    if let Some(d) = s.waiting_retention {
        builder = builder.waiting_retention(d);
    }
    if let Some(d) = s.jq_deadline {
        builder = builder.jq_deadline(d);
    }
    if let Some(n) = s.max_input_bytes {
        builder = builder.max_input_bytes(n);
    }
    if let Some(data) = data {
        builder = builder.data_dir(&data.0);
    }
    for (name, script) in &scenario.targets {
        builder = script::register(builder, name, script, notes);
    }
    builder.build().await
}

/// A durable scenario's data directory: fresh under the system's temporary directory,
/// removed when the scenario ends.
struct DataDir(std::path::PathBuf);

impl DataDir {
    /// A new, empty directory.
    fn fresh() -> Result<DataDir, String> {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("parkway-sim-{}-{n}", std::process::id()));
        // A leftover of an earlier process with the same id is not this scenario's.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| {
            format!(
                "cannot create the scenario's data directory {}: {e}",
                dir.display()
            )
        })?;
        Ok(DataDir(dir))
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The runtime under test and what the timeline has bound so far.
struct Harness<'s> {
    /// The runtime.
    rt: Runtime,
    /// The scenario, to build the runtime again after a `restart`.
    scenario: &'s Scenario,
    /// The data directory of a durable scenario.
    data: Option<DataDir>,
    clock: ManualClock,
    /// What scripted targets note.
    notes: Notes,
    /// The event stream, subscribed before anything ran.
    events: broadcast::Receiver<Event>,
    /// The inbox's frames, subscribed before anything ran; a `frames` step reads those
    /// not yet read.
    frames: broadcast::Receiver<Frame>,
    /// Outputs bound with `as`.
    bindings: Bindings,
}

/// What one operation returned.
type Outcome = Result<Value, Failure>;

fn template_failure(message: String) -> Failure {
    Failure {
        kind: "template".to_owned(),
        message,
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn ids(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().map(text).collect(),
        one => vec![text(one)],
    }
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
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

impl Harness<'_> {
    async fn step(&mut self, number: usize, step: &Step) -> Line {
        let (summary, mut outcome) =
            match tokio::time::timeout(HANG, self.perform(&step.action)).await {
                Ok(done) => done,
                Err(_) => (describe(&step.action), Err(hung("an operation"))),
            };
        // Settling is bounded too: work that never quiets is reported, not waited on.
        if tokio::time::timeout(HANG, self.rt.settle()).await.is_err() && outcome.is_ok() {
            outcome = Err(hung("settling the runtime"));
        }
        let mut events = Vec::new();
        loop {
            match self.events.try_recv() {
                Ok(event) => events.push(json(&event)),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    events.push(json!({"event": "lagged", "missed": n}));
                }
                Err(_) => break,
            }
        }
        // Expectations are templates too, so they can name ids bound earlier.
        let check = match step.expect.as_ref().map(|e| self.fill(e)).transpose() {
            Ok(expect) => check(step, expect.as_ref(), &outcome),
            Err(f) => Some(Check::Failed(format!("the expectation: {}", f.message))),
        };
        if let Some(name) = &step.bind {
            let value = match &outcome {
                Ok(v) => v.clone(),
                Err(f) => json!({"error": f}),
            };
            self.bindings.insert(name.clone(), value);
        }
        let (output, error) = match outcome {
            Ok(v) => (Some(v), None),
            Err(f) => (None, Some(f)),
        };
        Line {
            step: number,
            note: step.note.clone(),
            action: key(&step.action).to_owned(),
            summary,
            at: self
                .rt
                .now()
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            output,
            error,
            events,
            notes: self.notes.drain(),
            check,
        }
    }

    /// Stop the runtime and build it again on the data directory; its counters once it
    /// has recovered.
    async fn restart(&mut self) -> Outcome {
        let Some(data) = &self.data else {
            return Err(Failure {
                kind: "not_durable".to_owned(),
                message: "a restart needs a data directory: set \"durable\": true in the settings"
                    .to_owned(),
            });
        };
        self.rt.shutdown().await;
        let rt = open(self.scenario, &self.clock, &self.notes, Some(data))
            .await
            .map_err(|e| Failure {
                kind: "restart".to_owned(),
                message: e.to_string(),
            })?;
        self.events = rt.events();
        self.frames = rt.inbox_frames();
        self.rt = rt;
        self.rt.settle().await;
        let s = self.rt.stats().await;
        Ok(json!({"caller_open": s.caller_open, "user_open": s.user_open, "runs": s.runs}))
    }

    fn fill(&self, value: &Value) -> Result<Value, Failure> {
        resolve(value, &self.bindings).map_err(template_failure)
    }

    fn start(&self, spec: &StartSpec) -> Result<Start, Failure> {
        let mut start = Start::new(text(&self.fill(&spec.subject)?), spec.target.clone())
            .kwargs(self.fill(&spec.kwargs)?)
            .extras(self.fill(&spec.extras)?);
        if let Some(identity) = &spec.identity {
            start = start.identity(identity.clone());
        }
        Ok(start)
    }

    async fn perform(&mut self, action: &Action) -> (String, Outcome) {
        let summary = describe(action);
        let outcome = self.outcome(action).await;
        (summary, outcome)
    }

    async fn outcome(&mut self, action: &Action) -> Outcome {
        let rt = &self.rt;
        match action {
            Action::Visit {
                door,
                subject,
                input,
            } => {
                let subject = text(&self.fill(subject)?);
                let input = self.fill(input)?;
                rt.visit(door, &subject, input)
                    .await
                    .map(|v| json(&v))
                    .map_err(|e| Failure::from(&e))
            }
            Action::Fire { topic, input } => {
                let input = self.fill(input)?;
                let fires = rt.fire(topic, input).await;
                Ok(Value::Array(
                    fires
                        .into_iter()
                        .map(|f| {
                            let visit = match &f.visit {
                                None => json!({"skipped": "condition is false"}),
                                Some(Ok(v)) => json(v),
                                Some(Err(e)) => json!({"error": Failure::from(e)}),
                            };
                            json!({"door": f.door, "subject": f.subject, "visit": visit})
                        })
                        .collect(),
                ))
            }
            Action::Advance { by, .. } => {
                self.clock.advance(*by);
                Ok(json!({"now": rt.now().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)}))
            }
            Action::Answer { id, answer } => {
                let id = text(&self.fill(id)?);
                let answer = self.fill(answer)?;
                rt.answer(&id, answer)
                    .await
                    .map(|()| Value::Null)
                    .map_err(|e| Failure::from(&e))
            }
            Action::Parked { subject } => {
                let subject = text(&self.fill(subject)?);
                rt.list(&subject)
                    .await
                    .map(|entries| json(&entries))
                    .map_err(|e| Failure::from(&e))
            }
            Action::Record { run } => {
                let run = text(&self.fill(run)?);
                rt.record(&run)
                    .await
                    .map(|r| json(&r))
                    .ok_or_else(|| Failure {
                        kind: "unknown_run".to_owned(),
                        message: format!("no record of run {run}: never started, or dropped"),
                    })
            }
            Action::Run(spec) => {
                let start = self.start(spec)?;
                rt.run_tool(start)
                    .await
                    .map(|r| json(&r))
                    .map_err(|e| Failure::from(&e))
            }
            Action::Submit(spec) => {
                let start = self.start(spec)?;
                rt.submit(start)
                    .await
                    .map(|id| json!({"run_id": id}))
                    .map_err(|e| Failure::from(&e))
            }
            Action::Resume {
                subject,
                id,
                payload,
                detached,
            } => {
                let subject = text(&self.fill(subject)?);
                let id = text(&self.fill(id)?);
                let payload = self.fill(payload)?;
                if *detached {
                    rt.resume_detached(&subject, &id, payload)
                        .await
                        .map(|()| Value::Null)
                        .map_err(|e| Failure::from(&e))
                } else {
                    rt.resume(&subject, &id, payload)
                        .await
                        .map(|r| json(&r))
                        .map_err(|e| Failure::from(&e))
                }
            }
            Action::Take { subject, id } => {
                let subject = text(&self.fill(subject)?);
                let id = text(&self.fill(id)?);
                rt.take(&subject, &id).await.map_err(|e| Failure::from(&e))
            }
            Action::Cancel { subject, ids: list } => {
                let subject = text(&self.fill(subject)?);
                let list = ids(&self.fill(list)?);
                let refs: Vec<&str> = list.iter().map(String::as_str).collect();
                rt.cancel(&subject, &refs)
                    .await
                    .map(|()| Value::Null)
                    .map_err(|e| Failure::from(&e))
            }
            Action::SaveDoor(spec) => rt
                .save_door((**spec).clone())
                .map(|()| Value::Null)
                .map_err(|e| Failure::from(&e)),
            Action::RemoveDoor(name) => Ok(json!({"removed": rt.remove_door(name)})),
            Action::Inbox { page, page_size } => rt
                .inbox(*page, *page_size)
                .map(|p| json(&p))
                .map_err(|e| Failure::from(&e)),
            Action::Stats => {
                let s = rt.stats().await;
                Ok(json!({
                    "caller_open": s.caller_open,
                    "user_open": s.user_open,
                    "live_subjects": s.live_subjects,
                    "passive_subjects": s.passive_subjects,
                    "runs": s.runs,
                    "timers": s.timers,
                    "records": s.records,
                    "passivations": s.passivations,
                }))
            }
            Action::Restart => self.restart().await,
            Action::Frames => {
                let mut frames = Vec::new();
                loop {
                    match self.frames.try_recv() {
                        Ok(frame) => frames.push(json(&frame)),
                        Err(broadcast::error::TryRecvError::Lagged(n)) => {
                            frames.push(json!({"frame": "lagged", "missed": n}));
                        }
                        Err(_) => break,
                    }
                }
                Ok(Value::Array(frames))
            }
        }
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
