//! The errors of each operation, one enum per operation, and every operation error's
//! stable kind.
//!
//! Messages are lowercase, without a trailing period, and name the thing at fault, so a
//! user can act on them: `interaction i-42 is not asking (status: finished)`.
//!
//! A kind (`kind()` on each error) is the error's variant in snake case; an error about
//! one interaction id takes the id problem's kind (`unknown`, `wrong_status`,
//! `reserved_key`, `duplicate`, `too_deep`, `already_resolved`); an error about the data
//! directory takes the [`StoreFault`]'s (`corrupt`, `unreadable`, `not_owner`). Kinds are what the
//! simulation's transcripts and the load tool's report print, so they do not change
//! when a message's wording does. The kinds of the errors defined beside their
//! operations ([`VisitError`], [`SaveError`], [`AnswerError`]) are given here too, so
//! the whole table is in one place.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ask::AskProblem;
use crate::entry::EntryStatus;
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

/// A read of the data directory that an operation needed and could not make: the data
/// is damaged, or the store could not read it. The operation changed nothing, and a
/// subject that cannot be read back is never written over (`docs/durability.md`,
/// "Damage met while serving").
///
/// Damage also marks the runtime unhealthy ([`Runtime::health`](crate::Runtime::health)):
/// what was acknowledged may be unreadable, but it is never reported as never having
/// existed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StoreFault {
    /// The data read is damaged: a table block whose checksum does not match, bytes the
    /// engine or parkway cannot decode.
    #[error("the data directory is damaged: keyspace {keyspace}{}: {detail}", at_key(.key))]
    Corrupt {
        /// The keyspace read, by its name on disk (`subjects.4`, `records.4`, …).
        keyspace: String,
        /// The key read, as text, if the read named one.
        key: Option<String>,
        /// What was found.
        detail: String,
    },
    /// The store could not read the data, and not for damage (the disk or the system
    /// refused the read); it may succeed later.
    #[error("the data directory could not be read: keyspace {keyspace}: {detail}")]
    Unreadable {
        /// The keyspace read, by its name on disk.
        keyspace: String,
        /// What the store said.
        detail: String,
    },
    /// The subject's slot is not this runtime's now: it was given up, or the store
    /// refused this runtime's write to it because another process owns it. Nothing was
    /// changed; the operation may succeed later, here once the slot is taken back or on
    /// the process that owns it (`docs/durability.md`, "Slots and several processes").
    #[error(
        "{} is in slot {slot}, which this runtime does not own now",
        owned_by(subject)
    )]
    NotOwner {
        /// The subject operated on; empty where it is not known here (an answer to a
        /// user ask that this runtime never held, its id naming its slot).
        subject: String,
        /// Its slot's number.
        slot: u16,
    },
}

/// The subject as a refusal names it: the ask's, where it is not known.
fn owned_by(subject: &str) -> String {
    if subject.is_empty() {
        "the ask's subject".to_string()
    } else {
        format!("subject {subject:?}")
    }
}

/// ` at key "…"` for a key, or nothing.
fn at_key(key: &Option<String>) -> String {
    key.as_ref()
        .map(|k| format!(" at key {k:?}"))
        .unwrap_or_default()
}

impl StoreFault {
    /// The fault's stable kind: `corrupt`, `unreadable` or `not_owner`.
    pub fn kind(&self) -> &'static str {
        match self {
            StoreFault::Corrupt { .. } => "corrupt",
            StoreFault::Unreadable { .. } => "unreadable",
            StoreFault::NotOwner { .. } => "not_owner",
        }
    }

    /// The keyspace the failed read was of; empty for [`StoreFault::NotOwner`], which
    /// read nothing.
    pub fn keyspace(&self) -> &str {
        match self {
            StoreFault::Corrupt { keyspace, .. } | StoreFault::Unreadable { keyspace, .. } => {
                keyspace
            }
            StoreFault::NotOwner { .. } => "",
        }
    }

    /// Whether the data read is damaged (rather than not readable for now).
    pub fn is_corrupt(&self) -> bool {
        matches!(self, StoreFault::Corrupt { .. })
    }

    /// `subject`, of `slot`, which this runtime does not own now.
    pub(crate) fn not_owner(subject: &str, slot: crate::slot::Slot) -> StoreFault {
        StoreFault::NotOwner {
            subject: subject.to_owned(),
            slot: slot.number(),
        }
    }

    /// Damage found by parkway itself in `keyspace` at `key`: a value it wrote and cannot
    /// decode.
    pub(crate) fn corrupt(keyspace: &str, key: &str, detail: impl Into<String>) -> StoreFault {
        StoreFault::Corrupt {
            keyspace: keyspace.to_owned(),
            key: Some(key.to_owned()),
            detail: detail.into(),
        }
    }
}

