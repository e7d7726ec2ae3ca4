//! Run records for every run, and runs blocked in a `sync` user ask: both observed
//! through the public API on a manual clock.

mod common;

use std::time::Duration;

use parkway::{Ask, Event, Mode, RunStatus, Start, is_expiry_marker};
use serde_json::{Value, json};

/// Ends within this much real time, or the test fails: a hang check, never a timing.
const HANG: Duration = Duration::from_secs(10);

fn register_approver(rt: &parkway::Runtime) {
    rt.register("approver", &[], |ctx, _, _| async move {
        let answer = ctx
            .ask(
                Ask::user("apply?")
                    .answer_format("confirm")
                    .mode(Mode::Sync)
                    .timeout(Duration::from_secs(300)),
            )
            .await?;
        if is_expiry_marker(&answer) {
            return Ok(json!("timed out"));
        }
        Ok(json!({ "approved": answer }))
    });
}

/// A run blocked in a sync user ask leaves the runtime quiet: `settle` returns (it used
/// to wait for ever), and an answer unblocks the same activation.
#[tokio::test]
async fn a_blocked_sync_ask_settles_and_an_answer_unblocks_it() {
    let (rt, _clock) = common::runtime().await;
    register_approver(&rt);
    let run = rt.spawn(Start::new("ops", "approver")).await.unwrap();
    tokio::time::timeout(HANG, rt.settle())
        .await
        .expect("settle returns while the run waits for its answer");
    assert_eq!(rt.record(&run).await.unwrap().status, RunStatus::Running);
    let item = rt.inbox(1, None).unwrap().items.remove(0);
    rt.answer(&item.id, json!(true)).await.unwrap();
    tokio::time::timeout(HANG, rt.settle()).await.unwrap();
    let record = rt.record(&run).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(record.result, Some(json!({"approved": true})));
}

/// A sync ask's timeout is a timer on the runtime's clock: moving the manual clock to it
/// hands the expiry marker back, and not a moment before.
#[tokio::test]
async fn a_sync_ask_times_out_on_the_runtimes_clock() {
    let (rt, clock) = common::runtime().await;
    register_approver(&rt);
    let run = rt.spawn(Start::new("ops", "approver")).await.unwrap();
    rt.settle().await;
    clock.advance(Duration::from_secs(299));
    tokio::time::timeout(HANG, rt.settle()).await.unwrap();
    assert_eq!(rt.record(&run).await.unwrap().status, RunStatus::Running);
    clock.advance(Duration::from_secs(1));
    tokio::time::timeout(HANG, rt.settle()).await.unwrap();
    let record = rt.record(&run).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(record.result, Some(json!("timed out")));
    assert_eq!(rt.stats().await.user_open, 0);
}

/// A cancel tears a blocked run down, and the runtime still settles afterwards: the
/// blocked activation's unit is not counted twice nor lost.
#[tokio::test]
async fn a_blocked_sync_ask_can_be_cancelled_and_the_runtime_still_settles() {
    let (rt, _clock) = common::runtime().await;
    register_approver(&rt);
    let run = rt.spawn(Start::new("ops", "approver")).await.unwrap();
    rt.settle().await;
    let item = rt.inbox(1, None).unwrap().items.remove(0);
    rt.cancel("ops", &[item.id.as_str()]).await.unwrap();
    tokio::time::timeout(HANG, rt.settle()).await.unwrap();
    assert_eq!(rt.record(&run).await.unwrap().status, RunStatus::Cancelled);
    // A later run still settles exactly.
    let record = rt.run(Start::new("ops", "echo")).await.unwrap();
    tokio::time::timeout(HANG, rt.settle()).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(rt.stats().await.runs, 0);
}

/// Every run has a record, however it started, carrying its identity; it follows the run
/// as a resume moves it on.
#[tokio::test]
async fn every_run_has_a_record_with_its_identity() {
    let (rt, _clock) = common::runtime().await;
    let first = rt
        .run(Start::new("s", "asker").identity("alice"))
        .await
        .unwrap();
    assert_eq!(first.identity, "alice");
    let kept = rt.record(&first.run_id).await.unwrap();
    assert_eq!(kept, first);
    assert_eq!(kept.status, RunStatus::Parked);
    let ask = first.asks.as_ref().unwrap()[0].id.clone();
    rt.resume("s", &ask, json!(true)).await.unwrap();
    rt.settle().await;
    let kept = rt.record(&first.run_id).await.unwrap();
    assert_eq!(kept.status, RunStatus::Succeeded);
    assert_eq!(kept.identity, "alice");
    assert_eq!(kept.result, Some(json!({"answer": true})));
    assert!(rt.record("r-404").await.is_none());
}

/// An ended run's record is kept for the retention horizon, then dropped with an
/// event, so the records kept stay bounded; a run that has not ended keeps its record.
#[tokio::test]
async fn an_ended_runs_record_is_dropped_at_the_retention_horizon() {
    let (rt, clock) =
        common::runtime_with(|b| b.waiting_retention(Duration::from_secs(3600))).await;
    let mut events = rt.events();
    let done = rt.run(Start::new("s", "echo")).await.unwrap();
    let other = rt.run(Start::new("t", "echo")).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.stats().await.records, 2);
    clock.advance(Duration::from_secs(3599));
    rt.settle().await;
    assert!(rt.record(&done.run_id).await.is_some());
    assert!(
        !common::drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::RecordDropped { .. }))
    );
    clock.advance(Duration::from_secs(1));
    rt.settle().await;
    assert!(rt.record(&done.run_id).await.is_none());
    assert!(rt.record(&other.run_id).await.is_none());
    let dropped: Vec<Value> = common::drain(&mut events)
        .iter()
        .filter(|e| matches!(e, Event::RecordDropped { .. }))
        .map(common::json_of)
        .collect();
    assert_eq!(
        dropped,
        [
            json!({"event": "record_dropped", "subject": "s", "run": done.run_id}),
            json!({"event": "record_dropped", "subject": "t", "run": other.run_id}),
        ]
    );
    assert_eq!(rt.stats().await.records, 0);
}

/// A parked run keeps its record past the horizon: only an ended run's record expires.
#[tokio::test]
async fn a_live_runs_record_outlives_the_horizon() {
    let (rt, clock) = common::runtime_with(|b| b.waiting_retention(Duration::from_secs(60))).await;
    rt.register("patient", &[], |ctx, _, _| async move {
        let answer = ctx.ask(Ask::caller("later?").expiry_at("2h")).await?;
        Ok(answer)
    });
    let parked = rt.run(Start::new("s", "patient")).await.unwrap();
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    assert_eq!(
        rt.record(&parked.run_id).await.unwrap().status,
        RunStatus::Parked
    );
}
