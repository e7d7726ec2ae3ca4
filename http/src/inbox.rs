//! The interactions inbox: its pages, its stream of `add` / `answered` / `removed`
//! frames, and the human answer door. Caller asks appear in none of them: the answer
//! door answers 404 for one, exactly as for an unknown id.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, Sse};
use futures::Stream;
use parkway::{Event, Frame, Page, Resolution, Runtime, To};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::streams::{self, last_event_id};
use crate::{ApiError, Face, JsonBody, forward};

/// A whole number in the query (one too large for this machine reads as the largest),
/// or a 400 naming it.
fn number(query: &HashMap<String, String>, name: &str) -> Result<Option<usize>, ApiError> {
    query
        .get(name)
        .map(|text| {
            let digits = text.strip_prefix('+').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ApiError::field(
                    name,
                    format!("{name} {text:?} is not a whole number"),
                ));
            }
            Ok(digits.parse::<usize>().unwrap_or(usize::MAX))
        })
        .transpose()
}

/// `GET /v1/interactions?page=&page_size=`: pending user asks, oldest first; pages from
/// 1, `page_size` default 50 and capped at 200. On a database nodes share, every node's
/// asks ([`across_nodes`]).
pub(crate) async fn list(
    State(face): State<Arc<Face>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Page>, ApiError> {
    let page = number(&query, "page")?.unwrap_or(1);
    let page_size = number(&query, "page_size")?;
    if page_size == Some(0) {
        return Err(ApiError::field("page_size", "page_size must be at least 1"));
    }
    let here = face.runtime.inbox(page, page_size)?;
    if !face.runtime.shares_store() || headers.contains_key(&forward::FORWARDED) {
        return Ok(Json(here));
    }
    Ok(Json(
        across_nodes(&face, &headers, page, here.page_size).await?,
    ))
}

/// The most asks a list across nodes reads of each node: pages deeper than this many
/// asks are refused there (a client reads such a backlog node by node).
const ACROSS_NODES_MAX: usize = 10_000;

/// Page `page` of `page_size` of every node's pending user asks, in the order they were
/// asked (then by id): this node's own and those of each node that serves slots now,
/// read from it (`GET /v1/interactions`, marked forwarded), each as far as the page
/// reaches. A node that does not answer fails the list (`503 node_unreachable`, try
/// again) rather than leave its asks out; asks of a slot changing hands are listed by
/// no node until it is served again.
async fn across_nodes(
    face: &Face,
    headers: &HeaderMap,
    page: usize,
    page_size: usize,
) -> Result<Page, ApiError> {
    let reach = page.saturating_mul(page_size);
    if reach > ACROSS_NODES_MAX {
        return Err(ApiError::field(
            "page",
            format!(
                "page {page} of {page_size} reaches past the first {ACROSS_NODES_MAX} asks, \
                 the deepest a list across nodes reads"
            ),
        ));
    }
    let mut items = Vec::new();
    let mut total = 0;
    // This node's, read as far as the page reaches.
    for number in 1.. {
        let read = face.runtime.inbox(number, Some(MAX_PAGE))?;
        items.extend(read.items);
        total = read.total;
        if items.len() >= reach || read.next_page.is_none() {
            break;
        }
    }
    let peers = forward::peers(face);
    let reads = peers
        .iter()
        .map(|peer| read_node(face, headers, peer, reach));
    for (peer, read) in peers.iter().zip(futures::future::join_all(reads).await) {
        let (theirs, their_total) = read.map_err(|why| {
            tracing::warn!(node = %peer, %why, "a node's inbox could not be read for a list across nodes");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "node_unreachable",
                format!("the inbox of the node at {peer} could not be read: {why}"),
            )
        })?;
        items.extend(theirs);
        total += their_total;
    }
    items.sort_by(|a, b| (a.asked_at, &a.id).cmp(&(b.asked_at, &b.id)));
    // An ask whose slot moved between two reads is listed once.
    items.dedup_by(|a, b| a.id == b.id);
    let start = (page - 1).saturating_mul(page_size);
    let items: Vec<_> = items.into_iter().skip(start).take(page_size).collect();
    Ok(Page {
        items,
        page,
        page_size,
        total,
        next_page: (reach < total).then_some(page + 1),
    })
}

/// The largest page a node answers.
const MAX_PAGE: usize = 200;

/// The pending user asks of the node at `address`, as far as `reach` of them, and how
/// many it holds.
async fn read_node(
    face: &Face,
    headers: &HeaderMap,
    address: &str,
    reach: usize,
) -> Result<(Vec<parkway::InboxItem>, usize), String> {
    let (mut items, mut total) = (Vec::new(), 0);
    for number in 1.. {
        let path = format!("/v1/interactions?page={number}&page_size={MAX_PAGE}");
        let read: Page =
            serde_json::from_value(forward::get_json(face, headers, address, &path).await?)
                .map_err(|e| format!("its page is not an inbox page: {e}"))?;
        items.extend(read.items);
        total = read.total;
        if items.len() >= reach || read.next_page.is_none() {
            break;
        }
    }
    Ok((items, total))
}

/// The answer door's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerBody {
    answer: Value,
}

/// `POST /v1/interactions/{id}/answer` with `{"answer": …}`: 200 once the answer is
/// taken; 404 unknown (or a caller ask), 400 naming the field, 409 already answered.
pub(crate) async fn answer(
    State(face): State<Arc<Face>>,
    Path(id): Path<String>,
    body: JsonBody,
) -> Result<Json<Value>, ApiError> {
    let Value::Object(fields) = &body.0 else {
        return Err(ApiError::field(
            "answer",
            "the body must be {\"answer\": …}",
        ));
    };
    if !fields.contains_key("answer") {
        return Err(ApiError::field("answer", "the body has no answer"));
    }
    let AnswerBody { answer } = body.into()?;
    face.runtime.answer(&id, answer).await?;
    Ok(Json(json!({"id": id, "status": "answered"})))
}

/// `GET /v1/interactions/stream`: the inbox's frames, resumable like every stream.
pub(crate) async fn stream(
    State(face): State<Arc<Face>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let after = last_event_id(&headers, &query)?;
    streams::stream(&face, after, frame)
}

/// A logged event as an inbox frame: a user ask parked is `add` (while it is still
/// pending: once it is not, its `answered` or `removed` frame follows in the log; one
/// another node serves, as its event carries it, `Runtime::added_item`), a
/// user ask resolved is `answered` or `removed`; nothing about a caller ask.
pub(crate) fn frame(runtime: &Runtime, event: &Event) -> Option<(&'static str, Value)> {
    let frame = match event {
        Event::AskParked { to: To::User, .. } => Frame::Add {
            item: Box::new(runtime.added_item(event)?),
        },
        Event::AskResolved {
            interaction,
            how,
            to: To::User,
            ..
        } => match how {
            Resolution::Resumed => Frame::Answered {
                id: interaction.clone(),
            },
            Resolution::Expired => Frame::Removed {
                id: interaction.clone(),
                reason: "expired".to_owned(),
            },
            _ => Frame::Removed {
                id: interaction.clone(),
                reason: "cancelled".to_owned(),
            },
        },
        _ => return None,
    };
    let name = match &frame {
        Frame::Add { .. } => "add",
        Frame::Answered { .. } => "answered",
        _ => "removed",
    };
    Some((name, serde_json::to_value(&frame).ok()?))
}
