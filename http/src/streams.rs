//! Server-sent event streams that resume from the durable event log.
//!
//! Each frame's `id:` is the sequence number of the logged event it comes from. A client
//! that reconnects with `Last-Event-ID: n` (or `?last_event_id=n`) is sent every frame
//! from `n + 1` on, read from the log, then the live ones, with no gap and no duplicate:
//! the stream subscribes to the live events before it reads the log, skips live events
//! it already sent, and goes back to the log whenever it fell behind the live channel.
//! An `n` older than the log's window gets an explicit `reset` frame naming the oldest
//! number kept, and the stream goes on from there; an `n` past the log's newest entry
//! gets a `reset` naming the newest, and the stream goes on after it. Without an id, a
//! stream starts now.
//! A runtime in memory keeps no log: its frames carry no id, and a resume gets `reset`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures::Stream;
use parkway::{Event, Logged, Runtime};
use serde_json::json;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;

use crate::{ApiError, Face};

/// How many log entries one read takes while catching up.
const PAGE: usize = 512;

/// How many frames may wait for a slow client before the stream stops reading (the
/// client then catches up from the log, as after a lag).
const BUFFER: usize = 256;

/// Turns a logged event into the frame a stream shows, or `None` to show nothing.
pub(crate) type Framer = fn(&Runtime, &Event) -> Option<(&'static str, serde_json::Value)>;

/// The id a client resumes after: `Last-Event-ID`, else `?last_event_id=`.
pub(crate) fn last_event_id(
    headers: &HeaderMap,
    query: &HashMap<String, String>,
) -> Result<Option<u64>, ApiError> {
    let (text, field) = match headers.get("last-event-id") {
        Some(value) => {
            let text = value.to_str().map_err(|_| {
                ApiError::field(
                    "Last-Event-ID",
                    "the last event id is not an event number (it holds bytes other than visible ASCII)",
                )
            })?;
            (Some(text.to_owned()), "Last-Event-ID")
        }
        None => (query.get("last_event_id").cloned(), "last_event_id"),
    };
    match text.as_deref().map(str::trim) {
        None | Some("") => Ok(None),
        Some(t) => t.parse::<u64>().map(Some).map_err(|_| {
            ApiError::field(
                field,
                format!("the last event id {t:?} is not an event number"),
            )
        }),
    }
}

/// `GET /v1/events`: every platform event, as `event: <kind>` frames.
pub(crate) async fn events(
    State(face): State<Arc<Face>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, ApiError> {
    let after = last_event_id(&headers, &query)?;
    stream(&face, after, platform)
}

/// A platform event as its frame: named by its kind.
fn platform(_: &Runtime, event: &Event) -> Option<(&'static str, serde_json::Value)> {
    let value = serde_json::to_value(event).ok()?;
    let kind = match value.get("event").and_then(|k| k.as_str()) {
        Some(k) => kind_name(k),
        None => "event",
    };
    Some((kind, value))
}

/// The static name of an event kind (SSE names are static here).
fn kind_name(kind: &str) -> &'static str {
    const KINDS: &[&str] = &[
        "ask_parked",
        "ask_resolved",
        "run_started",
        "run_finished",
        "run_failed",
        "run_cancelled",
        "cap_refused",
        "expiry_fired",
        "waiting_outcome_stored",
        "waiting_outcome_taken",
        "waiting_outcome_dropped",
        "visit_refused",
    ];
    KINDS
        .iter()
        .find(|k| **k == kind)
        .copied()
        .unwrap_or("event")
}

/// The SSE response of a stream of `framer`'s frames after `after`.
pub(crate) fn stream(
    face: &Arc<Face>,
    after: Option<u64>,
    framer: Framer,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>> + use<>>, ApiError> {
    let Some(subscribed) = face.metrics.subscribe(face.options.max_streams) else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "too_many_streams",
            format!(
                "this server has {} streams open, its most; try again later",
                face.options.max_streams
            ),
        ));
    };
    let (tx, rx) = mpsc::channel::<SseEvent>(BUFFER);
    let runtime = face.runtime.clone();
    // Subscribed here, before the response's headers go out: a client that reads the
    // inbox's list once its stream is open misses nothing between the two.
    let live = Live {
        logged: runtime.logged_events(),
        plain: runtime.events(),
    };
    let shutdown = face.options.shutdown.begun();
    tokio::spawn(async move {
        // Ends when the client is gone (a send fails), the runtime stops, or the
        // server's shutdown begins.
        tokio::select! {
            _ = feed(runtime, after, framer, tx, live) => {}
            () = shutdown => {}
        }
        drop(subscribed);
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (Ok(frame), rx))
    });
    Ok(Sse::new(frames).keep_alive(KeepAlive::new().interval(face.options.keep_alive)))
}

