//! The MCP mode of a `--url` run (`parkway load --url URL --mcp`): every client calls
//! the tool `load_ask` of the server's MCP face at `/mcp`, whose run asks its caller
//! once, and answers the round.
//!
//! A call is two requests over the stateless wire of protocol 2026-07-28 (plain JSON-RPC
//! `POST`s with `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and the request's
//! `_meta`; no `initialize`, no session):
//!
//! 1. `tools/call` with `{ttl: "1h", on_expiry: "kill"}`: the answer must be
//!    `input_required`, with one input request (keyed by the ask's interaction id) and a
//!    `requestState`;
//! 2. the same call again with `inputResponses` (an accepted elicitation whose answer is
//!    a string made for this call) and the `requestState`: the answer must be the run's
//!    result, `{"answer": <that string>}`, from the same run.
//!
//! Round 1 is timed from when the call was due (with `--rate`, a call made late counts
//! its wait) to the round's answer; round 2 from the retry's sending to the result.
//!
//! The account: each call completed once with its own answer, or is a failure by kind;
//! no two calls met the same run or ask; and, once the calls end, every call's subject
//! (a fresh one per call: the tool names none) is listed and must be empty, the ask
//! resolved and the outcome handed to its caller, nothing left waiting. Before the load,
//! a call on its own checks the server: a full cycle, then its retry sent a second time,
//! which must be refused (the ask is no longer open) and change nothing.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::super::config::{LoadConfig, LoadError};
use super::super::drive::{self, Phase, Progress};
use super::super::report::{Latency, per_sec};
use super::http::{Failure, Http, MCP_VERSION};
use super::{Baseline, Server};

/// The tool the load calls: `asker` of `examples/serve/load-targets.json`.
pub(crate) const TOOL: &str = "load_ask";

/// Where a targets file with the tool is, for the errors that need it.
const TARGETS_FILE: &str = "examples/serve/load-targets.json";

/// The `_meta` keys of the face's answers naming the run and its subject.
const META_RUN: &str = "io.parkway/run";
const META_SUBJECT: &str = "io.parkway/subject";

/// The `_meta` every request of the stateless wire carries.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MCP_VERSION,
        "io.modelcontextprotocol/clientInfo": {"name": "parkway-load", "version": env!("CARGO_PKG_VERSION")},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    })
}

fn arguments() -> Value {
    json!({"ttl": "1h", "on_expiry": "kill"})
}

/// Round 1's params.
fn first(tool: &str) -> Value {
    json!({"name": tool, "arguments": arguments(), "_meta": meta()})
}

/// Round 2's params: `answer` to the ask keyed `key`, under `state`.
fn second(tool: &str, key: &str, state: &str, answer: &str) -> Value {
    json!({
        "name": tool,
        "arguments": arguments(),
        "requestState": state,
        "inputResponses": {key: {"action": "accept", "content": {"answer": answer}}},
        "_meta": meta(),
    })
}

/// What a round's answer named: the run and its subject (the face's `_meta`).
fn named(result: &Value, key: &str) -> Option<String> {
    result
        .get("_meta")
        .and_then(|m| m.get(key))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A round 1 read: the ask's key (its interaction id), the sealed state, the run and
/// its subject.
struct Round {
    key: String,
    state: String,
    run: String,
    subject: String,
}

/// Why a call did not complete: a kind for the report, and what came.
#[derive(Debug)]
struct Broken {
    kind: String,
    message: String,
}

fn broken(kind: &str, message: impl Into<String>) -> Broken {
    Broken {
        kind: kind.to_owned(),
        message: message.into(),
    }
}

fn failed(round: u8, failure: Failure) -> Broken {
    Broken {
        kind: format!("round {round}: {}", failure.kind()),
        message: failure.message(),
    }
}

/// The text of a tool error's first content block.
fn error_text(result: &Value) -> String {
    result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// Read round 1's answer.
fn read_round(result: &Value) -> Result<Round, Broken> {
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(broken("round 1: tool error", error_text(result)));
    }
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return Err(broken(
            "round 1: not input_required",
            format!("the first call answered {result}"),
        ));
    }
    let requests = result.get("inputRequests").and_then(Value::as_object);
    let (Some(requests), Some(state)) =
        (requests, result.get("requestState").and_then(Value::as_str))
    else {
        return Err(broken(
            "round 1: no request or state",
            format!("an input_required answer without inputRequests or requestState: {result}"),
        ));
    };
    let mut keys = requests.keys();
    let (Some(key), None) = (keys.next(), keys.next()) else {
        return Err(broken(
            "round 1: not one ask",
            format!(
                "{} input requests, where the tool asks once",
                requests.len()
            ),
        ));
    };
    let (Some(run), Some(subject)) = (named(result, META_RUN), named(result, META_SUBJECT)) else {
        return Err(broken(
            "round 1: no run named",
            format!("the round's _meta names no run or subject: {result}"),
        ));
    };
    Ok(Round {
        key: key.clone(),
        state: state.to_owned(),
        run,
        subject,
    })
}

