//! [`Runtime`] and its [`Builder`]: the public face of the runtime.
//!
//! A runtime is cheap to clone (a handle); every clone drives the same subjects.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ractor::Actor;
use serde_json::Value;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::clock::{Clock, SystemClock};
use crate::depth;
use crate::entry::Entry;
use crate::error::{
    BuildError, CancelError, Problems, RecordError, ResumeError, RunError, StartError, TakeError,
};
use crate::event::Event;
use crate::ids::Ids;
use crate::record::{Resumed, RunRecord};
use crate::run::Ctx;
use crate::run::port::{Parent, StartSpec, checked_payload};
use crate::services::Services;
use crate::settings::Settings;
use crate::subject::{Hub, Op};
use crate::supervisor::arming::{self, Wake};
use crate::supervisor::ticker::{self, RoundRequest};
use crate::supervisor::{self, Supervisor};

/// What to start: a target on a subject, with kwargs, extras and an identity.
///
/// ```
/// use parkway::Start;
/// let start = Start::new("thread-7", "triage").kwargs(serde_json::json!({"msg": "hi"}));
/// # let _ = start;
/// ```
#[derive(Debug, Clone)]
pub struct Start {
    subject: String,
    target: String,
    kwargs: Value,
    extras: Value,
    identity: String,
    idempotency_key: Option<String>,
}

impl Start {
    /// Start `target` on `subject` with empty kwargs and extras, as identity `system`.
    pub fn new(subject: impl Into<String>, target: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            target: target.into(),
            kwargs: Value::Object(Default::default()),
            extras: Value::Object(Default::default()),
            identity: "system".to_owned(),
            idempotency_key: None,
        }
    }

    /// Start under an idempotency key ([`Runtime::run_tool`] and [`Runtime::submit`]):
    /// within the retention horizon, the same request under the same key starts no
    /// second run but answers with the first one; another request under it is refused.
    /// A key is its subject's: the same key on another subject is another key.
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// The kwargs the target runs on (a JSON object).
    pub fn kwargs(mut self, kwargs: Value) -> Self {
        self.kwargs = kwargs;
        self
    }

    /// The extras handed beside the kwargs; each key must be declared by the target.
    pub fn extras(mut self, extras: Value) -> Self {
        self.extras = extras;
        self
    }

    /// The principal the run runs as.
    pub fn identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    fn spec(self) -> StartSpec {
        StartSpec {
            subject: Arc::from(self.subject),
            target: self.target,
            kwargs: self.kwargs,
            extras: self.extras,
            identity: Arc::from(self.identity),
            parent: Parent::Top,
            key: None,
        }
    }

    /// The request's fingerprint under an idempotency key.
    pub(crate) fn fingerprint(&self) -> u64 {
        crate::keys::fingerprint(&[
            self.subject.as_bytes(),
            self.target.as_bytes(),
            self.identity.as_bytes(),
            self.kwargs.to_string().as_bytes(),
            self.extras.to_string().as_bytes(),
        ])
    }
}

/// What an idempotency key found.
enum Keyed {
    /// No key, or its first use: start the run (under the key, if any).
    Start(Box<StartSpec>),
    /// The run the same request started before.
    Started(Arc<str>),
}

/// The durable store's figures since it was opened ([`Runtime::store_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StoreStats {
    /// Syncs made: groups of changes made durable at once.
    pub syncs: u64,
    /// Changes (batches) made durable.
    pub batches: u64,
    /// Bytes of keys and values in them.
    pub bytes: u64,
    /// Keys written (puts and deletes) in them, the event log's chunks among them.
    pub keys: u64,
    /// The most changes one sync made durable.
    pub largest_group: u64,
    /// For each sync, the time from the start of the write of the first group it made
    /// durable to its acknowledgement, summed: divided by `syncs`, the mean commit
    /// latency. On disk a group is written while the one before it syncs, so the sum can
    /// exceed the time elapsed.
    pub commit_time: Duration,
}

/// What opening the data directory found in the store's journals and did about them
/// ([`Runtime::store_recovery`], `docs/durability.md`, "Damaged journals").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct StoreRecovery {
    /// Whole batches the journals held for the engine to replay (those its tables
    /// already held among them).
    pub journal_batches: u64,
    /// Bytes of a torn last batch, never acknowledged, dropped (a crash inside a write).
    pub torn_bytes: u64,
    /// Damaged journals cut at the damage, as [`Builder::truncate_damaged_journal`]
    /// allowed (0 or 1).
    pub cuts: u64,
    /// Whole batches found after such a cut, and dropped with it.
    pub dropped_batches: u64,
    /// Bytes dropped by such a cut, kept aside in the data directory's `dropped/`.
    pub dropped_bytes: u64,
    /// Groups the change log held after the last one the engine held, written into
    /// the engine again (`docs/durability.md`, "The change log").
    pub log_groups: u64,
}

/// Sizes of a runtime's moving parts, for tests, tools and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Caller asks (`asking` and `running`) plus waiting outcomes.
    pub caller_open: usize,
    /// Open user asks.
    pub user_open: usize,
    /// Subjects with an actor.
    pub live_subjects: usize,
    /// Subjects kept as data, without an actor.
    pub passive_subjects: usize,
    /// The bytes of packed text the passive subjects hold.
    pub passive_bytes: usize,
    /// Runs that have not ended.
    pub runs: usize,
    /// Runs in the supervisor's run tree: those that are part of a chain (they have a
    /// live caller or called a run). A run on its own is not linked.
    pub linked_runs: usize,
    /// Armed timers.
    pub timers: usize,
    /// Run records kept: every live run's, and those of runs ended within the
    /// retention horizon.
    pub records: usize,
    /// Passivations so far.
    pub passivations: u64,
    /// Messages that raced a passivation, were refused by the draining actor, and were
    /// delivered again to the next one.
    pub redelivered: u64,
}

/// One builder call's change to the settings, applied over the environment's.
type SettingsEdit = Box<dyn FnOnce(&mut Settings) + Send>;

/// How many events a subscriber may fall behind by default.
const DEFAULT_EVENT_CAPACITY: usize = 65_536;

/// Builds a [`Runtime`]: settings from the environment, then the builder's own.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use parkway::{Ids, ManualClock, Runtime};
/// let runtime = Runtime::builder()
///     .without_env()
///     .clock(ManualClock::default())
///     .ids(Ids::sequential())
///     .max_concurrent_caller(100)
///     .build()
///     .await
///     .unwrap();
/// assert_eq!(runtime.settings().max_concurrent_caller, 100);
/// # }
/// ```
#[must_use]
pub struct Builder {
    env: bool,
    settings: Option<Settings>,
    edits: Vec<SettingsEdit>,
    clock: Arc<dyn Clock>,
    ids: Option<Ids>,
    event_capacity: usize,
    data_dir: Option<std::path::PathBuf>,
    /// The PostgreSQL database to keep everything in, instead of a data directory.
    postgres: Option<String>,
    /// The node this process is among those sharing the database, if named.
    node: Option<String>,
    /// How long the node's leases on its slots last, if not the default.
    lease: Option<std::time::Duration>,
    /// Where the other nodes send requests for this node's subjects.
    node_address: Option<String>,
    /// Whether each group commit is audited in the database.
    write_audit: bool,
    /// How many entries the durable event log keeps, if not its default.
    log_entries: Option<u64>,
    /// Cut a damaged journal at the damage rather than refuse the data directory.
    truncate_damaged_journal: bool,
    /// A store made by the caller (a simulation's memory store), used instead of a
    /// data directory.
    store: Option<crate::store::Store>,
    /// Targets registered before the build, so runs read back from a data directory
    /// find them.
    targets: crate::target::Targets,
    /// Tools offered before the build, each with its target.
    tools: Vec<(String, crate::ToolSpec)>,
    /// Where the durable path's stages are told, if they are measured.
    stages: Option<Arc<dyn crate::StageSink>>,
}

