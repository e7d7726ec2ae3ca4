//! The result helpers an embedder reads outcomes with: `Visit::values`/`result`/
//! `started`/`resumed`, `Resumed::into_result`, `RunRecord::first_ask`, and
//! `Runtime::await_outcome`, each on the outcome it names and on every way it has none.

mod common;

use std::time::Duration;

use parkway::{
    Ask, AwaitError, DoorSpec, EntryStatus, IdProblem, NoResult, OnExpiry, RunError, RunStatus,
    Start, TakeError, is_expiry_marker,
};
use serde_json::json;

/// Resume every asking entry with the answer `"yes"`; with none asking, start a run.
const ASKING: &str = r#"[$parked[] | select(.status == "asking") | {id, payload: "yes"}]
    | if length == 0 then null else . end"#;

/// A route that starts `asker`, then resumes it: `started` and `resumed` each name the
/// record of what the visit did, and `result` is the run's value once it ended.
#[tokio::test]
async fn a_visit_hands_back_the_started_record_then_the_resumed_result() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(DoorSpec::route("go", "asker").resume_expr(ASKING))
        .unwrap();
    let started = rt.visit("go", "s", json!({})).await.unwrap();
    let record = started.started().unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    assert_eq!(
        record.first_ask().unwrap().question.as_deref(),
        Some("proceed?")
    );
    assert!(matches!(started.resumed(), Err(NoResult::Nothing)));
    // A parked run has no value yet: the helper says where it stands.
    let not_yet = started.result().unwrap_err();
    assert!(
        matches!(
            not_yet,
            NoResult::NotEnded {
                status: RunStatus::Parked,
                ..
            }
        ),
        "{not_yet}"
    );

    let resumed = rt.visit("go", "s", json!({})).await.unwrap();
    assert_eq!(resumed.resumed().unwrap().status, RunStatus::Succeeded);
    assert!(matches!(resumed.started(), Err(NoResult::Nothing)));
    assert_eq!(
        resumed.clone().values().unwrap(),
        vec![json!({"answer": "yes"})]
    );
    assert_eq!(resumed.result().unwrap(), json!({"answer": "yes"}));

    // Nothing parked and nothing to start: no value, and the visit is still `Ok`.
    rt.save_door(DoorSpec::route("idle", "asker").start_expr("null"))
        .unwrap();
    let nothing = rt.visit("idle", "empty", json!({})).await.unwrap();
    assert_eq!(nothing.clone().values(), Ok(vec![]));
    assert_eq!(nothing.result(), Err(NoResult::Nothing));
}

