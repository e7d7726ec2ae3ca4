//! The server: an accept loop that serves a router over HTTP/1.1 with hyper, bounded so
//! that slow or idle clients cannot lock others out.
//!
//! - **A request's head has [`Options::header_read_timeout`]**: from the connection's
//!   start for its first request, from the first byte of each later one. A connection
//!   that has not sent a whole head by then is closed.
//! - **A kept-alive connection waits [`Options::idle_timeout`]** for the first byte of its
//!   next request, then it is closed. A connection with a request in flight (a long poll,
//!   a stream) is never idle: only the request's own bounds apply to it.
//! - **At most [`Options::max_connections`] are open.** When a new one comes at the cap,
//!   the open connection with no request in flight that has waited longest is closed to
//!   admit it (an idle one, or one still sending its head); when every one has a request
//!   in flight, the new one is closed at once. Either is logged (a warning at most every
//!   10 s, with the count since the last) and counted in `/metrics`.
//! - **Heads hyper cannot take** (larger than [`Options::max_head_bytes`], more than 100
//!   headers, or not HTTP) are answered with the face's JSON error body: hyper writes a
//!   bare `400`, `414` or `431` itself, before any router runs, and [`Socket`] sends the
//!   JSON one in its place.
//!
//! Each connection is one task that owns its timers ([`drive`]); what it waits for
//! follows the connection's [`Phase`], which its socket (bytes read), its service (a
//! request dispatched) and its responses (a body done) move on.
//!
//! Only HTTP/1.1 is served (and 1.0); there is no TLS here: a proxy in front terminates
//! it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tower::ServiceExt;

use crate::Options;

/// The fewest bytes hyper's read buffer takes (it refuses less).
const MIN_HEAD_BYTES: usize = 8192;

/// How often, at most, a kind of shed connection is logged.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How long the accept loop waits for an evicted connection to let go of its slot
/// before it refuses the new one instead.
const EVICTION_WAIT: Duration = Duration::from_secs(1);

/// How long the accept loop pauses after an accept failed for want of resources (no
/// file descriptor left): the failure would repeat at once.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Serve `app` on `listener` until `options.shutdown` begins, then stop accepting,
/// let every request in flight finish (streams end as the shutdown begins) and return
/// once every connection is closed.
///
/// `options` are the ones the router was built with (or a clone of them): the server's
/// counters appear in that router's `/metrics`.
///
/// ```no_run
/// # async fn run(
/// #     stop_signal: impl std::future::Future<Output = ()> + Send + 'static,
/// # ) -> Result<(), Box<dyn std::error::Error>> {
/// use parkway_http::{Options, Scope, Tokens, router, serve};
/// let runtime = parkway::Runtime::builder().build().await?;
/// let tokens = Tokens::none().with("a-long-admin-token-0001", &[Scope::Admin]);
/// let options = Options::default();
/// let app = router(runtime.clone(), tokens, options.clone());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let shutdown = options.shutdown.clone();
/// tokio::spawn(async move {
///     stop_signal.await;
///     shutdown.begin();
/// });
/// serve(listener, app, &options).await;
/// runtime.shutdown().await;
/// # Ok(()) }
/// ```
pub async fn serve(listener: TcpListener, app: Router, options: &Options) {
    let limits = Limits::of(options);
    let counters = Arc::clone(&options.connections);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(Open::default());
    let mut warnings = Warnings::default();
    let mut tasks = JoinSet::new();
    let mut begun = pin!(options.shutdown.begun());
    loop {
        let stream = tokio::select! {
            () = &mut begun => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    if !matches!(
                        error.kind(),
                        io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionRefused
                    ) {
                        warnings.accept_failed(&error);
                        tokio::time::sleep(ACCEPT_PAUSE).await;
                    }
                    continue;
                }
            },
        };
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match open.make_room(&slots).await {
                Some(slot) => {
                    counters.evicted.fetch_add(1, Ordering::Relaxed);
                    warnings.evicted(limits.max_connections);
                    slot
                }
                None => {
                    counters.refused.fetch_add(1, Ordering::Relaxed);
                    warnings.refused(limits.max_connections);
                    drop(stream);
                    continue;
                }
            },
        };
        let conn = open.add();
        counters.open.fetch_add(1, Ordering::Relaxed);
        let held = Held {
            conn: Arc::clone(&conn),
            open: Arc::clone(&open),
            counters: Arc::clone(&counters),
            _slot: slot,
        };
        let begun = options.shutdown.begun();
        tasks.spawn(drive(stream, app.clone(), limits, held, begun));
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
}

