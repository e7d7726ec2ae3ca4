//! Runs as MCP clients: a run calls a tool of another MCP server, and a question that
//! server asks is asked of the run's own caller (`docs/mcp.md`, "Runs as MCP clients").
//!
//! Each request to the server is a journaled step, so a replay (after a resume, or a
//! restart) reads the server's answers back rather than sending again; a request whose
//! answer was not yet durable when the process died is sent again (at least once across
//! a crash, exactly once otherwise). When the server answers `input_required`, each of
//! its input requests becomes a caller ask whose payload is `{"key": …, "mcp": <the
//! request>}`: the run parks, and the MCP face above sends that request, as it is, to
//! the client that called this run. The answers come back as the asks' answers, and the
//! next request carries them as `inputResponses` with the server's `requestState`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use indexmap::IndexMap;
use parkway::sim::{McpServer, RemoteTools};
use parkway::{Ask, Ctx, RunError};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    InputResponses, ProtocolVersion,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use tokio::sync::Mutex;

/// The most rounds one call takes before it fails: a server that keeps asking is not
/// answered forever.
pub const MAX_ROUNDS: usize = 10;

/// How long a relayed question waits for the caller's answer before it expires (and
/// tears the chain down, as a caller ask's expiry does). Default one hour.
pub const DEFAULT_ASK_EXPIRY: Duration = Duration::from_secs(3600);

/// How long one request to a server (its connection included) may take before the call
/// fails: a server that accepts and never answers does not hold a run for ever.
/// Default one minute.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The client this runtime is to other servers: it declares what it can relay upward.
#[derive(Clone)]
struct Relay;

