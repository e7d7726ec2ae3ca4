//! The random simulation's node operations (`docs/simulation.md`, "Nodes"): several
//! runtimes, one per node, on one cluster engine whose slots are owned under leases on
//! the virtual clock, checked after every step.
//!
//! One seed fixes everything. The workload parks asks on subjects and resolves them
//! (open ones, and ones already resolved, which must be refused), through the node that
//! serves each subject, or through one that does not (refused as `not_owner`, and
//! nothing written). Between them time passes a third of a lease at a time, each node
//! keeping its leases at every step, and nodes are killed (their slots taken by the
//! others once their leases end), restarted under their name, added (handed their
//! share a few slots at a time), frozen past their leases (their clock stands still
//! and they keep no lease) and thawed (first visited as they were, stale: their write
//! must be refused by the slot's epoch).
//!
//! The model learns every ask from the log all nodes write, in commit order, and
//! checks, after every step:
//!
//! - every ask parked once and resolved at most once; every park and every resumption
//!   acknowledged to a caller is in the log;
//! - a refused step wrote nothing;
//! - each subject served lists exactly the model's open asks, and no open ask of a
//!   subject served is past its deadline;
//! - no slot was written under an epoch older than one already written, or under one
//!   epoch by two nodes (the cluster's audit).
//!
//! The final account thaws every node, lets time pass until every subject is served and
//! every deadline has passed, and then every ask must be resolved exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Duration as Span, Utc};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::model::Tally;
use super::random::{NodeTally, RandomConfig, RandomReport, doors, register};
use crate::clock::{Clock, ManualClock};
use crate::door::outcome::{ItemOutcome, Visit, VisitError, VisitOutcome};
use crate::entry::{EntryStatus, To};
use crate::error::BuildError;
use crate::event::{Event, Resolution};
use crate::ids::Ids;
use crate::record::RunStatus;
use crate::runtime::Runtime;
use crate::store::Store;
use crate::store::cluster::{Cluster, Node};

/// How long a lease lasts: time passes a third of it at a time.
const LEASE: Duration = Duration::from_secs(30);

/// How far time moves in one step: a round of the leases follows each.
const STEP: Duration = Duration::from_secs(10);

/// The most nodes up at once.
const MAX_NODES: usize = 5;

/// How long a node's runtime may take to follow a change of its slots, real time.
const FOLLOW_WAIT: Duration = Duration::from_secs(20);

/// One process of a node: its runtime on its hold of the cluster.
struct Process {
    /// Its hold on the cluster (the engine of its store).
    node: Arc<Node>,
    rt: Runtime,
    /// Its own clock: stands still while it is frozen.
    clock: ManualClock,
    /// Frozen: its clock stands still, it keeps no lease, it is sent nothing.
    frozen: bool,
}

/// What an operation does.
#[derive(Debug, Clone)]
enum Op {
    /// Park `n` asks of `ttl` seconds on `subject`.
    Park { subject: String, n: u64, ttl: u64 },
    /// Resolve `id` on `subject`.
    Resolve { subject: String, id: String },
    /// Visit `subject` through a node that does not serve it.
    Astray { subject: String },
    /// Let `steps` thirds of a lease pass.
    Pass { steps: u32 },
    /// Kill the process of the node at this index of the processes up.
    Kill(usize),
    /// Start a process of a node killed before.
    Restart(String),
    /// Add a node.
    Add,
    /// Freeze the process at this index.
    Freeze(usize),
    /// Thaw the process at this index.
    Thaw(usize),
}

/// What the model knows of an ask.
#[derive(Debug, Clone)]
struct Known {
    subject: String,
    /// When it lapses.
    deadline: DateTime<Utc>,
    /// How it was resolved, once it was.
    resolved: Option<Resolution>,
}

/// The workload, its nodes and its model.
struct Sim {
    seed: u64,
    cluster: Cluster,
    /// The cluster's clock (the database's).
    clock: ManualClock,
    /// The processes up (frozen ones included), in the order they started.
    up: Vec<Process>,
    /// The nodes whose process was killed and not started again.
    down: Vec<String>,
    /// Nodes named so far.
    named: usize,
    /// Processes started so far (each draws its ids from a seed of its own).
    started: u64,
    subjects: Vec<String>,
    /// Every ask the log showed, by id.
    asks: BTreeMap<String, Known>,
    /// The time to live of each run a park started.
    runs: BTreeMap<String, u64>,
    /// The log's next entry to read.
    next: u64,
    tally: Tally,
    nodes: NodeTally,
}