/// Read round 2's answer: the result must be `{"answer": answer}` from `run`.
fn read_result(result: &Value, answer: &str, run: &str) -> Result<(), Broken> {
    if result.get("isError") == Some(&Value::Bool(true)) {
        return Err(broken("round 2: tool error", error_text(result)));
    }
    match result.get("resultType").and_then(Value::as_str) {
        None | Some("complete") => {}
        Some(other) => {
            return Err(broken(
                "round 2: not complete",
                format!("the retry answered {other}: {result}"),
            ));
        }
    }
    if result.get("structuredContent") != Some(&json!({"answer": answer})) {
        return Err(broken(
            "round 2: wrong result",
            format!("the retry answered with {answer:?} gave {result}"),
        ));
    }
    if named(result, META_RUN).as_deref() != Some(run) {
        return Err(broken(
            "round 2: another run",
            format!("round 1 was run {run}'s, the result names {result}"),
        ));
    }
    Ok(())
}

/// One call through both rounds: round 1's round and its latency, then round 2's.
async fn call(
    http: &Http,
    id: u64,
    answer: &str,
    due: Instant,
) -> (
    Result<Round, Broken>,
    u64,
    Option<(Result<(), Broken>, u64)>,
) {
    let one = http.tool_call(id * 2, &first(TOOL)).await;
    let first_us = micros(due);
    let round = match one {
        Ok(result) => read_round(&result),
        Err(failure) => Err(failed(1, failure)),
    };
    let Ok(r) = &round else {
        return (round, first_us, None);
    };
    let sent = Instant::now();
    let two = http
        .tool_call(id * 2 + 1, &second(TOOL, &r.key, &r.state, answer))
        .await;
    let second_us = micros(sent);
    let result = match two {
        Ok(result) => read_result(&result, answer, &r.run),
        Err(failure) => Err(failed(2, failure)),
    };
    (round, first_us, Some((result, second_us)))
}

fn micros(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_micros())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// What one client saw.
struct Client {
    /// Round 1's latencies, µs.
    first: Histogram<u64>,
    /// Round 2's.
    second: Histogram<u64>,
    /// Calls made.
    calls: u64,
    /// Calls that completed with their own answer.
    completed: u64,
    /// The run, ask and subject of every call that reached its round.
    runs: Vec<String>,
    asks: Vec<String>,
    subjects: Vec<String>,
    /// Failed calls by kind, with the first message.
    errors: BTreeMap<String, (u64, String)>,
}

impl Client {
    fn new() -> Client {
        Client {
            first: drive::histogram(),
            second: drive::histogram(),
            calls: 0,
            completed: 0,
            runs: Vec::new(),
            asks: Vec::new(),
            subjects: Vec::new(),
            errors: BTreeMap::new(),
        }
    }

    fn error(&mut self, broken: Broken) {
        self.errors
            .entry(broken.kind)
            .or_insert((0, broken.message))
            .0 += 1;
    }

    fn add(&mut self, other: Client) {
        // The same bounds: adding cannot fail.
        let _ = self.first.add(&other.first);
        let _ = self.second.add(&other.second);
        self.calls += other.calls;
        self.completed += other.completed;
        self.runs.extend(other.runs);
        self.asks.extend(other.asks);
        self.subjects.extend(other.subjects);
        for (kind, (n, message)) in other.errors {
            self.errors.entry(kind).or_insert((0, message)).0 += n;
        }
    }
}

