//! Any node answers: a request refused because another node sharing the database owns
//! the subject's slot (`not_owner`) is sent on to that node, once, and its answer given
//! back as it comes (`docs/postgres.md`, "Several nodes").
//!
//! The refusal changed nothing, so sending the request on is safe. The request goes on
//! with its method, path, query, headers (the bearer token among them: nodes share
//! their tokens) and body, marked [`FORWARDED`]; a node never sends a marked request on
//! again, so a slot changing hands costs the client a `503` with `Retry-After`, never a
//! loop. Where no node's lease on the slot holds, or the owner gave no address, the
//! refusal is the answer.
//!
//! A hook fire visits subjects of any slot, so it is not sent on whole: each of its
//! visits refused `not_owner` is sent on alone, as a visit of the hook by name
//! ([`hook_visit`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use crate::Face;
use crate::error::{ApiError, NotOwner};

/// The header that marks a request another node sent on.
pub(crate) const FORWARDED: HeaderName = HeaderName::from_static("x-parkway-forwarded");

/// The client requests are sent on with: HTTP/1.1, connections kept for reuse.
pub(crate) type Forwarder = Client<HttpConnector, Body>;

/// A client for sending requests on.
pub(crate) fn client() -> Forwarder {
    let mut connector = HttpConnector::new();
    connector.set_connect_timeout(Some(Duration::from_secs(5)));
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(connector)
}

/// Runs the request here; if it is refused as `not_owner` and another node serves the
/// slot, sends it there instead. Where the runtime shares no database, the request is
/// only run.
pub(crate) async fn forward(
    State(face): State<Arc<Face>>,
    request: Request,
    next: Next,
) -> Response {
    if !face.runtime.shares_store() || request.headers().contains_key(&FORWARDED) {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // Kept to send on: the body is read whole here, as the handlers read it, within the
    // body limit and the request's time (a client that trickles its body is cut off as
    // the router's timeout cuts off a handler).
    let read = axum::body::to_bytes(body, face.options.max_body_bytes);
    let body = match tokio::time::timeout(face.options.request_timeout, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                "the request body is larger than this server accepts",
            )
            .into_response();
        }
        Err(_) => return StatusCode::REQUEST_TIMEOUT.into_response(),
    };
    let (method, uri, headers) = (
        parts.method.clone(),
        parts.uri.clone(),
        parts.headers.clone(),
    );
    let response = next
        .run(Request::from_parts(parts, Body::from(body.clone())))
        .await;
    let Some(NotOwner(slot)) = response.extensions().get::<NotOwner>().copied() else {
        return response;
    };
    let Some(address) = face.runtime.served_at(slot) else {
        return response;
    };
    let Some(target) = target(&address, &uri) else {
        tracing::warn!(
            slot,
            address,
            "the owner's address is not one a request can be sent to"
        );
        return response;
    };
    let mut on = Request::builder().method(method).uri(target);
    for (name, value) in &headers {
        if !hop_by_hop(name) {
            on = on.header(name, value);
        }
    }
    let Ok(on) = on
        .header(FORWARDED, HeaderValue::from_static("1"))
        .body(Body::from(body))
    else {
        return response;
    };
    let limit = answer_limit(&face);
    match tokio::time::timeout(limit, face.forwarder.request(on)).await {
        Ok(Ok(answer)) => {
            face.metrics.forwarded();
            let (mut parts, body) = answer.into_parts();
            let headers = std::mem::take(&mut parts.headers);
            let mut name = None;
            for (next, value) in headers {
                // A name comes with the first of its values only.
                name = next.or(name);
                if let Some(name) = name.as_ref().filter(|name| !hop_by_hop(name)) {
                    parts.headers.append(name.clone(), value);
                }
            }
            Response::from_parts(parts, Body::new(body))
        }
        // Not connected: nothing was sent, so nothing changed.
        Ok(Err(error)) if error.is_connect() => {
            unreachable_owner(slot, &address, &error.to_string())
        }
        Ok(Err(error)) => owner_failed(StatusCode::BAD_GATEWAY, slot, &address, &error.to_string()),
        Err(_) => owner_failed(
            StatusCode::GATEWAY_TIMEOUT,
            slot,
            &address,
            "it did not answer in time",
        ),
    }
}

/// How long a request sent on may take to be answered: as long as the longest the owner
/// may take (a long poll waits up to `max_wait`), and a little more.
fn answer_limit(face: &Face) -> Duration {
    face.options.request_timeout.max(face.options.max_wait) + Duration::from_secs(5)
}

/// A request of this node's own to another node, on behalf of the request whose
/// `headers` are given: marked [`FORWARDED`], with that request's credentials.
fn marked(method: Method, uri: Uri, headers: &HeaderMap) -> axum::http::request::Builder {
    let on = Request::builder()
        .method(method)
        .uri(uri)
        .header(FORWARDED, HeaderValue::from_static("1"));
    match headers.get(header::AUTHORIZATION) {
        Some(credentials) => on.header(header::AUTHORIZATION, credentials),
        None => on,
    }
}

