//! Runs are replayed, not frozen: a resume replays the target from the start against
//! its journal, so steps and calls are not repeated, answers come back in order, a
//! divergence fails loudly, and the journal is plain data.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use parkway::{
    Ask, Entry, EntryStatus, Event, Journal, JournalEntry, Resumed, RunRecord, RunStatus, Start, To,
};
use serde_json::{Value, json};

/// The run's next outcome after a resume that completes its group.
fn outcome(resumed: Resumed) -> RunRecord {
    match resumed {
        Resumed::Outcome(record) => record,
        other => panic!("expected the run's outcome, got {other:?}"),
    }
}

/// A step runs once: the replay after a resume returns its recorded value instead of
/// running it again, while the target itself is activated twice.
#[tokio::test]
async fn a_journaled_step_is_not_repeated() {
    let (rt, _clock) = common::runtime().await;
    let steps = Arc::new(AtomicUsize::new(0));
    let activations = Arc::new(AtomicUsize::new(0));
    let (s, a) = (Arc::clone(&steps), Arc::clone(&activations));
    rt.register("counted", &[], move |ctx, _, _| {
        let (steps, activations) = (Arc::clone(&s), Arc::clone(&a));
        async move {
            activations.fetch_add(1, Ordering::SeqCst);
            let step: usize = ctx
                .step("count", || async move {
                    Ok::<_, String>(steps.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await?;
            let answer = ctx.ask(Ask::caller("go?").expiry_at("10m")).await?;
            Ok(json!({"step": step, "answer": answer}))
        }
    });
    let record = rt.run(Start::new("s", "counted")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    assert_eq!(steps.load(Ordering::SeqCst), 1);
    let id = record.asks.unwrap()[0].id.clone();
    let done = outcome(rt.resume("s", &id, json!("yes")).await.unwrap());
    assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
    assert_eq!(done.result, Some(json!({"step": 1, "answer": "yes"})));
    assert_eq!(steps.load(Ordering::SeqCst), 1, "the step ran once");
    assert_eq!(
        activations.load(Ordering::SeqCst),
        2,
        "the target was replayed"
    );
}

/// A replay returns the recorded answers in order: the first ask answers from the
/// journal, the next parks alone, and the result carries both answers.
#[tokio::test]
async fn replay_returns_recorded_answers_in_order() {
    let (rt, _clock) = common::runtime().await;
    rt.register("two_questions", &[], |ctx, _, _| async move {
        let a = ctx.ask(Ask::caller("A?").expiry_at("10m")).await?;
        let b = ctx.ask(Ask::caller("B?").expiry_at("10m")).await?;
        Ok(json!({"a": a, "b": b}))
    });
    let record = rt.run(Start::new("s", "two_questions")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let asks = record.asks.unwrap();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].question.as_deref(), Some("A?"));

    let second = outcome(rt.resume("s", &asks[0].id, json!("first")).await.unwrap());
    assert_eq!(second.status, RunStatus::Parked, "{second:?}");
    assert_eq!(second.run_id, record.run_id);
    let asks_b = second.asks.unwrap();
    assert_eq!(asks_b.len(), 1, "only the new ask: {asks_b:?}");
    assert_eq!(asks_b[0].question.as_deref(), Some("B?"));
    assert_ne!(asks_b[0].id, asks[0].id);
    assert_eq!(
        common::ids(&rt.list("s").await.unwrap()),
        [asks_b[0].id.clone()]
    );

    let done = outcome(
        rt.resume("s", &asks_b[0].id, json!("second"))
            .await
            .unwrap(),
    );
    assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
    assert_eq!(done.result, Some(json!({"a": "first", "b": "second"})));
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A replay that meets another ask than the recorded one fails the run loudly, naming
/// the divergence, and leaves nothing parked or counted.
#[tokio::test]
async fn a_diverging_replay_fails_loudly() {
    let (rt, _clock) = common::runtime().await;
    let flipped = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flipped);
    rt.register("fickle", &[], move |ctx, _, _| {
        let flipped = Arc::clone(&f);
        async move {
            let question = if flipped.load(Ordering::SeqCst) {
                "something else?"
            } else {
                "proceed?"
            };
            let answer = ctx.ask(Ask::caller(question).expiry_at("10m")).await?;
            Ok(json!({ "answer": answer }))
        }
    });
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "fickle")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let id = record.asks.unwrap()[0].id.clone();
    flipped.store(true, Ordering::SeqCst);
    let done = outcome(rt.resume("s", &id, json!("yes")).await.unwrap());
    assert_eq!(done.status, RunStatus::Failed, "{done:?}");
    let error = done.error.unwrap_or_default();
    assert!(error.contains("diverged"), "{error}");
    assert!(done.result.is_none());
    rt.settle().await;
    assert!(
        rt.list("s").await.unwrap().is_empty(),
        "nothing left parked"
    );
    assert_eq!(rt.stats().await.caller_open, 0);
    let failed: Vec<String> = common::drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::RunFailed { run, error, .. } => {
                assert!(error.contains("diverged"), "{error}");
                Some(run)
            }
            _ => None,
        })
        .collect();
    assert_eq!(failed, [record.run_id], "the run failed, once");
}

