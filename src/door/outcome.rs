//! What a visit hands back, and why a visit or a save is refused.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use super::plan::VisitProblem;
use super::saved::SaveProblem;
use crate::error::Problems;
use crate::record::{NoResult, Resumed, RunRecord};

/// The outcome of one resolution a visit applied.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ItemOutcome {
    /// An ask was resumed. With a receiver, `outcome` is the run's next outcome (or
    /// `buffered`); without one, only `buffered` is reported.
    Resumed {
        /// The interaction.
        id: String,
        /// The run's next outcome.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outcome: Option<Resumed>,
    },
    /// A `finished` waiting outcome was taken.
    Taken {
        /// The interaction.
        id: String,
        /// The resolved run's result.
        result: Value,
    },
    /// A `failed` waiting outcome was taken: it raises to the taker.
    TakeFailed {
        /// The interaction.
        id: String,
        /// The resolved run's error.
        error: String,
    },
}

/// The one non-cancel action a visit performed.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
#[non_exhaustive]
#[allow(clippy::large_enum_variant)] // one per visit; boxing would only add a hop
pub enum VisitOutcome {
    /// Neither a resolution nor a start.
    Nothing,
    /// `resume_expr` yielded non-null: these resolutions, in order.
    Resolved {
        /// One outcome per item.
        results: Vec<ItemOutcome>,
    },
    /// A run was started.
    Started {
        /// Its id.
        run_id: String,
        /// The record its first activation ended with, when the visit has a receiver.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record: Option<RunRecord>,
    },
}

/// What a visit did.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Visit {
    /// The interactions cancelled, first.
    pub cancelled: Vec<String>,
    /// The one non-cancel action.
    #[serde(flatten)]
    pub outcome: VisitOutcome,
}

impl ItemOutcome {
    /// The interaction the resolution named.
    pub fn id(&self) -> &str {
        match self {
            ItemOutcome::Resumed { id, .. }
            | ItemOutcome::Taken { id, .. }
            | ItemOutcome::TakeFailed { id, .. } => id,
        }
    }

    /// The resumed run's record, when this resolution resumed an ask and its outcome
    /// came back; else why not.
    pub fn record(&self) -> Result<&RunRecord, NoResult> {
        match self {
            ItemOutcome::Resumed {
                outcome: Some(Resumed::Outcome(record)),
                ..
            } => Ok(record),
            ItemOutcome::Resumed {
                outcome: Some(Resumed::Buffered { remaining, .. }),
                ..
            } => Err(NoResult::Buffered {
                remaining: *remaining,
            }),
            ItemOutcome::Resumed { id, outcome: None } => {
                Err(NoResult::NoReceiver { id: id.clone() })
            }
            ItemOutcome::Taken { id, .. } | ItemOutcome::TakeFailed { id, .. } => {
                Err(NoResult::Taken { id: id.clone() })
            }
        }
    }

    /// The value this resolution hands back: the resumed run's result, or the taken
    /// outcome's; else why there is none (the run failed, was cancelled or asked again,
    /// the answer was buffered, the taken outcome had failed).
    pub fn into_result(self) -> Result<Value, NoResult> {
        match self {
            ItemOutcome::Taken { result, .. } => Ok(result),
            ItemOutcome::TakeFailed { id, error } => Err(NoResult::TakeFailed { id, error }),
            ItemOutcome::Resumed { id, outcome } => match outcome {
                Some(resumed) => resumed.into_result(),
                None => Err(NoResult::NoReceiver { id }),
            },
        }
    }
}

impl Visit {
    /// The record of the run this visit started, or why there is none: the visit
    /// resolved asks instead, or did nothing, or has no receiver.
    pub fn started(&self) -> Result<&RunRecord, NoResult> {
        match &self.outcome {
            VisitOutcome::Started {
                record: Some(record),
                ..
            } => Ok(record),
            VisitOutcome::Started {
                run_id,
                record: None,
            } => Err(NoResult::Unreceived {
                run_id: run_id.clone(),
            }),
            VisitOutcome::Resolved { .. } | VisitOutcome::Nothing => Err(NoResult::Nothing),
        }
    }

    /// The record of the first run this visit resumed, or why there is none.
    pub fn resumed(&self) -> Result<&RunRecord, NoResult> {
        match &self.outcome {
            VisitOutcome::Resolved { results } => results
                .first()
                .map_or(Err(NoResult::Nothing), ItemOutcome::record),
            VisitOutcome::Started { .. } | VisitOutcome::Nothing => Err(NoResult::Nothing),
        }
    }

    /// The record of the run this visit started or first resumed: [`Visit::started`]
    /// or [`Visit::resumed`], whichever the visit did.
    pub fn record(&self) -> Result<&RunRecord, NoResult> {
        match &self.outcome {
            VisitOutcome::Started { .. } => self.started(),
            VisitOutcome::Resolved { .. } | VisitOutcome::Nothing => self.resumed(),
        }
    }

