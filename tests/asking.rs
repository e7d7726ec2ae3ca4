//! Asking: what a caller ask must carry, what is refused before anything is stored,
//! and how the asks of one activation form a group.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parkway::{
    Ask, AskError, AskProblem, EntryStatus, IdProblem, Mode, ResumeError, Resumed, RunStatus,
    Start, StartError,
};
use serde_json::{Value, json};

/// Register `name` as a target that makes `ask` and returns the error it met, as text.
fn register_asking(rt: &parkway::Runtime, name: &str, ask: Ask) {
    rt.register(name, &[], move |ctx, _, _| {
        let ask = ask.clone();
        async move {
            match ctx.ask(ask).await {
                Err(AskError::Suspended(_)) => Ok(json!("parked")),
                Err(e) => Ok(json!({ "error": e.to_string(), "debug": format!("{e:?}") })),
                Ok(answer) => Ok(answer),
            }
        }
    });
}

/// Each malformed ask is refused with a message naming what is wrong, and nothing is
/// stored or counted.
#[tokio::test]
async fn malformed_asks_are_refused_and_store_nothing() {
    let (rt, _clock) = common::runtime().await;
    let long = "x".repeat(8193);
    let cases: Vec<(&str, Ask, &str)> = vec![
        (
            "sync_caller",
            Ask::caller("q").mode(Mode::Sync).expiry_at("10m"),
            "a caller ask is always mode=async, not sync",
        ),
        ("no_expiry", Ask::caller("q"), "expiry_at is required"),
        (
            "naive_expiry",
            Ask::caller("q").expiry_at("2026-01-01T10:00:00"),
            "expiry_at \"2026-01-01T10:00:00\" has no time zone",
        ),
        (
            "bad_expiry",
            Ask::caller("q").expiry_at("tomorrow-ish"),
            "is neither an RFC 3339 instant nor a duration",
        ),
        (
            "past_expiry",
            Ask::caller("q").expiry_at("2025-01-01T00:00:00Z"),
            "expiry_at 2025-01-01T00:00:00+00:00 is not in the future",
        ),
        (
            "payload_on_user",
            Ask::user("q").payload(json!({"a": 1})).expiry_at("10m"),
            "payload is only allowed on a caller ask, not on a user ask",
        ),
        (
            "too_long",
            Ask::caller(long).expiry_at("10m"),
            "question has 8193 characters, more than the limit of 8192",
        ),
    ];
    for (name, ask, message) in cases {
        register_asking(&rt, name, ask);
        let record = rt.run(Start::new("s", name)).await.unwrap();
        assert_eq!(record.status, RunStatus::Succeeded, "{name}");
        let error = record.result.unwrap()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(message), "{name}: {error}");
    }
    assert!(rt.list("s").await.unwrap().is_empty());
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// Validation reports every problem together, not only the first.
#[tokio::test]
async fn every_problem_is_reported_together() {
    let (rt, _clock) = common::runtime().await;
    register_asking(&rt, "two_wrongs", Ask::caller("q").mode(Mode::Sync));
    let record = rt.run(Start::new("s", "two_wrongs")).await.unwrap();
    let error = record.result.unwrap()["error"].as_str().unwrap().to_owned();
    assert_eq!(
        error,
        "invalid ask: a caller ask is always mode=async, not sync; expiry_at is required"
    );
}

