//! The HTTP face over real sockets: tokens and scopes, doors, visits, parked sets, runs,
//! the inbox, and bad input.

mod common;

use common::{ADMIN, ANSWER, Server, VISIT};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn health_is_open_and_everything_else_needs_a_token_with_its_scope() {
    let s = Server::start().await;
    let health = s
        .client
        .get(format!("{}/healthz", s.url))
        .send()
        .await
        .expect("answers");
    assert_eq!(health.status().as_u16(), 200);
    let ready = s
        .client
        .get(format!("{}/readyz", s.url))
        .send()
        .await
        .expect("answers");
    assert_eq!(ready.status().as_u16(), 200);

    let bare = s
        .client
        .get(format!("{}/v1/doors", s.url))
        .send()
        .await
        .expect("answers");
    assert_eq!(bare.status().as_u16(), 401);
    assert_eq!(bare.headers()["www-authenticate"], "Bearer");
    let body: Value = bare.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "unauthorized");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("a bearer token is needed"), "{said}");

    // A wrong token is told so, not that a token is needed.
    let (status, body) = s
        .call(Method::GET, "/v1/doors", "not-a-token-at-all-0000", None)
        .await;
    assert_eq!(status, 401);
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("not one this server accepts"), "{said}");
    let (status, body) = s.call(Method::GET, "/v1/doors", VISIT, None).await;
    assert_eq!(status, 403);
    assert_eq!(body["error"]["scope"], "admin");
    let (status, _) = s.call(Method::GET, "/v1/interactions", VISIT, None).await;
    assert_eq!(status, 403);
    let (status, _) = s
        .call(
            Method::POST,
            "/v1/targets/echo/run",
            ANSWER,
            Some(json!({"subject": "s"})),
        )
        .await;
    assert_eq!(status, 403);
    let (status, _) = s.call(Method::GET, "/v1/doors", ADMIN, None).await;
    assert_eq!(status, 200);
    s.stop().await;
}

/// `Authorization: bearer <token>` was refused with 401: the scheme is case-insensitive
/// (RFC 9110), so a client that writes it in lower case must be let in.
#[tokio::test]
async fn the_bearer_scheme_is_matched_whatever_its_case() {
    let s = Server::start().await;
    for scheme in ["bearer", "BEARER", "Bearer", "beaRer"] {
        let response = s
            .client
            .get(format!("{}/v1/doors", s.url))
            .header("Authorization", format!("{scheme}  {ADMIN}"))
            .send()
            .await
            .expect("answers");
        assert_eq!(response.status().as_u16(), 200, "{scheme}");
    }
    for refused in [
        format!("Basic {ADMIN}"),
        format!("Bearer{ADMIN}"),
        ADMIN.to_owned(),
    ] {
        let response = s
            .client
            .get(format!("{}/v1/doors", s.url))
            .header("Authorization", refused.as_str())
            .send()
            .await
            .expect("answers");
        assert_eq!(response.status().as_u16(), 401, "{refused}");
    }
    s.stop().await;
}