/// Why a slot could not be given up or taken back ([`Runtime::unload_slot`],
/// [`Runtime::load_slot`]).
///
/// [`Runtime::unload_slot`]: crate::Runtime::unload_slot
/// [`Runtime::load_slot`]: crate::Runtime::load_slot
#[doc(hidden)]
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SlotError {
    /// No slot has the number.
    #[error("slot {0} does not exist: slots are numbered 0 to 1023")]
    NoSuchSlot(u16),
    /// A runtime in memory keeps its subjects nowhere else: unloading them would lose
    /// them.
    #[error("a runtime in memory cannot unload a slot: its subjects are kept nowhere else")]
    InMemory,
    /// The runtime is shut down.
    #[error("the runtime is shut down")]
    Stopped,
    /// The slot's subjects could not be read back; the slot is given up again.
    #[error("slot {slot} could not be read back: {reason}")]
    Unreadable {
        /// The slot's number.
        slot: u16,
        /// What failed.
        reason: String,
    },
}

/// The suspension sentinel: the run parked and its activation should end.
///
/// Only the runtime makes one, so a target cannot fake a park; propagate it with `?`.
/// It is an error like any other on its way out of a target (through `anyhow::Error` or
/// a `Box<dyn Error>`): [`RunError`] finds it again at the end of the way.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the run parked on interaction {interaction}")]
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
/// `?` converts into it from every `std::error::Error + Send + Sync + 'static` (an
/// `std::io::Error`, a `serde_json::Error`, the runtime's own errors), from
/// `anyhow::Error`, and from a `String` or `&str`: from whatever converts into a
/// `Box<dyn Error + Send + Sync>`. The error becomes a failure whose message is its own
/// followed by its sources', joined by `: `. The one exception is the suspension an
/// [`AskError::Suspended`] carries: found as the error itself or anywhere in its source
/// chain, it stays a suspension, whether the ask's error reached the target's end as
/// itself, inside an `anyhow::Error` (with or without context) or in a box. (A run that
/// raised an ask parks whatever its target returns.)
///
/// A target written against another error type is registered through a closure that
/// converts at its end:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use parkway::{Ask, Ctx, RunStatus, Runtime, Start};
/// use serde_json::{Value, json};
///
/// type BoxError = Box<dyn std::error::Error + Send + Sync>;
///
/// async fn deploy(ctx: Ctx, kwargs: Value) -> Result<Value, BoxError> {
///     let answer = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?;
///     Ok(json!({"service": kwargs["service"], "go": answer}))
/// }
///
/// let rt = Runtime::builder().without_env().build().await.unwrap();
/// rt.register("deploy", &[], |ctx, kwargs, _| async move { Ok(deploy(ctx, kwargs).await?) });
/// let record = rt.run(Start::new("s", "deploy")).await.unwrap();
/// assert_eq!(record.status, RunStatus::Parked);
/// # }
/// ```
///
/// Like `anyhow::Error`, `RunError` does not implement `std::error::Error` itself: a type
/// that did could not also convert from every type that does. An embedder meets it only
/// as what a target returns; a run that failed reaches the embedder as a
/// [`RunRecord`](crate::RunRecord), whose
/// [`into_result`](crate::RunRecord::into_result) gives an error that implements it.
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
            RunError::Suspended(s) => write!(f, "{s}"),
            RunError::Failed(m) => f.write_str(m),
        }
    }
}

