//! [`Scenario`]: the scenario file format, parsed and checked before anything runs.
//!
//! A scenario is one JSON document: settings, scripted targets, doors, and a timeline.
//! Parsing reports every problem it finds, each with the path of the offending part
//! (`timeline[3]: unknown action "vist"`); nothing runs until the whole file is sound.
//! The format is documented in full in `docs/simulation.md`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use indexmap::IndexMap;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::door::spec::Spec as DoorSpec;

/// A whole scenario file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Scenario {
    /// Its name, printed at the head of the transcript.
    pub name: String,
    /// What it shows, printed under the name.
    pub about: Option<String>,
    /// The virtual clock's starting instant (default `2026-01-01T00:00:00Z`).
    pub start: DateTime<Utc>,
    /// Runtime settings; unset ones keep their defaults.
    pub settings: SimSettings,
    /// Scripted targets by name, in file order.
    pub targets: IndexMap<String, Script>,
    /// Doors saved before the timeline starts, in file order.
    pub doors: Vec<DoorSpec>,
    /// The steps, in order.
    pub timeline: Vec<Step>,
}

/// Runtime settings a scenario may set; durations are humantime text such as `10m`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimSettings {
    /// `INTERACTIONS_MAX_CONCURRENT_CALLER`.
    pub max_concurrent_caller: Option<usize>,
    /// `INTERACTIONS_MAX_CONCURRENT`.
    pub max_concurrent: Option<usize>,
    /// `INTERACTIONS_WAITING_RETENTION`.
    pub waiting_retention: Option<Duration>,
    /// How long an idle subject keeps its actor (default in a scenario: `1h`).
    pub passivate_after: Option<Duration>,
    /// The door expressions' evaluation deadline.
    pub jq_deadline: Option<Duration>,
    /// The cap on a visit's input document, in bytes.
    pub max_input_bytes: Option<usize>,
    /// Keep the runtime's state in a fresh data directory (removed when the scenario
    /// ends), so a `restart` step can stop the runtime and build it again on it.
    pub durable: bool,
}

/// A scripted target: the extras keys it declares and the steps it runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Script {
    /// The extras keys the target reads.
    pub extras: Vec<String>,
    /// What one activation does, from the top (a resume replays it).
    pub steps: Vec<Op>,
    /// The tool it is offered as, if any (`docs/mcp.md`).
    pub tool: Option<crate::ToolSpec>,
}

/// One step of a scripted target. Values are templates (see [`crate::sim`]).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Op {
    /// Ask one or more questions; several asks form one group. Binds the answer (or the
    /// list of answers for `ask_all`).
    Ask {
        /// The asks, in order.
        asks: Vec<AskSpec>,
        /// `ask_all` (binds a list) rather than `ask` (binds one answer).
        all: bool,
        /// The binding name.
        bind: Option<String>,
    },
    /// Call another target as a child run; binds its run record.
    Call {
        /// The target.
        target: String,
        /// Its kwargs (a template).
        kwargs: Value,
        /// The binding name.
        bind: Option<String>,
    },
    /// Call a tool of another MCP server, named in the targets file's `mcp_servers`;
    /// binds its result. A round the server asks is asked of this run's caller
    /// (`docs/mcp.md`, "Runs as MCP clients"); needs the MCP face's caller
    /// ([`Scripts::register_with`]).
    McpCall {
        /// The server's name.
        server: String,
        /// The tool.
        tool: String,
        /// Its arguments (a template).
        arguments: Value,
        /// The binding name.
        bind: Option<String>,
    },
    /// A journaled side effect: `value` is computed once and replayed after.
    Step {
        /// The step's name in the journal.
        name: String,
        /// Its value (a template).
        value: Value,
        /// The binding name.
        bind: Option<String>,
    },
    /// Return a value (a template); the run succeeds.
    Return(Value),
    /// Fail with a message (a template).
    Fail(Value),
    /// Bind the subject's parked entries (`list_parked`).
    ListParked {
        /// The binding name.
        bind: Option<String>,
    },
    /// Resume an ask with `payload`, or take a waiting outcome when `payload` is absent.
    ResumeParked {
        /// The interaction (a template).
        id: Value,
        /// The answer (a template); absent means take.
        payload: Option<Value>,
        /// The binding name.
        bind: Option<String>,
    },
    /// Cancel interactions (a whole-chain kill).
    CancelParked {
        /// An id or a list of ids (a template).
        ids: Value,
        /// The binding name.
        bind: Option<String>,
    },
    /// Wait on the runtime's clock ([`Ctx::wait`](crate::Ctx::wait)): a duration (a
    /// template) such as `"2s"`, or a number of seconds.
    Wait(Value),
    /// Report progress ([`Ctx::progress`](crate::Ctx::progress)): `progress`, with an
    /// optional `total` and `message` (templates).
    Progress {
        /// The progress so far (a number).
        progress: Value,
        /// The total (a number), when known.
        total: Option<Value>,
        /// What the run is doing (a string).
        message: Option<Value>,
    },
    /// Branch on a template's value.
    If {
        /// The value tested (a template).
        value: Value,
        /// When present, the branch is `then` when `value` equals it; else when `value`
        /// is neither `null` nor `false`.
        equals: Option<Value>,
        /// Steps run when the test holds.
        then: Vec<Op>,
        /// Steps run otherwise.
        otherwise: Vec<Op>,
    },
}

