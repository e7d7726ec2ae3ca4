//! "Expiry": a caller ask's deadline, `on_expiry = kill` (the default) and `resume`,
//! on the manual clock.

mod common;

use std::time::Duration;

use parkway::{Ask, EntryStatus, Event, OnExpiry, Resolution, RunStatus, Start, is_expiry_marker};
use serde_json::json;

const TEN_MINUTES: Duration = Duration::from_secs(600);

/// By default a lapsed caller ask kills the whole run chain, with the events that say so.
#[tokio::test]
async fn kill_is_the_default_and_tears_the_chain_down() {
    let (rt, clock) = common::runtime().await;
    rt.register("main", &[], |ctx, _, _| async move {
        let child = ctx.call("asker", json!({})).await?;
        if child.status == RunStatus::Parked {
            ctx.ask(Ask::caller("carry up").expiry_at("1h")).await?;
        }
        Ok(serde_json::to_value(child)?)
    });
    let mut events = rt.events();
    rt.run(Start::new("s", "main")).await.unwrap();
    assert_eq!(rt.list("s").await.unwrap().len(), 2);
    clock.advance(TEN_MINUTES);
    rt.settle().await;
    // The child's ask lapsed first: it and the run above it are gone, with main's ask.
    assert!(rt.list("s").await.unwrap().is_empty());
    let events = common::drain(&mut events);
    let fired = events
        .iter()
        .filter(|e| matches!(e, Event::ExpiryFired { .. }))
        .count();
    let cancelled = events
        .iter()
        .filter(|e| matches!(e, Event::RunCancelled { .. }))
        .count();
    let expired = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::AskResolved {
                    how: Resolution::Expired,
                    ..
                }
            )
        })
        .count();
    assert_eq!((fired, cancelled, expired), (1, 2, 1), "{events:?}");
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.caller_open), (0, 0));
}

/// `on_expiry = resume` resumes the run with the reserved marker so it takes its expiry
/// branch; with no receiver its terminal waits on the subject.
#[tokio::test]
async fn resume_on_expiry_hands_the_marker_to_the_run() {
    let (rt, clock) = common::runtime().await;
    rt.register("patient", &[], |ctx, _, _| async move {
        let answer = ctx
            .ask(
                Ask::caller("still there?")
                    .expiry_at("10m")
                    .on_expiry(OnExpiry::Resume),
            )
            .await?;
        if is_expiry_marker(&answer) {
            return Ok(json!("took the expiry branch"));
        }
        Ok(answer)
    });
    rt.run(Start::new("s", "patient")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    clock.advance(TEN_MINUTES);
    rt.settle().await;
    let entries = rt.list("s").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].id, id);
    assert_eq!(entries[0].status, EntryStatus::Finished);
    assert_eq!(
        rt.take("s", &id).await.unwrap(),
        json!("took the expiry branch")
    );
}

/// A deadline never fires early, and fires at the instant itself.
#[tokio::test]
async fn expiry_fires_at_the_deadline_not_before() {
    let (rt, clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    clock.advance(TEN_MINUTES - Duration::from_millis(1));
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap()[0].status, EntryStatus::Asking);
    clock.advance(Duration::from_millis(1));
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A resolved ask's deadline does nothing when it passes.
#[tokio::test]
async fn a_resolved_ask_does_not_expire() {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    rt.run(Start::new("s", "asker")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    rt.resume("s", &id, json!("yes")).await.unwrap();
    clock.advance(TEN_MINUTES * 2);
    rt.settle().await;
    assert!(
        !common::drain(&mut events)
            .iter()
            .any(|e| matches!(e, Event::ExpiryFired { .. }))
    );
    assert_eq!(
        rt.stats().await.timers,
        2,
        "only the idle check and the ended run's record horizon stay armed"
    );
}

/// A subject passive at its deadline is woken to expire the ask.
#[tokio::test]
async fn a_passive_subject_still_expires() {
    let (rt, clock) = common::runtime_with(|b| b.passivate_after(Duration::ZERO)).await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.stats().await.passive_subjects, 1);
    clock.advance(TEN_MINUTES);
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A waiting outcome not taken within the retention horizon is dropped, with its event.
#[tokio::test]
async fn an_untaken_waiting_outcome_is_dropped_past_retention() {
    let (rt, clock) =
        common::runtime_with(|b| b.waiting_retention(Duration::from_secs(3600))).await;
    let mut events = rt.events();
    rt.run(Start::new("s", "asker")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    rt.resume_detached("s", &id, json!("yes")).await.unwrap();
    rt.settle().await;
    clock.advance(Duration::from_secs(3599));
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap().len(), 1);
    clock.advance(Duration::from_secs(1));
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
    assert!(common::drain(&mut events).iter().any(|e| matches!(
        e,
        Event::WaitingOutcomeDropped { interaction, reason, .. } if *interaction == id && reason == "retention"
    )));
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// A resume after a killing expiry is refused with how and when the ask went: expired, at
/// its deadline.
#[tokio::test]
async fn a_resume_after_the_expiry_reads_already_resolved_as_expired() {
    let (rt, clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    clock.advance(TEN_MINUTES);
    rt.settle().await;
    let e = rt.resume("s", "i-1", json!(true)).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "interaction i-1 on subject s already resolved (expired) at 2026-01-01T00:10:00Z"
    );
}
