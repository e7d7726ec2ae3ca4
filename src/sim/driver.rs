//! [`Driver`]: what a scenario's steps are played on. [`InProcess`] drives a runtime in
//! this process; the command line has a driver that plays the same steps over HTTP
//! against a live `parkway serve`, so both can be compared line by line.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::scenario::{Action, Scenario, StartSpec};
use super::script::{self, Notes};
use super::transcript::Failure;
use crate::clock::ManualClock;
use crate::error::BuildError;
use crate::event::Event;
use crate::ids::Ids;
use crate::inbox::Frame;
use crate::runtime::{Builder, Runtime, Start};

/// How long one step, or settling after it, may take in real time before it is reported
/// as hung (a `run` of a target blocked in a sync user ask, say). Virtual time never
/// moves on its own.
pub const HANG: Duration = Duration::from_secs(20);

/// What one operation returned: its output, or the failure it reported.
pub type Outcome = Result<Value, Failure>;

/// What a step left once every consequence of it happened.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct AfterStep {
    /// The virtual clock's reading, RFC 3339.
    pub now: String,
    /// The platform events the step caused, in order, as JSON.
    pub events: Vec<Value>,
    /// What scripted targets noted during the step.
    pub notes: Vec<String>,
    /// Settling did not finish within [`HANG`]: work that never quiets.
    pub hung: bool,
}

impl AfterStep {
    /// What a step left: the clock's reading, events and notes, settled in time.
    pub fn new(now: String, events: Vec<Value>, notes: Vec<String>) -> AfterStep {
        AfterStep {
            now,
            events,
            notes,
            hung: false,
        }
    }

    /// The same, marked as not settled within [`HANG`].
    pub fn hung(mut self) -> AfterStep {
        self.hung = true;
        self
    }
}

/// What plays a scenario's steps. The runner fills each action's templates before it
/// hands the action over, so a driver sees only plain values (a subject is a string, an
/// id list a list).
pub trait Driver {
    /// Perform one action; its output, or the failure it reported, shaped as the
    /// in-process runtime's own (`docs/simulation.md` shows each).
    fn perform(&mut self, action: &Action) -> impl Future<Output = Outcome>;

    /// Let every consequence of the last action happen (activations, expiries due at the
    /// clock's present, retention drops), then say what the step left.
    fn settle(&mut self) -> impl Future<Output = AfterStep>;
}

impl Scenario {
    /// A runtime builder for this scenario: `clock`, sequential ids, the scenario's
    /// settings, and its scripted targets, whose notes go to `notes`. Without `data`, the
    /// runtime keeps its state in memory.
    pub fn builder(&self, clock: &ManualClock, notes: &Notes, data: Option<&Path>) -> Builder {
        let s = &self.settings;
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
            builder = builder.data_dir(data);
        }
        for (name, script) in &self.targets {
            builder = script::register(builder, name, script, notes, None);
        }
        builder
    }
}

/// A scenario's data directory: fresh under the system's temporary directory, removed
/// when dropped.
#[derive(Debug)]
pub struct DataDir(PathBuf);

impl DataDir {
    /// A new, empty directory.
    pub fn fresh() -> Result<DataDir, String> {
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

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for DataDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The scenario's runtime in this process, on a manual clock with sequential ids.
pub struct InProcess<'s> {
    /// The runtime.
    rt: Runtime,
    /// The scenario, to build the runtime again after a `restart`.
    scenario: &'s Scenario,
    /// The data directory of a durable scenario.
    data: Option<DataDir>,
    clock: ManualClock,
    /// What scripted targets note.
    notes: Notes,
    /// The event stream, subscribed before anything ran (a runtime in memory).
    events: broadcast::Receiver<Event>,
    /// The last entry of the event log read (a durable runtime, whose steps read their
    /// events from the log: in its order, which is the order a stream shows).
    logged: u64,
    /// The inbox's frames, subscribed before anything ran; a `frames` step reads those
    /// not yet read.
    frames: broadcast::Receiver<Frame>,
}

impl std::fmt::Debug for InProcess<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess")
            .field("scenario", &self.scenario.name)
            .field("data", &self.data)
            .finish_non_exhaustive()
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn json<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Everything a broadcast receiver holds now, each as JSON; a lag is shown as a
/// `{"<what>": "lagged", "missed": n}` item.
fn drain<T: serde::Serialize + Clone>(rx: &mut broadcast::Receiver<T>, what: &str) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(item) => out.push(json(&item)),
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                out.push(json!({what: "lagged", "missed": n}));
            }
            Err(_) => return out,
        }
    }
}