/// A question of exactly 8192 characters is accepted; the problem type names the limit.
#[tokio::test]
async fn the_question_limit_is_inclusive() {
    let (rt, _clock) = common::runtime().await;
    register_asking(&rt, "max", Ask::caller("é".repeat(8192)).expiry_at("10m"));
    let record = rt.run(Start::new("s", "max")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let problem = AskProblem::QuestionTooLong {
        chars: 8193,
        max: 8192,
    };
    assert!(problem.to_string().contains("8192"));
}

/// A duration deadline resolves against the runtime clock; an instant with an offset is
/// taken as given. Neither fires a moment early.
#[tokio::test]
async fn deadlines_resolve_against_the_runtime_clock() {
    let (rt, clock) = common::runtime().await;
    register_asking(&rt, "in_10m", Ask::caller("q").expiry_at("10m"));
    // The manual clock starts at 2026-01-01T00:00:00Z; 02:20+02:00 is 00:20Z.
    register_asking(
        &rt,
        "at_offset",
        Ask::caller("q").expiry_at("2026-01-01T02:20:00+02:00"),
    );
    rt.run(Start::new("s", "in_10m")).await.unwrap();
    rt.run(Start::new("s", "at_offset")).await.unwrap();
    clock.advance(Duration::from_secs(10 * 60 - 1));
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap().len(), 2);
    clock.advance(Duration::from_secs(1));
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap().len(), 1);
    clock.advance(Duration::from_secs(10 * 60 - 1));
    rt.settle().await;
    assert_eq!(rt.list("s").await.unwrap().len(), 1);
    clock.advance(Duration::from_secs(1));
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A caller ask's answer is the resume payload as given; `answer_format` is metadata and
/// is not validated for caller asks.
#[tokio::test]
async fn the_answer_is_the_payload_as_given() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    // "confirm" would want a boolean from a person; a caller may answer anything.
    let answer = json!({"verdict": "banana", "n": [1, 2]});
    let record = rt.resume("s", &id, answer.clone()).await.unwrap();
    let record = record.record().unwrap().clone();
    assert_eq!(record.result, Some(json!({ "answer": answer })));
}

