//! The manual clock's range: a move past its last instant is refused and moves nothing,
//! so no deadline the runtime computes from its now can saturate to the present and fire
//! at every round (a clock moved by `u64::MAX` seconds once stood at the end of
//! `chrono`'s range, and a subject holding a waiting outcome woke and passivated again
//! and again, a core spinning).

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use parkway::ManualClock;
#[cfg(feature = "disk")]
use parkway::{DoorSpec, Start};
#[cfg(feature = "disk")]
use serde_json::json;

fn at(text: &str) -> DateTime<Utc> {
    text.parse().expect("an RFC 3339 instant")
}

/// Each move from a start: where the clock then stands, or that it is refused.
#[test]
fn a_move_past_the_last_instant_is_refused_and_moves_nothing() {
    let last = ManualClock::last();
    assert_eq!(last, at("9999-12-31T23:59:59.999999999Z"));
    let year = Duration::from_secs(365 * 24 * 3600);
    let table: [(&str, Duration, Option<&str>); 6] = [
        (
            "2026-01-01T00:00:00Z",
            Duration::from_secs(90),
            Some("2026-01-01T00:01:30Z"),
        ),
        (
            "2026-01-01T00:00:00Z",
            Duration::ZERO,
            Some("2026-01-01T00:00:00Z"),
        ),
        (
            "9999-12-31T23:59:59Z",
            Duration::from_nanos(999_999_999),
            Some("9999-12-31T23:59:59.999999999Z"),
        ),
        ("9999-12-31T23:59:59Z", Duration::from_secs(1), None),
        ("2026-01-01T00:00:00Z", year * 8000, None),
        ("2026-01-01T00:00:00Z", Duration::from_secs(u64::MAX), None),
    ];
    for (start, by, expected) in table {
        let clock = ManualClock::at(at(start));
        let got = clock.try_advance(by);
        match expected {
            Some(to) => {
                assert_eq!(got, Ok(at(to)), "{start} + {by:?}");
                assert_eq!(parkway::Clock::now(&clock), at(to));
            }
            None => {
                let e = got.expect_err("past the last instant");
                assert_eq!(parkway::Clock::now(&clock), at(start), "moved nothing");
                let message = e.to_string();
                assert!(
                    message.starts_with("the clock cannot move forward by ")
                        && message.ends_with(
                            "that is past 9999-12-31T23:59:59.999999999Z, the last instant it shows"
                        ),
                    "{message}"
                );
            }
        }
    }
    // `set` past the last instant sets it there; `at` starts there.
    let clock = ManualClock::default();
    clock.set(DateTime::<Utc>::MAX_UTC);
    assert_eq!(parkway::Clock::now(&clock), last);
    assert_eq!(
        parkway::Clock::now(&ManualClock::at(DateTime::<Utc>::MAX_UTC)),
        last
    );
}

/// `advance` past the range panics, as `Instant + Duration` does on overflow (input
/// goes through `try_advance`).
#[test]
#[should_panic(expected = "the clock cannot move forward by")]
fn advance_past_the_last_instant_panics() {
    ManualClock::default().advance(Duration::from_secs(u64::MAX));
}

/// A runtime on a data directory, holding a parked ask, a waiting outcome and a
/// schedule, is refused a move by `u64::MAX` seconds; moved to the last instant instead,
/// it settles, and settles again with nothing more happening (no subject waking and
/// passivating round after round).
#[cfg(feature = "disk")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_at_the_last_instant_does_not_spin() {
    let dir = tempfile::tempdir().unwrap();
    let (rt, clock) = common::runtime_with(|b| {
        b.passivate_after(Duration::from_secs(30))
            .data_dir(dir.path())
    })
    .await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let record = rt.run(Start::new("w", "asker")).await.unwrap();
    let id = record.asks.unwrap()[0].id.clone();
    rt.resume_detached("w", &id, json!(true)).await.unwrap();
    rt.save_door(DoorSpec::schedule("tick", "echo").every("5s").subject("s2"))
        .unwrap();
    rt.settle().await;
    let before = rt.now();

    assert!(clock.try_advance(Duration::from_secs(u64::MAX)).is_err());
    assert_eq!(rt.now(), before, "the refused move moved nothing");

    clock.set(ManualClock::last());
    rt.settle().await;
    let settled = rt.stats().await;
    for _ in 0..3 {
        rt.settle().await;
        let again = rt.stats().await;
        assert_eq!(
            (again.passivations, again.live_subjects, again.timers),
            (settled.passivations, settled.live_subjects, settled.timers),
            "nothing happens at rest: {settled:?} then {again:?}"
        );
    }
    rt.shutdown().await;
}
