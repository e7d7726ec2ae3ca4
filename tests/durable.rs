//! A runtime on a data directory: what was acknowledged before it stopped is found
//! again when a runtime is built on the same directory.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parkway::{
    Ask, Builder, DoorSpec, Ids, ManualClock, Resumed, RunStatus, Runtime, Start, Status,
};
use serde_json::json;

/// A runtime on `dir`, with a target that counts its journaled step and asks its caller.
async fn open(dir: &std::path::Path, clock: &ManualClock, steps: &Arc<AtomicUsize>) -> Runtime {
    let steps = Arc::clone(steps);
    Builder::default()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .data_dir(dir)
        .register("deploy", &[], move |ctx, _, _| {
            let steps = Arc::clone(&steps);
            async move {
                let n: usize = ctx
                    .step("prepare", || async move {
                        Ok::<_, String>(steps.fetch_add(1, Ordering::SeqCst) + 1)
                    })
                    .await?;
                let answer = ctx.ask(Ask::caller("proceed?").expiry_at("1h")).await?;
                Ok(json!({"prepared": n, "answer": answer}))
            }
        })
        .build()
        .await
        .expect("the runtime opens its data directory")
}

/// A run parked before a restart is resumed after it, and its journaled step does not
/// run again.
#[tokio::test]
async fn a_run_parked_before_a_restart_is_resumed_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let rt = open(dir.path(), &clock, &steps).await;
    let record = rt.run(Start::new("s", "deploy")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let id = record.asks.unwrap()[0].id.clone();
    rt.save_door(DoorSpec::route("go", "deploy")).unwrap();
    rt.shutdown().await;
    drop(rt);

    let rt = open(dir.path(), &clock, &steps).await;
    let parked = rt.list("s").await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(
        (parked[0].id.as_str(), parked[0].status),
        (id.as_str(), Status::Asking)
    );
    assert_eq!(
        rt.record(&record.run_id).await.map(|r| r.status),
        Some(RunStatus::Parked)
    );
    let Resumed::Outcome(done) = rt.resume("s", &id, json!("yes")).await.unwrap() else {
        panic!("a single ask resumes at once")
    };
    assert_eq!(done.result, Some(json!({"prepared": 1, "answer": "yes"})));
    assert_eq!(
        steps.load(Ordering::SeqCst),
        1,
        "the journaled step ran once"
    );
    // The door saved before the restart is there, and a new run does not reuse an id.
    let visit = rt.visit("go", "t", json!({})).await.unwrap();
    let parkway::VisitOutcome::Started { run_id, .. } = visit.outcome else {
        panic!("{visit:?}")
    };
    assert_ne!(run_id, record.run_id);
    rt.shutdown().await;
}

/// An ask's deadline is armed again after a restart: the expiry fires and resolves the
/// ask, once.
#[tokio::test]
async fn a_deadline_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let rt = open(dir.path(), &clock, &steps).await;
    let record = rt.run(Start::new("s", "deploy")).await.unwrap();
    rt.shutdown().await;
    drop(rt);
    let rt = open(dir.path(), &clock, &steps).await;
    clock.advance(Duration::from_secs(3601));
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
    assert_eq!(
        rt.record(&record.run_id).await.map(|r| r.status),
        Some(RunStatus::Cancelled)
    );
    rt.shutdown().await;
}

/// A directory held by a live runtime is refused to a second one, naming the path.
#[tokio::test]
async fn a_directory_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let rt = open(dir.path(), &clock, &steps).await;
    let second = Builder::default()
        .without_env()
        .data_dir(dir.path())
        .build()
        .await
        .expect_err("the second open is refused");
    let message = second.to_string();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    rt.shutdown().await;
}

/// A change the store acknowledges after its subject passivated (here the drop of a
/// subject's last waiting outcome, which leaves it empty) still shows its effects.
#[tokio::test]
async fn a_change_acknowledged_after_passivation_still_shows_its_event() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let rt = Builder::default()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .data_dir(dir.path())
        .waiting_retention(Duration::from_secs(1800))
        .passivate_after(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    rt.register("asker", &[], |ctx, _, _| async move {
        Ok(ctx.ask(Ask::caller("q").expiry_at("1h")).await?)
    });
    let record = rt.run(Start::new("s", "asker")).await.unwrap();
    let id = record.asks.unwrap()[0].id.clone();
    rt.resume_detached("s", &id, json!("yes")).await.unwrap();
    rt.settle().await;
    let mut events = rt.events();
    clock.advance(Duration::from_secs(1801));
    rt.settle().await;
    let mut dropped = false;
    while let Ok(event) = events.try_recv() {
        dropped |= matches!(event, parkway::Event::WaitingOutcomeDropped { ref interaction, .. } if *interaction == id);
    }
    assert!(dropped, "the drop of the waiting outcome is published");
    assert!(rt.list("s").await.unwrap().is_empty());
    rt.shutdown().await;
}

/// Once `shutdown` returns, the directory is free: a runtime built on it at once opens
/// it (it is never found held by the one that stopped).
#[tokio::test]
async fn the_directory_is_free_once_shutdown_returns() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    for round in 0..20 {
        let rt = open(dir.path(), &clock, &steps).await;
        let record = rt
            .run(Start::new(format!("s{round}"), "deploy"))
            .await
            .unwrap();
        let id = record.asks.unwrap()[0].id.clone();
        if round % 2 == 1 {
            rt.resume_detached(&format!("s{round}"), &id, json!("yes"))
                .await
                .unwrap();
        }
        rt.shutdown().await;
        drop(rt);
    }
    let rt = open(dir.path(), &clock, &steps).await;
    // Every even round's run is still parked; every odd one's outcome waits.
    for round in 0..20 {
        assert_eq!(
            rt.list(&format!("s{round}")).await.unwrap().len(),
            1,
            "s{round}"
        );
    }
    rt.shutdown().await;
}
