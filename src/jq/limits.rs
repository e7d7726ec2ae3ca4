//! Resource limits for one evaluation.

use std::time::Duration;

/// Limits applied to one evaluation of a door expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// How long an evaluation may run before it is given up with [`EvalError::Deadline`].
    ///
    /// [`EvalError::Deadline`]: super::EvalError::Deadline
    pub(crate) deadline: Duration,
    /// The largest input, in bytes of JSON, that the caller should hand to an evaluation.
    ///
    /// This module does not measure inputs (it would cost a serialisation per evaluation);
    /// the caller checks this when the input arrives and the value is only carried here so
    /// that one `Limits` describes everything about an evaluation's budget.
    pub(crate) max_input_bytes: usize,
}

impl Limits {
    /// The deadline used unless configured otherwise.
    pub(crate) const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);
    /// The input size limit used unless configured otherwise: 1 MiB.
    pub(crate) const DEFAULT_MAX_INPUT_BYTES: usize = 1 << 20;
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: Self::DEFAULT_DEADLINE,
            max_input_bytes: Self::DEFAULT_MAX_INPUT_BYTES,
        }
    }
}
