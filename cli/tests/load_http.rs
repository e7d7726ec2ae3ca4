//! `parkway load --url` end to end: a real `parkway serve` on a free port, with the
//! load's targets file and a data directory, takes a small load over HTTP whose account
//! balances; a wrong token, a token without the visit scope, an address nothing listens
//! on and a server without the load's doors are each refused by name.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The tokens the servers take: one for the load, one of another scope.
const TOKENS: &str = "load-test-token-000001 admin,visit; answer-test-token-00001 answer";
const LOAD_TOKEN: &str = "load-test-token-000001";
const ANSWER_TOKEN: &str = "answer-test-token-00001";

/// How long a server may take to say where it listens, and a load run to end.
const START_WITHIN: Duration = Duration::from_secs(60);
const RUN_WITHIN: Duration = Duration::from_secs(300);

/// A child process, killed when dropped: a failing test leaves nothing running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `parkway serve` on `127.0.0.1:0`, over a fresh data directory; both go when dropped.
struct Server {
    process: Killed,
    url: String,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.process.0.kill();
        let _ = self.process.0.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Start a server, with the load's targets file when `with_targets`, and read the
/// address it bound from its stderr.
fn serve(name: &str, with_targets: bool) -> Server {
    let dir = std::env::temp_dir().join(format!("parkway-load-http-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut command = Command::new(env!("CARGO_BIN_EXE_parkway"));
    command
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(&dir)
        .env("PARKWAY_TOKENS", TOKENS)
        .env_remove("PARKWAY_TOKENS_FILE")
        // The load's caller asks stay under the ceiling, and waiting outcomes are
        // dropped within the run, as the in-process load's `--retention` does.
        .env("INTERACTIONS_MAX_CONCURRENT_CALLER", "100000")
        .env("INTERACTIONS_WAITING_RETENTION", "300ms")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if with_targets {
        command.arg("--targets").arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/serve/load-targets.json"
        ));
    }
    let mut process = Killed(command.spawn().expect("parkway serve starts"));
    let stderr = process.0.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    // Reads every line to the end, so the server never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut said = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix("parkway serve: listening on ") {
                let _ = tx.send(Ok(addr.to_owned()));
            }
            said.push(line);
        }
        let _ = tx.send(Err(said.join("\n")));
    });
    let url = match rx.recv_timeout(START_WITHIN) {
        Ok(Ok(url)) => url,
        Ok(Err(said)) => panic!("parkway serve ended without listening:\n{said}"),
        Err(e) => panic!("parkway serve did not say where it listens: {e}"),
    };
    Server { process, url, dir }
}

/// What a `parkway load` run printed, and how it ended.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Run `parkway load` with `args` and `token` in `PARKWAY_TOKEN`, within [`RUN_WITHIN`].
fn load(args: &[&str], token: &str) -> Ran {
    let mut process = Killed(
        Command::new(env!("CARGO_BIN_EXE_parkway"))
            .arg("load")
            .args(args)
            .env("PARKWAY_TOKEN", token)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("parkway load starts"),
    );
    let (tx, rx) = mpsc::channel();
    for (which, mut pipe) in [
        (
            0,
            Box::new(process.0.stdout.take().expect("piped")) as Box<dyn Read + Send>,
        ),
        (1, Box::new(process.0.stderr.take().expect("piped"))),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            let _ = tx.send((which, text));
        });
    }
    let mut out = [String::new(), String::new()];
    for _ in 0..2 {
        let (which, text) = rx
            .recv_timeout(RUN_WITHIN)
            .unwrap_or_else(|e| panic!("parkway load did not end: {e}"));
        out[which] = text;
    }
    // Both pipes closed: the process has ended, or is about to.
    let status = process.0.wait().expect("parkway load is waited for");
    let [stdout, stderr] = out;
    Ran {
        code: status.code(),
        stdout,
        stderr,
    }
}

/// A few hundred visits over HTTP: every ask and outcome is accounted for, every way
/// an ask ends happens, and the baseline is measured beside.
#[test]
fn a_small_load_over_http_loses_nothing() {
    let server = serve("small", true);
    let ran = load(
        &[
            "--url",
            &server.url,
            "--json",
            "--quiet",
            "--subjects",
            "20",
            "--concurrency",
            "8",
            "--visits",
            "400",
            "--prefill",
            "3",
            "--short-ttl",
            "100ms",
            "--short-share",
            "0.5",
            "--bare-for",
            "200ms",
        ],
        LOAD_TOKEN,
    );
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let report: serde_json::Value =
        serde_json::from_str(ran.stdout.trim()).expect("one JSON report");
    let n = |path: &str| {
        report
            .pointer(path)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or_else(|| panic!("{path} is not a count: {report}"))
    };
    assert_eq!(n("/lost"), 0, "{report}");
    assert_eq!(
        report["account"]["imbalances"],
        serde_json::json!([]),
        "{report}"
    );
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    assert_eq!(report["doors_checked"], true, "{report}");
    assert_eq!(n("/visits"), 400, "{report}");
    let by_op: u64 = ["start", "resume", "take", "cancel"]
        .iter()
        .map(|op| n(&format!("/by_op/{op}")))
        .sum();
    assert_eq!(by_op, 400, "{report}");
    assert_eq!(n("/prefilled_asks"), 20 * 3, "{report}");
    // The account balances, side by side.
    let a = |field: &str| n(&format!("/account/{field}"));
    assert_eq!(
        a("asks_raised"),
        a("resumed") + a("cancelled") + a("expired") + a("open"),
        "{report}"
    );
    assert_eq!(
        a("outcomes"),
        a("delivered") + a("taken") + a("dropped") + a("waiting"),
        "{report}"
    );
    assert!(a("asks_raised") > 60, "{report}");
    // Resumes, cancels and expiries all happened, and the long asks are still open.
    for what in ["resumed", "cancelled", "expired", "delivered", "open"] {
        assert!(a(what) > 0, "no asks or outcomes {what}: {report}");
    }
    // The baseline ran beside, and the ratios are read off it.
    assert!(n("/baseline/requests") > 0, "{report}");
    assert_eq!(
        report["baseline"]["errors"],
        serde_json::json!({}),
        "{report}"
    );
    assert!(report["rate_vs_baseline"].as_f64().is_some(), "{report}");
    assert!(n("/p50_us") <= n("/p99_us"), "{report}");
}

