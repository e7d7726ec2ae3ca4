//! [`McpOverHttp`]: the random workload's MCP rounds (`parkway sim --random --http`)
//! made over Streamable HTTP: the MCP face over the workload's runtime, served on a
//! loopback socket of this process, and every call a plain JSON-RPC `POST` of the
//! stateless wire of protocol 2026-07-28 (its headers and `_meta`, no `initialize`).
//!
//! The face is served again over each runtime the workload builds (after a crash, the
//! new one), with the same state key, so a round sealed before a restart is answered
//! after it, as a server keeping its key across restarts answers it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use parkway::Runtime;
use parkway::sim::{Answering, RoundAnswer, RoundTrip};
use serde_json::{Value, json};

/// The protocol revision spoken.
const VERSION: &str = "2026-07-28";

/// The face's state key, the same for every runtime of one workload.
const STATE_KEY: &[u8] = b"the random workload's state key, 32+ bytes";

/// The face served over the workload's current runtime, and a client of it.
#[derive(Debug, Default)]
pub struct McpOverHttp {
    client: reqwest::Client,
    /// The face's address, and the task serving it.
    served: Mutex<Option<(String, tokio::task::JoinHandle<()>)>>,
    /// The last JSON-RPC id sent.
    last_id: AtomicU64,
}

impl Drop for McpOverHttp {
    fn drop(&mut self) {
        if let Some((_, task)) = self.served.get_mut().ok().and_then(Option::take) {
            task.abort();
        }
    }
}

impl McpOverHttp {
    /// A client with no face served yet: the workload attaches it to its runtime.
    pub fn new() -> McpOverHttp {
        McpOverHttp::default()
    }

    /// The served face's slot. Nothing panics while holding it, so a poisoned lock
    /// holds a whole value.
    fn slot(&self) -> std::sync::MutexGuard<'_, Option<(String, tokio::task::JoinHandle<()>)>> {
        self.served
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn serve(&self, rt: &Runtime) -> Result<(), String> {
        let options = parkway_mcp::Options::new(STATE_KEY.to_vec());
        let router = parkway_mcp::router(rt.clone(), options).map_err(|e| e.to_string())?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot listen on loopback: {e}"))?;
        let address = listener.local_addr().map_err(|e| e.to_string())?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        if let Some((_, old)) = self.slot().replace((format!("http://{address}/mcp"), task)) {
            old.abort();
        }
        Ok(())
    }

    /// `tools/call` with `params` (its `_meta` added): the answer, read.
    async fn post(&self, mut params: Value) -> RoundAnswer {
        let Some(url) = self.slot().as_ref().map(|(url, _)| url.clone()) else {
            return RoundAnswer::Error("no face is served: the runtime did not start".into());
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientInfo": {"name": "parkway-sim", "version": env!("CARGO_PKG_VERSION")},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        });
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let id = self.last_id.fetch_add(1, Ordering::Relaxed) + 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let sent = self
            .client
            .post(url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", VERSION)
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", name)
            .body(body.to_string())
            .send()
            .await;
        let answer: Value = match sent {
            Ok(response) => match response.bytes().await {
                Ok(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(answer) => answer,
                    Err(e) => return RoundAnswer::Error(format!("an answer not JSON: {e}")),
                },
                Err(e) => return RoundAnswer::Error(format!("the answer was cut: {e}")),
            },
            Err(e) => return RoundAnswer::Error(format!("the call was not answered: {e}")),
        };
        read(&answer)
    }
}

/// A JSON-RPC answer to `tools/call`, read.
fn read(answer: &Value) -> RoundAnswer {
    if let Some(error) = answer.get("error") {
        return RoundAnswer::Error(error.to_string());
    }
    let Some(result) = answer.get("result") else {
        return RoundAnswer::Error(format!("neither a result nor an error: {answer}"));
    };
    if result.get("isError") == Some(&Value::Bool(true)) {
        let text = result
            .pointer("/content/0/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        return RoundAnswer::ToolError(text.to_owned());
    }
    match result.get("resultType").and_then(Value::as_str) {
        Some("input_required") => {
            let keys = result
                .get("inputRequests")
                .and_then(Value::as_object)
                .map(|r| r.keys().cloned().collect())
                .unwrap_or_default();
            match result.get("requestState").and_then(Value::as_str) {
                Some(state) => RoundAnswer::Round {
                    keys,
                    state: state.to_owned(),
                },
                None => RoundAnswer::Error(format!("a round without requestState: {result}")),
            }
        }
        None | Some("complete") => RoundAnswer::Result(
            result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null),
        ),
        Some(other) => RoundAnswer::Error(format!("a result of type {other}: {result}")),
    }
}

impl RoundTrip for McpOverHttp {
    fn attach<'a>(&'a self, rt: &'a Runtime) -> Pin<Box<dyn Future<Output = ()> + 'a>> {
        Box::pin(async move {
            if let Err(why) = self.serve(rt).await {
                // Every call then answers an error naming this, which the check reports.
                tracing_free_warn(&why);
                if let Some((_, old)) = self.slot().take() {
                    old.abort();
                }
            }
        })
    }

    fn call<'a>(&'a self, tool: &'a str, arguments: Value) -> Answering<'a> {
        Box::pin(self.post(json!({"name": tool, "arguments": arguments})))
    }

    fn retry<'a>(
        &'a self,
        tool: &'a str,
        arguments: Value,
        state: &'a str,
        responses: Value,
    ) -> Answering<'a> {
        Box::pin(self.post(json!({
            "name": tool,
            "arguments": arguments,
            "requestState": state,
            "inputResponses": responses,
        })))
    }
}

/// The face could not be served: said on stderr, as the command's other warnings are.
fn tracing_free_warn(why: &str) {
    eprintln!("parkway sim: the MCP face could not be served: {why}");
}
