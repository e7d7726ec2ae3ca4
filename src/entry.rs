//! A parked entry: one park on a subject, in exactly the shape the door contract sees.
//!
//! The shape is the page's: `id`, `status`, then, while the entry is a live ask, `to`,
//! `asked_by`, `question`, `answer_format`, `group_id` and `payload`. Unset optional
//! fields are absent, never `null`. What the runtime needs beyond that (the owning run,
//! the deadline, a buffered answer) lives beside the entry in the subject, not in it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a parked entry is waiting for.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryStatus {
    /// A pending ask.
    Asking,
    /// An ask being resumed (or answered while its group's siblings still ask).
    Running,
    /// A resolved run's waiting outcome holding a result.
    Finished,
    /// A resolved run's waiting outcome that raised.
    Failed,
}

impl EntryStatus {
    /// The status as it is written in an entry.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryStatus::Asking => "asking",
            EntryStatus::Running => "running",
            EntryStatus::Finished => "finished",
            EntryStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for EntryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who an ask is addressed to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum To {
    /// The run that called the asking run.
    Caller,
    /// A person, through the interactions inbox.
    User,
}

impl To {
    /// The addressee as it is written in an entry.
    pub fn as_str(self) -> &'static str {
        match self {
            To::Caller => "caller",
            To::User => "user",
        }
    }
}

/// One parked entry, serialised exactly as the door contract's `$parked` shows it.
///
/// ```
/// # use parkway::{Entry, EntryStatus, To};
/// let entry = Entry {
///     id: "i-42".into(),
///     status: EntryStatus::Asking,
///     to: Some(To::Caller),
///     asked_by: Some(vec!["main".into()]),
///     question: Some("proceed?".into()),
///     answer_format: Some("confirm".into()),
///     group_id: Some("g-1".into()),
///     payload: None,
/// };
/// assert_eq!(
///     serde_json::to_string(&entry).unwrap(),
///     r#"{"id":"i-42","status":"asking","to":"caller","asked_by":["main"],"question":"proceed?","answer_format":"confirm","group_id":"g-1"}"#
/// );
/// ```
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The interaction id, `i-…`.
    pub id: String,
    /// What the entry is waiting for.
    pub status: EntryStatus,
    /// Who the ask is addressed to; absent on a waiting outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<To>,
    /// Target names from the asking run up to the top of its chain, asker first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_by: Option<Vec<String>>,
    /// The question, when the ask has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The answer format, as metadata for the resolving run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_format: Option<String>,
    /// The group of asks raised by one activation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// The structured payload a caller ask carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
}

/// The one key of the payload of a wait's park ([`Ctx::wait`](crate::Ctx::wait)).
pub const WAIT_KEY: &str = "wait";

impl Entry {
    /// Whether this entry is a wait's park ([`Ctx::wait`](crate::Ctx::wait)): a caller
    /// ask with no question whose payload is `{"wait": <duration>}` alone. It asks
    /// nobody anything: its deadline resumes the run. A face shows it as work under
    /// way, not as a question.
    pub fn is_wait(&self) -> bool {
        self.to == Some(To::Caller)
            && self.question.is_none()
            && self
                .payload
                .as_ref()
                .and_then(Value::as_object)
                .is_some_and(|p| p.len() == 1 && p.get(WAIT_KEY).is_some_and(Value::is_string))
    }

    /// A waiting outcome: only an id and a status.
    pub(crate) fn waiting(id: String, status: EntryStatus) -> Self {
        Self {
            id,
            status,
            to: None,
            asked_by: None,
            question: None,
            answer_format: None,
            group_id: None,
            payload: None,
        }
    }
}
