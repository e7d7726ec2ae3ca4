//! The HTTP client of a `--url` run: one connection pool, kept alive, shared by every
//! visitor; the checks made before the load; and the answers it reads.

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::super::config::{LoadConfig, LoadError};
use super::super::workload::{self, Op};
use parkway::DoorSpec;

/// How long a connection may take to open: an unreachable server is named quickly.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a request may take in all. The server answers 408 past 30 s; this only
/// bounds a server that stopped answering.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The protocol revision the MCP mode speaks: the stateless one, with rounds.
pub(crate) const MCP_VERSION: &str = "2026-07-28";

/// Where a targets file with the load's workload is, for the errors that need it.
const TARGETS_FILE: &str = "examples/serve/load-targets.json";

/// The client, the server's address, and every URL the visits use, made once.
#[derive(Debug)]
pub(crate) struct Http {
    client: reqwest::Client,
    base: Url,
    auth: HeaderValue,
    /// Subject `i`'s visit URLs: through `work`, then through `sweep`.
    visits: Vec<[Url; 2]>,
    /// Subject `i`'s parked set.
    parked: Vec<Url>,
    healthz: Url,
    /// The MCP face.
    mcp: Url,
}

/// Why a request gave nothing the load can count.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// No answer: the connection failed or the request timed out.
    Transport(String),
    /// An error answer: the status, and the error's kind and message.
    Status {
        status: StatusCode,
        kind: String,
        message: String,
    },
    /// An answer that is not what `docs/http.md` documents.
    Garbled(String),
}

impl Failure {
    /// The kind the report files it under.
    pub(crate) fn kind(&self) -> String {
        match self {
            Failure::Transport(_) => "transport".to_owned(),
            Failure::Status { status, kind, .. } => format!("{} {kind}", status.as_u16()),
            Failure::Garbled(_) => "garbled".to_owned(),
        }
    }

    /// What went wrong, for a person.
    pub(crate) fn message(&self) -> String {
        match self {
            Failure::Transport(m) | Failure::Garbled(m) => m.clone(),
            Failure::Status { message, .. } => message.clone(),
        }
    }
}

/// An error and its sources, on one line: reqwest's own text names only the URL.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// What a route visit answered, as far as the load reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct VisitReply {
    /// The interactions cancelled.
    #[serde(default)]
    pub(crate) cancelled: Vec<String>,
    /// `nothing`, `resolved` or `started`.
    pub(crate) action: String,
    /// A start's record.
    #[serde(default)]
    pub(crate) record: Option<RecordReply>,
    /// A resolution's items.
    #[serde(default)]
    pub(crate) results: Vec<ItemReply>,
}

/// A run record, as far as the load reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct RecordReply {
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) asks: Vec<IdReply>,
    #[serde(default)]
    pub(crate) error: Option<String>,
}

/// Anything with an interaction id.
#[derive(Debug, Deserialize)]
pub(crate) struct IdReply {
    pub(crate) id: String,
}

/// One item of a resolution.
#[derive(Debug, Deserialize)]
pub(crate) struct ItemReply {
    /// `resumed`, `taken` or `take_failed`.
    pub(crate) op: String,
    pub(crate) id: String,
    /// A resume's next outcome: a run record, or `{"status": "buffered"}`.
    #[serde(default)]
    pub(crate) outcome: Option<OutcomeReply>,
}

/// A resume's next outcome, as far as the load reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct OutcomeReply {
    pub(crate) status: String,
}

/// One entry of a parked set.
#[derive(Debug, Deserialize)]
pub(crate) struct EntryReply {
    pub(crate) id: String,
    pub(crate) status: String,
}

/// An error answer's body.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorFields,
}

#[derive(Debug, Deserialize)]
struct ErrorFields {
    kind: String,
    message: String,
}

