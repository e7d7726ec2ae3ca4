//! Every error an operation can return, as a [`Failure`]: its stable kind (`kind()`,
//! the table in `src/error.rs`) and its message.

use super::transcript::Failure;
use crate::door::outcome::{SaveError, VisitError};
use crate::error::{CancelError, ResumeError, StartError, TakeError};
use crate::inbox::AnswerError;

/// `From<&E> for Failure` for each operation error: its kind and its message.
macro_rules! failure_from {
    ($($error:ty),* $(,)?) => {$(
        impl From<&$error> for Failure {
            fn from(e: &$error) -> Self {
                Failure {
                    kind: e.kind().to_owned(),
                    message: e.to_string(),
                }
            }
        }
    )*};
}

failure_from!(
    VisitError,
    SaveError,
    StartError,
    ResumeError,
    TakeError,
    CancelError,
    AnswerError,
);
