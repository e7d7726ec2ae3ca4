//! A runtime on a data directory: what was acknowledged before it stopped is found
//! again when a runtime is built on the same directory.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parkway::{
    Ask, Builder, DoorSpec, EntryStatus, Ids, ManualClock, Resumed, RunStatus, Runtime, Start,
};
use serde_json::json;

/// A runtime on `dir`, with a target that counts its journaled step and asks its caller.
async fn open(dir: &std::path::Path, clock: &ManualClock, steps: &Arc<AtomicUsize>) -> Runtime {
    common::with_deploy(Builder::default().data_dir(dir), clock, steps)
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
        (id.as_str(), EntryStatus::Asking)
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

/// A runtime on `dir` with a target that asks its caller and one that asks a user, each
/// with an hour to answer.
async fn open_two(dir: &std::path::Path, clock: &ManualClock) -> Runtime {
    Builder::default()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .data_dir(dir)
        .register("deploy", &[], |ctx, _, _| async move {
            let answer = ctx.ask(Ask::caller("proceed?").expiry_at("1h")).await?;
            Ok(json!({ "answer": answer }))
        })
        .register("review", &[], |ctx, _, _| async move {
            let answer = ctx.ask(Ask::user("approve?").expiry_at("1h")).await?;
            Ok(json!({ "answer": answer }))
        })
        .build()
        .await
        .expect("the runtime opens its data directory")
}

/// An open reads only the subjects it must: one offering a user ask (for the inbox).
/// Every other subject stays on disk, counted in the ceilings from its head, until it is
/// touched: a list, a record lookup, or its own deadline, which fires although nothing
/// touched it. A kept record is read from the store when asked for and dropped once at
/// its horizon.
#[tokio::test]
async fn an_open_reads_only_what_it_must_and_the_rest_when_touched() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let rt = open_two(dir.path(), &clock).await;
    let mut runs = Vec::new();
    for s in ["s0", "s1", "s2", "s3"] {
        runs.push(rt.run(Start::new(s, "deploy")).await.unwrap());
    }
    let review = rt.run(Start::new("u", "review")).await.unwrap();
    let ended = rt.run(Start::new("e", "deploy")).await.unwrap();
    let ask = ended.asks.clone().unwrap()[0].id.clone();
    rt.resume("e", &ask, json!("yes")).await.unwrap();
    rt.shutdown().await;
    drop(rt);

    let rt = open_two(dir.path(), &clock).await;
    let stats = rt.stats().await;
    // Only the subject offering a user ask is read: its run is the one record known,
    // its deadline the one timer armed.
    assert_eq!(
        (
            stats.live_subjects,
            stats.passive_subjects,
            stats.records,
            stats.timers
        ),
        (0, 1, 1, 1),
        "{stats:?}"
    );
    assert_eq!((stats.caller_open, stats.user_open, stats.runs), (4, 1, 5));
    let inbox = rt.inbox(1, None).unwrap();
    assert_eq!(inbox.items.len(), 1, "{inbox:?}");
    assert_eq!(
        rt.record(&ended.run_id).await.map(|r| r.status),
        Some(RunStatus::Succeeded),
        "a kept record is read from the store"
    );
    assert_eq!(
        rt.record(&runs[1].run_id).await.map(|r| r.status),
        Some(RunStatus::Parked),
        "a live run's record is found through its subject, read back"
    );
    assert_eq!(rt.list("s2").await.unwrap().len(), 1);
    assert_eq!(rt.stats().await.passive_subjects, 3);
    // Every deadline fires, on subjects read back and on those never touched.
    clock.advance(Duration::from_secs(3601));
    rt.settle().await;
    for (run, s) in runs.iter().zip(["s0", "s1", "s2", "s3"]) {
        assert!(rt.list(s).await.unwrap().is_empty(), "{s}");
        assert_eq!(
            rt.record(&run.run_id).await.map(|r| r.status),
            Some(RunStatus::Cancelled),
            "{s}"
        );
    }
    assert!(rt.inbox(1, None).unwrap().items.is_empty());
    // A user ask resumes its run with no answer at its deadline.
    assert_eq!(
        rt.record(&review.run_id).await.map(|r| r.status),
        Some(RunStatus::Succeeded)
    );
    // Its outcome waits on its subject, counted against the caller ceiling.
    let waiting = rt.list("u").await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].status, EntryStatus::Finished);
    let stats = rt.stats().await;
    assert_eq!((stats.caller_open, stats.user_open, stats.runs), (1, 0, 0));
    // The kept record is dropped at its horizon, once, though it was never in memory.
    clock.advance(Duration::from_secs(24 * 3600));
    rt.settle().await;
    assert_eq!(rt.record(&ended.run_id).await, None);
    let dropped = rt
        .event_log(1, 10_000)
        .unwrap()
        .into_iter()
        .filter(|l| {
            matches!(&l.event, parkway::Event::RecordDropped { run, .. } if *run == ended.run_id)
        })
        .count();
    assert_eq!(dropped, 1);
    rt.shutdown().await;
}

