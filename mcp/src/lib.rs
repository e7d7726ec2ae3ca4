//! The MCP face of parkway: every target offered as a tool ([`parkway::ToolSpec`]) is
//! listed by `tools/list` and called by `tools/call`, and every caller ask of the run is
//! an `input_required` round (MCP 2026-07-28, multi round-trip requests): the call
//! answers with one input request per open ask and a sealed `requestState`; the retry
//! with `inputResponses` resumes the asks and answers with the run's next record.
//!
//! The protocol itself (versions, JSON-RPC, Streamable HTTP with its Host and Origin
//! checks, stdio) is the official SDK's, `rmcp`. [`router`] mounts the face on an axum
//! router (`parkway serve` mounts it at `/mcp`, behind its bearer tokens); [`serve_stdio`]
//! serves one local client over standard input and output. A project that depends on
//! `parkway` alone compiles none of this.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use parkway::{Ask, Runtime, ToolSpec};
//! use serde_json::json;
//! let runtime = Runtime::builder()
//!     .register("deploy", &[], |ctx, kwargs, _| async move {
//!         let go = ctx.ask(Ask::caller("deploy?").answer_format("confirm").expiry_at("10m")).await?;
//!         Ok(json!({"service": kwargs["service"], "deployed": go}))
//!     })
//!     .tool("deploy", ToolSpec::new("deploy").description("Deploy a service"))
//!     .build()
//!     .await?;
//! let options = parkway_mcp::Options::new(b"a state key of at least 32 bytes!".to_vec());
//! let app = axum::Router::new().merge(parkway_mcp::router(runtime, options)?);
//! # let _ = app;
//! # Ok(()) }
//! ```
//!
//! What each ask becomes, what an answer must be, and what `decline`, `cancel`, a missing
//! capability and an old client do: `docs/mcp.md`.
//!
//! A call whose run waits becomes a task of the tasks extension when its tool allows it
//! and its client declares the extension (`tasks`); a run's progress goes to the caller
//! as `notifications/progress`: `docs/mcp.md`, "Tasks" and "Progress".

mod face;
mod handler;
mod remote;
mod round;
mod state;
mod tasks;

use std::sync::Arc;

use parkway::Runtime;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use face::{Face, META_RUN, META_SUBJECT};
pub use remote::{DEFAULT_ASK_EXPIRY, DEFAULT_REQUEST_TIMEOUT, MAX_ROUNDS, Remote};

/// The face's settings.
#[derive(Clone)]
#[non_exhaustive]
pub struct Options {
    /// The key `requestState` is sealed with (HMAC-SHA256; at least 32 bytes). A retry
    /// is honoured by any server with the same key: keep it across restarts for rounds
    /// to survive them.
    pub state_key: Vec<u8>,
    /// Tools per `tools/list` page. Default 50.
    pub page_size: usize,
    /// The `Host` values accepted (DNS-rebinding protection); empty accepts any.
    /// Default: loopback names only.
    pub allowed_hosts: Vec<String>,
    /// The `Origin` values accepted, with scheme (`https://app.example.com:443`); a
    /// request without `Origin` passes. Default: the loopback names on any port, as
    /// for `allowed_hosts`; an empty list refuses every request with an `Origin`.
    pub allowed_origins: Vec<String>,
    /// The largest request body, in bytes. Default 1 MiB.
    pub max_body_bytes: usize,
    /// How long a call that cannot become a task is held while its run is at work with
    /// nothing to ask (a wait); past it the call answers a round with no question,
    /// which the client sends back to be held again. Default 60 s.
    pub max_hold: std::time::Duration,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("page_size", &self.page_size)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_hold", &self.max_hold)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// The defaults, with `state_key`.
    pub fn new(state_key: Vec<u8>) -> Options {
        Options {
            state_key,
            page_size: 50,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"]
                .map(str::to_owned)
                .to_vec(),
            max_body_bytes: 1 << 20,
            max_hold: std::time::Duration::from_secs(60),
        }
    }
}

/// Why the face could not be built.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the MCP face cannot start: {0}")]
pub struct FaceError(String);

/// The face as a tower service speaking Streamable HTTP, stateless (no sessions, as
/// 2026-07-28 has none), to mount at a path of the embedder's choosing.
pub fn service(
    runtime: Runtime,
    options: Options,
) -> Result<StreamableHttpService<Face, NeverSessionManager>, FaceError> {
    let face = Face::new(runtime, options.clone()).map_err(FaceError)?;
    let mut config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_max_request_body_bytes(options.max_body_bytes);
    config = if options.allowed_hosts.is_empty() {
        config.disable_allowed_hosts()
    } else {
        config.with_allowed_hosts(options.allowed_hosts.clone())
    };
    config = if options.allowed_origins.is_empty() {
        config.enforce_origin_validation()
    } else {
        config.with_allowed_origins(options.allowed_origins.clone())
    };
    Ok(StreamableHttpService::new(
        move || Ok(face.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    ))
}

/// An axum router serving the face at `/mcp`.
pub fn router(runtime: Runtime, options: Options) -> Result<axum::Router, FaceError> {
    Ok(axum::Router::new().nest_service("/mcp", service(runtime, options)?))
}

/// Serve one client over standard input and output until it closes them.
pub async fn serve_stdio(runtime: Runtime, options: Options) -> Result<(), FaceError> {
    use rmcp::ServiceExt;
    let face = Face::new(runtime, options).map_err(FaceError)?;
    let running = face
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(|e| FaceError(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| FaceError(e.to_string()))?;
    Ok(())
}