#[tokio::test]
async fn doors_are_saved_listed_read_and_deleted_and_every_problem_is_named() {
    let s = Server::start().await;
    let broken =
        json!({"kind": "route", "target": "asker", "resume_expr": "][", "start_expr": "{"});
    let (status, body) = s
        .call(Method::PUT, "/v1/doors/chat", ADMIN, Some(broken))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["kind"], "invalid");
    let problems = body["error"]["problems"].as_array().expect("problems");
    assert_eq!(
        problems.len(),
        2,
        "both expressions are named: {problems:?}"
    );

    let door = json!({"kind": "route", "target": "asker", "start_expr": "{}",
        "resume_expr": "if .reply != null and ($parked | length) > 0 then {id: $parked[0].id, payload: .reply} else null end"});
    let (status, saved) = s
        .call(Method::PUT, "/v1/doors/chat", ADMIN, Some(door.clone()))
        .await;
    assert_eq!(status, 201, "{saved}");
    assert_eq!(saved["name"], "chat");
    let (status, _) = s
        .call(Method::PUT, "/v1/doors/chat", ADMIN, Some(door))
        .await;
    assert_eq!(status, 200, "a replacement");
    let (status, other) = s
        .call(
            Method::PUT,
            "/v1/doors/chat",
            ADMIN,
            Some(json!({"name": "other", "kind": "route", "target": "asker"})),
        )
        .await;
    assert_eq!(
        (status, other["error"]["field"].clone()),
        (400, json!("name"))
    );

    let (_, listed) = s.call(Method::GET, "/v1/doors", ADMIN, None).await;
    assert_eq!(listed["doors"].as_array().map(Vec::len), Some(1));
    let (status, read) = s.call(Method::GET, "/v1/doors/chat", ADMIN, None).await;
    assert_eq!((status, read["target"].clone()), (200, json!("asker")));
    let (status, _) = s.call(Method::DELETE, "/v1/doors/chat", ADMIN, None).await;
    assert_eq!(status, 204);
    let (status, body) = s.call(Method::DELETE, "/v1/doors/chat", ADMIN, None).await;
    assert_eq!(
        (status, body["error"]["kind"].clone()),
        (404, json!("unknown_door"))
    );
    let (status, _) = s.call(Method::GET, "/v1/doors/chat", ADMIN, None).await;
    assert_eq!(status, 404);
    s.stop().await;
}

#[tokio::test]
async fn a_route_visit_parks_at_once_and_a_second_resolution_is_a_conflict() {
    let s = Server::start().await;
    let door = json!({"kind": "route", "target": "asker", "start_expr": "{}",
        "resume_expr": "if .reply != null and ($parked | length) > 0 then {id: $parked[0].id, payload: .reply} else null end"});
    let (status, _) = s
        .call(Method::PUT, "/v1/doors/chat", ADMIN, Some(door))
        .await;
    assert_eq!(status, 201);

    let (status, _) = s
        .call(
            Method::POST,
            "/v1/routes/chat/visit",
            VISIT,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 400, "no subject");
    let (status, visit) = s
        .call(
            Method::POST,
            "/v1/routes/chat/visit?subject=t1",
            VISIT,
            Some(json!({"hello": 1})),
        )
        .await;
    assert_eq!(status, 200, "{visit}");
    assert_eq!(visit["action"], "started");
    assert_eq!(visit["record"]["status"], "parked");
    let id = visit["record"]["asks"][0]["id"]
        .as_str()
        .expect("an ask")
        .to_owned();

    let (status, parked) = s
        .call(Method::GET, "/v1/subjects/t1/parked", VISIT, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(parked[0]["id"], json!(id));

    let path = format!("/v1/subjects/t1/parked/{id}/resume");
    let (status, resumed) = s.call(Method::POST, &path, VISIT, Some(json!("yes"))).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "succeeded");
    assert_eq!(resumed["result"], json!({"answer": "yes"}));

    let (status, again) = s.call(Method::POST, &path, VISIT, Some(json!("no"))).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["kind"], "already_resolved");
    assert_eq!(again["error"]["how"], "resumed");
    assert!(again["error"]["at"].is_string());

    let (status, unknown) = s
        .call(
            Method::POST,
            "/v1/subjects/t1/parked/i-nope/resume",
            VISIT,
            None,
        )
        .await;
    assert_eq!(
        (status, unknown["error"]["kind"].clone()),
        (404, json!("unknown"))
    );
    let (status, _) = s
        .call(
            Method::POST,
            "/v1/routes/nope/visit?subject=t1",
            VISIT,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 404);
    s.stop().await;
}

