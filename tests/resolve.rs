//! "Resume, take, and cancel": what each resolution does, what the resolver gets back,
//! and what a whole-chain cancel tears down.

mod common;

use std::sync::Arc;

use parkway::{
    Ask, CancelError, Clock, EntryStatus, Event, IdProblem, Resolution, ResumeError, Resumed,
    RunStatus, Settled, Start, TakeError, expiry_marker,
};
use serde_json::{Value, json};
use tokio::sync::Notify;

fn outcome(r: Resumed) -> parkway::RunRecord {
    match r {
        Resumed::Outcome(record) => record,
        Resumed::Buffered { remaining, .. } => panic!("buffered, {remaining} remaining"),
    }
}

/// A resume hands back the run's next outcome: here its result, under the same run id.
#[tokio::test]
async fn resume_returns_the_result() {
    let (rt, _clock) = common::runtime().await;
    let parked = rt.run(Start::new("s", "asker")).await.unwrap();
    let id = parked.asks.as_ref().unwrap()[0].id.clone();
    let done = outcome(rt.resume("s", &id, json!("yes")).await.unwrap());
    assert_eq!(done.run_id, parked.run_id);
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.result, Some(json!({"answer": "yes"})));
    assert!(done.finished_at.is_some());
}

/// A resumed run that asks again hands back `parked` with its fresh asks; one that
/// raises hands back `failed`.
#[tokio::test]
async fn resume_returns_fresh_asks_or_a_failure() {
    let (rt, _clock) = common::runtime().await;
    rt.register("twice", &[], |ctx, _, _| async move {
        let a = ctx.ask(Ask::caller("first?").expiry_at("10m")).await?;
        if a == json!("fail") {
            return Err("asked to fail".into());
        }
        let b = ctx.ask(Ask::caller("second?").expiry_at("10m")).await?;
        Ok(json!([a, b]))
    });
    let first = rt.run(Start::new("s", "twice")).await.unwrap();
    let id = first.asks.unwrap()[0].id.clone();
    let again = outcome(rt.resume("s", &id, json!("ok")).await.unwrap());
    assert_eq!(again.status, RunStatus::Parked);
    let asks = again.asks.unwrap();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].question.as_deref(), Some("second?"));
    assert_ne!(asks[0].id, id);
    // The resumed ask is gone; only the fresh one is parked.
    assert_eq!(
        common::ids(&rt.list("s").await.unwrap()),
        [asks[0].id.clone()]
    );

    let other = rt.run(Start::new("s", "twice")).await.unwrap();
    let id = other.asks.unwrap()[0].id.clone();
    let failed = outcome(rt.resume("s", &id, json!("fail")).await.unwrap());
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some("asked to fail"));
}

/// The parked run resumes under its own identity, whoever resumes it.
#[tokio::test]
async fn a_resumed_run_keeps_its_identity() {
    let (rt, _clock) = common::runtime().await;
    rt.register("whoami", &[], |ctx, _, _| async move {
        ctx.ask(Ask::caller("go?").expiry_at("10m")).await?;
        Ok(json!({"identity": ctx.identity(), "run": ctx.run_id()}))
    });
    let first = rt
        .run(Start::new("s", "whoami").identity("alice"))
        .await
        .unwrap();
    let id = first.asks.unwrap()[0].id.clone();
    let done = outcome(rt.resume("s", &id, json!(true)).await.unwrap());
    assert_eq!(
        done.result,
        Some(json!({"identity": "alice", "run": first.run_id}))
    );
}

/// A payload carrying the reserved expiry marker key is refused and changes nothing.
#[tokio::test]
async fn the_expiry_marker_is_reserved() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let before = rt.list("s").await.unwrap();
    let e = rt
        .resume("s", &before[0].id, expiry_marker())
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "payload for interaction {} carries the reserved key interaction_expired",
            before[0].id
        )
    );
    assert_eq!(rt.list("s").await.unwrap(), before);
}