impl Default for Builder {
    fn default() -> Self {
        Self {
            env: true,
            settings: None,
            edits: Vec::new(),
            clock: Arc::new(SystemClock),
            ids: None,
            data_dir: None,
            postgres: None,
            node: None,
            lease: None,
            node_address: None,
            write_audit: false,
            log_entries: None,
            truncate_damaged_journal: false,
            store: None,
            targets: Default::default(),
            tools: Vec::new(),
            event_capacity: DEFAULT_EVENT_CAPACITY,
            stages: None,
        }
    }
}

impl Builder {
    /// Do not read settings from the environment.
    pub fn without_env(mut self) -> Self {
        self.env = false;
        self
    }

    /// Start from these settings instead of the defaults and the environment.
    pub fn settings(mut self, settings: Settings) -> Self {
        self.settings = Some(settings);
        self
    }

    fn edit(mut self, f: impl FnOnce(&mut Settings) + Send + 'static) -> Self {
        self.edits.push(Box::new(f));
        self
    }

    /// `INTERACTIONS_MAX_CONCURRENT_CALLER`.
    pub fn max_concurrent_caller(self, n: usize) -> Self {
        self.edit(move |s| s.max_concurrent_caller = n)
    }

    /// `INTERACTIONS_MAX_CONCURRENT`.
    pub fn max_concurrent(self, n: usize) -> Self {
        self.edit(move |s| s.max_concurrent = n)
    }

    /// `INTERACTIONS_WAITING_RETENTION`.
    pub fn waiting_retention(self, d: Duration) -> Self {
        self.edit(move |s| s.waiting_retention = d)
    }

    /// Tell `sink` how long each stage of each durable change takes, and what the
    /// store's engine was doing at each stall (`parkway load --stages` keeps histograms
    /// of them). Without it the durable path measures nothing.
    #[doc(hidden)]
    pub fn measure_stages(mut self, sink: Arc<dyn crate::StageSink>) -> Self {
        self.stages = Some(sink);
        self
    }

    /// How long an idle subject keeps its actor; zero passivates at once.
    pub fn passivate_after(self, d: Duration) -> Self {
        self.edit(move |s| s.passivate_after = d)
    }

    /// How many subjects may hold an actor (default 10000; `usize::MAX` for no bound):
    /// past it, the subject idle longest passivates at once, without waiting for
    /// [`passivate_after`](Self::passivate_after), and its next message unpacks it
    /// again. A bound on the memory live subjects hold.
    pub fn max_live_subjects(self, n: usize) -> Self {
        self.edit(move |s| s.max_live_subjects = n)
    }

    /// How long a visit's door expressions may evaluate together (default 100 ms).
    pub fn jq_deadline(self, d: Duration) -> Self {
        self.edit(move |s| s.jq_deadline = d)
    }

    /// The largest door input document, in bytes of JSON (default 1 MiB).
    pub fn max_input_bytes(self, n: usize) -> Self {
        self.edit(move |s| s.max_input_bytes = n)
    }

    /// The one clock (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The one id source (default: random ids from an OS-drawn seed).
    pub fn ids(mut self, ids: Ids) -> Self {
        self.ids = Some(ids);
        self
    }

