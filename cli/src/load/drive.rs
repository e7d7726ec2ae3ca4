//! The visitors: the prefill, the measured visits with their latencies, and the clock
//! that follows the wall clock while they run.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::Value;
use tokio::task::JoinSet;

use super::config::{LoadConfig, Stop};
pub(crate) use super::stages::histogram;
use super::workload::{self, Op, Visits};
use parkway::Clock as _;
use parkway::{
    ItemOutcome, ManualClock, Resumed, RunStatus, Runtime, Visit, VisitError, VisitOutcome,
};

/// What a load run is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Phase {
    /// Building the runtime.
    Setup,
    /// Starting the prefill asks.
    Prefill,
    /// The measured visits.
    Visits,
    /// Waiting for the runtime to go quiet, then reading the account.
    Settle,
    /// The bare baseline.
    Bare,
    /// Finished.
    Done,
    /// Over HTTP: the `GET /healthz` baseline, before the prefill.
    Baseline,
}

/// How far a load run has got: read from another task or thread while it runs.
#[derive(Debug, Default)]
pub struct Progress {
    visits: AtomicU64,
    phase: AtomicU8,
}

impl Progress {
    /// A fresh progress, in [`Phase::Setup`].
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Measured visits completed so far.
    pub fn visits(&self) -> u64 {
        self.visits.load(Ordering::Relaxed)
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Setup,
            1 => Phase::Prefill,
            2 => Phase::Visits,
            3 => Phase::Settle,
            4 => Phase::Bare,
            6 => Phase::Baseline,
            _ => Phase::Done,
        }
    }

    /// Count one measured visit (over MCP: one call) done.
    pub(crate) fn count_visit(&self) {
        self.visits.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn set_phase(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Relaxed);
    }
}

/// What the visitors saw, added up (their latencies are kept apart, in [`Latencies`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Client {
    /// Visits that applied nothing (nothing to resume, take or cancel; a full subject).
    pub(crate) idle: u64,
    /// Runs started.
    pub(crate) started: u64,
    /// Asks the start records carried.
    pub(crate) asks_seen: u64,
    /// Start records that came back cancelled: the run's one ask was cancelled or expired
    /// (killing the run) before its first activation ended.
    pub(crate) starts_cancelled: u64,
    /// Terminal outcomes (succeeded or failed) handed to a resuming visitor.
    pub(crate) delivered: u64,
    /// Resumes whose outcome was anything else (buffered, parked again, cancelled).
    pub(crate) delivered_other: u64,
    /// Asks resumed (whatever their run did next).
    pub(crate) resumed: u64,
    /// Waiting outcomes taken.
    pub(crate) taken: u64,
    /// Interactions cancelled.
    pub(crate) cancelled: u64,
    /// Refused visits by kind of error, with the first message.
    pub(crate) errors: BTreeMap<&'static str, (u64, String)>,
}

/// Latency of each measured visit in microseconds, by kind of visit (so also how many
/// visits of each kind were measured).
///
/// A set is four histograms from 1 µs to 1 h at three significant figures, large enough
/// (`docs/benchmarks.md`) that visitors do not keep one each: they record into a few
/// shared sets ([`Recorder`]), which are added up at the end.
#[derive(Debug)]
pub(crate) struct Latencies([Histogram<u64>; 4]);

impl Default for Latencies {
    fn default() -> Self {
        Self(std::array::from_fn(|_| histogram()))
    }
}

impl Latencies {
    /// Count one visit of kind `op` that took `micros`.
    fn record(&mut self, op: Op, micros: u64) {
        self.0[op.index()].saturating_record(micros.max(1));
    }