/// The body of an `mcp_call` step.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct McpCallSpec {
    server: String,
    tool: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// An MCP server a targets file names, for its `mcp_call` steps.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct McpServer {
    /// Its Streamable HTTP endpoint (`http://host:port/mcp`).
    pub url: String,
    /// The bearer token to send, if it needs one.
    #[serde(default)]
    pub token: Option<String>,
}

/// One ask of a scripted target.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AskSpec {
    /// `caller` (default) or `user`.
    #[serde(default = "caller")]
    pub to: String,
    /// The question (a template).
    #[serde(default)]
    pub question: Option<Value>,
    /// A structured payload (a template; caller asks only).
    #[serde(default)]
    pub payload: Option<Value>,
    /// The answer format.
    #[serde(default)]
    pub answer_format: Option<String>,
    /// `async` (default) or `sync`.
    #[serde(default)]
    pub mode: Option<String>,
    /// A humantime duration from now, or an RFC 3339 instant with an offset.
    #[serde(default)]
    pub expiry_at: Option<String>,
    /// `kill` or `resume`.
    #[serde(default)]
    pub on_expiry: Option<String>,
    /// A `select` ask's options.
    #[serde(default)]
    pub options: Option<Vec<String>>,
    /// A `form` ask's JSON schema.
    #[serde(default)]
    pub schema: Option<Value>,
    /// A `sync` user ask's timeout (humantime).
    #[serde(default)]
    pub timeout: Option<String>,
}

fn caller() -> String {
    "caller".to_owned()
}

/// One timeline step: an action, and what its output must show.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Step {
    /// What the step does.
    pub action: Action,
    /// A JSON subset the output must contain.
    pub expect: Option<Value>,
    /// The error the step must fail with.
    pub expect_error: Option<ExpectError>,
    /// A line of prose printed before the step.
    pub note: Option<String>,
    /// A name to bind the output to, for later templates.
    pub bind: Option<String>,
}

/// An expected error: its kind, and a fragment of its message.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ExpectError {
    /// The error's kind, such as `wrong_status` or `refused`.
    #[serde(default)]
    pub kind: Option<String>,
    /// A fragment its message must contain.
    #[serde(default)]
    pub message: Option<String>,
}