/// What a path segment or a query value keeps as it is: the unreserved characters.
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// A hook's visit of `subject`, of `slot`, refused here as `not_owner`, sent on to the
/// node that serves the slot as a visit of the hook `door` by name (`POST
/// /v1/routes/{door}/visit`, which evaluates what a fire's visit does), with the fire's
/// `input` and the request's credentials, marked [`FORWARDED`]: the visit the owner
/// answered with, or the error object (its refusal, or why no answer came, as
/// [`forward`] names it). `None` where no node's lease on the slot holds: the refusal
/// stands.
pub(crate) async fn hook_visit(
    face: &Face,
    headers: &HeaderMap,
    slot: u16,
    door: &str,
    subject: &str,
    input: &Value,
) -> Option<Result<Value, Value>> {
    let address = face.runtime.served_at(slot)?;
    let uri = format!(
        "{}/v1/routes/{}/visit?subject={}",
        address.trim_end_matches('/'),
        utf8_percent_encode(door, UNRESERVED),
        utf8_percent_encode(subject, UNRESERVED),
    );
    let Ok(uri) = uri.parse::<Uri>() else {
        tracing::warn!(
            slot,
            address,
            "the owner's address is not one a request can be sent to"
        );
        return None;
    };
    let on = marked(Method::POST, uri, headers)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(input.to_string()))
        .ok()?;
    let limit = answer_limit(face);
    let error = |response: Response| async move {
        let body = axum::body::to_bytes(response.into_body(), 64 << 10).await;
        body.ok()
            .and_then(|body| serde_json::from_slice::<Value>(&body).ok())
            .map(|mut body| body["error"].take())
            .unwrap_or_else(|| json!({"kind": "owner_failed", "message": "no answer"}))
    };
    let answer = match tokio::time::timeout(limit, face.forwarder.request(on)).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(failure)) if failure.is_connect() => {
            return Some(Err(error(unreachable_owner(
                slot,
                &address,
                &failure.to_string(),
            ))
            .await));
        }
        Ok(Err(failure)) => {
            let why = failure.to_string();
            return Some(Err(error(owner_failed(
                StatusCode::BAD_GATEWAY,
                slot,
                &address,
                &why,
            ))
            .await));
        }
        Err(_) => {
            let failed = owner_failed(
                StatusCode::GATEWAY_TIMEOUT,
                slot,
                &address,
                "it did not answer in time",
            );
            return Some(Err(error(failed).await));
        }
    };
    face.metrics.forwarded();
    let ok = answer.status() == StatusCode::OK;
    let (parts, body) = answer.into_parts();
    let response = Response::from_parts(parts, Body::new(body));
    if !ok {
        return Some(Err(error(response).await));
    }
    let body = axum::body::to_bytes(response.into_body(), face.options.max_body_bytes).await;
    Some(
        body.ok()
            .and_then(|body| serde_json::from_slice(&body).ok())
            .ok_or_else(|| {
                json!({"kind": "owner_failed", "message": format!(
                "the visit was sent on to the node that serves slot {slot}, whose answer \
                 could not be read: it may have been applied there"
            ), "slot": slot})
            }),
    )
}

/// The addresses of the other nodes that serve slots now, as this node last read the
/// slots' owners: each once, in order.
pub(crate) fn peers(face: &Face) -> Vec<String> {
    let mut peers: Vec<String> = (0..1024u16)
        .filter_map(|slot| face.runtime.served_at(slot))
        .collect();
    peers.sort_unstable();
    peers.dedup();
    peers
}

/// `GET` of `path` (with its query) at the node `address`, marked [`FORWARDED`] and with
/// the request's credentials: the JSON it answered with `200`, else why not, in words.
pub(crate) async fn get_json(
    face: &Face,
    headers: &HeaderMap,
    address: &str,
    path: &str,
) -> Result<Value, String> {
    let uri = format!("{}{path}", address.trim_end_matches('/'))
        .parse::<Uri>()
        .map_err(|_| "its address is not one a request can be sent to".to_owned())?;
    let on = marked(Method::GET, uri, headers)
        .body(Body::empty())
        .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(face.options.request_timeout, face.forwarder.request(on))
        .await
        .map_err(|_| "it did not answer in time".to_owned())?
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let body = axum::body::to_bytes(Body::new(answer.into_body()), 16 << 20)
        .await
        .map_err(|e| format!("its answer could not be read: {e}"))?;
    if status != StatusCode::OK {
        return Err(format!(
            "it answered {status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(512)])
        ));
    }
    serde_json::from_slice(&body).map_err(|e| format!("its answer is not JSON: {e}"))
}

/// The refusal when the node that owns `slot` could not be connected to: 503, try
/// again; nothing was sent.
fn unreachable_owner(slot: u16, address: &str, why: &str) -> Response {
    tracing::warn!(
        slot,
        address,
        why,
        "a request could not be sent on to the node that owns its subject's slot"
    );
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "not_owner",
        format!("slot {slot} is served by another node, which could not be reached: {why}"),
    )
    .with("slot", slot.into())
    .into_response()
}

/// The answer when the request was sent on and no answer came back (the owner failed or
/// the connection broke: 502; it took too long: 504), kind `owner_failed`: the request
/// may have been applied there, as when a server fails before it answers.
fn owner_failed(status: StatusCode, slot: u16, address: &str, why: &str) -> Response {
    tracing::warn!(
        slot,
        address,
        why,
        "a request sent on to the node that owns its subject's slot got no answer"
    );
    ApiError::new(
        status,
        "owner_failed",
        format!(
            "the request was sent on to the node that serves slot {slot}, which gave no \
             answer ({why}): it may have been applied there"
        ),
    )
    .with("slot", slot.into())
    .into_response()
}

/// The URI of `uri`'s path and query at the node `address` (`http://host:port`).
fn target(address: &str, uri: &Uri) -> Option<Uri> {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    format!("{}{path}", address.trim_end_matches('/'))
        .parse()
        .ok()
}

/// Whether `name` is a header of one connection (RFC 9110, 7.6.1), not sent on.
fn hop_by_hop(name: &HeaderName) -> bool {
    name == header::CONNECTION
        || name == header::HOST
        || name == header::TRANSFER_ENCODING
        || name == header::TE
        || name == header::TRAILER
        || name == header::UPGRADE
        || name == header::PROXY_AUTHORIZATION
        || name == header::PROXY_AUTHENTICATE
        || name.as_str() == "keep-alive"
        || name == header::CONTENT_LENGTH
}
