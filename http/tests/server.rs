//! `parkway_http::serve` over real sockets: slow and idle clients cannot lock others out
//! (a head has its timeout, an idle connection its own, the open connections a cap that
//! sheds the idle ones first), streams are never cut as idle, and the heads hyper
//! refuses itself are answered with the face's JSON error body.
//!
//! The timeouts here are short and every wait is an upper bound ([`BOUND`]), never a
//! sleep: a test waits for the server to act, not for time to pass.

mod common;

use std::time::Duration;

use common::{ADMIN, BOUND, Server, Stream, VISIT, builder};
use parkway_http::Options;
use reqwest::Method;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The server's address, for raw sockets.
fn address(s: &Server) -> String {
    s.url.trim_start_matches("http://").to_owned()
}

/// Read until the server closes the connection, within [`BOUND`]: what it sent. A reset
/// counts as closed.
async fn until_closed(socket: &mut TcpStream) -> Vec<u8> {
    let mut read = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(BOUND, socket.read(&mut chunk))
            .await
            .expect("the server closes the connection within the bound");
        match n {
            Ok(0) | Err(_) => return read,
            Ok(n) => read.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The value of the metric `line` (its name and labels) in `/metrics`.
async fn metric(s: &Server, line: &str) -> u64 {
    let (status, text) = s.call(Method::GET, "/metrics", ADMIN, None).await;
    assert_eq!(status, 200);
    let text = text.as_str().expect("text").to_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{line} in:\n{text}"))
}

/// Before the cap, a thousand sockets that never sent a byte held a thousand file
/// descriptors for good, and `/healthz` could not be reached. Past the cap, the socket
/// waiting longest with no request is closed for the newcomer: the head timeout is an
/// hour here, so nothing else frees a slot.
#[tokio::test]
async fn idle_sockets_past_the_cap_are_shed_oldest_first_and_a_request_is_still_answered() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.max_connections = 8;
    options.header_read_timeout = Duration::from_secs(3600);
    let s = Server::with(runtime, options).await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(TcpStream::connect(address(&s)).await.expect("connects"));
    }
    let health = s
        .client
        .get(format!("{}/healthz", s.url))
        .send()
        .await
        .expect("answers");
    assert_eq!(health.status().as_u16(), 200);
    // 21 connections for 8 slots: the 13 oldest were closed, in order.
    for socket in &mut idle[..13] {
        assert!(until_closed(socket).await.is_empty(), "closed unanswered");
    }
    let evicted = metric(&s, "parkway_connections_shed_total{how=\"evicted\"}").await;
    assert!(evicted >= 13, "{evicted} evicted");
    assert_eq!(metric(&s, "parkway_connections_limit").await, 8);
    assert!(metric(&s, "parkway_connections_open").await <= 8);
    // The newest sockets are still open: a request on one is answered.
    let socket = idle.last_mut().expect("a socket");
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("writes");
    let answer = until_closed(socket).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    s.stop().await;
}

/// When every open connection has a request in flight (here, streams), a new one is
/// closed at once rather than queued forever, and counted.
#[tokio::test]
async fn at_the_cap_with_every_connection_busy_a_new_one_is_refused_and_counted() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.max_connections = 2;
    let s = Server::with(runtime, options).await;
    let first = Stream::open(&s, "/v1/events", ADMIN, None).await;
    let _second = Stream::open(&s, "/v1/events", ADMIN, None).await;
    let mut third = TcpStream::connect(address(&s)).await.expect("connects");
    let _ = third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    assert!(
        until_closed(&mut third).await.is_empty(),
        "closed unanswered"
    );
    drop(first);
    // A slot is free once the server sees the stream's connection closed.
    let deadline = tokio::time::Instant::now() + BOUND;
    let text = loop {
        let answer = s.request(Method::GET, "/metrics", ADMIN).send().await;
        if let Ok(answer) = answer
            && answer.status().as_u16() == 200
        {
            break answer.text().await.expect("text");
        }
        assert!(tokio::time::Instant::now() < deadline, "a slot came free");
        tokio::task::yield_now().await;
    };
    let refused: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("parkway_connections_shed_total{how=\"refused\"}")?
                .trim()
                .parse()
                .ok()
        })
        .expect("the refused count");
    assert!(refused >= 1, "{text}");
    s.stop().await;
}

