//! Streams over real sockets: every frame's id is its event-log number, and a resume
//! has no gap and no duplicate, across disconnects, a lag and a server restart; an id
//! older than the log, or past its end, gets `reset`; the inbox stream never shows a
//! caller ask.

mod common;

use common::{ADMIN, ANSWER, Frame, Server, Stream, VISIT, builder};
use parkway::Runtime;
use parkway_http::Options;
use reqwest::Method;
use serde_json::json;

/// A runtime on `dir`, built with the test targets and `edit`.
async fn durable(
    dir: &std::path::Path,
    edit: impl FnOnce(parkway::Builder) -> parkway::Builder,
) -> Runtime {
    edit(builder().data_dir(dir)).build().await.expect("builds")
}

/// Run `echo` `n` times: two events each.
async fn echo(s: &Server, n: usize) {
    for _ in 0..n {
        let (status, _) = s
            .call(
                Method::POST,
                "/v1/targets/echo/run",
                VISIT,
                Some(json!({"subject": "e"})),
            )
            .await;
        assert_eq!(status, 200);
    }
}

/// The ids of `frames`, checked to run on from `after` with no gap and no duplicate.
fn consecutive(frames: &[Frame], after: u64) -> u64 {
    let mut last = after;
    for f in frames {
        let id = f.id.expect("every frame carries its id");
        assert_eq!(
            id,
            last + 1,
            "no gap and no duplicate after {last}: {frames:?}"
        );
        last = id;
    }
    last
}

#[tokio::test]
async fn the_event_stream_resumes_with_no_gap_across_disconnects_a_lag_and_a_restart() {
    let dir = tempfile::tempdir().expect("a directory");
    // A live channel of 4 events: a reader that falls behind must catch up from the log.
    let runtime = durable(dir.path(), |b| b.event_capacity(4)).await;
    let s = Server::with(runtime, Options::default()).await;
    echo(&s, 3).await;

    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(0)).await;
    let frames = stream.until(|f| f.id == Some(6)).await;
    let last = consecutive(&frames, 0);
    assert_eq!(frames[0].event, "run_started");
    assert_eq!(frames[0].data["event"], "run_started");
    drop(stream);

    // While nobody listens, and then while a listener reads nothing.
    echo(&s, 5).await;
    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(last)).await;
    echo(&s, 300).await;
    let frames = stream.until(|f| f.id == Some(last + 610)).await;
    let last = consecutive(&frames, last);
    drop(stream);

    // The process stops; the next one serves the same directory.
    s.stop().await;
    let runtime = durable(dir.path(), |b| b).await;
    let s = Server::with(runtime, Options::default()).await;
    echo(&s, 2).await;
    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(last)).await;
    let frames = stream.until(|f| f.id == Some(last + 4)).await;
    consecutive(&frames, last);
    drop(stream);

    // A bad id is named.
    let response = s
        .request(Method::GET, "/v1/events", ADMIN)
        .header("Last-Event-ID", "soon")
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 400);
    s.stop().await;
}

#[tokio::test]
async fn an_id_older_than_the_log_gets_a_reset_frame_then_the_oldest_kept() {
    let dir = tempfile::tempdir().expect("a directory");
    let runtime = durable(dir.path(), |b| b.event_log_entries(4)).await;
    let s = Server::with(runtime, Options::default()).await;
    echo(&s, 5).await;
    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(1)).await;
    let reset = stream.next().await;
    assert_eq!(reset.event, "reset");
    assert_eq!(reset.id, None);
    assert_eq!(reset.data["requested"], 1);
    assert_eq!(reset.data["oldest"], 7);
    let frames = stream.until(|f| f.id == Some(10)).await;
    consecutive(&frames, 6);

    // The log's window moves on; an id inside it resumes as usual.
    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(8)).await;
    echo(&s, 1).await;
    let frames = stream.until(|f| f.id == Some(12)).await;
    consecutive(&frames, 8);
    s.stop().await;
}

