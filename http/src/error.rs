//! Errors as HTTP answers: a status and `{"error": {"kind", "message", …}}`, where
//! `kind` is the library error's stable kind, so a client can branch on it.
//!
//! A message names what was wrong in the request; nothing internal (a path) reaches a
//! client. Damage met in the data directory is answered as `corrupt` naming the keyspace
//! and the key, never as an unknown id or a runtime shut down.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parkway::{
    AnswerError, CancelError, IdProblem, RecordError, ResumeError, SaveError, StartError,
    StoreFault, TakeError, VisitError,
};
use serde_json::{Map, Value, json};

/// The slot of a `not_owner` refusal, on its response, for `crate::forward`: another
/// node may own it, and the request be sent on there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NotOwner(pub(crate) u16);

/// Seconds a client is told to wait before trying a runtime that cannot take work.
const RETRY_AFTER: &str = "5";

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The stable kind.
    pub kind: &'static str,
    /// What was wrong, for a person.
    pub message: String,
    /// More fields of the error object (`problems`, `field`, `how`, `at`, …).
    pub extra: Map<String, Value>,
}

impl ApiError {
    /// An error with no extra fields.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            kind,
            message: message.into(),
            extra: Map::new(),
        }
    }

    /// This error with the field `key` added to its object.
    pub fn with(mut self, key: &str, value: Value) -> ApiError {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// A 400 naming the request's `field` at fault.
    pub fn field(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "invalid", message).with("field", json!(field))
    }

    /// A 404 for `what`.
    pub fn not_found(kind: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, kind, message)
    }

    /// The runtime is stopping or stopped: 503, try again later (elsewhere).
    pub fn stopped() -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "stopped",
            "the runtime is shut down",
        )
    }

    /// The data directory could not be read for the request: `corrupt` (500, naming the
    /// keyspace and the key: the data is damaged, and what it held is neither lost
    /// nor unknown to the client), or `unreadable` (503, try again). The server's
    /// paths are not in it.
    pub fn store(fault: &StoreFault) -> ApiError {
        let status = if fault.is_corrupt() {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        };
        let mut error = ApiError::new(status, fault.kind(), fault.to_string());
        if let Ok(Value::Object(fields)) = serde_json::to_value(fault) {
            for (k, v) in fields {
                if k != "kind" && !v.is_null() {
                    error.extra.insert(k, v);
                }
            }
        }
        error
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let not_owner = (self.kind == "not_owner")
            .then(|| self.extra.get("slot").and_then(Value::as_u64))
            .flatten()
            .and_then(|slot| u16::try_from(slot).ok());
        let mut object = Map::new();
        object.insert("kind".to_owned(), json!(self.kind));
        object.insert("message".to_owned(), json!(self.message));
        object.extend(self.extra);
        let mut response = (self.status, Json(json!({ "error": object }))).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER));
        }
        // Another node may own the subject's slot: the request may be sent on there.
        if let Some(slot) = not_owner {
            response.extensions_mut().insert(NotOwner(slot));
        }
        response
    }
}

/// The status of an interaction's problem: unknown is 404, already resolved, being
/// resolved or in the wrong state 409, anything about the request itself 400.
fn id_status(problem: &IdProblem) -> StatusCode {
    match problem {
        IdProblem::Unknown { .. } => StatusCode::NOT_FOUND,
        IdProblem::AlreadyResolved { .. }
        | IdProblem::BeingResolved { .. }
        | IdProblem::WrongStatus { .. } => StatusCode::CONFLICT,
        _ => StatusCode::BAD_REQUEST,
    }
}

/// An interaction's problem, with its fields (`how` and `at` for a second resolution).
fn id_error(problem: &IdProblem) -> ApiError {
    let mut error = ApiError::new(id_status(problem), problem.kind(), problem.to_string());
    if let Ok(Value::Object(fields)) = serde_json::to_value(problem) {
        for (k, v) in fields {
            if k != "kind" {
                error.extra.insert(k, v);
            }
        }
    }
    error
}

impl From<StartError> for ApiError {
    fn from(e: StartError) -> ApiError {
        let status = match &e {
            StartError::UnknownTarget(_) => StatusCode::NOT_FOUND,
            StartError::Stopped => return ApiError::stopped(),
            StartError::Store(fault) => return ApiError::store(fault),
            StartError::IdempotencyKeyInUse { .. } | StartError::IdempotencyKeyReused { .. } => {
                StatusCode::CONFLICT
            }
            StartError::InvalidIdempotencyKey { .. } => {
                return ApiError::new(StatusCode::BAD_REQUEST, e.kind(), e.to_string())
                    .with("field", json!("Idempotency-Key"));
            }
            _ => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, e.kind(), e.to_string())
    }
}

