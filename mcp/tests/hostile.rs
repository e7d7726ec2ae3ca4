//! Hostile JSON-RPC at the MCP face: each refused with a clear error, nothing changed,
//! the server alive; and clients that cannot take a round.

use parkway::{Ask, Ids, Runtime, ToolSpec};
use rmcp::ClientHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};

async fn runtime() -> Runtime {
    Runtime::builder()
        .without_env()
        .ids(Ids::sequential())
        .register("asker", &[], |ctx, _, _| async move {
            let go = ctx
                .ask(Ask::caller("go?").answer_format("confirm").expiry_at("10m"))
                .await?;
            Ok(json!({"go": go}))
        })
        .tool(
            "asker",
            ToolSpec::new("asker")
                .subject_expr("\"s\"")
                .description("asks once"),
        )
        .build()
        .await
        .unwrap()
}

async fn serve(runtime: Runtime) -> String {
    let mut options = parkway_mcp::Options::new(vec![3; 32]);
    options.max_body_bytes = 64 << 10;
    let app = parkway_mcp::router(runtime, options).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    })
}

/// POST `body` with the 2026-07-28 headers for `method`; the status and the body.
async fn post(url: &str, method: &str, name: Option<&str>, body: String) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let response = request.body(body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

fn call(arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
           "params": {"name": "asker", "arguments": arguments, "_meta": meta()}})
    .to_string()
}

#[tokio::test]
async fn hostile_messages_are_refused_and_change_nothing() {
    let runtime = runtime().await;
    let url = serve(runtime.clone()).await;
    // Malformed JSON.
    let (status, body) = post(
        &url,
        "tools/call",
        Some("asker"),
        "{\"jsonrpc\": \"2.0\", \"id\": 1, ".into(),
    )
    .await;
    assert!(status >= 400, "{status} {body}");
    // Oversized: past the body cap.
    let big = call(json!({"pad": "x".repeat(100 << 10)}));
    let (status, body) = post(&url, "tools/call", Some("asker"), big).await;
    assert!(status >= 400, "{status} {body}");
    // Nested far past any limit (the parser's is the runtime's, 128 levels): refused
    // by the parser, not a stack overflow.
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let (status, body) = post(&url, "tools/call", Some("asker"), call_raw(&deep)).await;
    assert!(status >= 400 || body.contains("error"), "{status} {body}");
    // Unknown method, and a tool name over any bound.
    let (status, body) = post(
        &url,
        "no/such",
        None,
        json!({"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {"_meta": meta()}})
            .to_string(),
    )
    .await;
    assert!(status >= 400 && body.contains("-32601"), "{status} {body}");
    let long = "t".repeat(10_000);
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                      "params": {"name": long, "arguments": {}, "_meta": meta()}});
    let (_, body) = post(&url, "tools/call", Some(&long), body.to_string()).await;
    assert!(
        body.contains("unknown tool") && body.len() < 2_000,
        "{}",
        &body[..body.len().min(300)]
    );
    // Nothing was started on the tool's subject by any of it; a good call still works.
    assert!(runtime.list("s").await.unwrap().is_empty());
    let (status, body) = post(&url, "tools/call", Some("asker"), call(json!({}))).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("input_required"), "{body}");
}

fn call_raw(arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"asker","arguments":{{"a":{arguments}}},"_meta":{}}}}}"#,
        meta()
    )
}

#[derive(Clone)]
struct Bare(ProtocolVersion);

impl ClientHandler for Bare {
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("bare", "0"),
        );
        config.protocol_version = self.0.clone();
        config
    }
}

#[tokio::test]
async fn a_client_that_cannot_take_a_round_gets_a_clear_answer_and_no_ask_is_left() {
    let runtime = runtime().await;
    let url = serve(runtime.clone()).await;
    // A 2026-07-28 client that declared no elicitation: -32021, the ask cancelled.
    let modern = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = Bare(ProtocolVersion::V_2026_07_28)
        .serve_with_lifecycle(StreamableHttpClientTransport::from_uri(url.clone()), modern)
        .await
        .unwrap();
    let error = client
        .call_tool_once(CallToolRequestParams::new("asker"))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("-32021") || text.contains("elicitation"),
        "{text}"
    );
    assert!(
        runtime.list("s").await.unwrap().is_empty(),
        "the ask was cancelled"
    );
    // A client on a revision without rounds: a tool error naming it, the ask cancelled.
    let old = ClientLifecycleMode::Initialize;
    let client = Bare(ProtocolVersion::V_2025_11_25)
        .serve_with_lifecycle(StreamableHttpClientTransport::from_uri(url), old)
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = client
        .call_tool_once(CallToolRequestParams::new("asker"))
        .await
        .unwrap()
    else {
        panic!("an old client gets a result");
    };
    assert_eq!(result.is_error, Some(true));
    let text = serde_json::to_value(&result.content).unwrap().to_string();
    assert!(
        text.contains("2025-11-25") && text.contains("cancelled"),
        "{text}"
    );
    assert!(
        runtime.list("s").await.unwrap().is_empty(),
        "the ask was cancelled"
    );
}
