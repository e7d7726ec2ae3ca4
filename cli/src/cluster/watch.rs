//! The watcher: one client that follows the event stream (`GET /v1/events`) from the
//! log's first entry through every fault, as a stream client does: when its node dies,
//! freezes or stops sending (a node cut off from the database reads no log), it goes to
//! the next node and resumes with `Last-Event-ID`. It checks the contract of the stream
//! across failover: frame ids follow on one by one (no gap, no duplicate, no `reset`),
//! and at the end it has read up to the log's last entry. Its account of the asks'
//! frames is checked against the ledger ([`Streamed::check`]).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ledger::Ledger;
use super::nodes::TOKEN;

/// How long a stream may send nothing before the watcher goes to another node: past
/// the nodes' keep-alive would be too late to notice a frozen node while the load runs,
/// and a quiet stream costs only a reconnection.
const IDLE: Duration = Duration::from_secs(3);

/// How long the watcher may take to read up to the log's last entry at the end.
const CATCH_UP: Duration = Duration::from_secs(60);

/// What the watcher read.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Streamed {
    /// Frames read.
    pub frames: u64,
    /// The last frame id read.
    pub last: u64,
    /// Times it went to another node, by why.
    pub reconnections: BTreeMap<String, u64>,
    /// What broke the contract.
    pub violations: Vec<String>,
    /// `ask_parked` frames per interaction.
    #[serde(skip)]
    parked: HashMap<String, u32>,
    /// `ask_resolved` frames per interaction, with how.
    #[serde(skip)]
    resolved: HashMap<String, Vec<String>>,
}

impl Streamed {
    /// Checks the asks' frames against the ledger: every ask whose start was
    /// acknowledged was shown parked once and resolved once (every ask is resolved by
    /// the end), and no ask was shown parked or resolved twice.
    pub(crate) fn check(&mut self, ledger: &Ledger) {
        let mut wrong = Vec::new();
        for ask in ledger.asks.keys() {
            let parked = self.parked.get(ask).copied().unwrap_or(0);
            let resolved = self.resolved.get(ask).map_or(&[][..], Vec::as_slice);
            if parked != 1 || resolved.len() != 1 {
                wrong.push(format!(
                    "ask {ask}: the stream showed it parked {parked} times and resolved {} times ({resolved:?})",
                    resolved.len()
                ));
            }
        }
        for (ask, parked) in &self.parked {
            if *parked > 1 && !ledger.asks.contains_key(ask) {
                wrong.push(format!(
                    "ask {ask}: the stream showed it parked {parked} times"
                ));
            }
        }
        for (ask, resolved) in &self.resolved {
            if resolved.len() > 1 && !ledger.asks.contains_key(ask) {
                wrong.push(format!(
                    "ask {ask}: the stream showed it resolved {resolved:?}"
                ));
            }
        }
        self.violations.extend(wrong);
    }

    /// Files one frame.
    fn frame(&mut self, id: &str, kind: &str, data: &str) {
        self.frames += 1;
        if kind == "reset" {
            self.violations.push(format!(
                "after frame {} the stream was reset: {data}",
                self.last
            ));
        }
        let Ok(id) = id.parse::<u64>() else {
            if kind != "reset" {
                self.violations
                    .push(format!("a {kind} frame without an id after {}", self.last));
            }
            return;
        };
        if id != self.last + 1 {
            self.violations.push(format!(
                "frame {id} came after frame {} ({})",
                self.last,
                if id <= self.last {
                    "a duplicate"
                } else {
                    "a gap"
                }
            ));
        }
        if id <= self.last {
            return;
        }
        self.last = id;
        let Ok(data) = serde_json::from_str::<Value>(data) else {
            self.violations
                .push(format!("frame {id} is not JSON: {data}"));
            return;
        };
        let interaction = data["interaction"].as_str().unwrap_or_default().to_string();
        match kind {
            "ask_parked" => *self.parked.entry(interaction).or_default() += 1,
            "ask_resolved" => self
                .resolved
                .entry(interaction)
                .or_default()
                .push(data["how"].as_str().unwrap_or_default().to_string()),
            _ => {}
        }
    }
}

/// The watcher, running.
pub(crate) struct Watcher {
    /// Where to stop: the log's last entry, once known.
    until: watch::Sender<Option<u64>>,
    task: JoinHandle<Streamed>,
}