#[tokio::test]
async fn tool_doors_answer_at_once_and_a_record_is_read_with_a_bounded_long_poll() {
    let s = Server::start().await;
    let (status, record) = s
        .call(
            Method::POST,
            "/v1/targets/echo/run",
            VISIT,
            Some(json!({"subject": "s", "kwargs": {"x": 1}})),
        )
        .await;
    assert_eq!(status, 200, "{record}");
    assert_eq!(
        (record["status"].clone(), record["result"].clone()),
        (json!("succeeded"), json!({"x": 1}))
    );

    let (status, parked) = s
        .call(
            Method::POST,
            "/v1/targets/user_asker/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        parked["status"], "suspended",
        "a person's ask is never waited for: {parked}"
    );

    let response = s
        .request(Method::POST, "/v1/targets/asker/submit", VISIT)
        .json(&json!({"subject": "s"}))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 202);
    let location = response.headers()["location"]
        .to_str()
        .expect("text")
        .to_owned();
    let body: Value = response.json().await.expect("json");
    assert_eq!(
        location,
        format!("/v1/runs/{}", body["run_id"].as_str().expect("id"))
    );
    let (status, polled) = s
        .call(Method::GET, &format!("{location}?wait=10s"), VISIT, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(polled["status"], "parked", "{polled}");

    let (status, bad) = s
        .call(Method::GET, &format!("{location}?wait=soon"), VISIT, None)
        .await;
    assert_eq!(
        (status, bad["error"]["field"].clone()),
        (400, json!("wait"))
    );
    let (status, _) = s.call(Method::GET, "/v1/runs/r-unknown", VISIT, None).await;
    assert_eq!(status, 404);
    let (status, body) = s
        .call(
            Method::POST,
            "/v1/targets/nope/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["kind"].clone()),
        (404, json!("unknown_target"))
    );
    let (status, body) = s
        .call(
            Method::POST,
            "/v1/targets/echo/run",
            VISIT,
            Some(json!({"subject": "s", "kwarg": {}})),
        )
        .await;
    assert_eq!(status, 400, "an unknown field is named: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("kwarg")
    );
    s.stop().await;
}

