//! [`Http`]: a scenario's steps played over HTTP against a `parkway serve` child in test
//! mode. Each action is the request a client would make; its answer is put in the shape
//! the in-process runtime gives, so the two transcripts compare line by line.

use std::path::{Path, PathBuf};

use parkway::sim::{Action, AfterStep, DataDir, Driver, Failure, HANG, Outcome, StartSpec};
use reqwest::{Method, StatusCode, Url};
use serde_json::{Map, Value, json};

use super::server::{Server, TOKEN};
use super::stream::Sse;

/// The platform events' stream.
const EVENTS: &str = "/v1/events";
/// The inbox's stream.
const FRAMES: &str = "/v1/interactions/stream";

/// The server, its data directory, and the streams read so far.
pub struct Http {
    exe: PathBuf,
    scenario: PathBuf,
    data: DataDir,
    server: Option<Server>,
    client: reqwest::Client,
    events: Sse,
    frames: Sse,
    /// The last inbox frame id the server reported at a settle: a `frames` step reads
    /// up to it.
    frame_target: u64,
    /// The clock's reading at the last settle (a restarted server starts from it).
    now: Option<String>,
    /// Notes read while restarting, shown with the step's own.
    held_notes: Vec<String>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("scenario", &self.scenario)
            .field("base", &self.server.as_ref().map(|s| &s.base))
            .finish_non_exhaustive()
    }
}

