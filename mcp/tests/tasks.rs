//! The tasks extension driven by rmcp's client on a real socket, on the manual clock:
//! a call whose run waits becomes a task, its questions are answered with tasks/update
//! (one at a time), a parked task is cancelled, a task is found again by a runtime
//! rebuilt on the same data directory, and an id this server did not issue is unknown.

use std::time::Duration;

use parkway::{Builder, Event, Ids, ManualClock, Runtime, TaskSupport, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, GetTaskResult, Implementation, InputResponses, ProtocolVersion, TaskPayload,
    TaskStatus, UpdateTaskParams,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};

const KEY: [u8; 32] = [5; 32];

/// A client that declares elicitation and, when `tasks`, the tasks extension.
#[derive(Clone)]
struct Tasker {
    tasks: bool,
}

impl ClientHandler for Tasker {
    fn get_info(&self) -> ClientConfig {
        let capabilities = if self.tasks {
            ClientCapabilities::builder()
                .enable_elicitation()
                .enable_tasks()
                .build()
        } else {
            ClientCapabilities::builder().enable_elicitation().build()
        };
        ClientConfig::new(capabilities, Implementation::new("tasks-test", "0"))
    }
}

fn form(key: &str, property: &str, kind: &str) -> Value {
    json!({"key": key, "schema": {"type": "object", "required": [property],
        "properties": {property: {"type": kind}}}})
}

/// Tools: `compute` waits an hour and answers; `survey` waits a minute, then asks two
/// questions at once; `strict` is `compute` for task clients only.
async fn runtime(clock: &ManualClock, dir: Option<&std::path::Path>) -> Runtime {
    let mut builder = Builder::default()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential());
    if let Some(dir) = dir {
        builder = builder.data_dir(dir);
    }
    builder
        .register("compute", &[], |ctx, _, _| async move {
            ctx.wait(Duration::from_secs(3600)).await?;
            Ok(json!("computed"))
        })
        .register("survey", &[], |ctx, _, _| async move {
            ctx.wait(Duration::from_secs(60)).await?;
            let name = ctx.ask(
                parkway::Ask::caller("name?")
                    .answer_format("form")
                    .payload(form("name", "name", "string"))
                    .expiry_at("1d"),
            );
            let go = ctx.ask(
                parkway::Ask::caller("go?")
                    .answer_format("form")
                    .payload(form("go", "go", "boolean"))
                    .expiry_at("1d"),
            );
            let (name, go) = (name.await, go.await);
            Ok(json!({"name": name?["name"], "go": go?["go"]}))
        })
        .tool(
            "compute",
            ToolSpec::new("compute")
                .description("Waits an hour")
                .task_support(TaskSupport::Optional),
        )
        .tool(
            "survey",
            ToolSpec::new("survey")
                .description("Asks two questions")
                .task_support(TaskSupport::Optional),
        )
        .tool(
            "compute",
            ToolSpec::new("strict")
                .description("Waits an hour, as a task only")
                .task_support(TaskSupport::Required),
        )
        .build()
        .await
        .unwrap()
}