/// Check, before the load, that the server's MCP face serves the tool and that a round
/// is resolved once: a full cycle on a call of its own, then its retry sent again, which
/// must be refused as no longer open.
async fn check(http: &Http) -> Result<(), LoadError> {
    let base = http.base();
    let doing = format!("a tools/call of {TOOL} at {base}mcp");
    let not_the_load = |what: String| {
        LoadError::Workload(format!(
            "{doing}: {what}; serve the tool with --targets {TARGETS_FILE}"
        ))
    };
    let one = match http.tool_call(1, &first(TOOL)).await {
        Ok(result) => result,
        Err(Failure::Status { kind, message, .. }) if kind == "mcp -32602" => {
            return Err(not_the_load(message));
        }
        Err(failure) => return Err(http.refusal(&doing, failure)),
    };
    let round = read_round(&one).map_err(|b| not_the_load(format!("{}: {}", b.kind, b.message)))?;
    let retry = second(TOOL, &round.key, &round.state, "probe");
    let two = http
        .tool_call(2, &retry)
        .await
        .map_err(|f| http.refusal(&doing, f))?;
    read_result(&two, "probe", &round.run)
        .map_err(|b| not_the_load(format!("{}: {}", b.kind, b.message)))?;
    let again = http
        .tool_call(3, &retry)
        .await
        .map_err(|f| http.refusal(&doing, f))?;
    if again.get("isError") != Some(&Value::Bool(true))
        || !error_text(&again).contains("no longer open")
    {
        return Err(LoadError::Workload(format!(
            "{doing}: a retry sent a second time, after its ask was resumed, must be refused \
             as no longer open; it answered {again}"
        )));
    }
    Ok(())
}

/// Run the MCP mode against `server`: the check, the `GET /healthz` baseline, the calls,
/// and the account. `config.concurrency`, `stop`, `rate`, `bare_for` and `workers` are
/// read; the door workload's settings are not.
pub async fn run(
    config: &LoadConfig,
    server: &Server,
    progress: &Arc<Progress>,
) -> Result<McpReport, LoadError> {
    config.check()?;
    let http = Arc::new(Http::new(
        &server.url,
        &server.token,
        "mcp-unused-",
        "probe",
        0,
    )?);
    http.check_reachable().await?;
    check(&http).await?;
    super::warm(&http, config.concurrency).await;
    progress.set_phase(Phase::Baseline);
    let baseline = super::baseline(&http, config).await;

    progress.set_phase(Phase::Visits);
    let tickets = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = JoinSet::new();
    for _ in 0..config.concurrency {
        let (http, tickets, progress) = (
            Arc::clone(&http),
            Arc::clone(&tickets),
            Arc::clone(progress),
        );
        let (stop, rate) = (config.stop, config.rate);
        tasks.spawn(async move {
            let mut client = Client::new();
            loop {
                let ticket = tickets.fetch_add(1, Ordering::Relaxed);
                let Some(due) = drive::due(ticket, start, stop, rate).await else {
                    break;
                };
                // Ids 1 to 3 are the check's.
                let answer = format!("yes-{ticket}");
                let (round, first_us, rest) = call(&http, ticket + 2, &answer, due).await;
                client.calls += 1;
                client.first.saturating_record(first_us);
                match round {
                    Ok(round) => {
                        client.runs.push(round.run);
                        client.asks.push(round.key);
                        client.subjects.push(round.subject);
                    }
                    Err(b) => client.error(b),
                }
                if let Some((result, second_us)) = rest {
                    client.second.saturating_record(second_us);
                    match result {
                        Ok(()) => client.completed += 1,
                        Err(b) => client.error(b),
                    }
                }
                progress.count_visit();
            }
            client
        });
    }
    let mut all = Client::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(client) => all.add(client),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => {}
        }
    }
    let seconds = start.elapsed().as_secs_f64();

    progress.set_phase(Phase::Settle);
    let left = left(&http, &all.subjects, config.concurrency).await;
    progress.set_phase(Phase::Done);
    Ok(McpReport::new(config, &http, all, seconds, left, baseline))
}

