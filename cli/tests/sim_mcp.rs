//! `parkway sim --random --http`: the random workload with MCP rounds. A share of its
//! calls are MCP tool calls over Streamable HTTP (the face served on a loopback socket
//! over the workload's runtime), their asks parked on the workload's subjects beside the
//! doors' own, and answered by the MCP retry, or first by a door, a resume, a cancel or
//! an expiry. The model checks every ask is resolved once whichever did, and that a
//! retry that lost the race is refused.
//!
//! Every seed of the batch below failed before the face refused a retry whose run was
//! past the retention horizon (it answered an internal error, `no record of run r-N`).

use std::process::{Command, Output};

/// `parkway sim --random --http` with `args`; each seed runs on virtual time, so the run
/// is bounded by its operations.
fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_parkway"))
        .args(["sim", "--random", "--http"])
        .args(args)
        .output()
        .expect("parkway runs")
}

/// A batch of seeds passes every check, and the trace shows the MCP rounds did what
/// they are there for: rounds opened, retries answered with the result, retries refused
/// because the ask was resolved first, and asks of MCP calls resolved by a door.
#[test]
fn mcp_rounds_beside_the_doors_resolve_every_ask_once() {
    let out = sim(&[
        "--seed",
        "1",
        "--seeds",
        "12",
        "--ops",
        "250",
        "--subjects",
        "4",
        "--trace",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stdout.matches(", ok; asks").count(), 12, "{stdout}");
    let count = |call: &str, answer: &str| {
        stdout
            .lines()
            .filter(|l| l.contains(call) && l.contains(answer))
            .count()
    };
    let opened = count("mcp tools/call", "-> input_required");
    let answered = count("mcp retry", "-> result {\"answers\":[true]}");
    let refused = count("mcp retry", "is no longer open");
    let by_a_door = stdout
        .lines()
        .filter(|l| l.contains("visit ") && l.contains("\"identity\":\"mcp\""))
        .count();
    for (what, n) in [
        ("rounds opened", opened),
        ("retries answered", answered),
        ("retries refused", refused),
        ("MCP asks resolved by a door", by_a_door),
    ] {
        assert!(n > 0, "no {what}:\n{stdout}");
    }
}

/// The same seed gives the same trace, byte for byte, over the sockets as well.
#[test]
fn a_seed_with_mcp_rounds_replays_exactly() {
    let args = ["--seed", "3", "--ops", "200", "--subjects", "3", "--trace"];
    let (a, b) = (sim(&args), sim(&args));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(
        a.stdout.contains_str("mcp retry"),
        "no MCP rounds in the trace"
    );
    assert_eq!(a.stdout, b.stdout);
}

/// A failure names its seed and the command that replays it, with `--http`.
#[test]
fn a_failure_prints_the_seed_and_the_replay_with_http() {
    let out = sim(&[
        "--seed",
        "5",
        "--seeds",
        "5",
        "--ops",
        "300",
        "--model-fault",
        "late-expiry",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the broken model went unnoticed");
    assert!(
        stderr.contains("FAILED seed ")
            && stderr.contains("replay: parkway sim --random --http --seed "),
        "{stderr}"
    );
}

/// Bytes that hold a string.
trait ContainsStr {
    fn contains_str(&self, needle: &str) -> bool;
}

impl ContainsStr for Vec<u8> {
    fn contains_str(&self, needle: &str) -> bool {
        String::from_utf8_lossy(self).contains(needle)
    }
}