impl ClientHandler for Relay {
    // Sampling and roots are deprecated (SEP-2577) and still in the 2026-07-28 protocol:
    // a question of either kind is relayed like any other.
    #[allow(deprecated)]
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder()
                .enable_elicitation()
                .enable_sampling()
                .enable_roots()
                .build(),
            Implementation::new("parkway", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// The MCP servers runs may call, by name, and a connection to each once used.
pub struct Remote {
    servers: IndexMap<String, McpServer>,
    ask_expiry: Duration,
    request_timeout: Duration,
    connections: Mutex<HashMap<String, Arc<RunningService<RoleClient, Relay>>>>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("servers", &self.servers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Remote {
    /// Runs may call the tools of `servers`.
    pub fn new(servers: IndexMap<String, McpServer>) -> Remote {
        Remote {
            servers,
            ask_expiry: DEFAULT_ASK_EXPIRY,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            connections: Mutex::default(),
        }
    }

    /// How long a relayed question waits for the caller.
    pub fn ask_expiry(mut self, expiry: Duration) -> Remote {
        self.ask_expiry = expiry;
        self
    }

    /// How long one request to a server may take, its connection included.
    pub fn request_timeout(mut self, timeout: Duration) -> Remote {
        self.request_timeout = timeout;
        self
    }

    /// Call `tool` of `server` with `arguments` for the run of `ctx`: the tool's
    /// structured result (or its text), or the run's error: a tool error fails the run,
    /// and a question the server asks parks it, asked of its own caller.
    pub async fn call(
        &self,
        ctx: &Ctx,
        server: &str,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, RunError> {
        if !self.servers.contains_key(server) {
            return Err(RunError::fail(format!(
                "mcp_call of {tool}: no MCP server is named {server:?}"
            )));
        }
        let Value::Object(arguments) = arguments else {
            return Err(RunError::fail(format!(
                "mcp_call of {tool} on {server}: the arguments must be an object"
            )));
        };
        let mut responses: Option<InputResponses> = None;
        let mut state: Option<String> = None;
        for round in 1..=MAX_ROUNDS {
            let mut params =
                CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments.clone());
            params.input_responses = responses.take();
            params.request_state = state.take();
            let name = format!("mcp {server} {tool} round {round}");
            let reply: Value = ctx.step(&name, || self.send(server, params)).await?;
            match reply.get("resultType").and_then(Value::as_str) {
                Some("input_required") => {
                    let requests = reply
                        .get("inputRequests")
                        .and_then(Value::as_object)
                        .cloned()
                        .unwrap_or_default();
                    if requests.is_empty() {
                        return Err(RunError::fail(format!(
                            "{tool} on {server} answered input_required with no input request"
                        )));
                    }
                    // Every question is asked before any answer is awaited: one group.
                    let mut asked = Vec::with_capacity(requests.len());
                    for (key, request) in requests {
                        let ask = Ask::caller(question(&request))
                            .payload(json!({"key": key, "mcp": request}))
                            .expiry_at(self.ask_expiry);
                        asked.push((key, ctx.ask(ask).await));
                    }
                    let mut answers = InputResponses::new();
                    for (key, answer) in asked {
                        answers.insert(key, answer?);
                    }
                    responses = Some(answers);
                    state = reply
                        .get("requestState")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                }
                _ => return result(server, tool, reply),
            }
        }
        Err(RunError::fail(format!(
            "{tool} on {server} asked more than {MAX_ROUNDS} rounds"
        )))
    }

    /// One request to `server`, its answer as JSON, within the request timeout; a
    /// failed or timed-out request drops the connection, so the next one connects again.
    async fn send(&self, server: &str, params: CallToolRequestParams) -> Result<Value, String> {
        let limit = self.request_timeout;
        let sent = tokio::time::timeout(limit, async {
            let peer = self.connection(server).await?;
            peer.call_tool_once(params)
                .await
                .map_err(|e| format!("the MCP server {server} could not be called: {e}"))
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "the MCP server {server} did not answer within {}",
                humantime::format_duration(limit)
            ))
        });
        let response = match sent {
            Ok(response) => response,
            Err(why) => {
                self.connections.lock().await.remove(server);
                return Err(why);
            }
        };
        match response {
            CallToolResponse::Complete(result) => serde_json::to_value(result),
            CallToolResponse::InputRequired(round) => serde_json::to_value(round),
            CallToolResponse::Task(task) => serde_json::to_value(task),
            _ => Ok(json!({"resultType": "unknown"})),
        }
        .map_err(|e| e.to_string())
    }

    /// The connection to `server`, made if there is none. The table is not locked
    /// while a connection is made, so a slow server holds up no call to another.
    async fn connection(
        &self,
        server: &str,
    ) -> Result<Arc<RunningService<RoleClient, Relay>>, String> {
        if let Some(peer) = self.connections.lock().await.get(server) {
            return Ok(Arc::clone(peer));
        }
        let spec = self
            .servers
            .get(server)
            .ok_or_else(|| format!("no MCP server is named {server:?}"))?;
        let mut config = StreamableHttpClientTransportConfig::with_uri(spec.url.clone());
        if let Some(token) = &spec.token {
            config = config.auth_header(token.clone());
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let peer = Relay
            .serve_with_lifecycle(transport, lifecycle)
            .await
            .map_err(|e| {
                format!(
                    "the MCP server {server} at {} could not be reached: {e}",
                    spec.url
                )
            })?;
        // Two calls may have connected at once: the first one kept is used by both.
        let mut connections = self.connections.lock().await;
        let kept = connections
            .entry(server.to_owned())
            .or_insert_with(|| Arc::new(peer));
        Ok(Arc::clone(kept))
    }
}

impl RemoteTools for Remote {
    fn call<'a>(
        &'a self,
        ctx: &'a Ctx,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Value, RunError>> + Send + 'a>> {
        Box::pin(Remote::call(self, ctx, server, tool, arguments))
    }
}

/// The question a relayed input request asks, in words, for the ask's `question`.
fn question(request: &Value) -> String {
    let params = request.get("params");
    match request.get("method").and_then(Value::as_str) {
        Some("elicitation/create") => params
            .and_then(|p| p.get("message"))
            .and_then(Value::as_str)
            .unwrap_or("a question")
            .to_owned(),
        Some("sampling/createMessage") => "a message from the calling model".to_owned(),
        Some("roots/list") => "the calling client's roots".to_owned(),
        _ => "an input request".to_owned(),
    }
}

/// The tool's answer as the run's result: its structured content, else its text; a
/// tool error fails the run with its text.
fn result(server: &str, tool: &str, reply: Value) -> Result<Value, RunError> {
    let text = reply
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default();
    if reply.get("isError").and_then(Value::as_bool) == Some(true) {
        return Err(RunError::fail(format!("{tool} on {server} failed: {text}")));
    }
    if reply.get("resultType").and_then(Value::as_str) == Some("task") {
        return Err(RunError::fail(format!(
            "{tool} on {server} answered with a task, which mcp_call does not follow"
        )));
    }
    Ok(match reply.get("structuredContent") {
        Some(value) => value.clone(),
        None => Value::String(text),
    })
}