    /// Add another set.
    fn add(&mut self, other: &Latencies) {
        // Every histogram has the same bounds, so adding cannot fail.
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            let _ = a.add(b);
        }
    }

    /// Measured visits.
    pub(crate) fn visits(&self) -> u64 {
        self.0.iter().map(Histogram::len).sum()
    }

    /// Latency of every measured visit, whatever its kind.
    pub(crate) fn all(&self) -> Histogram<u64> {
        let mut all = histogram();
        for h in &self.0 {
            // The same bounds: adding cannot fail.
            let _ = all.add(h);
        }
        all
    }

    /// Every kind of visit with its histogram, in report order.
    pub(crate) fn by_op(&self) -> impl Iterator<Item = (&'static str, &Histogram<u64>)> {
        Op::ALL.iter().map(|op| (op.name(), &self.0[op.index()]))
    }

    /// Every kind of visit with its count, in report order.
    pub(crate) fn counts(&self) -> BTreeMap<String, u64> {
        Op::ALL
            .iter()
            .map(|op| (op.name().to_owned(), self.0[op.index()].len()))
            .collect()
    }
}

/// The shared latency sets the visitors record into: visitor `i` into set `i % n`, so
/// a set's lock is seldom contended, and the memory does not grow with the visitors.
struct Recorder(Box<[Mutex<Latencies>]>);

impl Recorder {
    /// Sets for `visitors` visitors on `workers` worker threads.
    fn new(visitors: usize, workers: usize) -> Self {
        let sets = visitors.min(workers.saturating_mul(4)).max(1);
        Self((0..sets).map(|_| Mutex::default()).collect())
    }

    /// Count one visit of visitor `visitor`.
    fn record(&self, visitor: usize, op: Op, micros: u64) {
        // Recording cannot panic, so a poisoned lock holds whole counts.
        self.0[visitor % self.0.len()]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(op, micros);
    }

    /// Every set added up.
    fn total(&self) -> Latencies {
        let mut total = Latencies::default();
        for set in &self.0 {
            total.add(&set.lock().unwrap_or_else(PoisonError::into_inner));
        }
        total
    }
}

impl Client {
    /// Count one visit's result.
    fn count(&mut self, result: Result<Visit, VisitError>) {
        let visit = match result {
            Ok(visit) => visit,
            Err(e) => {
                let kind = e.kind();
                let slot = self
                    .errors
                    .entry(kind)
                    .or_insert_with(|| (0, e.to_string()));
                slot.0 += 1;
                return;
            }
        };
        self.cancelled += visit.cancelled.len() as u64;
        match visit.outcome {
            VisitOutcome::Nothing if visit.cancelled.is_empty() => self.idle += 1,
            VisitOutcome::Nothing => {}
            VisitOutcome::Started { record, .. } => {
                self.started += 1;
                if let Some(record) = record {
                    if record.status == RunStatus::Cancelled {
                        self.starts_cancelled += 1;
                    }
                    self.asks_seen += record.asks.map_or(0, |a| a.len() as u64);
                }
            }
            VisitOutcome::Resolved { results } => {
                for item in results {
                    if matches!(item, ItemOutcome::Resumed { .. }) {
                        self.resumed += 1;
                    }
                    match item {
                        ItemOutcome::Resumed {
                            outcome: Some(Resumed::Outcome(record)),
                            ..
                        } if matches!(record.status, RunStatus::Succeeded | RunStatus::Failed) => {
                            self.delivered += 1;
                        }
                        ItemOutcome::Resumed { .. } => self.delivered_other += 1,
                        ItemOutcome::Taken { .. } | ItemOutcome::TakeFailed { .. } => {
                            self.taken += 1;
                        }
                        _ => self.delivered_other += 1,
                    }
                }
            }
            _ => {}
        }
    }

    /// Add another visitor's counts.
    fn add(&mut self, other: Client) {
        self.idle += other.idle;
        self.started += other.started;
        self.asks_seen += other.asks_seen;
        self.starts_cancelled += other.starts_cancelled;
        self.delivered += other.delivered;
        self.delivered_other += other.delivered_other;
        self.resumed += other.resumed;
        self.taken += other.taken;
        self.cancelled += other.cancelled;
        for (kind, (n, message)) in other.errors {
            self.errors.entry(kind).or_insert((0, message)).0 += n;
        }
    }
}