/// A divergence fails the run even when the target swallows the error it was handed:
/// a replay off its journal never ends as a success.
#[tokio::test]
async fn a_swallowed_divergence_still_fails_the_run() {
    let (rt, _clock) = common::runtime().await;
    let flipped = Arc::new(AtomicBool::new(false));
    let f = Arc::clone(&flipped);
    rt.register("swallower", &[], move |ctx, _, _| {
        let flipped = Arc::clone(&f);
        async move {
            if flipped.load(Ordering::SeqCst) {
                // A step where the journal holds an ask: the error is ignored.
                let _ = ctx.step("sneaky", || async { Ok::<_, String>(1) }).await;
                return Ok(json!("swallowed"));
            }
            let answer = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?;
            Ok(json!({ "answer": answer }))
        }
    });
    let record = rt.run(Start::new("s", "swallower")).await.unwrap();
    let id = record.asks.unwrap()[0].id.clone();
    flipped.store(true, Ordering::SeqCst);
    let done = outcome(rt.resume("s", &id, json!("yes")).await.unwrap());
    assert_eq!(done.status, RunStatus::Failed, "{done:?}");
    let error = done.error.unwrap_or_default();
    assert!(error.contains("diverged"), "{error}");
    assert!(
        error.contains("sneaky"),
        "the error names what the replay met: {error}"
    );
    rt.settle().await;
    assert!(rt.list("s").await.unwrap().is_empty());
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// A call is journaled like a step: replaying the caller returns the recorded child
/// record and never starts the child again.
#[tokio::test]
async fn a_call_is_journaled_and_not_repeated_on_replay() {
    let (rt, _clock) = common::runtime().await;
    let activations = Arc::new(AtomicUsize::new(0));
    let a = Arc::clone(&activations);
    rt.register("main", &[], move |ctx, _, _| {
        let activations = Arc::clone(&a);
        async move {
            activations.fetch_add(1, Ordering::SeqCst);
            let child = ctx.call("asker", json!({})).await?;
            if child.status != RunStatus::Parked {
                return Err(format!("expected the child parked, got {:?}", child.status).into());
            }
            let asks = child.asks.clone().unwrap_or_default();
            let answer = ctx.ask(Ask::caller("carry up?").expiry_at("10m")).await?;
            Ok(json!({
                "child_run": child.run_id,
                "child_status": child.status,
                "child_asks": common::ids(&asks),
                "answer": answer,
            }))
        }
    });
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "main")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked, "{record:?}");
    let own = record.asks.unwrap();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].asked_by.as_deref(), Some(&["main".to_owned()][..]));
    let listed = rt.list("s").await.unwrap();
    assert_eq!(
        listed.len(),
        2,
        "the child's park and main's own: {listed:?}"
    );
    let child_ask = listed
        .iter()
        .find(|e| e.id != own[0].id)
        .expect("the child's park")
        .clone();
    assert_eq!(
        child_ask.asked_by.as_deref(),
        Some(&["asker".to_owned(), "main".to_owned()][..])
    );

    let done = outcome(rt.resume("s", &own[0].id, json!("up")).await.unwrap());
    assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
    let result = done.result.unwrap();
    assert_eq!(result["child_status"], "parked");
    assert_eq!(result["child_asks"], json!([child_ask.id.clone()]));
    assert_eq!(result["answer"], "up");
    assert_eq!(activations.load(Ordering::SeqCst), 2, "main was replayed");
    rt.settle().await;

    let asker_starts: Vec<String> = common::drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::RunStarted { target, run, .. } if target == "asker" => Some(run),
            _ => None,
        })
        .collect();
    assert_eq!(
        asker_starts.len(),
        1,
        "the child was started once: {asker_starts:?}"
    );
    assert_eq!(result["child_run"], json!(asker_starts[0]));
    // The child's park stays on the subject for a later owner.
    let left = rt.list("s").await.unwrap();
    assert_eq!(common::ids(&left), std::slice::from_ref(&child_ask.id));
    assert_eq!(left[0].status, EntryStatus::Asking);
}

