//! Random simulation: a seeded workload, checked against the reference model after
//! every step.
//!
//! One seed fixes everything: the settings (the caller ceiling is drawn small, so the
//! workload presses on it), the operations, their subjects and ids, and the clock's
//! jumps. The runtime runs on a manual clock with sequential ids, so a seed replays
//! exactly. The workload mixes route visits that start runs asking their caller (alone,
//! in groups, in a chain of two), resumes and takes through a door's `resume_expr`
//! (single and as arrays), whole-chain cancels, hook fires with no receiver, detached
//! resumes, duplicate and late resolutions of ids already resolved, user asks and the
//! answer door (a caller ask offered to it must be refused), saves of doors with
//! refused expressions, clock jumps across deadlines and the retention horizon, pauses
//! long enough for idle subjects to passivate, and slots given up and taken back (an
//! operation on a subject of a slot away must be refused as `not_owner` and change
//! nothing; its deadlines fire once it is back; the final account takes every slot back).

use std::time::Duration;

use chrono::Duration as Span;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::model::{Launch, Model, ModelFault, Tally};
use super::rounds::{RoundAnswer, Rounds, TOOL};
use crate::ask::is_expiry_marker;
use crate::ask::{Ask, OnExpiry};
use crate::clock::ManualClock;
use crate::door::outcome::{ItemOutcome, Visit, VisitError, VisitOutcome};
use crate::door::spec::Spec as DoorSpec;
use crate::error::{BuildError, RunError};
use crate::event::{Event, Logged};
use crate::ids::Ids;
use crate::inbox::Frame;
use crate::record::{Resumed, RunRecord, RunStatus};
use crate::runtime::{Builder, Runtime};
use crate::store::{Faults, Store, Syncing};

/// What to generate.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RandomConfig {
    /// The seed.
    pub seed: u64,
    /// Operations to run.
    pub ops: usize,
    /// Subjects to spread them over (at least 1).
    pub subjects: usize,
    /// A deliberate break in the model, to show the checks catch one.
    pub fault: Option<ModelFault>,
    /// An MCP face to make a share of the calls through (`docs/simulation.md`, "MCP
    /// rounds"); without one the workload makes none.
    pub rounds: Option<Rounds>,
    /// With 2 or more (up to 5), the node workload instead: that many runtimes on one
    /// cluster engine, nodes killed, restarted, added, frozen and thawed
    /// (`docs/simulation.md`, "Nodes"). With 1, one runtime on a memory store.
    pub nodes: usize,
}

impl RandomConfig {
    /// `ops` operations over `subjects` subjects from `seed`, with a sound model.
    pub fn new(seed: u64, ops: usize, subjects: usize) -> Self {
        Self {
            seed,
            ops,
            subjects,
            fault: None,
            rounds: None,
            nodes: 1,
        }
    }

    /// The command that replays this run with every step printed.
    pub fn replay_command(&self) -> String {
        let fault = self
            .fault
            .map(|f| match f {
                ModelFault::UncountedWaiting => " --model-fault uncounted-waiting",
                ModelFault::LateExpiry => " --model-fault late-expiry",
            })
            .unwrap_or_default();
        let http = if self.rounds.is_some() { " --http" } else { "" };
        let nodes = if self.nodes > 1 {
            format!(" --nodes {}", self.nodes)
        } else {
            String::new()
        };
        format!(
            "parkway sim --random{http} --seed {} --ops {} --subjects {}{nodes}{fault} --trace",
            self.seed, self.ops, self.subjects
        )
    }
}

/// What a random run did.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RandomReport {
    /// The seed.
    pub seed: u64,
    /// Operations run (fewer than asked when a check failed).
    pub ops_run: usize,
    /// One line per operation: what was done and what came back.
    pub trace: Vec<String>,
    /// The first violation: the seed, the step, what the model expected, what came,
    /// and the command that replays it.
    pub failure: Option<String>,
    /// The account of asks and outcomes.
    pub tally: Tally,
    /// Asks still open at the end.
    pub open: usize,
    /// Outcomes still waiting at the end.
    pub waiting: usize,
    /// The node workload's account of its node operations (`None` for one runtime).
    pub nodes: Option<NodeTally>,
}

/// The node workload's account of its node operations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeTally {
    /// Processes killed.
    pub killed: u64,
    /// Nodes started again under their name.
    pub restarted: u64,
    /// Nodes added.
    pub added: u64,
    /// Processes frozen.
    pub frozen: u64,
    /// Processes thawed.
    pub thawed: u64,
    /// Slots taken by a node, under a new epoch (the first shares included).
    pub slots_taken: u64,
    /// Visits through a node that does not serve the subject, refused as `not_owner`.
    pub astray: u64,
    /// Visits through a node thawed after its slot was taken, refused as `not_owner`:
    /// a park before its clock caught up (refused by the slot's epoch), a listing
    /// after (refused as its time to be served passed).
    pub stale: u64,
}

/// The operations the workload draws from.
#[derive(Debug, Clone)]
enum Op {
    Start {
        subject: String,
        n: u64,
        fail: bool,
        kill: bool,
        ttl: u64,
    },
    Chain {
        subject: String,
        kill: bool,
        ttl: u64,
    },
    UserAsk {
        subject: String,
    },
    Resolve {
        subject: String,
        items: Vec<(String, Option<Value>)>,
        array: bool,
    },
    Detached {
        subject: String,
        id: String,
        payload: Value,
    },
    Cancel {
        subject: String,
        ids: Vec<String>,
    },
    Nudge {
        subject: String,
    },
    Auto {
        subject: String,
    },
    TakeByHook {
        subject: String,
        id: String,
    },
    Answer {
        id: String,
        answer: Value,
    },
    BadSave {
        source: &'static str,
    },
    Advance(u64),
    Passivate,
    /// Give up the slot of `subject` (`Runtime::unload_slot`).
    UnloadSlot {
        subject: String,
    },
    /// Take the slot of `subject` back (`Runtime::load_slot`).
    LoadSlot {
        subject: String,
    },
    /// A `tools/call` of the MCP face: an `asker` of one ask on `subject`.
    McpCall {
        subject: String,
        kill: bool,
        ttl: u64,
    },
    /// The retry of a round an `McpCall` was answered with: its ask answered `true`.
    McpRetry {
        subject: String,
        key: String,
        state: String,
    },
}

/// Expressions the save must refuse.
const BAD: &[&str] = &[
    "$nope",
    "[.[] ",
    "def f: f; f",
    "repeat(1)",
    "$ENV.HOME",
    "range(.n)",
    "input",
];