impl Http {
    /// A client of the server at `url` with `token`, for the subjects `{prefix}0` …
    /// `{prefix}{subjects - 1}`, and the checks' subject `probe`.
    pub(crate) fn new(
        url: &str,
        token: &str,
        prefix: &str,
        probe: &str,
        subjects: usize,
    ) -> Result<Http, LoadError> {
        let invalid = |why: String| LoadError::Invalid(format!("--url {url:?}: {why}"));
        let mut base = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        if base.scheme() != "http" {
            return Err(invalid(format!(
                "the scheme is {}, and the load speaks plain http (parkway serve has no TLS)",
                base.scheme()
            )));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(invalid(
                "give the server's address alone, without a query".into(),
            ));
        }
        // A base path (a server behind a prefix) keeps its segments: join below it.
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        if token.trim().is_empty() {
            return Err(LoadError::Invalid(
                "no token: give --token or PARKWAY_TOKEN, a token with the visit scope".into(),
            ));
        }
        let mut auth = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| LoadError::Invalid("the token is not a valid header value".into()))?;
        auth.set_sensitive(true);
        let join = |path: &str| {
            base.join(path)
                .map_err(|e| invalid(format!("cannot join {path}: {e}")))
        };
        let mut visits = Vec::with_capacity(subjects);
        let mut parked = Vec::with_capacity(subjects);
        // The subjects, then the probe's, which the checks visit.
        let names = (0..subjects)
            .map(|index| subject_name(prefix, index))
            .chain([probe.to_owned()]);
        for subject in names {
            let visit = |door: &str| join(&format!("v1/routes/{door}/visit?subject={subject}"));
            visits.push([visit(workload::WORK)?, visit(workload::SWEEP)?]);
            parked.push(join(&format!("v1/subjects/{subject}/parked"))?);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .tcp_nodelay(true)
            // The load measures the server, not a proxy the environment names.
            .no_proxy()
            .build()
            .map_err(|e| LoadError::Setup(format!("the HTTP client: {}", chain(&e))))?;
        Ok(Http {
            client,
            healthz: join("healthz")?,
            mcp: join("mcp")?,
            base,
            auth,
            visits,
            parked,
        })
    }

    /// The number of the probe's subject, which the checks visit: after the load's.
    fn probe(&self) -> usize {
        self.visits.len() - 1
    }

    /// The server's address, as given.
    pub(crate) fn base(&self) -> &Url {
        &self.base
    }

