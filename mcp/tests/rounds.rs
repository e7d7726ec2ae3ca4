//! The MCP face driven by rmcp's own client over Streamable HTTP on a real socket: a
//! tool that asks its caller twice, answered round by round, and every bad retry refused
//! with nothing changed.

use std::sync::{Arc, Mutex};

use parkway::{Ask, Ids, Runtime, ToolSpec};
use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ClientConfig,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, InputResponses,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ErrorData, RoleClient};
use serde_json::{Value, json};

/// A client that answers each elicitation with `answer(message)`.
#[derive(Clone)]
struct Answering {
    asked: Arc<Mutex<Vec<String>>>,
    answer: fn(&str) -> ElicitResult,
}

impl ClientHandler for Answering {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("rounds-test", "0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let message = match request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message,
            ElicitRequestParams::UrlElicitationParams { message, .. } => message,
            other => format!("{other:?}"),
        };
        self.asked.lock().unwrap().push(message.clone());
        Ok((self.answer)(&message))
    }
}

fn accept(content: Value) -> ElicitResult {
    ElicitResult::new(ElicitationAction::Accept).with_content(content)
}

fn answers(message: &str) -> ElicitResult {
    if message.starts_with("deploy") {
        accept(json!({"answer": true}))
    } else {
        accept(json!({"answer": "beta"}))
    }
}

async fn runtime() -> Runtime {
    Runtime::builder()
        .without_env()
        .ids(Ids::sequential())
        .register("deploy", &[], |ctx, kwargs, _| async move {
            let service = kwargs["service"].as_str().unwrap_or_default().to_owned();
            let go = ctx
                .ask(
                    Ask::caller(format!("deploy {service}?"))
                        .answer_format("confirm")
                        .expiry_at("10m"),
                )
                .await?;
            let channel = ctx
                .ask(
                    Ask::caller("which channel?")
                        .answer_format("select")
                        .payload(json!({"options": ["stable", "beta"]}))
                        .expiry_at("10m"),
                )
                .await?;
            Ok(json!({"service": service, "go": go, "channel": channel}))
        })
        .tool(
            "deploy",
            ToolSpec::new("deploy")
                .description("Deploy a service, asking its caller twice")
                .input_schema(json!({"type": "object", "required": ["service"],
                    "properties": {"service": {"type": "string", "minLength": 1}}})),
        )
        .build()
        .await
        .unwrap()
}

/// Serve `runtime`'s face on a fresh loopback port; its URL.
async fn serve(runtime: Runtime) -> String {
    let options = parkway_mcp::Options::new(vec![9; 32]);
    let app = parkway_mcp::router(runtime, options).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn client(
    url: &str,
    answer: fn(&str) -> ElicitResult,
) -> (
    RunningService<RoleClient, Answering>,
    Arc<Mutex<Vec<String>>>,
) {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let handler = Answering {
        asked: Arc::clone(&asked),
        answer,
    };
    let transport = StreamableHttpClientTransport::from_uri(url.to_owned());
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    (
        handler
            .serve_with_lifecycle(transport, modern)
            .await
            .unwrap(),
        asked,
    )
}

fn call(arguments: Value) -> CallToolRequestParams {
    CallToolRequestParams::new("deploy").with_arguments(arguments.as_object().unwrap().clone())
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content).unwrap().to_string()
}

#[tokio::test]
async fn a_tool_that_asks_twice_is_answered_in_two_rounds() {
    let url = serve(runtime().await).await;
    let (client, asked) = client(&url, answers).await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].name, "deploy");
    let result = client
        .call_tool(call(json!({"service": "api"})))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{}", text(&result));
    assert_eq!(
        result.structured_content,
        Some(json!({"service": "api", "go": true, "channel": "beta"}))
    );
    assert_eq!(
        *asked.lock().unwrap(),
        vec!["deploy api?", "which channel?"]
    );
}

/// The first round of a fresh call: its one ask's id and the state.
async fn first_round(client: &RunningService<RoleClient, Answering>) -> (String, String) {
    match client
        .call_tool_once(call(json!({"service": "api"})))
        .await
        .unwrap()
    {
        CallToolResponse::InputRequired(round) => {
            let requests = round.input_requests.unwrap();
            assert_eq!(requests.len(), 1);
            let id = requests.keys().next().unwrap().clone();
            (id, round.request_state.unwrap())
        }
        other => panic!("expected a round, got {other:?}"),
    }
}

fn retry(id: &str, state: &str, response: Value) -> CallToolRequestParams {
    let mut responses = InputResponses::new();
    responses.insert(id.to_owned(), response);
    let mut params = call(json!({"service": "api"})).with_input_responses(responses);
    params.request_state = Some(state.to_owned());
    params
}