/// A resumed run runs under its own run id and identity on every activation.
#[tokio::test]
async fn a_run_resumes_under_its_own_id_and_identity() {
    let (rt, _clock) = common::runtime().await;
    let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let s = Arc::clone(&seen);
    rt.register("whoami", &[], move |ctx, _, _| {
        let seen = Arc::clone(&s);
        async move {
            if let Ok(mut seen) = seen.lock() {
                seen.push((ctx.run_id().to_owned(), ctx.identity().to_owned()));
            }
            ctx.ask(Ask::caller("who?").expiry_at("10m")).await?;
            Ok(json!({"run": ctx.run_id(), "identity": ctx.identity()}))
        }
    });
    // Another run in between, as someone else, so ids and identities could mix.
    let record = rt
        .run(Start::new("s", "whoami").identity("alice"))
        .await
        .unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let other = rt
        .run(Start::new("s", "whoami").identity("bob"))
        .await
        .unwrap();
    assert_ne!(other.run_id, record.run_id);
    let id = record.asks.unwrap()[0].id.clone();

    let done = outcome(rt.resume("s", &id, json!("me")).await.unwrap());
    assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
    assert_eq!(done.run_id, record.run_id);
    assert_eq!(done.started_at, record.started_at);
    assert_eq!(
        done.result,
        Some(json!({"run": record.run_id.clone(), "identity": "alice"}))
    );
    let seen = seen.lock().unwrap().clone();
    let alice: Vec<_> = seen.iter().filter(|(r, _)| *r == record.run_id).collect();
    assert_eq!(alice.len(), 2, "two activations of alice's run: {seen:?}");
    assert!(alice.iter().all(|(_, who)| who == "alice"), "{seen:?}");
}

/// The instant `secs` after the epoch.
fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap_or_default()
}

