//! Doors end to end: a hook fire whose run asks its caller, a route that resumes it and
//! receives the outcome inline; a schedule fire that resumes a park and leaves a waiting
//! outcome the next route visit takes; the seed's three example programs.

mod common;

use std::time::Duration;

use parkway::{DoorSpec, EntryStatus, Event, ItemOutcome, RunStatus, VisitOutcome};
use serde_json::json;

/// A hook starts a run that asks its caller; a route resumes it with the seed's
/// `resume_expr` and receives the run's result inline.
#[tokio::test]
async fn a_hook_starts_a_run_and_a_route_resumes_it() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(
        DoorSpec::hook("on-push", "asker")
            .topic("push")
            .subject("thread-1"),
    )
    .unwrap();
    rt.save_door(
        DoorSpec::route("confirm", "asker")
            .resume_expr(r#"{id: $parked[0].id, payload: {answer: "yes"}}"#),
    )
    .unwrap();
    let fires = rt.fire("push", json!({"ref": "main"})).await;
    assert_eq!(fires.len(), 1);
    let visit = fires[0].visit.clone().unwrap().unwrap();
    let VisitOutcome::Started { record, .. } = &visit.outcome else {
        panic!("{visit:?}")
    };
    assert!(record.is_none(), "a hook has no receiver");
    rt.settle().await;
    let parked = rt.list("thread-1").await.unwrap();
    assert_eq!(parked.len(), 1);
    let visit = rt.visit("confirm", "thread-1", json!({})).await.unwrap();
    let VisitOutcome::Resolved { results } = visit.outcome else {
        panic!()
    };
    let ItemOutcome::Resumed {
        id,
        outcome: Some(outcome),
    } = &results[0]
    else {
        panic!("{results:?}")
    };
    assert_eq!(id, &parked[0].id);
    let record = outcome.record().unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(record.result, Some(json!({"answer": {"answer": "yes"}})));
}

/// A schedule fire resumes a park with no receiver, so the outcome waits; the next route
/// visit takes it.
#[tokio::test]
async fn a_schedule_leaves_a_waiting_outcome_that_a_route_takes() {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    rt.run(parkway::Start::new("s", "asker")).await.unwrap();
    rt.save_door(
        DoorSpec::schedule("nightly", "asker")
            .every("5m")
            .subject("s")
            .resume_expr(r#"[$parked[] | select(.status == "asking") | {id, payload: .status}]"#),
    )
    .unwrap();
    rt.save_door(
        DoorSpec::route("collect", "asker")
            .resume_expr(r#"[$parked[] | select(.status == "finished") | .id]"#),
    )
    .unwrap();
    clock.advance(Duration::from_secs(300));
    rt.settle().await;
    let parked = rt.list("s").await.unwrap();
    assert_eq!(parked.len(), 1);
    assert_eq!(parked[0].status, EntryStatus::Finished);
    let visit = rt.visit("collect", "s", json!({})).await.unwrap();
    assert_eq!(
        visit.outcome,
        VisitOutcome::Resolved {
            results: vec![ItemOutcome::Taken {
                id: parked[0].id.clone(),
                result: json!({"answer": "asking"})
            }]
        }
    );
    assert!(rt.list("s").await.unwrap().is_empty());
    assert!(
        common::drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::WaitingOutcomeTaken { .. }))
    );
}

