//! A server on a data directory whose tables are damaged: a request that reads the
//! damage is a 500 `corrupt` naming the keyspace, never a 404 saying the run was never
//! started nor a 503 saying the runtime is shut down, and `/readyz` turns 503 (with
//! the metrics saying why) once the damage was met.

mod common;

use std::path::Path;

use common::{ADMIN, Server, VISIT, builder};
use parkway::{DoorSpec, RunStatus, Start};
use parkway_http::Options;
use reqwest::Method;
use serde_json::{Value, json};

/// Flip bytes near the start of every table of `keyspace` (inside its first block).
fn damage(dir: &Path, keyspace: &str) {
    let report = parkway::check::check(dir).expect("the directory is checked");
    let folder = report
        .keyspaces
        .iter()
        .find(|k| k.name == keyspace)
        .and_then(|k| k.folder.clone())
        .expect("the keyspace has a folder");
    let mut damaged = 0;
    for table in std::fs::read_dir(folder.join("tables")).expect("tables") {
        let path = table.expect("a table").path();
        let mut bytes = std::fs::read(&path).expect("reads");
        for b in &mut bytes[8..24] {
            *b ^= 0xa5;
        }
        std::fs::write(&path, &bytes).expect("writes");
        damaged += 1;
    }
    assert!(damaged > 0, "keyspace {keyspace} has a table");
}

/// The error object of an answer.
fn error_of(body: &Value) -> &Value {
    &body["error"]
}

/// Every request that reads the damaged subject answers 500 `corrupt` naming the
/// keyspace; `/readyz` is 200 until the damage is met and 503 `corrupt` after; the
/// metrics count it.
#[tokio::test]
async fn a_damaged_subject_is_500_corrupt_and_readyz_turns_503() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let runtime = builder().data_dir(&dir).build().await.unwrap();
    let parked = runtime.run(Start::new("s", "asker")).await.unwrap();
    assert_eq!(parked.status, RunStatus::Parked);
    runtime.save_door(DoorSpec::route("go", "asker")).unwrap();
    runtime.shutdown().await;
    drop(runtime);
    damage(&dir, "subjects.4");

    let runtime = builder().data_dir(&dir).build().await.unwrap();
    let s = Server::with(runtime, Options::default()).await;
    let ready = s
        .client
        .get(format!("{}/readyz", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200, "no damage met yet");

    let corrupt = |(status, body): (u16, Value)| {
        assert_eq!(status, 500, "{body}");
        let error = error_of(&body);
        assert_eq!(error["kind"], "corrupt", "{body}");
        assert_eq!(error["keyspace"], "subjects.4", "{body}");
        let message = error["message"].as_str().unwrap_or_default().to_owned();
        assert!(message.contains("keyspace subjects.4"), "{message}");
        assert!(
            !message.contains(&tmp.path().display().to_string()),
            "{message}"
        );
    };
    corrupt(
        s.call(Method::GET, "/v1/subjects/s/parked", VISIT, None)
            .await,
    );
    corrupt(
        s.call(
            Method::GET,
            &format!("/v1/runs/{}", parked.run_id),
            VISIT,
            None,
        )
        .await,
    );
    corrupt(
        s.call(
            Method::POST,
            "/v1/routes/go/visit?subject=s",
            VISIT,
            Some(json!({})),
        )
        .await,
    );

    let ready = s
        .client
        .get(format!("{}/readyz", s.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 503);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(error_of(&body)["kind"], "corrupt", "{body}");
    assert!(
        error_of(&body)["message"]
            .as_str()
            .is_some_and(|m| m.contains("keyspace subjects.4")),
        "{body}"
    );

    let metrics = s
        .request(Method::GET, "/metrics", ADMIN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("\nparkway_healthy 0\n"), "{metrics}");
    let damaged: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("parkway_store_damaged_reads_total "))
        .and_then(|n| n.parse().ok())
        .expect("the damage is counted");
    assert!(damaged >= 3, "{metrics}");
    s.stop().await;
}
