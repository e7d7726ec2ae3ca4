//! What a run asks: [`Ask`], and the checks an ask passes before anything is stored.
//!
//! An ask is validated whole before it reaches the subject: every problem is reported
//! together, and a refused ask stores nothing and counts against no cap.

use std::time::Duration;

use chrono::{DateTime, FixedOffset, NaiveDateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::entry::To;
use crate::validator::{SchemaError, Validator};

/// Whether the asking activation waits for the answer or parks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Mode {
    /// Park the run and return the suspension sentinel at once.
    #[default]
    Async,
    /// Block the activation until answered; never allowed for a caller ask.
    Sync,
}

/// What a lapsed deadline does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OnExpiry {
    /// Tear the whole run chain down, exactly as a cancel (the caller-ask default).
    Kill,
    /// Resume the run with the reserved expiry marker (the user-ask default).
    Resume,
}

/// When an ask lapses: an instant with a time zone, or a duration from now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Expiry {
    /// A time-zone-aware instant.
    At(DateTime<FixedOffset>),
    /// A duration resolved against the runtime clock when the ask is made.
    In(Duration),
    /// Text to parse: RFC 3339 with an offset, or a humantime duration such as `10m`.
    Text(String),
}

impl From<&str> for Expiry {
    fn from(text: &str) -> Self {
        Expiry::Text(text.to_owned())
    }
}

impl From<String> for Expiry {
    fn from(text: String) -> Self {
        Expiry::Text(text)
    }
}

impl From<Duration> for Expiry {
    fn from(d: Duration) -> Self {
        Expiry::In(d)
    }
}

impl<Tz: TimeZone> From<DateTime<Tz>> for Expiry {
    fn from(at: DateTime<Tz>) -> Self {
        Expiry::At(at.fixed_offset())
    }
}

/// A question a run asks, built with [`Ask::caller`] or [`Ask::user`].
///
/// ```
/// use parkway::Ask;
/// let ask = Ask::caller("proceed?").answer_format("confirm").expiry_at("10m");
/// # let _ = ask;
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Ask {
    /// Who is asked.
    pub(crate) to: To,
    /// Park or block.
    pub(crate) mode: Mode,
    /// The question text.
    pub(crate) question: Option<String>,
    /// The answer format (metadata for a caller ask).
    pub(crate) answer_format: Option<String>,
    /// A structured payload (caller asks only).
    pub(crate) payload: Option<Value>,
    /// The deadline; required.
    pub(crate) expiry: Option<Expiry>,
    /// What the deadline does; defaults by addressee.
    pub(crate) on_expiry: Option<OnExpiry>,
    /// The choices of a `select` user ask.
    pub(crate) options: Option<Vec<String>>,
    /// The JSON schema of a `form` user ask.
    pub(crate) schema: Option<Value>,
    /// How long a `sync` user ask blocks before it gives up.
    pub(crate) timeout: Option<Duration>,
}

impl Ask {
    /// An ask of the calling run (`to = caller`, `mode = async`).
    pub fn caller(question: impl Into<String>) -> Self {
        Self::new(To::Caller, Some(question.into()))
    }

    /// An ask of the calling run that carries only a structured payload.
    pub fn caller_payload(payload: Value) -> Self {
        Self::new(To::Caller, None).payload(payload)
    }

    /// An ask of a person (`to = user`).
    pub fn user(question: impl Into<String>) -> Self {
        Self::new(To::User, Some(question.into()))
    }

    fn new(to: To, question: Option<String>) -> Self {
        Self {
            to,
            mode: Mode::Async,
            question,
            answer_format: None,
            payload: None,
            expiry: None,
            on_expiry: None,
            options: None,
            schema: None,
            timeout: None,
        }
    }

    /// The choices of a `select` user ask.
    pub fn options<S: Into<String>>(mut self, options: impl IntoIterator<Item = S>) -> Self {
        self.options = Some(options.into_iter().map(Into::into).collect());
        self
    }