/// A failure of the replay itself (the server, the connection), not of an operation.
fn broken(message: impl Into<String>) -> Failure {
    Failure::new("replay", message)
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Http {
    /// Start `exe serve` in test mode on the scenario file at `scenario`, in a fresh data
    /// directory, and open its streams.
    pub async fn start(exe: &Path, scenario: &Path) -> Result<Http, String> {
        let data = DataDir::fresh()?;
        let server = Server::start(exe, scenario, data.path(), None).await?;
        let client = reqwest::Client::new();
        let events = Sse::open(&client, &server.base, EVENTS, 0).await?;
        let frames = Sse::open(&client, &server.base, FRAMES, 0).await?;
        Ok(Http {
            exe: exe.to_owned(),
            scenario: scenario.to_owned(),
            data,
            server: Some(server),
            client,
            events,
            frames,
            frame_target: 0,
            now: None,
            held_notes: Vec::new(),
        })
    }

    /// Stop the server.
    pub async fn stop(mut self) -> Result<(), String> {
        match self.server.take() {
            Some(server) => server.stop().await,
            None => Ok(()),
        }
    }

    fn base(&self) -> Result<&str, Failure> {
        self.server
            .as_ref()
            .map(|s| s.base.as_str())
            .ok_or_else(|| broken("the server is not running (a restart failed)"))
    }

    /// The URL of `segments` (each percent-encoded) with `query`.
    fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Result<Url, Failure> {
        let mut url = Url::parse(self.base()?).map_err(|e| broken(e.to_string()))?;
        url.path_segments_mut()
            .map_err(|()| broken("the server's address takes no path"))?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// The URL of `verb` on a subject's parked entry.
    fn parked(
        &self,
        subject: &Value,
        id: &Value,
        verb: &str,
        query: &[(&str, String)],
    ) -> Result<Url, Failure> {
        let (subject, id) = (text(subject), text(id));
        self.url(&["v1", "subjects", &subject, "parked", &id, verb], query)
    }

    /// One request: its status and JSON answer (`null` for an empty one).
    async fn call(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<(StatusCode, Value), Failure> {
        let path = url.path().to_owned();
        let mut request = self
            .client
            .request(method, url)
            .bearer_auth(TOKEN)
            .timeout(HANG);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request
            .send()
            .await
            .map_err(|e| broken(format!("{path}: {e}")))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| broken(format!("{path}: {e}")))?;
        let value = match bytes.is_empty() {
            true => Value::Null,
            false => serde_json::from_slice(&bytes).map_err(|e| {
                broken(format!(
                    "{path}: {status} with an answer that is not JSON: {e}"
                ))
            })?,
        };
        Ok((status, value))
    }

    /// A request whose success answer is the output as it is; an error answer is the
    /// failure it names.
    async fn plain(&self, method: Method, url: Url, body: Option<&Value>) -> Outcome {
        let (status, value) = self.call(method, url, body).await?;
        answer(status, value)
    }

    /// The runtime's counters, read from `/metrics`.
    async fn stats(&self) -> Result<Map<String, Value>, Failure> {
        let url = self.url(&["metrics"], &[])?;
        let text = self
            .client
            .get(url)
            .bearer_auth(TOKEN)
            .timeout(HANG)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|e| broken(format!("/metrics: {e}")))?
            .text()
            .await
            .map_err(|e| broken(format!("/metrics: {e}")))?;
        let sample = |name: &str| -> Result<Value, Failure> {
            text.lines()
                .find_map(|line| {
                    let (key, value) = line.rsplit_once(' ')?;
                    (key == name).then(|| value.parse::<u64>().ok())?
                })
                .map(Value::from)
                .ok_or_else(|| broken(format!("/metrics has no sample {name}")))
        };
        let mut stats = Map::new();
        for (key, name) in [
            ("caller_open", "parkway_asks_open{to=\"caller\"}"),
            ("user_open", "parkway_asks_open{to=\"user\"}"),
            ("live_subjects", "parkway_subjects{state=\"live\"}"),
            ("passive_subjects", "parkway_subjects{state=\"passive\"}"),
            ("runs", "parkway_runs"),
            ("timers", "parkway_timers"),
            ("records", "parkway_run_records"),
            ("passivations", "parkway_passivations_total"),
        ] {
            stats.insert(key.to_owned(), sample(name)?);
        }
        Ok(stats)
    }

    /// Settle the server: `POST /v1/test/settle` after the last event read.
    async fn settled(&mut self) -> Result<Value, Failure> {
        let url = self.url(
            &["v1", "test", "settle"],
            &[("after", self.events.last.to_string())],
        )?;
        let (status, value) = self.call(Method::POST, url, None).await?;
        if !status.is_success() {
            return Err(broken(format!("/v1/test/settle: {status} {value}")));
        }
        if let Some(id) = value["last_frame_id"].as_u64() {
            self.frame_target = self.frame_target.max(id);
        }
        if let Some(now) = value["now"].as_str() {
            self.now = Some(now.to_owned());
        }
        Ok(value)
    }

    /// Stop the server (SIGTERM), start it again on the data directory at the clock's
    /// reading, resume both streams after what they read, and read its counters.
    async fn restart(&mut self) -> Outcome {
        if let Some(server) = self.server.take() {
            server.stop().await.map_err(broken)?;
        }
        let server = Server::start(
            &self.exe,
            &self.scenario,
            self.data.path(),
            self.now.as_deref(),
        )
        .await
        .map_err(broken)?;
        self.events = Sse::open(&self.client, &server.base, EVENTS, self.events.last)
            .await
            .map_err(broken)?;
        self.frames = Sse::open(&self.client, &server.base, FRAMES, self.frames.last)
            .await
            .map_err(broken)?;
        self.server = Some(server);
        let settled = self.settled().await?;
        self.held_notes.extend(notes(&settled));
        let stats = self.stats().await?;
        Ok(json!({
            "caller_open": stats["caller_open"],
            "user_open": stats["user_open"],
            "runs": stats["runs"],
        }))
    }
}

/// The notes a settle answered.
fn notes(settled: &Value) -> Vec<String> {
    settled["notes"]
        .as_array()
        .map(|n| n.iter().map(text).collect())
        .unwrap_or_default()
}

/// A success's answer as the output; an error's `{"error": {kind, message}}` as the
/// failure.
fn answer(status: StatusCode, value: Value) -> Outcome {
    if status.is_success() {
        return Ok(value);
    }
    let error = &value["error"];
    match (error["kind"].as_str(), error["message"].as_str()) {
        (Some(kind), Some(message)) => Err(Failure::new(kind, message)),
        _ => Err(broken(format!(
            "{status} with an answer that is no error: {value}"
        ))),
    }
}

/// A tool door's body.
fn tool_call(spec: &StartSpec) -> Value {
    let mut body =
        json!({"subject": text(&spec.subject), "kwargs": spec.kwargs, "extras": spec.extras});
    if let Some(identity) = &spec.identity {
        body["identity"] = json!(identity);
    }
    body
}

impl Driver for Http {
    async fn perform(&mut self, action: &Action) -> Outcome {
        match action {
            Action::Visit {
                door,
                subject,
                input,
            } => {
                let url = self.url(
                    &["v1", "routes", door, "visit"],
                    &[("subject", text(subject))],
                )?;
                self.plain(Method::POST, url, Some(input)).await
            }
            Action::Fire { topic, input } => {
                let url = self.url(&["v1", "hooks", topic], &[])?;
                let fired = self.plain(Method::POST, url, Some(input)).await?;
                // The hooks as the runtime lists them: each with its subject and visit.
                let hooks = fired["hooks"].as_array().cloned().unwrap_or_default();
                Ok(Value::Array(
                    hooks
                        .into_iter()
                        .map(|hook| {
                            let visit = match (hook["fired"].as_bool(), hook.get("error")) {
                                (Some(false), _) => json!({"skipped": "condition is false"}),
                                (_, Some(error)) => json!({"error": error}),
                                _ => hook["visit"].clone(),
                            };
                            let subject = hook.get("subject").cloned().unwrap_or(Value::Null);
                            json!({"door": hook["door"], "subject": subject, "visit": visit})
                        })
                        .collect(),
                ))
            }
            Action::Advance { text: by, .. } => {
                let url = self.url(&["v1", "test", "clock"], &[])?;
                self.plain(Method::POST, url, Some(&json!({"advance": by})))
                    .await
            }
            Action::Answer { id, answer } => {
                let url = self.url(&["v1", "interactions", &text(id), "answer"], &[])?;
                self.plain(Method::POST, url, Some(&json!({"answer": answer})))
                    .await
                    .map(|_| Value::Null)
            }
            Action::Parked { subject } => {
                let url = self.url(&["v1", "subjects", &text(subject), "parked"], &[])?;
                self.plain(Method::GET, url, None).await
            }
            Action::Record { run } => {
                let url = self.url(&["v1", "runs", &text(run)], &[])?;
                self.plain(Method::GET, url, None).await
            }
            Action::Run(spec) => {
                let url = self.url(&["v1", "targets", &spec.target, "run"], &[])?;
                self.plain(Method::POST, url, Some(&tool_call(spec))).await
            }
            Action::Submit(spec) => {
                let url = self.url(&["v1", "targets", &spec.target, "submit"], &[])?;
                self.plain(Method::POST, url, Some(&tool_call(spec))).await
            }
            Action::Resume {
                subject,
                id,
                payload,
                detached,
            } => {
                let query = match detached {
                    true => vec![("detached", "true".to_owned())],
                    false => Vec::new(),
                };
                let url = self.parked(subject, id, "resume", &query)?;
                let resumed = self.plain(Method::POST, url, Some(payload)).await?;
                Ok(if *detached { Value::Null } else { resumed })
            }
            Action::Take { subject, id } => {
                let url = self.parked(subject, id, "take", &[])?;
                let taken = self.plain(Method::POST, url, None).await?;
                match taken["status"].as_str() {
                    Some("failed") => Err(Failure::new(
                        "failed",
                        format!("interaction {} failed: {}", text(id), text(&taken["error"])),
                    )),
                    _ => Ok(taken["result"].clone()),
                }
            }
            Action::Cancel { subject, ids } => {
                let url = self.url(&["v1", "subjects", &text(subject), "cancel"], &[])?;
                self.plain(Method::POST, url, Some(&json!({"ids": ids})))
                    .await
                    .map(|_| Value::Null)
            }
            Action::SaveDoor(spec) => {
                let url = self.url(&["v1", "doors", &spec.name], &[])?;
                let body = serde_json::to_value(spec).map_err(|e| broken(e.to_string()))?;
                self.plain(Method::PUT, url, Some(&body))
                    .await
                    .map(|_| Value::Null)
            }
            Action::RemoveDoor(name) => {
                let url = self.url(&["v1", "doors", name], &[])?;
                let (status, value) = self.call(Method::DELETE, url, None).await?;
                match status {
                    StatusCode::NOT_FOUND => Ok(json!({"removed": false})),
                    _ => answer(status, value).map(|_| json!({"removed": true})),
                }
            }
            Action::Inbox { page, page_size } => {
                let mut query = vec![("page", page.to_string())];
                if let Some(size) = page_size {
                    query.push(("page_size", size.to_string()));
                }
                let url = self.url(&["v1", "interactions"], &query)?;
                self.plain(Method::GET, url, None).await
            }
            Action::Stats => self.stats().await.map(Value::Object),
            Action::Frames => self
                .frames
                .read_until(self.frame_target)
                .await
                .map(Value::Array)
                .map_err(broken),
            Action::Restart => self.restart().await,
            // An action this driver does not know yet is a failure of the replay.
            _ => Err(broken("an action the HTTP driver does not play")),
        }
    }

    async fn settle(&mut self) -> AfterStep {
        let mut notes_seen = std::mem::take(&mut self.held_notes);
        let settled = match self.settled().await {
            Ok(settled) => settled,
            Err(f) => {
                return AfterStep::new(
                    String::new(),
                    vec![json!({"replay": f.message})],
                    notes_seen,
                )
                .hung();
            }
        };
        notes_seen.extend(notes(&settled));
        let until = settled["last_event_id"]
            .as_u64()
            .unwrap_or(self.events.last);
        let events = match self.events.read_until(until).await {
            Ok(events) => events,
            Err(e) => vec![json!({"replay": e})],
        };
        let now = text(&settled["now"]);
        let after = AfterStep::new(now, events, notes_seen);
        match settled["settled"].as_bool() {
            Some(true) => after,
            _ => after.hung(),
        }
    }
}
