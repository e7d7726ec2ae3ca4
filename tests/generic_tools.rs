//! "The generic tools": `list_parked`, `resume_parked` and `cancel_parked` act on the
//! calling run's subject exactly as a door contract does, with the same errors.

mod common;

use parkway::{Event, RunStatus, Start, generic_tool_descriptions};
use serde_json::{Value, json};

/// An agent calls a tool that asks its caller, sees the park through `list_parked`,
/// answers it with `resume_parked`, and gets the tool's result back.
#[tokio::test]
async fn an_agent_resolves_a_caller_ask_by_hand() {
    let (rt, _clock) = common::runtime().await;
    rt.register("agent", &[], |ctx, _, _| async move {
        let tool = ctx.call("asker", json!({"question": "deploy?"})).await?;
        assert_eq!(tool.status, RunStatus::Parked);
        let listed = ctx.call("list_parked", json!({})).await?;
        let entries = listed.result.unwrap_or_default();
        let id = entries[0]["id"].as_str().unwrap_or_default().to_owned();
        let resumed = ctx
            .call(
                "resume_parked",
                json!({"interaction_id": id, "payload": "go"}),
            )
            .await?;
        Ok(json!({"seen": entries, "resumed": resumed.result}))
    });
    let record = rt.run(Start::new("s", "agent")).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded, "{record:?}");
    let result = record.result.unwrap();
    assert_eq!(result["seen"][0]["question"], "deploy?");
    assert_eq!(result["seen"][0]["asked_by"], json!(["asker", "agent"]));
    assert_eq!(result["resumed"]["status"], "succeeded");
    assert_eq!(result["resumed"]["result"], json!({"answer": "go"}));
    // The agent, not the tool run, resolved it.
    let id = result["seen"][0]["id"].clone();
    assert_eq!(json!(record.resumed_interactions), json!([id]));
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// The same agent through the background submit door: the record read by id carries the
/// tool's result and what the agent resolved.
#[tokio::test]
async fn the_same_through_submit() {
    let (rt, _clock) = common::runtime().await;
    rt.register("agent", &[], |ctx, _, _| async move {
        let tool = ctx.call("asker", json!({})).await?;
        let id = tool.asks.unwrap_or_default()[0].id.clone();
        let resumed = ctx
            .call(
                "resume_parked",
                json!({"interaction_id": id, "payload": "go"}),
            )
            .await?;
        Ok(resumed.result.unwrap_or_default())
    });
    let run = rt.submit(Start::new("s", "agent")).await.unwrap();
    rt.settle().await;
    let record = rt.record(&run).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(record.result.unwrap()["result"], json!({"answer": "go"}));
    assert_eq!(record.resumed_interactions, ["i-1"]);
}

/// `resume_parked` without payload takes a waiting outcome; a failed one raises.
#[tokio::test]
async fn resume_parked_without_payload_takes() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.resume_detached("s", "i-1", json!("done")).await.unwrap();
    rt.settle().await;
    rt.register("taker", &[], |ctx, _, _| async move {
        let r = ctx
            .call("resume_parked", json!({"interaction_id": "i-1"}))
            .await?;
        Ok(serde_json::to_value(r)?)
    });
    let record = rt.run(Start::new("s", "taker")).await.unwrap();
    assert_eq!(record.result.unwrap()["result"], json!({"answer": "done"}));
}

/// `cancel_parked` from an agent tears down the tool's chain below the agent, which
/// survives.
#[tokio::test]
async fn cancel_parked_stops_below_the_caller() {
    let (rt, _clock) = common::runtime().await;
    let mut events = rt.events();
    rt.register("agent", &[], |ctx, _, _| async move {
        let tool = ctx.call("asker", json!({})).await?;
        let id = tool.asks.unwrap_or_default()[0].id.clone();
        let cancelled = ctx.call("cancel_parked", json!({"ids": [id]})).await?;
        Ok(json!({"cancel": cancelled.status, "tool": tool.run_id}))
    });
    let record = rt.run(Start::new("s", "agent")).await.unwrap();
    assert_eq!(record.status, RunStatus::Succeeded, "{record:?}");
    let result = record.result.unwrap();
    assert_eq!(result["cancel"], "succeeded");
    let cancelled: Vec<String> = common::drain(&mut events)
        .into_iter()
        .filter_map(|e| match e {
            Event::RunCancelled { run, .. } => Some(run),
            _ => None,
        })
        .collect();
    assert_eq!(cancelled, [result["tool"].as_str().unwrap().to_owned()]);
}

/// The tools refuse as a door does, naming what is wrong, and change nothing.
#[tokio::test]
async fn the_tools_refuse_like_a_door() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    let cases = [
        (
            "resume_parked",
            json!({"interaction_id": "i-9", "payload": 1}),
            "unknown interaction i-9 on subject s",
        ),
        (
            "resume_parked",
            json!({"interaction_id": "i-1"}),
            "interaction i-1 is not a waiting outcome (finished or failed) (status: asking)",
        ),
        (
            "resume_parked",
            json!({"payload": 1}),
            "resume_parked needs interaction_id",
        ),
        (
            "resume_parked",
            json!({"interaction_id": "i-1", "payload": {"interaction_expired": true}}),
            "carries the reserved key interaction_expired",
        ),
        (
            "cancel_parked",
            json!({"ids": ["i-1", "i-7"]}),
            "unknown interaction i-7 on subject s",
        ),
        (
            "cancel_parked",
            json!({"ids": []}),
            "cancel_parked needs ids",
        ),
        (
            "list_parked",
            json!({"x": 1}),
            "list_parked takes no parameter(s) x",
        ),
    ];
    for (tool, kwargs, message) in cases {
        let record = rt
            .run(Start::new("s", tool).kwargs(kwargs.clone()))
            .await
            .unwrap();
        assert_eq!(record.status, RunStatus::Failed, "{tool} {kwargs}");
        let error = record.error.unwrap();
        assert!(error.contains(message), "{tool} {kwargs}: {error}");
    }
    assert_eq!(rt.list("s").await.unwrap().len(), 1);
}

/// Each tool carries a JSON-schema description of its parameters.
#[test]
fn the_tools_describe_their_parameters() {
    let tools = generic_tool_descriptions();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["list_parked", "resume_parked", "cancel_parked"]);
    for t in &tools {
        assert!(t["description"].as_str().is_some_and(|d| d.len() > 20));
        assert_eq!(t["parameters"]["type"], "object");
        assert_eq!(t["parameters"]["additionalProperties"], Value::Bool(false));
    }
    assert_eq!(tools[2]["parameters"]["properties"]["ids"]["type"], "array");
}