    /// The values the visit hands back, one per resolution in order (or the started
    /// run's result), or the first error among them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use parkway::{Ask, DoorSpec, Runtime, Start};
    /// use serde_json::json;
    ///
    /// let rt = Runtime::builder().without_env().build().await?;
    /// rt.register("deploy", &[], |ctx, _, _| async move {
    ///     let go = ctx.ask(Ask::caller("proceed?").answer_format("confirm").expiry_at("10m")).await?;
    ///     Ok(json!({"deployed": go["answer"] == "yes"}))
    /// });
    /// rt.save_door(DoorSpec::route("approve", "deploy")
    ///     .resume_expr(r#"$parked | map({id, payload: {answer: "yes"}})"#))?;
    /// rt.run(Start::new("thread-1", "deploy")).await?;
    /// let visit = rt.visit("approve", "thread-1", json!({})).await?;
    /// assert_eq!(visit.values()?, vec![json!({"deployed": true})]);
    /// # Ok(()) }
    /// ```
    pub fn values(self) -> Result<Vec<Value>, NoResult> {
        match self.outcome {
            VisitOutcome::Nothing => Ok(Vec::new()),
            VisitOutcome::Started { run_id, record } => match record {
                Some(record) => Ok(vec![record.into_result()?]),
                None => Err(NoResult::Unreceived { run_id }),
            },
            VisitOutcome::Resolved { results } => {
                results.into_iter().map(ItemOutcome::into_result).collect()
            }
        }
    }

    /// The one value the visit hands back: the started run's result, or the first
    /// resolution's; else why there is none ([`NoResult::Nothing`] for a visit that did
    /// nothing). Every later resolution is dropped: use [`Visit::values`] for all.
    pub fn result(self) -> Result<Value, NoResult> {
        match self.outcome {
            VisitOutcome::Nothing => Err(NoResult::Nothing),
            VisitOutcome::Started { run_id, record } => match record {
                Some(record) => record.into_result(),
                None => Err(NoResult::Unreceived { run_id }),
            },
            VisitOutcome::Resolved { results } => results
                .into_iter()
                .next()
                .map_or(Err(NoResult::Nothing), ItemOutcome::into_result),
        }
    }
}

/// Why a visit applied nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum VisitError {
    /// The subject was the empty string; a subject is a non-empty key.
    #[error("the subject is empty: a subject must be a non-empty string")]
    EmptySubject,
    /// A name it was given (the subject, the door) is longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holds a control character; the message
    /// names which, and what is wrong.
    #[error("{0}")]
    InvalidName(String),
    /// No door of that name is saved.
    #[error("unknown door {door}")]
    UnknownDoor {
        /// The name.
        door: String,
    },
    /// The door's expressions passed their deadline once; save it again to use it.
    #[error("door {door} is broken: an expression passed its evaluation deadline; save it again")]
    Broken {
        /// The name.
        door: String,
    },
    /// The input document is larger than the cap.
    #[error("input document of door {door} is {bytes} bytes, more than the limit of {max}")]
    InputTooLarge {
        /// The door.
        door: String,
        /// Its size.
        bytes: usize,
        /// The cap.
        max: usize,
    },
    /// The input document nests deeper than [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH).
    #[error("input document of door {door} is nested deeper than {limit} levels")]
    InputTooDeep {
        /// The door.
        door: String,
        /// The limit.
        limit: usize,
    },
    /// Every problem the visit found; nothing was applied.
    #[error("visit of door {door} refused: {problems}")]
    Refused {
        /// The door.
        door: String,
        /// The problems.
        problems: Problems<VisitProblem>,
    },
    /// The runtime is shut down (or shutting down): nothing more is taken.
    #[error("the runtime is shut down")]
    Stopped,
    /// The subject could not be read back from the data directory; nothing was applied.
    #[error("{0}")]
    Store(crate::error::StoreFault),
}

impl VisitError {
    /// The door the error is about; empty for an error about no door in particular.
    pub(crate) fn door(&self) -> &str {
        match self {
            VisitError::UnknownDoor { door }
            | VisitError::Broken { door }
            | VisitError::InputTooLarge { door, .. }
            | VisitError::InputTooDeep { door, .. }
            | VisitError::Refused { door, .. } => door,
            VisitError::Stopped
            | VisitError::EmptySubject
            | VisitError::Store(_)
            | VisitError::InvalidName(_) => "",
        }
    }
}

impl VisitError {
    /// The error's stable kind: its variant in snake case.
    pub fn kind(&self) -> &'static str {
        match self {
            VisitError::EmptySubject => "empty_subject",
            VisitError::InvalidName(_) => "invalid_name",
            VisitError::UnknownDoor { .. } => "unknown_door",
            VisitError::Broken { .. } => "broken",
            VisitError::InputTooLarge { .. } => "input_too_large",
            VisitError::InputTooDeep { .. } => "input_too_deep",
            VisitError::Refused { .. } => "refused",
            VisitError::Stopped => "stopped",
            VisitError::Store(fault) => fault.kind(),
        }
    }
}

impl SaveError {
    /// The error's stable kind: its variant in snake case.
    pub fn kind(&self) -> &'static str {
        match self {
            SaveError::Invalid { .. } => "invalid",
        }
    }
}

/// Why a door was not saved.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SaveError {
    /// Every problem with the definition.
    #[error("door {door} not saved: {problems}")]
    Invalid {
        /// The door's name.
        door: String,
        /// The problems.
        problems: Problems<SaveProblem>,
    },
}
