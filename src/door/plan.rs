//! [`Plan`]: what a visit will do, as the contract's outputs say (`super::contract` reads
//! it off them), and [`VisitProblem`], each thing wrong with a visit: every problem of a
//! visit is collected, none is acted on.

use serde_json::Value;
use thiserror::Error;

use crate::error::IdProblem;

/// One resolution a `resume_expr` asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    /// `{id, payload}`: resume an ask with an answer.
    Resume {
        /// The interaction.
        id: String,
        /// The answer.
        payload: Value,
    },
    /// A bare id: take a waiting outcome.
    Take {
        /// The interaction.
        id: String,
    },
}

impl Item {
    /// The interaction it names.
    pub(crate) fn id(&self) -> &str {
        match self {
            Item::Resume { id, .. } | Item::Take { id } => id,
        }
    }
}

/// What a visit will do, once every check passes.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Plan {
    /// Interactions to cancel, first.
    pub(crate) cancels: Vec<String>,
    /// The resolutions, when `resume_expr` yielded non-null: then nothing starts.
    pub(crate) resolve: Option<Vec<Item>>,
    /// The kwargs to start the target on, when nothing is resolved.
    pub(crate) start: Option<Value>,
    /// The extras of the start.
    pub(crate) extras: Option<Value>,
}

/// One thing wrong with a visit; the visit applied nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum VisitProblem {
    /// The expression raised an error.
    #[error("{expr} failed: {error}")]
    Eval {
        /// The expression.
        expr: String,
        /// The error.
        error: String,
    },
    /// The expression passed the evaluation deadline; the door is marked broken.
    #[error(
        "{expr} passed its evaluation deadline of {ms} ms; the door is broken until saved again"
    )]
    Deadline {
        /// The expression.
        expr: String,
        /// The deadline.
        ms: u64,
    },
    /// The expression emitted nothing.
    #[error("{expr} emitted no value; it must emit exactly one")]
    NoOutput {
        /// The expression.
        expr: String,
    },
    /// The expression emitted more than one value.
    #[error("{expr} emitted more than one value (the first: {first}); it must emit exactly one")]
    Many {
        /// The expression.
        expr: String,
        /// The first value, as JSON (shortened).
        first: String,
    },
    /// The value is outside the expression's column's shape.
    #[error("{expr} emitted {emitted}: {why}")]
    Shape {
        /// The expression.
        expr: String,
        /// The value, as JSON (shortened).
        emitted: String,
        /// What is wrong with it.
        why: String,
    },
    /// A named interaction cannot be acted on.
    #[error("{expr}: {problem}")]
    Id {
        /// The expression that named it.
        expr: String,
        /// Why.
        problem: IdProblem,
    },
    /// The same id is named by `cancel_expr` and `resume_expr`.
    #[error("interaction {id} is named by both cancel_expr and resume_expr")]
    CancelAndResume {
        /// The id.
        id: String,
    },
    /// A resolution names an entry the visit's own cancels tear down.
    #[error("resume_expr: interaction {id} would be torn down by the cancel of {by}")]
    TornDown {
        /// The id.
        id: String,
        /// The cancelled interaction whose chain it is in.
        by: String,
    },
    /// The extras name keys the target did not declare.
    #[error("extras_expr: target {target} does not declare extras key(s) {}", .keys.join(", "))]
    UndeclaredExtras {
        /// The target.
        target: String,
        /// The keys.
        keys: Vec<String>,
    },
    /// A take on a door whose visits have no receiver: the result would be lost.
    #[error("resume_expr: door {door} has no receiver to take interaction {id}")]
    NoReceiver {
        /// The door.
        door: String,
        /// The id.
        id: String,
    },
    /// The expression emitted a value nesting deeper than
    /// [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH).
    #[error("{expr} emitted a value nested deeper than {limit} levels")]
    TooDeep {
        /// The expression.
        expr: String,
        /// The limit.
        limit: usize,
    },
    /// The started target is not registered.
    #[error("target {target} is not registered")]
    UnknownTarget {
        /// The target.
        target: String,
    },
}