/// What the calls' subjects hold once the calls end: how many entries (of any status),
/// and the subjects that could not be read.
async fn left(http: &Arc<Http>, subjects: &[String], concurrency: usize) -> Left {
    let (http, subjects): (_, Arc<[String]>) = (Arc::clone(http), subjects.into());
    let read = super::left_on(subjects.len(), concurrency, move |n| {
        let (http, subjects) = (Arc::clone(&http), Arc::clone(&subjects));
        async move { http.parked_of(&subjects[n]).await }
    })
    .await;
    Left {
        entries: read.entries.len() as u64 + read.strange,
        unread: read.unread,
        unread_reason: read.unread_reason,
    }
}

/// What the calls' subjects hold once the calls end.
#[derive(Debug, Default)]
struct Left {
    entries: u64,
    unread: u64,
    unread_reason: Option<String>,
}

/// The account of the MCP mode.
#[derive(Debug, Clone, Serialize)]
pub struct McpAccount {
    /// Calls made (round 1 sent).
    pub calls: u64,
    /// Calls whose retry gave the run's result with the call's own answer.
    pub completed: u64,
    /// Calls that failed, in either round or with a wrong result.
    pub failed: u64,
    /// Calls whose round named a run another call's round named too.
    pub runs_twice: u64,
    /// Calls whose round named an ask another call's round named too.
    pub asks_twice: u64,
    /// Entries left on the calls' subjects once the calls ended (an ask not resolved,
    /// an outcome left waiting).
    pub entries_left: u64,
    /// Subjects that could not be listed.
    pub unread: u64,
    /// What went wrong, a line each.
    pub imbalances: Vec<String>,
}

/// What an MCP mode run measured. Serialised, it is the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct McpReport {
    /// The server.
    pub url: String,
    /// The tool called.
    pub tool: &'static str,
    /// Concurrent clients.
    pub concurrency: usize,
    /// Threads of the client's async runtime.
    pub workers: usize,
    /// Offered calls per second, if limited.
    pub offered_rate: Option<u64>,
    /// Calls made.
    pub calls: u64,
    /// Their wall-clock time.
    pub seconds: f64,
    /// Calls completed (both rounds) per second.
    pub calls_per_sec: f64,
    /// Round 1 (the call to its `input_required`), µs.
    pub round1: Latency,
    /// Round 2 (the retry to the result), µs.
    pub round2: Latency,
    /// Failed calls by kind, with the first message.
    pub errors: BTreeMap<String, (u64, String)>,
    /// The account.
    pub account: McpAccount,
    /// The sum of every imbalance in the account: must be 0.
    pub lost: u64,
    /// The `GET /healthz` baseline; absent with `--bare-for 0s`.
    pub baseline: Option<Baseline>,
}

/// How many of `ids` repeat one before them.
fn repeats(ids: &[String]) -> u64 {
    let mut seen = HashSet::with_capacity(ids.len());
    ids.iter().filter(|id| !seen.insert(id.as_str())).count() as u64
}

impl McpReport {
    fn new(
        config: &LoadConfig,
        http: &Http,
        client: Client,
        seconds: f64,
        left: Left,
        baseline: Option<Baseline>,
    ) -> McpReport {
        let failed: u64 = client.errors.values().map(|(n, _)| n).sum();
        let mut imbalances = Vec::new();
        let mut lost = 0;
        let mut flag = |n: u64, what: String| {
            if n > 0 {
                lost += n;
                imbalances.push(format!("{n} {what}"));
            }
        };
        let runs_twice = repeats(&client.runs);
        let asks_twice = repeats(&client.asks);
        flag(failed, "calls failed".into());
        flag(
            client.calls.abs_diff(client.completed + failed),
            "calls neither completed nor failed".into(),
        );
        flag(runs_twice, "calls met a run another call met".into());
        flag(asks_twice, "calls met an ask another call met".into());
        flag(
            left.entries,
            "entries left on the calls' subjects after the calls".into(),
        );
        flag(
            left.unread,
            format!(
                "subjects could not be listed: {}",
                left.unread_reason.unwrap_or_default()
            ),
        );
        McpReport {
            url: http.base().to_string(),
            tool: TOOL,
            concurrency: config.concurrency,
            workers: config.workers,
            offered_rate: config.rate,
            calls: client.calls,
            seconds,
            calls_per_sec: per_sec(client.completed, seconds),
            round1: Latency::of(&client.first),
            round2: Latency::of(&client.second),
            errors: client.errors,
            account: McpAccount {
                calls: client.calls,
                completed: client.completed,
                failed,
                runs_twice,
                asks_twice,
                entries_left: left.entries,
                unread: left.unread,
                imbalances,
            },
            lost,
            baseline,
        }
    }