/// How long a user ask waits.
const USER_TTL: u64 = 600;

/// The door expression that resumes the first caller ask still asking.
const FIRST_ASKING: &str = r#"[$parked[] | select(.status == "asking" and .to == "caller")][0]
    | if . == null then null else {id: .id, payload: {answer: "auto"}} end"#;

/// `builder` with the workload's targets, registered before the build so the runs read
/// back after a restart find them.
pub(super) fn register(builder: Builder) -> Builder {
    builder
        .register("asker", &[], |ctx, kwargs, _| async move {
            let n = kwargs["n"].as_u64().unwrap_or(1);
            let ttl = Duration::from_secs(kwargs["ttl"].as_u64().unwrap_or(60));
            let on_expiry = if kwargs["kill"] == json!(true) {
                OnExpiry::Kill
            } else {
                OnExpiry::Resume
            };
            let mut results = Vec::new();
            for k in 0..n {
                let ask = Ask::caller(format!("q{k}?"))
                    .answer_format("confirm")
                    .expiry_at(ttl)
                    .on_expiry(on_expiry);
                results.push(ctx.ask(ask).await);
            }
            let mut answers = Vec::new();
            for r in results {
                answers.push(r?);
            }
            if answers.iter().any(is_expiry_marker) {
                return Ok(json!({"expired": true}));
            }
            if kwargs["fail"] == json!(true) {
                return Err(RunError::fail("asked to fail"));
            }
            Ok(json!({"answers": answers}))
        })
        .tool(
            "asker",
            crate::ToolSpec::new(TOOL).subject_expr(".arguments.subject"),
        )
        .register("chain", &[], |ctx, kwargs, _| async move {
            let ttl = kwargs["ttl"].as_u64().unwrap_or(60);
            let child = json!({"n": 1, "ttl": ttl, "kill": kwargs["kill"]});
            let record = ctx.call("asker", child).await?;
            if record.status == RunStatus::Parked {
                let ask = Ask::caller("up?").expiry_at(Duration::from_secs(ttl * 2));
                ctx.ask(ask).await?;
            }
            Ok(json!({"chain": record.status}))
        })
        .register("user_asker", &[], |ctx, _, _| async move {
            let answer = ctx
                .ask(Ask::user("your call?").expiry_at(Duration::from_secs(USER_TTL)))
                .await?;
            Ok(json!({"answer": answer}))
        })
}

pub(super) fn doors() -> Vec<DoorSpec> {
    vec![
        DoorSpec::route("start", "asker")
            .start_expr("{n: .n, fail: .fail, kill: .kill, ttl: .ttl}"),
        DoorSpec::route("chain", "chain").start_expr("{ttl: .ttl, kill: .kill}"),
        DoorSpec::route("ask_user", "user_asker"),
        DoorSpec::route("resolve", "asker")
            .resume_expr(".items")
            .start_expr("null"),
        DoorSpec::route("cancel", "asker")
            .cancel_expr(".ids")
            .start_expr("null"),
        DoorSpec::route("auto", "asker")
            .resume_expr(FIRST_ASKING)
            .start_expr("null"),
        DoorSpec::hook("nudge", "asker")
            .topic("nudge")
            .subject("")
            .subject_expr(".subject")
            .resume_expr(FIRST_ASKING)
            .start_expr("null"),
        DoorSpec::hook("taker", "asker")
            .topic("take")
            .subject("")
            .subject_expr(".subject")
            .resume_expr(".id")
            .start_expr("null"),
    ]
}

/// Run one seeded workload on one runtime.
pub(super) async fn one_runtime(config: &RandomConfig) -> Result<RandomReport, BuildError> {
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let cap = rng.random_range(4..=16);
    let user_cap = 2;
    let retention = Duration::from_secs(30 * 60);
    let clock = ManualClock::default();
    let store = Store::memory_with(Syncing::Inline, Faults::default());
    let open = Open {
        clock: clock.clone(),
        cap,
        user_cap,
        retention,
    };
    let rt = open.build(store.clone()).await?;
    if let Some(rounds) = &config.rounds {
        rounds.0.attach(&rt).await;
    }
    for door in doors() {
        if let Err(e) = rt.save_door(door) {
            return Ok(RandomReport::broken(
                config,
                format!("the workload's door was refused: {e}"),
            ));
        }
    }
    let span = Span::from_std(retention).unwrap_or_default();
    let mut sim = Sim {
        events: rt.events(),
        logged: rt.logged_events(),
        frames: rt.inbox_frames(),
        rt,
        store,
        open,
        restarts: 0,
        touched: Vec::new(),
        frames_before: Vec::new(),
        shown: std::collections::BTreeSet::new(),
        clock,
        model: Model::new(cap, user_cap, span, config.fault),
        subjects: (0..config.subjects.max(1))
            .map(|k| format!("s{k}"))
            .collect(),
        rounds: config.rounds.clone(),
        pending: Vec::new(),
    };
    let mut trace = Vec::new();
    let mut failure = None;
    let mut ops_run = 0;
    for step in 1..=config.ops {
        let op = sim.draw(&mut rng);
        let crash = rng
            .random_bool(CRASH_CHANCE)
            .then(|| rng.random_range(0..6));
        let (line, verdict) = sim.perform(&op, crash).await;
        trace.push(format!("{step:>4}  {line}"));
        ops_run = step;
        if let Err(why) = verdict {
            failure = Some(format!(
                "seed {}: step {step} ({line}): {why}\nreplay: {}",
                config.seed,
                config.replay_command()
            ));
            break;
        }
    }
    if failure.is_none()
        && let Err(why) = sim.final_account().await
    {
        failure = Some(format!(
            "seed {}: the final account: {why}\nreplay: {}",
            config.seed,
            config.replay_command()
        ));
    }
    let open = sim
        .model
        .asks
        .values()
        .filter(|a| a.resolved.is_none())
        .count();
    Ok(RandomReport {
        seed: config.seed,
        ops_run,
        trace,
        failure,
        tally: sim.model.tally,
        open,
        waiting: sim.model.waiting.len(),
        nodes: None,
    })
}

impl RandomReport {
    fn broken(config: &RandomConfig, why: String) -> Self {
        Self {
            seed: config.seed,
            ops_run: 0,
            trace: Vec::new(),
            failure: Some(format!("seed {}: {why}", config.seed)),
            tally: Tally::default(),
            open: 0,
            waiting: 0,
            nodes: None,
        }
    }