/// What a timeline step does. Values are templates over earlier steps' bindings.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Action {
    /// Visit a door on a subject with an input document.
    Visit {
        /// The door.
        door: String,
        /// The subject.
        subject: Value,
        /// The input document.
        input: Value,
    },
    /// Fire a hook topic.
    Fire {
        /// The topic.
        topic: String,
        /// The input document.
        input: Value,
    },
    /// Advance the virtual clock, then let everything due happen.
    Advance {
        /// The duration as written.
        text: String,
        /// The duration.
        by: Duration,
    },
    /// Answer a user ask through the human answer door.
    Answer {
        /// The interaction.
        id: Value,
        /// The answer.
        answer: Value,
    },
    /// Read a subject's parked set.
    Parked {
        /// The subject.
        subject: Value,
    },
    /// Read the record of a submitted run.
    Record {
        /// The run id.
        run: Value,
    },
    /// Run a target through the synchronous tool door; the output is its record.
    Run(StartSpec),
    /// Start a target through the background submit door; the output is its run id.
    Submit(StartSpec),
    /// Resume an ask from outside, as a receiver (or without one when `detached`).
    Resume {
        /// The subject.
        subject: Value,
        /// The interaction.
        id: Value,
        /// The answer.
        payload: Value,
        /// No receiver: the terminal waits on the subject.
        detached: bool,
    },
    /// Take a waiting outcome from outside.
    Take {
        /// The subject.
        subject: Value,
        /// The interaction.
        id: Value,
    },
    /// Cancel interactions from outside.
    Cancel {
        /// The subject.
        subject: Value,
        /// An id or a list of ids.
        ids: Value,
    },
    /// Save (or replace) a door.
    SaveDoor(Box<DoorSpec>),
    /// Remove a door.
    RemoveDoor(String),
    /// Read one page of the interactions inbox.
    Inbox {
        /// The page, from 1.
        page: usize,
        /// The page size.
        page_size: Option<usize>,
    },
    /// Read the runtime's counters.
    Stats,
    /// Read the inbox frames published since the last `frames` step.
    Frames,
    /// Stop the runtime and build it again on its data directory (`settings.durable`),
    /// as a process restarting would; the output is its counters once it has recovered.
    Restart,
}

/// What to start for `run` and `submit`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StartSpec {
    /// The target.
    pub target: String,
    /// The subject.
    pub subject: Value,
    /// The kwargs (a template).
    pub kwargs: Value,
    /// The extras (a template).
    pub extras: Value,
    /// The identity it runs as.
    pub identity: Option<String>,
}

/// Every problem found in a scenario file; nothing ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.join("\n"))]
#[non_exhaustive]
pub struct ScenarioError {
    /// One line per problem, each starting with the path of the part at fault.
    pub problems: Vec<String>,
}

/// The timeline actions, by key.
const ACTIONS: &[&str] = &[
    "visit",
    "fire",
    "advance",
    "answer",
    "parked",
    "record",
    "run",
    "submit",
    "resume",
    "take",
    "cancel",
    "save_door",
    "remove_door",
    "inbox",
    "stats",
    "frames",
    "restart",
];

/// The target step kinds, by key.
const OPS: &[&str] = &[
    "ask",
    "ask_all",
    "call",
    "mcp_call",
    "step",
    "return",
    "fail",
    "list_parked",
    "resume_parked",
    "take_parked",
    "cancel_parked",
    "wait",
    "progress",
    "if",
];

impl Scenario {
    /// Parse and check a scenario file's text.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ScenarioError {
            problems: vec![format!("not valid JSON: {e}")],
        })?;
        let mut p = Problems::default();
        let Value::Object(mut top) = value else {
            return Err(ScenarioError {
                problems: vec!["a scenario must be a JSON object".to_owned()],
            });
        };
        let name = take_str(&mut top, "name", "", &mut p).unwrap_or_default();
        if name.is_empty() {
            p.push("", "a scenario needs a non-empty \"name\"");
        }
        let about = take_str(&mut top, "about", "", &mut p);
        let start = match take_str(&mut top, "start", "", &mut p) {
            None => DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
                .map(|t| t.with_timezone(&Utc))
                .ok(),
            Some(text) => match DateTime::parse_from_rfc3339(&text) {
                Ok(t) => Some(t.with_timezone(&Utc)),
                Err(e) => {
                    p.push("start", format!("{text:?} is not an RFC 3339 instant: {e}"));
                    None
                }
            },
        };
        let settings = match top.remove("settings") {
            None => SimSettings::default(),
            Some(v) => settings(v, &mut p),
        };
        let targets = targets_of(&mut top, &mut p);
        let doors = doors_of(&mut top, &mut p);
        let mut timeline = Vec::new();
        match top.remove("timeline") {
            None => p.push("", "a scenario needs a \"timeline\" array"),
            Some(Value::Array(items)) => {
                for (i, v) in items.into_iter().enumerate() {
                    if let Some(step) = step(v, &format!("timeline[{i}]"), &mut p) {
                        timeline.push(step);
                    }
                }
            }
            Some(_) => p.push("timeline", "must be an array of steps"),
        }
        for key in top.keys() {
            p.push(
                "",
                format!(
                    "unknown key {key:?}; expected name, about, start, settings, targets, doors, timeline"
                ),
            );
        }
        match (p.0.is_empty(), start) {
            (true, Some(start)) => Ok(Scenario {
                name,
                about,
                start,
                settings,
                targets,
                doors,
                timeline,
            }),
            _ => Err(ScenarioError { problems: p.0 }),
        }
    }
}