/// A socket that sends no head, or half of one, was held forever: its first request
/// had no timeout at all.
#[tokio::test]
async fn a_head_not_sent_whole_in_time_is_closed_even_on_a_new_connection() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.header_read_timeout = Duration::from_millis(200);
    let s = Server::with(runtime, options).await;
    let mut silent = TcpStream::connect(address(&s)).await.expect("connects");
    let mut half = TcpStream::connect(address(&s)).await.expect("connects");
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("writes");
    assert!(until_closed(&mut silent).await.is_empty());
    assert!(until_closed(&mut half).await.is_empty());
    let timed_out = metric(&s, "parkway_connections_timed_out_total{phase=\"head\"}").await;
    assert!(timed_out >= 2, "{timed_out}");
    s.stop().await;
}

/// A kept-alive connection is closed once idle past its limit; a stream outlives that
/// limit many times over, as it is a request in flight, never idle.
#[tokio::test]
async fn an_idle_connection_is_closed_but_a_stream_is_never_idle() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.idle_timeout = Duration::from_millis(200);
    // A stream's keep-alive comment comes after five idle timeouts.
    options.keep_alive = Duration::from_secs(1);
    let s = Server::with(runtime, options).await;

    let mut socket = TcpStream::connect(address(&s)).await.expect("connects");
    socket
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .expect("writes");
    let answer = until_closed(&mut socket).await;
    let text = String::from_utf8_lossy(&answer);
    assert!(
        text.starts_with("HTTP/1.1 200"),
        "answered, then closed: {text}"
    );

    let mut stream = s
        .request(Method::GET, "/v1/events", ADMIN)
        .timeout(Duration::from_secs(3600))
        .send()
        .await
        .expect("the stream opens");
    assert_eq!(stream.status().as_u16(), 200);
    let comment = tokio::time::timeout(BOUND, stream.chunk())
        .await
        .expect("a keep-alive comment within the bound")
        .expect("the stream reads")
        .expect("the stream is open");
    assert!(comment.starts_with(b":"), "{comment:?}");
    let (status, _) = s
        .call(
            Method::POST,
            "/v1/targets/echo/run",
            VISIT,
            Some(json!({"subject": "e"})),
        )
        .await;
    assert_eq!(status, 200);
    let frame = tokio::time::timeout(BOUND, stream.chunk())
        .await
        .expect("a frame within the bound")
        .expect("the stream reads")
        .expect("the stream is still open");
    assert!(
        String::from_utf8_lossy(&frame).contains("run_started"),
        "{frame:?}"
    );
    let idle = metric(&s, "parkway_connections_timed_out_total{phase=\"idle\"}").await;
    assert!(idle >= 1, "{idle}");
    s.stop().await;
}

