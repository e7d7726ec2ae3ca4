//! A load test of concurrent door visits: the engine behind `parkway load`.
//!
//! [`run`] builds a runtime holding N subjects, drives C concurrent visitors through two
//! route doors for a number of visits or for a duration, and reports throughput, latency
//! percentiles and an account that proves nothing was lost. It then measures the *bare*
//! baseline: the same compiled door expressions over the same inputs and `$parked`
//! values, evaluated in a tight loop on as many threads as the runtime had, with no
//! runtime around them. `overhead_ratio` is bare throughput over runtime throughput.
//! [`remote::run`] drives the same workload over HTTP against a live `parkway serve`.
//!
//! # The workload
//!
//! Every run of the target `asker` asks its caller once and returns the answer. The door
//! `work` has the contract `resume_expr` + `start_expr`; the visit input's `op` picks what
//! it does, and the expressions pick the entry from `$parked`, so visitors never race
//! each other for ids (the subject actor serialises them):
//!
//! - `start`: start an `asker` when the subject holds fewer than `max_entries` entries;
//! - `resume`: resume the oldest `asking` entry (the visitor receives the result);
//! - `take`: take the oldest `finished` or `failed` waiting outcome.
//!
//! The door `sweep` has only a `cancel_expr`: a `cancel` visit cancels the oldest `asking`
//! entry. A share of the asks expire during the run, half of those with `on_expiry:
//! resume`, whose outcomes wait on the subject for a `take` or for the retention horizon.
//!
//! Before the visits, a prefill starts long-lived asks on every subject, one subject
//! at a time (a visitor starts all of a subject's asks, then takes the next), so filled
//! subjects passivate while the rest fill.
//!
//! Time is a [`ManualClock`] that follows the wall clock while
//! visitors run and stops when they do, so the closing account is read off a runtime in
//! which nothing moves. After the visits the clock is moved past the passivation delay
//! until every subject is idle (the timers landing in one move wake their subjects once
//! more; at most four moves), so that idle subjects give up their actors before the count
//! of live subjects is read.
//!
//! # The account
//!
//! The runtime's events and the visitors' own counts must balance:
//!
//! - asks raised = resumed + cancelled + expired + still open;
//! - outcomes (runs that finished or failed) = delivered to a visitor + taken + dropped
//!   + still waiting;
//! - waiting outcomes stored = taken + dropped + still waiting;
//! - every ask raised reached a visitor in its start record, or the start record was the
//!   cancellation of the run (its ask cancelled or expired first); the takes and cancels the
//!   visitors saw are the ones the runtime reported; the runtime's own counters agree with
//!   what is left on the subjects.
//!
//! `lost` is the sum of every imbalance, plus any events the account could not read
//! (a lagging subscriber): it must be 0.

mod account;
mod bare;
mod config;
mod drive;
pub mod remote;
mod report;
mod rss;
mod stages;
mod workload;

pub use config::{LoadConfig, LoadError, Mix, Stop};
pub use drive::{Phase, Progress};
pub use report::{Account, Latency, Measured, Report};
pub use stages::{StageFigures, StageReport};

use std::sync::Arc;
use std::time::Duration;

use parkway::ManualClock;

/// Run the load described by `config`, reporting progress to `progress`.
///
/// Must be called inside a multi-threaded Tokio runtime; the bare baseline uses
/// `config.workers` threads of its own.
///
/// A runtime that stops while the visits run (its store failed: a full disk, say) stops
/// them at once: the run ends with [`LoadError::Stopped`], naming the store's failure.
pub async fn run(config: &LoadConfig, progress: &Arc<Progress>) -> Result<Report, LoadError> {
    config.check()?;
    let clock = ManualClock::default();
    let stages = config.stages.then(|| Arc::new(stages::Stages::default()));
    let rt = workload::build(config, clock.clone(), stages.clone()).await?;
    load(config, progress, rt, clock, stages).await
}

/// [`run`] on `rt`, built by `workload::build` on `clock`.
async fn load(
    config: &LoadConfig,
    progress: &Arc<Progress>,
    rt: parkway::Runtime,
    clock: ManualClock,
    stages: Option<Arc<stages::Stages>>,
) -> Result<Report, LoadError> {
    let events = account::Observer::start(&rt)?;
    let follow = drive::follow_wall_clock(clock.clone());

    progress.set_phase(Phase::Prefill);
    let visitor = drive::Local::maker(&rt, config.subjects);
    let prefilled = drive::Prefilled {
        client: drive::Local::total(drive::prefill(config, &visitor).await),
    };
    let rss_after_prefill = rss::current();
    if rt.is_shut_down() {
        follow.stop().await;
        return Err(halt(&rt, events, "prefill").await);
    }

    progress.set_phase(Phase::Visits);
    // The stages are measured over the visits alone.
    let _ = stages.as_ref().map(|s| s.take());
    let store_before = rt.store_stats();
    let drive::Measured {
        visitors,
        latencies,
        seconds,
    } = drive::visit(config, progress, &visitor).await;
    let client = drive::Local::total(visitors);
    let store_after = rt.store_stats();
    let stages = stages.map(|s| s.take());
    follow.stop().await;
    if rt.is_shut_down() {
        return Err(halt(&rt, events, "visits").await);
    }

    progress.set_phase(Phase::Settle);
    rt.settle().await;
    // Timers landing in one move (short expiries, then the retention of the outcomes
    // they leave) make their subjects busy once more: move until every subject is idle.
    for _ in 0..4 {
        // A move past the clock's last instant (an absurd --passivate-after) is refused:
        // what is left is then read as it stands.
        if clock
            .try_advance(
                config
                    .passivate_after
                    .saturating_add(Duration::from_secs(1)),
            )
            .is_err()
        {
            break;
        }
        rt.settle().await;
        if rt.stats().await.live_subjects == 0 {
            break;
        }
    }
    let observed = events.finish().await;
    // The peak before the listing: it converts every subject's parked set for the bare
    // baseline (the process's own peak, after it, is reported beside).
    let stats = rt.stats().await;
    // Held first: the peak read after it bounds it, whatever the runtime's threads
    // allocate between the two reads.
    let rss_held = rss::held();
    let peak_rss = rss::peak();
    // The baseline is only compared with measured visits: a run without them (the
    // memory run, `--visits 0`) skips it and the conversions it needs.
    let compare = latencies.visits() > 0;
    let left = account::Left::read(&rt, config.subjects, compare).await;

    progress.set_phase(Phase::Bare);
    let bare = if compare {
        bare::measure(&rt, config, &left.parked)
    } else {
        bare::Bare::default()
    };
    let process_peak_rss = rss::peak();
    // Closed as an embedder closes it: a data directory's memtables are flushed, so the
    // next open of it replays nothing of the journal.
    rt.shutdown().await;

    progress.set_phase(Phase::Done);
    let account = Account::balance(&client, &observed, &left, &stats, &prefilled.client);
    Ok(Report::new(report::Parts {
        config,
        client,
        latencies,
        seconds,
        account,
        prefilled,
        stats,
        peak_rss,
        process_peak_rss,
        rss_after_prefill,
        rss_held,
        bare,
        store: store_before.zip(store_after),
        stages,
    }))
}