/// Scripted targets and doors on their own, as `parkway serve --targets FILE` reads them:
/// a JSON object with `targets` (name → script, as in a scenario) and optional `doors`.
/// A scenario file is accepted too; its other keys are ignored.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Scripts {
    /// Scripted targets by name, in file order.
    pub targets: IndexMap<String, Script>,
    /// Doors to save, in file order.
    pub doors: Vec<DoorSpec>,
    /// The MCP servers its `mcp_call` steps may call, by name.
    pub mcp_servers: IndexMap<String, McpServer>,
}

impl Scripts {
    /// Parse a targets file; every problem is reported, each with its path.
    pub fn from_json(text: &str) -> Result<Scripts, ScenarioError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ScenarioError {
            problems: vec![format!("not valid JSON: {e}")],
        })?;
        let Value::Object(mut top) = value else {
            return Err(ScenarioError {
                problems: vec!["a targets file must be a JSON object".to_owned()],
            });
        };
        let mut p = Problems::default();
        let targets = targets_of(&mut top, &mut p);
        let doors = doors_of(&mut top, &mut p);
        let mcp_servers = top
            .remove("mcp_servers")
            .and_then(|v| parse::<IndexMap<String, McpServer>>(v, "mcp_servers", &mut p))
            .unwrap_or_default();
        for (name, script) in &targets {
            for server in mcp_calls(&script.steps) {
                if !mcp_servers.contains_key(server) {
                    p.push(
                        &format!("targets.{name}"),
                        format!("mcp_call names the server {server:?}, which mcp_servers does not"),
                    );
                }
            }
        }
        if p.0.is_empty() {
            Ok(Scripts {
                targets,
                doors,
                mcp_servers,
            })
        } else {
            Err(ScenarioError { problems: p.0 })
        }
    }
}

/// The servers the `mcp_call` steps of `steps` name, in branches too.
fn mcp_calls(steps: &[Op]) -> Vec<&str> {
    let mut servers = Vec::new();
    for op in steps {
        match op {
            Op::McpCall { server, .. } => servers.push(server.as_str()),
            Op::If {
                then, otherwise, ..
            } => {
                servers.extend(mcp_calls(then));
                servers.extend(mcp_calls(otherwise));
            }
            _ => {}
        }
    }
    servers
}

/// The `targets` of a scenario or targets file.
fn targets_of(
    top: &mut serde_json::Map<String, Value>,
    p: &mut Problems,
) -> IndexMap<String, Script> {
    let mut targets = IndexMap::new();
    match top.remove("targets") {
        None => {}
        Some(Value::Object(map)) => {
            for (name, v) in map {
                let path = format!("targets.{name}");
                if let Some(script) = script(v, &path, p) {
                    targets.insert(name, script);
                }
            }
        }
        Some(_) => p.push("targets", "must be an object of target name to script"),
    }
    targets
}

/// The `doors` of a scenario or targets file.
fn doors_of(top: &mut serde_json::Map<String, Value>, p: &mut Problems) -> Vec<DoorSpec> {
    let mut doors = Vec::new();
    match top.remove("doors") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, v) in items.into_iter().enumerate() {
                if let Some(door) = parse::<DoorSpec>(v, &format!("doors[{i}]"), p) {
                    doors.push(door);
                }
            }
        }
        Some(_) => p.push("doors", "must be an array of door definitions"),
    }
    doors
}

/// Problems collected while parsing.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn push(&mut self, path: &str, message: impl std::fmt::Display) {
        if path.is_empty() {
            self.0.push(message.to_string());
        } else {
            self.0.push(format!("{path}: {message}"));
        }
    }
}

fn parse<T: DeserializeOwned>(v: Value, path: &str, p: &mut Problems) -> Option<T> {
    match serde_json::from_value(v) {
        Ok(t) => Some(t),
        Err(e) => {
            p.push(path, e);
            None
        }
    }
}