async fn serve(runtime: Runtime) -> String {
    let app = parkway_mcp::router(runtime, parkway_mcp::Options::new(KEY.to_vec())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn client(url: &str, tasks: bool) -> RunningService<RoleClient, Tasker> {
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Tasker { tasks }
        .serve_with_lifecycle(transport, modern)
        .await
        .unwrap()
}

/// Call `tool` and expect a task; its id.
async fn task_of(client: &RunningService<RoleClient, Tasker>, tool: &str) -> String {
    match client
        .call_tool_once(CallToolRequestParams::new(tool.to_owned()))
        .await
        .unwrap()
    {
        CallToolResponse::Task(task) => {
            assert_eq!(task.task.status, TaskStatus::Working);
            task.task.task_id
        }
        other => panic!("expected a task, got {other:?}"),
    }
}

async fn get(client: &RunningService<RoleClient, Tasker>, id: &str) -> GetTaskResult {
    client.get_task(GetTaskParams::new(id)).await.unwrap()
}

fn code(error: ServiceError) -> i32 {
    match error {
        ServiceError::McpError(e) => e.code.0,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

fn responses(pairs: &[(&str, Value)]) -> InputResponses {
    let mut out = InputResponses::new();
    for (key, content) in pairs {
        out.insert(
            (*key).to_owned(),
            json!({"action": "accept", "content": content}),
        );
    }
    out
}

fn completed_text(task: &GetTaskResult) -> String {
    match &task.task.payload {
        TaskPayload::Completed { result } => result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        other => panic!("expected completed, got {other:?}"),
    }
}

/// A call whose run waits answers with a task at once; the task works until the wait
/// ends, then holds the run's result.
#[tokio::test]
async fn a_waiting_call_becomes_a_task_that_completes() {
    let clock = ManualClock::default();
    let rt = runtime(&clock, None).await;
    let url = serve(rt.clone()).await;
    let client = client(&url, true).await;
    let id = task_of(&client, "compute").await;
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Working);
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    let done = get(&client, &id).await;
    assert_eq!(completed_text(&done), "computed");
    // Kept after it ended, and cancelling it changes nothing.
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(completed_text(&get(&client, &id).await), "computed");
}

/// Questions of a task show in tasks/get; tasks/update answers them one at a time (an
/// unknown key is acknowledged and ignored), and the last answer resumes the run.
#[tokio::test]
async fn tasks_update_answers_a_task_one_question_at_a_time() {
    let clock = ManualClock::default();
    let rt = runtime(&clock, None).await;
    let url = serve(rt.clone()).await;
    let client = client(&url, true).await;
    let id = task_of(&client, "survey").await;
    clock.advance(Duration::from_secs(60));
    rt.settle().await;
    let asking = get(&client, &id).await;
    let TaskPayload::InputRequired { input_requests } = &asking.task.payload else {
        panic!("expected input_required, got {asking:?}");
    };
    let mut keys: Vec<&String> = input_requests.keys().collect();
    keys.sort();
    assert_eq!(keys, ["go", "name"]);
    let update = |pairs: &[(&str, Value)]| UpdateTaskParams::new(id.clone(), responses(pairs));
    client
        .update_task(update(&[
            ("name", json!({"name": "Ada"})),
            ("nope", json!({})),
        ]))
        .await
        .unwrap();
    let TaskPayload::InputRequired { input_requests } = get(&client, &id).await.task.payload else {
        panic!("one question is still open");
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["go"]);
    // An answer that does not fit is refused, naming it, and changes nothing.
    let refused = client
        .update_task(update(&[("go", json!({"go": "yes"}))]))
        .await
        .unwrap_err();
    assert_eq!(code(refused), -32602);
    assert_eq!(
        get(&client, &id).await.task.status(),
        TaskStatus::InputRequired
    );
    client
        .update_task(update(&[("go", json!({"go": true}))]))
        .await
        .unwrap();
    let done = get(&client, &id).await;
    let TaskPayload::Completed { result } = &done.task.payload else {
        panic!("expected completed, got {done:?}");
    };
    assert_eq!(
        result["structuredContent"],
        json!({"name": "Ada", "go": true})
    );
}

/// Cancelling a task parked on its questions cancels its run; a second cancel is
/// acknowledged the same.
#[tokio::test]
async fn cancelling_a_parked_task_cancels_its_run() {
    let clock = ManualClock::default();
    let rt = runtime(&clock, None).await;
    let url = serve(rt.clone()).await;
    let client = client(&url, true).await;
    let id = task_of(&client, "survey").await;
    clock.advance(Duration::from_secs(60));
    rt.settle().await;
    assert_eq!(
        get(&client, &id).await.task.status(),
        TaskStatus::InputRequired
    );
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Cancelled);
    client
        .cancel_task(CancelTaskParams::new(id.clone()))
        .await
        .unwrap();
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Cancelled);
    assert_eq!(rt.stats().await.caller_open, 0);
}

/// A task id this server did not issue is unknown (-32602) to get, update and cancel:
/// made up, tampered with, or issued under another key.
#[tokio::test]
async fn a_task_id_this_server_did_not_issue_is_unknown() {
    let clock = ManualClock::default();
    let rt = runtime(&clock, None).await;
    let url = serve(rt.clone()).await;
    let client = client(&url, true).await;
    let id = task_of(&client, "compute").await;
    let mut tampered = id.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let other_key = {
        let app = parkway_mcp::router(rt.clone(), parkway_mcp::Options::new(vec![6; 32])).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let other = self::client(&url, true).await;
        task_of(&other, "compute").await
    };
    for bad in ["tasks-conformance-nonexistent-12345", &tampered, &other_key] {
        let e = client.get_task(GetTaskParams::new(bad)).await.unwrap_err();
        assert_eq!(code(e), -32602, "get {bad}");
        let e = client
            .update_task(UpdateTaskParams::new(bad, InputResponses::new()))
            .await
            .unwrap_err();
        assert_eq!(code(e), -32602, "update {bad}");
        let e = client
            .cancel_task(CancelTaskParams::new(bad))
            .await
            .unwrap_err();
        assert_eq!(code(e), -32602, "cancel {bad}");
    }
    // The real one still works, and was not touched.
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Working);
}

/// Without the extension: a tool that requires tasks is refused (-32021) and nothing
/// starts; one that allows them answers in the call, held while its run waits.
#[tokio::test]
async fn a_client_without_the_extension_gets_no_task() {
    let clock = ManualClock::default();
    let rt = runtime(&clock, None).await;
    let url = serve(rt.clone()).await;
    let client = client(&url, false).await;
    let refused = client
        .call_tool_once(CallToolRequestParams::new("strict"))
        .await
        .unwrap_err();
    assert_eq!(code(refused), -32021);
    assert_eq!(rt.stats().await.runs, 0);
    let mut events = rt.events();
    let call = tokio::spawn(async move {
        client
            .call_tool_once(CallToolRequestParams::new("compute"))
            .await
    });
    // The run parks on its wait; the call is held until the wait ends.
    while !matches!(events.recv().await, Ok(Event::AskParked { .. })) {}
    rt.settle().await;
    assert!(!call.is_finished());
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    let answered = tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the held call is answered once the wait ends")
        .unwrap()
        .unwrap();
    let CallToolResponse::Complete(result) = answered else {
        panic!("expected a result, got {answered:?}");
    };
    assert_eq!(
        serde_json::to_value(&result.content).unwrap()[0]["text"],
        "computed"
    );
}

/// A task is its run: a runtime rebuilt on the same data directory, behind a face with
/// the same key, finds it by its id, and it completes when its wait ends.
#[tokio::test]
async fn a_task_survives_a_restart_on_its_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::default();
    let rt = runtime(&clock, Some(dir.path())).await;
    let url = serve(rt.clone()).await;
    let id = task_of(&client(&url, true).await, "compute").await;
    rt.shutdown().await;
    drop(rt);

    let rt = runtime(&clock, Some(dir.path())).await;
    let url = serve(rt.clone()).await;
    let client = client(&url, true).await;
    assert_eq!(get(&client, &id).await.task.status(), TaskStatus::Working);
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    assert_eq!(completed_text(&get(&client, &id).await), "computed");
}
