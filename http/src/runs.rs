//! A run's record, with a bounded long poll.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, Query, State};
use parkway::{Event, RunRecord, RunStatus};
use tokio::sync::broadcast::error::RecvError;

use crate::{ApiError, Face};

/// The `wait` query parameter: a humantime duration (`30s`), at most the server's
/// `max_wait` (longer asks are cut to it).
pub(crate) fn wait_of(
    query: &HashMap<String, String>,
    max: Duration,
) -> Result<Duration, ApiError> {
    match query.get("wait") {
        None => Ok(Duration::ZERO),
        Some(text) => humantime::parse_duration(text)
            .map(|d| d.min(max))
            .map_err(|e| ApiError::field("wait", format!("wait {text:?} is not a duration: {e}"))),
    }
}

/// Whether `event` is about `run`.
fn about(event: &Event, run: &str) -> bool {
    match event {
        Event::RunFinished { run: r, .. }
        | Event::RunFailed { run: r, .. }
        | Event::RunCancelled { run: r, .. }
        | Event::AskParked { run: r, .. } => r == run,
        _ => false,
    }
}

/// `GET /v1/runs/{id}?wait=30s`: the run's record. With `wait`, a `running` record is
/// answered once it is terminal, parked or suspended, or when the wait ends (then as it
/// stands): never longer than the server's bound, and never for a person's answer.
pub(crate) async fn read(
    State(face): State<Arc<Face>>,
    Path(id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<RunRecord>, ApiError> {
    let wait = wait_of(&query, face.options.max_wait)?;
    let unknown = || {
        ApiError::not_found(
            "unknown_run",
            format!("no record of run {id}: never started, or dropped"),
        )
    };
    // Subscribed before the first read, so no change between the two is missed.
    let mut events = face.runtime.events();
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let record = face.runtime.try_record(&id).await?.ok_or_else(unknown)?;
        if record.status != RunStatus::Running {
            return Ok(Json(record));
        }
        // Until an event about the run (or a lag, which may hide one), or the deadline.
        loop {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) => return Ok(Json(record)),
                Ok(Ok(event)) if !about(&event, &id) => continue,
                Ok(Err(RecvError::Closed)) => return Ok(Json(record)),
                Ok(_) => break,
            }
        }
    }
}
