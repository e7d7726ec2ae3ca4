//! `parkway check --data DIR` on real directories: a clean one exits 0 with the keys it
//! read, a damaged one exits 1 naming the keyspace of the damage, and one that cannot be
//! checked (missing, or held by a running runtime) exits 2.

use std::path::Path;
use std::process::{Command, Output};

use parkway::{Ask, Builder, Ids, ManualClock, Runtime, Start};
use serde_json::{Value, json};

/// A runtime on `dir` whose `asker` asks its caller.
async fn open(dir: &Path) -> Runtime {
    Builder::default()
        .without_env()
        .clock(ManualClock::default())
        .ids(Ids::sequential())
        .data_dir(dir)
        .register("asker", &[], |ctx, _, _| async move {
            Ok(ctx.ask(Ask::caller("go?").expiry_at("1h")).await?)
        })
        .build()
        .await
        .expect("the runtime opens")
}

/// A directory written through a runtime: ten subjects with a parked run each.
async fn written(dir: &Path) {
    let rt = open(dir).await;
    for n in 0..10 {
        rt.run(Start::new(format!("s-{n}"), "asker")).await.unwrap();
    }
    rt.shutdown().await;
}

/// `parkway check` with `args`.
fn check(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parkway"))
        .arg("check")
        .args(args)
        .arg("--data")
        .arg(dir)
        .output()
        .expect("parkway runs")
}

#[tokio::test]
async fn a_clean_directory_exits_0_and_a_damaged_one_1_naming_the_keyspace() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    written(&dir).await;

    let out = check(&[], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("no damage found"), "{stdout}");
    let out = check(&["--json"], &dir);
    assert_eq!(out.status.code(), Some(0));
    let report: Value = serde_json::from_slice(&out.stdout).expect("one JSON report");
    let subjects = report["keyspaces"]
        .as_array()
        .and_then(|k| k.iter().find(|k| k["name"] == "subjects.4"))
        .expect("the subjects keyspace")
        .clone();
    assert_eq!(subjects["keys"], json!(10), "{report}");
    assert_eq!(subjects["damage_found"], json!(0), "{report}");

    // Bytes flipped inside the first block of each of the entries' tables.
    let folder = folder_of(&report, "entries.4");
    for table in std::fs::read_dir(Path::new(&folder).join("tables")).unwrap() {
        let path = table.unwrap().path();
        let mut bytes = std::fs::read(&path).unwrap();
        for b in &mut bytes[8..24] {
            *b ^= 0xa5;
        }
        std::fs::write(&path, &bytes).unwrap();
    }
    let out = check(&[], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("damaged: keyspace entries"), "{stdout}");
    let out = check(&["--json"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let damaged: Vec<&Value> = report["keyspaces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["damage_found"] != json!(0))
        .map(|k| &k["name"])
        .collect();
    assert_eq!(damaged, [&json!("entries.4")], "{report}");
}

/// The folder of `keyspace` in a JSON report.
fn folder_of(report: &Value, keyspace: &str) -> String {
    report["keyspaces"]
        .as_array()
        .and_then(|k| k.iter().find(|k| k["name"] == keyspace))
        .and_then(|k| k["folder"].as_str())
        .expect("the keyspace has a folder")
        .to_owned()
}

#[tokio::test]
async fn a_directory_that_cannot_be_checked_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let out = check(&[], &tmp.path().join("missing"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("missing"), "{stderr}");

    let dir = tmp.path().join("data");
    let rt = open(&dir).await;
    let out = check(&[], &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is held by another process"), "{stderr}");
    rt.shutdown().await;
}

/// Damage in a journal before its end is what an open refuses: the check reports it (the
/// journal, the byte) and exits 1, reads the tables as they stand before it, and leaves
/// the journal as it found it.
#[tokio::test]
async fn a_journal_damaged_before_its_end_is_reported_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    // The engine's journal is written at checkpoints: each open and shutdown adds some.
    for _ in 0..3 {
        written(&dir).await;
    }
    let journal = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jnl"))
        .max()
        .expect("a journal");
    let mut bytes = std::fs::read(&journal).unwrap();
    // Each batch ends with the trailer `FJL\x03`: the byte after one in the middle starts
    // the next batch.
    let ends: Vec<usize> = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"FJL\x03")
        .map(|(i, _)| i + 4)
        .collect();
    assert!(ends.len() > 4, "the journal holds the runs' batches");
    bytes[ends[ends.len() / 2]] ^= 0xa5;
    std::fs::write(&journal, &bytes).unwrap();

    let out = check(&[], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("is damaged at byte"), "{stdout}");
    assert!(stdout.contains(&journal.display().to_string()), "{stdout}");
    assert!(stdout.contains("keys read, 1 damaged"), "{stdout}");
    let out = check(&["--json"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["journal"]
            .as_str()
            .is_some_and(|j| j.contains("is damaged at byte")),
        "{report}"
    );
    assert_eq!(std::fs::read(&journal).unwrap(), bytes, "nothing changed");
}