/// Runs one seeded workload over `config.nodes` nodes.
pub(super) async fn random_nodes(config: &RandomConfig) -> Result<RandomReport, BuildError> {
    run(config, true).await
}

/// Runs one seeded workload over `config.nodes` nodes on a cluster engine that checks
/// each write's slots (`fenced`), or one that does not, to show the checks catch it.
async fn run(config: &RandomConfig, fenced: bool) -> Result<RandomReport, BuildError> {
    let mut rng = SmallRng::seed_from_u64(config.seed);
    let clock = ManualClock::default();
    let mut cluster = Cluster::new(clock.clone(), LEASE);
    if !fenced {
        cluster = cluster.unfenced();
    }
    let mut sim = Sim {
        seed: config.seed,
        cluster,
        clock,
        up: Vec::new(),
        down: Vec::new(),
        named: 0,
        started: 0,
        subjects: (0..config.subjects.max(1))
            .map(|k| format!("s{k}"))
            .collect(),
        asks: BTreeMap::new(),
        runs: BTreeMap::new(),
        next: 1,
        tally: Tally::default(),
        nodes: NodeTally::default(),
    };
    let mut trace = Vec::new();
    let mut failure = None;
    let fail = |at: &str, why: String| {
        Some(format!(
            "seed {}: {at}: {why}\nreplay: {}",
            config.seed,
            config.replay_command()
        ))
    };
    for k in 0..config.nodes.clamp(2, MAX_NODES) {
        let name = sim.name();
        if let Err(why) = sim.start(&name).await {
            return Ok(report(config, 0, trace, fail("the start", why), &sim));
        }
        if k == 0 {
            for door in doors() {
                if let Err(e) = sim.up[0].rt.save_door(door) {
                    let why = format!("the workload's door was refused: {e}");
                    return Ok(report(config, 0, trace, fail("the start", why), &sim));
                }
            }
        }
    }
    // The nodes share the slots before the workload begins.
    if let Err(why) = sim.pass(12).await {
        return Ok(report(config, 0, trace, fail("the start", why), &sim));
    }
    let mut ops_run = 0;
    for step in 1..=config.ops {
        let op = sim.draw(&mut rng);
        let (line, verdict) = sim.perform(&op, &mut rng).await;
        trace.push(format!("{step:>4}  {line}"));
        ops_run = step;
        if let Err(why) = verdict {
            failure = fail(&format!("step {step} ({line})"), why);
            break;
        }
    }
    if failure.is_none()
        && let Err(why) = sim.final_account().await
    {
        failure = fail("the final account", why);
    }
    for process in std::mem::take(&mut sim.up) {
        process.rt.shutdown().await;
    }
    Ok(report(config, ops_run, trace, failure, &sim))
}

/// The report of a run.
fn report(
    config: &RandomConfig,
    ops_run: usize,
    trace: Vec<String>,
    failure: Option<String>,
    sim: &Sim,
) -> RandomReport {
    RandomReport {
        seed: config.seed,
        ops_run,
        trace,
        failure,
        tally: sim.tally,
        open: sim.asks.values().filter(|a| a.resolved.is_none()).count(),
        waiting: 0,
        nodes: Some(NodeTally {
            slots_taken: sim.cluster.takes(),
            ..sim.nodes
        }),
    }
}

impl Sim {
    /// A new node's name.
    fn name(&mut self) -> String {
        self.named += 1;
        format!("n{}", self.named)
    }

