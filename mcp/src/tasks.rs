//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a call that would
//! keep its caller waiting becomes a task, and a task is its run (`docs/mcp.md`, "Tasks").
//!
//! A call of a tool whose spec allows tasks ([`parkway::TaskSupport`]), from a client
//! that declares the extension on the request, answers `CreateTaskResult` as soon as
//! its run parks on a wait ([`parkway::Ctx::wait`]); a run that ends, or asks only
//! questions, first answers in the call as any call does (a result, a round). The task
//! id is sealed like a round's state and names the tool, the subject and the run, so
//! `tasks/get`, `tasks/update` and `tasks/cancel` find both after a restart, and an id
//! this server did not issue is unknown. Nothing about a task is kept beside its run:
//! its status is read off the run's record each time.
//!
//! | run record                          | task status      |
//! |-------------------------------------|------------------|
//! | `running`, `parked` on waits only   | `working`        |
//! | `suspended` (a person's answer)     | `working`        |
//! | `parked` with questions             | `input_required` |
//! | `succeeded`, `failed`               | `completed`      |
//! | a result that is no tool result     | `failed`         |
//! | `cancelled`                         | `cancelled`      |

use std::time::Duration;

use parkway::{Entry, EntryStatus, Event, RunRecord, RunStatus};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CancelTaskParams, CreateTaskResult, DetailedTask, GetTaskParams, GetTaskResult, InputRequests,
    JsonObject, Task, TaskPayload, TaskStatus, UpdateTaskParams,
};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::face::{Face, internal, run_meta};
use crate::round::{self, Answer};
use crate::state::TaskRef;

/// The poll interval a task suggests, in milliseconds.
const POLL_INTERVAL_MS: u64 = 500;

/// How long `tasks/cancel` waits for a run in the middle of an activation to park or
/// end, so that it can be cancelled.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// A run's open questions: its asks still asking, waits left out.
pub(crate) fn questions(record: &RunRecord) -> Vec<Entry> {
    record
        .asks
        .iter()
        .flatten()
        .filter(|e| e.status == EntryStatus::Asking && !e.is_wait())
        .cloned()
        .collect()
}

/// Whether the run stands on a wait.
pub(crate) fn waits(record: &RunRecord) -> bool {
    record.status == RunStatus::Parked
        && record
            .asks
            .iter()
            .flatten()
            .any(|e| e.status == EntryStatus::Asking && e.is_wait())
}

/// Whether the run is at work with nothing to ask: running, or parked on waits alone.
pub(crate) fn busy(record: &RunRecord) -> bool {
    record.status == RunStatus::Running || (waits(record) && questions(record).is_empty())
}

/// Whether `event` says something happened to `run`.
pub(crate) fn about(event: &Event, run: &str) -> bool {
    match event {
        Event::RunFinished { run: r, .. }
        | Event::RunFailed { run: r, .. }
        | Event::RunCancelled { run: r, .. }
        | Event::AskParked { run: r, .. }
        | Event::RunProgress { run: r, .. } => r == run,
        _ => false,
    }
}

/// Each open question keyed as a round keys it: the key its payload names, else its
/// interaction id; a key two asks name is the second one's interaction id.
fn keyed(asks: &[Entry]) -> Vec<(String, &Entry)> {
    let mut out: Vec<(String, &Entry)> = Vec::new();
    for entry in asks {
        let mut key = round::key(entry);
        if out.iter().any(|(k, _)| *k == key) {
            key = entry.id.clone();
        }
        out.push((key, entry));
    }
    out
}

fn unknown(why: impl Into<String>) -> McpError {
    McpError::invalid_params(why.into(), None)
}

impl Face {
    /// The task of `record`'s run, as a call's answer.
    pub(crate) fn create_task(
        &self,
        tool: &str,
        subject: &str,
        record: &RunRecord,
    ) -> CreateTaskResult {
        let id = self.states.seal_task(&TaskRef {
            v: 1,
            tool: tool.to_owned(),
            subject: subject.to_owned(),
            run: record.run_id.clone(),
        });
        let status = if questions(record).is_empty() {
            TaskStatus::Working
        } else {
            TaskStatus::InputRequired
        };
        CreateTaskResult::new(self.task(&id, record, status))
            .with_meta(run_meta(subject, &record.run_id))
    }

    /// The task's plain fields.
    fn task(&self, id: &str, record: &RunRecord, status: TaskStatus) -> Task {
        let updated = record.finished_at.unwrap_or(record.started_at);
        let ttl = self.runtime.settings().waiting_retention.as_millis();
        Task::new(
            id,
            status,
            record.started_at.to_rfc3339(),
            updated.to_rfc3339(),
        )
        .with_ttl_ms(u64::try_from(ttl).unwrap_or(u64::MAX))
        .with_poll_interval_ms(POLL_INTERVAL_MS)
    }

    /// The task `id` names and its run's record; `-32602` for an id this server did
    /// not issue, or a run no longer kept.
    async fn open(&self, id: &str) -> Result<(TaskRef, RunRecord), McpError> {
        let task = self.states.open_task(id).map_err(unknown)?;
        let record = self
            .runtime
            .try_record(&task.run)
            .await
            .map_err(internal)?
            .ok_or_else(|| {
                unknown(format!(
                    "unknown task: run {} is no longer kept (its retention horizon passed)",
                    task.run
                ))
            })?;
        Ok((task, record))
    }