/// The task that moves the clock with the wall clock, until stopped.
pub(crate) struct Follow {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Follow {
    /// Stop the clock where it is.
    pub(crate) async fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
    }
}

/// Move `clock` with the wall clock, a millisecond at a time, from now on.
pub(crate) fn follow_wall_clock(clock: ManualClock) -> Follow {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let task = tokio::spawn(async move {
        let origin = Instant::now();
        let start = clock.now();
        let mut tick = tokio::time::interval(Duration::from_millis(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        while !flag.load(Ordering::Relaxed) {
            tick.tick().await;
            let elapsed = chrono::Duration::from_std(origin.elapsed()).unwrap_or_default();
            clock.set(start + elapsed);
        }
    });
    Follow { stop, task }
}

/// One visitor's way to the doors: a runtime in this process ([`Local`]), or a server
/// over HTTP (`super::remote`). It counts what its visits did itself.
pub(crate) trait Visitor: Send + 'static {
    /// What a visit answers.
    type Answer: Send;

    /// Visit the door of `op` on subject number `subject` with `input`.
    fn visit(
        &self,
        op: Op,
        subject: usize,
        input: Value,
    ) -> impl Future<Output = Self::Answer> + Send;

    /// Count what a visit answered (after its latency is taken, as before the trait).
    fn count(&mut self, answer: Self::Answer);

    /// Whether the visits must stop at once: the runtime stopped (its store failed), so
    /// every visit from now on would only be refused.
    fn halted(&self) -> bool {
        false
    }
}

/// A visitor of a runtime in this process.
pub(crate) struct Local {
    rt: Runtime,
    names: Arc<Vec<String>>,
    /// What its visits did.
    pub(crate) client: Client,
}

/// The runtime refused a visit as stopped: it will refuse every one from now on.
fn stopped(answer: &Result<Visit, VisitError>) -> bool {
    matches!(answer, Err(VisitError::Stopped))
}

impl Local {
    /// Visitors of `rt`'s subjects, one per call.
    pub(crate) fn maker(rt: &Runtime, subjects: usize) -> impl Fn(usize) -> Local + use<> {
        let names: Arc<Vec<String>> = Arc::new((0..subjects).map(workload::subject_name).collect());
        let rt = rt.clone();
        move |_| Local {
            rt: rt.clone(),
            names: Arc::clone(&names),
            client: Client::default(),
        }
    }

    /// What every visitor saw, added up.
    pub(crate) fn total(visitors: Vec<Local>) -> Client {
        let mut all = Client::default();
        for visitor in visitors {
            all.add(visitor.client);
        }
        all
    }
}

impl Visitor for Local {
    type Answer = Result<Visit, VisitError>;

    async fn visit(&self, op: Op, subject: usize, input: Value) -> Self::Answer {
        self.rt.visit(op.door(), &self.names[subject], input).await
    }

    fn count(&mut self, answer: Self::Answer) {
        if stopped(&answer) {
            // Said once by the caller of `load::run`, with why; not counted as a refusal.
            return;
        }
        self.client.count(answer);
    }

    fn halted(&self) -> bool {
        self.rt.is_shut_down()
    }
}

/// What the prefill did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Prefilled {
    /// What its visits saw (not in the latency figures).
    pub(crate) client: Client,
}

/// Start `config.prefill` long-lived asks on every subject, `config.concurrency` at a
/// time, through visitors made by `make`, which are handed back. Each visitor fills one
/// subject with all its asks, then takes the next: a filled subject goes idle and
/// passivates while the others fill, as a subject does in use, rather than every
/// subject staying live until the last round.
pub(crate) async fn prefill<V: Visitor>(config: &LoadConfig, make: impl Fn(usize) -> V) -> Vec<V> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = JoinSet::new();
    for index in 0..config.concurrency {
        let mut visitor = make(index);
        let next = Arc::clone(&next);
        let (subjects, asks) = (config.subjects as u64, config.prefill);
        tasks.spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= subjects || visitor.halted() {
                    break visitor;
                }
                for _ in 0..asks {
                    if visitor.halted() {
                        break;
                    }
                    let answer = visitor
                        .visit(Op::Start, n as usize, workload::long_start())
                        .await;
                    visitor.count(answer);
                }
            }
        });
    }
    gather(tasks).await
}