#[tokio::test]
async fn the_inbox_lists_user_asks_only_and_its_answer_door_refuses_clearly() {
    let s = Server::start().await;
    let (_, user) = s
        .call(
            Method::POST,
            "/v1/targets/user_asker/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    let user_id = user["suspension"]["interactions"][0]
        .as_str()
        .map(str::to_owned)
        .or_else(|| user["asks"][0]["id"].as_str().map(str::to_owned))
        .expect("a user ask id");
    let (_, caller) = s
        .call(
            Method::POST,
            "/v1/targets/asker/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    let caller_id = caller["asks"][0]["id"]
        .as_str()
        .expect("a caller ask")
        .to_owned();

    let (status, page) = s
        .call(Method::GET, "/v1/interactions?page_size=500", ANSWER, None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(page["page_size"], 200, "capped");
    assert_eq!(page["total"], 1);
    assert_eq!(page["items"][0]["id"], json!(user_id));
    let (status, bad) = s
        .call(Method::GET, "/v1/interactions?page=x", ANSWER, None)
        .await;
    assert_eq!(
        (status, bad["error"]["field"].clone()),
        (400, json!("page"))
    );

    let answer = |id: &str| format!("/v1/interactions/{id}/answer");
    let (status, body) = s
        .call(
            Method::POST,
            &answer(&caller_id),
            ANSWER,
            Some(json!({"answer": true})),
        )
        .await;
    assert_eq!(status, 404, "a caller ask is unknown here: {body}");
    let (status, body2) = s
        .call(
            Method::POST,
            &answer("i-unknown"),
            ANSWER,
            Some(json!({"answer": true})),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["kind"], body2["error"]["kind"], "alike");
    let (status, body) = s
        .call(
            Method::POST,
            &answer(&user_id),
            ANSWER,
            Some(json!({"answer": "maybe"})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["field"].clone()),
        (400, json!("answer")),
        "{body}"
    );
    // Each problem says where (a JSON pointer; "" is the whole answer) and what.
    assert_eq!(body["error"]["problems"][0]["at"], json!(""), "{body}");
    assert!(
        body["error"]["problems"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("true or false")),
        "{body}"
    );
    let (status, body) = s
        .call(Method::POST, &answer(&user_id), ANSWER, Some(json!({})))
        .await;
    assert_eq!(
        (status, body["error"]["field"].clone()),
        (400, json!("answer"))
    );
    let (status, _) = s
        .call(
            Method::POST,
            &answer(&user_id),
            ANSWER,
            Some(json!({"answer": true})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, body) = s
        .call(
            Method::POST,
            &answer(&user_id),
            ANSWER,
            Some(json!({"answer": false})),
        )
        .await;
    assert_eq!(
        (status, body["error"]["kind"].clone()),
        (409, json!("already_resolved"))
    );
    let (_, page) = s.call(Method::GET, "/v1/interactions", ANSWER, None).await;
    assert_eq!(page["total"], 0);
    s.stop().await;
}

#[tokio::test]
async fn bodies_too_large_too_deep_or_not_json_are_refused_and_change_nothing() {
    let s = Server::start().await;
    let big = "x".repeat(2 << 20);
    let response = s
        .request(Method::POST, "/v1/targets/echo/run", VISIT)
        .header("content-type", "application/json")
        .body(format!(
            "{{\"subject\": \"s\", \"kwargs\": {{\"x\": \"{big}\"}}}}"
        ))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "body_too_large");

    let deep = format!(
        "{{\"subject\": \"s\", \"kwargs\": {}{}}}",
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    let response = s
        .request(Method::POST, "/v1/targets/echo/run", VISIT)
        .body(deep)
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "too_deep");

    let response = s
        .request(Method::POST, "/v1/targets/echo/run", VISIT)
        .body("{\"subject\": ")
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 400);
    let (status, _) = s.call(Method::GET, "/v1/nowhere", VISIT, None).await;
    assert_eq!(status, 404);
    let (status, _) = s
        .call(Method::DELETE, "/v1/interactions", ANSWER, None)
        .await;
    assert_eq!(status, 405);
    assert_eq!(s.runtime.stats().await.runs, 0, "nothing was started");
    s.stop().await;
}

#[tokio::test]
async fn many_clients_resuming_one_ask_at_once_resolve_it_exactly_once() {
    let s = Server::start().await;
    let (_, record) = s
        .call(
            Method::POST,
            "/v1/targets/asker/run",
            VISIT,
            Some(json!({"subject": "busy"})),
        )
        .await;
    let id = record["asks"][0]["id"].as_str().expect("an ask").to_owned();
    let path = format!("/v1/subjects/busy/parked/{id}/resume");
    let calls = (0..32).map(|i| s.call(Method::POST, &path, VISIT, Some(json!(i))));
    let answers = futures::future::join_all(calls).await;
    let won: Vec<&(u16, Value)> = answers
        .iter()
        .filter(|(status, _)| *status == 200)
        .collect();
    assert_eq!(won.len(), 1, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|(status, _)| *status == 200 || *status == 409),
        "{answers:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_openapi_document_names_every_route_and_is_served_without_a_token() {
    let s = Server::start().await;
    let response = s
        .client
        .get(format!("{}/openapi.json", s.url))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status().as_u16(), 200);
    let doc: Value = response.json().await.expect("json");
    assert_eq!(doc["openapi"], "3.0.3");
    for (method, path) in parkway_http::openapi::ROUTES {
        let op = &doc["paths"][path][method];
        assert!(op.is_object(), "{method} {path} is in the document");
        assert_eq!(
            op["security"],
            json!([{"bearer": []}]),
            "{method} {path} needs a token"
        );
        // Every route of the table is served: without a token it is refused, not missing.
        let m = Method::from_bytes(method.to_uppercase().as_bytes()).expect("a method");
        let concrete = path.replace('{', "x").replace('}', "");
        let answered = s
            .client
            .request(m, format!("{}{concrete}", s.url))
            .send()
            .await
            .expect("answers");
        assert_eq!(answered.status().as_u16(), 401, "{method} {path}");
    }
    let table: std::collections::HashSet<&str> = parkway_http::openapi::ROUTES
        .iter()
        .map(|(_, p)| *p)
        .collect();
    let paths = doc["paths"].as_object().expect("paths").len();
    assert_eq!(
        paths,
        table.len() + 2,
        "the table's paths, health and readiness"
    );
    assert!(doc["components"]["schemas"]["RunRecord"].is_object());
    s.stop().await;
}

#[tokio::test]
async fn idempotency_keys_and_delivery_ids_hold_across_a_restart() {
    let dir = tempfile::tempdir().expect("a directory");
    let open = || async {
        let runtime = common::builder()
            .data_dir(dir.path())
            .build()
            .await
            .expect("builds");
        Server::with(runtime, parkway_http::Options::default()).await
    };
    let s = open().await;
    let hook = json!({"kind": "hook", "topic": "deploys", "target": "echo",
        "subject_expr": "\"d-\" + (.n | tostring)", "start_expr": "{n: .n}"});
    let (status, _) = s
        .call(Method::PUT, "/v1/doors/deploys", ADMIN, Some(hook))
        .await;
    assert_eq!(status, 201);

    let run = |key: &'static str, subject: &'static str| {
        s.request(Method::POST, "/v1/targets/asker/run", VISIT)
            .header("Idempotency-Key", key)
            .json(&json!({"subject": subject}))
            .send()
    };
    let first: Value = run("k-1", "s")
        .await
        .expect("answers")
        .json()
        .await
        .expect("json");
    assert_eq!(first["status"], "parked");
    let again: Value = run("k-1", "s")
        .await
        .expect("answers")
        .json()
        .await
        .expect("json");
    assert_eq!(
        again["run_id"], first["run_id"],
        "the same run, not a second"
    );
    // A key is its subject's: on another subject it starts another run.
    let other: Value = run("k-1", "elsewhere")
        .await
        .expect("answers")
        .json()
        .await
        .expect("json");
    assert_eq!(other["status"], "parked");
    assert_ne!(other["run_id"], first["run_id"]);
    let changed = s
        .request(Method::POST, "/v1/targets/asker/run", VISIT)
        .header("Idempotency-Key", "k-1")
        .json(&json!({"subject": "s", "kwargs": {"changed": true}}))
        .send()
        .await
        .expect("answers");
    assert_eq!(changed.status().as_u16(), 409);
    let body: Value = changed.json().await.expect("json");
    assert_eq!(body["error"]["kind"], "idempotency_key_reused");
    let submitted = s
        .request(Method::POST, "/v1/targets/asker/submit", VISIT)
        .header("Idempotency-Key", "k-1")
        .json(&json!({"subject": "s"}))
        .send()
        .await
        .expect("answers");
    assert_eq!(submitted.status().as_u16(), 202);
    let body: Value = submitted.json().await.expect("json");
    assert_eq!(
        body["run_id"], first["run_id"],
        "submit shares the key's run"
    );
    let empty = run("", "s").await.expect("answers");
    assert_eq!(empty.status().as_u16(), 400);

    let fire = |delivery: &'static str, n: u64| {
        s.request(Method::POST, "/v1/hooks/deploys", VISIT)
            .header("Webhook-Id", delivery)
            .json(&json!({"n": n}))
            .send()
    };
    let fired = fire("evt-1", 1).await.expect("answers");
    assert_eq!(fired.status().as_u16(), 202);
    let replay = fire("evt-1", 1).await.expect("answers");
    assert_eq!(replay.status().as_u16(), 200);
    let body: Value = replay.json().await.expect("json");
    assert_eq!(body["status"], "already_seen");
    assert_eq!(
        fire("evt-1", 2).await.expect("answers").status().as_u16(),
        409
    );
    assert_eq!(
        s.runtime.stats().await.runs,
        2,
        "the parked runs only: the echo ended"
    );
    s.stop().await;

    // The next process knows both.
    let s = open().await;
    let again: Value = s
        .request(Method::POST, "/v1/targets/asker/run", VISIT)
        .header("Idempotency-Key", "k-1")
        .json(&json!({"subject": "s"}))
        .send()
        .await
        .expect("answers")
        .json()
        .await
        .expect("json");
    assert_eq!(again["run_id"], first["run_id"]);
    assert_eq!(again["status"], "parked");
    let replay = s
        .request(Method::POST, "/v1/hooks/deploys", VISIT)
        .header("Webhook-Id", "evt-1")
        .json(&json!({"n": 1}))
        .send()
        .await
        .expect("answers");
    assert_eq!(replay.status().as_u16(), 200);
    let (_, parked) = s
        .call(Method::GET, "/v1/subjects/s/parked", VISIT, None)
        .await;
    assert_eq!(
        parked.as_array().map(Vec::len),
        Some(1),
        "one run parked, not two: {parked}"
    );
    s.stop().await;
}