impl<E> From<E> for RunError
where
    E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
{
    fn from(error: E) -> Self {
        let error: Box<dyn std::error::Error + Send + Sync + 'static> = error.into();
        match suspension(&*error) {
            Some(s) => RunError::Suspended(s),
            None => RunError::Failed(chain_message(&*error)),
        }
    }
}

/// The suspension in `error` or in its source chain.
fn suspension(error: &(dyn std::error::Error + 'static)) -> Option<Suspension> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(AskError::Suspended(s)) = error.downcast_ref::<AskError>() {
            return Some(s.clone());
        }
        if let Some(s) = error.downcast_ref::<Suspension>() {
            return Some(s.clone());
        }
        next = error.source();
    }
    None
}

/// `error`'s message followed by its sources', joined by `: `; a source whose message the
/// text already holds (an error that prints its source itself) is not repeated.
fn chain_message(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let part = source.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        next = source.source();
    }
    text
}

/// Why an operation a run performs through its [`Ctx`](crate::Ctx) gave no value: `step`,
/// `call` and `list_parked` (`E` is then [`Infallible`](std::convert::Infallible)), and
/// `resume_parked`, `take_parked` and `cancel_parked` (`E` is the resolution's own error).
///
/// It implements `std::error::Error`, so `?` carries it out of a target that returns a
/// [`RunError`], an `anyhow::Error` or a `Box<dyn Error>`, and the run fails with its
/// message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CtxError<E = std::convert::Infallible> {
    /// The resolution's own error: a refusal (nothing changed), or, for a take, the
    /// failed outcome taken.
    #[error(transparent)]
    Resolution(E),
    /// The operation failed: the step's function failed, the called target could not be
    /// started, or the replay met another operation than the one its journal recorded
    /// at this place (the run then fails whatever the target returns).
    #[error("{0}")]
    Failed(String),
}

/// Why a run could not be started.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum StartError {
    /// The subject was the empty string; a subject is a non-empty key.
    #[error("the subject is empty: a subject must be a non-empty string")]
    EmptySubject,
    /// A name it was given (the subject, the target) is longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holds a control character; the message
    /// names which, and what is wrong.
    #[error("{0}")]
    InvalidName(String),
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
    /// The kwargs or extras nest deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH).
    #[error("{what} are nested deeper than {limit} levels")]
    TooDeep {
        /// `kwargs` or `extras`.
        what: &'static str,
        /// The limit.
        limit: usize,
    },
    /// The runtime is shut down (or shutting down): nothing more is taken.
    #[error("the runtime is shut down")]
    Stopped,
    /// The subject could not be read back from the data directory; nothing was started.
    #[error("{0}")]
    Store(StoreFault),
    /// The idempotency key is empty or longer than [`MAX_KEY_BYTES`](crate::MAX_KEY_BYTES).
    #[error("the idempotency key is {why}")]
    InvalidIdempotencyKey {
        /// What is wrong with it.
        why: String,
    },
    /// The idempotency key's first request is still being started; try again.
    #[error("a start under idempotency key {key} is under way")]
    IdempotencyKeyInUse {
        /// The key.
        key: String,
    },
    /// The idempotency key was used on the same subject for another request (another
    /// target, identity, kwargs or extras) within the retention horizon.
    #[error("idempotency key {key} was used for another request")]
    IdempotencyKeyReused {
        /// The key.
        key: String,
    },
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
        status: EntryStatus,
    },
    /// A resume payload carries the reserved expiry marker key.
    #[error("payload for interaction {id} carries the reserved key {key}")]
    ReservedKey {
        /// The id.
        id: String,
        /// The key.
        key: String,
    },
    /// A resume payload nests deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH).
    #[error("payload for interaction {id} is nested deeper than {limit} levels")]
    TooDeep {
        /// The id.
        id: String,
        /// The limit.
        limit: usize,
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
    /// An earlier cancel, expiry or visit that tears down a chain names the entry, and is
    /// waiting for the supervisor's walk of the chain: it resolves the entry when that
    /// comes back (`docs/semantics.md`, "What cancel tears down").
    #[error("interaction {id} on subject {subject} is being resolved by an earlier teardown")]
    BeingResolved {
        /// The id.
        id: String,
        /// The subject.
        subject: String,
    },
}

