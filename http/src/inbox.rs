//! The interactions inbox: its pages, its stream of `add` / `answered` / `removed`
//! frames, and the human answer door. Caller asks appear in none of them: the answer
//! door answers 404 for one, exactly as for an unknown id.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, Sse};
use futures::Stream;
use parkway::{Event, Frame, Page, Resolution, Runtime, To};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::streams::{self, last_event_id};
use crate::{ApiError, Face, JsonBody};

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
/// 1, `page_size` default 50 and capped at 200.
pub(crate) async fn list(
    State(face): State<Arc<Face>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Page>, ApiError> {
    let page = number(&query, "page")?.unwrap_or(1);
    let page_size = number(&query, "page_size")?;
    if page_size == Some(0) {
        return Err(ApiError::field("page_size", "page_size must be at least 1"));
    }
    Ok(Json(face.runtime.inbox(page, page_size)?))
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
