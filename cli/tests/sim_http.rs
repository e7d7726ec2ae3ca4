//! `parkway sim --http` end to end: every shipped scenario played over HTTP against a
//! live `parkway serve` in test mode (a child process on a free port; a `restart` step
//! stops it with SIGTERM and starts it again on its data directory) agrees line by line
//! with the same scenario played in process: outputs, errors, events, notes, the clock
//! and every check. A scenario that fails its own checks fails over HTTP too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The shipped scenarios, in name order.
fn scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the scenarios directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
}

/// `parkway sim --http FILES`; every wait inside it is bounded.
fn sim_http(files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["sim", "--http"])
        .args(files)
        .output()
        .expect("parkway runs")
}

#[test]
fn every_shipped_scenario_plays_over_http_as_it_does_in_process() {
    let files = scenarios();
    assert!(files.len() >= 16, "the shipped scenarios: {files:?}");
    let out = sim_http(&files);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for file in &files {
        let line = format!("{}: ", file.display());
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&line) && l.ends_with("the same as in process")),
            "no agreement reported for {}:\n{stdout}",
            file.display()
        );
    }
}

#[test]
fn a_scenario_whose_check_fails_fails_over_http_too() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("wrong.json");
    std::fs::write(
        &file,
        r#"{"name": "wrong", "timeline": [{"advance": "1m", "expect": {"now": "2026-01-01T00:02:00Z"}}]}"#,
    )
    .expect("written");
    let out = sim_http(std::slice::from_ref(&file));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("step 1 (advance the clock 1m) failed"),
        "{stderr}"
    );
}
