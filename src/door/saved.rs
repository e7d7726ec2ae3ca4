//! [`Saved`]: a door compiled at save, as the runtime keeps it.
//!
//! Saving checks everything that can be checked without a visit: the name, the target,
//! the default kwargs, every jq expression (the contract's, and a hook's `condition` and
//! `subject_expr`), and a schedule's interval. Every problem is reported together.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::contract::Contract;
use super::spec::{Kind, Spec};
use crate::jq::{CompileError, Program};
use crate::target::Targets;

/// The variables a hook's `condition` and `subject_expr` may use.
pub(crate) const HOOK_VARS: &[&str] = &["door", "now"];

/// The shortest schedule interval accepted. A fire is a visit of the schedule's subject,
/// whose expressions may take up to the evaluation deadline (100 ms by default): a schedule
/// meant to run faster than once a second would keep its subject busy visiting, and is a
/// loop, not a schedule.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// One thing wrong with a door definition; nothing was saved.
#[derive(Debug, Clone, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SaveProblem {
    /// The name does not match `^[a-z0-9][a-z0-9_-]*$`.
    #[error("door name {name:?} must match ^[a-z0-9][a-z0-9_-]*$")]
    Name {
        /// The name.
        name: String,
    },
    /// The target is not registered.
    #[error("target {target} is not registered")]
    UnknownTarget {
        /// The target.
        target: String,
    },
    /// The default kwargs are not an object.
    #[error("kwargs must be a JSON object")]
    KwargsNotObject,
    /// A jq expression was refused.
    #[error("{0}")]
    Expression(String),
    /// A hook must have exactly one of `subject` and `subject_expr`.
    #[error("hook needs exactly one of subject and subject_expr")]
    HookSubject,
    /// A builder method set a field this kind of door does not take (a `topic` on a
    /// route, an interval on a hook).
    #[error("a {door_kind} door takes no {field}")]
    Misplaced {
        /// The field.
        field: String,
        /// The door's kind: `route`, `hook` or `schedule`.
        door_kind: String,
    },
    /// A hook's topic is empty.
    #[error("hook topic must not be empty")]
    EmptyTopic,
    /// A subject is empty.
    #[error("subject must not be empty")]
    EmptySubject,
    /// A name (the door's, its target's, a hook's topic, a fixed subject) is longer than
    /// [`MAX_NAME_BYTES`](crate::MAX_NAME_BYTES) or holds a control character.
    #[error("{0}")]
    InvalidName(String),
    /// A schedule's interval is not a positive humantime duration.
    #[error("schedule interval {interval:?} is not a positive duration such as 5m")]
    Interval {
        /// The text given.
        interval: String,
    },
    /// A schedule's interval is shorter than the minimum, one second.
    #[error("schedule interval {interval:?} is shorter than the minimum of 1s")]
    IntervalTooShort {
        /// The text given.
        interval: String,
    },
}

impl From<CompileError> for SaveProblem {
    fn from(e: CompileError) -> Self {
        SaveProblem::Expression(e.to_string())
    }
}

/// A saved door.
#[derive(Debug)]
pub(crate) struct Saved {
    /// The definition as written.
    pub(crate) spec: Spec,
    /// The compiled contract.
    pub(crate) contract: Contract,
    /// A hook's compiled condition.
    pub(crate) condition: Option<Program>,
    /// A hook's compiled subject expression.
    pub(crate) subject_expr: Option<Program>,
    /// A schedule's interval.
    pub(crate) interval: Option<Duration>,
    /// Which save this is; a schedule timer of an older save does nothing.
    pub(crate) generation: u64,
}

/// Whether `name` is a valid door name.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

