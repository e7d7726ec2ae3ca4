//! Shutdown: `Runtime::shutdown` and the drop of the last handle stop every task of the
//! runtime (subject actors, activations, the supervisor, the ticker), counted with
//! Tokio's own task metrics on a Tokio runtime built for each test, and every call
//! afterwards is refused as shut down.
//!
//! The bug these protect against: dropping a runtime left every live subject's actor
//! and every executing activation running for good, so building runtimes in a row
//! leaked a task per subject each time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parkway::{
    Ask, CancelError, DoorSpec, Ids, ManualClock, ResumeError, RunStatus, Runtime, Start,
    StartError, TakeError, VisitError,
};
use serde_json::json;

/// Counts its drop: the spinning target's future was dropped.
struct OnDrop(Arc<AtomicUsize>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Subjects left live (each with a parked run) before stopping.
const SUBJECTS: usize = 100;

/// A Tokio runtime of its own, so its task count is this test's alone.
fn tokio_runtime(threads: usize) -> tokio::runtime::Runtime {
    let mut builder = if threads == 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build().expect("a tokio runtime")
}

fn alive(handle: &tokio::runtime::Handle) -> usize {
    handle.metrics().num_alive_tasks()
}

/// How many spinning activations began, and how many were dropped so far.
#[derive(Default)]
struct Spinning {
    started: Arc<AtomicUsize>,
    dropped: Arc<AtomicUsize>,
}

/// A runtime with `asker` (parks on its caller) and `spinner` (loops forever, yielding,
/// so its activation is a task that never ends by itself); subjects stay live.
async fn build() -> (Runtime, Spinning) {
    let rt = Runtime::builder()
        .without_env()
        .clock(ManualClock::default())
        .ids(Ids::sequential())
        .passivate_after(Duration::from_secs(3600))
        .build()
        .await
        .expect("runtime builds");
    rt.register("asker", &[], |ctx, _, _| async move {
        let answer = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?;
        Ok(json!({ "answer": answer }))
    });
    let spinning = Spinning::default();
    let (started, counter) = (Arc::clone(&spinning.started), Arc::clone(&spinning.dropped));
    rt.register("spinner", &[], move |ctx, _, _| {
        started.fetch_add(1, Ordering::SeqCst);
        let counted = OnDrop(Arc::clone(&counter));
        async move {
            let _counted = counted;
            loop {
                // Goes through the context each round, as a real target would.
                let _ = ctx.run_id();
                tokio::task::yield_now().await;
            }
        }
    });
    (rt, spinning)
}

/// `SUBJECTS` subjects, each live with one parked run, and one spinning activation.
async fn populate(rt: &Runtime) {
    for i in 0..SUBJECTS {
        let record = rt
            .run(Start::new(format!("s-{i}"), "asker"))
            .await
            .expect("starts");
        assert_eq!(record.status, RunStatus::Parked);
    }
    rt.spawn(Start::new("spin", "spinner"))
        .await
        .expect("starts");
    assert_eq!(rt.stats().await.live_subjects, SUBJECTS + 1);
}

/// Wait, without sleeping, until no task of `handle` is alive; false if the generous
/// hang guard passes first. Even after a shutdown has awaited every task, a worker
/// releases a finished task a moment after its join handle wakes, so the count is
/// read until it reaches zero rather than once.
async fn no_task_left(handle: &tokio::runtime::Handle) -> bool {
    let guard = Instant::now() + Duration::from_secs(10);
    while alive(handle) > 0 {
        if Instant::now() > guard {
            return false;
        }
        tokio::task::yield_now().await;
    }
    true
}

/// 100 live subjects and a spinning activation: after `shutdown` returns, not one task
/// of the runtime is alive, and a caller waiting on an executing run is told it stopped.
#[test]
fn shutdown_ends_every_task_of_the_runtime() {
    let tokio = tokio_runtime(2);
    let handle = tokio.handle().clone();
    tokio.block_on(async {
        let (rt, spinning) = build().await;
        populate(&rt).await;
        let waiting = {
            let rt = rt.clone();
            tokio::spawn(async move { rt.run(Start::new("spin-2", "spinner")).await })
        };
        let submitted = rt.submit(Start::new("spin-3", "spinner")).await.unwrap();
        // All three spinning activations have begun (the waiting caller's run reaches
        // its subject on a task of its own), so each has a future to drop.
        let guard = Instant::now() + Duration::from_secs(10);
        while spinning.started.load(Ordering::SeqCst) < 3 {
            assert!(Instant::now() < guard, "the spinners did not all begin");
            tokio::task::yield_now().await;
        }
        // Actors, activations, the supervisor, the ticker, the waiting caller and the
        // submit door's record writer.
        assert!(alive(&handle) > SUBJECTS, "{} tasks", alive(&handle));

        rt.shutdown().await;
        let outcome = waiting.await.expect("the caller's task ends");
        assert_eq!(outcome, Err(StartError::Stopped));
        assert_eq!(outcome.unwrap_err().to_string(), "the runtime is shut down");
        assert_eq!(
            spinning.dropped.load(Ordering::SeqCst),
            3,
            "every spinning activation was dropped before shutdown returned"
        );
        assert!(no_task_left(&handle).await, "{} tasks", alive(&handle));
        assert_eq!(
            rt.record(&submitted).await.map(|r| r.status),
            None,
            "an aborted run's record goes with its subject and is never completed"
        );
        let stats = rt.stats().await;
        assert_eq!((stats.live_subjects, stats.passive_subjects), (0, 0));
    });
}

/// Three runtimes built and shut down in a row leave nothing behind each time.
#[test]
fn runtimes_built_in_a_row_do_not_accumulate_tasks() {
    let tokio = tokio_runtime(2);
    let handle = tokio.handle().clone();
    tokio.block_on(async {
        for round in 0..3 {
            let (rt, _) = build().await;
            populate(&rt).await;
            rt.shutdown().await;
            assert!(
                no_task_left(&handle).await,
                "round {round}: {} tasks",
                alive(&handle)
            );
        }
    });
}

/// Dropping the last handle (with an activation's `Ctx` still holding the runtime's
/// core) stops everything too, without anyone waiting on it; three in a row leave
/// nothing behind.
#[test]
fn dropping_the_last_handle_stops_every_task() {
    let tokio = tokio_runtime(1);
    let handle = tokio.handle().clone();
    tokio.block_on(async {
        for round in 0..3 {
            let (rt, _) = build().await;
            populate(&rt).await;
            let clone = rt.clone();
            drop(rt);
            assert!(alive(&handle) > SUBJECTS, "a clone keeps it running");
            drop(clone);
            assert!(
                no_task_left(&handle).await,
                "round {round}: {} tasks",
                alive(&handle)
            );
        }
    });
}

/// Every call after a shutdown is refused with its own error type's `Stopped`, changes
/// nothing, and a second shutdown returns at once.
#[test]
fn calls_after_shutdown_are_refused() {
    let tokio = tokio_runtime(2);
    tokio.block_on(async {
        let (rt, _) = build().await;
        rt.save_door(DoorSpec::hook("hook", "asker").topic("t").subject("s-0"))
            .expect("saves");
        let record = rt.run(Start::new("s-0", "asker")).await.unwrap();
        let id = record.asks.expect("asks")[0].id.clone();
        assert!(!rt.is_shut_down());
        rt.shutdown().await;
        assert!(rt.is_shut_down());
        rt.shutdown().await;

        assert_eq!(
            rt.run(Start::new("s-1", "asker")).await,
            Err(StartError::Stopped)
        );
        assert_eq!(
            rt.run_tool(Start::new("s-1", "asker")).await,
            Err(StartError::Stopped)
        );
        assert_eq!(
            rt.spawn(Start::new("s-1", "asker")).await,
            Err(StartError::Stopped)
        );
        assert_eq!(
            rt.submit(Start::new("s-1", "asker")).await,
            Err(StartError::Stopped)
        );
        assert_eq!(rt.list("s-0").await, Err(StartError::Stopped));
        assert_eq!(
            rt.resume("s-0", &id, json!(true)).await,
            Err(ResumeError::Stopped)
        );
        assert_eq!(
            rt.resume_detached("s-0", &id, json!(true)).await,
            Err(ResumeError::Stopped)
        );
        assert_eq!(rt.take("s-0", &id).await, Err(TakeError::Stopped));
        assert_eq!(rt.cancel("s-0", &[&id]).await, Err(CancelError::Stopped));
        assert_eq!(
            rt.answer(&id, json!(true)).await,
            Err(parkway::AnswerError::Stopped)
        );
        assert!(matches!(
            rt.visit("hook", "s-0", json!({})).await,
            Err(VisitError::Stopped)
        ));
        let fires = rt.fire("t", json!({})).await;
        assert_eq!(fires.len(), 1);
        assert!(matches!(fires[0].visit, Some(Err(VisitError::Stopped))));
        // Nothing is left to wait for.
        rt.settle().await;
    });
}
