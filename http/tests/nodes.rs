//! Nodes sharing a PostgreSQL database answer for each other: a request for a subject
//! another node serves is sent on to it and its answer given back. Needs a server:
//! `PARKWAY_TEST_POSTGRES_URL` (`.ci/test` starts a throwaway one and sets it).

mod common;

use std::time::{Duration, Instant};

use common::{ADMIN, Server, VISIT, builder};
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
    Server::on(listener, runtime, Options::default()).await
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