#[tokio::test]
async fn metrics_count_visits_by_door_and_result_and_open_streams() {
    let s = Server::start().await;
    let door = json!({"kind": "route", "target": "asker", "start_expr": "{}"});
    s.call(Method::PUT, "/v1/doors/chat", ADMIN, Some(door))
        .await;
    s.call(
        Method::POST,
        "/v1/routes/chat/visit?subject=a",
        VISIT,
        Some(json!({})),
    )
    .await;
    s.call(
        Method::POST,
        "/v1/routes/made-up/visit?subject=a",
        VISIT,
        Some(json!({})),
    )
    .await;
    let _stream = common::Stream::open(&s, "/v1/events", ADMIN, None).await;
    let (status, _) = s.call(Method::GET, "/metrics", VISIT, None).await;
    assert_eq!(status, 403);
    let response = s
        .request(Method::GET, "/metrics", ADMIN)
        .send()
        .await
        .expect("answers");
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap_or("")
            .starts_with("text/plain")
    );
    let text = response.text().await.expect("text");
    for line in [
        "parkway_visits_total{door=\"chat\",result=\"started\"} 1",
        "parkway_visits_total{door=\"\",result=\"unknown_door\"} 1",
        "parkway_asks_open{to=\"caller\"} 1",
        "parkway_cap_in_use{cap=\"INTERACTIONS_MAX_CONCURRENT_CALLER\"} 1",
        "parkway_runs 1",
        "parkway_stream_subscribers 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    s.stop().await;
}

