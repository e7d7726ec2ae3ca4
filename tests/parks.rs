//! "Parks on the subject": the shape of a parked entry, the statuses, and who sees
//! the set. The seed page's example entry is kept verbatim in `tests/data/parked-entry.json`.

mod common;

use std::sync::Arc;

use parkway::{Ask, Entry, EntryStatus, Resumed, RunStatus, Start};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The example entry of the seed page ("Parks on the subject"), copied verbatim.
const SEED_EXAMPLE: &str = include_str!("data/parked-entry.json");

/// A caller ask raised by target `main` serialises exactly as the seed page's example,
/// byte for byte once the id is the page's.
#[tokio::test]
async fn entry_matches_the_seed_example_byte_for_byte() {
    let (rt, _clock) = common::runtime().await;
    rt.register("main", &[], |ctx, _, _| async move {
        ctx.ask(
            Ask::caller("proceed?")
                .answer_format("confirm")
                .expiry_at("10m"),
        )
        .await?;
        Ok(Value::Null)
    });
    rt.run(Start::new("s", "main")).await.unwrap();
    let entries = rt.list("s").await.unwrap();
    assert_eq!(entries.len(), 1);
    let mut ours = serde_json::to_value(&entries[0]).unwrap();
    assert_eq!(ours["id"], "i-1");
    ours["id"] = json!("i-42");
    // Key order is kept when the page's text is parsed, so the compact forms compare
    // byte for byte.
    let page: Value = serde_json::from_str(SEED_EXAMPLE).unwrap();
    assert_eq!(
        serde_json::to_string(&ours).unwrap(),
        serde_json::to_string(&page).unwrap()
    );
    // And it reads back into the same entry.
    let back: Entry = serde_json::from_str(SEED_EXAMPLE).unwrap();
    assert_eq!(back.status, EntryStatus::Asking);
}

/// Unset optional fields are absent, never present as null keys.
#[tokio::test]
async fn unset_fields_are_absent_not_null() {
    let (rt, _clock) = common::runtime().await;
    rt.register("payload_only", &[], |ctx, _, _| async move {
        ctx.ask(Ask::caller_payload(json!({"diff": "+1 -1"})).expiry_at("10m"))
            .await?;
        Ok(Value::Null)
    });
    let record = rt.run(Start::new("s", "payload_only")).await.unwrap();
    let text = serde_json::to_string(&rt.list("s").await.unwrap()).unwrap();
    assert!(!text.contains("null"), "{text}");
    assert_eq!(
        text,
        r#"[{"id":"i-1","status":"asking","to":"caller","asked_by":["payload_only"],"group_id":"g-1","payload":{"diff":"+1 -1"}}]"#
    );
    let record = serde_json::to_string(&record).unwrap();
    assert!(!record.contains("null"), "{record}");
}

/// Every park on a subject is one entry, and the owner sees the whole set, oldest first;
/// another subject's parks are not in it.
#[tokio::test]
async fn the_subject_sees_every_park_oldest_first() {
    let (rt, _clock) = common::runtime().await;
    for q in ["first?", "second?"] {
        rt.run(Start::new("s", "asker").kwargs(json!({"question": q})))
            .await
            .unwrap();
    }
    rt.run(Start::new("other", "asker")).await.unwrap();
    let entries = rt.list("s").await.unwrap();
    let questions: Vec<_> = entries
        .iter()
        .map(|e| e.question.clone().unwrap())
        .collect();
    assert_eq!(questions, ["first?", "second?"]);
    assert_eq!(rt.list("other").await.unwrap().len(), 1);
    assert!(rt.list("nobody").await.unwrap().is_empty());
}

/// A child run lives on its caller's subject, and `asked_by` runs from the asker up to
/// the top of its chain, asker first.
#[tokio::test]
async fn asked_by_is_the_chain_asker_first() {
    let (rt, _clock) = common::runtime().await;
    rt.register("planner", &[], |ctx, _, _| async move {
        let record = ctx.call("reviewer", json!({})).await?;
        Ok(serde_json::to_value(record)?)
    });
    rt.register("reviewer", &[], |ctx, _, _| async move {
        let record = ctx.call("asker", json!({})).await?;
        Ok(serde_json::to_value(record)?)
    });
    let top = rt.run(Start::new("s", "planner")).await.unwrap();
    assert_eq!(top.status, RunStatus::Succeeded);
    let entries = rt.list("s").await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(
        entries[0].asked_by.as_deref(),
        Some(
            &[
                "asker".to_owned(),
                "reviewer".to_owned(),
                "planner".to_owned()
            ][..]
        )
    );
    // The child's parked record reached its caller with the entry in `asks`.
    let child = &top.result.as_ref().unwrap()["result"];
    assert_eq!(child["status"], "parked");
    assert_eq!(child["asks"][0]["id"], json!(entries[0].id));
}

/// While a resumed activation runs its entry shows `running`; once it ends the entry is
/// gone.
#[tokio::test]
async fn a_resumed_ask_shows_running_until_its_activation_ends() {
    let (rt, _clock) = common::runtime().await;
    let gate = Arc::new(Notify::new());
    let g = Arc::clone(&gate);
    rt.register("slow", &[], move |ctx, _, _| {
        let g = Arc::clone(&g);
        async move {
            let answer = ctx.ask(Ask::caller("go?").expiry_at("10m")).await?;
            g.notified().await;
            Ok(answer)
        }
    });
    rt.run(Start::new("s", "slow")).await.unwrap();
    let id = rt.list("s").await.unwrap()[0].id.clone();
    let rt2 = rt.clone();
    let id2 = id.clone();
    let resumed = tokio::spawn(async move { rt2.resume("s", &id2, json!("yes")).await });
    // The spawned resume may reach the subject after the first list: poll until it has.
    let mut status = EntryStatus::Asking;
    for _ in 0..1000 {
        status = rt.list("s").await.unwrap()[0].status;
        if status == EntryStatus::Running {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(status, EntryStatus::Running);
    gate.notify_one();
    let outcome = resumed.await.unwrap().unwrap();
    let Resumed::Outcome(record) = outcome else {
        panic!("expected an outcome")
    };
    assert_eq!(record.result, Some(json!("yes")));
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// A resumed run with no receiver leaves a `finished` entry holding its result, or a
/// `failed` one when it raised; waiting outcomes carry only id and status.
#[tokio::test]
async fn waiting_outcomes_are_finished_or_failed() {
    let (rt, _clock) = common::runtime().await;
    rt.register("fails_after", &[], |ctx, _, _| async move {
        ctx.ask(Ask::caller("go?").expiry_at("10m")).await?;
        Err("boom".into())
    });
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.run(Start::new("s", "fails_after")).await.unwrap();
    let ids = common::ids(&rt.list("s").await.unwrap());
    for id in &ids {
        rt.resume_detached("s", id, json!("yes")).await.unwrap();
    }
    rt.settle().await;
    let text = serde_json::to_string(&rt.list("s").await.unwrap()).unwrap();
    assert_eq!(
        text,
        format!(
            r#"[{{"id":"{}","status":"finished"}},{{"id":"{}","status":"failed"}}]"#,
            ids[0], ids[1]
        )
    );
}