fn take_str(
    map: &mut Map<String, Value>,
    key: &str,
    path: &str,
    p: &mut Problems,
) -> Option<String> {
    match map.remove(key) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            p.push(&join(path, key), format!("must be a string, not {other}"));
            None
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A humantime duration, or a problem naming it.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{text:?} is not a duration such as 10m: {e}"))
}

fn settings(v: Value, p: &mut Problems) -> SimSettings {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Raw {
        max_concurrent_caller: Option<usize>,
        max_concurrent: Option<usize>,
        waiting_retention: Option<String>,
        passivate_after: Option<String>,
        jq_deadline: Option<String>,
        max_input_bytes: Option<usize>,
        #[serde(default)]
        durable: bool,
    }
    let Some(raw) = parse::<Raw>(v, "settings", p) else {
        return SimSettings::default();
    };
    if raw.max_input_bytes == Some(0) {
        p.push("settings.max_input_bytes", "0 must be more than zero");
    }
    let mut d = |key: &str, text: Option<String>| {
        text.and_then(|t| match duration(&t) {
            // Only an idle subject may passivate at once; the rest are refused by the
            // runtime's builder at zero, so they are refused here, with their path.
            Ok(d) if d.is_zero() && key != "passivate_after" => {
                p.push(
                    &format!("settings.{key}"),
                    format!("{t:?} must be more than zero"),
                );
                None
            }
            Ok(d) => Some(d),
            Err(e) => {
                p.push(&format!("settings.{key}"), e);
                None
            }
        })
    };
    SimSettings {
        max_concurrent_caller: raw.max_concurrent_caller,
        max_concurrent: raw.max_concurrent,
        waiting_retention: d("waiting_retention", raw.waiting_retention),
        passivate_after: d("passivate_after", raw.passivate_after),
        jq_deadline: d("jq_deadline", raw.jq_deadline),
        max_input_bytes: raw.max_input_bytes,
        durable: raw.durable,
    }
}

fn script(v: Value, path: &str, p: &mut Problems) -> Option<Script> {
    let Value::Object(mut map) = v else {
        p.push(
            path,
            "a target must be an object with \"steps\" (and optional \"extras\")",
        );
        return None;
    };
    let extras = match map.remove("extras") {
        None => Vec::new(),
        Some(v) => parse::<Vec<String>>(v, &format!("{path}.extras"), p).unwrap_or_default(),
    };
    let steps = match map.remove("steps") {
        Some(Value::Array(items)) => ops(items, &format!("{path}.steps"), p),
        _ => {
            p.push(path, "a target needs a \"steps\" array");
            Vec::new()
        }
    };
    let tool = map
        .remove("tool")
        .and_then(|v| parse::<crate::ToolSpec>(v, &format!("{path}.tool"), p));
    for key in map.keys() {
        p.push(
            path,
            format!("unknown key {key:?}; expected steps, extras, tool"),
        );
    }
    Some(Script {
        extras,
        steps,
        tool,
    })
}

fn ops(items: Vec<Value>, path: &str, p: &mut Problems) -> Vec<Op> {
    items
        .into_iter()
        .enumerate()
        .filter_map(|(i, v)| op(v, &format!("{path}[{i}]"), p))
        .collect()
}

/// The one key of `map` found in `keys`, or a problem.
fn action_key(
    map: &Map<String, Value>,
    keys: &[&str],
    what: &str,
    path: &str,
    p: &mut Problems,
) -> Option<String> {
    let found: Vec<&String> = map.keys().filter(|k| keys.contains(&k.as_str())).collect();
    match found.as_slice() {
        [one] => Some((*one).clone()),
        [] => {
            let unknown: Vec<&String> = map.keys().collect();
            p.push(
                path,
                format!(
                    "no {what} found among the keys {unknown:?}; expected one of {}",
                    keys.join(", ")
                ),
            );
            None
        }
        many => {
            p.push(
                path,
                format!("more than one {what}: {many:?}; a step does one thing"),
            );
            None
        }
    }
}

/// A problem for each key left in `map` once the known ones were taken out, naming
/// every key the place accepts.
fn only(map: &Map<String, Value>, accepted: &[&str], path: &str, p: &mut Problems) {
    for key in map.keys() {
        p.push(
            path,
            format!("unknown key {key:?}; expected {}", accepted.join(", ")),
        );
    }
}

