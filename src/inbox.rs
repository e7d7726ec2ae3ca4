//! The interactions inbox: the pending user asks, a live stream of their changes, and the
//! human answer door.
//!
//! Only `to = user` asks ever enter the inbox. A caller ask is not a human question: it
//! never appears in the list or in any frame of the stream, and the answer door answers
//! `unknown interaction` for it exactly as for an id that does not exist.
//!
//! A user ask that left the inbox is remembered by id with its subject (the most recent
//! [`LEFT_REMEMBERED`]), so a late answer is told `already resolved` from what its
//! subject remembers, not `unknown`. The subject keeps how and when; the inbox only where.
//! On a data directory, the user asks that left before the runtime was opened are
//! recalled from the durable event log, once, at the first answer the inbox does not
//! know ([`Inbox::recall_left`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;
use tokio::sync::broadcast;

use crate::ask::EXPIRY_MARKER_KEY;
use crate::event::Settled;
use crate::tool_spec::Tools;
use crate::validator::{AnswerProblem, SchemaError, Validator, joined};

/// The default page size of [`Runtime::inbox`](crate::Runtime::inbox).
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest page size; a larger request is capped to it.
pub const MAX_PAGE_SIZE: usize = 200;
/// How many user asks that left the inbox it remembers the subject of; past it the
/// oldest is forgotten, and a late answer to it reads as unknown.
pub(crate) const LEFT_REMEMBERED: usize = 65_536;

/// One pending user ask, as a person's inbox shows it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboxItem {
    /// The interaction id.
    pub id: String,
    /// The subject it parks on.
    pub subject: String,
    /// The question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// `text`, `confirm`, `select`, `form` or `external`.
    pub answer_format: String,
    /// The choices of a `select` ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<Vec<String>>,
    /// The JSON schema of a `form` ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<Value>,
    /// Target names from the asking run up to the top of its chain.
    pub asked_by: Vec<String>,
    /// The human titles of the targets in `asked_by` that have one, by target name: a
    /// target's title is that of a tool offered for it (with several, the first by tool
    /// name that has one), as the tools stood when the ask entered the inbox (raised, or
    /// read back as the runtime opened). Absent when none of them has one.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub asked_by_titles: BTreeMap<String, String>,
    /// When the ask lapses.
    pub expiry_at: chrono::DateTime<chrono::Utc>,
    /// When it was raised; absent for an ask kept before the inbox recorded it. Nodes
    /// sharing a database list their asks together in this order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// Fills `item`'s titles of the targets that asked from `tools`.
pub(crate) fn titled(item: &mut InboxItem, tools: &Tools) {
    item.asked_by_titles = item
        .asked_by
        .iter()
        .filter_map(|target| Some((target.clone(), tools.title(target)?)))
        .collect();
}

/// One change of the inbox, as a subscriber follows it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "frame", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Frame {
    /// A user ask was raised.
    Add {
        /// The item (boxed: the stream's buffer holds a frame per slot, and the other
        /// frames are small).
        item: Box<InboxItem>,
    },
    /// A user ask was answered (through the answer door, or resumed by a run or door).
    Answered {
        /// The interaction.
        id: String,
    },
    /// A user ask left the inbox unanswered: it expired, or its run was cancelled, or
    /// its subject's slot left this runtime.
    Removed {
        /// The interaction.
        id: String,
        /// `expired`, `cancelled` or `moved`.
        reason: String,
    },
}

/// One page of the inbox.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page {
    /// The items of this page, oldest first.
    pub items: Vec<InboxItem>,
    /// This page's number, from 1.
    pub page: usize,
    /// The page size in force (capped at 200).
    pub page_size: usize,
    /// How many user asks are pending in all.
    pub total: usize,
    /// The next page's number, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_page: Option<usize>,
}

/// Why the answer door refused an answer; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// No pending user ask of that id (a caller ask answers exactly this too).
    #[error("unknown interaction {id}")]
    Unknown {
        /// The id.
        id: String,
    },
    /// The user ask was already answered, expired or cancelled, and its subject still
    /// remembers how and when.
    #[error(
        "interaction {id} already resolved ({how}) at {}",
        crate::error::rfc3339(at)
    )]
    AlreadyResolved {
        /// The id.
        id: String,
        /// How it was resolved.
        how: Settled,
        /// When.
        at: DateTime<Utc>,
    },
    /// An `external` ask is answered elsewhere.
    #[error("interaction {id} is answered externally, not through the answer door")]
    External {
        /// The id.
        id: String,
    },
    /// The answer does not fit the ask's format; every problem is listed.
    #[error("answer to interaction {id} is invalid: {}", joined(.problems))]
    Invalid {
        /// The id.
        id: String,
        /// What is wrong, each at the part of the answer at fault.
        problems: Vec<AnswerProblem>,
    },
    /// Page numbers start at 1.
    #[error("page numbers start at 1, not 0")]
    BadPage,
    /// The runtime is shut down (or shutting down): nothing more is taken.
    #[error("the runtime is shut down")]
    Stopped,
    /// The ask's subject could not be read back from the data directory; nothing
    /// changed.
    #[error("{0}")]
    Store(crate::error::StoreFault),
}