    /// One line: the seed, the verdict and the account.
    pub fn summary(&self) -> String {
        let t = &self.tally;
        let verdict = if self.failure.is_none() {
            "ok"
        } else {
            "FAILED"
        };
        if let Some(n) = &self.nodes {
            return format!(
                "seed {}: {} op(s), {verdict}; asks {} = resumed {} + expired {} + open {}; \
                 nodes killed {}, restarted {}, added {}, frozen {}, thawed {}; slots taken {}; \
                 refused not_owner: astray {}, stale {}",
                self.seed,
                self.ops_run,
                t.asks,
                t.resumed,
                t.expired,
                self.open,
                n.killed,
                n.restarted,
                n.added,
                n.frozen,
                n.thawed,
                n.slots_taken,
                n.astray,
                n.stale,
            );
        }
        format!(
            "seed {}: {} op(s), {}; asks {} = resumed {} + cancelled {} + expired {} + open {}; \
             outcomes stored {} = taken {} + dropped {} + waiting {}; cap refusals {}, \
             visits refused {}, passivations {}",
            self.seed,
            self.ops_run,
            verdict,
            t.asks,
            t.resumed,
            t.cancelled,
            t.expired,
            self.open,
            t.stored,
            t.taken,
            t.dropped,
            self.waiting,
            t.cap_refused,
            t.visits_refused,
            t.passivations,
        )
    }
}

/// With an MCP face, the share of operations that are MCP calls or retries.
const MCP_SHARE: f64 = 0.15;

/// How often an operation ends in a crash of the process and a restart.
const CRASH_CHANCE: f64 = 0.04;

/// How the workload's runtime is built, the first time and after every restart.
struct Open {
    clock: ManualClock,
    cap: usize,
    user_cap: usize,
    retention: Duration,
}

impl Open {
    /// A runtime on `store`, which it reads back first.
    async fn build(&self, store: Store) -> Result<Runtime, BuildError> {
        let builder = Runtime::builder()
            .without_env()
            .clock(self.clock.clone())
            .ids(Ids::sequential())
            .max_concurrent_caller(self.cap)
            .max_concurrent(self.user_cap)
            .waiting_retention(self.retention)
            .passivate_after(Duration::from_secs(1))
            // Fewer than the subjects: the subject idle longest is told to passivate at
            // once, racing the workload's messages to it.
            .max_live_subjects(2)
            .store(store);
        register(builder).build().await
    }
}

/// The runtime under test and its model.
struct Sim {
    rt: Runtime,
    /// The memory store the runtime keeps its changes in; a crash loses what it has not
    /// made durable.
    store: Store,
    open: Open,
    /// Crashes so far.
    restarts: usize,
    /// Subjects to look at in the next check (after a restart, all of them).
    touched: Vec<String>,
    /// Frames the runtime showed before it crashed, for the next check.
    frames_before: Vec<Frame>,
    /// The logged events as shown, with their numbers.
    logged: broadcast::Receiver<Logged>,
    /// The numbers of the logged events the model has applied.
    shown: std::collections::BTreeSet<u64>,
    clock: ManualClock,
    events: broadcast::Receiver<Event>,
    frames: broadcast::Receiver<Frame>,
    model: Model,
    subjects: Vec<String>,
    /// The MCP face the workload calls through, if any.
    rounds: Option<Rounds>,
    /// Every round an MCP call was answered with: its subject, key and state. A round
    /// stays after its retry, so it may be retried again (and must then be refused).
    pending: Vec<(String, String, String)>,
}

/// What an operation must give, as the model predicts it.
#[derive(Debug)]
enum Expect {
    /// Anything (the model cannot tell, e.g. a group only partly under the ceiling).
    Any,
    /// A start whose record is `parked` with this many asks.
    Parked(usize),
    /// A start whose record failed at a ceiling.
    AtCap(&'static str),
    /// A start whose record is `suspended` on a user ask.
    Suspended,
    /// Resolutions applied: one item outcome per entry, of these kinds.
    Resolved(Vec<ItemKind>),
    /// Nothing applied and nothing started.
    Nothing,
    /// Refused; nothing changed.
    Refused,
    /// Accepted (a cancel, a detached resume, an answer).
    Accepted,
    /// An MCP call answered with a round of this many asks.
    Round(usize),
    /// An MCP retry answered with its run's result.
    McpResult,
    /// An MCP call answered with a tool error saying this.
    ToolError(&'static str),
    /// Refused: the subject's slot is given up; nothing changed.
    NotOwner,
}

#[derive(Debug, Clone, PartialEq)]
enum ItemKind {
    /// Resumed and buffered (other asks of its group open).
    Buffered,
    /// Resumed; the run's next outcome has this status.
    Outcome(RunStatus),
    /// Resumed without a receiver.
    Detached,
    /// A finished outcome taken.
    Taken,
    /// A failed outcome taken (it raises).
    TakeFailed,
}

fn pick<'a, T>(rng: &mut SmallRng, items: &'a [T]) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[rng.random_range(0..items.len())])
}

impl Sim {
    /// Ids on `subject` the model has in each state.
    fn ids_on(&self, subject: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
        let open = self
            .model
            .asks
            .iter()
            .filter(|(_, a)| a.subject == subject && a.resolved.is_none() && !a.user)
            .map(|(id, _)| id.clone())
            .collect();
        let waiting = self
            .model
            .waiting
            .iter()
            .filter(|(_, w)| w.subject == subject)
            .map(|(id, _)| id.clone())
            .collect();
        let stale = self
            .model
            .asks
            .iter()
            .filter(|(id, a)| {
                a.subject == subject
                    && a.resolved.is_some()
                    && !self.model.waiting.contains_key(*id)
            })
            .map(|(id, _)| id.clone())
            .collect();
        (open, waiting, stale)
    }

    /// A known id on `subject` of the kind the dice ask for, or a made-up one.
    fn some_id(&self, rng: &mut SmallRng, subject: &str, want_open: bool) -> String {
        let (open, waiting, stale) = self.ids_on(subject);
        let roll = rng.random_range(0..10);
        let chosen = if want_open && roll < 7 {
            pick(rng, &open)
        } else if !want_open && roll < 7 {
            pick(rng, &waiting)
        } else if roll < 9 {
            pick(rng, &stale)
        } else {
            None
        };
        chosen
            .cloned()
            .or_else(|| pick(rng, &open).cloned())
            .unwrap_or_else(|| format!("i-{}", 9000 + rng.random_range(0..100)))
    }