/// The client left.
struct Gone;

/// The live channels, subscribed when the stream was asked for: the logged events, or
/// for a runtime in memory the plain ones (the other is dropped unused).
struct Live {
    logged: broadcast::Receiver<Logged>,
    plain: broadcast::Receiver<Event>,
}

/// Send `framer`'s frames of every event after `after` (or from now), then live ones.
async fn feed(
    runtime: Runtime,
    after: Option<u64>,
    framer: Framer,
    tx: mpsc::Sender<SseEvent>,
    live: Live,
) -> Result<(), Gone> {
    let send = |frame: SseEvent| {
        let tx = tx.clone();
        async move { tx.send(frame).await.map_err(|_| Gone) }
    };
    // Subscribed first: whatever becomes durable from now on is seen live or read.
    let Live {
        logged: mut live,
        plain,
    } = live;
    let oldest = match runtime.event_log(1, 1) {
        Ok(first) => first.first().map(|l| l.seq),
        Err(_) => return feed_unlogged(runtime, after, framer, tx, plain).await,
    };
    drop(plain);
    let mut last = match after {
        None => None,
        Some(n) => Some(place(&runtime, n, oldest, &send).await?),
    };
    if let Some(from) = last {
        last = Some(catch_up(&runtime, from, framer, &send).await?);
    }
    loop {
        let received = tokio::select! {
            received = live.recv() => received,
            () = tx.closed() => return Err(Gone),
        };
        match received {
            Ok(logged) => {
                let Some(seen) = last else {
                    // Starting now: the first live event fixes where the stream is.
                    last = Some(logged.seq);
                    show(&runtime, &logged, framer, &send).await?;
                    continue;
                };
                if logged.seq <= seen {
                    continue;
                }
                if logged.seq > seen.saturating_add(1) {
                    // Something between was not seen live: read it from the log.
                    last = Some(catch_up(&runtime, seen, framer, &send).await?);
                    continue;
                }
                last = Some(logged.seq);
                show(&runtime, &logged, framer, &send).await?;
            }
            Err(RecvError::Lagged(_)) => {
                if let Some(seen) = last {
                    last = Some(catch_up(&runtime, seen, framer, &send).await?);
                }
            }
            Err(RecvError::Closed) => return Ok(()),
        }
    }
}

/// Where a stream resumed after `n` starts: after `n` itself when the log holds what
/// follows it. An `n` older than the log's window is told so with a `reset` frame and
/// the stream goes on from the `oldest` entry kept; an `n` past the log's newest entry
/// (a client that read another log, or one from before a restore) is told so too, and
/// the stream goes on after the newest entry (0 when the log is empty: from the first).
async fn place<F, Fut>(
    runtime: &Runtime,
    n: u64,
    oldest: Option<u64>,
    send: &F,
) -> Result<u64, Gone>
where
    F: Fn(SseEvent) -> Fut,
    Fut: std::future::Future<Output = Result<(), Gone>>,
{
    if let Some(oldest) = oldest
        && n.saturating_add(1) < oldest
    {
        send(reset(n, oldest)).await?;
        return Ok(oldest - 1);
    }
    if n == 0 || holds(runtime, n)? {
        return Ok(n);
    }
    // Past the end: the newest entry is the last number the log holds, below `n`
    // (numbers have no gaps), found with one single-entry read per halving.
    let newest = match oldest {
        None => 0,
        Some(mut held) => {
            let mut missing = n;
            while missing - held > 1 {
                let middle = held + (missing - held) / 2;
                if holds(runtime, middle)? {
                    held = middle;
                } else {
                    missing = middle;
                }
            }
            held
        }
    };
    send(ahead(n, newest)).await?;
    Ok(newest)
}