/// `at` as RFC 3339 text in UTC: the clock's own writing of times.
pub(crate) use crate::clock::rfc3339;

/// Why a resume was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResumeError {
    /// The subject was the empty string; a subject is a non-empty key.
    #[error("the subject is empty: a subject must be a non-empty string")]
    EmptySubject,
    /// A name it was given (the subject, the target) is longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holds a control character; the message
    /// names which, and what is wrong.
    #[error("{0}")]
    InvalidName(String),
    /// The id is unknown, not asking, or the payload is reserved.
    #[error("{0}")]
    Refused(IdProblem),
    /// The runtime is shut down (or shutting down): nothing more is taken.
    #[error("the runtime is shut down")]
    Stopped,
    /// The subject could not be read back from the data directory; nothing changed.
    #[error("{0}")]
    Store(StoreFault),
}

/// Why a take returned no result.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TakeError {
    /// The subject was the empty string; a subject is a non-empty key.
    #[error("the subject is empty: a subject must be a non-empty string")]
    EmptySubject,
    /// A name it was given (the subject, the target) is longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holds a control character; the message
    /// names which, and what is wrong.
    #[error("{0}")]
    InvalidName(String),
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
    /// The runtime is shut down (or shutting down): nothing more is taken.
    #[error("the runtime is shut down")]
    Stopped,
    /// The subject could not be read back from the data directory; nothing changed.
    #[error("{0}")]
    Store(StoreFault),
}

/// Why [`Runtime::await_outcome`](crate::Runtime::await_outcome) handed back no value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AwaitError {
    /// The take was refused, or the waiting outcome was a failure
    /// ([`TakeError::Failed`]): as [`Runtime::take`](crate::Runtime::take) says it.
    #[error("{0}")]
    Take(TakeError),
    /// The interaction was still asking or running when the timeout passed; nothing
    /// changed.
    #[error(
        "interaction {id} on subject {subject} left no outcome to take within {}",
        humantime::format_duration(*waited)
    )]
    TimedOut {
        /// The subject.
        subject: String,
        /// The interaction.
        id: String,
        /// How long it was waited for.
        waited: std::time::Duration,
    },
}

/// Why a cancel was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CancelError {
    /// The subject was the empty string; a subject is a non-empty key.
    #[error("the subject is empty: a subject must be a non-empty string")]
    EmptySubject,
    /// A name it was given (the subject, the target) is longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holds a control character; the message
    /// names which, and what is wrong.
    #[error("{0}")]
    InvalidName(String),
    /// Every problem with the named ids.
    #[error("{0}")]
    Refused(Problems<IdProblem>),
    /// The runtime is shut down (or shutting down): nothing more is taken.
    #[error("the runtime is shut down")]
    Stopped,
    /// The subject could not be read back from the data directory; nothing changed.
    #[error("{0}")]
    Store(StoreFault),
}

/// Why [`Runtime::try_record`](crate::Runtime::try_record) could not say where a run
/// stands.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The runtime is shut down (or shutting down).
    #[error("the runtime is shut down")]
    Stopped,
    /// The run's record, or its subject, could not be read back from the data directory.
    #[error("{0}")]
    Store(StoreFault),
}

impl RecordError {
    /// The error's stable kind: `stopped`, or the fault's.
    pub fn kind(&self) -> &'static str {
        match self {
            RecordError::Stopped => "stopped",
            RecordError::Store(fault) => fault.kind(),
        }
    }
}

/// Why a runtime could not be built.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A setting could not be read from the environment.
    #[error("{0}")]
    Settings(Problems<crate::settings::SettingsError>),
    /// The data directory could not be opened, or what it holds could not be read back.
    #[error("{0}")]
    Store(String),
    /// A tool spec given to [`Builder::tool`](crate::Builder::tool) was refused.
    #[error(transparent)]
    Tool(#[from] crate::ToolSpecError),
    /// An actor could not be spawned.
    #[error("could not start the {what} actor: {reason}")]
    Spawn {
        /// Which actor.
        what: &'static str,
        /// Why.
        reason: String,
    },
}

