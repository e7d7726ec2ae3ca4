//! `Ctx::wait` and `Ctx::progress`: a wait is a park its timer ends (on the manual
//! clock, across a restart too), cancelled as any park is; progress is a note shown once.

mod common;

use std::time::Duration;

use parkway::{Builder, Event, Ids, ManualClock, RunStatus, Runtime, Start};
use serde_json::json;

/// A target that reports progress, waits two seconds, and reports again.
fn register_slow(builder: Builder) -> Builder {
    builder.register("slow", &[], |ctx, _, _| async move {
        ctx.progress(0.0, Some(2.0), Some("starting"));
        ctx.wait(Duration::from_secs(2)).await?;
        ctx.progress(2.0, Some(2.0), None);
        Ok(json!("done"))
    })
}

async fn open(dir: Option<&std::path::Path>, clock: &ManualClock) -> Runtime {
    let mut builder = Builder::default()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential());
    if let Some(dir) = dir {
        builder = builder.data_dir(dir);
    }
    register_slow(builder)
        .build()
        .await
        .expect("the runtime builds")
}

fn progress(events: &[Event]) -> Vec<f64> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::RunProgress { progress, .. } => Some(*progress),
            _ => None,
        })
        .collect()
}

/// A wait parks the run until its deadline and no later; then the run goes on, its
/// outcome lands in its record, and nothing is left waiting on the subject. Progress
/// reported before the wait is not shown again by the replay after it.
#[tokio::test]
async fn a_wait_parks_until_its_deadline_and_leaves_nothing_waiting() {
    let clock = ManualClock::default();
    let rt = open(None, &clock).await;
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "slow")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let asks = record.asks.clone().unwrap();
    assert_eq!(asks.len(), 1);
    assert!(asks[0].is_wait(), "{:?}", asks[0]);
    assert_eq!(asks[0].payload, Some(json!({"wait": "2s"})));
    clock.advance(Duration::from_millis(1999));
    rt.settle().await;
    assert_eq!(
        rt.record(&record.run_id).await.unwrap().status,
        RunStatus::Parked
    );
    clock.advance(Duration::from_millis(1));
    rt.settle().await;
    let done = rt.record(&record.run_id).await.unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.result, Some(json!("done")));
    assert!(rt.list("s").await.unwrap().is_empty());
    assert_eq!(progress(&common::drain(&mut events)), vec![0.0, 2.0]);
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// A zero wait does not park.
#[tokio::test]
async fn a_zero_wait_does_not_park() {
    let clock = ManualClock::default();
    let rt = open(None, &clock).await;
    rt.register("instant", &[], |ctx, _, _| async move {
        ctx.wait(Duration::ZERO).await?;
        Ok(json!("at once"))
    });
    let record = rt.run(Start::new("s", "instant")).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
}

/// Cancelling a wait tears its run down: the run ends `cancelled`, and the timer does
/// nothing when its deadline passes.
#[tokio::test]
async fn cancelling_a_wait_cancels_its_run() {
    let clock = ManualClock::default();
    let rt = open(None, &clock).await;
    let record = rt.run(Start::new("s", "slow")).await.unwrap();
    let id = record.asks.unwrap()[0].id.clone();
    rt.cancel("s", &[&id]).await.unwrap();
    clock.advance(Duration::from_secs(5));
    rt.settle().await;
    let after = rt.record(&record.run_id).await.unwrap();
    assert_eq!(after.status, RunStatus::Cancelled);
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A wait survives a restart: the runtime rebuilt on the same directory re-arms its
/// timer, and the run ends when the deadline passes.
#[cfg(feature = "disk")]
#[tokio::test]
async fn a_wait_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let rt = open(Some(dir.path()), &clock).await;
    let record = rt.run(Start::new("s", "slow")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    rt.shutdown().await;
    drop(rt);

    let rt = open(Some(dir.path()), &clock).await;
    assert_eq!(
        rt.record(&record.run_id).await.unwrap().status,
        RunStatus::Parked
    );
    clock.advance(Duration::from_secs(2));
    rt.settle().await;
    let done = rt.record(&record.run_id).await.unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert!(rt.list("s").await.unwrap().is_empty());
}