/// A hook's condition must hold for the fire to visit, and must be one boolean; its
/// subject can come from the fire's input.
#[tokio::test]
async fn hook_condition_and_subject_expr() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(
        DoorSpec::hook("on-msg", "echo")
            .topic("msg")
            .subject("unused")
            .condition(r#".kind == "note""#)
            .subject_expr(r#""thread-" + .thread"#)
            .start_expr("{text: .text}"),
    )
    .unwrap();
    let skipped = rt
        .fire("msg", json!({"kind": "other", "thread": "1", "text": "x"}))
        .await;
    assert_eq!(skipped.len(), 1);
    assert!(skipped[0].visit.is_none());
    let fired = rt
        .fire("msg", json!({"kind": "note", "thread": "7", "text": "hi"}))
        .await;
    assert_eq!(fired[0].subject.as_deref(), Some("thread-7"));
    assert!(fired[0].visit.as_ref().unwrap().is_ok());
    // Another topic fires nothing.
    assert!(rt.fire("nothing-here", json!({})).await.is_empty());

    rt.save_door(
        DoorSpec::hook("bad", "echo")
            .topic("msg2")
            .subject("s")
            .condition("1"),
    )
    .unwrap();
    let bad = rt.fire("msg2", json!({})).await;
    let e = bad[0].visit.clone().unwrap().unwrap_err();
    assert_eq!(
        e.to_string(),
        "visit of door bad refused: condition emitted 1: condition must yield one boolean"
    );
}

/// A hook has no receiver: a take from it would lose the result, so it is refused; a
/// resume from it leaves the outcome waiting.
#[tokio::test]
async fn a_hook_cannot_take() {
    let (rt, _clock) = common::runtime().await;
    rt.run(parkway::Start::new("s", "asker")).await.unwrap();
    rt.resume_detached("s", "i-1", json!("x")).await.unwrap();
    rt.settle().await;
    rt.save_door(
        DoorSpec::hook("h", "echo")
            .topic("t")
            .subject("s")
            .resume_expr(r#""i-1""#),
    )
    .unwrap();
    let e = rt.fire("t", json!({})).await[0]
        .visit
        .clone()
        .unwrap()
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("resume_expr: door h has no receiver to take interaction i-1"),
        "{e}"
    );
    assert_eq!(rt.list("s").await.unwrap()[0].status, EntryStatus::Finished);
}

/// A resolution naming an entry that the same visit's cancel tears down is refused
/// before anything is applied.
#[tokio::test]
async fn a_resume_inside_a_cancelled_chain_is_refused() {
    let (rt, _clock) = common::runtime().await;
    rt.register("main", &[], |ctx, _, _| async move {
        let child = ctx.call("asker", json!({})).await?;
        if child.status == RunStatus::Parked {
            ctx.ask(parkway::Ask::caller("up").expiry_at("10m")).await?;
        }
        Ok(json!(null))
    });
    rt.run(parkway::Start::new("s", "main")).await.unwrap();
    // i-1 is the child's ask, i-2 main's: cancelling i-1 tears main down too.
    rt.save_door(
        DoorSpec::route("r", "echo")
            .cancel_expr(r#""i-1""#)
            .resume_expr(r#"{id: "i-2", payload: 1}"#),
    )
    .unwrap();
    let e = rt.visit("r", "s", json!({})).await.unwrap_err();
    assert!(
        e.to_string()
            .contains("resume_expr: interaction i-2 would be torn down by the cancel of i-1"),
        "{e}"
    );
    assert_eq!(rt.list("s").await.unwrap().len(), 2);
}

/// A door saved again replaces the old one at once; a removed schedule fires no more.
#[tokio::test]
async fn doors_are_replaced_and_removed_at_run_time() {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    rt.save_door(DoorSpec::schedule("tick", "echo").every("1m").subject("s"))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    rt.settle().await;
    // Replaced with a 10m interval: the 1m timer of the old save does nothing.
    rt.save_door(DoorSpec::schedule("tick", "echo").every("10m").subject("s"))
        .unwrap();
    clock.advance(Duration::from_secs(60));
    rt.settle().await;
    let started = |events: &mut tokio::sync::broadcast::Receiver<Event>| {
        common::drain(events)
            .iter()
            .filter(|e| matches!(e, Event::RunStarted { .. }))
            .count()
    };
    assert_eq!(started(&mut events), 1);
    clock.advance(Duration::from_secs(9 * 60));
    rt.settle().await;
    assert_eq!(started(&mut events), 1);
    assert!(rt.remove_door("tick"));
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    assert_eq!(started(&mut events), 0);
}

/// A hook's condition is evaluated on the visits' async path: one that evaluates until
/// its (long) deadline leaves the runtime's only worker thread free for everything else.
#[tokio::test(flavor = "current_thread")]
async fn a_slow_hook_condition_blocks_no_worker() {
    let (rt, _clock) = common::runtime_with(|b| b.jq_deadline(Duration::from_secs(60))).await;
    // Runs about 1e10 steps and allocates nothing: it ends at its deadline, long after
    // this test.
    rt.save_door(
        DoorSpec::hook("slow", "echo")
            .topic("t")
            .subject("s")
            .condition("reduce (range(100000) as $a | range(100000)) as $i (0; . + 1) | . > 0"),
    )
    .unwrap();
    let fire = {
        let rt = rt.clone();
        tokio::spawn(async move { rt.fire("t", json!({})).await })
    };
    tokio::task::yield_now().await;
    let record = tokio::time::timeout(
        Duration::from_secs(10),
        rt.run(parkway::Start::new("other", "echo")),
    )
    .await
    .expect("the worker thread is free while the condition evaluates")
    .unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert!(!fire.is_finished(), "the condition is still evaluating");
    fire.abort();
}

/// A hook whose condition passes its evaluation deadline is broken, as a door whose
/// contract does: later fires are refused until it is saved again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_whose_condition_passes_its_deadline_is_broken() {
    let (rt, _clock) = common::runtime_with(|b| b.jq_deadline(Duration::from_millis(50))).await;
    let heavy = "[range(100000) as $a | range(100000) | $a] | length > 0";
    rt.save_door(
        DoorSpec::hook("h", "asker")
            .topic("push")
            .subject("s")
            .condition(heavy),
    )
    .unwrap();
    let first = rt.fire("push", json!({})).await;
    let error = first[0].visit.clone().unwrap().unwrap_err().to_string();
    assert!(error.contains("deadline"), "{error}");
    let second = rt.fire("push", json!({})).await;
    assert_eq!(
        second[0].visit.clone().unwrap().unwrap_err().to_string(),
        "door h is broken: an expression passed its evaluation deadline; save it again"
    );
    rt.save_door(
        DoorSpec::hook("h", "asker")
            .topic("push")
            .subject("s")
            .condition("true"),
    )
    .unwrap();
    let third = rt.fire("push", json!({})).await;
    assert!(third[0].visit.clone().unwrap().is_ok());
}