/// The inbox's state: pending user asks in the order raised, and the frame stream.
#[derive(Debug)]
pub(crate) struct Inbox {
    /// By interaction id, oldest first; a std mutex because every use is short.
    items: Mutex<IndexMap<String, InboxItem>>,
    /// The subjects of the user asks that left, by id, oldest first: at most
    /// [`LEFT_REMEMBERED`].
    left: Mutex<IndexMap<String, Arc<str>>>,
    /// The live stream.
    frames: broadcast::Sender<Frame>,
    /// Set once the user asks that left before the runtime opened were recalled.
    recalled: tokio::sync::OnceCell<()>,
}

impl Default for Inbox {
    fn default() -> Self {
        Self {
            items: Mutex::new(IndexMap::new()),
            left: Mutex::new(IndexMap::new()),
            frames: broadcast::Sender::new(65_536),
            recalled: tokio::sync::OnceCell::new(),
        }
    }
}

impl Inbox {
    fn items(&self) -> std::sync::MutexGuard<'_, IndexMap<String, InboxItem>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A user ask was raised; the titles of the targets that asked are read off `tools`.
    pub(crate) fn add(&self, mut item: InboxItem, tools: &Tools) {
        titled(&mut item, tools);
        let mut items = self.items();
        items.insert(item.id.clone(), item.clone());
        // Sent under the lock, so frames are in the order the list changed.
        let _ = self.frames.send(Frame::Add {
            item: Box::new(item),
        });
    }

    /// A user ask left the inbox; `answered` says whether it was answered.
    pub(crate) fn remove(&self, id: &str, answered: bool, reason: &str) {
        let mut items = self.items();
        if let Some(item) = items.shift_remove(id) {
            let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
            if left.len() >= LEFT_REMEMBERED {
                left.shift_remove_index(0);
            }
            left.insert(item.id, Arc::from(item.subject));
            let frame = if answered {
                Frame::Answered { id: id.to_owned() }
            } else {
                Frame::Removed {
                    id: id.to_owned(),
                    reason: reason.to_owned(),
                }
            };
            let _ = self.frames.send(frame);
        }
    }

    /// The runtime gave up `slot`: its subjects' asks leave the inbox, shown as removed
    /// with the reason `moved`, and their subjects are remembered, so an answer to one
    /// is told the subject is not this runtime's now rather than that the ask is unknown.
    pub(crate) fn leave(&self, slot: crate::slot::Slot) {
        let mut items = self.items();
        let moved: Vec<String> = items
            .values()
            .filter(|item| crate::slot::Slot::of(&item.subject) == slot)
            .map(|item| item.id.clone())
            .collect();
        let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        for id in moved {
            let Some(item) = items.shift_remove(&id) else {
                continue;
            };
            if left.len() >= LEFT_REMEMBERED {
                left.shift_remove_index(0);
            }
            left.insert(item.id, Arc::from(item.subject));
            let _ = self.frames.send(Frame::Removed {
                id,
                reason: "moved".to_owned(),
            });
        }
    }

    /// The pending user ask `id`.
    pub(crate) fn get(&self, id: &str) -> Option<InboxItem> {
        self.items().get(id).cloned()
    }

    /// The subject of the user ask `id`, which left the inbox.
    pub(crate) fn left(&self, id: &str) -> Option<Arc<str>> {
        let left = self.left.lock().unwrap_or_else(|p| p.into_inner());
        left.get(id).cloned()
    }

    /// Recall, once, the user asks that left before the runtime opened: `read` gives
    /// them (id and subject, oldest first) and runs at the first call; later and
    /// concurrent calls wait for that one. They are remembered as older than any that
    /// left since, within [`LEFT_REMEMBERED`].
    pub(crate) async fn recall_left<F, Fut>(&self, read: F)
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Vec<(String, Arc<str>)>>,
    {
        self.recalled
            .get_or_init(|| async {
                let before = read().await;
                let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
                let since = std::mem::take(&mut *left);
                let mut all: IndexMap<String, Arc<str>> = before
                    .into_iter()
                    .filter(|(id, _)| !since.contains_key(id))
                    .collect();
                all.extend(since);
                let over = all.len().saturating_sub(LEFT_REMEMBERED);
                all.drain(..over);
                *left = all;
            })
            .await;
    }

