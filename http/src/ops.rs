//! Operations: health, readiness, and the answers to paths and methods that do not exist.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::{ApiError, Face};

/// `GET /healthz`: the process answers.
pub(crate) async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// `GET /readyz`: 200 while the runtime takes work; 503 once it is shut down, or once it
/// has met damage in its data directory (`kind: corrupt`, naming the first damage met),
/// so that a balancer sends its traffic elsewhere.
pub(crate) async fn readyz(State(face): State<Arc<Face>>) -> Result<Json<Value>, ApiError> {
    if face.runtime.is_shut_down() {
        return Err(ApiError::stopped());
    }
    let health = face.runtime.health();
    if !health.is_healthy() {
        let reason = health
            .first_damage
            .map(|fault| fault.to_string())
            .unwrap_or_else(|| "the data directory is damaged".to_owned());
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "corrupt",
            format!("not ready: {reason}"),
        )
        .with("damaged_reads", json!(health.damaged_reads)));
    }
    Ok(Json(json!({"status": "ready"})))
}

/// `GET /openapi.json`: the OpenAPI document, made once.
pub(crate) async fn openapi() -> Json<Value> {
    static DOCUMENT: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    Json(DOCUMENT.get_or_init(crate::openapi::document).clone())
}

/// Any other path.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no_such_path", "no such path")
}

/// A path that exists, with another method.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this path does not take that method",
    )
}