/// Taking a `finished` waiting outcome returns the result and removes the entry; a second
/// take is refused as already taken, naming when.
#[tokio::test]
async fn take_returns_the_result_once() {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    rt.run(Start::new("s", "asker")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    rt.resume_detached("s", &id, json!("yes")).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap()[0].status, EntryStatus::Finished);
    assert_eq!(rt.take("s", &id).await.unwrap(), json!({"answer": "yes"}));
    assert!(rt.list("s").await.unwrap().is_empty());
    let again = rt.take("s", &id).await.unwrap_err();
    assert_eq!(
        again,
        TakeError::Refused(IdProblem::AlreadyResolved {
            id: id.clone(),
            subject: "s".into(),
            how: Settled::Taken,
            at: clock.now(),
        })
    );
    assert_eq!(
        again.to_string(),
        format!("interaction {id} on subject s already resolved (taken) at 2026-01-01T00:00:00Z")
    );
    let kinds: Vec<String> = common::drain(&mut events)
        .iter()
        .map(common::kind)
        .collect();
    assert!(kinds.contains(&"waiting_outcome_stored".to_owned()));
    assert!(kinds.contains(&"waiting_outcome_taken".to_owned()));
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// Taking a `failed` outcome raises: the taker fails as the resolved run did.
#[tokio::test]
async fn taking_a_failed_outcome_raises() {
    let (rt, _clock) = common::runtime().await;
    rt.register("fails_after", &[], |ctx, _, _| async move {
        ctx.ask(Ask::caller("go?").expiry_at("10m")).await?;
        Err("disk full".into())
    });
    // The taker is a run: it fails with the resolved run's error.
    rt.register("taker", &[], |ctx, kwargs, _| async move {
        let id = kwargs["id"].as_str().unwrap_or_default().to_owned();
        Ok(ctx.take_parked(&id).await?)
    });
    rt.run(Start::new("s", "fails_after")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    rt.resume_detached("s", &id, json!("go")).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap()[0].status, EntryStatus::Failed);
    let taker = rt
        .run(Start::new("s", "taker").kwargs(json!({"id": id})))
        .await
        .unwrap();
    assert_eq!(taker.status, RunStatus::Failed);
    assert_eq!(
        taker.error,
        Some(format!("interaction {id} failed: disk full"))
    );
    assert_eq!(taker.resumed_interactions, std::slice::from_ref(&id));
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// Taking an `asking` entry is refused and changes nothing.
#[tokio::test]
async fn taking_an_ask_is_refused() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let before = rt.list("s").await.unwrap();
    let e = rt.take("s", &before[0].id).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "interaction {} is not a waiting outcome (finished or failed) (status: asking)",
            before[0].id
        )
    );
    assert_eq!(rt.list("s").await.unwrap(), before);
}

/// `main` calls `mid`, which calls `asker`; each parks by asking its own caller in turn.
fn register_chain(rt: &parkway::Runtime) {
    for (name, child) in [("main", "mid"), ("mid", "asker")] {
        rt.register(name, &[], move |ctx, _, _| async move {
            let record = ctx.call(child, json!({})).await?;
            if record.status == RunStatus::Parked {
                let answer = ctx
                    .ask(Ask::caller(format!("{child} asks")).expiry_at("10m"))
                    .await?;
                return Ok(answer);
            }
            Ok(serde_json::to_value(record)?)
        });
    }
}

/// Cancelling the bottom ask of a parked chain of three tears all three runs down, with
/// every ask of theirs, for good.
#[tokio::test]
async fn cancel_tears_down_the_whole_parked_chain() {
    let (rt, _clock) = common::runtime().await;
    register_chain(&rt);
    let mut events = rt.events();
    let top = rt.run(Start::new("s", "main")).await.unwrap();
    assert_eq!(top.status, RunStatus::Parked);
    let entries = rt.list("s").await.unwrap();
    assert_eq!(entries.len(), 3);
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.linked_runs), (3, 3), "{stats:?}");
    let bottom = entries
        .iter()
        .find(|e| e.asked_by.as_ref().unwrap()[0] == "asker")
        .unwrap()
        .id
        .clone();
    rt.cancel("s", &[&bottom]).await.unwrap();
    assert!(rt.list("s").await.unwrap().is_empty());
    let events = common::drain(&mut events);
    let cancelled: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::RunCancelled { .. }))
        .collect();
    assert_eq!(cancelled.len(), 3, "{events:?}");
    let resolved: Vec<_> = events
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
        .collect();
    assert_eq!(resolved.len(), 3);
    let stats = rt.stats().await;
    assert_eq!(
        (stats.runs, stats.linked_runs, stats.caller_open),
        (0, 0, 0)
    );
    // For good: the other asks of the chain cannot be resumed, and the refusal says how
    // they went.
    let e = rt.resume("s", &entries[0].id, json!(1)).await.unwrap_err();
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