    fn draw(&self, rng: &mut SmallRng) -> Op {
        // Drawn only with a face, so a seed without one makes the workload it always did.
        if self.rounds.is_some() && rng.random_bool(MCP_SHARE) {
            // The latest round half the time (its ask most likely still open, so the
            // retry races the doors), else any round so far (most likely resolved).
            let round = if rng.random_bool(0.5) {
                self.pending.last()
            } else {
                pick(rng, &self.pending)
            };
            if let Some((subject, key, state)) = round
                && rng.random_bool(0.6)
            {
                return Op::McpRetry {
                    subject: subject.clone(),
                    key: key.clone(),
                    state: state.clone(),
                };
            }
            return Op::McpCall {
                subject: self.subjects[rng.random_range(0..self.subjects.len())].clone(),
                kill: rng.random_bool(0.5),
                ttl: [30, 120, 600, 3600][rng.random_range(0..4)],
            };
        }
        let subject = self.subjects[rng.random_range(0..self.subjects.len())].clone();
        let ttl = [30, 120, 600, 3600][rng.random_range(0..4)];
        match rng.random_range(0..100) {
            0..20 => Op::Start {
                subject,
                n: if rng.random_bool(0.25) { 2 } else { 1 },
                fail: rng.random_bool(0.2),
                kill: rng.random_bool(0.5),
                ttl,
            },
            20..25 => Op::Chain {
                subject,
                kill: rng.random_bool(0.5),
                ttl,
            },
            25..29 => Op::UserAsk { subject },
            29..44 => {
                let count = if rng.random_bool(0.2) { 2 } else { 1 };
                let mut items = Vec::new();
                for _ in 0..count {
                    let take = rng.random_bool(0.3);
                    let id = self.some_id(rng, &subject, !take);
                    let payload = (!take).then(|| {
                        if rng.random_bool(0.05) {
                            json!({"interaction_expired": true})
                        } else {
                            json!({"answer": rng.random_range(0..1000)})
                        }
                    });
                    items.push((id, payload));
                }
                Op::Resolve {
                    subject,
                    array: count > 1 || rng.random_bool(0.2),
                    items,
                }
            }
            44..49 => {
                let id = self.some_id(rng, &subject, true);
                Op::Detached {
                    subject,
                    id,
                    payload: json!({"answer": "late"}),
                }
            }
            49..57 => {
                let count = rng.random_range(1..=2);
                let ids = (0..count)
                    .map(|_| {
                        let open = rng.random_bool(0.7);
                        self.some_id(rng, &subject, open)
                    })
                    .collect();
                Op::Cancel { subject, ids }
            }
            57..63 => Op::Nudge { subject },
            63..67 => Op::Auto { subject },
            67..69 => {
                let id = self.some_id(rng, &subject, false);
                Op::TakeByHook { subject, id }
            }
            69..74 => {
                let users: Vec<String> = self
                    .model
                    .open_user()
                    .into_iter()
                    .map(str::to_owned)
                    .collect();
                let (open, _, _) = self.ids_on(&subject);
                let roll = rng.random_range(0..10);
                let id = if roll < 6 {
                    pick(rng, &users).cloned()
                } else {
                    pick(rng, &open).cloned()
                }
                .unwrap_or_else(|| "i-9999".to_owned());
                let answer = if rng.random_bool(0.8) {
                    json!("fine")
                } else {
                    json!(42)
                };
                Op::Answer { id, answer }
            }
            74..77 => Op::BadSave {
                source: BAD[rng.random_range(0..BAD.len())],
            },
            77..90 => Op::Advance([10, 60, 300, 1200, 2700, 7200][rng.random_range(0..6)]),
            90..95 => Op::Passivate,
            95..97 => Op::UnloadSlot { subject },
            // A slot given up, if there is one: the first subject of one.
            _ => {
                let away = |s: &&String| self.model.is_away(s);
                let subject = if self.model.is_away(&subject) {
                    subject
                } else {
                    self.subjects.iter().find(away).cloned().unwrap_or(subject)
                };
                Op::LoadSlot { subject }
            }
        }
    }