impl From<ResumeError> for ApiError {
    fn from(e: ResumeError) -> ApiError {
        match &e {
            ResumeError::Refused(problem) => id_error(problem),
            ResumeError::Stopped => ApiError::stopped(),
            ResumeError::Store(fault) => ApiError::store(fault),
            _ => ApiError::new(StatusCode::BAD_REQUEST, e.kind(), e.to_string()),
        }
    }
}

impl From<TakeError> for ApiError {
    fn from(e: TakeError) -> ApiError {
        match &e {
            TakeError::Refused(problem) => id_error(problem),
            TakeError::Stopped => ApiError::stopped(),
            TakeError::Store(fault) => ApiError::store(fault),
            _ => ApiError::new(StatusCode::BAD_REQUEST, e.kind(), e.to_string()),
        }
    }
}

impl From<CancelError> for ApiError {
    fn from(e: CancelError) -> ApiError {
        match &e {
            CancelError::Refused(problems) => {
                // One status for all the problems: a malformed request (400) first,
                // then an unknown id (404), then a conflict (409).
                let status = problems
                    .0
                    .iter()
                    .map(id_status)
                    .min_by_key(|s| match *s {
                        StatusCode::BAD_REQUEST => 0,
                        StatusCode::NOT_FOUND => 1,
                        _ => 2,
                    })
                    .unwrap_or(StatusCode::BAD_REQUEST);
                let listed: Vec<Value> = problems
                    .0
                    .iter()
                    .map(|p| {
                        let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
                        if let Value::Object(o) = &mut v {
                            o.insert("message".to_owned(), json!(p.to_string()));
                        }
                        v
                    })
                    .collect();
                ApiError::new(status, e.kind(), e.to_string()).with("problems", json!(listed))
            }
            CancelError::Stopped => ApiError::stopped(),
            CancelError::Store(fault) => ApiError::store(fault),
            _ => ApiError::new(StatusCode::BAD_REQUEST, e.kind(), e.to_string()),
        }
    }
}

impl From<VisitError> for ApiError {
    fn from(e: VisitError) -> ApiError {
        let status = match &e {
            VisitError::UnknownDoor { .. } => StatusCode::NOT_FOUND,
            VisitError::Broken { .. } => StatusCode::CONFLICT,
            VisitError::InputTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            VisitError::Stopped => return ApiError::stopped(),
            VisitError::Store(fault) => return ApiError::store(fault),
            _ => StatusCode::BAD_REQUEST,
        };
        let error = ApiError::new(status, e.kind(), e.to_string());
        match &e {
            VisitError::Refused { problems, .. } => {
                let listed: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
                error.with("problems", json!(listed))
            }
            _ => error,
        }
    }
}

impl From<SaveError> for ApiError {
    fn from(e: SaveError) -> ApiError {
        let error = ApiError::new(StatusCode::BAD_REQUEST, e.kind(), e.to_string());
        match &e {
            SaveError::Invalid { problems, .. } => {
                let listed: Vec<String> = problems.0.iter().map(ToString::to_string).collect();
                error.with("problems", json!(listed))
            }
            _ => error,
        }
    }
}

impl From<AnswerError> for ApiError {
    fn from(e: AnswerError) -> ApiError {
        let status = match &e {
            AnswerError::Unknown { .. } => StatusCode::NOT_FOUND,
            AnswerError::AlreadyResolved { .. } => StatusCode::CONFLICT,
            AnswerError::Stopped => return ApiError::stopped(),
            AnswerError::Store(fault) => return ApiError::store(fault),
            _ => StatusCode::BAD_REQUEST,
        };
        let error = ApiError::new(status, e.kind(), e.to_string());
        match &e {
            AnswerError::Invalid { problems, .. } => {
                let error = error.with("problems", json!(problems));
                error.with("field", json!("answer"))
            }
            AnswerError::AlreadyResolved { how, at, .. } => {
                error.with("how", json!(how)).with("at", json!(at))
            }
            AnswerError::BadPage => error.with("field", json!("page")),
            _ => error,
        }
    }
}

impl From<RecordError> for ApiError {
    fn from(e: RecordError) -> ApiError {
        match &e {
            RecordError::Store(fault) => ApiError::store(fault),
            _ => ApiError::stopped(),
        }
    }
}