#[tokio::test]
async fn a_wrong_answer_is_asked_again_naming_the_problem() {
    let url = serve(runtime().await).await;
    let (client, _) = client(&url, answers).await;
    let (id, state) = first_round(&client).await;
    let bad = json!({"action": "accept", "content": {"answer": "yes"}});
    let CallToolResponse::InputRequired(again) = client
        .call_tool_once(retry(&id, &state, bad))
        .await
        .unwrap()
    else {
        panic!("a wrong answer must ask again");
    };
    let request = serde_json::to_value(&again.input_requests.unwrap()[&id]).unwrap();
    let message = request["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("must be true or false, not a string"),
        "{message}"
    );
    // The same state still answers the ask: nothing was resolved.
    let good = json!({"action": "accept", "content": {"answer": true}});
    let CallToolResponse::InputRequired(next) = client
        .call_tool_once(retry(&id, &state, good.clone()))
        .await
        .unwrap()
    else {
        panic!("the second ask follows");
    };
    assert_ne!(next.input_requests.unwrap().keys().next().unwrap(), &id);
    // Replayed: the ask is resolved, so the retry is refused and changes nothing.
    let CallToolResponse::Complete(replayed) = client
        .call_tool_once(retry(&id, &state, good))
        .await
        .unwrap()
    else {
        panic!("a replay is a tool error");
    };
    assert_eq!(replayed.is_error, Some(true));
    assert!(
        text(&replayed).contains("no longer open"),
        "{}",
        text(&replayed)
    );
}

#[tokio::test]
async fn tampered_foreign_and_unknown_states_are_refused() {
    let url = serve(runtime().await).await;
    let (client, _) = client(&url, answers).await;
    let (id, state) = first_round(&client).await;
    let good = json!({"action": "accept", "content": {"answer": true}});
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() - 3;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for bad in [tampered.as_str(), "not-a-state", ""] {
        let error = client
            .call_tool_once(retry(&id, bad, good.clone()))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("requestState"), "{error}");
    }
    let error = client
        .call_tool_once(retry("i-999", &state, good.clone()))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("names no ask of this round"),
        "{error}"
    );
    // After all that, the ask is still open and answers as before.
    let CallToolResponse::InputRequired(_) = client
        .call_tool_once(retry(&id, &state, good))
        .await
        .unwrap()
    else {
        panic!("the ask was still open");
    };
}

#[tokio::test]
async fn a_decline_cancels_the_ask_and_the_run() {
    let url = serve(runtime().await).await;
    let (client, _) = client(&url, answers).await;
    let (id, state) = first_round(&client).await;
    let CallToolResponse::Complete(result) = client
        .call_tool_once(retry(&id, &state, json!({"action": "decline"})))
        .await
        .unwrap()
    else {
        panic!("a decline ends the call");
    };
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("decline"), "{}", text(&result));
    assert!(text(&result).contains("cancelled"), "{}", text(&result));
}

#[tokio::test]
async fn bad_calls_are_named() {
    let url = serve(runtime().await).await;
    let (client, _) = client(&url, answers).await;
    let error = client
        .call_tool_once(CallToolRequestParams::new("nope"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("unknown tool"), "{error}");
    let CallToolResponse::Complete(result) = client
        .call_tool_once(call(json!({"service": ""})))
        .await
        .unwrap()
    else {
        panic!("invalid arguments are a tool error");
    };
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("/service"), "{}", text(&result));
}

#[tokio::test]
async fn tools_are_listed_a_page_at_a_time() {
    let runtime = runtime().await;
    for i in 0..119 {
        runtime
            .add_tool(
                "deploy",
                ToolSpec::new(format!("t{i:03}")).description("one of many"),
            )
            .unwrap();
    }
    let url = serve(runtime).await;
    let (client, _) = client(&url, answers).await;
    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 50);
    assert!(first.next_cursor.is_some());
    let all = client.list_all_tools().await.unwrap();
    assert_eq!(all.len(), 120);
    let mut names: Vec<String> = all.iter().map(|t| t.name.to_string()).collect();
    names.dedup();
    assert_eq!(names.len(), 120, "no tool twice");
    let bad = rmcp::model::PaginatedRequestParams::default().with_cursor(Some("nope".into()));
    let error = client.list_tools(Some(bad)).await.unwrap_err();
    assert!(error.to_string().contains("cursor"), "{error}");
}