    /// What the model says `op` must give.
    fn predict(&self, op: &Op) -> Expect {
        let m = &self.model;
        if op_subject(op).is_some_and(|subject| m.is_away(subject)) {
            return Expect::NotOwner;
        }
        match op {
            Op::Start { n, .. } => {
                let free = m.cap.saturating_sub(m.caller_count());
                if free as u64 >= *n {
                    Expect::Parked(*n as usize)
                } else if free == 0 {
                    Expect::AtCap("INTERACTIONS_MAX_CONCURRENT_CALLER")
                } else {
                    Expect::Any
                }
            }
            Op::Chain { .. } => Expect::Any,
            Op::UserAsk { .. } => {
                if m.open_user().len() < m.user_cap {
                    Expect::Suspended
                } else {
                    Expect::AtCap("INTERACTIONS_MAX_CONCURRENT")
                }
            }
            Op::Resolve { subject, items, .. } => {
                let mut kinds = Vec::new();
                let mut seen = Vec::new();
                for (id, payload) in items {
                    if seen.contains(id) {
                        return Expect::Refused;
                    }
                    seen.push(id.clone());
                    let kind = match payload {
                        Some(p) => {
                            let on_subject = m.asks.get(id).is_some_and(|a| a.subject == *subject);
                            if !m.is_open(id)
                                || !on_subject
                                || p.get("interaction_expired").is_some()
                            {
                                return Expect::Refused;
                            }
                            if m.open_siblings(id) > 0 {
                                ItemKind::Buffered
                            } else {
                                match self.next_status(id) {
                                    Some(status) => ItemKind::Outcome(status),
                                    None => return Expect::Any,
                                }
                            }
                        }
                        None => match m.waiting.get(id) {
                            Some(w) if w.subject == *subject => {
                                if w.failed {
                                    ItemKind::TakeFailed
                                } else {
                                    ItemKind::Taken
                                }
                            }
                            _ => return Expect::Refused,
                        },
                    };
                    kinds.push(kind);
                }
                // Two asks of one group answered in one action: the first buffers, the
                // last resumes; the model does not predict the pair's statuses.
                if kinds.len() > 1 && kinds.contains(&ItemKind::Buffered) {
                    return Expect::Any;
                }
                Expect::Resolved(kinds)
            }
            Op::Detached { subject, id, .. } => {
                if m.is_open(id) && m.asks.get(id).is_some_and(|a| a.subject == *subject) {
                    Expect::Accepted
                } else {
                    Expect::Refused
                }
            }
            Op::Cancel { subject, ids } => {
                let mut seen = Vec::new();
                for id in ids {
                    let known = (m.is_open(id)
                        && m.asks.get(id).is_some_and(|a| a.subject == *subject))
                        || m.waiting.get(id).is_some_and(|w| w.subject == *subject);
                    if !known || seen.contains(id) {
                        return Expect::Refused;
                    }
                    seen.push(id.clone());
                }
                Expect::Accepted
            }
            Op::Nudge { subject } | Op::Auto { subject } => {
                let first = m
                    .asks
                    .iter()
                    .filter(|(_, a)| a.subject == *subject && a.resolved.is_none() && !a.user)
                    .map(|(id, _)| id)
                    .min_by_key(|id| id_number(id));
                match first {
                    None => Expect::Nothing,
                    Some(id) if m.open_siblings(id) > 0 => {
                        Expect::Resolved(vec![ItemKind::Buffered])
                    }
                    Some(id) if matches!(op, Op::Nudge { .. }) => {
                        let _ = id;
                        Expect::Resolved(vec![ItemKind::Detached])
                    }
                    Some(id) => match self.next_status(id) {
                        Some(status) => Expect::Resolved(vec![ItemKind::Outcome(status)]),
                        None => Expect::Any,
                    },
                }
            }
            Op::TakeByHook { .. } => Expect::Refused,
            Op::Answer { id, .. }
                if m.asks
                    .get(id)
                    .is_some_and(|a| a.user && m.is_away(&a.subject)) =>
            {
                Expect::NotOwner
            }
            Op::Answer { id, answer } => {
                if m.open_user().contains(id.as_str()) && answer.is_string() {
                    Expect::Accepted
                } else {
                    Expect::Refused
                }
            }
            Op::BadSave { .. } => Expect::Refused,
            Op::Advance(_) | Op::Passivate | Op::UnloadSlot { .. } | Op::LoadSlot { .. } => {
                Expect::Accepted
            }
            Op::McpCall { .. } => {
                if m.cap > m.caller_count() {
                    Expect::Round(1)
                } else {
                    Expect::ToolError("INTERACTIONS_MAX_CONCURRENT_CALLER")
                }
            }
            Op::McpRetry { subject, key, .. } => {
                let on_subject = m.asks.get(key).is_some_and(|a| a.subject == *subject);
                if !m.is_open(key) || !on_subject {
                    // Resolved before: by a door, a resume, a cancel, its expiry, or this
                    // round's own earlier retry.
                    Expect::ToolError("no longer open")
                } else {
                    match self.next_status(key) {
                        Some(RunStatus::Succeeded) => Expect::McpResult,
                        _ => Expect::Any,
                    }
                }
            }
        }
    }

    /// The status a run's next outcome has when the last open ask of `id`'s group is
    /// resumed with a receiver.
    fn next_status(&self, id: &str) -> Option<RunStatus> {
        let m = &self.model;
        let run = m.asks.get(id).and_then(|a| m.runs.get(&a.run))?;
        if run.asks.len() < run.wanted {
            // Part of its group was refused at the ceiling: the replay asks afresh.
            return None;
        }
        let expired = run.asks.iter().any(|a| {
            m.asks.get(a).and_then(|x| x.resolved) == Some(crate::event::Resolution::Expired)
        });
        Some(if run.target == "asker" && run.will_fail && !expired {
            RunStatus::Failed
        } else {
            RunStatus::Succeeded
        })
    }

    /// Perform `op`, settle, and check everything; the trace line and the verdict. With
    /// `crash`, the process crashes once that many more of the store's batches are
    /// durable (or once the op is done, if it makes fewer), and a new runtime is built
    /// on what was durable.
    async fn perform(&mut self, op: &Op, crash: Option<u64>) -> (String, Result<(), String>) {
        // A crash may cut the op short: its reply is then lost, and only what was
        // durable of it counts (the model learns that from the events shown).
        let expect = match crash {
            None => self.predict(op),
            Some(_) => Expect::Any,
        };
        if let Some(batches) = crash {
            self.store.crash_after(batches);
        }
        let work = async {
            let done = self.act(op).await;
            self.rt.settle().await;
            done
        };
        let launch = launch_of(op);
        let (mut line, got) = tokio::select! {
            biased;
            () = self.store.crashed() => (
                format!("{op:?}, crashed mid-way"),
                Got::Unit(Err("lost in the crash".to_owned())),
            ),
            done = work => done,
        };
        if matches!(got, Got::Unit(Ok(()))) {
            self.moved(op);
        }
        if crash.is_some() {
            // Shown nothing more, told no one: the old runtime only winds down.
            let reopened = self.store.crash_and_reopen();
            self.rt.shutdown().await;
            line = format!("{line}; crash and restart");
            if let Err(why) = self.restart(reopened, launch.as_ref()).await {
                return (line, Err(why));
            }
        }
        self.rt.settle().await;
        let line = format!("{line} -> {}", got.short());
        if let (Op::McpCall { subject, .. }, Got::Mcp(RoundAnswer::Round { keys, state })) =
            (op, &got)
        {
            for key in keys {
                self.pending
                    .push((subject.clone(), key.clone(), state.clone()));
            }
        }
        let verdict = self.check(op, &expect, &got, launch.as_ref()).await;
        (line, verdict)
    }

    /// The model learns a slot given up or taken back by `op`; its subjects are looked
    /// at in the next check (refused while it is away, read back whole once it is not).
    fn moved(&mut self, op: &Op) {
        let (subject, away) = match op {
            Op::UnloadSlot { subject } => (subject, true),
            Op::LoadSlot { subject } => (subject, false),
            _ => return,
        };
        let slot = Runtime::slot_of(subject);
        if away {
            self.model.away.insert(slot);
        } else if self.model.away.remove(&slot) {
            // What it brings back was admitted before it left: the ceilings may be
            // passed until enough of it is resolved.
            self.model.over = true;
        }
        let of_slot = self.subjects.iter().filter(|s| Runtime::slot_of(s) == slot);
        self.touched.extend(of_slot.cloned());
    }