impl Watcher {
    /// Starts following the stream through `nodes` (their base URLs), from the log's
    /// first entry.
    pub(crate) fn start(nodes: Vec<String>) -> Result<Watcher, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .build()
            .map_err(|e| format!("the HTTP client: {e}"))?;
        let (until, stop) = watch::channel(None);
        let task = tokio::spawn(follow(http, nodes, stop));
        Ok(Watcher { until, task })
    }

    /// Reads up to entry `last` (the log's last, read once the cluster is quiet), then
    /// stops and says what it read.
    pub(crate) async fn finish(self, last: u64) -> Streamed {
        let _ = self.until.send(Some(last));
        match tokio::time::timeout(CATCH_UP, self.task).await {
            Ok(Ok(streamed)) => streamed,
            Ok(Err(e)) => Streamed {
                violations: vec![format!("the watcher failed: {e}")],
                ..Streamed::default()
            },
            Err(_) => Streamed {
                violations: vec![format!(
                    "the watcher did not read up to the log's last entry ({last}) within {CATCH_UP:?}"
                )],
                ..Streamed::default()
            },
        }
    }
}

/// Follows the stream, node after node, until `stop` names an entry it has read.
async fn follow(
    http: reqwest::Client,
    nodes: Vec<String>,
    mut stop: watch::Receiver<Option<u64>>,
) -> Streamed {
    let mut streamed = Streamed::default();
    let mut node = 0;
    loop {
        let done = |streamed: &Streamed, stop: &watch::Receiver<Option<u64>>| {
            stop.borrow().is_some_and(|until| streamed.last >= until)
        };
        if done(&streamed, &stop) {
            return streamed;
        }
        let request = http
            .get(format!("{}/v1/events", nodes[node]))
            .bearer_auth(TOKEN)
            .header("Last-Event-ID", streamed.last.to_string());
        let opened = tokio::time::timeout(IDLE, request.send()).await;
        let mut frames = match opened {
            Ok(Ok(response)) if response.status().is_success() => {
                response.bytes_stream().eventsource()
            }
            other => {
                let why = match other {
                    Ok(Ok(response)) => format!("answered {}", response.status().as_u16()),
                    Ok(Err(_)) => "could not connect".to_string(),
                    Err(_) => "did not answer".to_string(),
                };
                *streamed.reconnections.entry(why).or_default() += 1;
                node = (node + 1) % nodes.len();
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        loop {
            if done(&streamed, &stop) {
                return streamed;
            }
            let next = tokio::select! {
                next = tokio::time::timeout(IDLE, frames.next()) => next,
                _ = stop.changed() => continue,
            };
            let why = match next {
                Ok(Some(Ok(frame))) => {
                    streamed.frame(&frame.id, &frame.event, &frame.data);
                    continue;
                }
                // Ended, broken or quiet: another node.
                Ok(None) => "ended",
                Ok(Some(Err(_))) => "broke",
                Err(_) => "quiet",
            };
            *streamed.reconnections.entry(why.to_string()).or_default() += 1;
            break;
        }
        node = (node + 1) % nodes.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames that follow on are filed; a gap, a duplicate and a reset are named; the
    /// asks' frames are checked against the ledger.
    #[test]
    fn the_stream_s_contract_is_checked_frame_by_frame() {
        let mut s = Streamed::default();
        s.frame("1", "ask_parked", r#"{"interaction": "i-1"}"#);
        s.frame(
            "2",
            "ask_resolved",
            r#"{"interaction": "i-1", "how": "resumed"}"#,
        );
        assert!(s.violations.is_empty(), "{:?}", s.violations);
        s.frame(
            "2",
            "ask_resolved",
            r#"{"interaction": "i-1", "how": "resumed"}"#,
        );
        s.frame("4", "run_finished", "{}");
        s.frame("", "reset", "{}");
        assert_eq!(s.violations.len(), 3, "{:?}", s.violations);
        assert!(s.violations[0].contains("a duplicate"));
        assert!(s.violations[1].contains("a gap"));
        assert!(s.violations[2].contains("reset"));
        assert_eq!(s.resolved["i-1"].len(), 1, "a duplicate is not filed");

        let mut ledger = Ledger::default();
        for ask in ["i-1", "i-2"] {
            ledger.asks.insert(
                ask.to_string(),
                super::super::ledger::Ask {
                    subject: 0,
                    run: "r".into(),
                    attempts: Vec::new(),
                },
            );
        }
        let mut s2 = s.clone();
        s2.violations.clear();
        s2.check(&ledger);
        assert_eq!(s2.violations.len(), 1, "{:?}", s2.violations);
        assert!(s2.violations[0].contains("i-2"));
    }
}
