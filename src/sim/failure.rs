//! Every error an operation can return, as a [`Failure`]: a stable kind and a message.
//!
//! The kind is the error's variant in snake case; an error about one interaction id
//! takes the id problem's kind (`unknown`, `wrong_status`, `reserved_key`, `duplicate`,
//! `too_deep`, `already_resolved`).

use super::transcript::Failure;
use crate::door::outcome::{SaveError, VisitError};
use crate::error::{CancelError, IdProblem, ResumeError, StartError, TakeError};
use crate::inbox::AnswerError;

fn failure(kind: &str, message: impl ToString) -> Failure {
    Failure {
        kind: kind.to_owned(),
        message: message.to_string(),
    }
}

fn id_kind(problem: &IdProblem) -> &'static str {
    match problem {
        IdProblem::Unknown { .. } => "unknown",
        IdProblem::WrongStatus { .. } => "wrong_status",
        IdProblem::ReservedKey { .. } => "reserved_key",
        IdProblem::Duplicate { .. } => "duplicate",
        IdProblem::TooDeep { .. } => "too_deep",
        IdProblem::AlreadyResolved { .. } => "already_resolved",
    }
}

impl From<&VisitError> for Failure {
    fn from(e: &VisitError) -> Self {
        let kind = match e {
            VisitError::UnknownDoor { .. } => "unknown_door",
            VisitError::Broken { .. } => "broken",
            VisitError::InputTooLarge { .. } => "input_too_large",
            VisitError::InputTooDeep { .. } => "input_too_deep",
            VisitError::Refused { .. } => "refused",
            VisitError::Stopped => "stopped",
            VisitError::EmptySubject => "empty_subject",
        };
        failure(kind, e)
    }
}

impl From<&SaveError> for Failure {
    fn from(e: &SaveError) -> Self {
        match e {
            SaveError::Invalid { .. } => failure("invalid", e),
        }
    }
}

impl From<&StartError> for Failure {
    fn from(e: &StartError) -> Self {
        let kind = match e {
            StartError::UnknownTarget(_) => "unknown_target",
            StartError::UndeclaredExtras { .. } => "undeclared_extras",
            StartError::NotAnObject { .. } => "not_an_object",
            StartError::TooDeep { .. } => "too_deep",
            StartError::Stopped => "stopped",
            StartError::EmptySubject => "empty_subject",
        };
        failure(kind, e)
    }
}

impl From<&ResumeError> for Failure {
    fn from(e: &ResumeError) -> Self {
        match e {
            ResumeError::Refused(p) => failure(id_kind(p), e),
            ResumeError::Stopped => failure("stopped", e),
            ResumeError::EmptySubject => failure("empty_subject", e),
        }
    }
}

impl From<&TakeError> for Failure {
    fn from(e: &TakeError) -> Self {
        match e {
            TakeError::Refused(p) => failure(id_kind(p), e),
            TakeError::Failed { .. } => failure("failed", e),
            TakeError::Stopped => failure("stopped", e),
            TakeError::EmptySubject => failure("empty_subject", e),
        }
    }
}

impl From<&CancelError> for Failure {
    fn from(e: &CancelError) -> Self {
        match e {
            CancelError::Refused(problems) => match problems.0.as_slice() {
                [one] => failure(id_kind(one), e),
                _ => failure("refused", e),
            },
            CancelError::Stopped => failure("stopped", e),
            CancelError::EmptySubject => failure("empty_subject", e),
        }
    }
}

impl From<&AnswerError> for Failure {
    fn from(e: &AnswerError) -> Self {
        let kind = match e {
            AnswerError::Unknown { .. } => "unknown",
            AnswerError::AlreadyResolved { .. } => "already_resolved",
            AnswerError::External { .. } => "external",
            AnswerError::Invalid { .. } => "invalid",
            AnswerError::BadPage => "bad_page",
            AnswerError::Stopped => "stopped",
        };
        failure(kind, e)
    }
}