    /// How many events a subscriber of [`Runtime::events`] may fall behind before it loses
    /// the oldest (default 65536; at least 1).
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n.max(1);
        self
    }

    /// Register a target before the runtime is built, as [`Runtime::register`] does
    /// after: with a data directory, the runs read back when it is built (those whose
    /// activation was executing are replayed at once) find their targets registered.
    pub fn register<F, Fut>(self, name: &str, extras: &[&str], f: F) -> Self
    where
        F: Fn(Ctx, Value, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, RunError>> + Send + 'static,
    {
        self.targets.register(name, extras, f);
        self
    }

    /// Offer the target `target` as a tool (`docs/mcp.md`): a protocol face lists it and
    /// calls it as the run-tool door ([`Runtime::call_tool`]). The spec is checked when
    /// the runtime is built, and a refused one fails the build
    /// ([`BuildError::Tool`]), naming every problem.
    pub fn tool(mut self, target: &str, spec: crate::ToolSpec) -> Self {
        self.tools.push((target.to_owned(), spec));
        self
    }

    /// Keep everything a restart must find in `dir` (`docs/durability.md`): the runtime
    /// reads back what the directory holds when it is built, and acknowledges nothing
    /// before it is durable there. Without it (and without `PARKWAY_DATA_DIR` in the
    /// environment, read unless [`Builder::without_env`]) the runtime runs in memory.
    /// A build of parkway without the `disk` feature refuses a data directory at
    /// [`Builder::build`] ([`BuildError::Store`], naming the feature).
    pub fn data_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Keep everything a restart must find in the PostgreSQL database at `url` instead of
    /// a data directory (`docs/postgres.md`): `postgres://user:password@host:port/db`,
    /// or PostgreSQL's `key=value` form; the tables are made in the connection's schema
    /// (`options=-c search_path=NAME` chooses another). Without it or a data directory,
    /// `PARKWAY_POSTGRES_URL` in the environment is read (unless [`Builder::without_env`]).
    /// Given with a data directory (both in code, or both in the environment),
    /// [`Builder::build`] refuses both. A build of parkway without the
    /// `postgres` feature refuses a database at [`Builder::build`]
    /// ([`BuildError::Store`], naming the feature).
    pub fn postgres(mut self, url: impl Into<String>) -> Self {
        self.postgres = Some(url.into());
        self
    }

    /// Share the PostgreSQL database with other processes as the node named `name`
    /// (1 to 64 letters, digits, `-`, `_` or `.`; `default` unless named, and
    /// `PARKWAY_NODE` in the environment is read unless [`Builder::without_env`]). Each
    /// node owns some of the slots subjects hash to, under leases it renews; a subject of
    /// a slot another node owns is refused as
    /// [`StoreFault::NotOwner`](crate::StoreFault::NotOwner) (`docs/postgres.md`,
    /// "Several nodes"). One process per name: a second is refused while the first
    /// lives. Given without a database, [`Builder::build`] refuses it.
    pub fn node(mut self, name: impl Into<String>) -> Self {
        self.node = Some(name.into());
        self
    }

    /// How long a node's lease on its slots lasts (default 15 s, from 1 s to 1 h): a node
    /// renews its leases every third of it and stops serving a slot whose lease it has
    /// not renewed for two thirds of it, and a node that dies has its slots taken by the
    /// others once their leases end. Given without a database, [`Builder::build`]
    /// refuses it.
    pub fn lease(mut self, lease: std::time::Duration) -> Self {
        self.lease = Some(lease);
        self
    }

    /// Where the other nodes sharing the database send the requests for this node's
    /// subjects (`http://host:port`, at most 200 characters; plain HTTP, so nodes share a network
    /// of their own): `parkway serve` gives the
    /// address it listens on unless told another (`--advertise`). Without it, the
    /// others refuse those requests as not theirs rather than forward them
    /// ([`Runtime::served_at`]). Given without a database, [`Builder::build`] refuses it.
    pub fn node_address(mut self, url: impl Into<String>) -> Self {
        self.node_address = Some(url.into());
        self
    }

    /// Audit every write in the PostgreSQL database: each group commit adds a row per
    /// slot it writes to `parkway_audit` (the slot's epoch it claimed, the node, whether
    /// it was applied), numbered in the order the commits took their locks, so a test can
    /// check that no slot was ever written by two owners at once (`parkway cluster`
    /// does; `docs/postgres.md`, "The write audit"). It costs a row per slot written:
    /// for tests, not production. Given without a database, [`Builder::build`] refuses
    /// it.
    pub fn write_audit(mut self, on: bool) -> Self {
        self.write_audit = on;
        self
    }

    /// How many entries the durable event log keeps (default 100,000; at least 1): each
    /// event logged past it trims the oldest. A stream resumed from an id older than the
    /// log keeps is told so (`docs/durability.md`). No effect without a data directory.
    pub fn event_log_entries(mut self, n: u64) -> Self {
        self.log_entries = Some(n.max(1));
        self
    }

    /// When the data directory's journal is damaged before its end, cut it at the damage
    /// and open, rather than refuse (the default). Opening would otherwise drop what
    /// follows the damage, acknowledged work among it; the refusal names the journal,
    /// the offset and what would be dropped. With this, what is dropped is logged at
    /// `error`, kept aside in the directory's `dropped/`, and counted in
    /// [`Runtime::store_recovery`]. An operator's choice for one open, after reading a
    /// refusal: there is no environment variable for it (`docs/durability.md`).
    pub fn truncate_damaged_journal(mut self, truncate: bool) -> Self {
        self.truncate_damaged_journal = truncate;
        self
    }

    /// Keep everything in `store` (a simulation's memory store, which it can crash), as
    /// a data directory would.
    pub(crate) fn store(mut self, store: crate::store::Store) -> Self {
        self.store = Some(store);
        self
    }

    /// Build the runtime: start the supervisor and the ticker (so it must be called
    /// inside a Tokio runtime). With a data directory, it is opened (refused, naming the path
    /// and the reason, if it is of another format, damaged, or held by another process)
    /// and what it holds is read back first: register the targets on the builder
    /// ([`Builder::register`]) so the runs read back find them.
    pub async fn build(self) -> Result<Runtime, BuildError> {
        // Checked before anything starts, so a refused spec leaves nothing running.
        let tools = crate::tool_spec::Tools::default();
        for (target, spec) in self.tools {
            tools.add(&target, spec)?;
        }
        let mut settings = match (self.settings, self.env) {
            (Some(s), _) => s,
            (None, true) => Settings::from_env().map_err(|e| BuildError::Settings(Problems(e)))?,
            (None, false) => Settings::default(),
        };
        for edit in self.edits {
            edit(&mut settings);
        }
        let zero = settings.check();
        if !zero.is_empty() {
            return Err(BuildError::Settings(Problems(zero)));
        }
        let wake = Arc::new(Wake::default());
        let (arming, armed) = arming::queue(Arc::clone(&wake));
        let (supervisor, supervisor_task) =
            Actor::spawn(None, Supervisor, armed)
                .await
                .map_err(|e| BuildError::Spawn {
                    what: "supervisor",
                    reason: e.to_string(),
                })?;
        // The environment names a store only if the builder names none: a data
        // directory given in code is not refused for a database named in the environment.
        let from_env = self.env && self.data_dir.is_none() && self.postgres.is_none();
        let data_dir = self.data_dir.or_else(|| {
            from_env
                .then(|| std::env::var_os("PARKWAY_DATA_DIR"))
                .flatten()
                .filter(|d| !d.is_empty())
                .map(std::path::PathBuf::from)
        });
        let postgres = self.postgres.or_else(|| {
            from_env
                .then(|| std::env::var("PARKWAY_POSTGRES_URL").ok())
                .flatten()
                .filter(|url| !url.is_empty())
        });
        if postgres.is_none()
            && (self.node.is_some()
                || self.lease.is_some()
                || self.node_address.is_some()
                || self.write_audit)
        {
            return Err(BuildError::Store(
                "a node name, a lease, a node address or a write audit was given without a PostgreSQL database: nodes share a database (`Builder::postgres`)".into(),
            ));
        }
        let store = match (self.store, &data_dir, postgres) {
            (Some(store), _, _) => Some(store),
            (None, None, None) => None,
            (None, Some(dir), Some(_)) => {
                return Err(BuildError::Store(format!(
                    "both a data directory ({}) and a PostgreSQL database were given: the runtime keeps its state in one of them",
                    dir.display()
                )));
            }
            (None, None, Some(url)) => {
                let node = self.node.clone().or_else(|| {
                    self.env
                        .then(|| std::env::var("PARKWAY_NODE").ok())
                        .flatten()
                        .filter(|name| !name.is_empty())
                });
                if node.is_some()
                    && self
                        .ids
                        .as_ref()
                        .is_some_and(|ids| ids.high_water().is_some())
                {
                    return Err(BuildError::Store(
                        "sequential ids are one process's: a runtime that shares its database as a named node makes random ids".into(),
                    ));
                }
                let leasing = crate::store::owners::Leasing {
                    node: node
                        .unwrap_or_else(|| crate::store::owners::Leasing::DEFAULT_NODE.to_string()),
                    lease: self
                        .lease
                        .unwrap_or(crate::store::owners::Leasing::DEFAULT_LEASE),
                    address: self.node_address.clone(),
                    audit: self.write_audit,
                };
                Some(
                    crate::store::Store::open_postgres_as(&url, &leasing)
                        .map_err(|e| BuildError::Store(e.to_string()))?,
                )
            }
            (None, Some(dir), None) => {
                let on_damage = if self.truncate_damaged_journal {
                    crate::store::OnDamage::Truncate
                } else {
                    crate::store::OnDamage::Refuse
                };
                Some(
                    crate::store::Store::open_as(dir, on_damage, Default::default())
                        .map_err(|e| BuildError::Store(e.to_string()))?,
                )
            }
        };
        let mut services = Services::new(
            settings,
            self.clock,
            self.ids.unwrap_or_default(),
            arming,
            self.event_capacity,
        );
        if let (Some(store), Some(n)) = (&store, self.log_entries) {
            store.set_log_capacity(n);
        }
        if let Some(stages) = self.stages {
            if let Some(store) = &store {
                store.set_stages(Arc::clone(&stages));
            }
            services.stages = Some(stages);
        }
        services.store = store;
        services.targets = self.targets;
        crate::tools::register(&services.targets);
        services.tools = tools;
        let hub = Arc::new(Hub::new(services, supervisor));
        if let Some(store) = &hub.services.store {
            store.set_stamp(crate::subject::durable::stamp(Arc::downgrade(&hub)));
        }
        // On a database nodes share, the slots of other nodes start away; the changes
        // of this one's are followed once the open has read what it owns.
        let owners = hub.services.store.as_ref().and_then(|store| store.owners());
        if let Some(owners) = &owners {
            crate::subject::slots::start_away(&hub, &owners.owned).await;
            // Timer keys are the node's: its number in their high bits, their counter
            // kept under its own key (`crate::subject::durable::stamp`).
            hub.services
                .keys
                .raise(u64::from(owners.node) << crate::store::owners::NODE_SHIFT);
            let _ = hub.services.node.set(owners.node);
            // The ceilings are the cluster's: the leases publish this node's counts and
            // read the others'.
            let counted = Arc::downgrade(&hub);
            owners.counted.count_with(Box::new(move || {
                counted.upgrade().map_or((0, 0), |hub| {
                    let (caller, user, _) = hub.services.caps.totals();
                    (caller, user)
                })
            }));
            let _ = hub.services.cluster.set(Arc::clone(&owners.counted));
        }
        // A log every node writes: the logged events shown are read back from it.
        let tail = hub
            .services
            .store
            .as_ref()
            .filter(|store| store.shares_log())
            .map(|_| {
                let shared = hub.services.events.share_log();
                tokio::spawn(crate::event::follow(Arc::downgrade(&hub), shared))
            });
        let (rounds, requests) = mpsc::unbounded_channel();
        let kick = Arc::clone(&wake);
        let ticker = tokio::spawn(ticker::run(Arc::downgrade(&hub), wake, requests));
        let runtime = Runtime {
            inner: Arc::new(Handle {
                hub,
                rounds,
                ticker: Mutex::new(Some(ticker)),
                leases: Mutex::new(None),
                tail: Mutex::new(tail),
                supervisor: Mutex::new(Some(supervisor_task)),
                shutdown: tokio::sync::OnceCell::new(),
            }),
        };
        if let Err(reason) = crate::subject::open::recover(runtime.hub()).await {
            runtime.shutdown().await;
            let store = match (&data_dir, &runtime.hub().services.store) {
                (Some(dir), _) => format!("the data directory {}", dir.display()),
                (None, Some(store)) => format!("the store {}", store.name()),
                (None, None) => "the store".to_string(),
            };
            return Err(BuildError::Store(format!(
                "{store} could not be read back: {reason}"
            )));
        }
        if let Some(owners) = owners {
            let follow =
                crate::subject::slots::follow(Arc::downgrade(runtime.hub()), owners.changes);
            *lock(&runtime.inner.leases) = Some(tokio::spawn(follow));
        }
        // The ticker may read the wake index now (an upgrade wrote it).
        runtime
            .hub()
            .opened
            .store(true, std::sync::atomic::Ordering::Release);
        kick.kick.notify_one();
        Ok(runtime)
    }
}