    /// The JSON schema a `form` user ask's answer must satisfy.
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = Some(schema);
        self
    }

    /// How long a `sync` user ask blocks the activation before it gives up and returns
    /// the expiry marker; it stands in for `expiry_at`.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Set the mode; `sync` on a caller ask is refused when asked.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Set the answer format (`text`, `confirm`, `select`, `form`, `external`).
    pub fn answer_format(mut self, format: impl Into<String>) -> Self {
        self.answer_format = Some(format.into());
        self
    }

    /// Attach a structured payload; only a caller ask may carry one. A `null` payload
    /// is no payload: an entry's unset fields are absent, never `null`.
    pub fn payload(mut self, payload: Value) -> Self {
        self.payload = (!payload.is_null()).then_some(payload);
        self
    }

    /// Set the deadline: an instant with a time zone, RFC 3339 text with an offset, or a
    /// duration (`Duration` or text such as `10m`) from the runtime clock's now.
    pub fn expiry_at(mut self, expiry: impl Into<Expiry>) -> Self {
        self.expiry = Some(expiry.into());
        self
    }

    /// Set what the deadline does.
    pub fn on_expiry(mut self, on_expiry: OnExpiry) -> Self {
        self.on_expiry = Some(on_expiry);
        self
    }

    /// What is wrong with a user ask's format and its companions.
    fn user_problems(&self) -> Vec<AskProblem> {
        let mut problems = Vec::new();
        let format = self.answer_format.as_deref().unwrap_or("text");
        match format {
            "text" | "confirm" | "external" => {}
            "select" => {
                if self.options.as_ref().is_none_or(|o| o.is_empty()) {
                    problems.push(AskProblem::SelectWithoutOptions);
                }
            }
            "form" => match &self.schema {
                None => problems.push(AskProblem::FormWithoutSchema),
                // Refused by `validate` already: the schema compiler recurses per level.
                Some(schema) if crate::depth::exceeds(schema, crate::MAX_SCHEMA_DEPTH) => {}
                Some(schema) => match Validator::new(schema) {
                    Ok(_) => {}
                    Err(SchemaError::Invalid(reason)) => {
                        problems.push(AskProblem::BadSchema { reason });
                    }
                    Err(SchemaError::NoForms) => problems.push(AskProblem::NoForms),
                },
            },
            other => problems.push(AskProblem::UnknownFormat {
                format: other.to_owned(),
            }),
        }
        problems
    }

    /// Drop a refused ask: its payload and schema level by level, since either may be
    /// deeper than a recursive drop can bear (`crate::depth`).
    pub(crate) fn drop_deep(self) {
        for value in [self.payload, self.schema].into_iter().flatten() {
            crate::depth::drop_deep(value);
        }
    }

    /// The answer format a user ask is validated by (`text` when unset).
    pub(crate) fn format(&self) -> &str {
        self.answer_format.as_deref().unwrap_or("text")
    }

    /// Check the ask against `now` and the question limit; every problem is reported.
    pub(crate) fn validate(
        &self,
        now: DateTime<Utc>,
        max_question_chars: usize,
    ) -> Result<Checked, Vec<AskProblem>> {
        let mut problems = Vec::new();
        for (field, value, limit) in [
            ("payload", &self.payload, crate::MAX_VALUE_DEPTH),
            ("schema", &self.schema, crate::MAX_SCHEMA_DEPTH),
        ] {
            if value
                .as_ref()
                .is_some_and(|v| crate::depth::exceeds(v, limit))
            {
                problems.push(AskProblem::TooDeep { field, limit });
            }
        }
        if self.to == To::Caller && self.mode == Mode::Sync {
            problems.push(AskProblem::SyncCaller);
        }
        if self.to == To::User && self.payload.is_some() {
            problems.push(AskProblem::PayloadOnUserAsk);
        }
        if let Some(q) = &self.question {
            let chars = q.chars().count();
            if chars > max_question_chars {
                problems.push(AskProblem::QuestionTooLong {
                    chars,
                    max: max_question_chars,
                });
            }
        }
        if self.question.is_none() && self.payload.is_none() {
            problems.push(AskProblem::Empty);
        }
        if self.to == To::User {
            problems.extend(self.user_problems());
        }
        let expiry = match (&self.expiry, self.timeout) {
            (None, Some(t)) if self.mode == Mode::Sync => Some(Expiry::In(t)),
            (e, _) => e.clone(),
        };
        let deadline = match &expiry {
            None => {
                problems.push(AskProblem::MissingExpiry);
                None
            }
            Some(expiry) => match resolve_expiry(expiry, now) {
                Ok(at) if at <= now => {
                    problems.push(AskProblem::PastExpiry {
                        at: at.to_rfc3339(),
                    });
                    None
                }
                Ok(at) => Some(at),
                Err(problem) => {
                    problems.push(problem);
                    None
                }
            },
        };
        match deadline {
            Some(deadline) if problems.is_empty() => Ok(Checked {
                deadline,
                on_expiry: self.on_expiry.unwrap_or(match self.to {
                    To::Caller => OnExpiry::Kill,
                    To::User => OnExpiry::Resume,
                }),
            }),
            _ => Err(problems),
        }
    }
}