#[tokio::test]
async fn a_client_that_stalls_its_body_is_timed_out_and_the_server_goes_on() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let runtime = common::builder().build().await.expect("builds");
    let mut options = parkway_http::Options::default();
    options.request_timeout = std::time::Duration::from_millis(300);
    let s = Server::with(runtime, options).await;
    let address = s.url.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address)
        .await
        .expect("connects");
    let head = format!(
        "POST /v1/targets/echo/run HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {VISIT}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"subj"
    );
    socket.write_all(head.as_bytes()).await.expect("writes");
    // The rest of the body never comes.
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(common::BOUND, socket.read(&mut answer))
        .await
        .expect("answered within the bound")
        .expect("reads");
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    let (status, _) = s
        .call(
            Method::POST,
            "/v1/targets/echo/run",
            VISIT,
            Some(json!({"subject": "s"})),
        )
        .await;
    assert_eq!(status, 200, "others are served");
    assert_eq!(
        s.runtime.stats().await.runs,
        0,
        "nothing was started by the stalled request"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_client_that_disconnects_mid_resume_loses_nothing() {
    // `gated` asks its caller, then, once resumed, waits for the test to open its gate.
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let held = std::sync::Arc::clone(&gate);
    let runtime = common::builder()
        .register("gated", &[], move |ctx, _, _| {
            let gate = std::sync::Arc::clone(&held);
            async move {
                let answer = ctx
                    .ask(
                        parkway::Ask::caller("go?").expiry_at(std::time::Duration::from_secs(3600)),
                    )
                    .await?;
                let _open = gate.acquire().await;
                Ok(json!({ "answer": answer }))
            }
        })
        .build()
        .await
        .expect("builds");
    let s = Server::with(runtime, parkway_http::Options::default()).await;
    let (_, record) = s
        .call(
            Method::POST,
            "/v1/targets/gated/run",
            VISIT,
            Some(json!({"subject": "g"})),
        )
        .await;
    let run = record["run_id"].as_str().expect("a run").to_owned();
    let id = record["asks"][0]["id"].as_str().expect("an ask").to_owned();

    // The resume's client goes away while the run is executing.
    let resume = s
        .request(
            Method::POST,
            &format!("/v1/subjects/g/parked/{id}/resume"),
            VISIT,
        )
        .json(&json!("yes"))
        .send();
    let client = tokio::spawn(resume);
    let deadline = tokio::time::Instant::now() + common::BOUND;
    loop {
        let (_, r) = s
            .call(Method::GET, &format!("/v1/runs/{run}"), VISIT, None)
            .await;
        if r["status"] == "running" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run resumed: {r}"
        );
        tokio::task::yield_now().await;
    }
    client.abort();
    let _ = client.await;
    gate.add_permits(1);

    // Its outcome is left waiting under the ask's id, and can be taken.
    let deadline = tokio::time::Instant::now() + common::BOUND;
    let parked = loop {
        let (_, parked) = s
            .call(Method::GET, "/v1/subjects/g/parked", VISIT, None)
            .await;
        if parked[0]["status"] == "finished" {
            break parked;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left waiting: {parked}"
        );
        tokio::task::yield_now().await;
    };
    assert_eq!(parked[0]["id"], json!(id));
    let (status, taken) = s
        .call(
            Method::POST,
            &format!("/v1/subjects/g/parked/{id}/take"),
            VISIT,
            None,
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        taken,
        json!({"status": "finished", "result": {"answer": "yes"}})
    );
    s.stop().await;
}

