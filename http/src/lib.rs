//! The HTTP face of parkway: every door of the runtime over HTTP, streams that resume
//! from the durable event log, and bearer tokens with scopes.
//!
//! The inbox page is served at `/inbox`.
//!
//! [`router`] builds an axum [`Router`] over a [`Runtime`], for an embedder to serve
//! beside its own routes; [`serve`] serves it (the embedder's routes merged in, if any)
//! with timeouts for slow heads and idle connections and a cap on open ones, which
//! `axum::serve` does not have; `parkway serve` on the command line does the same. A
//! project that depends on `parkway` alone compiles none of this.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use parkway_http::{Options, Scope, Tokens, router, serve};
//! let runtime = parkway::Runtime::builder().build().await?;
//! let tokens = Tokens::none().with("a-long-admin-token-0001", &[Scope::Admin, Scope::Visit]);
//! let options = Options::default();
//! let app = router(runtime, tokens, options.clone());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! serve(listener, app, &options).await;
//! # Ok(()) }
//! ```
//!
//! Layout: `lib.rs` builds the router and checks tokens; `server.rs` is [`serve`], the
//! accept loop and its bounds; the rest is as `ARCHITECTURE.md` maps it.
//!
//! The surface, its status codes and its scopes are described in `docs/http.md`.

mod auth;
mod body;
mod doors;
mod error;
mod forward;
mod inbox;
mod metrics;
pub mod openapi;
mod ops;
mod page;
mod runs;
mod server;
mod streams;
mod subjects;
pub mod test_mode;
mod visits;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use parkway::Runtime;
use tower_http::timeout::TimeoutLayer;

pub use auth::{MIN_TOKEN_LEN, Scope, Tokens, TokensError};
pub use body::JsonBody;
pub use error::ApiError;
pub use server::serve;
pub use test_mode::{TestMode, test_router};

/// The server's bounds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The largest request body accepted (413 past it). Default 1 MiB.
    pub max_body_bytes: usize,
    /// How long a request may take, reading its body included (408 past it); a long
    /// poll and a stream are not bounded by it. Default 30 s.
    pub request_timeout: Duration,
    /// The longest `?wait=` a run record's long poll honours. Default 60 s.
    pub max_wait: Duration,
    /// How often a stream sends a keep-alive comment. Default 15 s.
    pub keep_alive: Duration,
    /// The most streams open at once (503 past it). Default 256: half the connections
    /// [`serve`] keeps open by default, so that streams never take them all.
    pub max_streams: usize,
    /// How long [`serve`] gives a client to send a request's line and headers whole:
    /// from the connection's start for its first request, from the first byte of each
    /// later one. Past it the connection is closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// How long [`serve`] keeps a connection open with no request in flight after a
    /// response, waiting for the next request's first byte. A connection with a request
    /// in flight (a long poll, a stream) is never idle. Default 60 s.
    pub idle_timeout: Duration,
    /// The most connections [`serve`] keeps open. At the cap, a new connection closes
    /// the one with no request in flight that has waited longest, or is closed at once
    /// when each has a request in flight; both are logged and counted in `/metrics`.
    /// Default 512, below the usual limit of 1024 open files.
    pub max_connections: usize,
    /// The longest request URI, path and query (414 past it). Default 8 KiB.
    pub max_uri_bytes: usize,
    /// The largest request line and headers together that [`serve`] reads (431 past
    /// it, and past 100 headers). Default 64 KiB; never less than 8 KiB.
    pub max_head_bytes: usize,
    /// Ends every open stream once begun: a stream never ends on its own, and a
    /// graceful shutdown waits for every response to end.
    pub shutdown: Shutdown,
    /// The connections' counters of [`serve`], for `/metrics`: clones share them.
    pub(crate) connections: Arc<server::Counters>,
}

/// The start of a server's graceful shutdown, for its streams: once [`Shutdown::begin`]
/// is called, every open stream ends (its client resumes elsewhere with
/// `Last-Event-ID`) and a stream opened after it ends at once. Clones share one state.
///
/// [`serve`] stops accepting once it begins, and returns when every connection is
/// closed.
///
/// ```no_run
/// # async fn run(
/// #     app: axum::Router,
/// #     options: parkway_http::Options,
/// #     stop_signal: impl std::future::Future<Output = ()> + Send + 'static,
/// # ) {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await.unwrap();
/// let shutdown = options.shutdown.clone();
/// tokio::spawn(async move {
///     stop_signal.await;
///     shutdown.begin();
/// });
/// parkway_http::serve(listener, app, &options).await;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Shutdown(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Shutdown {
    fn default() -> Shutdown {
        Shutdown(Arc::new(tokio::sync::watch::channel(false).0))
    }
}

impl Shutdown {
    /// End every open stream, and each one opened from now on.
    pub fn begin(&self) {
        self.0.send_replace(true);
    }

    /// Resolves once the shutdown has begun.
    pub(crate) fn begun(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut watch = self.0.subscribe();
        async move {
            if watch.wait_for(|begun| *begun).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_body_bytes: 1 << 20,
            request_timeout: Duration::from_secs(30),
            max_wait: Duration::from_secs(60),
            keep_alive: Duration::from_secs(15),
            max_streams: 256,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 512,
            max_uri_bytes: 8 << 10,
            max_head_bytes: 64 << 10,
            shutdown: Shutdown::default(),
            connections: Arc::default(),
        }
    }
}

/// What every handler shares.
#[derive(Debug)]
pub(crate) struct Face {
    pub(crate) runtime: Runtime,
    pub(crate) tokens: Tokens,
    pub(crate) options: Options,
    pub(crate) metrics: Arc<metrics::Metrics>,
    /// The client requests for another node's subjects are sent on with.
    pub(crate) forwarder: forward::Forwarder,
    /// The test mode's clock and notes, on a [`test_mode::test_router`] only.
    pub(crate) test: Option<test_mode::TestMode>,
}

