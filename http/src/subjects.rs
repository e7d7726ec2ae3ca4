//! A subject's parked set: list it, resume or take one entry, cancel entries. A second
//! resolution is a 409 saying how and when the first one was made.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use parkway::{Entry, Resumed, TakeError};
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
/// none); 200 with the run's next record, or the buffered count.
pub(crate) async fn resume(
    State(face): State<Arc<Face>>,
    Path((subject, id)): Path<(String, String)>,
    body: JsonBody,
) -> Result<Json<Resumed>, ApiError> {
    Ok(Json(face.runtime.resume(&subject, &id, body.0).await?))
}

/// `POST /v1/subjects/{subject}/parked/{id}/take`: take a waiting outcome; 200 with
/// `{"status": "finished", "result"}` or `{"status": "failed", "error"}`.
pub(crate) async fn take(
    State(face): State<Arc<Face>>,
    Path((subject, id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    match face.runtime.take(&subject, &id).await {
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
