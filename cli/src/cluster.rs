//! A cluster under faults: the engine behind `parkway cluster`.
//!
//! [`run`] starts `nodes` `parkway serve` processes on one PostgreSQL database (a schema
//! that holds no store yet), each reaching it through a TCP proxy of its own
//! (`proxy.rs`), and drives them over HTTP with a client that keeps a ledger of every
//! request and its answer (`ledger.rs`): runs started on a few dozen subjects, each asking
//! its caller once, and resumes of their asks, each with a payload of its own, sent
//! through any node (a node that does not own the subject's slot sends the request on).
//! Meanwhile a seeded schedule, one fault at a time (`faults.rs`):
//!
//! - kills a node with `SIGKILL` and starts it again after a while;
//! - freezes one with `SIGSTOP` past its lease, then thaws it;
//! - cuts one off from the database (its proxy passes nothing, both ways) past its lease,
//!   then heals the cut;
//! - restarts the database, with the command it is given.
//!
//! Then it heals everything, waits until every slot is owned again, resumes every ask
//! still open, and checks:
//!
//! - every ask whose start was acknowledged was resolved exactly once: its run's final
//!   record returns the payload of the resume acknowledged for it (or, where none was,
//!   of a resume whose answer was lost), and no ask was resumed twice with both
//!   acknowledged (the client resumes some again on purpose);
//! - no subject holds an entry no acknowledged start names, past its starts whose
//!   answer was lost;
//! - the write audit (`parkway_audit`, the nodes run with `--audit-writes`): in the order
//!   the group commits took their locks, no slot's epoch ever went back, and each term
//!   of a slot was written by one process of one node; so no slot was written by two
//!   owners at once;
//! - no node ended of itself, and each stops cleanly at the end.
//!
//! `docs/postgres.md`, "The cluster harness", says what each check means.

mod client;
mod faults;
pub(crate) mod ledger;
mod nodes;
mod proxy;
mod watch;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::task::JoinSet;

pub use faults::Fault;
pub use ledger::{Account, Audit};
pub use watch::Streamed;

use client::Client;
use ledger::{Answer, Attempt, Final, Ledger, Listed, Written};
use nodes::{Node, Setup};
use proxy::Proxy;

/// What `parkway cluster` is told.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The database: a schema that holds no store yet, reached over TCP.
    pub postgres: String,
    /// How many nodes.
    pub nodes: usize,
    /// How long the client drives them while faults happen.
    pub drive_for: Duration,
    /// The seed of the workload and of the faults' schedule.
    pub seed: u64,
    /// The nodes' lease.
    pub lease: Duration,
    /// How many subjects.
    pub subjects: usize,
    /// How many concurrent client tasks.
    pub tasks: usize,
    /// The faults to draw from.
    pub faults: Vec<Fault>,
    /// A shell command that restarts the database (for [`Fault::RestartDatabase`]).
    pub restart_database: Option<String>,
    /// The `parkway` program to run the nodes with.
    pub program: PathBuf,
    /// Where the nodes' logs and the targets file go.
    pub dir: PathBuf,
}

/// What a cluster run saw.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    /// The seed.
    pub seed: u64,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// Requests by kind and how they ended.
    pub requests: BTreeMap<String, u64>,
    /// The first answer of each way a request was not acknowledged, in full.
    pub first_answers: BTreeMap<String, String>,
    /// The faults, in order, each with its node and when it began (seconds from the
    /// start of the load).
    pub faults: Vec<String>,
    /// The account of the asks.
    pub account: Account,
    /// The write audit.
    pub audit: Audit,
    /// What the watcher read of the event stream.
    pub stream: Streamed,
    /// What else was wrong: a node that ended of itself, one that did not stop, a
    /// cluster that did not settle.
    pub problems: Vec<String>,
}

impl ClusterReport {
    /// Whether nothing was found wrong.
    pub fn clean(&self) -> bool {
        self.account.violations.is_empty()
            && self.audit.violations.is_empty()
            && self.stream.violations.is_empty()
            && self.problems.is_empty()
    }
}