/// A subject's wake may come early, never late: resolving the ask whose deadline was
/// its earliest leaves its wake where it was, so after a restart the subject is read
/// back at that earlier instant, finds nothing due, and its later deadline still fires.
#[tokio::test]
async fn an_early_wake_after_a_restart_is_harmless_and_the_later_deadline_fires() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let rt = open_two(dir.path(), &clock).await;
    let first = rt.run(Start::new("s", "deploy")).await.unwrap();
    clock.advance(Duration::from_secs(1800));
    let second = rt.run(Start::new("s", "deploy")).await.unwrap();
    let ask = first.asks.clone().unwrap()[0].id.clone();
    rt.resume("s", &ask, json!("yes")).await.unwrap();
    rt.shutdown().await;
    drop(rt);

    let rt = open_two(dir.path(), &clock).await;
    assert_eq!(rt.stats().await.passive_subjects, 0, "nothing read at open");
    // Past the first ask's old deadline: the subject is read back, nothing expires.
    clock.advance(Duration::from_secs(1801));
    rt.settle().await;
    let stats = rt.stats().await;
    assert_eq!(
        (stats.passive_subjects, stats.caller_open),
        (1, 1),
        "{stats:?}"
    );
    assert_eq!(
        rt.record(&second.run_id).await.map(|r| r.status),
        Some(RunStatus::Parked)
    );
    // Past the second ask's deadline: it expires.
    clock.advance(Duration::from_secs(1800));
    rt.settle().await;
    assert_eq!(rt.stats().await.caller_open, 0);
    assert_eq!(
        rt.record(&second.run_id).await.map(|r| r.status),
        Some(RunStatus::Cancelled)
    );
    rt.shutdown().await;
}

/// A user ask answered before a restart is still told `already resolved` by the answer
/// door after it (the subject remembers how and when; the door finds the subject in
/// the durable log), while an id never issued is still unknown.
#[tokio::test]
async fn an_answer_to_a_user_ask_resolved_before_a_restart_is_already_resolved() {
    let dir = tempfile::tempdir().expect("a directory");
    let clock = ManualClock::default();
    let open = |dir: std::path::PathBuf, clock: ManualClock| async move {
        Builder::default()
            .without_env()
            .clock(clock)
            .ids(Ids::sequential())
            .data_dir(dir)
            .register("approve", &[], |ctx, _, _| async move {
                let answer = ctx.ask(Ask::user("approve?").expiry_at("1h")).await?;
                Ok(json!({ "answer": answer }))
            })
            .build()
            .await
            .expect("opens")
    };
    let rt = open(dir.path().to_path_buf(), clock.clone()).await;
    rt.run(Start::new("s", "approve")).await.expect("parks");
    let id = rt.inbox(1, None).expect("a page").items[0].id.clone();
    rt.answer(&id, json!("yes")).await.expect("answered");
    rt.settle().await;
    let again = rt.answer(&id, json!("no")).await;
    assert!(
        matches!(again, Err(parkway::AnswerError::AlreadyResolved { .. })),
        "{again:?}"
    );
    rt.shutdown().await;

    let rt = open(dir.path().to_path_buf(), clock.clone()).await;
    let again = rt.answer(&id, json!("no")).await;
    assert!(
        matches!(&again, Err(parkway::AnswerError::AlreadyResolved { id: i, .. }) if *i == id),
        "{again:?}"
    );
    let never = rt.answer("no-such-id", json!("no")).await;
    assert!(
        matches!(never, Err(parkway::AnswerError::Unknown { .. })),
        "{never:?}"
    );
    rt.shutdown().await;
}

/// A refused visit costs the store nothing: whatever refuses it (a contract's shape, an
/// id the subject does not hold, an input over the size cap, a broken target, on a
/// subject the store holds or one never seen), nothing is written, and the refusal is
/// still answered to its visitor and published as `visit_refused`. (Each refusal was
/// once logged as an event of its own, a write per request from any client allowed to
/// visit.)
#[tokio::test]
async fn a_refused_visit_writes_nothing_to_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, _clock) = common::runtime_with(|b| b.data_dir(dir.path()).max_input_bytes(64)).await;
    rt.save_door(DoorSpec::route("resume", "asker").resume_expr(r#"{"id": .id, "payload": 1}"#))
        .unwrap();
    rt.save_door(DoorSpec::route("twice", "asker").resume_expr("1, 2"))
        .unwrap();
    rt.save_door(DoorSpec::route("fails", "asker").start_expr("error(\"no\")"))
        .unwrap();
    rt.save_door(DoorSpec::route("extras", "echo").extras_expr(r#"{"nope": 1}"#))
        .unwrap();
    rt.run(Start::new("held", "asker")).await.unwrap();
    rt.settle().await;
    let mut events = rt.events();
    let before = rt.store_stats().expect("a durable runtime");

    let big = json!({"pad": "x".repeat(100)});
    let table = [
        (
            "resume",
            json!({"id": "i-404"}),
            "unknown interaction i-404",
        ),
        ("twice", json!({}), "emitted more than one value"),
        ("fails", json!({}), "start_expr failed"),
        ("extras", json!({}), "does not declare extras key(s) nope"),
        ("resume", big, "more than the limit of 64"),
    ];
    let mut refused = 0;
    for subject in ["held", "never-seen"] {
        for (door, input, message) in &table {
            for _ in 0..10 {
                let error = rt.visit(door, subject, input.clone()).await.unwrap_err();
                assert!(
                    error.to_string().contains(message),
                    "{door} on {subject}: {error}"
                );
                refused += 1;
            }
        }
    }
    rt.settle().await;
    let after = rt.store_stats().expect("a durable runtime");
    assert_eq!(
        (after.batches, after.bytes, after.syncs),
        (before.batches, before.bytes, before.syncs),
        "{refused} refused visits wrote nothing"
    );
    let published = common::drain(&mut events)
        .iter()
        .filter(|e| common::kind(e) == "visit_refused")
        .count();
    assert_eq!(published, refused, "every refusal is published");
    assert!(rt.list("never-seen").await.unwrap().is_empty());
}
