//! A subject's parked set: list it, resume or take one entry, cancel entries. A second
//! resolution is a 409 saying how and when the first one was made.

use std::sync::Arc;

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parkway::{AwaitError, Entry, TakeError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ApiError, Face, JsonBody};

/// `GET /v1/subjects/{subject}/parked`: the parked set, oldest first.
pub(crate) async fn list(
    State(face): State<Arc<Face>>,
    Path(subject): Path<String>,
) -> Result<Json<Vec<Entry>>, ApiError> {
    Ok(Json(face.runtime.list(&subject).await?))
}

/// `POST /v1/subjects/{subject}/parked/{id}/resume`: the body is the payload (empty for
/// none); 200 with the run's next record, or the buffered count. With
/// `?detached=true` nobody receives the run's outcome: 202 at once, and the outcome
/// waits on the subject to be taken.
pub(crate) async fn resume(
    State(face): State<Arc<Face>>,
    Path((subject, id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let detached = match query.get("detached").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::field(
                "detached",
                format!("detached is true or false, not {other:?}"),
            ));
        }
    };
    if detached {
        face.runtime.resume_detached(&subject, &id, body.0).await?;
        return Ok((
            StatusCode::ACCEPTED,
            Json(json!({"status": "resumed", "receiver": "none"})),
        )
            .into_response());
    }
    Ok(Json(face.runtime.resume(&subject, &id, body.0).await?).into_response())
}

/// `POST /v1/subjects/{subject}/parked/{id}/take?wait=30s`: take a waiting outcome; 200
/// with `{"status": "finished", "result"}` or `{"status": "failed", "error"}`. With
/// `wait`, an interaction still `asking` or `running` is waited for (at most the
/// server's `max_wait`), then answered as a take answers it then.
pub(crate) async fn take(
    State(face): State<Arc<Face>>,
    Path((subject, id)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let wait = crate::runs::wait_of(&query, face.options.max_wait)?;
    let taken = match face.runtime.await_outcome(&subject, &id, wait).await {
        Ok(result) => Ok(result),
        Err(AwaitError::Take(e)) => Err(e),
        // Still asking or running when the wait ended: refused as a take refuses it now.
        Err(_) => face.runtime.take(&subject, &id).await,
    };
    match taken {
        Ok(result) => Ok(Json(json!({"status": "finished", "result": result}))),
        Err(TakeError::Failed { error, .. }) => {
            Ok(Json(json!({"status": "failed", "error": error})))
        }
        Err(other) => Err(other.into()),
    }
}

/// A cancel's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    ids: Vec<String>,
}

/// `POST /v1/subjects/{subject}/cancel` with `{"ids": [...]}`: cancel every one or none;
/// 400, 404 or 409 lists every problem.
pub(crate) async fn cancel(
    State(face): State<Arc<Face>>,
    Path(subject): Path<String>,
    body: JsonBody,
) -> Result<Json<Value>, ApiError> {
    let body: CancelBody = body.into()?;
    if body.ids.is_empty() {
        return Err(ApiError::field("ids", "name at least one interaction"));
    }
    let ids: Vec<&str> = body.ids.iter().map(String::as_str).collect();
    face.runtime.cancel(&subject, &ids).await?;
    Ok(Json(json!({ "cancelled": body.ids })))
}