/// The resolution of Tokio's timer: a sleep ends at the first tick at or after its
/// deadline.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// When the visit (or call) numbered `ticket` is made and its latency counts from, or
/// `None` when the run's `stop` is past it. With a rate, each is due at its own
/// instant, and its latency counts from then when it is made late. Tokio's timer rounds
/// a deadline up to its next millisecond tick, which would add up to a millisecond of
/// the tool's own to every latency; the caller wakes at the tick before instead, so a
/// visit is made no later than due, and its latency counts from when it is made if
/// that is earlier.
pub(crate) async fn due(
    ticket: u64,
    start: Instant,
    stop: Stop,
    rate: Option<u64>,
) -> Option<Instant> {
    if let Stop::Count(n) = stop
        && ticket >= n
    {
        return None;
    }
    let (at, due) = match rate {
        Some(rate) => {
            let at = start + Duration::from_secs_f64(ticket as f64 / rate as f64);
            if let Some(early) = at.checked_sub(TIMER_TICK)
                && early > Instant::now()
            {
                tokio::time::sleep_until(early.into()).await;
            }
            (at, at.min(Instant::now()))
        }
        None => {
            let now = Instant::now();
            (now, now)
        }
    };
    match stop {
        Stop::For(d) if at.duration_since(start) >= d => None,
        _ => Some(due),
    }
}

/// What the measured visits saw.
pub(crate) struct Measured<V> {
    /// The visitors, with what each counted.
    pub(crate) visitors: Vec<V>,
    /// Their latencies.
    pub(crate) latencies: Latencies,
    /// How long they took, from the first visit's start: the visitors' set-up (their
    /// latency histograms are several MiB, zeroed) is not counted.
    pub(crate) seconds: f64,
}

/// Run the measured visits: `config.concurrency` visitors made by `make` until
/// `config.stop`.
pub(crate) async fn visit<V: Visitor>(
    config: &LoadConfig,
    progress: &Arc<Progress>,
    make: impl Fn(usize) -> V,
) -> Measured<V> {
    let tickets = Arc::new(AtomicU64::new(0));
    let recorder = Arc::new(Recorder::new(config.concurrency, config.workers));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for index in 0..config.concurrency {
        let mut visitor = make(index);
        let tickets = Arc::clone(&tickets);
        let recorder = Arc::clone(&recorder);
        let progress = Arc::clone(progress);
        let mut visits = Visits::new(config, index);
        let (stop, rate) = (config.stop, config.rate);
        tasks.spawn(async move {
            loop {
                if visitor.halted() {
                    break;
                }
                let ticket = tickets.fetch_add(1, Ordering::Relaxed);
                let Some(due) = due(ticket, start, stop, rate).await else {
                    break;
                };
                let (op, subject, input) = visits.next_visit();
                let answer = visitor.visit(op, subject, input).await;
                let micros = u64::try_from(due.elapsed().as_micros()).unwrap_or(u64::MAX);
                recorder.record(index, op, micros);
                visitor.count(answer);
                progress.visits.fetch_add(1, Ordering::Relaxed);
            }
            visitor
        });
    }
    let visitors = gather(tasks).await;
    let seconds = start.elapsed().as_secs_f64();
    Measured {
        visitors,
        latencies: recorder.total(),
        seconds,
    }
}

/// Every visitor, once done. A visitor that panicked is a bug: its panic goes on.
async fn gather<V: 'static>(mut tasks: JoinSet<V>) -> Vec<V> {
    let mut all = Vec::with_capacity(tasks.len());
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(visitor) => all.push(visitor),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    all
}