impl std::fmt::Display for ClusterReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let a = &self.account;
        writeln!(
            f,
            "parkway cluster: {:.1}s, {} faults (seed {})",
            self.seconds,
            self.faults.len(),
            self.seed
        )?;
        for fault in &self.faults {
            writeln!(f, "  {fault}")?;
        }
        writeln!(
            f,
            "  requests: {}",
            self.requests
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        for (kind, first) in &self.first_answers {
            let first: String = first.chars().take(200).collect();
            writeln!(f, "    first {kind}: {first}")?;
        }
        writeln!(
            f,
            "  asks acknowledged: {} (resolved by an acknowledged resume {}, by one whose answer was lost {}, open at the end and resolved then {}); entries from starts whose answer was lost: {}; outcomes delivered and left waiting as well: {}",
            a.asks,
            a.resolved_acked,
            a.resolved_unknown,
            a.open_at_end,
            a.unnamed_entries,
            a.delivered_and_left_waiting
        )?;
        writeln!(
            f,
            "  audit: {} slot writes, {} terms, {} slots moved",
            self.audit.rows, self.audit.terms, self.audit.slots_moved
        )?;
        writeln!(
            f,
            "  event stream: {} frames up to {}, read through every fault; went to another node: {}",
            self.stream.frames,
            self.stream.last,
            self.stream
                .reconnections
                .iter()
                .map(|(why, n)| format!("{why} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        let wrong: Vec<&String> = a
            .violations
            .iter()
            .chain(&self.audit.violations)
            .chain(&self.stream.violations)
            .chain(&self.problems)
            .collect();
        if wrong.is_empty() {
            write!(
                f,
                "  ok: every ask resolved exactly once, no slot written by two owners, the stream whole"
            )
        } else {
            writeln!(f, "  WRONG ({}):", wrong.len())?;
            for w in wrong.iter().take(30) {
                writeln!(f, "    {w}")?;
            }
            Ok(())
        }
    }
}

/// How long the cluster may take to own every slot again once healed.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the resumes and reads after the faults may take in all.
const FINISH_TIMEOUT: Duration = Duration::from_secs(180);

/// How many asks a subject holds open at most.
const OPEN_PER_SUBJECT: usize = 4;

/// Run the cluster, the load and the faults, and check what is left.
pub async fn run(config: &ClusterConfig) -> Result<ClusterReport, String> {
    if config.nodes == 0 || config.subjects == 0 || config.tasks == 0 {
        return Err("--nodes, --subjects and --tasks must be at least 1".into());
    }
    if config.faults.contains(&Fault::RestartDatabase) && config.restart_database.is_none() {
        return Err("the fault restart-database needs --restart-database COMMAND".into());
    }
    let began = Instant::now();
    std::fs::create_dir_all(&config.dir).map_err(|e| format!("{}: {e}", config.dir.display()))?;
    let targets = config.dir.join("targets.json");
    std::fs::write(&targets, client::targets().to_string())
        .map_err(|e| format!("{}: {e}", targets.display()))?;
    let database = Database::new(&config.postgres)?;
    database.empty().await?;
    let setup = Setup {
        program: config.program.clone(),
        targets,
        lease: config.lease,
        dir: config.dir.clone(),
    };
    let mut nodes = Vec::with_capacity(config.nodes);
    for i in 1..=config.nodes {
        let proxy = Proxy::start(database.upstream.clone())
            .await
            .map_err(|e| format!("a proxy to the database: {e}"))?;
        let url = database.through(proxy.address.port());
        nodes.push(Node::new(format!("n{i}"), free_port()?, proxy, url));
    }
    let client = Client::new(nodes.iter().map(|n| n.url.clone()).collect())?;
    for node in &mut nodes {
        node.start(&setup)?;
    }
    for node in &mut nodes {
        node.ready(client.http()).await?;
    }
    let nodes = Arc::new(tokio::sync::Mutex::new(nodes));
    let mut problems = Vec::new();
    if let Err(e) = database.settled(config.nodes, config.lease).await {
        problems.push(format!("before the load: {e}"));
    }

    // The load and the faults, side by side, and a client following the stream.
    let watcher = watch::Watcher::start(client.nodes.clone())?;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let until = tokio::time::Instant::now() + config.drive_for;
    let mut load = JoinSet::new();
    for task in 0..config.tasks {
        let (client, ledger, config) = (client.clone(), Arc::clone(&ledger), config.clone());
        load.spawn(drive(task, client, ledger, config, until));
    }
    let schedule = faults::Schedule {
        faults: config.faults.clone(),
        seed: config.seed,
        lease: config.lease,
        restart_database: config.restart_database.clone(),
        setup: setup.clone(),
    };
    let done = schedule
        .run(Arc::clone(&nodes), client.clone(), until)
        .await;
    while load.join_next().await.is_some() {}
    problems.extend(done.problems);

    // Healed, settled, every open ask resumed, then read.
    {
        let mut nodes = nodes.lock().await;
        problems.extend(faults::heal(&mut nodes, &setup, &client).await);
    }
    if let Err(e) = database.settled(config.nodes, config.lease).await {
        problems.push(format!("after the faults: {e}"));
    }
    let mut ledger = std::mem::take(&mut *ledger.lock().unwrap_or_else(|p| p.into_inner()));
    let (listed, finals) = finish(&client, &mut ledger, config.subjects, &mut problems).await;
    let account = ledger::account(&ledger, &listed, &finals);
    let audit = ledger::audit(&database.audit().await?);
    let mut stream = watcher.finish(database.log_last().await?).await;
    stream.check(&ledger);

    let mut nodes = nodes.lock().await;
    for node in nodes.iter_mut() {
        if let Some(status) = node.exited() {
            problems.push(format!("{} ended of itself: {status}", node.name));
        } else if !node.stop().await {
            problems.push(format!(
                "{} did not stop within 30s of SIGTERM (see {})",
                node.name,
                node.log(&config.dir).display()
            ));
        }
    }
    Ok(ClusterReport {
        seed: config.seed,
        seconds: began.elapsed().as_secs_f64(),
        requests: ledger.counts,
        first_answers: ledger.first,
        faults: done.happened,
        account,
        audit,
        stream,
        problems,
    })
}

/// A free loopback port, for a node to listen on (each of its processes the same).
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// One client task: its own subjects (those whose number is its own modulo the tasks),
/// one request at a time, until `until`.
async fn drive(
    task: usize,
    client: Client,
    ledger: Arc<Mutex<Ledger>>,
    config: ClusterConfig,
    until: tokio::time::Instant,
) {
    let mut rng = SmallRng::seed_from_u64(config.seed ^ (task as u64 + 1).wrapping_mul(0x9E37));
    let mine: Vec<usize> = (task..config.subjects).step_by(config.tasks).collect();
    if mine.is_empty() {
        return;
    }
    // Per subject: asks not yet acknowledged resolved, and asks that were.
    let mut open: HashMap<usize, Vec<(String, String)>> = HashMap::new();
    let mut resolved: HashMap<usize, Vec<String>> = HashMap::new();
    let mut sent = 0u64;
    while tokio::time::Instant::now() < until {
        let subject = mine[rng.random_range(0..mine.len())];
        let node = rng.random_range(0..client.nodes.len());
        let asks = open.entry(subject).or_default();
        if asks.is_empty() || (asks.len() < OPEN_PER_SUBJECT && rng.random_bool(0.5)) {
            let started = client.start(node, subject).await;
            let mut ledger = ledger.lock().unwrap_or_else(|p| p.into_inner());
            ledger.count("start", &started.answer);
            match (&started.answer, started.parked) {
                (Answer::Acked, Some((run, ask))) => {
                    ledger.asks.insert(
                        ask.clone(),
                        ledger::Ask {
                            subject,
                            run: run.clone(),
                            attempts: Vec::new(),
                        },
                    );
                    asks.push((ask, run));
                }
                (Answer::Acked, None) => ledger.violations.push(format!(
                    "a start on {} was acknowledged without a parked ask",
                    client::subject(subject)
                )),
                (Answer::Unknown(_), _) => {
                    *ledger.unknown_starts.entry(subject).or_default() += 1;
                }
                (Answer::Refused(_), _) => {}
            }
            continue;
        }
        // Now and then, an ask acknowledged resolved again: it must be refused.
        let again = resolved
            .get(&subject)
            .filter(|r| !r.is_empty() && rng.random_bool(0.05));
        let (ask, index) = match again {
            Some(done) => (done[rng.random_range(0..done.len())].clone(), None),
            None => {
                let i = rng.random_range(0..asks.len());
                (asks[i].0.clone(), Some(i))
            }
        };
        sent += 1;
        let payload = format!("p-{task}-{sent}");
        let answer = client.resume(node, subject, &ask, &payload).await;
        // Refused as unknown, or as an outcome already waiting: resolved by an earlier
        // resume whose answer was lost.
        let refused_unknown = matches!(&answer, Answer::Refused(why)
            if why.starts_with("404") || why.contains("(status: finished)") || why.contains("(status: failed)"));
        let acked = answer == Answer::Acked;
        ledger
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .resumed(&ask, Attempt { payload, answer });
        if let Some(i) = index
            && (acked || refused_unknown)
        {
            // Resolved: by this resume, or (refused as unknown) by an earlier one whose
            // answer was lost.
            asks.swap_remove(i);
            if acked {
                resolved.entry(subject).or_default().push(ask);
            }
        }
    }
}

/// Resume every ask not acknowledged resolved that is still open, then read every run's
/// final record and every subject's parked set.
async fn finish(
    client: &Client,
    ledger: &mut Ledger,
    subjects: usize,
    problems: &mut Vec<String>,
) -> (
    BTreeMap<usize, HashMap<String, Listed>>,
    HashMap<String, Final>,
) {
    let deadline = tokio::time::Instant::now() + FINISH_TIMEOUT;
    let nodes = client.nodes.len();
    let pending: Vec<(String, usize, String)> = ledger
        .asks
        .iter()
        .filter(|(_, ask)| ask.acked().is_none())
        .map(|(id, ask)| (id.clone(), ask.subject, ask.run.clone()))
        .collect();
    let attempts: Vec<(String, Vec<Attempt>)> = futures_util::stream::iter(pending)
        .enumerate()
        .map(|(k, (id, subject, run))| async move {
            let mut attempts = Vec::new();
            let mut tries = 0usize;
            while tokio::time::Instant::now() < deadline {
                tries += 1;
                let node = (k + tries) % nodes;
                match client.record(node, &run, Duration::from_secs(2)).await {
                    Ok(record) if record.status == parkway::RunStatus::Parked => {
                        let asking = record
                            .asks
                            .iter()
                            .flatten()
                            .any(|e| e.id == id && e.status == parkway::EntryStatus::Asking);
                        if !asking {
                            // Its run parked on another ask: not this workload's.
                            tokio::time::sleep(Duration::from_millis(200)).await;
                            continue;
                        }
                        let payload = format!("{}{k}-{tries}", ledger::END);
                        let answer = client.resume(node, subject, &id, &payload).await;
                        let acked = answer == Answer::Acked;
                        attempts.push(Attempt { payload, answer });
                        if acked {
                            break;
                        }
                    }
                    Ok(record) if record.status == parkway::RunStatus::Running => {}
                    Ok(_) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
            (id, attempts)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for (id, tried) in attempts {
        for attempt in tried {
            ledger.resumed(&id, attempt);
        }
    }

    let runs: Vec<String> = ledger.asks.values().map(|a| a.run.clone()).collect();
    let finals: HashMap<String, Final> = futures_util::stream::iter(runs)
        .enumerate()
        .map(|(k, run)| async move {
            let mut tries = 0usize;
            loop {
                tries += 1;
                match client
                    .record((k + tries) % nodes, &run, Duration::from_secs(2))
                    .await
                {
                    Ok(record) if record.status != parkway::RunStatus::Running => {
                        let fin = Final {
                            status: record.status.as_str().to_owned(),
                            result: record.result,
                        };
                        return Some((run, fin));
                    }
                    _ if tokio::time::Instant::now() >= deadline => return None,
                    _ => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            }
        })
        .buffer_unordered(16)
        .filter_map(|found| async move { found })
        .collect()
        .await;

    let mut listed = BTreeMap::new();
    for subject in 0..subjects {
        let mut tries = 0usize;
        loop {
            tries += 1;
            match client.list((subject + tries) % nodes, subject).await {
                Ok(entries) => {
                    let set = entries
                        .into_iter()
                        .map(|e| {
                            let status = e.status.as_str().to_owned();
                            (e.id, Listed { status })
                        })
                        .collect();
                    listed.insert(subject, set);
                    break;
                }
                Err(why) if tokio::time::Instant::now() >= deadline => {
                    problems.push(format!(
                        "{}'s parked set could not be read: {why:?}",
                        client::subject(subject)
                    ));
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }
    (listed, finals)
}

/// The database, as the harness reads it and as the nodes reach it.
struct Database {
    /// Its URL.
    url: String,
    /// Its `host:port`.
    upstream: String,
    /// The URL before and after its `host:port`.
    before: String,
    after: String,
}

impl Database {
    /// Read `url`'s host and port (a TCP address: the nodes reach it through proxies).
    fn new(url: &str) -> Result<Database, String> {
        let refused = || {
            format!(
                "the database URL must be postgres://[user@]host:port/…, with a TCP host and port: {}",
                url.split('@').next_back().unwrap_or("")
            )
        };
        let scheme = url.find("://").ok_or_else(refused)? + 3;
        let rest = &url[scheme..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        let host_start = authority.rfind('@').map_or(0, |at| at + 1);
        let host = &authority[host_start..];
        let (name, port) = host.rsplit_once(':').ok_or_else(refused)?;
        if name.is_empty() || name.starts_with(['/', '%']) || port.parse::<u16>().is_err() {
            return Err(refused());
        }
        Ok(Database {
            url: url.to_owned(),
            upstream: host.to_owned(),
            before: url[..scheme + host_start].to_owned(),
            after: rest[authority_end..].to_owned(),
        })
    }

    /// The URL through a proxy on loopback port `port`.
    fn through(&self, port: u16) -> String {
        format!("{}127.0.0.1:{port}{}", self.before, self.after)
    }

    /// A connection of the harness's own.
    async fn connect(&self) -> Result<tokio_postgres::Client, String> {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .map_err(|e| format!("the database: {e}"))?;
        tokio::spawn(connection);
        Ok(client)
    }

    /// Refuse a database that holds a store already: its audit would not be this run's.
    async fn empty(&self) -> Result<(), String> {
        let client = self.connect().await?;
        let found = client
            .query_one("SELECT to_regclass('parkway_kv') IS NOT NULL", &[])
            .await
            .map_err(|e| format!("the database: {e}"))?;
        if found.get::<_, bool>(0) {
            return Err(
                "the database holds a store already: give parkway cluster a schema of its own (options=-c search_path=NAME)".into(),
            );
        }
        Ok(())
    }

    /// Wait until `nodes` nodes own every slot under a lease not ended, then two leases
    /// more (each node reads where the others' slots are once a round).
    async fn settled(&self, nodes: usize, lease: Duration) -> Result<(), String> {
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        let mut last = String::from("not read");
        while tokio::time::Instant::now() < deadline {
            let read = async {
                let client = self.connect().await?;
                let row = client
                    .query_one(
                        "SELECT count(*) FILTER (WHERE owner IS NULL OR lease_end <= now()),
                                count(DISTINCT owner)
                         FROM parkway_slots",
                        &[],
                    )
                    .await
                    .map_err(|e| format!("the database: {e}"))?;
                Ok::<_, String>((row.get::<_, i64>(0), row.get::<_, i64>(1)))
            }
            .await;
            match read {
                Ok((0, owners)) if owners == nodes as i64 => {
                    tokio::time::sleep(lease * 2).await;
                    return Ok(());
                }
                Ok((free, owners)) => {
                    last = format!("{free} slots without a live lease, {owners} owners");
                }
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err(format!(
            "the {nodes} nodes did not share every slot within {}s ({last})",
            SETTLE_TIMEOUT.as_secs()
        ))
    }

    /// The number of the event log's last entry.
    async fn log_last(&self) -> Result<u64, String> {
        let client = self.connect().await?;
        let row = client
            .query_one("SELECT next - 1 FROM parkway_log_head", &[])
            .await
            .map_err(|e| format!("reading the log's end: {e}"))?;
        u64::try_from(row.get::<_, i64>(0)).map_err(|e| format!("the log's end: {e}"))
    }

    /// The audit's applied rows.
    async fn audit(&self) -> Result<Vec<Written>, String> {
        let client = self.connect().await?;
        let rows = client
            .query(
                "SELECT seq, slot, epoch, node, node_epoch FROM parkway_audit WHERE applied",
                &[],
            )
            .await
            .map_err(|e| format!("reading the write audit: {e}"))?;
        Ok(rows
            .iter()
            .map(|r| Written {
                seq: r.get(0),
                slot: r.get(1),
                epoch: r.get(2),
                node: r.get(3),
                node_epoch: r.get(4),
            })
            .collect())
    }
}