/// The runtime stopped during `phase`: the observer and the runtime are closed, and the
/// error says why (the store's failure, if that is it).
async fn halt(rt: &parkway::Runtime, events: account::Observer, phase: &'static str) -> LoadError {
    let failure = rt.store_failure();
    events.finish().await;
    rt.shutdown().await;
    LoadError::stopped(phase, failure)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hang guard only: visits that do not stop show as a timeout, never as a slow pass.
    const GUARD: Duration = Duration::from_secs(120);

    /// Visits that would never end but for the halt.
    fn endless() -> LoadConfig {
        LoadConfig {
            subjects: 20,
            concurrency: 4,
            stop: Stop::Count(u64::MAX),
            prefill: 1,
            bare_for: Duration::from_millis(10),
            workers: 2,
            ..LoadConfig::default()
        }
    }

    /// What the load says when its runtime stopped, with and without a store failure.
    #[test]
    fn a_stopped_runtime_is_told_with_its_store_failure() {
        let disk_full =
            "store /data: writing a batch failed: No space left on device (os error 28)";
        let table = [
            (
                "visits",
                Some(disk_full),
                "the runtime stopped during the visits: its store failed: store /data: writing a batch failed: No space left on device (os error 28)",
            ),
            (
                "prefill",
                None,
                "the runtime stopped during the prefill: it was shut down",
            ),
        ];
        for (phase, failure, message) in table {
            let error = LoadError::stopped(phase, failure.map(str::to_owned));
            assert_eq!(error.to_string(), message);
        }
    }

    /// A runtime that stops while the visits run (as one does when its store fails: the
    /// store's failure closes it exactly as a shutdown does) stops the visitors at once:
    /// the load ends with `Stopped`, not with an account of thousands of visits refused
    /// and "lost" (a full disk once showed as `lost 92774`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn visits_stop_at_once_when_the_runtime_stops() {
        let config = endless();
        let clock = ManualClock::default();
        let rt = workload::build(&config, clock.clone(), None)
            .await
            .expect("builds");
        // Stopped by the runtime's own events: the 200th run started, during the visits.
        let mut events = rt.events();
        let progress = Progress::new();
        let stopper = {
            let (rt, progress) = (rt.clone(), Arc::clone(&progress));
            tokio::spawn(async move {
                let mut started = 0;
                while let Ok(event) = events.recv().await {
                    if matches!(event, parkway::Event::RunStarted { .. }) {
                        started += 1;
                        if started == 200 {
                            rt.shutdown().await;
                            return progress.visits();
                        }
                    }
                }
                u64::MAX
            })
        };
        let result = tokio::time::timeout(GUARD, load(&config, &progress, rt, clock, None))
            .await
            .expect("the visits stopped");
        let at_shutdown = stopper.await.expect("the stopper ran");
        match result {
            Err(LoadError::Stopped { phase, why }) => {
                assert_eq!((phase, why.as_str()), ("visits", "it was shut down"));
            }
            other => panic!("expected Stopped, got {:?}", other.map(|r| r.lost)),
        }
        // Each visitor makes at most the one visit under way when the runtime stopped.
        let visits = progress.visits();
        assert!(
            visits <= at_shutdown + config.concurrency as u64,
            "{visits} visits, {at_shutdown} when it stopped"
        );
    }

    /// A runtime already stopped when the prefill begins: not one visit is measured.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_runtime_stopped_before_the_prefill_makes_no_visit() {
        let config = endless();
        let clock = ManualClock::default();
        let rt = workload::build(&config, clock.clone(), None)
            .await
            .expect("builds");
        rt.shutdown().await;
        let progress = Progress::new();
        let result = tokio::time::timeout(GUARD, load(&config, &progress, rt, clock, None))
            .await
            .expect("the load ended");
        assert!(
            matches!(
                &result,
                Err(LoadError::Stopped {
                    phase: "prefill",
                    ..
                })
            ),
            "{:?}",
            result.map(|r| r.lost)
        );
        assert_eq!(progress.visits(), 0);
    }
}