/// The server's counters, shown in `/metrics`; clones of one [`Options`] share them.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Connections open now.
    pub(crate) open: AtomicU64,
    /// Connections closed to admit a new one at the cap.
    pub(crate) evicted: AtomicU64,
    /// New connections closed at once at the cap, every open one busy.
    pub(crate) refused: AtomicU64,
    /// Connections closed for a head not sent whole within the header-read timeout.
    pub(crate) head_timeouts: AtomicU64,
    /// Kept-alive connections closed after the idle timeout.
    pub(crate) idle_timeouts: AtomicU64,
}

/// The bounds a connection is served with, from the [`Options`].
#[derive(Debug, Clone, Copy)]
struct Limits {
    header_read_timeout: Duration,
    idle_timeout: Duration,
    max_connections: usize,
    max_head_bytes: usize,
}

impl Limits {
    /// When a connection in `phase` is closed, if nothing moves it on.
    fn deadline(&self, phase: Phase) -> Option<Instant> {
        match phase {
            Phase::Head { since } => Some(since + self.header_read_timeout),
            Phase::Idle { since } => Some(since + self.idle_timeout),
            Phase::Busy(_) => None,
            Phase::Evicted => Some(Instant::now()),
        }
    }

    fn of(options: &Options) -> Limits {
        Limits {
            header_read_timeout: options.header_read_timeout,
            idle_timeout: options.idle_timeout,
            max_connections: options.max_connections.clamp(1, Semaphore::MAX_PERMITS),
            max_head_bytes: options.max_head_bytes.max(MIN_HEAD_BYTES),
        }
    }
}

/// Where a connection is between requests, which says what it waits for.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Reading a request's head, since `since`: the connection's start for its first
    /// request, the first byte read after a response for a later one.
    Head { since: Instant },
    /// Kept alive after a response, nothing read since `since`.
    Idle { since: Instant },
    /// Requests in flight: dispatched, their response not yet written whole.
    Busy(usize),
    /// Chosen to be closed, to admit a new connection at the cap.
    Evicted,
}

/// One open connection's state, shared by its socket, its service and its task.
#[derive(Debug)]
struct Conn {
    /// Its key among the open connections.
    id: u64,
    /// Where it is; a std mutex: held for a few instructions, never across an await.
    phase: Mutex<Phase>,
    /// Wakes its task when the phase moves, so that it waits for the right deadline.
    changed: Notify,
}

impl Conn {
    /// Move the phase with `step`, and wake the connection's task.
    fn step(&self, step: impl FnOnce(Phase) -> Phase) {
        if let Ok(mut phase) = self.phase.lock() {
            *phase = step(*phase);
        }
        self.changed.notify_one();
    }

    fn phase(&self) -> Phase {
        self.phase.lock().map(|p| *p).unwrap_or(Phase::Evicted)
    }

    /// Bytes came in: a kept-alive connection starts reading its next head.
    fn read_some(&self) {
        if matches!(self.phase(), Phase::Idle { .. }) {
            self.step(|phase| match phase {
                Phase::Idle { .. } => Phase::Head {
                    since: Instant::now(),
                },
                other => other,
            });
        }
    }

    /// A request was dispatched; it is in flight until the guard is dropped (its
    /// response written whole, or abandoned).
    fn request(self: &Arc<Conn>) -> InFlight {
        self.step(|phase| match phase {
            Phase::Head { .. } | Phase::Idle { .. } => Phase::Busy(1),
            Phase::Busy(n) => Phase::Busy(n + 1),
            Phase::Evicted => Phase::Evicted,
        });
        InFlight(Arc::clone(self))
    }