/// The id of the ask on subject `s` raised by a run of `target`.
async fn ask_raised_by(rt: &parkway::Runtime, target: &str) -> String {
    rt.list("s")
        .await
        .unwrap()
        .into_iter()
        .find(|e| e.asked_by.as_ref().unwrap()[0] == target)
        .unwrap()
        .id
}

/// A run that neither has a live caller nor called a run is a chain of its own: the
/// supervisor's tree never holds it, and a cancel of its park tears down that run alone.
/// When it later calls a run, it enters the tree with its child, and a cancel of the
/// child's park takes both.
#[tokio::test]
async fn a_run_on_its_own_is_not_linked_until_it_calls_a_run() {
    let (rt, _clock) = common::runtime().await;
    common::register_common(&rt);
    // `late` asks first, then calls `asker`, which parks.
    rt.register("late", &[], |ctx, _, _| async move {
        let first = ctx.ask(Ask::caller("first?").expiry_at("10m")).await?;
        let record = ctx.call("asker", json!({})).await?;
        if record.status == RunStatus::Parked {
            let answer = ctx.ask(Ask::caller("carry").expiry_at("10m")).await?;
            return Ok(json!({ "first": first, "answer": answer }));
        }
        Ok(json!({ "first": first }))
    });
    let mut events = rt.events();

    // Two lone parks: one to cancel, one to resume into a chain.
    let lone = rt.run(Start::new("s", "asker")).await.unwrap();
    let late = rt.run(Start::new("s", "late")).await.unwrap();
    assert_eq!(
        (lone.status, late.status),
        (RunStatus::Parked, RunStatus::Parked)
    );
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.linked_runs), (2, 0), "{stats:?}");

    let lone_ask = lone.asks.unwrap()[0].id.clone();
    rt.cancel("s", &[&lone_ask]).await.unwrap();
    let events_now = common::drain(&mut events);
    let cancelled: Vec<_> = events_now
        .iter()
        .filter_map(|e| match e {
            Event::RunCancelled { run, .. } => Some(run.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [lone.run_id.as_str()], "{events_now:?}");
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.linked_runs), (1, 0), "{stats:?}");

    // `late` resumes and calls `asker`: both are now one chain in the tree.
    let first = late.asks.unwrap()[0].id.clone();
    let resumed = outcome(rt.resume("s", &first, json!("yes")).await.unwrap());
    assert_eq!(resumed.status, RunStatus::Parked);
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.linked_runs), (2, 2), "{stats:?}");
    let child_ask = ask_raised_by(&rt, "asker").await;
    rt.cancel("s", &[&child_ask]).await.unwrap();
    let torn = common::drain(&mut events)
        .iter()
        .filter(|e| matches!(e, Event::RunCancelled { .. }))
        .count();
    assert_eq!(torn, 2);
    assert!(rt.list("s").await.unwrap().is_empty());
    let stats = rt.stats().await;
    assert_eq!(
        (stats.runs, stats.linked_runs, stats.caller_open),
        (0, 0, 0)
    );

    // A chain that ends by itself leaves the tree too, parent and child.
    let late = rt.run(Start::new("s", "late")).await.unwrap();
    let first = late.asks.unwrap()[0].id.clone();
    let parked = outcome(rt.resume("s", &first, json!("yes")).await.unwrap());
    let carry = parked.asks.unwrap()[0].id.clone();
    let child_ask = ask_raised_by(&rt, "asker").await;
    rt.resume("s", &child_ask, json!("yes")).await.unwrap();
    let done = outcome(rt.resume("s", &carry, json!("fine")).await.unwrap());
    assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
    let stats = rt.stats().await;
    assert_eq!(
        (stats.runs, stats.linked_runs, stats.caller_open),
        (0, 0, 0)
    );
}

