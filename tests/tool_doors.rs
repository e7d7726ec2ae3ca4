//! Tool doors and run records: `run_tool` returns the record, `submit` returns the run id
//! at once and the record is read later; `parked` with `asks`, `suspended` with the
//! sentinel, and `resumed_interactions`.

mod common;

use parkway::{Ask, RunStatus, Start};
use serde_json::json;

/// A submitted tool that asks its caller ends `parked` with the `asks` entries, exactly as
/// the synchronous door's record does.
#[tokio::test]
async fn submit_and_run_tool_agree_on_a_parked_tool() {
    let (rt, _clock) = common::runtime().await;
    let sync = rt.run_tool(Start::new("a", "asker")).await.unwrap();
    let id = rt.submit(Start::new("b", "asker")).await.unwrap();
    rt.settle().await;
    let submitted = rt.record(&id).await.unwrap();
    assert_eq!(submitted.status, RunStatus::Parked);
    assert_eq!(sync.status, RunStatus::Parked);
    let shape = |r: &parkway::RunRecord| {
        let mut v = serde_json::to_value(r).unwrap();
        for key in ["run_id", "started_at"] {
            v.as_object_mut().unwrap().remove(key);
        }
        v["asks"][0].as_object_mut().unwrap().remove("id");
        v["asks"][0].as_object_mut().unwrap().remove("group_id");
        v
    };
    assert_eq!(shape(&sync), shape(&submitted));
    assert_eq!(
        serde_json::to_value(&submitted).unwrap()["asks"][0]["to"],
        "caller"
    );
}

/// A tool with only user asks open is `suspended`, carrying the sentinel with their ids
/// and no `asks`.
#[tokio::test]
async fn only_user_asks_open_is_suspended() {
    let (rt, _clock) = common::runtime().await;
    rt.register("form", &[], |ctx, _, _| async move {
        Ok(ctx.ask(Ask::user("your name?").expiry_at("1h")).await?)
    });
    let id = rt.submit(Start::new("s", "form")).await.unwrap();
    rt.settle().await;
    let record = serde_json::to_value(rt.record(&id).await.unwrap()).unwrap();
    assert_eq!(record["status"], "suspended");
    assert_eq!(record["suspension"], json!({"interactions": ["i-1"]}));
    assert!(record.get("asks").is_none());
}

/// `submit` returns at once with a `running` record when the tool has not finished.
#[tokio::test]
async fn submit_returns_before_the_tool_ends() {
    let (rt, _clock) = common::runtime().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let g = gate.clone();
    rt.register("slow", &[], move |_, _, _| {
        let g = g.clone();
        async move {
            g.notified().await;
            Ok(json!("done"))
        }
    });
    let id = rt.submit(Start::new("s", "slow")).await.unwrap();
    assert_eq!(rt.record(&id).await.unwrap().status, RunStatus::Running);
    gate.notify_one();
    rt.settle().await;
    let record = rt.record(&id).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(record.result, Some(json!("done")));
}

/// `resumed_interactions` lists what the tool resolved on its way.
#[tokio::test]
async fn the_record_lists_what_the_run_resolved() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.register("resolver", &[], |ctx, _, _| async move {
        ctx.resume_parked("i-1", json!("ok")).await?;
        Ok(json!("resolved"))
    });
    let id = rt.submit(Start::new("s", "resolver")).await.unwrap();
    rt.settle().await;
    let record = rt.record(&id).await.unwrap();
    assert_eq!(record.resumed_interactions, ["i-1"]);
}