    /// Whether every call completed once with its own answer and nothing was left.
    pub fn clean(&self) -> bool {
        self.lost == 0 && self.baseline.as_ref().is_none_or(|b| b.errors.is_empty())
    }
}

impl fmt::Display for McpReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.account;
        writeln!(
            f,
            "over MCP    {}mcp, tool {} (2026-07-28, stateless; a round each call)",
            self.url, self.tool
        )?;
        writeln!(
            f,
            "{} clients, {} client workers{}",
            self.concurrency,
            self.workers,
            self.offered_rate
                .map(|r| format!(", {r} calls/s offered"))
                .unwrap_or_default()
        )?;
        writeln!(
            f,
            "calls       {} in {:.2} s: {:.0} completed/s",
            self.calls, self.seconds, self.calls_per_sec
        )?;
        let show = |name: &str, l: &Latency| {
            format!(
                "{name}     p50 {} p99 {} max {} µs",
                l.p50_us, l.p99_us, l.max_us
            )
        };
        writeln!(f, "{}", show("round 1", &self.round1))?;
        writeln!(f, "{}", show("round 2", &self.round2))?;
        match &self.baseline {
            Some(b) => {
                writeln!(
                    f,
                    "healthz     {} in {:.2} s: {:.0} requests/s, p50 {} p99 {} max {} µs",
                    b.requests, b.seconds, b.requests_per_sec, b.p50_us, b.p99_us, b.max_us
                )?;
                for (kind, (n, message)) in &b.errors {
                    writeln!(f, "  healthz failed {kind} x{n}: {message}")?;
                }
            }
            None => writeln!(f, "healthz     not measured (--bare-for 0s)")?,
        }
        writeln!(
            f,
            "account     {} calls = {} completed + {} failed; {} entries left on their subjects",
            a.calls, a.completed, a.failed, a.entries_left
        )?;
        writeln!(f, "lost        {}", self.lost)?;
        for line in &a.imbalances {
            writeln!(f, "  imbalance: {line}")?;
        }
        for (kind, (n, message)) in &self.errors {
            writeln!(f, "  failed {kind} x{n}: {message}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round 1 answer as the face gives it, and the reads of each way it can be wrong.
    #[test]
    fn rounds_and_results_are_read_and_refused_by_kind() {
        let round = json!({
            "resultType": "input_required",
            "inputRequests": {"i-7": {"method": "elicitation/create", "params": {}}},
            "requestState": "sealed",
            "_meta": {META_RUN: "r-3", META_SUBJECT: "tool:load_ask:g-2"},
        });
        let r = read_round(&round).expect("a round");
        assert_eq!(
            (r.key.as_str(), r.state.as_str(), r.run.as_str()),
            ("i-7", "sealed", "r-3")
        );
        let mut two = round.clone();
        two["inputRequests"]["i-8"] = json!({});
        let mut done = round.clone();
        done["resultType"] = json!("complete");
        for (answer, kind) in [
            (two, "round 1: not one ask"),
            (done, "round 1: not input_required"),
            (
                json!({"isError": true, "content": [{"type": "text", "text": "no"}]}),
                "round 1: tool error",
            ),
        ] {
            assert_eq!(
                read_round(&answer).err().map(|b| b.kind).as_deref(),
                Some(kind)
            );
        }
        let result = json!({
            "resultType": "complete",
            "content": [],
            "structuredContent": {"answer": "yes-1"},
            "_meta": {META_RUN: "r-3"},
        });
        assert!(read_result(&result, "yes-1", "r-3").is_ok());
        for (answer, run, kind) in [
            ("yes-2", "r-3", "round 2: wrong result"),
            ("yes-1", "r-4", "round 2: another run"),
        ] {
            assert_eq!(
                read_result(&result, answer, run)
                    .err()
                    .map(|b| b.kind)
                    .as_deref(),
                Some(kind)
            );
        }
    }

    #[test]
    fn repeats_count_each_id_met_again() {
        let ids: Vec<String> = ["a", "b", "a", "a", "c"].map(str::to_owned).to_vec();
        assert_eq!(repeats(&ids), 2);
    }
}