/// A chain of three whose activations are all executing (each waits on its child's
/// call), cancelled from the bottom: all three torn down, and the receiver of the top
/// run sees exactly one failure naming the interaction.
#[tokio::test]
async fn cancel_of_a_live_chain_gives_its_receiver_one_failure() {
    let (rt, _clock) = common::runtime().await;
    let gate = Arc::new(Notify::new());
    let resumed_past_gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (g, past) = (Arc::clone(&gate), Arc::clone(&resumed_past_gate));
    rt.register("bottom", &[], move |ctx, _, _| {
        let (g, past) = (Arc::clone(&g), Arc::clone(&past));
        async move {
            let asked = ctx.ask(Ask::caller("stuck?").expiry_at("10m")).await;
            // Hold the activation open after parking: the chain above stays live.
            g.notified().await;
            past.store(true, std::sync::atomic::Ordering::SeqCst);
            asked?;
            Ok(Value::Null)
        }
    });
    for (name, child) in [("top", "middle"), ("middle", "bottom")] {
        rt.register(name, &[], move |ctx, _, _| async move {
            Ok(serde_json::to_value(ctx.call(child, json!({})).await?)?)
        });
    }
    let mut events = rt.events();
    let rt2 = rt.clone();
    let receiver = tokio::spawn(async move { rt2.run(Start::new("s", "top")).await });
    let id = loop {
        if let Some(e) = rt.list("s").await.unwrap().first() {
            break e.id.clone();
        }
        tokio::task::yield_now().await;
    };
    rt.cancel("s", &[&id]).await.unwrap();
    let record = receiver.await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Cancelled);
    assert_eq!(
        record.error,
        Some(format!("cancelled: interaction {id} was cancelled"))
    );
    rt.settle().await;
    let cancelled = common::drain(&mut events)
        .into_iter()
        .filter(|e| matches!(e, Event::RunCancelled { .. }))
        .count();
    assert_eq!(cancelled, 3);
    // The killed bottom activation never continues, even when its gate opens.
    gate.notify_waiters();
    rt.settle().await;
    tokio::task::yield_now().await;
    assert!(
        !resumed_past_gate.load(std::sync::atomic::Ordering::SeqCst),
        "the torn-down activation went on running"
    );
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.caller_open), (0, 0));
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A run that cancels a park raised below it survives: the chain stops below the
/// canceller, which carries on and finishes.
#[tokio::test]
async fn the_canceller_survives_a_cancel_of_its_own_child_chain() {
    let (rt, _clock) = common::runtime().await;
    rt.register("boss", &[], |ctx, _, _| async move {
        let child = ctx.call("asker", json!({})).await?;
        let id = child.asks.unwrap_or_default()[0].id.clone();
        ctx.cancel_parked(&[&id]).await?;
        let left = ctx.list_parked().await?;
        Ok(json!({"cancelled": id, "left": left.len()}))
    });
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "boss")).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded, "{record:?}");
    assert_eq!(record.result.as_ref().unwrap()["left"], 0);
    let id = record.result.as_ref().unwrap()["cancelled"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(record.resumed_interactions, [id]);
    let cancelled: Vec<String> = common::drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::RunCancelled { run, .. } => Some(run),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled.len(), 1);
    assert_ne!(cancelled[0], record.run_id);
}