/// The keys a step accepts: its action key, that action's own, and those every step
/// takes.
fn accepted<'a>(key: &'a str, own: &[&'a str], common: &[&'a str]) -> Vec<&'a str> {
    std::iter::once(key)
        .chain(own.iter().copied())
        .chain(common.iter().copied())
        .collect()
}

/// The keys a target step takes beside its action key and `as`.
fn op_args(key: &str) -> &'static [&'static str] {
    match key {
        "call" => &["kwargs"],
        "step" => &["value"],
        "if" => &["equals", "then", "else"],
        "progress" => &["total", "message"],
        _ => &[],
    }
}

/// The keys a timeline step takes beside its action key and the common ones.
fn step_args(key: &str) -> &'static [&'static str] {
    match key {
        "visit" => &["subject", "input"],
        "fire" => &["input"],
        "answer" => &["with"],
        "run" | "submit" => &["subject", "kwargs", "extras", "identity"],
        "resume" => &["subject", "payload", "detached"],
        "take" | "cancel" => &["subject"],
        "inbox" => &["page_size"],
        _ => &[],
    }
}

fn bind(map: &mut Map<String, Value>, path: &str, p: &mut Problems) -> Option<String> {
    let name = take_str(map, "as", path, p)?;
    let ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        p.push(
            &join(path, "as"),
            format!("{name:?} is not a name (letters, digits, _)"),
        );
        return None;
    }
    Some(name)
}

fn op(v: Value, path: &str, p: &mut Problems) -> Option<Op> {
    let Value::Object(mut map) = v else {
        p.push(path, "a target step must be an object");
        return None;
    };
    let key = action_key(&map, OPS, "target step", path, p)?;
    let body = map.remove(&key).unwrap_or(Value::Null);
    let bind = bind(&mut map, path, p);
    let here = format!("{path}.{key}");
    let accepted = accepted(&key, op_args(&key), &["as"]);
    let op = match key.as_str() {
        "ask" => {
            only(&map, &accepted, path, p);
            let ask = parse::<AskSpec>(body, &here, p)?;
            check_ask(&ask, &here, p);
            Op::Ask {
                asks: vec![ask],
                all: false,
                bind,
            }
        }
        "ask_all" => {
            only(&map, &accepted, path, p);
            let asks = parse::<Vec<AskSpec>>(body, &here, p)?;
            for (i, ask) in asks.iter().enumerate() {
                check_ask(ask, &format!("{here}[{i}]"), p);
            }
            Op::Ask {
                asks,
                all: true,
                bind,
            }
        }
        "call" => {
            let target = match body {
                Value::String(s) => s,
                _ => {
                    p.push(&here, "must be a target name");
                    return None;
                }
            };
            let kwargs = map
                .remove("kwargs")
                .unwrap_or_else(|| Value::Object(Map::new()));
            only(&map, &accepted, path, p);
            Op::Call {
                target,
                kwargs,
                bind,
            }
        }
        "mcp_call" => {
            only(&map, &accepted, path, p);
            let call = parse::<McpCallSpec>(body, &here, p)?;
            Op::McpCall {
                server: call.server,
                tool: call.tool,
                arguments: call.arguments,
                bind,
            }
        }
        "step" => {
            let name = match body {
                Value::String(s) => s,
                _ => {
                    p.push(&here, "must be the step's name");
                    return None;
                }
            };
            let value = map.remove("value").unwrap_or(Value::Null);
            only(&map, &accepted, path, p);
            Op::Step { name, value, bind }
        }
        "return" => {
            only(&map, &accepted, path, p);
            Op::Return(body)
        }
        "fail" => {
            only(&map, &accepted, path, p);
            Op::Fail(body)
        }
        "list_parked" => {
            only(&map, &accepted, path, p);
            Op::ListParked { bind }
        }
        "resume_parked" => {
            let Value::Object(mut args) = body else {
                p.push(&here, "must be an object {\"id\": …, \"payload\": …}");
                return None;
            };
            let id = args.remove("id");
            let payload = args.remove("payload");
            only(&args, &["id", "payload"], &here, p);
            only(&map, &accepted, path, p);
            let Some(id) = id else {
                p.push(&here, "needs an \"id\"");
                return None;
            };
            Op::ResumeParked { id, payload, bind }
        }
        "take_parked" => {
            only(&map, &accepted, path, p);
            Op::ResumeParked {
                id: body,
                payload: None,
                bind,
            }
        }
        "cancel_parked" => {
            only(&map, &accepted, path, p);
            Op::CancelParked { ids: body, bind }
        }
        "wait" => {
            only(&map, &accepted, path, p);
            if let Value::String(text) = &body
                && !text.contains('$')
                && let Err(why) = duration(text)
            {
                p.push(&here, why);
            }
            Op::Wait(body)
        }
        "progress" => {
            let total = map.remove("total");
            let message = map.remove("message");
            only(&map, &accepted, path, p);
            Op::Progress {
                progress: body,
                total,
                message,
            }
        }
        "if" => {
            let equals = map.remove("equals");
            let then = match map.remove("then") {
                Some(Value::Array(items)) => ops(items, &format!("{path}.then"), p),
                None => Vec::new(),
                Some(_) => {
                    p.push(path, "\"then\" must be an array of steps");
                    Vec::new()
                }
            };
            let otherwise = match map.remove("else") {
                Some(Value::Array(items)) => ops(items, &format!("{path}.else"), p),
                None => Vec::new(),
                Some(_) => {
                    p.push(path, "\"else\" must be an array of steps");
                    Vec::new()
                }
            };
            only(&map, &accepted, path, p);
            Op::If {
                value: body,
                equals,
                then,
                otherwise,
            }
        }
        _ => return None,
    };
    Some(op)
}

