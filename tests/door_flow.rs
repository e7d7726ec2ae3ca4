//! Doors end to end: a hook fire whose run asks its caller, a route that resumes it and
//! receives the outcome inline; a schedule fire that resumes a park and leaves a waiting
//! outcome the next route visit takes; the seed's three example programs.

mod common;

use std::time::Duration;

use parkway::{DoorSpec, Event, ItemOutcome, RunStatus, Status, VisitOutcome};
use serde_json::json;

/// A hook starts a run that asks its caller; a route resumes it with the seed's
/// `resume_expr` and receives the run's result inline.
#[tokio::test]
async fn a_hook_starts_a_run_and_a_route_resumes_it() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(DoorSpec::hook("on-push", "push", "thread-1", "asker"))
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
        DoorSpec::schedule("nightly", "5m", "s", "asker")
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
    assert_eq!(parked[0].status, Status::Finished);
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