    /// Build a new runtime on what the store kept, as a restarted process would, and
    /// follow its events and frames from now on.
    async fn restart(
        &mut self,
        store: Option<Store>,
        launch: Option<&Launch>,
    ) -> Result<(), String> {
        let store = store.ok_or("a memory store has no successor after its crash")?;
        self.restarts += 1;
        // A new process owns every slot: what was away is back.
        if !self.model.away.is_empty() {
            self.model.away.clear();
            self.model.over = true;
        }
        // What the old runtime showed before it stopped is still the model's to apply;
        // every subject is looked at after a restart.
        self.touched = self.drain_events(launch)?;
        self.touched.extend(self.subjects.iter().cloned());
        while let Ok(f) = self.frames.try_recv() {
            self.frames_before.push(f);
        }
        let rt = self
            .open
            .build(store.clone())
            .await
            .map_err(|e| format!("the restart failed: {e}"))?;
        self.events = rt.events();
        self.logged = rt.logged_events();
        self.frames = rt.inbox_frames();
        if let Some(rounds) = &self.rounds {
            rounds.0.attach(&rt).await;
        }
        self.rt = rt;
        self.store = store;
        // What became durable but was never shown (the crash came between the two), and
        // what the recovery made before it could be followed, is in the log: the model
        // learns it from there, in the log's order. What is shown again from now on is
        // known by its number and not applied twice.
        let log = self
            .rt
            .event_log(1, usize::MAX)
            .map_err(|e| format!("the event log cannot be read: {e}"))?;
        for logged in log {
            if self.shown.insert(logged.seq) {
                self.touched.push(logged.event.subject().to_owned());
                self.model
                    .apply(&logged.event, self.rt.now(), launch, &["user_asker"])?;
            }
        }
        Ok(())
    }

    /// Perform `op`: the trace line, what came back, and the launch it made.
    async fn act(&self, op: &Op) -> (String, Got) {
        match op {
            Op::Start {
                subject,
                n,
                fail,
                kill,
                ttl,
            } => {
                let input = json!({"n": n, "fail": fail, "kill": kill, "ttl": ttl});
                let r = self.rt.visit("start", subject, input.clone()).await;
                (format!("visit start on {subject} {input}"), Got::Visit(r))
            }
            Op::Chain { subject, kill, ttl } => {
                let input = json!({"kill": kill, "ttl": ttl});
                let r = self.rt.visit("chain", subject, input.clone()).await;
                (format!("visit chain on {subject} {input}"), Got::Visit(r))
            }
            Op::UserAsk { subject } => {
                let r = self.rt.visit("ask_user", subject, json!({})).await;
                (format!("visit ask_user on {subject}"), Got::Visit(r))
            }
            Op::Resolve {
                subject,
                items,
                array,
            } => {
                let values: Vec<Value> = items
                    .iter()
                    .map(|(id, p)| match p {
                        Some(p) => json!({"id": id, "payload": p}),
                        None => json!(id),
                    })
                    .collect();
                let doc = if *array || values.len() != 1 {
                    Value::Array(values)
                } else {
                    values.into_iter().next().unwrap_or(Value::Null)
                };
                let input = json!({ "items": doc });
                let r = self.rt.visit("resolve", subject, input.clone()).await;
                (format!("visit resolve on {subject} {input}"), Got::Visit(r))
            }
            Op::Detached {
                subject,
                id,
                payload,
            } => {
                let r = self.rt.resume_detached(subject, id, payload.clone()).await;
                (
                    format!("resume {id} on {subject} with no receiver"),
                    Got::Unit(r.map_err(|e| e.to_string())),
                )
            }
            Op::Cancel { subject, ids } => {
                let input = json!({ "ids": ids });
                let r = self.rt.visit("cancel", subject, input.clone()).await;
                (format!("visit cancel on {subject} {input}"), Got::Visit(r))
            }
            Op::Nudge { subject } => {
                let fires = self.rt.fire("nudge", json!({"subject": subject})).await;
                let r = fires
                    .into_iter()
                    .next()
                    .and_then(|f| f.visit)
                    .unwrap_or(Err(VisitError::Stopped));
                (format!("fire nudge for {subject}"), Got::Visit(r))
            }
            Op::Auto { subject } => {
                let r = self.rt.visit("auto", subject, json!({})).await;
                (format!("visit auto on {subject}"), Got::Visit(r))
            }
            Op::TakeByHook { subject, id } => {
                let fires = self
                    .rt
                    .fire("take", json!({"subject": subject, "id": id}))
                    .await;
                let r = fires
                    .into_iter()
                    .next()
                    .and_then(|f| f.visit)
                    .unwrap_or(Err(VisitError::Stopped));
                (format!("fire take of {id} for {subject}"), Got::Visit(r))
            }
            Op::Answer { id, answer } => {
                let r = self.rt.answer(id, answer.clone()).await;
                (
                    format!("answer {id} with {answer}"),
                    Got::Unit(r.map_err(|e| e.to_string())),
                )
            }
            Op::BadSave { source } => {
                let door = DoorSpec::route("resolve", "asker")
                    .resume_expr(source)
                    .start_expr("null");
                let r = self.rt.save_door(door);
                (
                    format!("save door resolve with resume_expr {source:?}"),
                    Got::Unit(r.map_err(|e| e.to_string())),
                )
            }
            Op::Advance(secs) => {
                self.clock.advance(Duration::from_secs(*secs));
                (format!("advance {secs}s"), Got::Unit(Ok(())))
            }
            Op::Passivate => {
                self.clock.advance(Duration::from_secs(1));
                (
                    "advance 1s (idle subjects passivate)".to_owned(),
                    Got::Unit(Ok(())),
                )
            }
            Op::UnloadSlot { subject } => {
                let slot = Runtime::slot_of(subject);
                let r = self.rt.unload_slot(slot).await;
                (
                    format!("unload slot {slot} (of {subject})"),
                    Got::Unit(r.map_err(|e| e.to_string())),
                )
            }
            Op::LoadSlot { subject } => {
                let slot = Runtime::slot_of(subject);
                let r = self.rt.load_slot(slot).await;
                (
                    format!("load slot {slot} (of {subject})"),
                    Got::Unit(r.map_err(|e| e.to_string())),
                )
            }
            Op::McpCall { subject, kill, ttl } => {
                let arguments =
                    json!({"subject": subject, "n": 1, "fail": false, "kill": kill, "ttl": ttl});
                let line = format!("mcp tools/call {TOOL} {arguments}");
                match &self.rounds {
                    Some(rounds) => (line, Got::Mcp(rounds.0.call(TOOL, arguments).await)),
                    None => (line, Got::Mcp(RoundAnswer::Error("no MCP face".into()))),
                }
            }
            Op::McpRetry {
                subject,
                key,
                state,
            } => {
                let arguments = json!({"subject": subject, "n": 1, "fail": false});
                let responses = json!({ key: {"action": "accept", "content": {"answer": true}} });
                let line = format!("mcp retry of {key} on {subject} answering true");
                match &self.rounds {
                    Some(rounds) => (
                        line,
                        Got::Mcp(rounds.0.retry(TOOL, arguments, state, responses).await),
                    ),
                    None => (line, Got::Mcp(RoundAnswer::Error("no MCP face".into()))),
                }
            }
        }
    }