impl<'s> InProcess<'s> {
    /// A fresh runtime for `scenario`, in a fresh data directory if it is durable.
    pub async fn open(scenario: &'s Scenario) -> Result<InProcess<'s>, BuildError> {
        let clock = ManualClock::at(scenario.start);
        let data = match scenario.settings.durable {
            true => Some(DataDir::fresh().map_err(BuildError::Store)?),
            false => None,
        };
        let notes = Notes::default();
        let rt = scenario
            .builder(&clock, &notes, data.as_ref().map(DataDir::path))
            .build()
            .await?;
        Ok(InProcess {
            logged: 0,
            events: rt.events(),
            frames: rt.inbox_frames(),
            rt,
            scenario,
            data,
            clock,
            notes,
        })
    }

    /// Stop the runtime.
    pub async fn shutdown(self) {
        self.rt.shutdown().await;
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
        let rt = self
            .scenario
            .builder(&self.clock, &self.notes, Some(data.path()))
            .build()
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
}

impl InProcess<'_> {
    /// The event log's entries since the last read, as JSON; a log that cannot be read
    /// is shown as one `{"event": "unreadable", ...}` item.
    fn read_log(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            match self.rt.event_log(self.logged + 1, 512) {
                Ok(page) if page.is_empty() => return out,
                Ok(page) => {
                    for logged in page {
                        self.logged = logged.seq;
                        out.push(json(&logged.event));
                    }
                }
                Err(e) => {
                    out.push(json!({"event": "unreadable", "error": e.to_string()}));
                    return out;
                }
            }
        }
    }
}

/// A run's start, from its filled spec.
pub(crate) fn start(spec: &StartSpec) -> Start {
    let mut start = Start::new(text(&spec.subject), spec.target.clone())
        .kwargs(spec.kwargs.clone())
        .extras(spec.extras.clone());
    if let Some(identity) = &spec.identity {
        start = start.identity(identity.clone());
    }
    start
}

impl Driver for InProcess<'_> {
    async fn perform(&mut self, action: &Action) -> Outcome {
        let rt = &self.rt;
        match action {
            Action::Visit {
                door,
                subject,
                input,
            } => rt
                .visit(door, &text(subject), input.clone())
                .await
                .map(|v| json(&v))
                .map_err(|e| Failure::from(&e)),
            Action::Fire { topic, input } => {
                let fires = rt.fire(topic, input.clone()).await;
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
            Action::Advance { by, .. } => match self.clock.try_advance(*by) {
                Ok(_) => Ok(
                    json!({"now": rt.now().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)}),
                ),
                Err(e) => Err(Failure::new("invalid", e.to_string())),
            },
            Action::Answer { id, answer } => rt
                .answer(&text(id), answer.clone())
                .await
                .map(|()| Value::Null)
                .map_err(|e| Failure::from(&e)),
            Action::Parked { subject } => rt
                .list(&text(subject))
                .await
                .map(|entries| json(&entries))
                .map_err(|e| Failure::from(&e)),
            Action::Record { run } => {
                let run = text(run);
                rt.record(&run)
                    .await
                    .map(|r| json(&r))
                    .ok_or_else(|| Failure {
                        kind: "unknown_run".to_owned(),
                        message: format!("no record of run {run}: never started, or dropped"),
                    })
            }
            Action::Run(spec) => rt
                .run_tool(start(spec))
                .await
                .map(|r| json(&r))
                .map_err(|e| Failure::from(&e)),
            Action::Submit(spec) => rt
                .submit(start(spec))
                .await
                .map(|id| json!({"run_id": id}))
                .map_err(|e| Failure::from(&e)),
            Action::Resume {
                subject,
                id,
                payload,
                detached,
            } => {
                let (subject, id) = (text(subject), text(id));
                if *detached {
                    rt.resume_detached(&subject, &id, payload.clone())
                        .await
                        .map(|()| Value::Null)
                        .map_err(|e| Failure::from(&e))
                } else {
                    rt.resume(&subject, &id, payload.clone())
                        .await
                        .map(|r| json(&r))
                        .map_err(|e| Failure::from(&e))
                }
            }
            Action::Take { subject, id } => rt
                .take(&text(subject), &text(id))
                .await
                .map_err(|e| Failure::from(&e)),
            Action::Cancel { subject, ids } => {
                let list: Vec<String> = match ids {
                    Value::Array(items) => items.iter().map(text).collect(),
                    one => vec![text(one)],
                };
                let refs: Vec<&str> = list.iter().map(String::as_str).collect();
                rt.cancel(&text(subject), &refs)
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
            Action::Stats => Ok(stats_json(&rt.stats().await)),
            Action::Restart => self.restart().await,
            Action::Frames => Ok(Value::Array(drain(&mut self.frames, "frame"))),
        }
    }

    async fn settle(&mut self) -> AfterStep {
        // Settling is bounded: work that never quiets is reported, not waited on.
        let settled = tokio::time::timeout(HANG, self.rt.settle()).await.is_ok();
        let events = match self.data {
            None => drain(&mut self.events, "event"),
            Some(_) => self.read_log(),
        };
        let after = AfterStep::new(
            self.rt
                .now()
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            events,
            self.notes.drain(),
        );
        if settled { after } else { after.hung() }
    }
}

/// A `stats` step's output: the counters a scenario may check.
fn stats_json(s: &crate::runtime::Stats) -> Value {
    json!({
        "caller_open": s.caller_open,
        "user_open": s.user_open,
        "live_subjects": s.live_subjects,
        "passive_subjects": s.passive_subjects,
        "runs": s.runs,
        "timers": s.timers,
        "records": s.records,
        "passivations": s.passivations,
    })
}
