//! Asks that travel through MCP: a question raised two MCP hops down reaches the first
//! client, and its answer travels back down, with the top server's runtime stopped and
//! built again on its data directory between the rounds.

use std::sync::Arc;

use parkway::sim::Scripts;
use parkway::{Ask, Runtime, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    InputResponses, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;

const KEY: [u8; 32] = [5; 32];

/// Serve `runtime`'s face on a fresh loopback port until `stop` is cancelled; its URL.
async fn serve(runtime: Runtime) -> (String, tokio::task::JoinHandle<()>) {
    let app = parkway_mcp::router(runtime, parkway_mcp::Options::new(KEY.to_vec())).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

/// The bottom server: `inner` asks its caller which region, and returns it.
async fn bottom() -> String {
    let runtime = Runtime::builder()
        .without_env()
        .register("inner", &[], |ctx, _, _| async move {
            let region = ctx
                .ask(
                    Ask::caller("which region?")
                        .answer_format("select")
                        .payload(json!({"options": ["eu", "us"]}))
                        .expiry_at("10m"),
                )
                .await?;
            Ok(json!({"region": region}))
        })
        .tool(
            "inner",
            ToolSpec::new("inner").description("asks which region"),
        )
        .build()
        .await
        .unwrap();
    serve(runtime).await.0
}

/// A scripted server whose tool `name` calls `tool` on the server at `url` and wraps
/// its result.
fn hop(name: &str, url: &str, tool: &str) -> Scripts {
    Scripts::from_json(
        &json!({
            "mcp_servers": {"down": {"url": url}},
            "targets": {name: {
                "steps": [
                    {"mcp_call": {"server": "down", "tool": tool, "arguments": {}}, "as": "below"},
                    {"return": {"via": name, "below": "$below"}}
                ],
                "tool": {"name": name, "description": "calls the server below"}
            }}
        })
        .to_string(),
    )
    .unwrap()
}

async fn hop_runtime(scripts: &Scripts, dir: Option<&std::path::Path>) -> Runtime {
    let remote = parkway_mcp::Remote::new(scripts.mcp_servers.clone());
    hop_runtime_with(scripts, dir, remote).await
}

async fn hop_runtime_with(
    scripts: &Scripts,
    dir: Option<&std::path::Path>,
    remote: parkway_mcp::Remote,
) -> Runtime {
    let remote = Arc::new(remote);
    let mut builder = scripts.register_with(Runtime::builder().without_env(), Some(remote));
    if let Some(dir) = dir {
        builder = builder.data_dir(dir);
    }
    builder.build().await.unwrap()
}

#[derive(Clone)]
struct Client;

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("hops-test", "0"),
        )
    }
}

async fn client(url: &str) -> RunningService<RoleClient, Client> {
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    Client
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_owned()),
            modern,
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_question_two_hops_down_is_answered_from_the_top_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let inner = bottom().await;
    let middle = hop_runtime(&hop("middle", &inner, "inner"), None).await;
    let (middle, _) = serve(middle).await;
    let top_scripts = hop("outer", &middle, "middle");
    let top = hop_runtime(&top_scripts, Some(dir.path())).await;
    let (url, server) = serve(top.clone()).await;

    let first = client(&url).await;
    let CallToolResponse::InputRequired(round) = first
        .call_tool_once(CallToolRequestParams::new("outer"))
        .await
        .unwrap()
    else {
        panic!("the question below must reach the top");
    };
    let requests = round.input_requests.unwrap();
    assert_eq!(requests.len(), 1);
    let (key, request) = requests.into_iter().next().unwrap();
    let request = serde_json::to_value(request).unwrap();
    // The same question, as the bottom server asked it: its message and its schema.
    assert_eq!(request["params"]["message"], "which region?");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["answer"]["enum"],
        json!(["eu", "us"])
    );
    let state = round.request_state.unwrap();
    drop(first);

    // The top server stops, and its runtime is built again on its data directory.
    server.abort();
    top.shutdown().await;
    drop(top);
    let top = hop_runtime(&top_scripts, Some(dir.path())).await;
    let (url, _) = serve(top).await;

    let again = client(&url).await;
    let mut responses = InputResponses::new();
    responses.insert(
        key,
        json!({"action": "accept", "content": {"answer": "eu"}}),
    );
    let mut retry = CallToolRequestParams::new("outer").with_input_responses(responses);
    retry.request_state = Some(state);
    let CallToolResponse::Complete(result) = again.call_tool_once(retry).await.unwrap() else {
        panic!("the answer must travel down and the result up");
    };
    assert_ne!(result.is_error, Some(true), "{:?}", result.content);
    assert_eq!(
        result.structured_content,
        Some(json!({"via": "outer", "below": {"via": "middle", "below": {"region": "eu"}}}))
    );
}

#[tokio::test]
async fn a_call_to_a_server_that_is_not_there_fails_the_run_naming_it() {
    let scripts = hop("outer", "http://127.0.0.1:9/mcp", "inner");
    let top = hop_runtime(&scripts, None).await;
    let (url, _) = serve(top).await;
    let c = client(&url).await;
    let CallToolResponse::Complete(result) = c
        .call_tool_once(CallToolRequestParams::new("outer"))
        .await
        .unwrap()
    else {
        panic!("a failed run is a tool error");
    };
    assert_eq!(result.is_error, Some(true));
    let text = serde_json::to_value(&result.content).unwrap().to_string();
    assert!(text.contains("could not be reached"), "{text}");
}

#[tokio::test]
async fn a_server_that_accepts_and_never_answers_fails_the_run_at_the_timeout() {
    // Accepts connections and reads nothing, answers nothing.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            open.push(socket);
        }
    });
    let scripts = hop("outer", &url, "inner");
    let remote = parkway_mcp::Remote::new(scripts.mcp_servers.clone())
        .request_timeout(std::time::Duration::from_millis(300));
    let top = hop_runtime_with(&scripts, None, remote).await;
    let (url, _) = serve(top).await;
    let c = client(&url).await;
    let CallToolResponse::Complete(result) = c
        .call_tool_once(CallToolRequestParams::new("outer"))
        .await
        .unwrap()
    else {
        panic!("a failed run is a tool error");
    };
    assert_eq!(result.is_error, Some(true));
    let text = serde_json::to_value(&result.content).unwrap().to_string();
    assert!(text.contains("did not answer within 300ms"), "{text}");
    held.abort();
}