/// What every clone of a [`Runtime`] shares; dropping the last one stops everything.
struct Handle {
    hub: Arc<Hub>,
    rounds: mpsc::UnboundedSender<RoundRequest>,
    /// The ticker's task, until a shutdown waits for it.
    ticker: Mutex<Option<JoinHandle<()>>>,
    /// The task that follows the changes of the slots this process owns, on a database
    /// nodes share.
    leases: Mutex<Option<JoinHandle<()>>>,
    /// The task that reads back a log every node sharing the database writes, to show
    /// its events (`crate::event::follow`).
    tail: Mutex<Option<JoinHandle<()>>>,
    /// The supervisor actor's task, until a shutdown waits for it.
    supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Set once a shutdown has waited for everything; later calls wait on the first.
    shutdown: tokio::sync::OnceCell<()>,
}

impl Handle {
    /// Stop everything without waiting: refuse new work, abort the ticker, stop every
    /// subject's actor (each aborts its activations) and the supervisor.
    fn stop(&self) {
        self.hub.services.close();
        if let Some(ticker) = lock(&self.ticker).as_ref() {
            ticker.abort();
        }
        if let Some(leases) = lock(&self.leases).as_ref() {
            leases.abort();
        }
        if let Some(tail) = lock(&self.tail).as_ref() {
            tail.abort();
        }
        self.hub.registry.stop_all();
        self.hub.supervisor.stop(None);
    }

    /// Stop everything and wait until every task of the runtime has ended.
    async fn shut_down(&self) {
        self.stop();
        let ticker = lock(&self.ticker).take();
        if let Some(ticker) = ticker {
            // Aborted, or ended first: either way it has ended.
            let _ = ticker.await;
        }
        let leases = lock(&self.leases).take();
        if let Some(leases) = leases {
            let _ = leases.await;
        }
        let tail = lock(&self.tail).take();
        if let Some(tail) = tail {
            let _ = tail.await;
        }
        self.hub.registry.stopped().await;
        let supervisor = lock(&self.supervisor).take();
        if let Some(supervisor) = supervisor {
            let _ = supervisor.await;
        }
        self.hub.services.tasks.join().await;
        // The directory is free once the shutdown returns: a runtime built on it next
        // does not find it held.
        if let Some(store) = self.hub.services.store.clone() {
            let _ = tokio::task::spawn_blocking(move || store.close()).await;
        }
    }
}