    /// Whether no request is in flight.
    fn between_requests(&self) -> bool {
        matches!(self.phase(), Phase::Head { .. } | Phase::Idle { .. })
    }

    /// Mark it evicted if it has no request in flight; whether it was.
    fn evict(&self) -> bool {
        let evicted = match self.phase.lock() {
            Ok(mut phase) => match *phase {
                Phase::Head { .. } | Phase::Idle { .. } => {
                    *phase = Phase::Evicted;
                    true
                }
                Phase::Busy(_) | Phase::Evicted => false,
            },
            Err(_) => false,
        };
        if evicted {
            self.changed.notify_one();
        }
        evicted
    }
}

/// A request in flight on a connection, until dropped.
#[derive(Debug)]
struct InFlight(Arc<Conn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.step(|phase| match phase {
            Phase::Busy(1) => Phase::Idle {
                since: Instant::now(),
            },
            Phase::Busy(n) => Phase::Busy(n.saturating_sub(1)),
            other => other,
        });
    }
}

/// The open connections, for the accept loop to choose one to close at the cap.
#[derive(Debug, Default)]
struct Open {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    next: AtomicU64,
}

impl Open {
    /// A new connection, reading its first head from now.
    fn add(&self) -> Arc<Conn> {
        let conn = Arc::new(Conn {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            phase: Mutex::new(Phase::Head {
                since: Instant::now(),
            }),
            changed: Notify::new(),
        });
        if let Ok(mut conns) = self.conns.lock() {
            conns.insert(conn.id, Arc::clone(&conn));
        }
        conn
    }

    fn remove(&self, id: u64) {
        if let Ok(mut conns) = self.conns.lock() {
            conns.remove(&id);
        }
    }

    /// At the cap: close the connection with no request in flight that has waited
    /// longest, and take its slot once it let go of it; `None` when every connection
    /// has a request in flight.
    async fn make_room(&self, slots: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
        let victim = {
            let conns = self.conns.lock().ok()?;
            let mut waiting: Vec<(Instant, Arc<Conn>)> = conns
                .values()
                .filter_map(|conn| match conn.phase() {
                    Phase::Head { since } | Phase::Idle { since } => {
                        Some((since, Arc::clone(conn)))
                    }
                    Phase::Busy(_) | Phase::Evicted => None,
                })
                .collect();
            waiting.sort_by_key(|(since, _)| *since);
            // The first that is still waiting when marked (it may have been handed a
            // request since it was looked at).
            waiting.into_iter().find(|(_, conn)| conn.evict())
        };
        victim?;
        tokio::time::timeout(EVICTION_WAIT, Arc::clone(slots).acquire_owned())
            .await
            .ok()?
            .ok()
    }
}

/// What a connection's task holds while it lives: its slot under the cap, its place
/// among the open connections, its count.
struct Held {
    conn: Arc<Conn>,
    open: Arc<Open>,
    counters: Arc<Counters>,
    _slot: OwnedSemaphorePermit,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.open.remove(self.conn.id);
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serve one connection until it closes, is timed out or evicted, or the shutdown
/// begins (then it finishes the request in flight, if any, and closes).
async fn drive(
    stream: TcpStream,
    app: Router,
    limits: Limits,
    held: Held,
    begun: impl Future<Output = ()>,
) {
    let conn = Arc::clone(&held.conn);
    let socket = Socket {
        stream,
        conn: Arc::clone(&conn),
        limits,
        answer: None,
        shut: false,
        head_read: 0,
    };
    let service = Service {
        app,
        conn: Arc::clone(&conn),
    };
    let mut http1 = hyper::server::conn::http1::Builder::new();
    // The head's timeout is this module's (hyper's would start when a kept-alive
    // connection goes idle, cutting the idle wait to it).
    http1
        .header_read_timeout(None)
        .max_buf_size(limits.max_head_bytes);
    let mut http = pin!(http1.serve_connection(TokioIo::new(socket), service));
    let mut begun = pin!(begun);
    let mut closing = false;
    loop {
        let changed = conn.changed.notified();
        let deadline = limits.deadline(conn.phase());
        let timer = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = http.as_mut() => break,
            () = changed => {}
            () = &mut begun, if !closing => {
                closing = true;
                http.as_mut().graceful_shutdown();
            }
            () = timer => {
                // The phase may have moved since the deadline was read.
                let phase = conn.phase();
                if limits.deadline(phase).is_none_or(|at| Instant::now() < at) {
                    continue;
                }
                match phase {
                    Phase::Head { .. } => {
                        held.counters.head_timeouts.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!("closed a connection that sent no whole request head in time");
                    }
                    Phase::Idle { .. } => {
                        held.counters.idle_timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    Phase::Evicted => {}
                    Phase::Busy(_) => continue,
                }
                break;
            }
        }
    }
    // The connection (a local) is dropped before `held` (an argument): the socket is
    // closed before its slot is given back.
}

/// The router as hyper's service on one connection: each request is in flight from
/// its dispatch until its response's body is done.
#[derive(Clone)]
struct Service {
    app: Router,
    conn: Arc<Conn>,
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let in_flight = self.conn.request();
        let app = self.app.clone();
        Box::pin(async move {
            let response = app.oneshot(request.map(Body::new)).await?;
            Ok(response.map(|body| Tracked {
                body,
                _in_flight: in_flight,
            }))
        })
    }
}