    /// Starts a process of the node `name`, which takes its share of the free slots.
    async fn start(&mut self, name: &str) -> Result<(), String> {
        let clock = ManualClock::at(self.clock.now());
        let node = self.cluster.join(name, clock.clone())?;
        let store = Store::on_cluster(Arc::clone(&node)).map_err(|e| e.to_string())?;
        self.started += 1;
        let seed = self.seed.wrapping_mul(1000).wrapping_add(self.started);
        let builder = Runtime::builder()
            .without_env()
            .clock(clock.clone())
            .ids(Ids::random(seed))
            .passivate_after(Duration::from_secs(1))
            .max_live_subjects(2)
            .store(store);
        let rt = register(builder)
            .build()
            .await
            .map_err(|e| format!("node {name} did not start: {e}"))?;
        self.up.push(Process {
            node,
            rt,
            clock,
            frozen: false,
        });
        Ok(())
    }

    /// The process serving `subject`, if one does (a frozen one is not asked).
    fn owner(&self, subject: &str) -> Option<usize> {
        let slot = Runtime::slot_of(subject);
        self.up.iter().position(|p| !p.frozen && p.rt.serves(slot))
    }

    /// The processes not frozen.
    fn awake(&self) -> Vec<usize> {
        (0..self.up.len()).filter(|&i| !self.up[i].frozen).collect()
    }

    fn draw(&self, rng: &mut SmallRng) -> Op {
        let subject = self.subjects[rng.random_range(0..self.subjects.len())].clone();
        let awake = self.awake();
        match rng.random_range(0..100) {
            0..30 => Op::Park {
                subject,
                n: rng.random_range(1..=2),
                ttl: [30, 120, 600][rng.random_range(0..3)],
            },
            30..55 => {
                // An open ask of the subject mostly, else one resolved.
                let open = rng.random_bool(0.8);
                let ids: Vec<&String> = self
                    .asks
                    .iter()
                    .filter(|(_, a)| a.subject == subject && a.resolved.is_none() == open)
                    .map(|(id, _)| id)
                    .collect();
                match ids.get(rng.random_range(0..ids.len().max(1))) {
                    Some(id) => Op::Resolve {
                        subject,
                        id: (*id).clone(),
                    },
                    None => Op::Pass { steps: 1 },
                }
            }
            55..63 => Op::Astray { subject },
            63..80 => Op::Pass {
                steps: [1, 2, 3, 6, 30][rng.random_range(0..5)],
            },
            80..85 if awake.len() > 1 => Op::Kill(awake[rng.random_range(0..awake.len())]),
            85..89 if !self.down.is_empty() && self.up.len() < MAX_NODES => {
                Op::Restart(self.down[rng.random_range(0..self.down.len())].clone())
            }
            89..92 if self.up.len() < MAX_NODES => Op::Add,
            92..96 if awake.len() > 1 => Op::Freeze(awake[rng.random_range(0..awake.len())]),
            96..100 => match self.up.iter().position(|p| p.frozen) {
                Some(i) => Op::Thaw(i),
                None => Op::Pass { steps: 1 },
            },
            _ => Op::Pass { steps: 1 },
        }
    }

    /// Performs `op` and checks the nodes against the model: the trace line and the
    /// verdict.
    async fn perform(&mut self, op: &Op, rng: &mut SmallRng) -> (String, Result<(), String>) {
        let (line, verdict) = match op {
            Op::Astray { subject } => self.astray(subject, rng).await,
            // No node serves the subject (its slot changing hands): every one refuses.
            Op::Park { subject, .. } | Op::Resolve { subject, .. }
                if self.owner(subject).is_none() =>
            {
                self.astray(subject, rng).await
            }
            Op::Park { subject, n, ttl } => self.park(subject, *n, *ttl).await,
            Op::Resolve { subject, id } => self.resolve(subject, id).await,
            Op::Pass { steps } => (
                format!("pass {}s", STEP.as_secs() * u64::from(*steps)),
                self.pass(*steps).await,
            ),
            Op::Kill(i) => {
                let process = self.up.remove(*i);
                let name = process.node.name().to_string();
                process.node.kill();
                process.rt.shutdown().await;
                self.down.push(name.clone());
                self.nodes.killed += 1;
                (format!("kill {name}"), Ok(()))
            }
            Op::Restart(name) => {
                self.down.retain(|n| n != name);
                // Refused while the node's last process was seen within a lease.
                let mut line = format!("restart {name}");
                let verdict = match self.start(name).await {
                    Ok(()) => {
                        self.nodes.restarted += 1;
                        self.follow().await
                    }
                    Err(why) if why.contains("seen within a lease") => {
                        line = format!("{line}: refused, its last process was seen within a lease");
                        self.down.push(name.clone());
                        Ok(())
                    }
                    Err(why) => Err(why),
                };
                (line, verdict)
            }
            Op::Add => {
                let name = self.name();
                let verdict = match self.start(&name).await {
                    Ok(()) => {
                        self.nodes.added += 1;
                        self.follow().await
                    }
                    Err(why) => Err(why),
                };
                (format!("add {name}"), verdict)
            }
            Op::Freeze(i) => {
                self.up[*i].frozen = true;
                self.nodes.frozen += 1;
                (format!("freeze {}", self.up[*i].node.name()), Ok(()))
            }
            Op::Thaw(i) => self.thaw(*i).await,
        };
        let verdict = match verdict {
            Ok(()) => self.check().await,
            failed => failed,
        };
        (line, verdict)
    }