/// A handle's task slot; poisoning cannot leave it half-written.
fn lock(slot: &Mutex<Option<JoinHandle<()>>>) -> MutexGuard<'_, Option<JoinHandle<()>>> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A runtime: subjects, runs, the supervisor and its timers.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Handle>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("settings", &self.inner.hub.services.settings)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A builder with the defaults.
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub(crate) fn hub(&self) -> &Arc<Hub> {
        &self.inner.hub
    }

    /// The settings in force.
    pub fn settings(&self) -> &Settings {
        &self.hub().services.settings
    }

    /// The runtime's clock.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.hub().services.clock.now()
    }

    /// Register (or replace) a target that reads the `extras` keys named.
    ///
    /// The target returns a [`RunError`]; `?` converts every error into one, and a
    /// function written against `anyhow` or a boxed error is registered as
    /// `|ctx, kwargs, extras| async move { Ok(f(ctx, kwargs, extras).await?) }`.
    pub fn register<F, Fut>(&self, name: &str, extras: &[&str], f: F)
    where
        F: Fn(Ctx, Value, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, RunError>> + Send + 'static,
    {
        self.hub().services.targets.register(name, extras, f);
    }

    /// Start a run and wait for the record its first activation ends with: the caller
    /// is its receiver.
    pub async fn run(&self, start: Start) -> Result<RunRecord, StartError> {
        self.hub().run_to_end(start.spec()).await
    }

    /// The synchronous tool door: run a tool and return its record once its activation
    /// ends — `succeeded`, `failed`, `parked` with the `asks` it raised to its caller, or
    /// `suspended` with the sentinel when only user asks are open.
    ///
    /// Under an [idempotency key](Start::idempotency_key), a request made before answers
    /// with that run's record as it stands now.
    pub async fn run_tool(&self, start: Start) -> Result<RunRecord, StartError> {
        let spec = match self.keyed(start)? {
            Keyed::Start(spec) => spec,
            Keyed::Started(run) => {
                return match self.hub().record(&run).await {
                    Ok(Some(record)) => Ok(record),
                    Ok(None) => Err(StartError::Stopped),
                    Err(why) => Err(why.or(StartError::Stopped, StartError::Store)),
                };
            }
        };
        let key = spec.key.as_ref().map(|k| k.name.clone());
        let started = self.hub().run_to_end(*spec).await;
        self.release_on_error(key, &started);
        started
    }

    /// Claim `start`'s idempotency key, if it has one.
    fn keyed(&self, start: Start) -> Result<Keyed, StartError> {
        let Some(key) = start.idempotency_key.clone() else {
            return Ok(Keyed::Start(Box::new(start.spec())));
        };
        if let Some(why) = crate::keys::problem(&key) {
            return Err(StartError::InvalidIdempotencyKey { why });
        }
        let fingerprint = start.fingerprint();
        let keys = &self.hub().keys;
        // A key kept before keys were their subject's answers the same start until its
        // horizon (its fingerprint holds the subject).
        if let Some(kept) = keys.known(&crate::keys::legacy_run_key(&key))
            && kept.fingerprint == fingerprint
            && let Some(run) = kept.run
        {
            return Ok(Keyed::Started(Arc::from(run)));
        }
        let name = crate::keys::start_key(&start.subject, &key);
        match keys.claim(&name, fingerprint) {
            crate::keys::Claim::New => {
                let mut spec = start.spec();
                spec.key = Some(crate::run::port::Keyed { name, fingerprint });
                Ok(Keyed::Start(Box::new(spec)))
            }
            crate::keys::Claim::Known(kept) => match kept.run {
                Some(run) => Ok(Keyed::Started(Arc::from(run))),
                None => Err(StartError::IdempotencyKeyReused { key }),
            },
            crate::keys::Claim::Busy => Err(StartError::IdempotencyKeyInUse { key }),
            crate::keys::Claim::Reused => Err(StartError::IdempotencyKeyReused { key }),
        }
    }

    /// A start under the key `name` was refused: the key is free again.
    fn release_on_error<T>(&self, name: Option<String>, started: &Result<T, StartError>) {
        if let (Some(name), Err(_)) = (name, started) {
            self.hub().keys.release(&name);
        }
    }

    /// The background tool door: start a tool and return its run id at once; its record
    /// (the same record [`Runtime::run_tool`] returns) is read later with
    /// [`Runtime::record`], and shows `running` while an activation executes.
    ///
    /// Under an [idempotency key](Start::idempotency_key), a request made before answers
    /// with that run's id.
    pub async fn submit(&self, start: Start) -> Result<String, StartError> {
        let spec = match self.keyed(start)? {
            Keyed::Start(spec) => spec,
            Keyed::Started(run) => return Ok(run.to_string()),
        };
        let key = spec.key.as_ref().map(|k| k.name.clone());
        let started = self.hub().start(*spec, None).await.map(|id| id.to_string());
        self.release_on_error(key, &started);
        started
    }

    /// The record of any run, however it was started: where it stands now (`running`,
    /// `parked`, `suspended`), read from its subject (a passive subject is read as it is
    /// kept, without waking it), or how it ended. A run's record is there while the run
    /// lives and for the retention horizon (`INTERACTIONS_WAITING_RETENTION`) after it
    /// ends, then dropped with a `record_dropped` event; `None` for an unknown run or one
    /// past that horizon.
    ///
    /// A record the data directory holds and cannot read (it is damaged) is `None` here
    /// too, the damage logged and tallied in [`Runtime::health`];
    /// [`Runtime::try_record`] tells the two apart, as a client must be told.
    pub async fn record(&self, run_id: &str) -> Option<RunRecord> {
        self.try_record(run_id).await.ok().flatten()
    }

    /// [`Runtime::record`], with what kept it from reading the record: `Ok(None)` only
    /// for a run never started or dropped at its horizon, never for one whose record or
    /// subject the data directory cannot read ([`RecordError::Store`]).
    pub async fn try_record(&self, run_id: &str) -> Result<Option<RunRecord>, RecordError> {
        if self.hub().services.is_closed() {
            return Err(RecordError::Stopped);
        }
        // No run id the runtime issues is over-long or holds a control character: such
        // an id is unknown without a look in the store.
        if !crate::name::plausible_id(run_id) {
            return Ok(None);
        }
        self.hub()
            .record(run_id)
            .await
            .map_err(|why| why.or(RecordError::Stopped, RecordError::Store))
    }

    /// Whether the runtime has met damage in its data directory: a read that met it
    /// failed its operation with [`StoreFault::Corrupt`](crate::StoreFault::Corrupt), was
    /// logged, and is counted here. The runtime goes on serving what it can read; it does
    /// not become healthy again while it lives (`docs/durability.md`, "Damage met while
    /// serving").
    pub fn health(&self) -> crate::Health {
        self.hub().services.damage.health()
    }

    /// Whether the runtime keeps its state in a database whose slots have owners
    /// (PostgreSQL, where other nodes may join: [`Builder::node`]): only then may an
    /// operation be refused because another node owns its subject's slot.
    pub fn shares_store(&self) -> bool {
        lock(&self.inner.leases).is_some()
    }

    /// Where the slot numbered `slot` is served, if another node sharing the database
    /// owns it: the address that node gave ([`Builder::node_address`]), as this node
    /// last read the slots' owners (every third of a lease). `None` on a store that
    /// owns every slot, for a slot this node serves, and while no node's lease on it
    /// holds (the slot changing hands). An operation refused as
    /// [`StoreFault::NotOwner`](crate::StoreFault::NotOwner) names the slot; `parkway
    /// serve` forwards the request there.
    pub fn served_at(&self, slot: u16) -> Option<String> {
        let slot = crate::slot::Slot::numbered(slot)?;
        let store = self.hub().services.store.as_ref()?;
        store.owner(slot).map(|address| address.to_string())
    }

    /// The slot of the subject `subject`: the xxh3-64 of its name modulo 1024
    /// (`docs/durability.md`, "Slots and several processes").
    #[doc(hidden)]
    pub fn slot_of(subject: &str) -> u16 {
        crate::slot::Slot::of(subject).number()
    }

    /// Whether this runtime serves the slot numbered `slot` now: `false` for a slot
    /// given up, another node's, or one changing hands. For tests and simulations.
    #[doc(hidden)]
    pub fn serves(&self, slot: u16) -> bool {
        crate::slot::Slot::numbered(slot)
            .is_some_and(|slot| !self.hub().services.away.is_away(slot))
    }

    /// Give up the slot numbered `slot`, as when another process takes it, and wait
    /// until its subjects are unloaded: from the call on, an operation on one of them
    /// fails with [`StoreFault::NotOwner`](crate::StoreFault::NotOwner); each loaded
    /// subject unloads once nothing it wrote is pending, its activations stopped and its
    /// waiters told; what the slot's subjects fed (timers, the run tree, the inbox, the
    /// counts) is withdrawn. Every other slot goes on. For tests and simulations.
    #[doc(hidden)]
    pub async fn unload_slot(&self, slot: u16) -> Result<(), crate::SlotError> {
        let slot = self.movable(slot)?;
        crate::subject::slots::unload(self.hub(), slot).await;
        Ok(())
    }

    /// Take the slot numbered `slot` back and read it back as an open reads the data
    /// directory: its subjects serve again, a run that was executing is replayed, and
    /// the deadlines that passed meanwhile fire. For tests and simulations.
    #[doc(hidden)]
    pub async fn load_slot(&self, slot: u16) -> Result<(), crate::SlotError> {
        let number = slot;
        let slot = self.movable(slot)?;
        crate::subject::slots::load(self.hub(), slot)
            .await
            .map_err(|reason| crate::SlotError::Unreadable {
                slot: number,
                reason,
            })
    }

    /// The slot numbered `slot`, if it exists and this runtime can move it.
    fn movable(&self, slot: u16) -> Result<crate::slot::Slot, crate::SlotError> {
        let slot = crate::slot::Slot::numbered(slot).ok_or(crate::SlotError::NoSuchSlot(slot))?;
        if self.hub().services.store.is_none() {
            return Err(crate::SlotError::InMemory);
        }
        if self.is_shut_down() {
            return Err(crate::SlotError::Stopped);
        }
        Ok(slot)
    }

    /// Offer the target `target` as a tool, as [`Builder::tool`] does before the build
    /// (replacing a tool of the same name).
    pub fn add_tool(
        &self,
        target: &str,
        spec: crate::ToolSpec,
    ) -> Result<(), crate::ToolSpecError> {
        self.hub().services.tools.add(target, spec)
    }

    /// Every tool offered, sorted by name.
    pub fn tools(&self) -> Vec<Arc<crate::Tool>> {
        self.hub().services.tools.all()
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<Arc<crate::Tool>> {
        self.hub().services.tools.get(name)
    }

    /// Call the tool `name` with `arguments`: the run-tool door of its target, on the
    /// subject its `subject_expr` reads off `{"arguments": …, "_meta": meta}` (or a fresh
    /// one), with the arguments as kwargs, run as `identity`. The arguments are checked
    /// against the tool's input schema first: every problem is named and nothing starts.
    /// Returns the subject and the run's record, as [`Runtime::run_tool`] does.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        meta: &Value,
        identity: &str,
    ) -> Result<(String, RunRecord), crate::ToolCallError> {
        let tool = self
            .tool(name)
            .ok_or_else(|| crate::ToolCallError::Unknown {
                name: name.chars().take(crate::MAX_TOOL_NAME).collect(),
            })?;
        let problems = tool.argument_problems(&arguments);
        if !problems.is_empty() {
            return Err(crate::ToolCallError::InvalidArguments {
                tool: name.to_owned(),
                problems,
            });
        }
        let services = &self.hub().services;
        let limits = crate::jq::Limits {
            deadline: services.settings.jq_deadline,
            max_input_bytes: services.settings.max_input_bytes,
        };
        let fresh = || services.ids.next(crate::ids::Kind::Group);
        let subject = tool
            .subject(&arguments, meta, services.clock.now(), &limits, fresh)
            .await?;
        let start = Start::new(subject.clone(), tool.target.clone())
            .kwargs(arguments)
            .identity(identity);
        let record = self.run_tool(start).await?;
        Ok((subject, record))
    }

    /// Start a run with no receiver; returns its id at once.
    pub async fn spawn(&self, start: Start) -> Result<String, StartError> {
        self.hub()
            .start(start.spec(), None)
            .await
            .map(|id| id.to_string())
    }

    /// Every parked entry on `subject`, oldest first. A subject without an actor (passive,
    /// or never seen) is read as it is kept and not woken (`docs/semantics.md`,
    /// "Passivation").
    pub async fn list(&self, subject: &str) -> Result<Vec<Entry>, StartError> {
        if subject.is_empty() {
            return Err(StartError::EmptySubject);
        }
        names(subject, &[]).map_err(StartError::InvalidName)?;
        self.hub().list(&Arc::from(subject)).await
    }

    /// Resume the ask `interaction` with `payload` (the answer). The caller receives the
    /// run's next outcome, or `buffered` while other asks of its group are open.
    pub async fn resume(
        &self,
        subject: &str,
        interaction: &str,
        payload: Value,
    ) -> Result<Resumed, ResumeError> {
        if subject.is_empty() {
            return Err(ResumeError::EmptySubject);
        }
        names(subject, &[interaction]).map_err(ResumeError::InvalidName)?;
        self.hub()
            .resume(&Arc::from(subject), interaction, payload, None)
            .await
    }

    /// Resume with no receiver, as a hook or schedule fire does: when the run ends, its
    /// terminal waits on the subject as a `finished` or `failed` entry.
    pub async fn resume_detached(
        &self,
        subject: &str,
        interaction: &str,
        payload: Value,
    ) -> Result<(), ResumeError> {
        if subject.is_empty() {
            return Err(ResumeError::EmptySubject);
        }
        names(subject, &[interaction]).map_err(ResumeError::InvalidName)?;
        let payload = checked_payload(interaction, payload)?;
        if self.hub().services.is_closed() {
            return Err(ResumeError::Stopped);
        }
        let subject: Arc<str> = Arc::from(subject);
        let acked = self
            .hub()
            .request::<Result<crate::subject::Ack, crate::error::IdProblem>>(&subject, |reply| {
                Op::Resume {
                    interaction: interaction.to_owned(),
                    payload,
                    receiver: None,
                    resumer: None,
                    reply,
                }
            });
        let acked = acked
            .await
            .map_err(|why| why.or(ResumeError::Stopped, ResumeError::Store))?;
        match acked {
            Ok(_) => Ok(()),
            Err(problem) => Err(ResumeError::Refused(problem)),
        }
    }

    /// Take the waiting outcome `interaction`: its result, or, for a `failed` one, its
    /// error as [`TakeError::Failed`].
    pub async fn take(&self, subject: &str, interaction: &str) -> Result<Value, TakeError> {
        if subject.is_empty() {
            return Err(TakeError::EmptySubject);
        }
        names(subject, &[interaction]).map_err(TakeError::InvalidName)?;
        self.hub()
            .take(&Arc::from(subject), interaction, None)
            .await
    }

    /// Take the waiting outcome `interaction` once it is there: the result a resumed
    /// run leaves on its subject when nobody received it (a person answered through the
    /// inbox, a hook or a schedule resumed it, or its ask expired with `resume`).
    ///
    /// While the interaction is still `asking` or `running` this waits, up to
    /// `timeout`, then answers [`AwaitError::TimedOut`](crate::AwaitError::TimedOut)
    /// and changes nothing. The timeout is counted on tokio's timer, not the
    /// runtime's [`Clock`]: with a [`ManualClock`](crate::ManualClock), move the clock
    /// to fire an expiry, then await. Anything else is answered as
    /// [`Runtime::take`] answers it at once: a `failed` outcome raises
    /// ([`TakeError::Failed`]), and an interaction resolved another way (taken already,
    /// cancelled, or resumed by a run that parked again) is refused naming how.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use parkway::{Ask, Runtime, Start};
    /// use serde_json::json;
    ///
    /// let rt = Runtime::builder().without_env().build().await?;
    /// rt.register("publish", &[], |ctx, _, _| async move {
    ///     let ok = ctx.ask(Ask::user("publish the post?").answer_format("confirm").expiry_at("1h")).await?;
    ///     Ok(json!({"published": ok == true}))
    /// });
    /// let record = rt.run(Start::new("blog", "publish")).await?;
    /// let ask = &record.user_asks()[0];
    /// rt.answer(ask, json!(true)).await?; // as a person does through the inbox
    /// let result = rt.await_outcome("blog", ask, Duration::from_secs(5)).await?;
    /// assert_eq!(result, json!({"published": true}));
    /// # Ok(()) }
    /// ```
    pub async fn await_outcome(
        &self,
        subject: &str,
        interaction: &str,
        timeout: Duration,
    ) -> Result<Value, crate::AwaitError> {
        use crate::entry::EntryStatus;
        use crate::error::IdProblem;
        // A timeout past what the timer counts (`Duration::MAX`) is waited for as long as
        // it counts: about thirty years.
        let now = tokio::time::Instant::now();
        let far = Duration::from_secs(30 * 365 * 24 * 3600);
        let deadline = now
            .checked_add(timeout)
            .or_else(|| now.checked_add(far))
            .unwrap_or(now);
        // Subscribed before the first look, so no change after it goes unseen.
        let mut events = self.events();
        loop {
            match self.take(subject, interaction).await {
                Err(TakeError::Refused(IdProblem::WrongStatus {
                    status: EntryStatus::Asking | EntryStatus::Running,
                    ..
                })) => {}
                other => return other.map_err(crate::AwaitError::Take),
            }
            // Look again after the next change on the subject (or after missing some).
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) => {
                        return Err(crate::AwaitError::TimedOut {
                            subject: subject.to_owned(),
                            id: interaction.to_owned(),
                            waited: timeout,
                        });
                    }
                    Ok(Ok(event)) if event.subject() != subject => {}
                    Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => break,
                    Ok(Err(broadcast::error::RecvError::Closed)) => {
                        return Err(crate::AwaitError::Take(TakeError::Stopped));
                    }
                }
            }
        }
    }

    /// Cancel each named interaction: a whole-chain kill. All ids are checked first; any
    /// problem refuses them all and changes nothing.
    pub async fn cancel(&self, subject: &str, ids: &[&str]) -> Result<(), CancelError> {
        if subject.is_empty() {
            return Err(CancelError::EmptySubject);
        }
        names(subject, ids).map_err(CancelError::InvalidName)?;
        self.hub()
            .cancel(
                &Arc::from(subject),
                ids.iter().map(|s| (*s).to_owned()).collect(),
                None,
            )
            .await
    }

    /// Save (or replace) a door; every expression is compiled and checked now, and every
    /// problem is reported together. A schedule is armed from the clock's now.
    pub fn save_door(&self, spec: crate::DoorSpec) -> Result<(), crate::SaveError> {
        let hub = self.hub();
        hub.doors.save(&hub.services, spec)
    }

    /// Remove a door; whether it existed. A removed schedule fires no more.
    pub fn remove_door(&self, name: &str) -> bool {
        let hub = self.hub();
        hub.doors.remove_saved(&hub.services, name)
    }

    /// Every saved door as saved, in name order.
    pub fn doors(&self) -> Vec<crate::DoorSpec> {
        self.hub().doors.specs()
    }

    /// The door called `name` as saved.
    pub fn door(&self, name: &str) -> Option<crate::DoorSpec> {
        self.hub().doors.get(name).map(|d| d.spec.clone())
    }

    /// Fire the schedule `name` now, outside its interval (its next fire stays where it
    /// was): its subject is visited with `{"schedule": name, "fired_at": now}`, with no
    /// receiver. `UnknownDoor` if no schedule has that name.
    pub async fn fire_schedule(&self, name: &str) -> Result<crate::Visit, crate::VisitError> {
        if self.hub().services.is_closed() {
            return Err(crate::VisitError::Stopped);
        }
        let unknown = || crate::VisitError::UnknownDoor {
            door: name.to_owned(),
        };
        let saved = self.hub().doors.get(name).ok_or_else(unknown)?;
        let crate::DoorKind::Schedule { subject, .. } = &saved.spec.kind else {
            return Err(unknown());
        };
        let subject: Arc<str> = Arc::from(subject.as_str());
        let input = serde_json::json!({
            "schedule": name,
            "fired_at": crate::error::rfc3339(&self.now()),
        });
        self.hub().visit(&saved, &subject, input).await
    }

    /// Visit the door `door` on `subject` with the input document `input`. A route's
    /// visitor receives the outcome inline; a hook or schedule visited by name has no
    /// receiver.
    pub async fn visit(
        &self,
        door: &str,
        subject: &str,
        input: Value,
    ) -> Result<crate::Visit, crate::VisitError> {
        if subject.is_empty() {
            return Err(crate::VisitError::EmptySubject);
        }
        names(subject, &[])
            .and_then(|()| crate::name::problem("door name", door).map_or(Ok(()), Err))
            .map_err(crate::VisitError::InvalidName)?;
        let input = depth::check(input, || crate::VisitError::InputTooDeep {
            door: door.to_owned(),
            limit: depth::MAX_VALUE_DEPTH,
        })?;
        if self.hub().services.is_closed() {
            return Err(crate::VisitError::Stopped);
        }
        let Some(saved) = self.hub().doors.get(door) else {
            return Err(crate::VisitError::UnknownDoor {
                door: door.to_owned(),
            });
        };
        self.hub().visit(&saved, &Arc::from(subject), input).await
    }

    /// Fire `topic`: every hook on it checks its condition and visits its subject with
    /// no receiver, in name order.
    ///
    /// An input nested deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH), or a fire
    /// after [`Runtime::shutdown`], checks no condition: each hook on the topic reports
    /// the refusal as its visit's error.
    pub async fn fire(&self, topic: &str, input: Value) -> Vec<crate::HookFire> {
        let refusal = if depth::too_deep(&input) {
            depth::drop_deep(input);
            |door: &str| crate::VisitError::InputTooDeep {
                door: door.to_owned(),
                limit: depth::MAX_VALUE_DEPTH,
            }
        } else if self.hub().services.is_closed() {
            |_: &str| crate::VisitError::Stopped
        } else {
            return self.hub().fire(topic, input).await;
        };
        self.hub()
            .doors
            .hooks(topic)
            .into_iter()
            .map(|door| crate::HookFire {
                door: door.name().to_owned(),
                subject: None,
                visit: Some(Err(refusal(door.name()))),
            })
            .collect()
    }

    /// Fire `topic` for the delivery `delivery` (a webhook's delivery id) at most once
    /// within the retention horizon: a delivery seen before is refused as
    /// [`DeliveryError::AlreadySeen`](crate::DeliveryError::AlreadySeen) and fires
    /// nothing. The id is kept once the fire was made (durably, with a data directory),
    /// so a crash between the two lets a retry fire again: at least once, never lost.
    pub async fn fire_delivery(
        &self,
        topic: &str,
        delivery: &str,
        input: Value,
    ) -> Result<Vec<crate::HookFire>, crate::DeliveryError> {
        self.fire_delivery_then(topic, delivery, input, |fires| async move { fires })
            .await
    }

    /// [`Runtime::fire_delivery`], with `then` run on the hooks' fires before the
    /// delivery id is kept, its answer returned: a front end that sends on to their
    /// owners the visits refused as [`StoreFault::NotOwner`](crate::StoreFault::NotOwner)
    /// (another node sharing the database serves their subjects) does it here, so a
    /// crash before they are made lets the sender's retry fire again.
    pub async fn fire_delivery_then<T, F, Fut>(
        &self,
        topic: &str,
        delivery: &str,
        input: Value,
        then: F,
    ) -> Result<T, crate::DeliveryError>
    where
        F: FnOnce(Vec<crate::HookFire>) -> Fut,
        Fut: Future<Output = T>,
    {
        if depth::too_deep(&input) {
            // Refused by every hook, as `fire` refuses it: nothing fires, nothing is kept.
            return Ok(then(self.fire(topic, input).await).await);
        }
        let fingerprint = crate::keys::fingerprint(&[input.to_string().as_bytes()]);
        let hub = Arc::clone(self.hub());
        let fire = async move { then(self.fire(topic, input).await).await };
        hub.fire_once(topic, delivery, fingerprint, fire).await
    }

    /// Stop the runtime and wait until everything of it has ended (`docs/semantics.md`,
    /// "Shutdown"): every operation from now on is refused as stopped (each in its own
    /// error type); executing activations are aborted, and whoever waits on one (a
    /// `run`, a `resume`, a visit) gets the stopped error; every subject's actor, the
    /// supervisor and the ticker stop, and this returns once all their tasks have ended.
    /// Parked entries and passive subjects are plain data and simply go with the
    /// runtime. Calling it again, from any clone, waits for the same shutdown.
    ///
    /// Dropping the last clone of a runtime stops everything the same way, without
    /// waiting.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use parkway::{Runtime, Start, StartError};
    /// let runtime = Runtime::builder().without_env().build().await.unwrap();
    /// runtime.shutdown().await;
    /// let refused = runtime.spawn(Start::new("s", "t")).await;
    /// assert_eq!(refused, Err(StartError::Stopped));
    /// # }
    /// ```
    pub async fn shutdown(&self) {
        self.inner
            .shutdown
            .get_or_init(|| self.inner.shut_down())
            .await;
    }

    /// Whether [`Runtime::shutdown`] was called (or is under way).
    pub fn is_shut_down(&self) -> bool {
        self.hub().services.is_closed()
    }

    /// One page of the interactions inbox: pending user asks, oldest first. Pages are
    /// numbered from 1; `page_size` defaults to 50 and is capped at 200. Caller asks are
    /// never listed.
    pub fn inbox(
        &self,
        page: usize,
        page_size: Option<usize>,
    ) -> Result<crate::Page, crate::AnswerError> {
        self.hub()
            .inbox
            .page(page, page_size.unwrap_or(crate::DEFAULT_PAGE_SIZE))
    }

    /// The pending user ask `id` as the inbox lists it; `None` for an unknown id, one no
    /// longer pending, and any caller ask.
    pub fn inbox_item(&self, id: &str) -> Option<crate::InboxItem> {
        self.hub().inbox.get(id)
    }

    /// The item an `ask_parked` event of a user ask adds to an inbox stream: the ask as
    /// the inbox holds it while it is pending here; for an ask of a slot another node
    /// sharing the database serves, the item the event carries, its titles from this
    /// runtime's tools. `None` for an ask of this runtime's no longer pending (its
    /// `answered` or `removed` follows in the log), a caller ask, and any other event.
    pub fn added_item(&self, event: &Event) -> Option<crate::InboxItem> {
        let Event::AskParked {
            subject,
            interaction,
            to: crate::To::User,
            item,
            ..
        } = event
        else {
            return None;
        };
        if let Some(held) = self.hub().inbox.get(interaction) {
            return Some(held);
        }
        let slot = crate::slot::Slot::of(subject);
        if !self.hub().services.away.is_away(slot) {
            return None;
        }
        let mut item = item.as_deref()?.clone();
        crate::inbox::titled(&mut item, &self.hub().services.tools);
        Some(item)
    }

    /// Follow the inbox live: an `add`, `answered` or `removed` frame for each change of a
    /// user ask from now on. Caller asks never appear in a frame.
    pub fn inbox_frames(&self) -> broadcast::Receiver<crate::Frame> {
        self.hub().inbox.subscribe()
    }

    /// The human answer door: answer the user ask `interaction`. The answer is validated
    /// by the ask's format (`text` a string, `confirm` a boolean, `select` one of the
    /// options, `form` an object valid against its schema; `external` is refused here).
    /// A user ask answered, expired or cancelled answers `already resolved (how) at …`
    /// while its subject remembers it; a caller ask and an unknown id answer `unknown
    /// interaction`.
    pub async fn answer(&self, interaction: &str, answer: Value) -> Result<(), crate::AnswerError> {
        let answer = depth::check(answer, || crate::AnswerError::Invalid {
            id: interaction.to_owned(),
            problems: vec![crate::validator::AnswerProblem::whole(format!(
                "the answer is nested deeper than {} levels",
                depth::MAX_VALUE_DEPTH
            ))],
        })?;
        if self.hub().services.is_closed() {
            return Err(crate::AnswerError::Stopped);
        }
        // No id the runtime issues is over-long or holds a control character: unknown,
        // without a look in the store's log.
        if !crate::name::plausible_id(interaction) {
            return Err(crate::AnswerError::Unknown {
                id: interaction.to_owned(),
            });
        }
        let Some(item) = self.hub().inbox.get(interaction) else {
            // An ask this runtime never held, of a slot another node serves: its id
            // names the slot, so the refusal says where it is answered.
            if self.hub().inbox.left(interaction).is_none()
                && let Some(slot) = crate::slot::Slot::of_interaction(interaction)
                && self.hub().services.away.is_away(slot)
            {
                return Err(crate::AnswerError::Store(crate::StoreFault::NotOwner {
                    subject: String::new(),
                    slot: slot.number(),
                }));
            }
            return Err(self.hub().gone(interaction).await);
        };
        crate::inbox::validate(&item, &answer)?;
        match self
            .resume_detached(&item.subject, interaction, answer)
            .await
        {
            Ok(()) => Ok(()),
            Err(ResumeError::Stopped) => Err(crate::AnswerError::Stopped),
            Err(ResumeError::Store(fault)) => Err(crate::AnswerError::Store(fault)),
            // Answered or gone between the look-up and the resume.
            Err(_) => Err(self.hub().gone(interaction).await),
        }
    }

    /// Up to `limit` entries of the durable event log, from sequence number `from` on
    /// (numbers start at 1 and have no gaps; the log keeps the last 100,000 and trims
    /// older ones), in order: what was durable, whether or not it was shown before a
    /// crash. A runtime in memory keeps no log. On a database nodes share, the log is
    /// every node's, numbered in commit order, and every node reads the same.
    pub fn event_log(
        &self,
        from: u64,
        limit: usize,
    ) -> Result<Vec<crate::Logged>, crate::LogError> {
        let store = self
            .hub()
            .services
            .store
            .as_ref()
            .ok_or(crate::LogError::InMemory)?;
        let entries = store
            .log_from(from, limit)
            .map_err(|e| crate::LogError::Read(e.to_string()))?;
        entries
            .into_iter()
            .map(|(seq, bytes)| {
                serde_json::from_slice(&bytes)
                    .map(|event| crate::Logged { seq, event })
                    .map_err(|e| crate::LogError::Damaged {
                        seq,
                        cause: e.to_string(),
                    })
            })
            .collect()
    }

    /// Subscribe to the logged events shown from now on, with their numbers in the
    /// durable log ([`Runtime::event_log`]); a runtime in memory shows none. On a
    /// database nodes share, every node's, read back from the log in order: this
    /// node's at once, the others' within a poll (100 ms).
    pub fn logged_events(&self) -> broadcast::Receiver<crate::Logged> {
        self.hub().services.events.subscribe_logged()
    }

    /// Subscribe to the platform events published from now on (on a database nodes
    /// share, this node's own).
    pub fn events(&self) -> broadcast::Receiver<Event> {
        self.hub().services.events.subscribe()
    }

    /// Wait until the runtime has nothing left to do at the clock's present: no message
    /// or activation in flight, and every timer due now fired and handled.
    ///
    /// With a [`ManualClock`](crate::ManualClock): advance it, then settle, and every
    /// consequence of the move has happened.
    pub async fn settle(&self) {
        loop {
            let hub = self.hub();
            // A stopped runtime has nothing left to do: what was in flight is gone.
            tokio::select! {
                _ = hub.services.inflight.quiet() => {}
                _ = hub.services.closed() => return,
            }
            let (tx, rx) = oneshot::channel();
            if self.inner.rounds.send(tx).is_err() {
                return;
            }
            let Ok(fired) = rx.await else {
                return;
            };
            if fired == 0 && self.hub().services.inflight.is_quiet() {
                return;
            }
        }
    }

    /// The failed write or sync that stopped the store, and with it the runtime, naming
    /// the data directory and what the engine said (`store DIR: writing a batch failed:
    /// No space left on device (os error 28)`); `None` while the store works, and for a
    /// runtime in memory. A tool that sees its operations refused as stopped reads here
    /// whether the store is why.
    pub fn store_failure(&self) -> Option<String> {
        self.hub().services.store.as_ref().and_then(|s| s.failure())
    }

    /// Wait until the runtime stops taking work: after [`Runtime::shutdown`], or by
    /// itself when its store failed ([`Runtime::store_failure`] says why). A server
    /// waits on this to exit when it can no longer serve, so that whatever supervises
    /// it starts it again.
    pub async fn stopped(&self) {
        self.hub().services.closed().await;
    }

    /// The durable store's figures since it was opened; `None` for a runtime in memory.
    pub fn store_stats(&self) -> Option<StoreStats> {
        self.hub().services.store.as_ref().map(|store| {
            let s = store.stats();
            StoreStats {
                syncs: s.syncs,
                batches: s.batches,
                bytes: s.bytes,
                keys: s.keys,
                largest_group: s.largest_group,
                commit_time: Duration::from_micros(s.commit_micros),
            }
        })
    }

    /// What opening the data directory found in the store's journals and did about them;
    /// `None` for a runtime in memory.
    pub fn store_recovery(&self) -> Option<StoreRecovery> {
        self.hub().services.store.as_ref().map(|store| {
            let r = store.recovered();
            StoreRecovery {
                journal_batches: r.journal_batches,
                torn_bytes: r.torn_bytes,
                cuts: r.cuts,
                dropped_batches: r.dropped_batches,
                dropped_bytes: r.dropped_bytes,
                log_groups: r.log_groups,
            }
        })
    }

    /// Sizes of the runtime's moving parts.
    pub async fn stats(&self) -> Stats {
        let hub = self.hub();
        let (live_subjects, passive_subjects, passive_bytes) = hub.registry.census();
        let (tx, rx) = oneshot::channel();
        let _ = hub.supervisor.cast(supervisor::Msg::Stats { reply: tx });
        let (linked_runs, timers) = rx.await.unwrap_or_default();
        let (passivations, redelivered) = hub.registry.passivation_counts();
        let (caller_open, user_open, runs) = hub.services.caps.totals();
        Stats {
            caller_open,
            user_open,
            live_subjects,
            passive_subjects,
            passive_bytes,
            runs,
            linked_runs,
            timers,
            records: hub.records.len(),
            passivations,
            redelivered,
        }
    }
}

/// What is wrong with `subject` or one of `ids` (interaction ids a client passed back),
/// if anything (`crate::name`): such a name is refused before the subject is touched.
fn names(subject: &str, ids: &[&str]) -> Result<(), String> {
    let problems = std::iter::once(crate::name::problem("subject", subject)).chain(
        ids.iter()
            .map(|id| crate::name::problem("interaction id", id)),
    );
    let problems: Vec<String> = problems.flatten().collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