impl Saved {
    /// Check and compile `spec`.
    pub(crate) fn compile(
        spec: Spec,
        targets: &Targets,
        generation: u64,
    ) -> Result<Self, Vec<SaveProblem>> {
        let mut problems = Vec::new();
        if let Some(why) = crate::name::problem("door name", &spec.name) {
            problems.push(SaveProblem::InvalidName(why));
        } else if !valid_name(&spec.name) {
            problems.push(SaveProblem::Name {
                name: spec.name.clone(),
            });
        }
        if let Some(why) = crate::name::problem("target", &spec.target) {
            problems.push(SaveProblem::InvalidName(why));
        } else if targets.get(&spec.target).is_none() {
            problems.push(SaveProblem::UnknownTarget {
                target: spec.target.clone(),
            });
        }
        if !spec.kwargs.is_object() {
            problems.push(SaveProblem::KwargsNotObject);
        }
        let contract = Contract::compile(&spec).map_err(|errors| {
            problems.extend(errors.into_iter().map(SaveProblem::from));
        });
        let kind = match &spec.kind {
            Kind::Route => "route",
            Kind::Hook { .. } => "hook",
            Kind::Schedule { .. } => "schedule",
        };
        problems.extend(spec.misplaced().iter().map(|field| SaveProblem::Misplaced {
            field: (*field).to_owned(),
            door_kind: kind.to_owned(),
        }));
        let mut hook_program = |name: &str, source: &Option<String>| -> Option<Program> {
            let source = source.as_ref()?;
            match Program::compile_with(name, source, HOOK_VARS) {
                Ok(p) => Some(p),
                Err(e) => {
                    problems.extend(e.0.into_iter().map(SaveProblem::from));
                    None
                }
            }
        };
        let (mut condition, mut subject_expr, mut interval) = (None, None, None);
        match &spec.kind {
            Kind::Route => {}
            Kind::Hook {
                topic,
                condition: c,
                subject,
                subject_expr: s,
            } => {
                condition = hook_program("condition", c);
                subject_expr = hook_program("subject_expr", s);
                if topic.is_empty() {
                    problems.push(SaveProblem::EmptyTopic);
                }
                problems.extend(crate::name::problem("topic", topic).map(SaveProblem::InvalidName));
                if let Some(subject) = subject {
                    problems.extend(
                        crate::name::problem("subject", subject).map(SaveProblem::InvalidName),
                    );
                }
                match (subject, s) {
                    (Some(subject), None) if subject.is_empty() => {
                        problems.push(SaveProblem::EmptySubject)
                    }
                    (Some(_), None) | (None, Some(_)) => {}
                    _ => problems.push(SaveProblem::HookSubject),
                }
            }
            Kind::Schedule {
                interval: text,
                subject,
            } => {
                match humantime::parse_duration(text.trim()) {
                    Ok(d) if d >= MIN_INTERVAL => interval = Some(d),
                    Ok(d) if !d.is_zero() => problems.push(SaveProblem::IntervalTooShort {
                        interval: text.clone(),
                    }),
                    _ => problems.push(SaveProblem::Interval {
                        interval: text.clone(),
                    }),
                }
                if subject.is_empty() {
                    problems.push(SaveProblem::EmptySubject);
                }
                problems
                    .extend(crate::name::problem("subject", subject).map(SaveProblem::InvalidName));
            }
        }
        match contract {
            Ok(contract) if problems.is_empty() => Ok(Saved {
                spec,
                contract,
                condition,
                subject_expr,
                interval,
                generation,
            }),
            _ => Err(problems),
        }
    }

    /// The door's name.
    pub(crate) fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether visits to this door have a receiver.
    pub(crate) fn has_receiver(&self) -> bool {
        matches!(self.spec.kind, Kind::Route)
    }

    /// Mark the door broken: one of its expressions passed its deadline.
    pub(crate) fn break_door(&self) {
        self.contract.break_door();
    }

    /// Whether the door is broken.
    pub(crate) fn is_broken(&self) -> bool {
        self.contract.is_broken()
    }
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names() {
        for ok in ["a", "0", "route-1", "my_door"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "_a", "A", "a b", "é", "a.b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