    /// Parks `n` asks on `subject` through the node serving it: acknowledged as parked
    /// with `n` asks, each in the log.
    async fn park(&mut self, subject: &str, n: u64, ttl: u64) -> (String, Result<(), String>) {
        let input = json!({"n": n, "fail": false, "kill": false, "ttl": ttl});
        let Some(i) = self.owner(subject) else {
            return (
                format!("park on {subject}"),
                Err("no node serves it".to_string()),
            );
        };
        let name = self.up[i].node.name().to_string();
        let line = format!("park {n} on {subject} through {name}");
        let got = self.up[i].rt.visit("start", subject, input).await;
        let record = match got {
            Ok(Visit {
                outcome:
                    VisitOutcome::Started {
                        run_id,
                        record: Some(record),
                    },
                ..
            }) => {
                self.runs.insert(run_id, ttl);
                record
            }
            other => return (line, Err(format!("the park gave {other:?}"))),
        };
        let asks = record.asks.unwrap_or_default();
        if record.status != RunStatus::Parked || asks.len() as u64 != n {
            return (
                line,
                Err(format!(
                    "the park's run is {:?} with {} asks, not parked with {n}",
                    record.status,
                    asks.len()
                )),
            );
        }
        if let Err(why) = self.read_log() {
            return (line, Err(why));
        }
        let lost = asks.iter().find(|a| !self.asks.contains_key(&a.id));
        let verdict = match lost {
            Some(a) => Err(format!(
                "{} was acknowledged, but the log has no park of it",
                a.id
            )),
            None => Ok(()),
        };
        (line, verdict)
    }

    /// Resolves `id` on `subject` through the node serving it: resumed once if open,
    /// refused if already resolved.
    async fn resolve(&mut self, subject: &str, id: &str) -> (String, Result<(), String>) {
        let Some(i) = self.owner(subject) else {
            return (
                format!("resolve on {subject}"),
                Err("no node serves it".to_string()),
            );
        };
        let name = self.up[i].node.name().to_string();
        let line = format!("resolve {id} on {subject} through {name}");
        let open = self.asks.get(id).is_some_and(|a| a.resolved.is_none());
        let input = json!({"items": {"id": id, "payload": {"answer": 1}}});
        let before = self.next;
        let got = self.up[i].rt.visit("resolve", subject, input).await;
        let resumed = matches!(&got, Ok(Visit { outcome: VisitOutcome::Resolved { results }, .. })
            if matches!(results.as_slice(), [ItemOutcome::Resumed { id: r, .. }] if r == id));
        if let Err(why) = self.read_log() {
            return (line, Err(why));
        }
        let verdict = if open && !resumed {
            Err(format!("{id} is open, but resolving it gave {got:?}"))
        } else if !open && resumed {
            Err(format!(
                "{id} was resolved before, but it was resumed again"
            ))
        } else if open
            && !matches!(self.asks.get(id), Some(a) if a.resolved == Some(Resolution::Resumed))
        {
            Err(format!(
                "{id} was resumed, but the log has no resolution of it"
            ))
        } else if !open && self.next != before {
            Err(format!("a refused resolution of {id} wrote to the log"))
        } else {
            Ok(())
        };
        (line, verdict)
    }

