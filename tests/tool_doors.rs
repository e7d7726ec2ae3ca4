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

/// Under an idempotency key the same request starts one run, within the retention
/// horizon only: past it the key is forgotten and the request starts a new run. A
/// delivery id is likewise seen once within the horizon.
#[tokio::test]
async fn an_idempotency_key_and_a_delivery_id_last_the_retention_horizon() {
    let (rt, clock) =
        common::runtime_with(|b| b.waiting_retention(std::time::Duration::from_secs(60))).await;
    let start = || Start::new("s", "asker").idempotency_key("k");
    let first = rt.run_tool(start()).await.unwrap();
    assert_eq!(rt.run_tool(start()).await.unwrap().run_id, first.run_id);
    assert_eq!(rt.submit(start()).await.unwrap(), first.run_id);
    assert_eq!(
        rt.run_tool(start().kwargs(json!({"question": "other?"})))
            .await,
        Err(parkway::StartError::IdempotencyKeyReused { key: "k".into() })
    );
    assert!(matches!(
        rt.run_tool(Start::new("s", "asker").idempotency_key("x".repeat(256)))
            .await,
        Err(parkway::StartError::InvalidIdempotencyKey { .. })
    ));
    assert!(rt.fire_delivery("t", "d-1", json!({})).await.is_ok());
    assert!(matches!(
        rt.fire_delivery("t", "d-1", json!({})).await,
        Err(parkway::DeliveryError::AlreadySeen { .. })
    ));
    assert_eq!(
        rt.fire_delivery("t", "d-1", json!({"other": 1})).await,
        Err(parkway::DeliveryError::Reused)
    );

    clock.advance(std::time::Duration::from_secs(59));
    rt.settle().await;
    assert_eq!(rt.run_tool(start()).await.unwrap().run_id, first.run_id);
    clock.advance(std::time::Duration::from_secs(1));
    rt.settle().await;
    let second = rt.run_tool(start()).await.unwrap();
    assert_ne!(
        second.run_id, first.run_id,
        "the key was forgotten at its horizon"
    );
    assert!(
        rt.fire_delivery("t", "d-1", json!({"other": 1}))
            .await
            .is_ok()
    );
}