/// Whether the log holds entry `n` or one after it.
fn holds(runtime: &Runtime, n: u64) -> Result<bool, Gone> {
    match runtime.event_log(n, 1) {
        Ok(page) => Ok(!page.is_empty()),
        Err(error) => {
            tracing::error!(%error, "a stream could not read the event log");
            Err(Gone)
        }
    }
}

/// Send every logged event after `seen` the log holds now; the last number sent.
async fn catch_up<F, Fut>(
    runtime: &Runtime,
    mut seen: u64,
    framer: Framer,
    send: &F,
) -> Result<u64, Gone>
where
    F: Fn(SseEvent) -> Fut,
    Fut: std::future::Future<Output = Result<(), Gone>>,
{
    loop {
        let page = match runtime.event_log(seen.saturating_add(1), PAGE) {
            Ok(page) => page,
            Err(error) => {
                tracing::error!(%error, "a stream could not read the event log");
                return Err(Gone);
            }
        };
        let Some(end) = page.last().map(|l| l.seq) else {
            return Ok(seen);
        };
        for logged in &page {
            show(runtime, logged, framer, send).await?;
        }
        seen = end;
    }
}

/// Send `logged`'s frame, if it has one.
async fn show<F, Fut>(
    runtime: &Runtime,
    logged: &Logged,
    framer: Framer,
    send: &F,
) -> Result<(), Gone>
where
    F: Fn(SseEvent) -> Fut,
    Fut: std::future::Future<Output = Result<(), Gone>>,
{
    if let Some((name, data)) = framer(runtime, &logged.event) {
        let frame = SseEvent::default()
            .id(logged.seq.to_string())
            .event(name)
            .data(data.to_string());
        send(frame).await?;
    }
    Ok(())
}

/// The frame that says the client's place is older than the log keeps.
fn reset(requested: u64, oldest: u64) -> SseEvent {
    SseEvent::default().event("reset").data(
        json!({
            "requested": requested,
            "oldest": oldest,
            "message": format!("events after {requested} are no longer kept; the stream goes on from {oldest}"),
        })
        .to_string(),
    )
}

/// The frame that says the client's place is past the log's newest entry.
fn ahead(requested: u64, newest: u64) -> SseEvent {
    let message = match newest {
        0 => format!(
            "there is no event {requested}: the log is empty; the stream goes on from its first event"
        ),
        _ => format!(
            "there is no event {requested}: the log's newest is {newest}; the stream goes on after it"
        ),
    };
    SseEvent::default().event("reset").data(
        json!({
            "requested": requested,
            "newest": newest,
            "message": message,
        })
        .to_string(),
    )
}

/// A runtime in memory: live frames without ids; a resume is told it cannot be.
async fn feed_unlogged(
    runtime: Runtime,
    after: Option<u64>,
    framer: Framer,
    tx: mpsc::Sender<SseEvent>,
    mut live: broadcast::Receiver<Event>,
) -> Result<(), Gone> {
    if let Some(n) = after {
        let frame = SseEvent::default().event("reset").data(
            json!({
                "requested": n,
                "message": "this runtime keeps no event log; the stream starts now",
            })
            .to_string(),
        );
        tx.send(frame).await.map_err(|_| Gone)?;
    }
    loop {
        let received = tokio::select! {
            received = live.recv() => received,
            () = tx.closed() => return Err(Gone),
        };
        match received {
            Ok(event) => {
                if let Some((name, data)) = framer(&runtime, &event) {
                    let frame = SseEvent::default().event(name).data(data.to_string());
                    tx.send(frame).await.map_err(|_| Gone)?;
                }
            }
            Err(RecvError::Lagged(missed)) => {
                // Without a log there is nothing to catch up from: say so, never a gap
                // passed over in silence.
                let frame = SseEvent::default().event("reset").data(
                    json!({
                        "missed": missed,
                        "message": "this stream fell behind and lost frames; read the state again",
                    })
                    .to_string(),
                );
                tx.send(frame).await.map_err(|_| Gone)?;
            }
            Err(RecvError::Closed) => return Ok(()),
        }
    }
}