/// Asks raised by one activation share a group id; resuming one while a sibling still
/// asks buffers the answer and turns that entry `running`; the run resumes once, when the
/// last is resolved, and sees both answers.
#[tokio::test]
async fn a_group_resumes_once_when_its_last_ask_is_resolved() {
    let (rt, _clock) = common::runtime().await;
    let activations = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&activations);
    rt.register("pair", &[], move |ctx, _, _| {
        let count = Arc::clone(&count);
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            let a = ctx.ask(Ask::caller("a?").expiry_at("10m")).await;
            let b = ctx.ask(Ask::caller("b?").expiry_at("10m")).await;
            Ok(json!([a?, b?]))
        }
    });
    let record = rt.run(Start::new("s", "pair")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let asks = record.asks.unwrap();
    assert_eq!(asks.len(), 2);
    assert_eq!(asks[0].group_id, asks[1].group_id);

    let first = rt.resume("s", &asks[0].id, json!("A")).await.unwrap();
    assert_eq!(
        serde_json::to_value(&first).unwrap(),
        json!({"status": "buffered", "remaining": 1})
    );
    let entries = rt.list("s").await.unwrap();
    assert_eq!(entries[0].status, EntryStatus::Running);
    assert_eq!(entries[1].status, EntryStatus::Asking);
    assert_eq!(activations.load(Ordering::SeqCst), 1);

    let Resumed::Outcome(done) = rt.resume("s", &asks[1].id, json!("B")).await.unwrap() else {
        panic!("the last answer resumes the run");
    };
    assert_eq!(done.result, Some(json!(["A", "B"])));
    assert_eq!(activations.load(Ordering::SeqCst), 2);
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// An ask is stored before anything its run does next: a run that asks twice and then
/// reads its subject's parked set finds both asks there, under the ids its suspensions
/// named, in the order asked.
#[tokio::test]
async fn an_ask_is_stored_before_its_run_goes_on() {
    let (rt, _clock) = common::runtime().await;
    let seen: Arc<std::sync::Mutex<Vec<Vec<String>>>> = Arc::default();
    let keep = Arc::clone(&seen);
    rt.register("ask_then_list", &[], move |ctx, _, _| {
        let keep = Arc::clone(&keep);
        async move {
            let mut named = Vec::new();
            for question in ["a?", "b?"] {
                if let Err(AskError::Suspended(s)) =
                    ctx.ask(Ask::caller(question).expiry_at("10m")).await
                {
                    named.push(s.interaction().to_owned());
                }
            }
            let listed = ctx.list_parked().await?.into_iter().map(|e| e.id).collect();
            keep.lock().unwrap().extend([named, listed]);
            Ok(Value::Null)
        }
    });
    let record = rt.run(Start::new("s", "ask_then_list")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let seen = seen.lock().unwrap().clone();
    let [named, listed] = <[Vec<String>; 2]>::try_from(seen).unwrap();
    assert_eq!(named.len(), 2);
    assert_eq!(listed, named);
    let asks: Vec<String> = record.asks.unwrap().into_iter().map(|e| e.id).collect();
    assert_eq!(asks, named);
}

/// Asks of separate activations get separate groups.
#[tokio::test]
async fn a_lone_ask_is_a_group_of_one() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.run(Start::new("s", "asker")).await.unwrap();
    let entries = rt.list("s").await.unwrap();
    assert_ne!(entries[0].group_id, entries[1].group_id);
}

/// A second resolution of the same id is refused loudly (`not asking`) and changes
/// nothing.
#[tokio::test]
async fn a_second_resolution_is_refused() {
    let (rt, _clock) = common::runtime().await;
    rt.register("pair", &[], |ctx, _, _| async move {
        let a = ctx.ask(Ask::caller("a?").expiry_at("10m")).await;
        let b = ctx.ask(Ask::caller("b?").expiry_at("10m")).await;
        Ok(json!([a?, b?]))
    });
    let asks = rt.run(Start::new("s", "pair")).await.unwrap().asks.unwrap();
    rt.resume("s", &asks[0].id, json!(1)).await.unwrap();
    let before = rt.list("s").await.unwrap();
    let again = rt.resume("s", &asks[0].id, json!(2)).await.unwrap_err();
    assert_eq!(
        again.to_string(),
        format!("interaction {} is not asking (status: running)", asks[0].id)
    );
    let cancel = rt.cancel("s", &[&asks[0].id]).await.unwrap_err();
    assert!(cancel.to_string().contains("(status: running)"), "{cancel}");
    assert_eq!(rt.list("s").await.unwrap(), before);
    // The buffered answer is still the first one.
    let done = rt.resume("s", &asks[1].id, json!(3)).await.unwrap();
    assert_eq!(done.record().unwrap().result, Some(json!([1, 3])));
}

/// An unknown id is refused naming the id and the subject.
#[tokio::test]
async fn an_unknown_id_is_refused() {
    let (rt, _clock) = common::runtime().await;
    let e = rt.resume("s", "i-404", json!(1)).await.unwrap_err();
    assert_eq!(
        e,
        ResumeError::Refused(IdProblem::Unknown {
            id: "i-404".into(),
            subject: "s".into()
        })
    );
    assert_eq!(e.to_string(), "unknown interaction i-404 on subject s");
}

/// An unknown target, kwargs that are not an object, and undeclared extras are refused
/// before a run starts.
#[tokio::test]
async fn bad_starts_are_refused() {
    let (rt, _clock) = common::runtime().await;
    let mut events = rt.events();
    let e = rt.run(Start::new("s", "nope")).await.unwrap_err();
    assert_eq!(e, StartError::UnknownTarget("nope".into()));
    assert_eq!(e.to_string(), "unknown target nope");
    let e = rt
        .run(Start::new("s", "echo").kwargs(json!([1])))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "kwargs must be a JSON object");
    let e = rt
        .run(Start::new("s", "echo").extras(json!({"trace": 1, "secret": 2})))
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "target echo does not declare extras key(s) secret"
    );
    // None of the refused starts started a run.
    assert!(common::drain(&mut events).is_empty());
    let ok = rt
        .run(Start::new("s", "echo").extras(json!({"trace": 1})))
        .await
        .unwrap();
    assert_eq!(ok.result.unwrap()["extras"], json!({"trace": 1}));
}

/// At the caller cap an ask is refused loudly, naming the setting and the limit, and
/// nothing is stored; the refusal is an event.
#[tokio::test]
async fn the_caller_cap_refuses_loudly() {
    let (rt, _clock) = common::runtime_with(|b| b.max_concurrent_caller(2)).await;
    let mut events = rt.events();
    register_asking(&rt, "one", Ask::caller("q").expiry_at("10m"));
    for _ in 0..2 {
        assert_eq!(
            rt.run(Start::new("s", "one")).await.unwrap().status,
            RunStatus::Parked
        );
    }
    let record = rt.run(Start::new("s", "one")).await.unwrap();
    let error: Value = record.result.unwrap()["error"].clone();
    assert_eq!(
        error,
        json!("INTERACTIONS_MAX_CONCURRENT_CALLER reached: limit is 2, ask refused")
    );
    assert_eq!(rt.list("s").await.unwrap().len(), 2);
    assert_eq!(rt.stats().await.caller_open, 2);
    assert!(
        common::drain(&mut events)
            .iter()
            .any(|e| common::kind(e) == "cap_refused")
    );
}