    /// One page, numbered from 1.
    pub(crate) fn page(&self, page: usize, page_size: usize) -> Result<Page, AnswerError> {
        if page == 0 {
            return Err(AnswerError::BadPage);
        }
        let page_size = page_size.clamp(1, MAX_PAGE_SIZE);
        let items = self.items();
        let total = items.len();
        let start = (page - 1).saturating_mul(page_size);
        let slice: Vec<InboxItem> = items
            .values()
            .skip(start)
            .take(page_size)
            .cloned()
            .collect();
        let next_page = (start.saturating_add(page_size) < total).then_some(page + 1);
        Ok(Page {
            items: slice,
            page,
            page_size,
            total,
            next_page,
        })
    }

    /// A subscriber seeing every frame from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Frame> {
        self.frames.subscribe()
    }
}

impl AnswerError {
    /// The error's stable kind: its variant in snake case.
    pub fn kind(&self) -> &'static str {
        match self {
            AnswerError::Unknown { .. } => "unknown",
            AnswerError::AlreadyResolved { .. } => "already_resolved",
            AnswerError::External { .. } => "external",
            AnswerError::Invalid { .. } => "invalid",
            AnswerError::BadPage => "bad_page",
            AnswerError::Stopped => "stopped",
            AnswerError::Store(fault) => fault.kind(),
        }
    }
}

/// Check `answer` against the ask's format; every problem names the field at fault.
pub(crate) fn validate(item: &InboxItem, answer: &Value) -> Result<(), AnswerError> {
    if item.answer_format == "external" {
        return Err(AnswerError::External {
            id: item.id.clone(),
        });
    }
    check_answer(
        &item.answer_format,
        item.options.as_deref(),
        item.schema.as_ref(),
        answer,
    )
    .map_err(|problems| AnswerError::Invalid {
        id: item.id.clone(),
        problems,
    })
}

/// Check `answer` against an answer format as the answer door does: a `text` answer is
/// a string, a `confirm` answer a boolean, a `select` answer one of `options`, a `form`
/// answer an instance of `schema`; no answer carries the expiry marker's reserved key.
/// Every problem is named at its JSON pointer into the answer. `external` and unknown
/// formats take any answer (the answer door refuses an `external` ask before this).
///
/// ```
/// use parkway::check_answer;
/// use serde_json::json;
/// assert!(check_answer("confirm", None, None, &json!(true)).is_ok());
/// let problems = check_answer("select", Some(&["a".into(), "b".into()]), None, &json!("c"))
///     .unwrap_err();
/// assert_eq!(problems[0].to_string(), r#""c" is not one of the options a, b"#);
/// ```
pub fn check_answer(
    format: &str,
    options: Option<&[String]>,
    schema: Option<&Value>,
    answer: &Value,
) -> Result<(), Vec<AnswerProblem>> {
    let whole = |message: String| vec![AnswerProblem::whole(message)];
    match format {
        // Only the runtime gives the expiry marker: an answer carrying its key would read
        // as an expiry to the run, whatever the format's schema allows.
        _ if answer.get(EXPIRY_MARKER_KEY).is_some() => Err(whole(format!(
            "the answer carries the reserved key {EXPIRY_MARKER_KEY}"
        ))),
        "text" if !answer.is_string() => Err(whole(format!(
            "a text answer must be a string, not {}",
            kind(answer)
        ))),
        "confirm" if !answer.is_boolean() => Err(whole(format!(
            "a confirm answer must be true or false, not {}",
            kind(answer)
        ))),
        "select" => {
            let options = options.unwrap_or_default();
            match answer.as_str() {
                Some(choice) if options.iter().any(|o| o == choice) => Ok(()),
                Some(choice) => Err(whole(format!(
                    "{choice:?} is not one of the options {}",
                    options.join(", ")
                ))),
                None => Err(whole(format!(
                    "a select answer must be one of the options as a string, not {}",
                    kind(answer)
                ))),
            }
        }
        "form" => {
            let schema = schema.cloned().unwrap_or(Value::Bool(true));
            let validator = Validator::new(&schema).map_err(|e| match e {
                SchemaError::Invalid(e) => whole(format!("the form's schema is invalid: {e}")),
                SchemaError::NoForms => whole(e.to_string()),
            })?;
            let problems = validator.problems(answer);
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems)
            }
        }
        _ => Ok(()),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