    /// Visits `subject` through a node that does not serve it: refused as `not_owner`,
    /// and nothing written.
    async fn astray(&mut self, subject: &str, rng: &mut SmallRng) -> (String, Result<(), String>) {
        let slot = Runtime::slot_of(subject);
        let others: Vec<usize> = self
            .awake()
            .into_iter()
            .filter(|&i| !self.up[i].rt.serves(slot))
            .collect();
        let Some(&i) = others.get(rng.random_range(0..others.len().max(1))) else {
            return (
                format!("visit {subject} astray: every node serves it"),
                Ok(()),
            );
        };
        let name = self.up[i].node.name().to_string();
        let line = format!("park on {subject} through {name}, which does not serve it");
        let before = self.next;
        let input = json!({"n": 1, "fail": false, "kill": false, "ttl": 60});
        let got = self.up[i].rt.visit("start", subject, input).await;
        if let Err(why) = self.read_log() {
            return (line, Err(why));
        }
        self.nodes.astray += 1;
        (line, refused_as_not_owner(&got, self.next == before))
    }

    /// Lets `steps` thirds of a lease pass, a round of every awake node's leases after
    /// each.
    async fn pass(&mut self, steps: u32) -> Result<(), String> {
        for _ in 0..steps {
            self.clock.advance(STEP);
            for i in self.awake() {
                self.up[i].clock.set(self.clock.now());
                self.up[i].rt.settle().await;
            }
            for i in self.awake() {
                self.up[i].node.round();
            }
            self.follow().await?;
            self.read_log()?;
        }
        Ok(())
    }

    /// Thaws the process at `i`: first visited as it was (a subject of a slot it held
    /// and another node took since must be refused by the slot's epoch, and nothing
    /// written), then its clock catches up and it keeps its leases again.
    async fn thaw(&mut self, i: usize) -> (String, Result<(), String>) {
        let name = self.up[i].node.name().to_string();
        let mut line = format!("thaw {name}");
        if let Some(subject) = self.lost_while_frozen(i) {
            line = format!("{line}; park on {subject}, whose slot it lost while frozen");
            let before = self.next;
            let input = json!({"n": 1, "fail": false, "kill": false, "ttl": 60});
            let got = self.up[i].rt.visit("start", &subject, input).await;
            if let Err(why) = self.read_log() {
                return (line, Err(why));
            }
            if let Err(why) = refused_as_not_owner(&got, self.next == before) {
                return (line, Err(why));
            }
            self.nodes.stale += 1;
        }
        self.nodes.thawed += 1;
        self.up[i].frozen = false;
        self.up[i].clock.set(self.clock.now());
        // Its clock caught up, before its next round: it serves nothing of a slot whose
        // time to be served passed, not even a read.
        if let Some(subject) = self.lost_while_frozen(i) {
            line = format!("{line}; list {subject}, whose slot it lost while frozen");
            match self.up[i].rt.list(&subject).await {
                Err(crate::StartError::Store(crate::StoreFault::NotOwner { .. })) => {
                    self.nodes.stale += 1;
                }
                other => {
                    let why = format!("expected a refusal as not_owner, got {other:?}");
                    return (line, Err(why));
                }
            }
        }
        self.up[i].rt.settle().await;
        self.up[i].node.round();
        (line, self.follow().await)
    }

    /// A subject of a slot the process at `i` still serves by its runtime's account,
    /// and another node owns now.
    fn lost_while_frozen(&self, i: usize) -> Option<String> {
        let name = self.up[i].node.name();
        self.subjects
            .iter()
            .find(|s| {
                self.up[i].rt.serves(Runtime::slot_of(s))
                    && self
                        .cluster
                        .owner(crate::slot::Slot::of(s))
                        .is_some_and(|owner| owner != name)
            })
            .cloned()
    }

