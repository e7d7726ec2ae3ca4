//! The load over HTTP: the engine behind `parkway load --url`.
//!
//! [`run`] drives the workload of [`super::run`] — the same seeded visits, mix,
//! concurrency, stop, rate and latency histograms, through the same two route doors —
//! against a live `parkway serve`, with `POST /v1/routes/{door}/visit?subject=S`. The
//! server must serve the load's target and doors: `parkway serve --targets
//! examples/serve/load-targets.json` does. One HTTP client, its connections kept alive,
//! is shared by every visitor.
//!
//! Before the load it checks the server (`http::Http::check`): that it answers, takes
//! the token, and serves the workload (its doors read and compared when the token has
//! the admin scope), and opens the pool's connections, `concurrency` of them at once.
//! Then it measures the baseline, the same client sending
//! `GET /healthz` (the same server stack, no runtime work) for `bare_for`; then the
//! prefill and the measured visits. The subjects are named afresh for each run (a
//! random prefix), so runs against one server do not meet.
//!
//! Time is the server's real clock, not a [`parkway::ManualClock`] stopped when the
//! visits stop: after them the run waits until every short ask's deadline has passed
//! (`short_ttl` and a margin after the last visit), then lists every subject's parked
//! set (`GET /v1/subjects/{s}/parked`). Waiting outcomes are dropped by the server's own
//! retention (`INTERACTIONS_WAITING_RETENTION`), so some may still be waiting.
//!
//! The account is kept by interaction id (`tally.rs`): the answers name every ask a run
//! raised and every ask a visitor resolved, and the parked sets what is left; an ask
//! none of them names must have expired, which a long-lived one cannot have. The
//! runtime's own events and counters are not read (`/v1/events` is admin-only, and no
//! endpoint serves the counters).

mod http;
mod mcp;
mod report;
mod tally;

pub use mcp::{McpAccount, McpReport, run as run_mcp};
pub use report::{Baseline, RemoteReport};

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::task::JoinSet;

use super::config::{LoadConfig, LoadError, Stop};
use super::drive::{self, Phase, Progress, Visitor};
use super::workload::{Expiry, Op};
use http::{Failure, Http, VisitReply};
use tally::{Left, Tally};

/// The server a `--url` run visits.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its address, `http://HOST:PORT` (a path prefix is kept).
    pub url: String,
    /// A bearer token with the `visit` scope (and `admin`, for the doors to be read).
    pub token: String,
}

/// After the last short deadline, how long the run waits before it lists the subjects:
/// the server's timers fire on a millisecond tick, a little after a deadline.
const SETTLE_MARGIN: Duration = Duration::from_millis(100);

/// A visitor over HTTP.
struct Remote {
    http: Arc<Http>,
    tally: Tally,
}

impl Visitor for Remote {
    /// The expiry a start asked for, and the answer.
    type Answer = (Expiry, Result<VisitReply, Failure>);

    async fn visit(&self, op: Op, subject: usize, input: Value) -> Self::Answer {
        let answer = self.http.visit(op, subject, &input).await;
        (Expiry::of(&input), answer)
    }

    fn count(&mut self, (expiry, answer): Self::Answer) {
        self.tally.count(expiry, answer);
    }
}

/// A visitor of the baseline: whatever the visit, `GET /healthz`.
struct Healthz {
    http: Arc<Http>,
    tally: Tally,
}

impl Visitor for Healthz {
    type Answer = Result<(), Failure>;

    async fn visit(&self, _: Op, _: usize, _: Value) -> Self::Answer {
        self.http.healthz().await
    }

    fn count(&mut self, answer: Self::Answer) {
        if let Err(failure) = answer {
            self.tally.error(failure.kind(), failure.message());
        }
    }
}

/// Every visitor's tally, added up.
fn total<V>(visitors: Vec<V>, tally: impl Fn(V) -> Tally) -> Tally {
    let mut all = Tally::default();
    for visitor in visitors {
        all.add(tally(visitor));
    }
    all
}

/// A prefix no other run's names have: `load-`, 32 random bits in hex, and `-`.
fn fresh_prefix() -> String {
    format!("load-{:08x}-", rand::random::<u32>())
}