/// The words an ask's fields may take; what the runtime itself checks (a sync caller
/// ask, a payload on a user ask) is left to it, so a scenario can show the refusal.
fn check_ask(ask: &AskSpec, path: &str, p: &mut Problems) {
    let mut one_of = |key: &str, value: Option<&str>, allowed: &[&str]| {
        if let Some(v) = value
            && !allowed.contains(&v)
        {
            p.push(
                &format!("{path}.{key}"),
                format!("{v:?}: expected one of {}", allowed.join(", ")),
            );
        }
    };
    one_of("to", Some(ask.to.as_str()), &["caller", "user"]);
    one_of("mode", ask.mode.as_deref(), &["async", "sync"]);
    one_of("on_expiry", ask.on_expiry.as_deref(), &["kill", "resume"]);
    if let Some(t) = &ask.timeout
        && let Err(e) = duration(t)
    {
        p.push(&format!("{path}.timeout"), e);
    }
    if ask.to == "user" && ask.question.is_none() {
        p.push(path, "a user ask needs a \"question\"");
    }
}

fn step(v: Value, path: &str, p: &mut Problems) -> Option<Step> {
    let Value::Object(mut map) = v else {
        p.push(path, "a timeline step must be an object");
        return None;
    };
    let key = action_key(&map, ACTIONS, "action", path, p)?;
    let body = map.remove(&key).unwrap_or(Value::Null);
    let bind = bind(&mut map, path, p);
    let note = take_str(&mut map, "note", path, p);
    let expect = map.remove("expect");
    let expect_error = match map.remove("expect_error") {
        None => None,
        Some(v) => parse::<ExpectError>(v, &format!("{path}.expect_error"), p),
    };
    if expect.is_some() && expect_error.is_some() {
        p.push(
            path,
            "a step expects either an output or an error, not both",
        );
    }
    let here = format!("{path}.{key}");
    let accepted = accepted(
        &key,
        step_args(&key),
        &["as", "note", "expect", "expect_error"],
    );
    let arg = |map: &mut Map<String, Value>, name: &str| map.remove(name);
    let name_of = |body: Value, what: &str, p: &mut Problems| match body {
        Value::String(s) => Some(s),
        _ => {
            p.push(&here, format!("must be {what}"));
            None
        }
    };
    let action = match key.as_str() {
        "visit" => {
            let door = name_of(body, "a door name", p);
            let subject = arg(&mut map, "subject");
            let input = arg(&mut map, "input").unwrap_or_else(|| Value::Object(Map::new()));
            only(&map, &accepted, path, p);
            let Some(subject) = subject else {
                p.push(path, "a visit needs a \"subject\"");
                return None;
            };
            Action::Visit {
                door: door?,
                subject,
                input,
            }
        }
        "fire" => {
            let topic = name_of(body, "a topic", p);
            let input = arg(&mut map, "input").unwrap_or_else(|| Value::Object(Map::new()));
            only(&map, &accepted, path, p);
            Action::Fire {
                topic: topic?,
                input,
            }
        }
        "advance" => {
            let text = name_of(body, "a duration such as 10m", p)?;
            only(&map, &accepted, path, p);
            match duration(&text) {
                Ok(by) => Action::Advance { text, by },
                Err(e) => {
                    p.push(&here, e);
                    return None;
                }
            }
        }
        "answer" => {
            let answer = arg(&mut map, "with");
            only(&map, &accepted, path, p);
            let Some(answer) = answer else {
                p.push(path, "an answer needs \"with\": the answer");
                return None;
            };
            Action::Answer { id: body, answer }
        }
        "parked" => {
            only(&map, &accepted, path, p);
            Action::Parked { subject: body }
        }
        "record" => {
            only(&map, &accepted, path, p);
            Action::Record { run: body }
        }
        "run" | "submit" => {
            let target = name_of(body, "a target name", p);
            let subject = arg(&mut map, "subject");
            let kwargs = arg(&mut map, "kwargs").unwrap_or_else(|| Value::Object(Map::new()));
            let extras = arg(&mut map, "extras").unwrap_or_else(|| Value::Object(Map::new()));
            let identity = take_str(&mut map, "identity", path, p);
            only(&map, &accepted, path, p);
            let Some(subject) = subject else {
                p.push(path, format!("a {key} needs a \"subject\""));
                return None;
            };
            let spec = StartSpec {
                target: target?,
                subject,
                kwargs,
                extras,
                identity,
            };
            if key == "run" {
                Action::Run(spec)
            } else {
                Action::Submit(spec)
            }
        }
        "resume" => {
            let subject = arg(&mut map, "subject");
            let payload = arg(&mut map, "payload");
            let detached = match arg(&mut map, "detached") {
                None => false,
                Some(Value::Bool(b)) => b,
                Some(_) => {
                    p.push(path, "\"detached\" must be true or false");
                    false
                }
            };
            only(&map, &accepted, path, p);
            let (Some(subject), Some(payload)) = (subject, payload) else {
                p.push(path, "a resume needs a \"subject\" and a \"payload\"");
                return None;
            };
            Action::Resume {
                subject,
                id: body,
                payload,
                detached,
            }
        }
        "take" => {
            let subject = arg(&mut map, "subject");
            only(&map, &accepted, path, p);
            let Some(subject) = subject else {
                p.push(path, "a take needs a \"subject\"");
                return None;
            };
            Action::Take { subject, id: body }
        }
        "cancel" => {
            let subject = arg(&mut map, "subject");
            only(&map, &accepted, path, p);
            let Some(subject) = subject else {
                p.push(path, "a cancel needs a \"subject\"");
                return None;
            };
            Action::Cancel { subject, ids: body }
        }
        "save_door" => {
            only(&map, &accepted, path, p);
            Action::SaveDoor(Box::new(parse::<DoorSpec>(body, &here, p)?))
        }
        "remove_door" => {
            let name = name_of(body, "a door name", p)?;
            only(&map, &accepted, path, p);
            Action::RemoveDoor(name)
        }
        "inbox" => {
            let page = match body {
                Value::Null => 1,
                Value::Number(n) => n.as_u64().map_or(usize::MAX, |n| n as usize),
                _ => {
                    p.push(&here, "must be a page number");
                    return None;
                }
            };
            let page_size = match arg(&mut map, "page_size") {
                None => None,
                Some(v) => parse::<usize>(v, &format!("{path}.page_size"), p),
            };
            only(&map, &accepted, path, p);
            Action::Inbox { page, page_size }
        }
        "stats" => {
            only(&map, &accepted, path, p);
            Action::Stats
        }
        "frames" => {
            only(&map, &accepted, path, p);
            Action::Frames
        }
        "restart" => {
            only(&map, &accepted, path, p);
            Action::Restart
        }
        _ => return None,
    };
    Some(Step {
        action,
        expect,
        expect_error,
        note,
        bind,
    })
}
