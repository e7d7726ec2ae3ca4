//! The errors of each operation, one enum per operation.
//!
//! Messages are lowercase, without a trailing period, and name the thing at fault, so a
//! user can act on them: `interaction i-42 is not asking (status: finished)`.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ask::AskProblem;
use crate::entry::Status;
use crate::event::Settled;

/// A list of problems, displayed joined by `; `.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Problems<T>(pub Vec<T>);

impl<T: std::fmt::Display> std::fmt::Display for Problems<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// The suspension sentinel: the run parked and its activation should end.
///
/// Only the runtime makes one, so a target cannot fake a park; propagate it with `?`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    /// The interaction the ask parked as.
    pub(crate) interaction: String,
}

impl Suspension {
    /// The interaction id the ask parked as.
    pub fn interaction(&self) -> &str {
        &self.interaction
    }
}

/// Why an ask did not return an answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AskError {
    /// The ask parked: propagate this so the activation ends.
    #[error("the run parked on interaction {}", .0.interaction)]
    Suspended(Suspension),
    /// The ask was malformed; nothing was stored.
    #[error("invalid ask: {0}")]
    Invalid(Problems<AskProblem>),
    /// The ceiling was reached; nothing was stored.
    #[error("{setting} reached: limit is {limit}, ask refused")]
    AtCap {
        /// The setting that bounds it.
        setting: &'static str,
        /// Its value.
        limit: usize,
    },
    /// The replay met another ask than the one recorded at its place; the run fails.
    #[error("{0}")]
    Diverged(String),
    /// The run was torn down while asking.
    #[error("run {run} was cancelled")]
    Cancelled {
        /// The run.
        run: String,
    },
}

/// Why a run ended without a result: what a target returns as its error.
///
/// Any `std::error::Error` converts into a failure with `?`, and so does an
/// [`AskError`] (a suspension stays a suspension).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunError {
    /// The run parked; its activation ends.
    Suspended(Suspension),
    /// The run failed with this message.
    Failed(String),
}

impl RunError {
    /// A failure with `message`.
    pub fn fail(message: impl Into<String>) -> Self {
        RunError::Failed(message.into())
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Suspended(s) => write!(f, "the run parked on interaction {}", s.interaction),
            RunError::Failed(m) => f.write_str(m),
        }
    }
}

impl From<AskError> for RunError {
    fn from(e: AskError) -> Self {
        match e {
            AskError::Suspended(s) => RunError::Suspended(s),
            other => RunError::Failed(other.to_string()),
        }
    }
}

impl From<Suspension> for RunError {
    fn from(s: Suspension) -> Self {
        RunError::Suspended(s)
    }
}

impl From<serde_json::Error> for RunError {
    fn from(e: serde_json::Error) -> Self {
        RunError::Failed(e.to_string())
    }
}

impl From<String> for RunError {
    fn from(m: String) -> Self {
        RunError::Failed(m)
    }
}

impl From<&str> for RunError {
    fn from(m: &str) -> Self {
        RunError::Failed(m.to_owned())
    }
}

/// Why a run could not be started.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StartError {
    /// No target of that name is registered.
    #[error("unknown target {0}")]
    UnknownTarget(String),
    /// The extras name keys the target did not declare.
    #[error("target {target} does not declare extras key(s) {}", .keys.join(", "))]
    UndeclaredExtras {
        /// The target.
        target: String,
        /// The keys it did not declare.
        keys: Vec<String>,
    },
    /// The kwargs or extras were not JSON objects.
    #[error("{what} must be a JSON object")]
    NotAnObject {
        /// `kwargs` or `extras`.
        what: &'static str,
    },
    /// The runtime is shutting down.
    #[error("the runtime is stopped")]
    Stopped,
}

/// Why a named interaction could not be acted on.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum IdProblem {
    /// No parked entry of that id on the subject.
    #[error("unknown interaction {id} on subject {subject}")]
    Unknown {
        /// The id.
        id: String,
        /// The subject.
        subject: String,
    },
    /// The entry is not in the status the action needs.
    #[error("interaction {id} is not {wanted} (status: {status})")]
    WrongStatus {
        /// The id.
        id: String,
        /// What the action needs, e.g. `asking`.
        wanted: String,
        /// What it is.
        status: Status,
    },
    /// A resume payload carries the reserved expiry marker key.
    #[error("payload for interaction {id} carries the reserved key {key}")]
    ReservedKey {
        /// The id.
        id: String,
        /// The key.
        key: String,
    },
    /// The same id was named twice in one action.
    #[error("interaction {id} is named more than once")]
    Duplicate {
        /// The id.
        id: String,
    },
    /// The entry is gone, and the subject remembers how and when it was resolved: a
    /// retry of a resolution that already happened, told apart from an id never issued
    /// (`docs/semantics.md`, "Exactly-once resolution").
    #[error(
        "interaction {id} on subject {subject} already resolved ({how}) at {}",
        rfc3339(at)
    )]
    AlreadyResolved {
        /// The id.
        id: String,
        /// The subject.
        subject: String,
        /// How it was resolved.
        how: Settled,
        /// When.
        at: DateTime<Utc>,
    },
}

/// `at` as RFC 3339 text in UTC, as the rest of the runtime writes times.
pub(crate) fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Why a resume was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResumeError {
    /// The id is unknown, not asking, or the payload is reserved.
    #[error("{0}")]
    Refused(IdProblem),
    /// The runtime is shutting down.
    #[error("the runtime is stopped")]
    Stopped,
}

/// Why a take returned no result.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TakeError {
    /// The id is unknown or not a waiting outcome; nothing changed.
    #[error("{0}")]
    Refused(IdProblem),
    /// The waiting outcome was a failure: the taker fails as the resolved run did. The
    /// entry is removed.
    #[error("interaction {id} failed: {error}")]
    Failed {
        /// The id.
        id: String,
        /// The resolved run's error.
        error: String,
    },
    /// The runtime is shutting down.
    #[error("the runtime is stopped")]
    Stopped,
}

/// Why a cancel was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CancelError {
    /// Every problem with the named ids.
    #[error("{0}")]
    Refused(Problems<IdProblem>),
    /// The runtime is shutting down.
    #[error("the runtime is stopped")]
    Stopped,
}

/// Why a runtime could not be built.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting could not be read from the environment.
    #[error("{0}")]
    Settings(Problems<crate::settings::SettingsError>),
    /// An actor could not be spawned.
    #[error("could not start the {what} actor: {reason}")]
    Spawn {
        /// Which actor.
        what: &'static str,
        /// Why.
        reason: String,
    },
}