    /// Apply every event published so far to the model (a logged one only if the model
    /// has not learnt it from the log already); the subjects they touched.
    fn drain_events(&mut self, launch: Option<&Launch>) -> Result<Vec<String>, String> {
        let now = self.rt.now();
        let mut touched = std::mem::take(&mut self.touched);
        // Every logged event is published on both streams, the logged one first, in the
        // same order: the next logged entry is the event's number if it is the event.
        let mut logged = std::collections::VecDeque::new();
        loop {
            match self.logged.try_recv() {
                Ok(entry) => logged.push_back(entry),
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    return Err(format!(
                        "the logged event stream lagged by {n}; the model lost track"
                    ));
                }
                Err(_) => break,
            }
        }
        loop {
            match self.events.try_recv() {
                Ok(event) => {
                    if logged.front().is_some_and(|l: &Logged| l.event == event) {
                        let seq = logged.pop_front().map_or(0, |l| l.seq);
                        if !self.shown.insert(seq) {
                            continue;
                        }
                    }
                    let s = event.subject();
                    if !touched.iter().any(|t| t == s) {
                        touched.push(s.to_owned());
                    }
                    self.model.apply(&event, now, launch, &["user_asker"])?;
                }
                Err(broadcast::error::TryRecvError::Lagged(n)) => {
                    return Err(format!(
                        "the event stream lagged by {n}; the model lost track"
                    ));
                }
                Err(_) => break,
            }
        }
        Ok(touched)
    }

    async fn check(
        &mut self,
        op: &Op,
        expect: &Expect,
        got: &Got,
        launch: Option<&Launch>,
    ) -> Result<(), String> {
        let now = self.rt.now();
        let mut touched: Vec<String> = Vec::new();
        if let Some(s) = op_subject(op) {
            touched.push(s.to_owned());
        }
        touched.append(&mut self.drain_events(launch)?);
        compare(expect, got)?;
        self.model.check_time(now)?;
        touched.sort();
        touched.dedup();
        for subject in &touched {
            if self.model.is_away(subject) {
                match self.rt.list(subject).await {
                    Err(crate::StartError::Store(crate::StoreFault::NotOwner { .. })) => {}
                    other => {
                        return Err(format!(
                            "{subject}'s slot is given up, but listing it gave {other:?}"
                        ));
                    }
                }
                continue;
            }
            let entries = self.rt.list(subject).await.map_err(|e| e.to_string())?;
            self.model.check_subject(subject, &entries)?;
        }
        // Listing woke those subjects; settle so their idle timers are armed again.
        self.rt.settle().await;
        let stats = self.rt.stats().await;
        self.model.tally.passivations = stats.passivations;
        self.model
            .check_counts(stats.caller_open, stats.user_open)?;
        let mut listed = Vec::new();
        let mut page = 1;
        loop {
            let p = self.rt.inbox(page, Some(200)).map_err(|e| e.to_string())?;
            listed.extend(p.items.into_iter().map(|i| i.id));
            match p.next_page {
                Some(next) => page = next,
                None => break,
            }
        }
        let mut frames = std::mem::take(&mut self.frames_before);
        while let Ok(f) = self.frames.try_recv() {
            frames.push(f);
        }
        self.model.check_inbox(&listed, &frames)
    }

    /// Every subject's parked set against the model, and the account balanced.
    async fn final_account(&mut self) -> Result<(), String> {
        // Every slot given up is taken back: nothing it held may be lost or doubled.
        for slot in std::mem::take(&mut self.model.away) {
            self.rt
                .load_slot(slot)
                .await
                .map_err(|e| format!("slot {slot} could not be taken back: {e}"))?;
            self.model.over = true;
        }
        self.rt.settle().await;
        self.drain_events(None)?;
        self.model.check_time(self.rt.now())?;
        for subject in self.subjects.clone() {
            let entries = self.rt.list(&subject).await.map_err(|e| e.to_string())?;
            self.model.check_subject(&subject, &entries)?;
        }
        let t = self.model.tally;
        let open = self
            .model
            .asks
            .values()
            .filter(|a| a.resolved.is_none())
            .count() as u64;
        if t.asks != t.resumed + t.cancelled + t.expired + open {
            return Err(format!(
                "asks {} != resumed {} + cancelled {} + expired {} + open {open}",
                t.asks, t.resumed, t.cancelled, t.expired
            ));
        }
        let waiting = self.model.waiting.len() as u64;
        if t.stored != t.taken + t.dropped + waiting {
            return Err(format!(
                "outcomes stored {} != taken {} + dropped {} + waiting {waiting}",
                t.stored, t.taken, t.dropped
            ));
        }
        Ok(())
    }
}

/// The runs `op` starts, as the model expects them.
fn launch_of(op: &Op) -> Option<Launch> {
    let (ttl, parent_ttl, fail, n) = match op {
        Op::Start { n, fail, ttl, .. } => (*ttl, *ttl, *fail, *n as usize),
        Op::Chain { ttl, .. } => (*ttl, ttl * 2, false, 1),
        Op::UserAsk { .. } => (USER_TTL, USER_TTL, false, 1),
        Op::McpCall { ttl, .. } => (*ttl, *ttl, false, 1),
        _ => return None,
    };
    Some(Launch {
        ttl: Span::seconds(ttl as i64),
        parent_ttl: Span::seconds(parent_ttl as i64),
        fail,
        n,
    })
}

/// What an operation returned.
#[allow(clippy::large_enum_variant)] // one per step, never stored
enum Got {
    Visit(Result<Visit, VisitError>),
    Unit(Result<(), String>),
    Mcp(RoundAnswer),
}

