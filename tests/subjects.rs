//! The empty subject: refused by every operation that names a subject, with the same
//! clear error, and nothing changes (it used to be accepted by visits and asks but
//! refused by hooks and schedules).

mod common;

use parkway::{CancelError, DoorSpec, ResumeError, Start, StartError, TakeError, VisitError};
use serde_json::json;

const MESSAGE: &str = "the subject is empty: a subject must be a non-empty string";

/// Starts, reads and resolutions on `""` are all refused before anything is stored.
#[tokio::test]
async fn every_operation_refuses_the_empty_subject() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(DoorSpec::route("go", "asker")).unwrap();
    let mut events = rt.events();

    let run = rt.run(Start::new("", "asker")).await.unwrap_err();
    assert_eq!(run, StartError::EmptySubject);
    assert_eq!(run.to_string(), MESSAGE);
    assert_eq!(
        rt.submit(Start::new("", "asker")).await.unwrap_err(),
        StartError::EmptySubject
    );
    assert_eq!(
        rt.spawn(Start::new("", "asker")).await.unwrap_err(),
        StartError::EmptySubject
    );
    assert_eq!(rt.list("").await.unwrap_err(), StartError::EmptySubject);
    let visit = rt.visit("go", "", json!({})).await.unwrap_err();
    assert!(matches!(visit, VisitError::EmptySubject), "{visit:?}");
    assert_eq!(visit.to_string(), MESSAGE);
    assert!(matches!(
        rt.resume("", "i-1", json!(true)).await.unwrap_err(),
        ResumeError::EmptySubject
    ));
    assert!(matches!(
        rt.resume_detached("", "i-1", json!(true))
            .await
            .unwrap_err(),
        ResumeError::EmptySubject
    ));
    assert!(matches!(
        rt.take("", "i-1").await.unwrap_err(),
        TakeError::EmptySubject
    ));
    assert!(matches!(
        rt.cancel("", &["i-1"]).await.unwrap_err(),
        CancelError::EmptySubject
    ));

    rt.settle().await;
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.records, stats.live_subjects), (0, 0, 0));
    assert!(common::drain(&mut events).is_empty());
}

/// Hooks and schedules follow the same rule at save.
#[tokio::test]
async fn hooks_and_schedules_refuse_it_at_save() {
    let (rt, _clock) = common::runtime().await;
    let hook = rt
        .save_door(DoorSpec::hook("h", "asker").topic("topic").subject(""))
        .unwrap_err();
    assert!(hook.to_string().contains("subject"), "{hook}");
    let schedule = rt
        .save_door(DoorSpec::schedule("s", "asker").every("5m").subject(""))
        .unwrap_err();
    assert!(schedule.to_string().contains("subject"), "{schedule}");
}
