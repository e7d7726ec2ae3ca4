//! `parkway crash` end to end: a few children killed with SIGKILL on one data directory,
//! each kill checked; and a work directory that is not empty is refused.

use std::process::Command;

/// A fresh, empty work directory for one test.
fn work_dir(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("parkway-crash-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_few_kills_lose_nothing_acknowledged() {
    let dir = work_dir("kills");
    let out = Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["crash", "--kills", "6", "--seed", "11", "--json", "--data"])
        .arg(&dir)
        .output()
        .expect("parkway runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    assert_eq!(report["kills"], 6, "{report}");
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
    let counts = &report["counts"];
    assert_eq!(counts["observations"], 6, "{report}");
    let acked: u64 = counts["acked"]
        .as_object()
        .map(|m| m.values().filter_map(serde_json::Value::as_u64).sum())
        .unwrap_or(0);
    assert!(acked > 0, "the children acknowledged nothing: {report}");
    // A directory given with --data is kept.
    assert!(dir.join("log.jsonl").is_file());
    std::fs::remove_dir_all(&dir).expect("the work directory is removed");
}

#[test]
fn a_work_directory_that_is_not_empty_is_refused() {
    let dir = work_dir("busy");
    std::fs::create_dir_all(&dir).expect("the directory is made");
    std::fs::write(dir.join("other"), b"someone else's").expect("a file is written");
    let out = Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["crash", "--kills", "1", "--data"])
        .arg(&dir)
        .output()
        .expect("parkway runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not empty"), "{stderr}");
    std::fs::remove_dir_all(&dir).expect("the work directory is removed");
}