/// A person's answer resumes a run nobody receives: `take?wait=` waits for its outcome
/// and hands it over; on an ask still open, the wait ends as a take refuses it then.
#[tokio::test]
async fn a_take_with_wait_hands_over_the_outcome_a_person_s_answer_leaves() {
    let s = Server::start().await;
    let (_, record) = s
        .call(
            Method::POST,
            "/v1/targets/user_asker/run",
            VISIT,
            Some(json!({"subject": "u"})),
        )
        .await;
    let id = record["suspension"]["interactions"][0]
        .as_str()
        .expect("a user ask")
        .to_owned();
    let take = format!("/v1/subjects/u/parked/{id}/take?wait=20s");
    let waiting = s.call(Method::POST, &take, VISIT, None);
    let answer = async {
        let path = format!("/v1/interactions/{id}/answer");
        let body = json!({"answer": true});
        s.call(Method::POST, &path, ANSWER, Some(body)).await
    };
    let ((status, taken), (answered, _)) = tokio::join!(waiting, answer);
    assert_eq!(answered, 200);
    assert_eq!(status, 200, "{taken}");
    assert_eq!(
        taken,
        json!({"status": "finished", "result": {"answer": true}})
    );

    // A caller ask nobody answers: after the wait, the take's own refusal.
    let (_, record) = s
        .call(
            Method::POST,
            "/v1/targets/asker/run",
            VISIT,
            Some(json!({"subject": "c"})),
        )
        .await;
    let id = record["asks"][0]["id"].as_str().expect("an ask").to_owned();
    let take = format!("/v1/subjects/c/parked/{id}/take?wait=10ms");
    let (status, refused) = s.call(Method::POST, &take, VISIT, None).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"]["status"], "asking", "{refused}");
    let (status, refused) = s.call(Method::POST, &format!("{take}x"), VISIT, None).await;
    assert_eq!(status, 400, "{refused}");
    s.stop().await;
}
