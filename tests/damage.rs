//! A data directory whose tables are damaged: a read that meets the damage fails with a
//! `corrupt` error naming the keyspace, marks the runtime unhealthy, and never says that
//! acknowledged work does not exist; `parkway::check::check` finds the damage before a
//! runtime is built on the directory, and changes nothing in it.
//!
//! Each test writes a real directory through a runtime, shuts it down (so what it wrote
//! is in tables, not only in the journal), flips bytes inside the tables of one keyspace,
//! and builds a new runtime on it (a new engine, so nothing is read from a cache).

use std::path::{Path, PathBuf};

use parkway::{
    Ask, Builder, CancelError, Ids, ManualClock, RecordError, ResumeError, RunStatus, Runtime,
    Start, StartError, StoreFault, TakeError,
};
use serde_json::json;

/// A runtime on `dir` with `asker`, which asks its caller, and `done`, which ends at once.
async fn open(dir: &Path) -> Result<Runtime, parkway::BuildError> {
    Builder::default()
        .without_env()
        .clock(ManualClock::default())
        .ids(Ids::sequential())
        .data_dir(dir)
        .register("asker", &[], |ctx, _, _| async move {
            let answer = ctx.ask(Ask::caller("proceed?").expiry_at("1h")).await?;
            Ok(json!({ "answer": answer }))
        })
        .register("done", &[], |_, _, _| async move { Ok(json!("done")) })
        .build()
        .await
}

/// The folder of `keyspace`'s tables, as the check reports it.
fn folder_of(dir: &Path, keyspace: &str) -> PathBuf {
    let report = parkway::check::check(dir).expect("the directory is checked");
    report
        .keyspaces
        .iter()
        .find(|k| k.name == keyspace)
        .and_then(|k| k.folder.clone())
        .unwrap_or_else(|| panic!("keyspace {keyspace} has a folder"))
}

/// Flip bytes near the start of every table of `keyspace` (inside its first data
/// block); how many tables were damaged.
fn damage(dir: &Path, keyspace: &str) -> usize {
    let tables = folder_of(dir, keyspace).join("tables");
    let mut damaged = 0;
    for table in std::fs::read_dir(&tables).expect("the keyspace has tables") {
        let path = table.expect("a table").path();
        let mut bytes = std::fs::read(&path).expect("the table reads");
        assert!(bytes.len() > 64, "{} is a table", path.display());
        for b in &mut bytes[8..24] {
            *b ^= 0xa5;
        }
        std::fs::write(&path, &bytes).expect("the table is written");
        damaged += 1;
    }
    assert!(damaged > 0, "keyspace {keyspace} has no table to damage");
    damaged
}

/// Whether `fault` is damage of `keyspace`.
fn corrupt_in(fault: &StoreFault, keyspace: &str) -> bool {
    fault.is_corrupt() && fault.keyspace() == keyspace && fault.kind() == "corrupt"
}

/// A subject whose state is in a damaged table answers `corrupt` naming the keyspace on
/// every operation, never "unknown" or "shut down", marks the runtime unhealthy, and is
/// not written over: after the runtime that met it stops, the damage is still there to
/// be met (a runtime that made an empty subject in its place would have hidden it).
#[tokio::test]
async fn a_damaged_subject_is_corrupt_on_every_operation_and_never_written_over() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let rt = open(&dir).await.unwrap();
    let parked = rt.run(Start::new("s", "asker")).await.unwrap();
    assert_eq!(parked.status, RunStatus::Parked);
    let ask = parked.asks.clone().unwrap()[0].id.clone();
    rt.shutdown().await;
    drop(rt);
    damage(&dir, "subjects.4");

    let rt = open(&dir).await.expect("the open reads no subject state");
    assert!(rt.health().is_healthy(), "nothing damaged was read yet");
    match rt.list("s").await {
        Err(StartError::Store(fault)) => {
            assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}");
            let text = fault.to_string();
            assert!(
                text.contains("keyspace subjects") && text.contains("\"s\""),
                "{text}"
            );
        }
        other => panic!("a damaged subject lists as corrupt, not {other:?}"),
    }
    match rt.resume("s", &ask, json!("yes")).await {
        Err(ResumeError::Store(fault)) => assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}"),
        other => panic!("{other:?}"),
    }
    match rt.take("s", &ask).await {
        Err(TakeError::Store(fault)) => assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}"),
        other => panic!("{other:?}"),
    }
    match rt.cancel("s", &[ask.as_str()]).await {
        Err(CancelError::Store(fault)) => assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}"),
        other => panic!("{other:?}"),
    }
    match rt.run(Start::new("s", "done")).await {
        Err(StartError::Store(fault)) => assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}"),
        other => panic!("a start on a damaged subject is refused, not {other:?}"),
    }
    match rt.try_record(&parked.run_id).await {
        Err(RecordError::Store(fault)) => assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}"),
        other => panic!("the record of a run on a damaged subject is corrupt, not {other:?}"),
    }
    let health = rt.health();
    assert!(!health.is_healthy());
    assert!(health.damaged_reads >= 6, "{health:?}");
    let first = health.first_damage.expect("the first damage is kept");
    assert!(corrupt_in(&first, "subjects.4"), "{first:?}");
    rt.shutdown().await;
    drop(rt);

    let rt = open(&dir).await.unwrap();
    match rt.list("s").await {
        Err(StartError::Store(fault)) => assert!(corrupt_in(&fault, "subjects.4"), "{fault:?}"),
        other => panic!("the damaged subject was written over: {other:?}"),
    }
    rt.shutdown().await;
}

