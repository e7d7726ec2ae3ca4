//! Nodes sharing a PostgreSQL database answer for each other: a request for a subject
//! another node serves is sent on to it and its answer given back. Needs a server:
//! `PARKWAY_TEST_POSTGRES_URL` (`.ci/test` starts a throwaway one and sets it).

mod common;

use std::time::{Duration, Instant};

use common::{ADMIN, ANSWER, Frame, Server, Stream, VISIT, builder};
use parkway::{Ids, RunStatus, Runtime, Start};
use parkway_http::Options;
use reqwest::Method;
use serde_json::json;

/// The URL of a fresh schema of the test server.
async fn database() -> String {
    let url = std::env::var("PARKWAY_TEST_POSTGRES_URL").expect(
        "PARKWAY_TEST_POSTGRES_URL is not set: these tests need a PostgreSQL server \
         (`bash .ci/test` starts a throwaway one and sets it)",
    );
    let schema = format!(
        "parkway_http_{}_{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("a schema is made");
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

/// Node `name` on `url`, served on a port of its own, which it gives the others.
async fn node(url: &str, name: &str) -> Server {
    node_with(url, name, Options::default()).await
}

/// [`node`], served with `options`.
async fn node_with(url: &str, name: &str, options: Options) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let address = format!("http://{}", listener.local_addr().expect("bound"));
    let runtime = builder()
        .ids(Ids::random(rand::random()))
        .postgres(url)
        .node(name)
        .lease(Duration::from_secs(1))
        .node_address(&address)
        .build()
        .await
        .expect("the node opens the database");
    Server::on(listener, runtime, options).await
}

/// A subject whose slot is `slot`.
fn subject_in(slot: u16) -> String {
    (0..)
        .map(|n| format!("s{n}"))
        .find(|name| Runtime::slot_of(name) == slot)
        .unwrap()
}

/// A request for a subject of a slot handed over to another node is sent on there,
/// whichever node it reaches, with its token and body; a request another node sent on
/// is not sent on again. Each node counts what it sent on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_another_node_s_subject_is_answered_by_that_node() {
    let url = database().await;
    let a = node(&url, "a").await;
    // The highest slot is the first handed over to a node that joins.
    let subject = subject_in(1023);
    let parked = a.runtime.run(Start::new(&subject, "asker")).await.unwrap();
    assert_eq!(parked.status, RunStatus::Parked);
    let id = parked.asks.unwrap()[0].id.clone();
    let b = node(&url, "b").await;
    let path = format!("/v1/subjects/{subject}/parked");
    // Once a has handed the slot over, a's answer is b's (until a knows where the slot
    // went, a 503 to try again).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if a.runtime.list(&subject).await.is_err() {
            let (status, body) = a.call(Method::GET, &path, VISIT, None).await;
            if status == 200 {
                assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
                break;
            }
            assert_eq!((status, &body["error"]["kind"]), (503, &json!("not_owner")));
        }
        assert!(Instant::now() < deadline, "never sent on");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let metrics = a.call(Method::GET, "/metrics", ADMIN, None).await.1;
    let metrics = metrics.as_str().unwrap();
    assert!(metrics.contains("parkway_forwarded_total "), "{metrics}");
    assert!(
        !metrics.contains("parkway_forwarded_total 0\n"),
        "{metrics}"
    );
    // A resume through a, sent on with its body, resolves the ask once, at b.
    let (status, body) = a
        .call(
            Method::POST,
            &format!("{path}/{id}/resume"),
            VISIT,
            Some(json!({"payload": "yes"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = b
        .call(
            Method::POST,
            &format!("{path}/{id}/resume"),
            VISIT,
            Some(json!({"payload": "again"})),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    // Without a token, a refuses it itself.
    let refused = a
        .client
        .get(format!("{}{path}", a.url))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    // A request b sent on is not sent on again: a refuses it as not its own.
    let marked = a
        .request(Method::GET, &path, VISIT)
        .header("x-parkway-forwarded", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(marked.status().as_u16(), 503);
    assert!(marked.headers().contains_key("retry-after"));
    a.stop().await;
    b.stop().await;
}

/// A user ask is answered through any node: its id names its subject's slot, so a node
/// that never held it refuses the answer as another node's and sends it on there, where
/// it is taken once; that node's inbox stream shows it added and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_ask_is_answered_through_any_node() {
    let url = database().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    // The highest slot is the first handed over to a node that joins.
    let subject = subject_in(1023);
    let deadline = Instant::now() + Duration::from_secs(30);
    while b.runtime.list(&subject).await.is_err() {
        assert!(Instant::now() < deadline, "never handed over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let parked = b
        .runtime
        .run(Start::new(&subject, "user_asker"))
        .await
        .unwrap();
    let id = b.runtime.inbox(1, None).unwrap().items[0].id.clone();
    assert!(a.runtime.inbox(1, None).unwrap().items.is_empty());
    assert_eq!(Runtime::slot_of(&subject), 1023);
    assert!(id.starts_with("i-3ff"), "the id names its slot: {id}");
    // a never held it; it waits until a knows where the slot is served.
    let path = format!("/v1/interactions/{id}/answer");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = a
            .call(Method::POST, &path, ANSWER, Some(json!({"answer": true})))
            .await;
        if status == 200 {
            break;
        }
        assert_eq!(
            (status, &body["error"]["kind"]),
            (503, &json!("not_owner")),
            "{body}"
        );
        assert!(Instant::now() < deadline, "never sent on: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    // a's inbox stream shows the ask b holds: added with its item, then answered.
    let mut inbox = Stream::open(&a, "/v1/interactions/stream", ANSWER, Some(0)).await;
    let frames = inbox
        .until(|f| f.event == "answered" && f.data["id"] == json!(id))
        .await;
    let added: Vec<&Frame> = frames
        .iter()
        .filter(|f| f.event == "add" && f.data["item"]["id"] == json!(id))
        .collect();
    assert_eq!(added.len(), 1, "{frames:?}");
    assert_eq!(added[0].data["item"]["question"], json!("ship it?"));
    assert_eq!(added[0].data["item"]["subject"], json!(subject));
    let record = loop {
        match b.runtime.try_record(&parked.run_id).await {
            Ok(Some(record)) if record.status == RunStatus::Succeeded => break record,
            read => assert!(Instant::now() < deadline, "not finished: {read:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(record.result, Some(json!({"answer": true})));
    let (status, body) = a
        .call(Method::POST, &path, ANSWER, Some(json!({"answer": false})))
        .await;
    assert_eq!(status, 409, "answered once: {body}");
    a.stop().await;
    b.stop().await;
}

/// A node reads a request's body whole before it knows whether to send it on: a client
/// that sends its head and then trickles nothing is cut off with a 408 at the request's
/// time, as everywhere else, and holds nothing past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_comes_is_cut_off_at_the_request_s_time() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = database().await;
    let mut options = Options::default();
    options.request_timeout = Duration::from_secs(1);
    let a = node_with(&url, "a", options).await;
    let address = a.url.trim_start_matches("http://").to_string();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let head = format!(
        "POST /v1/subjects/s/parked/i-1/resume HTTP/1.1\r\nHost: {address}\r\n\
         Authorization: Bearer {VISIT}\r\nContent-Type: application/json\r\n\
         Content-Length: 100\r\n\r\n{{"
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(20), socket.read(&mut answer))
        .await
        .expect("answered within the bound")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..read]).to_string();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    a.stop().await;
}

/// A hook fire visits each subject where it is served: a visit refused on the node
/// that took the fire, as another node's, is sent on to that node as a visit of the
/// hook by name, and answered as it answered; the fire's delivery id, kept once every
/// visit was made, is seen by every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_fire_visits_each_subject_on_the_node_that_serves_it() {
    let url = database().await;
    let a = node(&url, "a").await;
    let hook = json!({"kind": "hook", "topic": "deploys", "target": "asker",
        "subject_expr": ".subject", "start_expr": "{}"});
    let (status, body) = a
        .call(Method::PUT, "/v1/doors/deploys", ADMIN, Some(hook))
        .await;
    assert_eq!(status, 201, "{body}");
    let b = node(&url, "b").await;
    // The highest slot is the first handed over; the lowest stays a's.
    let (theirs, ours) = (subject_in(1023), subject_in(0));
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.runtime.served_at(1023).is_none() || b.runtime.list(&theirs).await.is_err() {
        assert!(Instant::now() < deadline, "never handed over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let fire = |node: &Server, subject: &str| {
        node.request(Method::POST, "/v1/hooks/deploys", VISIT)
            .header("Webhook-Id", format!("evt-{subject}"))
            .json(&json!({"subject": subject}))
            .send()
    };
    for subject in [&theirs, &ours] {
        let fired = fire(&a, subject).await.unwrap();
        assert_eq!(fired.status().as_u16(), 202);
        let body: serde_json::Value = fired.json().await.unwrap();
        let hook = &body["hooks"][0];
        assert_eq!(hook["subject"], json!(subject), "{body}");
        assert_eq!(hook["visit"]["action"], "started", "{body}");
        let server = if subject == &theirs { &b } else { &a };
        let parked = server.runtime.list(subject).await.unwrap();
        assert_eq!(parked.len(), 1, "{subject}: {parked:?}");
        // The other node has seen the delivery.
        let again = fire(&b, subject).await.unwrap();
        assert_eq!(again.status().as_u16(), 200);
        let body: serde_json::Value = again.json().await.unwrap();
        assert_eq!(body["status"], "already_seen", "{body}");
    }
    a.stop().await;
    b.stop().await;
}

/// The inbox's list served by any node holds every node's pending user asks, in the
/// order they were asked, paged across them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_lists_every_node_s_asks() {
    let url = database().await;
    let a = node(&url, "a").await;
    let b = node(&url, "b").await;
    // The highest slot is the first handed over; the lowest stays a's.
    let (theirs, ours) = (subject_in(1023), subject_in(0));
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.runtime.served_at(1023).is_none()
        || b.runtime.list(&theirs).await.is_err()
        || b.runtime.served_at(0).is_none()
    {
        assert!(Instant::now() < deadline, "never handed over");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut ids = Vec::new();
    for (server, subject) in [(&a, &ours), (&b, &theirs), (&a, &ours)] {
        let record = server
            .runtime
            .run_tool(Start::new(subject, "user_asker"))
            .await
            .unwrap();
        let id = record
            .suspension
            .expect("suspended on its user ask")
            .interactions[0]
            .clone();
        ids.push(id);
    }
    for server in [&a, &b] {
        let (status, page) = server
            .call(Method::GET, "/v1/interactions", ANSWER, None)
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["total"], 3, "{page}");
        let listed: Vec<&str> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["id"].as_str().unwrap())
            .collect();
        assert_eq!(listed, ids, "in the order asked: {page}");
        // Paged across the nodes.
        let (_, second) = server
            .call(
                Method::GET,
                "/v1/interactions?page=2&page_size=2",
                ANSWER,
                None,
            )
            .await;
        assert_eq!(second["items"][0]["id"], json!(ids[2]), "{second}");
        assert_eq!(second["items"].as_array().map(Vec::len), Some(1));
        assert_eq!(second.get("next_page"), None, "{second}");
        let (_, first) = server
            .call(
                Method::GET,
                "/v1/interactions?page=1&page_size=2",
                ANSWER,
                None,
            )
            .await;
        assert_eq!(first["next_page"], 2, "{first}");
    }
    // A node asked by another lists its own only.
    let own = a
        .request(Method::GET, "/v1/interactions", ANSWER)
        .header("x-parkway-forwarded", "1")
        .send()
        .await
        .unwrap();
    let own: serde_json::Value = own.json().await.unwrap();
    assert_eq!(own["total"], 2, "{own}");
    a.stop().await;
    b.stop().await;
}
