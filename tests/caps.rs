//! "The concurrency cap": the two ceilings are independent, refuse loudly at the cap,
//! admit atomically under a burst, and never refuse a waiting outcome.

mod common;

use std::sync::Arc;

use parkway::{Ask, RunStatus, Start, Status};
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
    assert_eq!(rt.list("s").await.unwrap()[0].status, Status::Finished);
    assert_eq!(rt.stats().await.caller_open, 1);
    let refused = rt.run(Start::new("s", "asker")).await.unwrap();
    assert_eq!(refused.status, RunStatus::Failed);
    assert_eq!(rt.take("s", "i-1").await.unwrap(), json!("done"));
    assert_eq!(rt.stats().await.caller_open, 0);
    let admitted = rt.run(Start::new("s", "asker")).await.unwrap();
    assert_eq!(admitted.status, RunStatus::Parked);
}