    /// Send a request with the token and read its answer as `T`.
    async fn send<T: DeserializeOwned>(
        &self,
        method: Method,
        url: Url,
        body: Option<Vec<u8>>,
    ) -> Result<T, Failure> {
        let mut request = self
            .client
            .request(method, url)
            .header(AUTHORIZATION, self.auth.clone());
        if let Some(body) = body {
            request = request.header(CONTENT_TYPE, "application/json").body(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failure::Transport(chain(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| Failure::Transport(chain(&e)))?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(body) => Failure::Status {
                    status,
                    kind: body.error.kind,
                    message: body.error.message,
                },
                Err(_) => Failure::Status {
                    status,
                    kind: "unknown".to_owned(),
                    message: format!(
                        "{status}: {}",
                        String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
                    ),
                },
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| {
            Failure::Garbled(format!(
                "a {status} answer that is not what docs/http.md documents: {e}"
            ))
        })
    }

    /// Visit `op`'s door on subject `subject` with `input`.
    pub(crate) async fn visit(
        &self,
        op: Op,
        subject: usize,
        input: &Value,
    ) -> Result<VisitReply, Failure> {
        let url = self.visits[subject][usize::from(op.door() != workload::WORK)].clone();
        // A JSON value always serialises.
        let body = serde_json::to_vec(input).unwrap_or_default();
        self.send(Method::POST, url, Some(body)).await
    }

    /// Subject `subject`'s parked set.
    pub(crate) async fn parked(&self, subject: usize) -> Result<Vec<EntryReply>, Failure> {
        self.send(Method::GET, self.parked[subject].clone(), None)
            .await
    }

    /// The parked set of `subject`, any subject.
    pub(crate) async fn parked_of(&self, subject: &str) -> Result<Vec<EntryReply>, Failure> {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .map_err(|()| Failure::Garbled("the server's address takes no path".into()))?
            .pop_if_empty()
            .extend(["v1", "subjects", subject, "parked"]);
        self.send(Method::GET, url, None).await
    }

    /// `GET /healthz`: the baseline's request, with the same headers as a visit's.
    pub(crate) async fn healthz(&self) -> Result<(), Failure> {
        self.send::<Value>(Method::GET, self.healthz.clone(), None)
            .await
            .map(drop)
    }

    /// A `tools/call` of the MCP face at `/mcp`, over the stateless wire of protocol
    /// 2026-07-28: a plain JSON-RPC `POST` with the protocol's headers (`params` carries
    /// its own `_meta`). The call's `result`, or its JSON-RPC error as a failure of kind
    /// `mcp CODE`.
    pub(crate) async fn tool_call(&self, id: u64, params: &Value) -> Result<Value, Failure> {
        let name = params
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params,
        });
        let response = self
            .client
            .post(self.mcp.clone())
            .header(AUTHORIZATION, self.auth.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header("MCP-Protocol-Version", MCP_VERSION)
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", name)
            // A JSON value always serialises.
            .body(serde_json::to_vec(&body).unwrap_or_default())
            .send()
            .await
            .map_err(|e| Failure::Transport(chain(&e)))?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| Failure::Transport(chain(&e)))?;
        let garbled = |why: String| {
            Failure::Garbled(format!(
                "a {status} answer to tools/call that is not a JSON-RPC response: {why}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        };
        let mut answer: Value = match serde_json::from_slice(&bytes) {
            Ok(answer) => answer,
            // Plain HTTP refusals (a bad token) have the HTTP face's error body.
            Err(_) if !status.is_success() => {
                return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                    Ok(body) => Failure::Status {
                        status,
                        kind: body.error.kind,
                        message: body.error.message,
                    },
                    Err(e) => garbled(e.to_string()),
                });
            }
            Err(e) => return Err(garbled(e.to_string())),
        };
        if let Some(error) = answer.get("error") {
            return Err(Failure::Status {
                status,
                kind: format!("mcp {}", error.get("code").unwrap_or(&Value::Null)),
                message: error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            });
        }
        match answer.get_mut("result").map(Value::take) {
            Some(result) if status.is_success() => Ok(result),
            _ => Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(body) => Failure::Status {
                    status,
                    kind: body.error.kind,
                    message: body.error.message,
                },
                Err(_) => garbled("no result".to_owned()),
            }),
        }
    }

    /// A door as the server saved it, or `None` when the token may not read doors.
    async fn door(&self, name: &str) -> Result<Option<DoorSpec>, LoadError> {
        let url = self
            .base
            .join(&format!("v1/doors/{name}"))
            .map_err(|e| LoadError::Invalid(format!("cannot join a door's path: {e}")))?;
        match self.send::<DoorSpec>(Method::GET, url, None).await {
            Ok(spec) => Ok(Some(spec)),
            Err(Failure::Status { status, .. }) if status == StatusCode::FORBIDDEN => Ok(None),
            Err(failure) => Err(self.refusal(&format!("reading door {name}"), failure)),
        }
    }

    /// What `failure` of a check says about the server or the token.
    pub(crate) fn refusal(&self, doing: &str, failure: Failure) -> LoadError {
        let base = &self.base;
        match failure {
            Failure::Transport(m) => LoadError::Unreachable(format!("cannot reach {base}: {m}")),
            Failure::Status {
                status, message, ..
            } if status == StatusCode::UNAUTHORIZED => LoadError::Token(format!(
                "{base} refused the token (401 while {doing}): {message}"
            )),
            Failure::Status {
                status, message, ..
            } if status == StatusCode::FORBIDDEN => LoadError::Token(format!(
                "the token may not visit on {base} (403 while {doing}): {message}; the load needs the visit scope"
            )),
            Failure::Status { kind, message, .. }
                if kind == "unknown_door" || kind == "unknown_target" =>
            {
                LoadError::Workload(format!(
                    "{base} does not serve the load's workload ({doing}: {message}); serve it with --targets {TARGETS_FILE}"
                ))
            }
            other => LoadError::Workload(format!(
                "{base} answered {doing} with {}: {}",
                other.kind(),
                other.message()
            )),
        }
    }

    /// Check that the server answers `GET /healthz` with the token's headers.
    pub(crate) async fn check_reachable(&self) -> Result<(), LoadError> {
        let base = &self.base;
        match self.healthz().await {
            Ok(()) => Ok(()),
            Err(Failure::Transport(m)) => {
                Err(LoadError::Unreachable(format!("cannot reach {base}: {m}")))
            }
            Err(other) => Err(LoadError::Workload(format!(
                "{base} is not a parkway server: GET /healthz answered {}: {}",
                other.kind(),
                other.message()
            ))),
        }
    }

    /// Check, before any load, that the server answers, takes the token, and serves the
    /// load's workload: its `/healthz`; a start through `work` of every kind of ask the
    /// load sends, on the subject `probe` (each must park one ask), and as many cancels
    /// through `sweep`, which leave it empty; and, when the token may read doors (admin
    /// scope), that both doors are the load's for `config.max_entries`. Whether the
    /// doors were read is returned.
    pub(crate) async fn check(&self, config: &LoadConfig) -> Result<bool, LoadError> {
        let base = &self.base;
        let probe = self.probe();
        self.check_reachable().await?;
        let short = humantime::format_duration(config.short_ttl).to_string();
        let mut starts = vec![workload::long_start()];
        if config.short_share > 0.0 {
            if config.resume_share < 1.0 {
                starts.push(workload::start_input(&short, "kill"));
            }
            if config.resume_share > 0.0 {
                starts.push(workload::start_input(&short, "resume"));
            }
        }
        for input in &starts {
            let doing = format!("a start through door {} with {input}", workload::WORK);
            let reply = self
                .visit(Op::Start, probe, input)
                .await
                .map_err(|f| self.refusal(&doing, f))?;
            let not_the_load = |what: String| {
                LoadError::Workload(format!(
                    "{base} does not serve the load's workload: {doing} {what}; serve it with --targets {TARGETS_FILE}"
                ))
            };
            let Some(record) = reply.record.filter(|_| reply.action == "started") else {
                return Err(not_the_load(format!("did {}", reply.action)));
            };
            if record.status == "failed" {
                // The script's own refusal of an expiry it has no branch for, a ceiling
                // reached: the run's error says which.
                return Err(LoadError::Workload(format!(
                    "{doing} failed on {base}: {}",
                    record.error.unwrap_or_default()
                )));
            }
            if record.status != "parked" || record.asks.len() != 1 {
                return Err(not_the_load(format!(
                    "gave a run {} with {} asks, where the load's target asks once and parks",
                    record.status,
                    record.asks.len()
                )));
            }
        }
        // The first cancel meets the long ask, the oldest, which cannot have expired: it
        // must cancel exactly one. The later ones clear the short asks, which a busy
        // server may have let expire first (then there is nothing to cancel).
        for (n, _) in starts.iter().enumerate() {
            let doing = format!("a cancel through door {}", workload::SWEEP);
            let reply = self
                .visit(Op::Cancel, probe, &serde_json::json!({"op": "cancel"}))
                .await
                .map_err(|f| self.refusal(&doing, f))?;
            let expected = if n == 0 { 1..=1 } else { 0..=1 };
            if !expected.contains(&reply.cancelled.len()) {
                return Err(LoadError::Workload(format!(
                    "{base} does not serve the load's workload: {doing} cancelled {} asks where the load's cancels one; serve it with --targets {TARGETS_FILE}",
                    reply.cancelled.len()
                )));
            }
        }
        let mut read = true;
        for (name, ours) in [workload::WORK, workload::SWEEP]
            .into_iter()
            .zip(workload::doors(config.max_entries))
        {
            match self.door(name).await? {
                None => read = false,
                Some(theirs) if theirs == ours => {}
                Some(theirs) => {
                    return Err(LoadError::Workload(format!(
                        "{base}'s door {name} is not the load's for --max-entries {}:{}\n(the doors of {TARGETS_FILE} are the load's for --max-entries 10)",
                        config.max_entries,
                        differences(&theirs, &ours)
                    )));
                }
            }
        }
        Ok(read)
    }
}

/// Where two doors differ: each field that does, with both values.
fn differences(theirs: &DoorSpec, ours: &DoorSpec) -> String {
    let (Ok(Value::Object(theirs)), Ok(Value::Object(ours))) =
        (serde_json::to_value(theirs), serde_json::to_value(ours))
    else {
        return "they differ".to_owned();
    };
    let mut keys: Vec<&String> = theirs.keys().chain(ours.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| theirs.get(*k) != ours.get(*k))
        .map(|k| {
            let show = |v: Option<&Value>| v.map_or("absent".to_owned(), Value::to_string);
            format!(
                "\n  its {k} is {}\n  the load's {}",
                show(theirs.get(k)),
                show(ours.get(k))
            )
        })
        .collect()
}

/// Subject `index`'s name under `prefix`.
pub(crate) fn subject_name(prefix: &str, index: usize) -> String {
    format!("{prefix}{index}")
}
