//! A data directory of format version 3, as the build before slots wrote it
//! (`tests/data/format-3`, its ids in `tests/data/format-3.json`), opened by this build:
//! converted at open to this version's slot-first keys, it holds everything it held,
//! and what it had armed still fires.
//!
//! The directory was written by a runtime with random ids from seed 7 and a manual clock
//! at its default instant, with the targets of [`open`]: `alpha` parked on an ask of an
//! hour, `beta` the same under the idempotency key `k-1`, `gamma` a run that ended at
//! once, `delta` a run resumed to its end, and the route `go` saved.
#![cfg(feature = "disk")]

use std::path::Path;
use std::time::Duration;

use parkway::{Ask, Builder, EntryStatus, Ids, ManualClock, Resumed, RunStatus, Runtime, Start};
use serde_json::{Value, json};

/// A runtime on `dir` with the targets the directory was written with.
async fn open(dir: &Path, clock: &ManualClock) -> Runtime {
    Builder::default()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::random(8))
        .data_dir(dir)
        .register("asker", &[], |ctx, _, _| async move {
            let answer = ctx.ask(Ask::caller("proceed?").expiry_at("1h")).await?;
            Ok(json!({ "answer": answer }))
        })
        .register(
            "quick",
            &[],
            |_, _, _| async move { Ok(json!({"done": true})) },
        )
        .build()
        .await
        .expect("the runtime opens a directory of format version 3")
}

/// A copy of `from` into `to`, each file as it is.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creates");
    for entry in std::fs::read_dir(from).expect("reads the fixture") {
        let entry = entry.expect("reads the fixture");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copies");
        }
    }
}

/// The status of `run`'s record, if it is found.
async fn status(rt: &Runtime, run: String) -> Option<RunStatus> {
    rt.record(&run).await.map(|r| r.status)
}

#[tokio::test]
async fn a_directory_of_format_version_3_opens_converted_with_all_it_held() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let ids: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture.join("format-3.json")).expect("reads the ids"),
    )
    .expect("the ids decode");
    let id = |name: &str| ids[name].as_str().expect("an id").to_owned();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("store");
    copy_dir(&fixture.join("format-3"), &dir);
    // Checked before it is opened, it is read in the spaces of its own version.
    let before = parkway::check::check(&dir).expect("checks");
    assert_eq!(before.format_version.as_deref(), Some("3"));
    assert!(before.is_clean(), "{before:?}");
    let old = |name: &str| {
        before
            .keyspaces
            .iter()
            .find(|k| k.name == name)
            .map(|k| k.keys)
    };
    assert_eq!(old("subjects"), Some(3), "{before:?}");
    assert_eq!(old("records"), Some(2), "{before:?}");
    assert_eq!(old("subjects.4"), None, "{before:?}");

    let clock = ManualClock::default();
    let rt = open(&dir, &clock).await;
    // The parked asks, with their ids.
    let alpha = rt.list("alpha").await.expect("lists");
    assert_eq!(alpha.len(), 1, "{alpha:?}");
    assert_eq!(
        (alpha[0].id.as_str(), alpha[0].status),
        (id("alpha_ask").as_str(), EntryStatus::Asking)
    );
    let beta = rt.list("beta").await.expect("lists");
    assert_eq!(beta.len(), 1, "{beta:?}");
    assert_eq!(beta[0].id, id("beta_ask"));
    // The runs, live and ended.
    assert_eq!(status(&rt, id("alpha_run")).await, Some(RunStatus::Parked));
    assert_eq!(status(&rt, id("beta_run")).await, Some(RunStatus::Parked));
    assert_eq!(
        status(&rt, id("gamma_run")).await,
        Some(RunStatus::Succeeded)
    );
    assert_eq!(
        status(&rt, id("delta_run")).await,
        Some(RunStatus::Succeeded)
    );
    // The idempotency key names the run it started.
    let again = rt
        .submit(Start::new("beta", "asker").idempotency_key("k-1"))
        .await
        .expect("a known key");
    assert_eq!(again, id("beta_run"));
    // A resume reaches the parked run.
    let Resumed::Outcome(done) = rt
        .resume("alpha", &id("alpha_ask"), json!("yes"))
        .await
        .expect("resumes")
    else {
        panic!("a single ask resumes at once")
    };
    assert_eq!(done.result, Some(json!({"answer": "yes"})));
    // The saved door is there.
    let visit = rt.visit("go", "epsilon", json!({})).await.expect("visits");
    assert!(
        matches!(visit.outcome, parkway::VisitOutcome::Started { .. }),
        "{visit:?}"
    );
    // Beta's deadline, armed in version 3, fires from its converted wake.
    clock.advance(Duration::from_secs(3601));
    rt.settle().await;
    assert_eq!(
        status(&rt, id("beta_run")).await,
        Some(RunStatus::Cancelled)
    );
    rt.shutdown().await;
    drop(rt);

    let after = parkway::check::check(&dir).expect("checks");
    assert!(after.is_clean(), "{after:?}");
    assert_eq!(after.format_version.as_deref(), Some("5"));
    let keys = |name: &str| {
        after
            .keyspaces
            .iter()
            .find(|k| k.name == name)
            .map(|k| k.keys)
    };
    assert!(keys("subjects.4").is_some_and(|n| n > 0), "{after:?}");
    assert!(keys("records.4").is_some_and(|n| n > 0), "{after:?}");

    // Opened again, at this version: what the first open did is kept.
    let rt = open(&dir, &clock).await;
    assert_eq!(
        status(&rt, id("alpha_run")).await,
        Some(RunStatus::Succeeded)
    );
    assert_eq!(
        status(&rt, id("beta_run")).await,
        Some(RunStatus::Cancelled)
    );
    assert_eq!(
        status(&rt, id("gamma_run")).await,
        Some(RunStatus::Succeeded)
    );
    assert!(rt.list("alpha").await.expect("lists").is_empty());
    rt.shutdown().await;
}
