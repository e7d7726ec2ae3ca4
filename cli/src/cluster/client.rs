//! The client: starts, resumes and reads over HTTP, through whichever node it is told,
//! each answer sorted as acknowledged, refused or unknown ([`Answer`]).

use std::time::Duration;

use parkway::{Entry, RunRecord};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::ledger::Answer;
use super::nodes::TOKEN;

/// How long a request may take before its answer counts as unknown: past a node's lease,
/// so a frozen node is given up on, not waited for.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The target every run runs: it asks its caller once and returns the answer.
pub(crate) const TARGET: &str = "asker";

/// The targets file the nodes serve.
pub(crate) fn targets() -> Value {
    json!({
        "about": "parkway cluster's workload: one ask, answered by a resume whose payload the run returns",
        "targets": {
            TARGET: {
                "steps": [
                    {"ask": {"question": "proceed?", "expiry_at": "24h", "on_expiry": "kill"}, "as": "answer"},
                    {"return": {"answer": "$answer"}}
                ]
            }
        }
    })
}

/// The name of subject number `i`.
pub(crate) fn subject(i: usize) -> String {
    format!("s-{i}")
}

/// The HTTP client, shared by every task.
#[derive(Debug, Clone)]
pub(crate) struct Client {
    http: reqwest::Client,
    /// Each node's address.
    pub(crate) nodes: Vec<String>,
}

/// What a start was answered.
pub(crate) struct Started {
    pub(crate) answer: Answer,
    /// The run and its ask, when acknowledged as parked.
    pub(crate) parked: Option<(String, String)>,
}

impl Client {
    /// A client of `nodes`.
    pub(crate) fn new(nodes: Vec<String>) -> Result<Client, String> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .timeout(REQUEST_TIMEOUT)
            .pool_idle_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| format!("the HTTP client: {e}"))?;
        Ok(Client { http, nodes })
    }

    /// The bare client, for health checks.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Send `request` and read its body as JSON.
    async fn send(&self, request: reqwest::RequestBuilder) -> (Answer, Option<Value>) {
        let response = match request.bearer_auth(TOKEN).send().await {
            Ok(response) => response,
            // Never sent: nothing was made.
            Err(e) if e.is_connect() => return (Answer::Refused(format!("connect: {e}")), None),
            Err(e) => return (Answer::Unknown(format!("no answer: {e}")), None),
        };
        let status = response.status();
        let body: Option<Value> = response.json().await.ok();
        let field = |name: &str| {
            body.as_ref()
                .and_then(|b| b.pointer(&format!("/error/{name}")))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (kind, message) = (field("kind"), field("message"));
        let answer = if status.is_success() {
            Answer::Acked
        } else if status.is_client_error()
            // `docs/http.md`: a subject whose slot is moving is refused, nothing changed.
            || (status == StatusCode::SERVICE_UNAVAILABLE && kind == "not_owner")
        {
            Answer::Refused(format!("{status} {kind}: {message}"))
        } else {
            Answer::Unknown(format!("{status} {kind}: {message}"))
        };
        (answer, body)
    }

    /// Start a run on `subject` through node `node`.
    pub(crate) async fn start(&self, node: usize, subject: usize) -> Started {
        let url = format!("{}/v1/targets/{TARGET}/run", self.nodes[node]);
        let request = self
            .http
            .post(url)
            .json(&json!({"subject": self::subject(subject)}));
        let (answer, body) = self.send(request).await;
        let parked =
            match (&answer, body) {
                (Answer::Acked, Some(body)) => serde_json::from_value::<RunRecord>(body)
                    .ok()
                    .and_then(|record| {
                        let ask = record.asks.as_ref()?.first()?.id.clone();
                        Some((record.run_id, ask))
                    }),
                _ => None,
            };
        Started { answer, parked }
    }

    /// Resume `ask` of `subject` with `payload` through node `node`.
    pub(crate) async fn resume(
        &self,
        node: usize,
        subject: usize,
        ask: &str,
        payload: &str,
    ) -> Answer {
        let url = format!(
            "{}/v1/subjects/{}/parked/{ask}/resume",
            self.nodes[node],
            self::subject(subject)
        );
        self.send(self.http.post(url).json(&json!(payload))).await.0
    }

    /// Read run `run`'s record through node `node`, waiting up to `wait` for it to end.
    pub(crate) async fn record(
        &self,
        node: usize,
        run: &str,
        wait: Duration,
    ) -> Result<RunRecord, Answer> {
        let url = format!(
            "{}/v1/runs/{run}?wait={}ms",
            self.nodes[node],
            wait.as_millis()
        );
        match self.send(self.http.get(url)).await {
            (Answer::Acked, Some(body)) => serde_json::from_value(body)
                .map_err(|e| Answer::Unknown(format!("a run record that does not read: {e}"))),
            (answer, _) => Err(answer),
        }
    }

    /// List `subject`'s parked set through node `node`.
    pub(crate) async fn list(&self, node: usize, subject: usize) -> Result<Vec<Entry>, Answer> {
        let url = format!(
            "{}/v1/subjects/{}/parked",
            self.nodes[node],
            self::subject(subject)
        );
        match self.send(self.http.get(url)).await {
            (Answer::Acked, Some(body)) => {
                let entries = body.get("entries").cloned().unwrap_or(body);
                serde_json::from_value(entries)
                    .map_err(|e| Answer::Unknown(format!("a parked set that does not read: {e}")))
            }
            (answer, _) => Err(answer),
        }
    }
}
