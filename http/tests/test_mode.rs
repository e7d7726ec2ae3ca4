//! The test mode's endpoints: only on `test_router`, admin scope only, and every bad
//! input refused by name.

mod common;

use common::{ADMIN, Server, VISIT, builder, tokens};
use parkway::ManualClock;
use parkway::sim::Notes;
use parkway_http::{Options, TestMode, test_router};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn the_clock_and_settle_exist_in_test_mode_only_and_refuse_bad_input() {
    // A plain router has neither.
    let plain = Server::start().await;
    for path in ["/v1/test/clock", "/v1/test/settle"] {
        let (status, _) = plain
            .call(Method::POST, path, ADMIN, Some(json!({"advance": "1s"})))
            .await;
        assert_eq!(status, 404, "{path}");
    }
    plain.stop().await;

    let clock = ManualClock::default();
    let runtime = builder()
        .clock(clock.clone())
        .build()
        .await
        .expect("builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("http://{}", listener.local_addr().expect("bound"));
    let app = test_router(
        runtime.clone(),
        tokens(),
        Options::default(),
        TestMode {
            clock: clock.clone(),
            notes: Notes::default(),
        },
    );
    let served = tokio::spawn(async move { axum::serve(listener, app).await });
    let client = reqwest::Client::new();
    let call = |path: &str, token: &str, body: Option<serde_json::Value>| {
        let mut request = client.post(format!("{url}{path}")).bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        async move {
            let response = request.send().await.expect("answers");
            let status = response.status().as_u16();
            (
                status,
                response.json::<serde_json::Value>().await.expect("JSON"),
            )
        }
    };

    let (status, body) = call("/v1/test/clock", ADMIN, Some(json!({"advance": "4m"}))).await;
    assert_eq!(
        (status, &body["now"]),
        (200, &json!("2026-01-01T00:04:00Z"))
    );
    // Another scope is refused; bad durations and bodies are named.
    assert_eq!(
        call("/v1/test/clock", VISIT, Some(json!({"advance": "1s"})))
            .await
            .0,
        403
    );
    let (status, body) = call("/v1/test/clock", ADMIN, Some(json!({"advance": "banana"}))).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("advance")),
        "{body}"
    );
    let (status, _) = call("/v1/test/clock", ADMIN, Some(json!({"advance": 5}))).await;
    assert_eq!(status, 400);
    // A move past the clock's last instant is refused, naming the field, and moves
    // nothing (it once saturated at the end of chrono's range, where timers spin).
    let (_, before) = call("/v1/test/clock", ADMIN, Some(json!({"advance": "0s"}))).await;
    let (status, body) = call(
        "/v1/test/clock",
        ADMIN,
        Some(json!({"advance": "99999999999y"})),
    )
    .await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("advance")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("past 9999-12-31T23:59:59.999999999Z"),
        "{body}"
    );
    let (_, after) = call("/v1/test/clock", ADMIN, Some(json!({"advance": "0s"}))).await;
    assert_eq!(before["now"], after["now"], "the clock did not move");

    let (status, body) = call("/v1/test/settle", ADMIN, None).await;
    assert_eq!((status, &body["settled"]), (200, &json!(true)), "{body}");
    let (status, body) = call("/v1/test/settle?after=-1", ADMIN, None).await;
    assert_eq!(
        (status, &body["error"]["field"]),
        (400, &json!("after")),
        "{body}"
    );
    // The last event number there is: nothing after it, and no overflow.
    let (status, body) = call("/v1/test/settle?after=18446744073709551615", ADMIN, None).await;
    assert_eq!(
        (status, &body["last_event_id"]),
        (200, &json!(null)),
        "{body}"
    );

    served.abort();
    runtime.shutdown().await;
}