/// A run that cancels a park not raised below it is no exception: `outer` calls `asker`
/// (which parks), then `killer`, which cancels that park. The chain reaches `outer`, and
/// `killer`, a descendant of `outer`, goes down with it.
#[tokio::test]
async fn a_canceller_beside_the_park_is_torn_down_with_the_chain() {
    let (rt, _clock) = common::runtime().await;
    rt.register("outer", &[], |ctx, _, _| async move {
        let child = ctx.call("asker", json!({})).await?;
        let id = child.asks.unwrap_or_default()[0].id.clone();
        ctx.call("killer", json!({ "id": id })).await?;
        Ok(json!("outer carried on"))
    });
    rt.register("killer", &[], |ctx, kwargs, _| async move {
        let id = kwargs["id"].as_str().unwrap_or_default().to_owned();
        ctx.cancel_parked(&[&id]).await?;
        ctx.ask(Ask::caller("orphan?").expiry_at("10m")).await?;
        Ok(json!("killer carried on"))
    });
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "outer")).await.unwrap();
    assert_eq!(record.status, RunStatus::Cancelled, "{record:?}");
    rt.settle().await;
    let mut cancelled: Vec<String> = common::drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::RunCancelled { run, .. } => Some(run),
            _ => None,
        })
        .collect();
    cancelled.sort();
    cancelled.dedup();
    assert_eq!(cancelled.len(), 3, "{cancelled:?}");
    let stats = rt.stats().await;
    assert_eq!((stats.runs, stats.caller_open), (0, 0));
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A cancelled waiting outcome is simply removed, with an event.
#[tokio::test]
async fn cancelling_a_waiting_outcome_removes_it() {
    let (rt, _clock) = common::runtime().await;
    let mut events = rt.events();
    rt.run(Start::new("s", "asker")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    rt.resume_detached("s", &id, json!("yes")).await.unwrap();
    rt.settle().await;
    rt.cancel("s", &[&id]).await.unwrap();
    assert!(rt.list("s").await.unwrap().is_empty());
    assert!(common::drain(&mut events).iter().any(|e| matches!(
        e,
        Event::WaitingOutcomeDropped { reason, .. } if reason == "cancelled"
    )));
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// A cancel naming an unknown id, or one id twice, is refused whole: every problem is
/// named and nothing is cancelled.
#[tokio::test]
async fn a_bad_cancel_changes_nothing() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let before = rt.list("s").await.unwrap();
    let id = before[0].id.as_str();
    let e = rt.cancel("s", &[id, "i-77", id]).await.unwrap_err();
    let CancelError::Refused(problems) = &e else {
        panic!("{e:?}")
    };
    assert_eq!(problems.0.len(), 2);
    assert_eq!(
        e.to_string(),
        format!("unknown interaction i-77 on subject s; interaction {id} is named more than once")
    );
    assert_eq!(rt.list("s").await.unwrap(), before);
}

/// Issue 18, item 9: the memory of resolutions lasts the retention horizon and no longer:
/// past it, a gone id reads as unknown again, exactly as one never issued.
#[tokio::test]
async fn a_resolution_is_remembered_for_the_retention_horizon_only() {
    let (rt, clock) = common::runtime_with(|b| {
        b.waiting_retention(std::time::Duration::from_secs(60))
            .passivate_after(std::time::Duration::ZERO)
    })
    .await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let Resumed::Outcome(done) = rt.resume("s", "i-1", json!(true)).await.unwrap() else {
        panic!("a lone ask resumes its run");
    };
    assert_eq!(done.status, RunStatus::Succeeded);
    rt.settle().await;
    // Remembered through passivation: the memory is packed with the subject.
    clock.advance(std::time::Duration::from_secs(59));
    rt.settle().await;
    let e = rt.cancel("s", &["i-1"]).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "interaction i-1 on subject s already resolved (resumed) at 2026-01-01T00:00:00Z"
    );
    clock.advance(std::time::Duration::from_secs(1));
    rt.settle().await;
    assert_eq!(
        rt.resume("s", "i-1", json!(true)).await.unwrap_err(),
        ResumeError::Refused(IdProblem::Unknown {
            id: "i-1".into(),
            subject: "s".into()
        })
    );
    let stats = rt.stats().await;
    assert_eq!(
        (stats.live_subjects, stats.passive_subjects),
        (0, 0),
        "a subject holding nothing but old memories is forgotten"
    );
}

/// The memory is bounded by a count too: past 1024 resolutions on one subject the oldest
/// is forgotten and reads as unknown, while the newer ones still read as resolved.
#[tokio::test]
async fn past_the_count_the_oldest_resolution_is_forgotten() {
    let (rt, _clock) = common::runtime().await;
    let mut ids = Vec::new();
    for _ in 0..1025 {
        let record = rt.run(Start::new("s", "asker")).await.unwrap();
        let id = record.asks.unwrap()[0].id.clone();
        rt.cancel("s", &[&id]).await.unwrap();
        ids.push(id);
    }
    let e = rt.cancel("s", &[&ids[0]]).await.unwrap_err();
    assert_eq!(
        e,
        CancelError::Refused(parkway::Problems(vec![IdProblem::Unknown {
            id: ids[0].clone(),
            subject: "s".into()
        }]))
    );
    let e = rt.cancel("s", &[&ids[1]]).await.unwrap_err();
    assert!(
        e.to_string().contains("already resolved (cancelled)"),
        "{e}"
    );
}

/// A door's `resume_expr` naming a gone id is refused with the same already-resolved
/// problem as the API, so a visitor retrying can tell it from an id never issued.
#[tokio::test]
async fn a_door_resolving_a_gone_id_reads_already_resolved() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(
        parkway::DoorSpec::route("again", "asker").resume_expr("{id: .id, payload: true}"),
    )
    .unwrap();
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.resume("s", "i-1", json!(true)).await.unwrap();
    let e = rt
        .visit("again", "s", json!({"id": "i-1"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("already resolved (resumed)"), "{e}");
    let e = rt
        .visit("again", "s", json!({"id": "i-9"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("unknown interaction i-9"), "{e}");
}