#[tokio::test]
async fn an_ask_resolved_elsewhere_or_expired_meanwhile_is_answered_as_such() {
    let clock = parkway::ManualClock::default();
    let runtime = Runtime::builder()
        .without_env()
        .ids(Ids::sequential())
        .clock(clock.clone())
        .register("once", &[], |ctx, _, _| async move {
            let go = ctx
                .ask(Ask::caller("go?").answer_format("confirm").expiry_at("10m"))
                .await?;
            Ok(json!({"go": go}))
        })
        .tool("once", ToolSpec::new("once").description("asks once"))
        .build()
        .await
        .unwrap();
    let url = serve(runtime.clone()).await;
    let (client, _) = client(&url, answers).await;
    let yes = json!({"action": "accept", "content": {"answer": true}});
    let retry = |id: &str, state: &str| {
        let mut responses = InputResponses::new();
        responses.insert(id.to_owned(), yes.clone());
        let mut params = CallToolRequestParams::new("once").with_input_responses(responses);
        params.request_state = Some(state.to_owned());
        params
    };

    // Resolved elsewhere: resumed through the runtime (as a door or a run would).
    let (subject, id, state) = once_round(&client).await;
    runtime.resume(&subject, &id, json!(false)).await.unwrap();
    let CallToolResponse::Complete(late) = client.call_tool_once(retry(&id, &state)).await.unwrap()
    else {
        panic!("a late answer is a tool error");
    };
    assert_eq!(late.is_error, Some(true));
    let said = text(&late);
    assert!(
        said.contains("no longer open") && said.contains("succeeded"),
        "{said}"
    );

    // Expired: the deadline passes before the answer; the chain was torn down.
    let (_, id, state) = once_round(&client).await;
    clock.advance(std::time::Duration::from_secs(11 * 60));
    runtime.settle().await;
    let CallToolResponse::Complete(expired) =
        client.call_tool_once(retry(&id, &state)).await.unwrap()
    else {
        panic!("an answer after the expiry is a tool error");
    };
    assert_eq!(expired.is_error, Some(true));
    let said = text(&expired);
    assert!(
        said.contains("no longer open") && said.contains("cancelled"),
        "{said}"
    );
}

/// A fresh call of `once`: its subject, its ask's key and the round's state.
async fn once_round(client: &RunningService<RoleClient, Answering>) -> (String, String, String) {
    match client
        .call_tool_once(CallToolRequestParams::new("once"))
        .await
        .unwrap()
    {
        CallToolResponse::InputRequired(round) => {
            let meta = round.meta.clone().unwrap();
            let subject = meta.0["io.parkway/subject"].as_str().unwrap().to_owned();
            let id = round.input_requests.unwrap().keys().next().unwrap().clone();
            (subject, id, round.request_state.unwrap())
        }
        other => panic!("expected a round, got {other:?}"),
    }
}

#[tokio::test]
async fn a_call_whose_run_waits_is_held_then_handed_back_to_call_again() {
    let clock = parkway::ManualClock::default();
    let runtime = Runtime::builder()
        .without_env()
        .ids(Ids::sequential())
        .clock(clock.clone())
        .register("slow", &[], |ctx, _, _| async move {
            ctx.wait(std::time::Duration::from_secs(3600)).await?;
            Ok(json!({"done": true}))
        })
        .tool("slow", ToolSpec::new("slow").description("waits an hour"))
        .build()
        .await
        .unwrap();
    let mut options = parkway_mcp::Options::new(vec![9; 32]);
    // The hold's bound, an upper bound on how long this test waits for each answer.
    options.max_hold = std::time::Duration::from_millis(200);
    let app = parkway_mcp::router(runtime.clone(), options).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (client, _) = client(&url, answers).await;

    let again = |state: String| {
        let mut params = CallToolRequestParams::new("slow");
        params.request_state = Some(state);
        params
    };
    let CallToolResponse::InputRequired(held) = client
        .call_tool_once(CallToolRequestParams::new("slow"))
        .await
        .unwrap()
    else {
        panic!("a run still waiting hands the call back");
    };
    assert!(held.input_requests.as_ref().is_none_or(|r| r.is_empty()));
    let state = held.request_state.unwrap();
    // Sent back while the run still waits: held again, handed back again.
    let CallToolResponse::InputRequired(held) = client.call_tool_once(again(state)).await.unwrap()
    else {
        panic!("still waiting");
    };
    let state = held.request_state.unwrap();
    // The wait ends; the next call back has the result.
    clock.advance(std::time::Duration::from_secs(3601));
    runtime.settle().await;
    let CallToolResponse::Complete(done) = client.call_tool_once(again(state)).await.unwrap()
    else {
        panic!("the run ended");
    };
    assert_eq!(done.structured_content, Some(json!({"done": true})));
}