/// Run the load described by `config` against `server`, reporting progress to
/// `progress`. `config.data`, `retention` and `passivate_after` are the server's
/// business and are not read; `bare_for` is how long the baseline runs, and `workers`
/// is only the number of the caller's Tokio threads, reported.
///
/// Must be called inside a multi-threaded Tokio runtime.
pub async fn run(
    config: &LoadConfig,
    server: &Server,
    progress: &Arc<Progress>,
) -> Result<RemoteReport, LoadError> {
    config.check()?;
    let run = fresh_prefix();
    let prefix = format!("{run}s");
    let http = Arc::new(Http::new(
        &server.url,
        &server.token,
        &prefix,
        &format!("{run}probe"),
        config.subjects,
    )?);
    let doors_checked = http.check(config).await?;

    warm(&http, config.concurrency).await;
    progress.set_phase(Phase::Baseline);
    let baseline = baseline(&http, config).await;

    let visitor = |_: usize| Remote {
        http: Arc::clone(&http),
        tally: Tally::default(),
    };
    progress.set_phase(Phase::Prefill);
    let prefill = total(drive::prefill(config, visitor).await, |v| v.tally);

    progress.set_phase(Phase::Visits);
    let measured = drive::visit(config, progress, visitor).await;
    let ended = Instant::now();
    let visits = total(measured.visitors, |v| v.tally);

    progress.set_phase(Phase::Settle);
    if config.short_share > 0.0 {
        tokio::time::sleep_until((ended + config.short_ttl + SETTLE_MARGIN).into()).await;
    }
    let settle_seconds = ended.elapsed().as_secs_f64();
    let left = list(&http, config).await;
    let prefilled_asks = prefill.asks();
    let did = report::Did {
        started: visits.started,
        idle: visits.idle,
        resolved: visits.resumed + visits.cancelled.len() as u64,
    };
    let mut seen = prefill;
    seen.add(visits);
    let account = tally::balance(&seen, &left);

    progress.set_phase(Phase::Done);
    Ok(RemoteReport::new(report::Parts {
        config,
        url: http.base().to_string(),
        subject_prefix: prefix,
        doors_checked,
        prefilled_asks,
        did,
        errors: seen.errors,
        latencies: measured.latencies,
        seconds: measured.seconds,
        settle_seconds,
        account,
        baseline,
    }))
}

/// The `GET /healthz` baseline, for `config.bare_for` at the load's concurrency and
/// rate; `None` when `bare_for` is zero.
async fn baseline(http: &Arc<Http>, config: &LoadConfig) -> Option<Baseline> {
    if config.bare_for.is_zero() {
        return None;
    }
    let timed = LoadConfig {
        stop: Stop::For(config.bare_for),
        ..config.clone()
    };
    let measured = drive::visit(&timed, &Progress::new(), |_: usize| Healthz {
        http: Arc::clone(http),
        tally: Tally::default(),
    })
    .await;
    let tally = total(measured.visitors, |v| v.tally);
    Some(Baseline::new(&measured.latencies, measured.seconds, tally))
}

/// Open the pool's connections before anything is measured: `concurrency` requests
/// to `/healthz` at once, so neither the baseline nor the visits pay for the
/// connections' set-up. A failure shows again in the baseline or the visits.
async fn warm(http: &Arc<Http>, concurrency: usize) {
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency {
        let http = Arc::clone(http);
        tasks.spawn(async move { http.healthz().await });
    }
    while tasks.join_next().await.is_some() {}
}

/// Every subject's parked set, `config.concurrency` requests at a time.
async fn list(http: &Arc<Http>, config: &LoadConfig) -> Left {
    let http = Arc::clone(http);
    left_on(config.subjects, config.concurrency, move |n| {
        let http = Arc::clone(&http);
        async move { http.parked(n).await }
    })
    .await
}

/// How long a subject refused as `not_owner` (its slot changing hands between nodes
/// sharing a database) is read again before it counts as unread.
const SETTLE_OWNER: std::time::Duration = std::time::Duration::from_secs(30);

/// `read(n)`, read again every 100 ms while it is refused as `not_owner`, for at most
/// [`SETTLE_OWNER`]: a cluster still handing slots over answers for them shortly.
async fn read_settled<F, Fut>(read: &F, n: usize) -> Result<Vec<http::EntryReply>, Failure>
where
    F: Fn(usize) -> Fut + Sync,
    Fut: std::future::Future<Output = Result<Vec<http::EntryReply>, Failure>>,
{
    let deadline = tokio::time::Instant::now() + SETTLE_OWNER;
    loop {
        match read(n).await {
            Err(Failure::Status { kind, .. })
                if kind == "not_owner" && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            done => return done,
        }
    }
}

/// What `read` finds on the subjects `0..count`, `concurrency` reads at a time: the
/// entries left, and the subjects that could not be read, with the first reason.
async fn left_on<F, Fut>(count: usize, concurrency: usize, read: F) -> Left
where
    F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Vec<http::EntryReply>, Failure>> + Send,
{
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = JoinSet::new();
    for _ in 0..concurrency.clamp(1, count.max(1)) {
        let (read, next) = (read.clone(), Arc::clone(&next));
        tasks.spawn(async move {
            let mut left = Left::default();
            loop {
                let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if n >= count {
                    break left;
                }
                match read_settled(&read, n).await {
                    Ok(entries) => left.add(entries),
                    Err(failure) => {
                        left.unread += 1;
                        left.unread_reason.get_or_insert_with(|| {
                            format!("{}: {}", failure.kind(), failure.message())
                        });
                    }
                }
            }
        });
    }
    let mut all = Left::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(part) => {
                all.entries.extend(part.entries);
                all.strange += part.strange;
                all.unread += part.unread;
                if all.unread_reason.is_none() {
                    all.unread_reason = part.unread_reason;
                }
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    all
}
