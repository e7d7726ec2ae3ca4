//! The journal: what a run has done, as plain data, so a resume can replay it.
//!
//! A run never holds a live future while parked. Each activation replays the target from
//! the start against the journal: an ask already answered returns its recorded answer, a
//! step or call already made returns its recorded value, and the first operation past
//! the end of the journal runs for real and is appended. An operation that does not match
//! the entry standing at its place is a divergence, and fails the run loudly.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::record::RunRecord;

/// One journaled operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum JournalEntry {
    /// An ask and, once resolved, its answer.
    Ask {
        /// The interaction it parked as.
        interaction: String,
        /// Its question, checked on replay.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<String>,
        /// The answer, once resolved; a `null` answer is `Some(Value::Null)`.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "present"
        )]
        answer: Option<Value>,
    },
    /// A side effect and its result.
    Step {
        /// The step's name, checked on replay.
        name: String,
        /// What it returned: a value, or the error it raised.
        result: Result<Value, String>,
    },
    /// A child run and the record its activation ended with.
    Call {
        /// The child's target, checked on replay.
        target: String,
        /// The record (boxed: a record is large, and every journal entry is as large as
        /// the largest kind).
        record: Box<RunRecord>,
    },
}

impl JournalEntry {
    /// A short description for divergence errors.
    pub(crate) fn describe(&self) -> String {
        match self {
            JournalEntry::Ask { question, .. } => match question {
                Some(q) => format!("ask {q:?}"),
                None => "ask (payload only)".to_owned(),
            },
            JournalEntry::Step { name, .. } => format!("step {name:?}"),
            JournalEntry::Call { target, .. } => format!("call of {target:?}"),
        }
    }
}

/// A key that is present holds a value, even `null`; only an absent key is `None`.
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A run's journal, oldest operation first.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Journal {
    /// The operations.
    pub entries: Vec<JournalEntry>,
}
