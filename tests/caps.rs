//! "The concurrency cap": the two ceilings are independent, refuse loudly at the cap,
//! admit atomically under a burst, and never refuse a waiting outcome.

mod common;

use std::sync::Arc;

use parkway::{
    Ask, AskError, EntryStatus, Event, IdProblem, Resolution, ResumeError, RunStatus, Settled,
    Start,
};
use serde_json::json;

/// A burst of 50 concurrent caller asks from many tasks against a cap of 10 admits
/// exactly 10, every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_admits_exactly_the_cap() {
    for round in 0..20 {
        let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(10)).await;
        let rt = Arc::new(rt);
        let mut tasks = Vec::new();
        for i in 0..50 {
            let rt = Arc::clone(&rt);
            tasks.push(tokio::spawn(async move {
                rt.run(Start::new(format!("s-{}", i % 7), "asker")).await
            }));
        }
        let mut parked = 0;
        let mut refused = 0;
        for t in tasks {
            let record = t.await.unwrap().unwrap();
            match record.status {
                RunStatus::Parked => parked += 1,
                RunStatus::Failed => {
                    assert_eq!(
                        record.error.as_deref(),
                        Some(
                            "INTERACTIONS_MAX_CONCURRENT_CALLER reached: limit is 10, ask refused"
                        )
                    );
                    refused += 1;
                }
                other => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!((parked, refused), (10, 40), "round {round}");
        assert_eq!(rt.stats().await.caller_open, 10);
    }
}

/// The user ceiling is independent of the caller ceiling.
#[tokio::test]
async fn the_ceilings_are_independent() {
    let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(1).max_concurrent(1)).await;
    rt.register("user_asker", &[], |ctx, _, _| async move {
        Ok(ctx.ask(Ask::user("name?").expiry_at("10m")).await?)
    });
    assert_eq!(
        rt.run(Start::new("s", "asker")).await.unwrap().status,
        RunStatus::Parked
    );
    let user = rt.run(Start::new("s", "user_asker")).await.unwrap();
    assert_ne!(user.status, RunStatus::Failed, "{user:?}");
    let again = rt.run(Start::new("s", "user_asker")).await.unwrap();
    assert_eq!(
        again.error.as_deref(),
        Some("INTERACTIONS_MAX_CONCURRENT reached: limit is 1, ask refused")
    );
    let stats = rt.stats().await;
    assert_eq!((stats.caller_open, stats.user_open), (1, 1));
}

/// A waiting outcome is counted against the caller ceiling but never refused, so the
/// count may pass the cap; new caller asks are refused until it drains.
#[tokio::test]
async fn a_waiting_outcome_is_never_refused() {
    let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(1)).await;
    rt.register("twice", &[], |ctx, _, _| async move {
        ctx.ask(Ask::caller("a?").expiry_at("10m")).await?;
        Ok(json!("done"))
    });
    rt.run(Start::new("s", "twice")).await.unwrap();
    // Resuming with no receiver: the ask (1) becomes a waiting outcome (1).
    rt.resume_detached("s", "i-1", json!(1)).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap()[0].status, EntryStatus::Finished);
    assert_eq!(rt.stats().await.caller_open, 1);
    let refused = rt.run(Start::new("s", "asker")).await.unwrap();
    assert_eq!(refused.status, RunStatus::Failed);
    assert_eq!(rt.take("s", "i-1").await.unwrap(), json!("done"));
    assert_eq!(rt.stats().await.caller_open, 0);
    let admitted = rt.run(Start::new("s", "asker")).await.unwrap();
    assert_eq!(admitted.status, RunStatus::Parked);
}

/// Raise `n` caller asks in one activation and propagate their outcomes in order, as a
/// group of asks is written: every ask is raised before any outcome is propagated.
fn register_group(rt: &parkway::Runtime, name: &str, n: usize) {
    rt.register(name, &[], move |ctx, _, _| async move {
        let mut outcomes = Vec::with_capacity(n);
        for i in 0..n {
            outcomes.push(
                ctx.ask(Ask::caller(format!("q{i}?")).expiry_at("10m"))
                    .await,
            );
        }
        let mut answers = Vec::with_capacity(n);
        for outcome in outcomes {
            answers.push(outcome?);
        }
        Ok(json!(answers))
    });
}

/// Issue 18, item 8: twelve asks in one activation against a cap of ten used to end
/// `parked` with ten asks and no error, and the refusal came back only when the caller
/// had answered all ten. The refusal now fails the run where it was raised, and nothing
/// of that activation stays parked.
#[tokio::test]
async fn a_cap_refusal_inside_a_group_fails_the_run_and_parks_nothing() {
    let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(10)).await;
    register_group(&rt, "twelve", 12);
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "twelve")).await.unwrap();
    assert_eq!(record.status, RunStatus::Failed, "{record:?}");
    assert_eq!(
        record.error.as_deref(),
        Some("INTERACTIONS_MAX_CONCURRENT_CALLER reached: limit is 10, ask refused")
    );
    assert_eq!(record.asks, None);
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
    let stats = rt.stats().await;
    assert_eq!((stats.caller_open, stats.runs), (0, 0), "{stats:?}");
    let events = common::drain(&mut events);
    let count = |kind: &str| events.iter().filter(|e| common::kind(e) == kind).count();
    assert_eq!(count("ask_parked"), 10);
    assert_eq!(count("cap_refused"), 2);
    assert_eq!(count("run_failed"), 1);
    // Each withdrawn ask is resolved exactly once, as cancelled.
    let withdrawn = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::AskResolved {
                    how: Resolution::Cancelled,
                    ..
                }
            )
        })
        .count();
    assert_eq!(withdrawn, 10);
    // The slots are free: a run of ten asks parks whole.
    register_group(&rt, "ten", 10);
    let record = rt.run(Start::new("s", "ten")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    assert_eq!(record.asks.map(|a| a.len()), Some(10));
}

/// A withdrawn ask cannot be answered: a late resume is told it was cancelled.
#[tokio::test]
async fn a_withdrawn_ask_reads_already_resolved_as_cancelled() {
    let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(1)).await;
    register_group(&rt, "two", 2);
    let record = rt.run(Start::new("s", "two")).await.unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    let e = rt.resume("s", "i-1", json!(true)).await.unwrap_err();
    assert!(
        matches!(
            e,
            ResumeError::Refused(IdProblem::AlreadyResolved {
                how: Settled::Cancelled,
                ..
            })
        ),
        "{e}"
    );
}

/// The refusal reaches the run at the `ask` call, so the run can handle it: a run that
/// returns a value of its own instead of parking succeeds with it, and the asks its
/// activation raised are withdrawn all the same.
#[tokio::test]
async fn a_run_that_handles_a_cap_refusal_ends_as_it_chooses() {
    let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(1)).await;
    rt.register("polite", &[], |ctx, _, _| async move {
        let first = ctx.ask(Ask::caller("a?").expiry_at("10m")).await;
        let second = ctx.ask(Ask::caller("b?").expiry_at("10m")).await;
        match second {
            Err(AskError::AtCap { setting, limit }) => {
                Ok(json!({"busy": setting, "limit": limit, "first_parked": first.is_err()}))
            }
            other => Ok(json!({"unexpected": format!("{other:?}")})),
        }
    });
    let record = rt.run(Start::new("s", "polite")).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded, "{record:?}");
    assert_eq!(
        record.result,
        Some(json!({
            "busy": "INTERACTIONS_MAX_CONCURRENT_CALLER",
            "limit": 1,
            "first_parked": true
        }))
    );
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
    assert_eq!(rt.stats().await.caller_open, 0);
}
