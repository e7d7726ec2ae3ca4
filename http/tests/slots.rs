//! A subject whose slot this runtime gave up: every request on it is a 503 `not_owner`
//! with `Retry-After`, naming the subject and the slot, and changes nothing; the other
//! subjects are served; once the slot is back, the subject is served as it was.

mod common;

use common::{Server, VISIT, builder};
use parkway::{RunStatus, Runtime, Start};
use parkway_http::Options;
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn a_subject_of_a_slot_given_up_is_503_not_owner_until_it_is_back() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = builder()
        .data_dir(tmp.path().join("data"))
        .build()
        .await
        .unwrap();
    let parked = runtime.run(Start::new("a", "asker")).await.unwrap();
    assert_eq!(parked.status, RunStatus::Parked);
    let id = parked.asks.unwrap()[0].id.clone();
    assert_ne!(Runtime::slot_of("a"), Runtime::slot_of("b"));
    let s = Server::with(runtime.clone(), Options::default()).await;
    runtime.unload_slot(Runtime::slot_of("a")).await.unwrap();

    let list = s
        .request(Method::GET, "/v1/subjects/a/parked", VISIT)
        .send()
        .await
        .unwrap();
    assert_eq!(list.status().as_u16(), 503);
    assert!(list.headers().contains_key("retry-after"));
    let body: serde_json::Value = list.json().await.unwrap();
    let error = &body["error"];
    assert_eq!(error["kind"], "not_owner", "{body}");
    assert_eq!(error["subject"], "a", "{body}");
    assert_eq!(error["slot"], Runtime::slot_of("a"), "{body}");
    let (status, body) = s
        .call(
            Method::POST,
            &format!("/v1/subjects/a/parked/{id}/resume"),
            VISIT,
            Some(json!({"payload": "yes"})),
        )
        .await;
    assert_eq!((status, &body["error"]["kind"]), (503, &json!("not_owner")));

    // The other slots are served.
    let (status, body) = s
        .call(Method::GET, "/v1/subjects/b/parked", VISIT, None)
        .await;
    assert_eq!(status, 200, "{body}");

    // Back: the ask is there, never resolved, and resumes once.
    runtime.load_slot(Runtime::slot_of("a")).await.unwrap();
    let (status, body) = s
        .call(Method::GET, "/v1/subjects/a/parked", VISIT, None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
    let (status, body) = s
        .call(
            Method::POST,
            &format!("/v1/subjects/a/parked/{id}/resume"),
            VISIT,
            Some(json!({"payload": "yes"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    s.stop().await;
}