/// A resolution that leaves no value says which way: an answer kept for its group, a
/// taken outcome that failed, a failed run, and an ended record asked for its ask.
#[tokio::test]
async fn each_way_of_having_no_value_is_named() {
    let (rt, _clock) = common::runtime().await;
    rt.register("pair", &[], |ctx, _, _| async move {
        let a = ctx.ask(Ask::caller("a?").expiry_at("10m")).await;
        let b = ctx.ask(Ask::caller("b?").expiry_at("10m")).await;
        Ok(json!({"a": a?, "b": b?}))
    });
    rt.register("fails", &[], |ctx, _, _| async move {
        ctx.ask(Ask::caller("go?").expiry_at("10m")).await?;
        Err(RunError::fail("the disk is full"))
    });

    let pair = rt.run(Start::new("p", "pair")).await.unwrap();
    let buffered = rt.resume("p", &pair.asks()[0].id, json!(1)).await.unwrap();
    assert_eq!(
        buffered.into_result(),
        Err(NoResult::Buffered { remaining: 1 })
    );
    let done = rt.resume("p", &pair.asks()[1].id, json!(2)).await.unwrap();
    assert_eq!(done.into_result().unwrap(), json!({"a": 1, "b": 2}));

    let failing = rt.run(Start::new("f", "fails")).await.unwrap();
    let ask = failing.first_ask().unwrap().id.clone();
    let failed = rt
        .resume("f", &ask, json!("yes"))
        .await
        .unwrap()
        .into_record()
        .unwrap();
    assert!(matches!(
        failed.first_ask(),
        Err(NoResult::NotParked {
            status: RunStatus::Failed,
            ..
        })
    ));
    let error = failed.into_result().unwrap_err().to_string();
    assert!(error.ends_with("failed: the disk is full"), "{error}");

    // A failed outcome taken through a door: the first error of the visit.
    let again = rt.run(Start::new("f", "fails")).await.unwrap();
    let ask = again.first_ask().unwrap().id.clone();
    rt.resume_detached("f", &ask, json!("yes")).await.unwrap();
    rt.settle().await;
    rt.save_door(DoorSpec::route("take", "fails").resume_expr(r#"$parked | map(.id)"#))
        .unwrap();
    let taken = rt.visit("take", "f", json!({})).await.unwrap();
    assert_eq!(taken.resumed(), Err(NoResult::Taken { id: ask.clone() }));
    match taken.values() {
        Err(NoResult::TakeFailed { id, error }) => {
            assert_eq!(id, ask);
            assert_eq!(error, "the disk is full");
        }
        other => panic!("{other:?}"),
    }
}

/// A hook's visit has no receiver: its start names the run to read, its resume names
/// the interaction whose outcome waits, and `await_outcome` takes that outcome.
#[tokio::test]
async fn a_hook_leaves_an_outcome_that_await_outcome_takes() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(
        DoorSpec::hook("on-push", "asker")
            .topic("push")
            .subject("s")
            .resume_expr(ASKING),
    )
    .unwrap();
    let fired = rt.fire("push", json!({})).await;
    let visit = fired[0].visit.clone().unwrap().unwrap();
    let run_id = match visit.clone().result() {
        Err(NoResult::Unreceived { run_id }) => run_id,
        other => panic!("{other:?}"),
    };
    let ask = rt
        .record(&run_id)
        .await
        .unwrap()
        .first_ask()
        .unwrap()
        .id
        .clone();

    let fired = rt.fire("push", json!({})).await;
    let visit = fired[0].visit.clone().unwrap().unwrap();
    assert_eq!(
        visit.result(),
        Err(NoResult::NoReceiver { id: ask.clone() })
    );
    let value = rt
        .await_outcome("s", &ask, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(value, json!({"answer": "yes"}));
    // Taken once: a second await is refused at once, naming how it went.
    match rt.await_outcome("s", &ask, Duration::from_secs(5)).await {
        Err(AwaitError::Take(TakeError::Refused(IdProblem::AlreadyResolved { .. }))) => {}
        other => panic!("{other:?}"),
    }
}

/// An ask still open when the timeout passes: `TimedOut`, and the ask is untouched.
#[tokio::test(start_paused = true)]
async fn await_outcome_gives_up_at_its_timeout_and_changes_nothing() {
    let (rt, _clock) = common::runtime().await;
    let record = rt.run(Start::new("s", "asker")).await.unwrap();
    let ask = record.first_ask().unwrap().id.clone();
    let waited = rt.await_outcome("s", &ask, Duration::from_secs(30)).await;
    assert_eq!(
        waited,
        Err(AwaitError::TimedOut {
            subject: "s".into(),
            id: ask.clone(),
            waited: Duration::from_secs(30),
        })
    );
    assert_eq!(
        waited.unwrap_err().to_string(),
        format!("interaction {ask} on subject s left no outcome to take within 30s")
    );
    assert_eq!(rt.list("s").await.unwrap()[0].status, EntryStatus::Asking);

    // A timeout past what the timer counts is no panic: the outcome is still taken once
    // it is there.
    let forever = {
        let (rt, ask) = (rt.clone(), ask.clone());
        tokio::spawn(async move { rt.await_outcome("s", &ask, Duration::MAX).await })
    };
    rt.resume_detached("s", &ask, json!("late")).await.unwrap();
    assert_eq!(forever.await.unwrap(), Ok(json!({"answer": "late"})));
}

/// An ask that lapses with `on_expiry = resume`: the run resumes with the marker, and
/// its result waits under the ask's id until `await_outcome`, called before the clock
/// moved, takes it.
#[tokio::test]
async fn an_expiry_resumes_with_the_marker_and_the_outcome_is_awaited() {
    let (rt, clock) = common::runtime().await;
    rt.register("patient", &[], |ctx, _, _| async move {
        let answer = ctx
            .ask(
                Ask::caller("still there?")
                    .expiry_at("5m")
                    .on_expiry(OnExpiry::Resume),
            )
            .await?;
        Ok(json!({"expired": is_expiry_marker(&answer)}))
    });
    let record = rt.run(Start::new("s", "patient")).await.unwrap();
    let ask = record.first_ask().unwrap().id.clone();
    let waiting = {
        let rt = rt.clone();
        let ask = ask.clone();
        tokio::spawn(async move { rt.await_outcome("s", &ask, Duration::from_secs(60)).await })
    };
    // Whether the await looks before or after the expiry fires, it takes the outcome.
    tokio::task::yield_now().await;
    clock.advance(Duration::from_secs(6 * 60));
    let value = waiting.await.unwrap().unwrap();
    assert_eq!(value, json!({"expired": true}));
}