/// What validation settles about an ask.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked {
    /// The resolved deadline.
    pub(crate) deadline: DateTime<Utc>,
    /// What the deadline does.
    pub(crate) on_expiry: OnExpiry,
}

fn resolve_expiry(expiry: &Expiry, now: DateTime<Utc>) -> Result<DateTime<Utc>, AskProblem> {
    let after = |d: Duration| {
        chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .ok_or(AskProblem::BadExpiry {
                text: humantime::format_duration(d).to_string(),
            })
    };
    match expiry {
        Expiry::At(at) => Ok(at.with_timezone(&Utc)),
        Expiry::In(d) => after(*d),
        Expiry::Text(text) => {
            let text = text.trim();
            if let Ok(at) = DateTime::parse_from_rfc3339(text) {
                return Ok(at.with_timezone(&Utc));
            }
            if let Ok(d) = humantime::parse_duration(text) {
                return after(d);
            }
            let naive = ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%d %H:%M:%S%.f"]
                .iter()
                .any(|f| NaiveDateTime::parse_from_str(text, f).is_ok());
            if naive {
                Err(AskProblem::NaiveExpiry { text: text.into() })
            } else {
                Err(AskProblem::BadExpiry { text: text.into() })
            }
        }
    }
}

/// One thing wrong with an ask.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AskProblem {
    /// `to = caller` with `mode = sync`.
    #[error("a caller ask is always mode=async, not sync")]
    SyncCaller,
    /// `payload` on a `to = user` ask.
    #[error("payload is only allowed on a caller ask, not on a user ask")]
    PayloadOnUserAsk,
    /// The question is longer than the limit.
    #[error("question has {chars} characters, more than the limit of {max}")]
    QuestionTooLong {
        /// Its length.
        chars: usize,
        /// The limit.
        max: usize,
    },
    /// Neither a question nor a payload.
    #[error("an ask needs a question or a payload")]
    Empty,
    /// No `expiry_at`.
    #[error("expiry_at is required")]
    MissingExpiry,
    /// An instant without a time zone.
    #[error("expiry_at {text:?} has no time zone; give an offset such as Z or +02:00")]
    NaiveExpiry {
        /// The text given.
        text: String,
    },
    /// Neither an instant nor a duration.
    #[error("expiry_at {text:?} is neither an RFC 3339 instant nor a duration such as 10m")]
    BadExpiry {
        /// The text given.
        text: String,
    },
    /// A `select` user ask without options.
    #[error("a select ask needs options")]
    SelectWithoutOptions,
    /// A `form` user ask without a schema.
    #[error("a form ask needs a JSON schema")]
    FormWithoutSchema,
    /// A `form` user ask whose schema is not a valid JSON schema.
    #[error("the form's schema is not a valid JSON schema: {reason}")]
    BadSchema {
        /// Why.
        reason: String,
    },
    /// A `form` user ask whose schema needs a JSON Schema validator, in a build without
    /// the `forms` feature (`docs/features.md`).
    #[error("the form's schema cannot be checked: {}", crate::validator::NO_FORMS)]
    NoForms,
    /// An answer format that is not one of the five.
    #[error("answer_format {format:?} is not one of text, confirm, select, form, external")]
    UnknownFormat {
        /// The format given.
        format: String,
    },
    /// The payload nests deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH), or the
    /// form's schema deeper than [`MAX_SCHEMA_DEPTH`](crate::MAX_SCHEMA_DEPTH).
    #[error("{field} is nested deeper than {limit} levels")]
    TooDeep {
        /// `payload` or `schema`.
        field: &'static str,
        /// The limit.
        limit: usize,
    },
    /// A deadline that has already passed.
    #[error("expiry_at {at} is not in the future")]
    PastExpiry {
        /// The resolved instant.
        at: String,
    },
}

/// The reserved key of the expiry marker `{"interaction_expired": true}`.
pub const EXPIRY_MARKER_KEY: &str = "interaction_expired";

/// The answer an `on_expiry = resume` ask returns when its deadline lapses.
pub fn expiry_marker() -> Value {
    serde_json::json!({ EXPIRY_MARKER_KEY: true })
}

/// Whether `answer` is the expiry marker, so a target can take its expiry branch.
pub fn is_expiry_marker(answer: &Value) -> bool {
    answer.get(EXPIRY_MARKER_KEY) == Some(&Value::Bool(true))
}