/// The body of an answer, as JSON.
fn json_body(answer: &[u8]) -> Value {
    let text = String::from_utf8_lossy(answer);
    let (_, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// hyper answers a head it cannot take with a bare status line, before any router
/// runs: those answers carried no body, unlike every other error of the face.
#[tokio::test]
async fn heads_too_large_uris_too_long_and_broken_requests_get_the_json_error_body() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.max_head_bytes = 16 << 10;
    let s = Server::with(runtime, options).await;

    let big = "x".repeat(20 << 10);
    let answer = s
        .client
        .get(format!("{}/healthz", s.url))
        .header("X-Big", big.as_str())
        .send()
        .await
        .expect("answers");
    assert_eq!(answer.status().as_u16(), 431);
    assert_eq!(answer.headers()["content-type"], "application/json");
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "head_too_large", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("16384")),
        "{body}"
    );

    // Many headers, each small.
    let mut socket = TcpStream::connect(address(&s)).await.expect("connects");
    let mut head = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for i in 0..120 {
        head.push_str(&format!("X-H{i}: {i}\r\n"));
    }
    head.push_str("\r\n");
    socket.write_all(head.as_bytes()).await.expect("writes");
    let answer = until_closed(&mut socket).await;
    assert!(answer.starts_with(b"HTTP/1.1 431"));
    assert_eq!(json_body(&answer)["error"]["kind"], "head_too_large");

    // A URI over the face's cap (8 KiB), in a head under hyper's.
    let long = format!("{}/healthz?q={}", s.url, "y".repeat(9 << 10));
    let answer = s.client.get(long).send().await.expect("answers");
    assert_eq!(answer.status().as_u16(), 414);
    let body: Value = answer.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "uri_too_long", "{body}");

    // Not HTTP at all.
    let mut socket = TcpStream::connect(address(&s)).await.expect("connects");
    socket
        .write_all(b"GET /healthz NOT-HTTP\r\n\r\n")
        .await
        .expect("writes");
    let answer = until_closed(&mut socket).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 400"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(json_body(&answer)["error"]["kind"], "invalid");

    // The server goes on.
    let (status, _) = s.call(Method::GET, "/v1/doors", ADMIN, None).await;
    assert_eq!(status, 200);
    s.stop().await;
}

/// A URI over hyper's own limit (64 KiB) is answered by hyper, before the router: in
/// the face's JSON shape too.
#[tokio::test]
async fn a_uri_over_hyper_s_own_limit_gets_the_json_error_body() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.max_head_bytes = 256 << 10;
    options.max_uri_bytes = 1 << 20;
    let s = Server::with(runtime, options).await;
    // Too long for a client's URL type too: over a raw socket.
    let mut socket = TcpStream::connect(address(&s)).await.expect("connects");
    let head = format!(
        "GET /healthz?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "y".repeat(70 << 10)
    );
    socket.write_all(head.as_bytes()).await.expect("writes");
    let answer = until_closed(&mut socket).await;
    assert!(answer.starts_with(b"HTTP/1.1 414"), "{}", answer.len());
    assert_eq!(json_body(&answer)["error"]["kind"], "uri_too_long");
    s.stop().await;
}

/// The head's cap is exact: hyper reads in whatever chunks come and took heads half as
/// large again as its buffer's limit (a 100 KB head passed a 64 KiB cap); the server now
/// lets it read no more of a head than the cap, so one just under it is served and one
/// just over is a 431, however the client writes it.
#[tokio::test]
async fn a_head_is_held_to_its_cap_to_the_byte() {
    let runtime = builder().build().await.expect("builds");
    let mut options = Options::default();
    options.max_head_bytes = 64 << 10;
    let s = Server::with(runtime, options).await;
    let head = |pad: usize| {
        let start = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ";
        let end = "\r\n\r\n";
        let fill = pad - start.len() - end.len();
        format!("{start}{}{end}", "p".repeat(fill)).into_bytes()
    };
    for (bytes, status) in [
        ((64 << 10) - 64, "HTTP/1.1 200"),
        ((64 << 10) + 64, "HTTP/1.1 431"),
        (70_000, "HTTP/1.1 431"),
        (100_000, "HTTP/1.1 431"),
    ] {
        let mut socket = TcpStream::connect(address(&s)).await.expect("connects");
        socket.write_all(&head(bytes)).await.expect("writes");
        let mut answer = vec![0u8; 12];
        tokio::time::timeout(BOUND, socket.read_exact(&mut answer))
            .await
            .expect("answered within the bound")
            .expect("reads");
        assert!(
            answer.starts_with(status.as_bytes()),
            "a head of {bytes} bytes: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    s.stop().await;
}