/// A wrong token, a token without the visit scope, an address nothing listens on, and a
/// server without the load's doors: each is refused before any load, named, without a
/// panic.
#[test]
fn bad_input_is_refused_by_name() {
    let server = serve("bad", true);
    let bare = serve("bare", false);
    let nothing = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        format!("http://{}", listener.local_addr().expect("its address"))
    };
    let cases: [(&str, &str, &str); 4] = [
        (
            &server.url,
            "not-a-known-token-0001",
            "refused the token (401",
        ),
        (&server.url, ANSWER_TOKEN, "the load needs the visit scope"),
        (&nothing, LOAD_TOKEN, "cannot reach"),
        (&bare.url, LOAD_TOKEN, "does not serve the load's workload"),
    ];
    for (url, token, named) in cases {
        let ran = load(&["--url", url, "--quiet", "--visits", "10"], token);
        assert_eq!(ran.code, Some(2), "{named}: {}\n{}", ran.stdout, ran.stderr);
        assert!(ran.stderr.contains(named), "{named}: {}", ran.stderr);
        assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    }
    // No token at all is named too.
    let ran = load(&["--url", &server.url, "--quiet"], "");
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(ran.stderr.contains("no token"), "{}", ran.stderr);
    // A short expiry the targets file has no branch for is named, with the file.
    let ran = load(
        &["--url", &server.url, "--quiet", "--short-ttl", "7s"],
        LOAD_TOKEN,
    );
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(
        ran.stderr.contains("know no ask with ttl 7s"),
        "{}",
        ran.stderr
    );
}

/// A token in the environment is no business of the in-process load.
#[test]
fn a_token_in_the_environment_leaves_the_in_process_load_alone() {
    let ran = load(
        &[
            "--quiet",
            "--subjects",
            "10",
            "--visits",
            "200",
            "--bare-for",
            "0s",
        ],
        LOAD_TOKEN,
    );
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.contains("lost        0"), "{}", ran.stdout);
}

/// `--mcp`: every call asks once and is answered in its round; each completes once with
/// its own answer, its subject is left empty, and the per-round latencies are reported.
#[test]
fn a_small_mcp_load_completes_every_call_once() {
    let server = serve("mcp", true);
    let ran = load(
        &[
            "--url",
            &server.url,
            "--mcp",
            "--json",
            "--quiet",
            "--concurrency",
            "8",
            "--visits",
            "300",
            "--bare-for",
            "100ms",
        ],
        LOAD_TOKEN,
    );
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let report: serde_json::Value =
        serde_json::from_str(ran.stdout.trim()).expect("one JSON report");
    assert_eq!(report["lost"], 0, "{report}");
    assert_eq!(report["errors"], serde_json::json!({}), "{report}");
    let a = &report["account"];
    assert_eq!(
        (&a["calls"], &a["completed"], &a["failed"]),
        (&300.into(), &300.into(), &0.into()),
        "{report}"
    );
    assert_eq!(a["entries_left"], 0, "{report}");
    for round in ["round1", "round2"] {
        let p50 = report[round]["p50_us"].as_u64().unwrap_or(0);
        assert!(p50 > 0, "{round}: {report}");
        assert!(
            p50 <= report[round]["p99_us"].as_u64().unwrap_or(0),
            "{report}"
        );
    }
    assert!(
        report["calls_per_sec"].as_f64().is_some_and(|r| r > 0.0),
        "{report}"
    );
}

/// `--mcp` against a server without the tool, or with a token that may not visit: named
/// before any call, exit 2; and `--mcp` without `--url` is refused by the parser.
#[test]
fn an_mcp_load_without_the_tool_is_refused_by_name() {
    let bare = serve("mcp-bare", false);
    let ran = load(&["--url", &bare.url, "--mcp", "--quiet"], LOAD_TOKEN);
    assert_eq!(ran.code, Some(2), "{}\n{}", ran.stdout, ran.stderr);
    assert!(
        ran.stderr.contains("load_ask") && ran.stderr.contains("load-targets.json"),
        "{}",
        ran.stderr
    );
    let server = serve("mcp-scope", true);
    let ran = load(&["--url", &server.url, "--mcp", "--quiet"], ANSWER_TOKEN);
    assert_eq!(ran.code, Some(2), "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stderr.contains("visit scope"), "{}", ran.stderr);
    let ran = load(&["--mcp", "--quiet"], LOAD_TOKEN);
    assert_eq!(ran.code, Some(2), "{}", ran.stderr);
    assert!(ran.stderr.contains("--url"), "{}", ran.stderr);
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
}