/// A client whose place is past the log's end (it read another server's log, or this
/// one's before a restore) used to get a healthy stream that stayed silent until the
/// numbering caught up with its id, skipping everything in between.
#[tokio::test]
async fn an_id_past_the_log_s_end_gets_a_reset_naming_the_newest_then_what_follows() {
    let dir = tempfile::tempdir().expect("a directory");
    let runtime = durable(dir.path(), |b| b).await;
    let s = Server::with(runtime, Options::default()).await;
    echo(&s, 3).await;
    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(50)).await;
    let reset = stream.next().await;
    assert_eq!(reset.event, "reset", "{reset:?}");
    assert_eq!(reset.id, None);
    assert_eq!(reset.data["requested"], 50);
    assert_eq!(reset.data["newest"], 6);
    echo(&s, 1).await;
    let frames = stream.until(|f| f.id == Some(8)).await;
    consecutive(&frames, 6);
    drop(stream);

    // The same on the inbox stream: what follows the newest entry comes next.
    let mut stream = Stream::open(&s, "/v1/interactions/stream", ANSWER, Some(9)).await;
    let reset = stream.next().await;
    assert_eq!(
        (reset.event.as_str(), &reset.data["newest"]),
        ("reset", &json!(8))
    );
    let (_, user) = s
        .call(
            Method::POST,
            "/v1/targets/user_asker/run",
            VISIT,
            Some(json!({"subject": "u"})),
        )
        .await;
    assert_eq!(user["status"], "suspended");
    let add = stream.next().await;
    assert_eq!((add.event.as_str(), add.id), ("add", Some(10)), "{add:?}");
    s.stop().await;
}

/// On a log that holds nothing yet, the newest entry is 0: the stream goes on from the
/// first event.
#[tokio::test]
async fn an_id_on_an_empty_log_gets_a_reset_naming_0_then_every_event() {
    let dir = tempfile::tempdir().expect("a directory");
    let runtime = durable(dir.path(), |b| b).await;
    let s = Server::with(runtime, Options::default()).await;
    let mut stream = Stream::open(&s, "/v1/events", ADMIN, Some(3)).await;
    let reset = stream.next().await;
    assert_eq!(reset.event, "reset", "{reset:?}");
    assert_eq!(reset.data["requested"], 3);
    assert_eq!(reset.data["newest"], 0);
    echo(&s, 2).await;
    let frames = stream.until(|f| f.id == Some(4)).await;
    consecutive(&frames, 0);
    s.stop().await;
}

/// A `Last-Event-ID` that is not ASCII was ignored: the stream started now, silently
/// dropping the client's place.
#[tokio::test]
async fn a_last_event_id_header_that_is_not_ascii_is_refused_naming_it() {
    let dir = tempfile::tempdir().expect("a directory");
    let runtime = durable(dir.path(), |b| b).await;
    let s = Server::with(runtime, Options::default()).await;
    for (path, token) in [("/v1/events", ADMIN), ("/v1/interactions/stream", ANSWER)] {
        let response = s
            .request(Method::GET, path, token)
            .header(
                "Last-Event-ID",
                reqwest::header::HeaderValue::from_bytes("4\u{e9}".as_bytes()).expect("a value"),
            )
            .send()
            .await
            .expect("answers");
        assert_eq!(response.status().as_u16(), 400, "{path}");
        let body: serde_json::Value = response.json().await.expect("json");
        assert_eq!(body["error"]["kind"], "invalid");
        assert_eq!(body["error"]["field"], "Last-Event-ID");
    }
    s.stop().await;
}

