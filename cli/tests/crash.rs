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

#[cfg(unix)]
/// Runs `parkway crash --by-hand` on a fresh directory, sends `signal` to each child it
/// names as soon as its pid is printed; the exit status, stdout and stderr.
fn by_hand(name: &str, kills: u64, signal: i32) -> (Option<i32>, String, String) {
    use std::io::{BufRead, BufReader, Read};
    use std::process::Stdio;

    let dir = work_dir(name);
    let mut parent = Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["crash", "--by-hand", "--kills", &kills.to_string()])
        .args(["--seed", "12", "--json", "--data"])
        .arg(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("parkway runs");
    let mut said = String::new();
    let stderr = parent.stderr.take().expect("stderr is piped");
    // Ends when the parent does (its ready timeout bounds a child that never starts).
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("stderr is text");
        if let Some(pid) = line.split("kill -9 ").nth(1) {
            let pid: i32 = pid.trim().parse().expect("a pid");
            // SAFETY: kill(2) of a child the parent spawned and reaps only once it ended.
            let sent = unsafe { libc::kill(pid, signal) };
            assert_eq!(sent, 0, "signal {signal} to {pid}");
        }
        said.push_str(&line);
        said.push('\n');
    }
    let mut stdout = String::new();
    parent
        .stdout
        .take()
        .expect("stdout is piped")
        .read_to_string(&mut stdout)
        .expect("stdout is text");
    let status = parent.wait().expect("parkway ends");
    let _ = std::fs::remove_dir_all(&dir);
    (status.code(), stdout, said)
}

/// Children killed by hand, at moments the caller chooses (here: as soon as each is
/// named), are checked as any other kill; a child ended by another signal is an error
/// that names it.
#[cfg(unix)]
#[test]
fn children_killed_by_hand_are_checked_and_another_signal_is_refused() {
    let (code, stdout, stderr) = by_hand("hand", 2, libc::SIGKILL);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let report: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON report");
    assert_eq!(report["kills"], 2, "{report}");
    assert_eq!(report["violations"], serde_json::json!([]), "{report}");
    assert_eq!(stderr.matches("kill -9 ").count(), 2, "{stderr}");

    let (code, _, stderr) = by_hand("term", 1, libc::SIGTERM);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("ended without a SIGKILL") && stderr.contains("SIGTERM"),
        "{stderr}"
    );
}