    /// Waits until every process's runtime serves exactly the slots its hold serves
    /// (it follows the changes its engine told it on a task of its own), then settles
    /// each.
    async fn follow(&mut self) -> Result<(), String> {
        let began = std::time::Instant::now();
        for process in &self.up {
            loop {
                let served: BTreeSet<u16> = process
                    .node
                    .served()
                    .iter()
                    .map(|slot| slot.number())
                    .collect();
                let apart = crate::slot::Slot::all()
                    .map(|slot| slot.number())
                    .find(|&n| process.rt.serves(n) != served.contains(&n));
                // A slot handed over is given back by the runtime's task once unloaded,
                // and a slot given up is unloaded (what it fed withdrawn) by a task.
                let moving =
                    process.node.draining() || !process.rt.hub().services.tasks.all_ended();
                let Some(apart) = apart.or_else(|| moving.then_some(u16::MAX)) else {
                    break;
                };
                if began.elapsed() > FOLLOW_WAIT {
                    if apart == u16::MAX {
                        return Err(format!(
                            "node {} did not finish unloading the slots it gave up or hands \
                             over within {FOLLOW_WAIT:?}",
                            process.node.name()
                        ));
                    }
                    return Err(format!(
                        "node {} did not follow its slots within {FOLLOW_WAIT:?}: slot {apart} \
                         is {} by its hold, {} by its runtime",
                        process.node.name(),
                        if served.contains(&apart) {
                            "served"
                        } else {
                            "not served"
                        },
                        if process.rt.serves(apart) {
                            "served"
                        } else {
                            "not served"
                        },
                    ));
                }
                tokio::task::yield_now().await;
            }
            process.rt.settle().await;
        }
        Ok(())
    }

