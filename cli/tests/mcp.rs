//! The MCP face of the command line, driven by rmcp's client: `parkway serve`'s `/mcp`
//! behind its tokens, a round answered after the server was killed and started again on
//! its data directory, and `parkway mcp --stdio`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    InputResponses, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};

const TOKEN: &str = "mcp-test-token-0000001";
/// How long the server may take to say where it listens: an upper bound only.
const BOUND: Duration = Duration::from_secs(30);

const TARGETS: &str = r#"{"targets": {"deploy": {
  "steps": [
    {"ask": {"question": "deploy ${kwargs.service}?", "answer_format": "confirm", "expiry_at": "1h"}, "as": "go"},
    {"return": {"service": "$kwargs.service", "go": "$go"}}
  ],
  "tool": {"name": "deploy", "description": "Deploys after asking its caller",
           "inputSchema": {"type": "object", "required": ["service"], "properties": {"service": {"type": "string"}}}}
}}}"#;

/// A child process, killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `parkway serve` with `args` and the test's targets; the process and its address.
fn serve(dir: &std::path::Path, args: &[&str]) -> (Killed, String) {
    let targets = dir.join("targets.json");
    std::fs::write(&targets, TARGETS).unwrap();
    let mut process = Killed(
        Command::new(env!("CARGO_BIN_EXE_parkway"))
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--targets"])
            .arg(&targets)
            .args(args)
            .env("PARKWAY_TOKENS", format!("{TOKEN} visit"))
            .env_remove("PARKWAY_TOKENS_FILE")
            .env_remove("PARKWAY_DATA_DIR")
            .env_remove("PARKWAY_MCP_STATE_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("parkway serve starts"),
    );
    let stderr = process.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix("parkway serve: listening on http://") {
                let _ = tx.send(Ok(addr.to_owned()));
            }
            said.push(line);
        }
        let _ = tx.send(Err(said.join("\n")));
    });
    match rx.recv_timeout(BOUND) {
        Ok(Ok(address)) => (process, address),
        Ok(Err(said)) => panic!("parkway serve ended without listening:\n{said}"),
        Err(e) => panic!("parkway serve did not say where it listens: {e}"),
    }
}

/// A client that declares elicitation and answers nothing by itself.
#[derive(Clone)]
struct Client;

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_elicitation().build(),
            Implementation::new("cli-mcp-test", "0"),
        )
    }
}

fn modern() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

async fn over_http(
    address: &str,
    token: Option<&str>,
) -> Result<RunningService<RoleClient, Client>, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("http://{address}/mcp"));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    Client
        .serve_with_lifecycle(transport, modern())
        .await
        .map_err(|e| e.to_string())
}

fn call() -> CallToolRequestParams {
    CallToolRequestParams::new("deploy")
        .with_arguments(json!({"service": "api"}).as_object().unwrap().clone())
}

/// The first round's key and state.
async fn first_round(client: &RunningService<RoleClient, Client>) -> (String, String) {
    match client.call_tool_once(call()).await.unwrap() {
        CallToolResponse::InputRequired(round) => {
            let key = round.input_requests.unwrap().keys().next().unwrap().clone();
            (key, round.request_state.unwrap())
        }
        other => panic!("expected a round, got {other:?}"),
    }
}

/// The retry answering `key` with `true`; the structured result.
async fn answer(client: &RunningService<RoleClient, Client>, key: &str, state: &str) -> Value {
    let mut responses = InputResponses::new();
    responses.insert(
        key.to_owned(),
        json!({"action": "accept", "content": {"answer": true}}),
    );
    let mut params = call().with_input_responses(responses);
    params.request_state = Some(state.to_owned());
    match client.call_tool_once(params).await.unwrap() {
        CallToolResponse::Complete(result) => result.structured_content.unwrap(),
        other => panic!("expected the result, got {other:?}"),
    }
}

#[tokio::test]
async fn a_round_is_answered_after_the_server_was_killed_and_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let (server, address) = serve(dir.path(), &["--data", data]);
    let client = over_http(&address, Some(TOKEN)).await.unwrap();
    let (key, state) = first_round(&client).await;
    drop(client);
    // SIGKILL: the park was acknowledged, so it is on the disk; so is the state's key.
    drop(server);
    let (_server, address) = serve(dir.path(), &["--data", data]);
    let client = over_http(&address, Some(TOKEN)).await.unwrap();
    assert_eq!(
        answer(&client, &key, &state).await,
        json!({"service": "api", "go": true})
    );
}

#[tokio::test]
async fn the_face_is_behind_the_tokens_unless_anonymous_scopes_are_granted() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, address) = serve(dir.path(), &[]);
    for token in [None, Some("a-token-this-server-does-not-know")] {
        let refused = over_http(&address, token).await;
        assert!(refused.is_err(), "{token:?} must be refused");
    }
    let (_open, address) = serve(dir.path(), &["--anonymous-scopes", "visit"]);
    let client = over_http(&address, None).await.unwrap();
    let (key, state) = first_round(&client).await;
    assert_eq!(
        answer(&client, &key, &state).await,
        json!({"service": "api", "go": true})
    );
    assert!(
        over_http(&address, Some("a-token-this-server-does-not-know"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn parkway_mcp_serves_one_client_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.json");
    std::fs::write(&targets, TARGETS).unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_parkway"));
    command
        .args(["mcp", "--stdio", "--targets"])
        .arg(&targets)
        .env_remove("PARKWAY_DATA_DIR")
        .stderr(Stdio::null());
    let transport = TokioChildProcess::new(command).unwrap();
    let client = Client
        .serve_with_lifecycle(transport, modern())
        .await
        .unwrap();
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(
        tools.iter().map(|t| t.name.as_ref()).collect::<Vec<_>>(),
        ["deploy"]
    );
    let (key, state) = first_round(&client).await;
    assert_eq!(
        answer(&client, &key, &state).await,
        json!({"service": "api", "go": true})
    );
}

#[test]
fn a_damaged_state_key_is_refused_at_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (server, _) = serve(dir.path(), &["--data", data.to_str().unwrap()]);
    drop(server);
    let key = data.join("parkway.mcp-state-key");
    assert_eq!(
        std::fs::read(&key).unwrap().len(),
        32,
        "the first start keeps a key"
    );
    // A key cut short (a disk that filled, an edit gone wrong): never used as it is.
    std::fs::write(&key, b"short").unwrap();
    let targets = dir.path().join("targets.json");
    let ran = Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["serve", "--listen", "127.0.0.1:0", "--targets"])
        .arg(&targets)
        .arg("--data")
        .arg(&data)
        .env("PARKWAY_TOKENS", format!("{TOKEN} visit"))
        .env_remove("PARKWAY_TOKENS_FILE")
        .env_remove("PARKWAY_MCP_STATE_KEY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!ran.status.success());
    let said = String::from_utf8_lossy(&ran.stderr);
    assert!(
        said.contains("parkway.mcp-state-key holds 5 bytes"),
        "{said}"
    );
}