/// Every journal entry variant serialises as plain data and reads back the same.
#[test]
fn journal_entries_round_trip_as_plain_data() {
    let child = RunRecord {
        run_id: "r-2".into(),
        target: "asker".into(),
        identity: "system".into(),
        status: RunStatus::Parked,
        started_at: at(1_767_225_600),
        finished_at: None,
        result: None,
        error: None,
        asks: Some(vec![Entry {
            id: "i-1".into(),
            status: EntryStatus::Asking,
            to: Some(To::Caller),
            asked_by: Some(vec!["asker".into(), "main".into()]),
            question: Some("proceed?".into()),
            answer_format: Some("confirm".into()),
            group_id: Some("g-1".into()),
            payload: Some(json!({"diff": "+1 -1"})),
        }]),
        suspension: None,
        resumed_interactions: vec![],
    };
    let finished = RunRecord {
        run_id: "r-3".into(),
        target: "echo".into(),
        identity: "system".into(),
        status: RunStatus::Succeeded,
        started_at: at(1_767_225_600),
        finished_at: Some(at(1_767_225_660)),
        result: Some(json!({"ok": true})),
        error: None,
        asks: None,
        suspension: None,
        resumed_interactions: vec!["i-7".into()],
    };
    let cases: Vec<(JournalEntry, &str)> = vec![
        (
            JournalEntry::Ask {
                interaction: "i-1".into(),
                question: Some("proceed?".into()),
                answer: Some(json!({"answer": "yes"})),
            },
            "ask",
        ),
        (
            JournalEntry::Ask {
                interaction: "i-2".into(),
                question: None,
                answer: None,
            },
            "ask",
        ),
        (
            JournalEntry::Step {
                name: "count".into(),
                result: Ok(json!(1)),
            },
            "step",
        ),
        (
            JournalEntry::Step {
                name: "flaky".into(),
                result: Err("the model timed out".into()),
            },
            "step",
        ),
        (
            JournalEntry::Call {
                target: "asker".into(),
                record: Box::new(child),
            },
            "call",
        ),
        (
            JournalEntry::Call {
                target: "echo".into(),
                record: Box::new(finished),
            },
            "call",
        ),
    ];
    for (entry, op) in &cases {
        let text = serde_json::to_string(entry).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["op"], *op, "{text}");
        assert!(!text.contains("null"), "unset fields are absent: {text}");
        let back: JournalEntry = serde_json::from_str(&text).unwrap();
        assert_eq!(&back, entry, "{text}");
    }
    // An unset question and answer are absent, not null.
    let bare = serde_json::to_value(&cases[1].0).unwrap();
    assert_eq!(bare, json!({"op": "ask", "interaction": "i-2"}));

    // A whole journal is a plain JSON array of them.
    let journal = Journal {
        entries: cases.into_iter().map(|(e, _)| e).collect(),
    };
    let value = serde_json::to_value(&journal).unwrap();
    assert!(value.is_array());
    let back: Journal = serde_json::from_value(value).unwrap();
    assert_eq!(back, journal);
}

/// An ask answered with JSON `null` (a valid resume payload) replays with that answer.
#[tokio::test]
async fn an_ask_answered_with_null_replays_with_null() {
    let (rt, _clock) = common::runtime().await;
    let record = rt.run(Start::new("s", "asker")).await.unwrap();
    let id = record.asks.unwrap()[0].id.clone();
    let done = outcome(rt.resume("s", &id, Value::Null).await.unwrap());
    assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
    assert_eq!(done.result, Some(json!({"answer": null})));
}

/// JSON `null` recorded in a journal (an ask answered with `null`, a child that returned
/// `null`) reads back as recorded: a restored journal must not turn an answered ask into
/// an unanswered one, nor a child's `null` result into no result.
///
/// The bug: `answer` and `RunRecord::result` are `Option<Value>` with a plain
/// `#[serde(default)]`, so `Some(Value::Null)` serialises as `null` and deserialises as
/// `None`.
#[test]
fn null_values_survive_the_journal_round_trip() {
    let answered = JournalEntry::Ask {
        interaction: "i-1".into(),
        question: Some("proceed?".into()),
        answer: Some(Value::Null),
    };
    let text = serde_json::to_string(&answered).unwrap();
    let back: JournalEntry = serde_json::from_str(&text).unwrap();
    assert_eq!(back, answered, "{text}");

    let called = JournalEntry::Call {
        target: "nothing".into(),
        record: Box::new(RunRecord {
            run_id: "r-2".into(),
            target: "nothing".into(),
            identity: "system".into(),
            status: RunStatus::Succeeded,
            started_at: at(1_767_225_600),
            finished_at: Some(at(1_767_225_600)),
            result: Some(Value::Null),
            error: None,
            asks: None,
            suspension: None,
            resumed_interactions: vec![],
        }),
    };
    let text = serde_json::to_string(&called).unwrap();
    let back: JournalEntry = serde_json::from_str(&text).unwrap();
    assert_eq!(back, called, "{text}");
}