    /// `tasks/get`.
    pub(crate) async fn get(&self, params: GetTaskParams) -> Result<GetTaskResult, McpError> {
        let (task, record) = self.open(&params.task_id).await?;
        let payload = match record.status {
            RunStatus::Succeeded => {
                match self.content(&task.tool, record.result.clone().unwrap_or(Value::Null)) {
                    Ok(result) => TaskPayload::Completed {
                        result: object(serde_json::to_value(result).map_err(internal)?),
                    },
                    Err(why) => TaskPayload::Failed {
                        error: object(json!({"code": -32603, "message": why})),
                    },
                }
            }
            RunStatus::Failed => TaskPayload::Completed {
                result: object(serde_json::to_value(self.failure(&record)).map_err(internal)?),
            },
            RunStatus::Cancelled => TaskPayload::Cancelled,
            RunStatus::Parked => {
                let open = questions(&record);
                if open.is_empty() {
                    TaskPayload::Working
                } else {
                    let mut input_requests = InputRequests::new();
                    for (key, entry) in keyed(&open) {
                        let shape = round::shape(entry);
                        input_requests.insert(key, round::request(entry, &shape, None));
                    }
                    TaskPayload::InputRequired { input_requests }
                }
            }
            _ => TaskPayload::Working,
        };
        let mut base = self.task(&params.task_id, &record, payload.status());
        if record.status == RunStatus::Suspended {
            base = base.with_status_message(format!(
                "run {} waits for a person to answer in the inbox",
                record.run_id
            ));
        }
        let mut result = GetTaskResult::new(DetailedTask::new(base, payload));
        result.meta = Some(run_meta(&task.subject, &record.run_id));
        Ok(result)
    }

    /// `tasks/update`: resume each open question the responses answer. Every response
    /// is read before any is applied; a key that names no open question is ignored.
    pub(crate) async fn update(&self, params: UpdateTaskParams) -> Result<(), McpError> {
        let (task, record) = self.open(&params.task_id).await?;
        let open = questions(&record);
        let mut resumes = Vec::new();
        let mut refusals = Vec::new();
        let mut problems = Vec::new();
        for (key, entry) in keyed(&open) {
            let Some(response) = params.input_responses.get(&key) else {
                continue;
            };
            let shape = round::shape(entry);
            match round::answer(entry, &shape, response) {
                Answer::Resume(payload) => resumes.push((entry.id.clone(), payload)),
                Answer::Refused(_) => refusals.push(entry.id.clone()),
                Answer::Invalid(why) => problems.push(format!("{key}: {why}")),
            }
        }
        if !problems.is_empty() {
            return Err(McpError::invalid_params(
                format!(
                    "inputResponses refused, nothing applied: {}",
                    problems.join("; ")
                ),
                None,
            ));
        }
        if !refusals.is_empty() {
            // Declined or cancelled: the ask is cancelled, and the run's chain with it.
            let ids: Vec<&str> = refusals.iter().map(String::as_str).collect();
            self.runtime
                .cancel(&task.subject, &ids)
                .await
                .map_err(|why| McpError::invalid_params(why.to_string(), None))?;
            return Ok(());
        }
        for (id, payload) in resumes {
            // Partial answers buffer; the last answer of the group resumes the run,
            // and this returns once its next activation ended.
            self.runtime
                .resume(&task.subject, &id, payload)
                .await
                .map_err(|why| McpError::invalid_params(why.to_string(), None))?;
        }
        Ok(())
    }

    /// `tasks/cancel`: cancel every open park of the run (a whole-chain kill). A run in
    /// the middle of an activation is cancelled once the activation parks; one that
    /// ends meanwhile, or had ended, is left as it ended.
    pub(crate) async fn cancel(&self, params: CancelTaskParams) -> Result<(), McpError> {
        let (task, _) = self.open(&params.task_id).await?;
        let mut events = self.runtime.events();
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        loop {
            let Some(record) = self.runtime.try_record(&task.run).await.map_err(internal)? else {
                return Ok(());
            };
            let ids: Vec<String> = match record.status {
                RunStatus::Parked => record
                    .asks
                    .iter()
                    .flatten()
                    .filter(|e| e.status == EntryStatus::Asking)
                    .map(|e| e.id.clone())
                    .collect(),
                RunStatus::Suspended => record
                    .suspension
                    .as_ref()
                    .map(|s| s.interactions.clone())
                    .unwrap_or_default(),
                RunStatus::Running => Vec::new(),
                _ => return Ok(()),
            };
            if !ids.is_empty() {
                let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
                match self.runtime.cancel(&task.subject, &refs).await {
                    Ok(()) => return Ok(()),
                    // Resolved meanwhile (a wait ran out, an answer came): read again
                    // once the run moved.
                    Err(parkway::CancelError::Refused(_)) => {}
                    Err(why) => return Err(internal(why)),
                }
            }
            // Until an event about the run, or the bound.
            loop {
                match tokio::time::timeout_at(deadline, events.recv()).await {
                    Err(_) => {
                        return Err(internal(format!(
                            "run {} did not park or end within {}s to be cancelled",
                            task.run,
                            CANCEL_WAIT.as_secs()
                        )));
                    }
                    Ok(Ok(event)) if !about(&event, &task.run) => continue,
                    Ok(Err(RecvError::Closed)) => return Err(internal("the runtime stopped")),
                    Ok(_) => break,
                }
            }
        }
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => {
            let mut map = JsonObject::new();
            map.insert("value".to_owned(), other);
            map
        }
    }
}
