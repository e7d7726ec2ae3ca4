//! Request bodies: capped (413), and parsed as JSON only once their nesting is known to
//! be within [`parkway::MAX_VALUE_DEPTH`], so a body of a million `[` is refused by a
//! flat scan instead of overflowing the stack of the task parsing it.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ApiError;

/// A request's body as JSON, checked for size and depth. An empty body is `null`.
#[derive(Debug)]
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "the request body is larger than this server accepts",
                )
            } else {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "unreadable_body",
                    "the request body could not be read",
                )
            }
        })?;
        parse(&bytes).map(JsonBody)
    }
}

impl JsonBody {
    /// The body as `T`; a mismatch is a 400 naming the field at fault when serde does.
    pub fn into<T: DeserializeOwned>(self) -> Result<T, ApiError> {
        serde_json::from_value(self.0).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid",
                format!("the request body does not fit: {e}"),
            )
        })
    }
}

/// Parse `bytes` as JSON: `null` if empty, a 400 if deeper than the runtime accepts or
/// not JSON.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    let depth = parkway::json_nesting(bytes);
    if depth > parkway::MAX_VALUE_DEPTH {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "too_deep",
            format!(
                "the request body is nested deeper than {} levels",
                parkway::MAX_VALUE_DEPTH
            ),
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "not_json",
            format!("the request body is not JSON: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_too_deep_is_refused_without_parsing_it() {
        let deep = "[".repeat(1_000_000);
        let err = parse(deep.as_bytes()).expect_err("refused");
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
        assert_eq!(err.kind, "too_deep");
        let fits = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(parse(fits.as_bytes()).is_ok());
        assert_eq!(parse(b"  ").expect("empty"), Value::Null);
        assert_eq!(parse(b"{").expect_err("bad").kind, "not_json");
    }
}