#[tokio::test]
async fn the_inbox_stream_shows_user_asks_only_and_resumes() {
    let dir = tempfile::tempdir().expect("a directory");
    let runtime = durable(dir.path(), |b| b).await;
    let s = Server::with(runtime, Options::default()).await;
    let mut stream = Stream::open(&s, "/v1/interactions/stream", ANSWER, Some(0)).await;
    // A caller ask, then a user ask: only the second appears.
    let (_, caller) = s
        .call(
            Method::POST,
            "/v1/targets/asker/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    let caller_id = caller["asks"][0]["id"].as_str().expect("an ask").to_owned();
    let (_, user) = s
        .call(
            Method::POST,
            "/v1/targets/user_asker/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    assert_eq!(user["status"], "suspended");
    let add = stream.next().await;
    assert_eq!(add.event, "add", "{add:?}");
    assert_eq!(add.data["frame"], "add");
    let user_id = add.data["item"]["id"].as_str().expect("an id").to_owned();
    assert_ne!(user_id, caller_id);
    assert_eq!(add.data["item"]["answer_format"], "confirm");
    let added_at = add.id.expect("an id");

    // The caller ask is resolved too: still nothing about it.
    let (status, _) = s
        .call(
            Method::POST,
            &format!("/v1/subjects/s/parked/{caller_id}/resume"),
            VISIT,
            Some(json!("ok")),
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = s
        .call(
            Method::POST,
            &format!("/v1/interactions/{user_id}/answer"),
            ANSWER,
            Some(json!({"answer": true})),
        )
        .await;
    assert_eq!(status, 200);
    let answered = stream.next().await;
    assert_eq!(
        (answered.event.as_str(), answered.data["id"].as_str()),
        ("answered", Some(user_id.as_str()))
    );
    drop(stream);

    // Resumed after the add: the answer, and nothing about the caller ask.
    let mut stream = Stream::open(&s, "/v1/interactions/stream", ANSWER, Some(added_at)).await;
    let again = stream.next().await;
    assert_eq!(again, answered);
    let frames: Vec<Frame> = vec![add, answered];
    assert!(
        frames
            .iter()
            .all(|f| !f.data.to_string().contains(&caller_id))
    );
    s.stop().await;
}

#[tokio::test]
async fn streams_past_the_server_s_most_are_refused_until_one_closes() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.max_streams = 1;
    let s = Server::with(runtime, options).await;
    let first = Stream::open(&s, "/v1/events", ADMIN, None).await;
    let refused = s
        .request(Method::GET, "/v1/interactions/stream", ANSWER)
        .send()
        .await
        .expect("answers");
    assert_eq!(refused.status().as_u16(), 503);
    assert!(refused.headers().contains_key("retry-after"));
    let body: serde_json::Value = refused.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "too_many_streams");
    drop(first);
    // Its slot is free once the server sees it closed.
    let deadline = tokio::time::Instant::now() + common::BOUND;
    loop {
        let again = s
            .request(Method::GET, "/v1/events", ADMIN)
            .send()
            .await
            .expect("answers");
        if again.status().as_u16() == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the slot came free");
        tokio::task::yield_now().await;
    }
    s.stop().await;
}

#[tokio::test]
async fn a_graceful_shutdown_ends_the_open_streams_and_the_server_returns() {
    let runtime = builder().build().await.expect("builds");
    let options = Options::default();
    let shutdown = options.shutdown.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    let app = parkway_http::router(runtime.clone(), common::tokens(), options.clone());
    let served = tokio::spawn(async move { parkway_http::serve(listener, app, &options).await });
    let client = reqwest::Client::new();
    let mut events = client
        .get(format!("{url}/v1/events"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(events.status(), 200);
    shutdown.begin();
    // The stream ends (keep-alive comments may come first), then the server returns.
    let ended = async { while let Ok(Some(_)) = events.chunk().await {} };
    tokio::time::timeout(common::BOUND, ended)
        .await
        .expect("the stream ends within the bound");
    tokio::time::timeout(common::BOUND, served)
        .await
        .expect("the server returns within the bound")
        .expect("the server task ends");
    runtime.shutdown().await;
}
