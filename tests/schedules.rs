//! Schedules: the shortest interval accepted, a clock that jumps far ahead, and a slow
//! schedule visit that must not hold up any other timer of the runtime.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::SecondsFormat;
use parkway::{Clock, DoorSpec, Event, Start};
use serde_json::json;

fn started(events: &[Event], subject: &str) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::RunStarted { subject: s, .. } if s == subject))
        .count()
}

/// An interval under one second is refused with the door and the interval named, and
/// nothing is saved; one second is accepted.
#[tokio::test]
async fn intervals_under_a_second_are_refused() {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    for interval in ["1ns", "1us", "999ms"] {
        let e = rt
            .save_door(
                DoorSpec::schedule("fast", "echo")
                    .every(interval)
                    .subject("s"),
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "door fast not saved: schedule interval \"{interval}\" is shorter than the minimum of 1s"
            )
        );
    }
    // Nothing was saved: no timer fires a refused schedule.
    clock.advance(Duration::from_secs(10));
    rt.settle().await;
    assert_eq!(started(&common::drain(&mut events), "s"), 0);
    assert!(
        rt.visit("fast", "s", json!({}))
            .await
            .unwrap_err()
            .to_string()
            .contains("unknown door fast")
    );

    rt.save_door(DoorSpec::schedule("fast", "echo").every("1s").subject("s"))
        .unwrap();
    clock.advance(Duration::from_secs(3));
    rt.settle().await;
    assert_eq!(started(&common::drain(&mut events), "s"), 1, "coalesced");
    clock.advance(Duration::from_secs(1));
    rt.settle().await;
    assert_eq!(started(&common::drain(&mut events), "s"), 1);
}

/// A clock that jumps a year past a one-second schedule fires it once (the missed fires
/// are coalesced), and the next fire lands on the first boundary after the jump,
/// counted from the save.
#[tokio::test]
async fn a_year_jump_fires_once_and_keeps_the_boundaries() {
    let (rt, clock) = common::runtime().await;
    let fired = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&fired);
    rt.register("note", &[], move |_ctx, kwargs, _| {
        let seen = Arc::clone(&seen);
        async move {
            if let Ok(mut seen) = seen.lock() {
                seen.push(kwargs["fired_at"].clone());
            }
            Ok(json!(null))
        }
    });
    let taken = || {
        fired
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default()
    };
    rt.save_door(
        DoorSpec::schedule("tick", "note")
            .every("1s")
            .subject("s")
            .start_expr("{fired_at: .fired_at}"),
    )
    .unwrap();
    let saved = clock.now();
    let at = |d: chrono::TimeDelta| json!((saved + d).to_rfc3339_opts(SecondsFormat::AutoSi, true));
    let year = chrono::TimeDelta::days(365);
    clock.advance(Duration::from_secs(365 * 24 * 3600) + Duration::from_millis(400));
    // Bounded: stepping one interval at a time would take 31 million steps.
    tokio::time::timeout(Duration::from_secs(10), rt.settle())
        .await
        .expect("the jump is handled in one step");
    assert_eq!(taken(), [at(year + chrono::TimeDelta::milliseconds(400))]);
    // The next boundary is a year and a second after the save, 600 ms from now.
    clock.advance(Duration::from_millis(599));
    rt.settle().await;
    assert!(taken().is_empty());
    clock.advance(Duration::from_millis(1));
    rt.settle().await;
    assert_eq!(taken(), [at(year + chrono::TimeDelta::seconds(1))]);
}

/// A schedule whose visit evaluates until its (long) deadline keeps its subject busy, but
/// no other timer waits for it: an unrelated ask expires as soon as its deadline passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_schedule_visit_holds_up_no_other_timer() {
    let (rt, clock) = common::runtime_with(|b| b.jq_deadline(Duration::from_secs(120))).await;
    let mut events = rt.events();
    // Runs about 1e10 steps and allocates nothing: it ends at its deadline, long after
    // this test.
    rt.save_door(
        DoorSpec::schedule("slow", "echo")
            .every("1m")
            .subject("cron")
            .start_expr("reduce (range(100000) as $a | range(100000)) as $i (0; . + 1) | {n: .}"),
    )
    .unwrap();
    // `asker` parks with a 10-minute deadline.
    rt.run(Start::new("other", "asker")).await.unwrap();
    clock.advance(Duration::from_secs(60));
    clock.advance(Duration::from_secs(9 * 60));
    let expired = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match events.recv().await {
                Ok(Event::ExpiryFired { subject, .. }) if subject == "other" => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
    })
    .await;
    assert_eq!(
        expired,
        Ok(true),
        "the ask expired while the schedule's visit evaluated"
    );
    // The schedule's visit is still evaluating: it has neither started a run nor been
    // refused.
    let later = common::drain(&mut events);
    assert_eq!(started(&later, "cron"), 0);
    assert!(
        !later
            .iter()
            .any(|e| matches!(e, Event::VisitRefused { .. })),
        "{later:?}"
    );
}