/// The router of every door, under `/v1`, with `/healthz` and `/readyz` open to all.
pub fn router(runtime: Runtime, tokens: Tokens, options: Options) -> Router {
    build(runtime, tokens, options, None)
}

/// The router, with the test endpoints when `test` is given.
fn build(
    runtime: Runtime,
    tokens: Tokens,
    options: Options,
    test: Option<test_mode::TestMode>,
) -> Router {
    let with_test = test.is_some();
    let face = Arc::new(Face {
        runtime,
        tokens,
        options,
        metrics: Arc::default(),
        forwarder: forward::client(),
        test,
    });
    let guarded = |scope: Scope, routes: Router<Arc<Face>>| {
        routes.route_layer(middleware::from_fn_with_state(
            (Arc::clone(&face), scope),
            guard,
        ))
    };
    let admin = Router::new()
        .route("/v1/doors", get(doors::list))
        .route(
            "/v1/doors/{name}",
            get(doors::read).put(doors::save).delete(doors::delete),
        )
        .route("/v1/schedules/{name}/fire", post(doors::fire_schedule))
        .route("/v1/subjects/{subject}/cancel", post(subjects::cancel))
        .route("/v1/events", get(streams::events))
        .route("/metrics", get(metrics::metrics));
    let admin = match with_test {
        true => admin.merge(test_mode::routes()),
        false => admin,
    };
    let visit = Router::new()
        .route("/v1/routes/{door}/visit", post(visits::route))
        .route("/v1/hooks/{topic}", post(visits::hook))
        .route("/v1/targets/{target}/run", post(visits::run_tool))
        .route("/v1/targets/{target}/submit", post(visits::submit))
        .route("/v1/subjects/{subject}/parked", get(subjects::list))
        .route(
            "/v1/subjects/{subject}/parked/{id}/resume",
            post(subjects::resume),
        );
    // A long poll waits up to `max_wait`: it is bounded by that, not the timeout.
    let poll = Router::new().route("/v1/runs/{id}", get(runs::read)).route(
        "/v1/subjects/{subject}/parked/{id}/take",
        post(subjects::take),
    );
    let answer = Router::new()
        .route("/v1/interactions", get(inbox::list))
        .route("/v1/interactions/stream", get(inbox::stream))
        .route("/v1/interactions/{id}/answer", post(inbox::answer));
    let timeout = face.options.request_timeout;
    let max_body = face.options.max_body_bytes;
    let max_uri = face.options.max_uri_bytes;
    let timed = Router::new()
        .merge(guarded(Scope::Admin, admin))
        .merge(guarded(Scope::Visit, visit))
        .merge(guarded(Scope::Answer, answer))
        .route("/healthz", get(ops::healthz))
        .route("/inbox", get(page::inbox))
        .route("/openapi.json", get(ops::openapi))
        .route("/readyz", get(ops::readyz))
        // A stream's response is made at once; the timeout does not bound its body.
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            timeout,
        ));
    Router::new()
        .merge(timed)
        .merge(guarded(Scope::Visit, poll))
        .fallback(ops::not_found)
        .method_not_allowed_fallback(ops::method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&face),
            forward::forward,
        ))
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            uri_capped(max_uri, request, next)
        }))
        .with_state(face)
}

/// Refuse a request whose URI (path and query) is over `max` bytes: 414.
async fn uri_capped(max: usize, request: Request, next: Next) -> Response {
    let length = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if length > max {
        return ApiError::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the request's URI is {length} bytes long, over this server's {max}"),
        )
        .into_response();
    }
    next.run(request).await
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is matched
/// whatever its case (`bearer`, `BEARER`), as RFC 9110 says of every auth scheme.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

/// `routes` behind the server's bearer tokens: each request needs `scope` (401 without
/// a known token, 403 with one lacking it), as the doors of [`router`] do. For a face
/// an embedder or `parkway serve` mounts beside them, such as the MCP face.
pub fn guarded(routes: Router, tokens: Tokens, scope: Scope) -> Router {
    let tokens = Arc::new(tokens);
    routes.route_layer(middleware::from_fn(move |request: Request, next: Next| {
        let tokens = Arc::clone(&tokens);
        async move { check(&tokens, scope, request, next).await }
    }))
}

/// Let a request through only with a bearer token that carries `scope`: 401 without
/// a known token, 403 with one lacking the scope.
async fn guard(
    State((face, scope)): State<(Arc<Face>, Scope)>,
    request: Request,
    next: Next,
) -> Response {
    check(&face.tokens, scope, request, next).await
}

/// [`guard`]'s rule, for `tokens`. A request with no `Authorization` header has the
/// tokens' anonymous scopes (none unless granted).
async fn check(tokens: &Tokens, scope: Scope, request: Request, next: Next) -> Response {
    let header = request.headers().get(header::AUTHORIZATION);
    let scopes = match header {
        None => Some(tokens.anonymous_scopes()).filter(|s| !s.is_empty()),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(bearer)
            .and_then(|t| tokens.scopes(t.as_bytes())),
    };
    let Some(scopes) = scopes else {
        let message = match header {
            None => "a bearer token is needed (Authorization: Bearer <token>)",
            Some(_) => "the bearer token is not one this server accepts",
        };
        let mut response =
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    };
    if !scopes.contains(&scope) {
        let message = match header {
            None => format!("a request without a token lacks the {scope} scope"),
            Some(_) => format!("this token lacks the {scope} scope"),
        };
        return ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
            .with("scope", serde_json::json!(scope.name()))
            .into_response();
    }
    next.run(request).await
}