    /// Applies what the log holds past the last entry read.
    fn read_log(&mut self) -> Result<(), String> {
        if let Some(found) = self.cluster.audit().first() {
            return Err(format!("the audit found {found}"));
        }
        let now = self.clock.now();
        for (seq, bytes) in self.cluster.log_from(self.next)? {
            self.next = seq + 1;
            let event: Event = serde_json::from_slice(&bytes)
                .map_err(|e| format!("entry {seq} of the log does not decode: {e}"))?;
            match event {
                Event::AskParked {
                    interaction,
                    run,
                    subject,
                    to: To::Caller,
                    ..
                } => {
                    if self.asks.contains_key(&interaction) {
                        return Err(format!("{interaction} was parked twice (entry {seq})"));
                    }
                    let ttl = self.runs.get(&run).copied().ok_or_else(|| {
                        format!("{interaction} was parked by {run}, which no park started")
                    })?;
                    let deadline = now + Span::seconds(i64::try_from(ttl).unwrap_or(0));
                    self.tally.asks += 1;
                    self.asks.insert(
                        interaction,
                        Known {
                            subject,
                            deadline,
                            resolved: None,
                        },
                    );
                }
                Event::AskResolved {
                    interaction, how, ..
                } => {
                    let known = self
                        .asks
                        .get_mut(&interaction)
                        .ok_or_else(|| format!("{interaction} was resolved, but never parked"))?;
                    if let Some(before) = known.resolved {
                        return Err(format!(
                            "{interaction} was resolved twice: {before:?}, then {how:?} (entry {seq})"
                        ));
                    }
                    known.resolved = Some(how);
                    match how {
                        Resolution::Resumed => self.tally.resumed += 1,
                        Resolution::Cancelled => self.tally.cancelled += 1,
                        Resolution::Expired => self.tally.expired += 1,
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Every subject served lists exactly the model's open asks, none past its
    /// deadline; no awake node serves a subject another serves; the audit is clean.
    async fn check(&mut self) -> Result<(), String> {
        self.read_log()?;
        let now = self.clock.now();
        // What each awake node's caller ceiling should count: its subjects' asks open
        // or answered and buffered in their group, and their waiting outcomes (every
        // entry listed: the workload asks no user).
        let mut counted = vec![0; self.up.len()];
        for subject in self.subjects.clone() {
            let slot = Runtime::slot_of(&subject);
            let serving: Vec<usize> = self
                .awake()
                .into_iter()
                .filter(|&i| self.up[i].rt.serves(slot))
                .collect();
            let &[i] = serving.as_slice() else {
                if serving.len() > 1 {
                    return Err(format!("{subject} is served by {} nodes", serving.len()));
                }
                continue;
            };
            let entries = self.up[i]
                .rt
                .list(&subject)
                .await
                .map_err(|e| format!("listing {subject} failed: {e}"))?;
            counted[i] += entries.len();
            let listed: BTreeSet<&str> = entries
                .iter()
                .filter(|e| e.status == EntryStatus::Asking)
                .map(|e| e.id.as_str())
                .collect();
            let open: BTreeSet<&str> = self
                .asks
                .iter()
                .filter(|(_, a)| a.subject == subject && a.resolved.is_none())
                .map(|(id, _)| id.as_str())
                .collect();
            if listed != open {
                return Err(format!(
                    "{subject} lists {listed:?} through {}, the model has {open:?} open",
                    self.up[i].node.name()
                ));
            }
            if let Some((id, ask)) = self
                .asks
                .iter()
                .find(|(_, a)| a.subject == subject && a.resolved.is_none() && a.deadline <= now)
            {
                return Err(format!(
                    "{id} of {subject} is past its deadline ({}), but open at {now} on {}",
                    ask.deadline,
                    self.up[i].node.name()
                ));
            }
        }
        for i in self.awake() {
            let stats = self.up[i].rt.stats().await;
            if stats.caller_open != counted[i] {
                return Err(format!(
                    "{}'s caller ceiling counts {}, its subjects list {}",
                    self.up[i].node.name(),
                    stats.caller_open,
                    counted[i]
                ));
            }
        }
        Ok(())
    }

    /// Thaws every node and lets time pass until every subject is served and every
    /// deadline has passed: then every ask is resolved, exactly once.
    async fn final_account(&mut self) -> Result<(), String> {
        for i in 0..self.up.len() {
            if self.up[i].frozen {
                self.thaw(i).await.1?;
            }
        }
        let last = self
            .asks
            .values()
            .filter(|a| a.resolved.is_none())
            .map(|a| a.deadline)
            .max();
        let mut passed = 0;
        loop {
            let served = self.subjects.iter().all(|s| self.owner(s).is_some());
            let due = last.is_some_and(|last| last >= self.clock.now());
            if served && !due {
                break;
            }
            passed += 1;
            if passed > 1000 {
                return Err("the subjects were not all served again".to_string());
            }
            self.pass(1).await?;
        }
        self.check().await?;
        if let Some((id, _)) = self.asks.iter().find(|(_, a)| a.resolved.is_none()) {
            return Err(format!("{id} is still open after every deadline passed"));
        }
        let t = self.tally;
        if t.asks != t.resumed + t.cancelled + t.expired {
            return Err(format!(
                "asks {} != resumed {} + cancelled {} + expired {}",
                t.asks, t.resumed, t.cancelled, t.expired
            ));
        }
        Ok(())
    }
}

/// Whether `got` is a refusal as `not_owner` that wrote nothing (`unchanged`).
fn refused_as_not_owner(got: &Result<Visit, VisitError>, unchanged: bool) -> Result<(), String> {
    if !matches!(
        got,
        Err(VisitError::Store(crate::StoreFault::NotOwner { .. }))
    ) {
        return Err(format!("expected a refusal as not_owner, got {got:?}"));
    }
    if !unchanged {
        return Err("the refused visit wrote to the log".to_string());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks can fail: on an engine that commits a write without checking its
    /// slots' owner and epoch, a node thawed after its slot was taken writes over the
    /// slot's new owner, and the run fails naming it and the command that replays it.
    #[tokio::test]
    async fn an_engine_without_fencing_is_caught() {
        let mut config = RandomConfig::new(2, 300, 4);
        config.nodes = 3;
        let sound = run(&config, true).await.unwrap();
        assert_eq!(sound.failure, None, "{}", sound.trace.join("\n"));
        let report = run(&config, false).await.unwrap();
        let failure = report
            .failure
            .expect("a write past the lease went unnoticed");
        assert!(
            failure.contains("whose slot it lost while frozen"),
            "{failure}"
        );
        assert!(
            failure.contains(
                "replay: parkway sim --random --seed 2 --ops 300 --subjects 4 --nodes 3 --trace"
            ),
            "{failure}"
        );
    }
}