/// The kept record of a run that ended is in a damaged table: its lookup is `corrupt`
/// naming the keyspace, where it once answered that the run was never started.
#[tokio::test]
async fn a_damaged_record_is_corrupt_not_unknown() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let rt = open(&dir).await.unwrap();
    let ended = rt.run(Start::new("s", "done")).await.unwrap();
    assert_eq!(ended.status, RunStatus::Succeeded);
    rt.shutdown().await;
    drop(rt);
    damage(&dir, "records.4");

    let rt = open(&dir).await.unwrap();
    match rt.try_record(&ended.run_id).await {
        Err(RecordError::Store(fault)) => assert!(corrupt_in(&fault, "records.4"), "{fault:?}"),
        other => panic!("a damaged record is corrupt, not {other:?}"),
    }
    assert_eq!(
        rt.try_record("r-never").await,
        Ok(None),
        "a run never started is still unknown"
    );
    assert!(!rt.health().is_healthy());
    rt.shutdown().await;
}

/// Damage in what an open reads (the subjects' heads) refuses the open, naming the
/// directory and the keyspace; it does not panic.
#[tokio::test]
async fn damage_met_at_open_refuses_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let rt = open(&dir).await.unwrap();
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.shutdown().await;
    drop(rt);
    damage(&dir, "heads.4");

    let refused = open(&dir)
        .await
        .expect_err("a damaged head refuses the open");
    let text = refused.to_string();
    assert!(
        text.contains(&dir.display().to_string())
            && text.contains("keyspace heads")
            && text.contains("damaged"),
        "{text}"
    );
}

/// Every file of `dir`, with its bytes and its modification time.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut files = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
            } else {
                let meta = std::fs::metadata(&path).unwrap();
                files.push((
                    path.clone(),
                    std::fs::read(&path).unwrap(),
                    meta.modified().unwrap(),
                ));
            }
        }
    }
    files.sort();
    files
}

/// Fails naming every file that differs between `before` and `after`.
fn assert_unchanged(
    before: &[(PathBuf, Vec<u8>, std::time::SystemTime)],
    after: &[(PathBuf, Vec<u8>, std::time::SystemTime)],
) {
    let names = |files: &[(PathBuf, Vec<u8>, std::time::SystemTime)]| {
        files.iter().map(|f| f.0.clone()).collect::<Vec<_>>()
    };
    assert_eq!(
        names(before),
        names(after),
        "the check added or removed files"
    );
    let changed: Vec<_> = before
        .iter()
        .zip(after)
        .filter(|(b, a)| b != a)
        .map(|(b, a)| (b.0.display().to_string(), b.1 == a.1, b.2 == a.2))
        .collect();
    assert!(
        changed.is_empty(),
        "the check changed (file, same bytes, same time): {changed:?}"
    );
}

/// The check of an undamaged directory reads every key and finds nothing; of a damaged
/// one, it names the keyspace of the damage; either way it changes no file.
#[tokio::test]
async fn the_check_reads_every_key_names_the_damage_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let rt = open(&dir).await.unwrap();
    for n in 0..20 {
        rt.run(Start::new(format!("s-{n}"), "asker")).await.unwrap();
        rt.run(Start::new(format!("s-{n}"), "done")).await.unwrap();
    }
    rt.shutdown().await;
    drop(rt);

    let before = snapshot(&dir);
    let report = parkway::check::check(&dir).unwrap();
    assert!(report.is_clean(), "{report:?}");
    assert!(report.decoded);
    let keys = |name: &str| {
        report
            .keyspaces
            .iter()
            .find(|k| k.name == name)
            .map(|k| k.keys)
    };
    assert_eq!(keys("subjects.4"), Some(20), "{report:?}");
    assert_eq!(keys("records.4"), Some(20), "{report:?}");
    assert_eq!(keys("entries.4"), Some(20), "{report:?}");
    assert_unchanged(&before, &snapshot(&dir));

    damage(&dir, "entries.4");
    let before = snapshot(&dir);
    let report = parkway::check::check(&dir).unwrap();
    assert!(!report.is_clean());
    let damaged: Vec<&str> = report
        .keyspaces
        .iter()
        .filter(|k| k.damage_found > 0)
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(damaged, ["entries.4"], "{report:?}");
    let entries = &report
        .keyspaces
        .iter()
        .find(|k| k.name == "entries.4")
        .unwrap();
    assert!(
        entries.damage[0]
            .to_string()
            .starts_with("keyspace entries")
    );
    assert_unchanged(&before, &snapshot(&dir));
}

/// A directory a runtime holds is refused by the check, which reads nothing from it.
#[tokio::test]
async fn the_check_refuses_a_directory_held_by_a_runtime() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let rt = open(&dir).await.unwrap();
    let refused = parkway::check::check(&dir).expect_err("the directory is held");
    assert!(refused.to_string().contains("is held"), "{refused}");
    rt.shutdown().await;
    assert!(parkway::check::check(&dir).is_ok());
    let missing = parkway::check::check(&tmp.path().join("missing")).expect_err("no directory");
    assert!(missing.to_string().contains("missing"), "{missing}");
}
