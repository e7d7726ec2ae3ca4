//! The inbox page: one self-contained HTML document (script and style inline) where a
//! person sees pending user asks appear live and answers each in the form its format
//! calls for. The page itself holds no data and needs no token; the person enters an
//! `answer` token, which the page sends as a bearer token with every request (never in
//! a URL).

use axum::http::header;
use axum::response::IntoResponse;

/// The page.
const INBOX: &str = include_str!("page/inbox.html");

/// `GET /inbox`.
pub(crate) async fn inbox() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        INBOX,
    )
}