/// Why [`Runtime::event_log`](crate::Runtime::event_log) could not read the log.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The runtime runs in memory: it keeps no event log.
    #[error("this runtime runs in memory and keeps no event log")]
    InMemory,
    /// The store could not be read (or stopped after a failure).
    #[error("the event log could not be read: {0}")]
    Read(String),
    /// An entry of the log could not be decoded.
    #[error("entry {seq} of the event log is damaged: {cause}")]
    Damaged {
        /// Its sequence number.
        seq: u64,
        /// What the decoder said.
        cause: String,
    },
}

impl LogError {
    /// The error's stable kind: its variant in snake case.
    pub fn kind(&self) -> &'static str {
        match self {
            LogError::InMemory => "in_memory",
            LogError::Read(_) => "read",
            LogError::Damaged { .. } => "damaged",
        }
    }
}

impl IdProblem {
    /// The problem's stable kind: its variant in snake case.
    pub fn kind(&self) -> &'static str {
        match self {
            IdProblem::Unknown { .. } => "unknown",
            IdProblem::WrongStatus { .. } => "wrong_status",
            IdProblem::ReservedKey { .. } => "reserved_key",
            IdProblem::Duplicate { .. } => "duplicate",
            IdProblem::TooDeep { .. } => "too_deep",
            IdProblem::AlreadyResolved { .. } => "already_resolved",
            IdProblem::BeingResolved { .. } => "being_resolved",
        }
    }
}

impl StartError {
    /// The error's stable kind: its variant in snake case.
    pub fn kind(&self) -> &'static str {
        match self {
            StartError::EmptySubject => "empty_subject",
            StartError::InvalidName(_) => "invalid_name",
            StartError::UnknownTarget(_) => "unknown_target",
            StartError::UndeclaredExtras { .. } => "undeclared_extras",
            StartError::NotAnObject { .. } => "not_an_object",
            StartError::TooDeep { .. } => "too_deep",
            StartError::Stopped => "stopped",
            StartError::Store(fault) => fault.kind(),
            StartError::InvalidIdempotencyKey { .. } => "invalid_idempotency_key",
            StartError::IdempotencyKeyInUse { .. } => "idempotency_key_in_use",
            StartError::IdempotencyKeyReused { .. } => "idempotency_key_reused",
        }
    }
}

impl ResumeError {
    /// The error's stable kind: its variant in snake case, or the id problem's kind for a
    /// refusal.
    pub fn kind(&self) -> &'static str {
        match self {
            ResumeError::EmptySubject => "empty_subject",
            ResumeError::InvalidName(_) => "invalid_name",
            ResumeError::Refused(problem) => problem.kind(),
            ResumeError::Stopped => "stopped",
            ResumeError::Store(fault) => fault.kind(),
        }
    }
}

impl TakeError {
    /// The error's stable kind: its variant in snake case, or the id problem's kind for a
    /// refusal.
    pub fn kind(&self) -> &'static str {
        match self {
            TakeError::EmptySubject => "empty_subject",
            TakeError::InvalidName(_) => "invalid_name",
            TakeError::Refused(problem) => problem.kind(),
            TakeError::Failed { .. } => "failed",
            TakeError::Stopped => "stopped",
            TakeError::Store(fault) => fault.kind(),
        }
    }
}

impl CancelError {
    /// The error's stable kind: its variant in snake case; a refusal naming one problem
    /// takes that problem's kind, one naming several is `refused`.
    pub fn kind(&self) -> &'static str {
        match self {
            CancelError::EmptySubject => "empty_subject",
            CancelError::InvalidName(_) => "invalid_name",
            CancelError::Refused(problems) => match problems.0.as_slice() {
                [one] => one.kind(),
                _ => "refused",
            },
            CancelError::Stopped => "stopped",
            CancelError::Store(fault) => fault.kind(),
        }
    }
}