/// A response's body, holding its request in flight until hyper is done with it.
struct Tracked {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection's socket. It tells its connection when bytes come in, and it answers in
/// the face's JSON shape where hyper answers a head it could not take with a bare
/// status line.
struct Socket {
    stream: TcpStream,
    conn: Arc<Conn>,
    limits: Limits,
    /// The JSON answer sent in place of hyper's, and how much of it is written.
    answer: Option<(Vec<u8>, usize)>,
    /// Whether the write side is shut.
    shut: bool,
    /// Bytes read since the connection last had a request in flight: the head being
    /// read (with any bytes sent after it in the same reads). Reads are cut so it never
    /// passes `max_head_bytes`, whose equal in hyper's buffer is a head too large (431):
    /// left to itself, hyper reads in whatever chunks come and took heads well past it.
    head_read: usize,
}

impl Socket {
    /// Write what is left of the JSON answer.
    fn write_answer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some((bytes, written)) = &mut self.answer else {
            return Poll::Ready(Ok(()));
        };
        while *written < bytes.len() {
            let n = ready!(Pin::new(&mut self.stream).poll_write(cx, &bytes[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.conn.between_requests() {
            this.head_read = 0;
        }
        let room = this.limits.max_head_bytes.saturating_sub(this.head_read);
        let read = if this.conn.between_requests() && room < buf.remaining() {
            if room == 0 {
                // Hyper refuses a buffer this full before it reads again; should it not,
                // the connection ends rather than take more of the head.
                return Poll::Ready(Err(io::Error::other("the request head is too large")));
            }
            let mut scratch = [0u8; 8192];
            let mut part = ReadBuf::new(&mut scratch[..room.min(8192)]);
            ready!(Pin::new(&mut this.stream).poll_read(cx, &mut part))?;
            buf.put_slice(part.filled());
            part.filled().len()
        } else {
            let before = buf.filled().len();
            ready!(Pin::new(&mut this.stream).poll_read(cx, buf))?;
            buf.filled().len() - before
        };
        if read > 0 {
            if this.conn.between_requests() {
                this.head_read += read;
            }
            this.conn.read_some();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.answer.is_some() {
            // Hyper writes nothing after its own answer; should it, it is dropped, as
            // what it would have followed was replaced.
            ready!(this.write_answer(cx))?;
            return Poll::Ready(Ok(buf.len()));
        }
        if this.conn.between_requests()
            && let Some(status) = automatic(buf)
        {
            this.answer = Some((json_answer(status, this.limits), 0));
            // Taken whole: the rest is written on the next write, flush or shutdown.
            if let Poll::Ready(Err(e)) = this.write_answer(cx) {
                return Poll::Ready(Err(e));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.write_answer(cx))?;
        Pin::new(&mut this.stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.write_answer(cx))?;
        if !this.shut {
            ready!(Pin::new(&mut this.stream).poll_shutdown(cx))?;
            this.shut = true;
        }
        if this.answer.is_some() {
            // What the client still sends of the head it was refused for is read and
            // dropped until it closes (bounded by the head's timeout): closing with
            // unread bytes would reset the connection, and the answer with it.
            let mut scratch = [0u8; 4096];
            loop {
                let mut sink = ReadBuf::new(&mut scratch);
                match ready!(Pin::new(&mut this.stream).poll_read(cx, &mut sink)) {
                    Ok(()) if sink.filled().is_empty() => break,
                    Ok(()) => {}
                    Err(_) => break,
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The status of hyper's own answer to a head it could not parse, if `buf` is one:
/// a whole bodiless `400`, `414` or `431` head, which nothing else on this server
/// writes (every error the router answers has a JSON body).
fn automatic(buf: &[u8]) -> Option<StatusCode> {
    if buf.len() > 512 || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let text = std::str::from_utf8(buf).ok()?;
    let mut lines = text.split("\r\n");
    let code = lines.next()?.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    let status = match code {
        "400" => StatusCode::BAD_REQUEST,
        "414" => StatusCode::URI_TOO_LONG,
        "431" => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        _ => return None,
    };
    lines
        .any(|line| line.eq_ignore_ascii_case("content-length: 0"))
        .then_some(status)
}

/// The face's JSON answer for `status`, as a whole HTTP/1.1 response that closes the
/// connection.
fn json_answer(status: StatusCode, limits: Limits) -> Vec<u8> {
    let (kind, message) = match status {
        StatusCode::URI_TOO_LONG => (
            "uri_too_long",
            "the request's URI is longer than this server takes".to_owned(),
        ),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            "head_too_large",
            format!(
                "the request's line and headers are over {} bytes, or more than 100 headers",
                limits.max_head_bytes
            ),
        ),
        _ => ("invalid", "the request is not valid HTTP/1.1".to_owned()),
    };
    let body = serde_json::json!({"error": {"kind": kind, "message": message}}).to_string();
    let mut answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(body.as_bytes());
    answer
}

/// The accept loop's warnings, each kind at most every [`WARN_EVERY`], with how many
/// happened since the last.
#[derive(Debug, Default)]
struct Warnings {
    evicted: Warned,
    refused: Warned,
    accept: Warned,
}

#[derive(Debug, Default)]
struct Warned {
    last: Option<Instant>,
    since: u64,
}

impl Warned {
    /// Count one; the count to log, if it is time to.
    fn due(&mut self) -> Option<u64> {
        self.since += 1;
        let now = Instant::now();
        if self.last.is_some_and(|last| now < last + WARN_EVERY) {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

impl Warnings {
    fn evicted(&mut self, limit: usize) {
        if let Some(count) = self.evicted.due() {
            tracing::warn!(
                limit,
                count,
                "connections at their cap: closed the one waiting longest with no request, to admit a new one"
            );
        }
    }

    fn refused(&mut self, limit: usize) {
        if let Some(count) = self.refused.due() {
            tracing::warn!(
                limit,
                count,
                "connections at their cap, each with a request in flight: refused a new one"
            );
        }
    }

    fn accept_failed(&mut self, error: &io::Error) {
        if let Some(count) = self.accept.due() {
            tracing::warn!(%error, count, "cannot accept a connection");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hyper_s_bare_answers_are_replaced() {
        let bare = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n";
        assert_eq!(
            automatic(bare),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 20\r\n\r\n";
        assert_eq!(automatic(with_body), None);
        let other = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(automatic(other), None);
        let partial = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\n";
        assert_eq!(automatic(partial), None);
    }

    #[test]
    fn a_warning_is_logged_at_most_every_ten_seconds_with_the_count() {
        let mut warned = Warned::default();
        assert_eq!(warned.due(), Some(1));
        assert_eq!(warned.due(), None);
        assert_eq!(warned.due(), None);
        warned.last = warned.last.map(|t| t - WARN_EVERY);
        assert_eq!(warned.due(), Some(3));
    }
}