impl Got {
    fn short(&self) -> String {
        match self {
            Got::Visit(Ok(v)) => serde_json::to_string(v).unwrap_or_default(),
            Got::Visit(Err(e)) => format!("refused: {e}"),
            Got::Unit(Ok(())) => "ok".to_owned(),
            Got::Unit(Err(e)) => format!("refused: {e}"),
            Got::Mcp(RoundAnswer::Round { keys, .. }) => {
                format!("input_required for {}", keys.join(", "))
            }
            Got::Mcp(RoundAnswer::Result(v)) => format!("result {v}"),
            Got::Mcp(RoundAnswer::ToolError(e)) => format!("tool error: {e}"),
            Got::Mcp(RoundAnswer::Error(e)) => format!("error: {e}"),
        }
    }
}

fn record_of(got: &Got) -> Option<&RunRecord> {
    match got {
        Got::Visit(Ok(Visit {
            outcome: VisitOutcome::Started { record, .. },
            ..
        })) => record.as_ref(),
        _ => None,
    }
}

/// What the message of a refusal as `not_owner` says.
const NOT_OWNER: &str = "which this runtime does not own";

/// The operation's result against the model's prediction.
fn compare(expect: &Expect, got: &Got) -> Result<(), String> {
    let refused = matches!(got, Got::Visit(Err(_)) | Got::Unit(Err(_)));
    match expect {
        Expect::Any => match got {
            // Whatever the model cannot foretell, the face answers without a protocol
            // error (a round, a result, or a tool error), but for a subject whose slot
            // is away (an operation a crash cut short may have been on one).
            Got::Mcp(RoundAnswer::Error(e)) if !e.contains(NOT_OWNER) => {
                Err(format!("the MCP face answered an error: {e}"))
            }
            _ => Ok(()),
        },
        Expect::Round(n) => match got {
            Got::Mcp(RoundAnswer::Round { keys, .. }) if keys.len() == *n => Ok(()),
            _ => Err(format!(
                "the model expected an input_required round of {n} ask(s), got {}",
                got.short()
            )),
        },
        Expect::McpResult => match got {
            Got::Mcp(RoundAnswer::Result(v)) if *v == json!({"answers": [true]}) => Ok(()),
            _ => Err(format!(
                "the model expected the run's result {{\"answers\": [true]}}, got {}",
                got.short()
            )),
        },
        Expect::ToolError(says) => match got {
            Got::Mcp(RoundAnswer::ToolError(e)) if e.contains(says) => Ok(()),
            _ => Err(format!(
                "the model expected a tool error saying {says:?}, got {}",
                got.short()
            )),
        },
        Expect::NotOwner => {
            let says = |e: &str| e.contains(NOT_OWNER);
            match got {
                Got::Visit(Err(VisitError::Store(crate::StoreFault::NotOwner { .. }))) => Ok(()),
                Got::Unit(Err(e)) if says(e) => Ok(()),
                Got::Mcp(RoundAnswer::Error(e) | RoundAnswer::ToolError(e)) if says(e) => Ok(()),
                _ => Err(format!(
                    "the model expected a refusal as not_owner, got {}",
                    got.short()
                )),
            }
        }
        Expect::Refused if refused => Ok(()),
        Expect::Refused => Err(format!("the model expected a refusal, got {}", got.short())),
        Expect::Accepted if !refused => Ok(()),
        Expect::Accepted => Err(format!(
            "the model expected this to be accepted, got {}",
            got.short()
        )),
        Expect::Parked(n) => match record_of(got) {
            Some(r)
                if r.status == RunStatus::Parked && r.asks.as_ref().map(Vec::len) == Some(*n) =>
            {
                Ok(())
            }
            _ => Err(format!(
                "the model expected a parked record with {n} ask(s), got {}",
                got.short()
            )),
        },
        Expect::AtCap(setting) => match record_of(got) {
            Some(r)
                if r.status == RunStatus::Failed
                    && r.error.as_deref().is_some_and(|e| e.contains(setting)) =>
            {
                Ok(())
            }
            _ => Err(format!(
                "the model expected a refusal at {setting}, got {}",
                got.short()
            )),
        },
        Expect::Suspended => match record_of(got) {
            Some(r) if r.status == RunStatus::Suspended => Ok(()),
            _ => Err(format!(
                "the model expected a suspended record, got {}",
                got.short()
            )),
        },
        Expect::Nothing => match got {
            Got::Visit(Ok(Visit {
                outcome: VisitOutcome::Nothing,
                ..
            })) => Ok(()),
            _ => Err(format!(
                "the model expected the visit to do nothing, got {}",
                got.short()
            )),
        },
        Expect::Resolved(kinds) => {
            let Got::Visit(Ok(Visit {
                outcome: VisitOutcome::Resolved { results },
                ..
            })) = got
            else {
                return Err(format!(
                    "the model expected resolutions {kinds:?}, got {}",
                    got.short()
                ));
            };
            let actual: Vec<Option<ItemKind>> = results.iter().map(item_kind).collect();
            let want: Vec<Option<ItemKind>> = kinds.iter().cloned().map(Some).collect();
            if actual == want {
                Ok(())
            } else {
                Err(format!(
                    "the model expected resolutions {kinds:?}, got {}",
                    got.short()
                ))
            }
        }
    }
}

fn item_kind(item: &ItemOutcome) -> Option<ItemKind> {
    Some(match item {
        ItemOutcome::Resumed { outcome: None, .. } => ItemKind::Detached,
        ItemOutcome::Resumed {
            outcome: Some(Resumed::Buffered { .. }),
            ..
        } => ItemKind::Buffered,
        ItemOutcome::Resumed {
            outcome: Some(Resumed::Outcome(r)),
            ..
        } => ItemKind::Outcome(r.status),
        ItemOutcome::Taken { .. } => ItemKind::Taken,
        ItemOutcome::TakeFailed { .. } => ItemKind::TakeFailed,
    })
}

fn op_subject(op: &Op) -> Option<&str> {
    match op {
        Op::Start { subject, .. }
        | Op::Chain { subject, .. }
        | Op::UserAsk { subject }
        | Op::Resolve { subject, .. }
        | Op::Detached { subject, .. }
        | Op::Cancel { subject, .. }
        | Op::Nudge { subject }
        | Op::Auto { subject }
        | Op::TakeByHook { subject, .. }
        | Op::McpCall { subject, .. }
        | Op::McpRetry { subject, .. } => Some(subject),
        Op::Answer { .. }
        | Op::BadSave { .. }
        | Op::Advance(_)
        | Op::Passivate
        | Op::UnloadSlot { .. }
        | Op::LoadSlot { .. } => None,
    }
}

fn id_number(id: &str) -> u64 {
    id.trim_start_matches("i-").parse().unwrap_or(u64::MAX)
}
