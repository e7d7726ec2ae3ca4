//! More rules of `docs/semantics.md` on the plain state: the memory of resolutions and
//! its two bounds, a wait that runs out, a run with only user asks open, and what a
//! run resolved on its way.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{World, show, status};
use crate::ask::{Ask, OnExpiry};
use crate::entry::EntryStatus;
use crate::error::IdProblem;
use crate::event::Settled;
use crate::run::port::Parent;
use crate::subject::Op;
use crate::subject::effect::Effect;
use crate::subject::reply::Answer;
use crate::subject::state::REMEMBERED;

/// The problem a second resume of `id` meets, or `None` if it was taken as a resume.
fn second_resume(w: &mut World, id: &str) -> Option<IdProblem> {
    let effects = w.resume(id, json!("again"));
    effects.into_iter().find_map(|e| match e {
        Effect::Reply(_, Answer::Resume(Err(problem))) => Some(problem),
        _ => None,
    })
}

#[test]
fn a_resolution_is_remembered_until_the_retention_horizon_then_reads_unknown() {
    let mut w = World::new();
    w.settings.waiting_retention = Duration::from_secs(3600);
    let (_, id) = w.parked();
    w.cancel(&[&id]);
    w.advance(Duration::from_secs(3599));
    assert!(matches!(
        second_resume(&mut w, &id),
        Some(IdProblem::AlreadyResolved {
            how: Settled::Cancelled,
            ..
        })
    ));
    // Past the horizon it is forgotten: an id never issued reads the same.
    w.advance(Duration::from_secs(2));
    assert!(matches!(
        second_resume(&mut w, &id),
        Some(IdProblem::Unknown { .. })
    ));
}

#[test]
fn a_subject_remembers_at_most_its_newest_resolutions() {
    let mut w = World::new();
    let (_, first) = w.parked();
    w.cancel(&[&first]);
    // REMEMBERED more resolutions: the first is forgotten, the last still told.
    let mut last = String::new();
    for _ in 0..REMEMBERED {
        let (_, id) = w.parked();
        w.cancel(&[&id]);
        last = id;
    }
    assert!(matches!(
        second_resume(&mut w, &first),
        Some(IdProblem::Unknown { .. })
    ));
    assert!(matches!(
        second_resume(&mut w, &last),
        Some(IdProblem::AlreadyResolved { .. })
    ));
}

#[test]
fn a_wait_that_runs_out_resumes_its_run_and_leaves_nothing_waiting() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let wait = Ask::caller_payload(json!({crate::WAIT_KEY: "1m"}))
        .expiry_at("1m")
        .on_expiry(OnExpiry::Resume);
    let (id, _) = w.ask(&run, 1, wait);
    w.park(&run, 1, &[&id]);
    w.advance(Duration::from_secs(60));
    let key = w.timer(&id);
    let effects = w.op(Op::Expire {
        interaction: Arc::from(id.as_str()),
        key,
    });
    assert!(
        show(&effects).contains(&"activate r-1#2".to_owned()),
        "{:?}",
        show(&effects)
    );
    // The run ends; nobody resumed it to receive its outcome, so none waits.
    let effects = w.end(&run, 2, Ok(json!("done")), vec![], None);
    assert!(
        !show(&effects)
            .iter()
            .any(|l| l.contains("waiting_outcome_stored")),
        "{:?}",
        show(&effects)
    );
    assert!(w.state.list().is_empty());
}

#[test]
fn a_run_with_only_user_asks_open_is_suspended_naming_them() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (user, _) = w.ask(&run, 1, Ask::user("name?").expiry_at("10m"));
    let effects = w.park(&run, 1, &[&user]);
    assert_eq!(show(&effects), ["gone r-1", "deliver r-1 Suspended"]);
    let record = effects.into_iter().find_map(|e| match e {
        Effect::Deliver(_, record, _) => Some(record),
        _ => None,
    });
    let Some(record) = record else {
        panic!("a delivered record");
    };
    assert_eq!(record.asks, None);
    assert_eq!(
        record.suspension.map(|s| s.interactions),
        Some(vec![user.clone()])
    );
    assert_eq!(status(&w, &user), Some(EntryStatus::Asking));
}

#[test]
fn a_run_records_the_interactions_it_resolved_on_its_way() {
    let mut w = World::new();
    let (_, id) = w.parked();
    let (resumer, _, _) = w.start(Parent::Top);
    let reply = w.ids.reply();
    w.op(Op::Resume {
        interaction: id.clone(),
        payload: json!(1),
        receiver: None,
        resumer: Some(Arc::clone(&resumer)),
        reply,
    });
    let Some(record) = w.state.record_of(&resumer) else {
        panic!("the resumer lives on the subject");
    };
    assert_eq!(record.resumed_interactions, [id]);
}
