//! The test mode: two endpoints that let a client play a simulation scenario over HTTP,
//! on the scenario's manual clock. They exist only on a router built with
//! [`test_router`] (`parkway serve --test-scenario FILE`), never on [`crate::router`]'s,
//! and they need the `admin` scope.
//!
//! - `POST /v1/test/clock` with `{"advance": "4m"}` moves the virtual clock forward and
//!   answers `{"now"}`; nothing else moves it. A move past the clock's last instant
//!   (`ManualClock::last`) is refused with 400 and moves nothing.
//! - `POST /v1/test/settle?after=N` waits until the runtime has nothing left to do at the
//!   clock's present (bounded by [`parkway::sim::HANG`]) and answers what the client
//!   needs to read the step's consequences from the streams: `now`, the scripted
//!   targets' `notes` since the last settle, `last_event_id` and
//!   `last_frame_id` (the last entries after `N`, of the log and of those the inbox
//!   stream shows; `null` when there is none), and whether it `settled` in time.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::post;
use axum::{Json, Router};
use parkway::sim::{HANG, Notes};
use parkway::{ManualClock, Runtime};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ApiError, Face, Options, Tokens};

/// What the test endpoints drive: the scenario's clock and its targets' notes.
#[derive(Debug, Clone)]
pub struct TestMode {
    /// The runtime's clock.
    pub clock: ManualClock,
    /// Where the runtime's scripted targets note what they do.
    pub notes: Notes,
}

/// The router of every door, with the test endpoints besides (admin scope).
pub fn test_router(runtime: Runtime, tokens: Tokens, options: Options, test: TestMode) -> Router {
    crate::build(runtime, tokens, options, Some(test))
}

/// The test endpoints' routes.
pub(crate) fn routes() -> Router<Arc<Face>> {
    Router::new()
        .route("/v1/test/clock", post(clock))
        .route("/v1/test/settle", post(settle))
}

/// The test mode of a router built by [`test_router`]; its routes exist only there.
fn mode(face: &Face) -> Result<&TestMode, ApiError> {
    face.test.as_ref().ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            "no_such_path",
            "no such path",
        )
    })
}

/// `POST /v1/test/clock`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Advance {
    /// A humantime duration.
    advance: String,
}

/// `POST /v1/test/clock`: move the clock forward.
async fn clock(
    State(face): State<Arc<Face>>,
    body: crate::JsonBody,
) -> Result<Json<Value>, ApiError> {
    let test = mode(&face)?;
    let Advance { advance } = body.into()?;
    let by = humantime::parse_duration(&advance).map_err(|e| {
        ApiError::field(
            "advance",
            format!("{advance:?} is not a duration such as 4m: {e}"),
        )
    })?;
    test.clock
        .try_advance(by)
        .map_err(|e| ApiError::field("advance", e.to_string()))?;
    Ok(Json(json!({"now": now(&face.runtime)})))
}

fn now(runtime: &Runtime) -> String {
    runtime
        .now()
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// `POST /v1/test/settle?after=N`.
async fn settle(
    State(face): State<Arc<Face>>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let test = mode(&face)?;
    let after = match query.get("after") {
        None => 0,
        Some(text) => text.parse::<u64>().map_err(|_| {
            ApiError::field("after", format!("after is an event number, not {text:?}"))
        })?,
    };
    let rt = &face.runtime;
    let settled = tokio::time::timeout(HANG, rt.settle()).await.is_ok();
    let mut last_event = None;
    let mut last_frame = None;
    let mut from = after.saturating_add(1);
    loop {
        let page = match rt.event_log(from, 512) {
            Ok(page) => page,
            // A runtime in memory keeps no log: there is nothing to read back.
            Err(parkway::LogError::InMemory) => break,
            Err(e) => {
                return Err(ApiError::new(
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    e.kind(),
                    e.to_string(),
                ));
            }
        };
        let Some(last) = page.last() else { break };
        from = last.seq + 1;
        last_event = Some(last.seq);
        for logged in &page {
            if crate::inbox::frame(rt, &logged.event).is_some() {
                last_frame = Some(logged.seq);
            }
        }
    }
    Ok(Json(json!({
        "now": now(rt),
        "notes": test.notes.drain(),
        "last_event_id": last_event,
        "last_frame_id": last_frame,
        "settled": settled,
    })))
}
