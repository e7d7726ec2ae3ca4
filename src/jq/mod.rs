//! Door expressions: compiling jq source with jaq, refusing what a door expression must not
//! do, and evaluating the result under a deadline.
//!
//! This module owns:
//!
//! * the save-time checks ([`check`]): syntax, declared variables, defined functions, the
//!   impure builtins, and the constructs that can loop without bound, all reported together;
//! * the jq library expressions are compiled against ([`library`]): jaq's core, standard and
//!   JSON libraries, less `env`, `now`, `input`, `debug`, `halt` and the like;
//! * evaluation: [`Input`] converts a value to jaq's representation once, [`Program::run`]
//!   yields the first output and whether there is a second, and converts back to JSON;
//! * the deadline guard, in two layers. Every evaluation runs on a small pool of dedicated
//!   threads ([`pool`]) and the caller waits no longer than the deadline, whatever the
//!   evaluation does; a worker left running an abandoned evaluation is replaced at once. And
//!   the compiled program checks the deadline itself at every pipe, fold step and recursive
//!   call ([`deadline`]), so that an abandoned evaluation almost always stops within
//!   microseconds instead of holding its thread.
//!
//! Why both: jaq-core 3 has no fuel or interrupt hook, but the program can be instrumented with
//! a native filter that raises an uncatchable exception (the one `halt` uses) once the deadline
//! has passed. That is cheap and stops everything the interpreter loops over. It cannot stop a
//! single long native step (`contains` on two long arrays, comparing or printing a huge or
//! exponentially shared value), and jaq recurses deeply enough on nested values to overflow the
//! stack of an async runtime's worker thread, which aborts the process. Dedicated threads with
//! large stacks close both gaps, at the cost of a thread hand-off per evaluation (a few
//! microseconds); an evaluation stuck in a native step keeps its CPU until it ends, and at most
//! [`pool::MAX_STUCK`] such workers are replaced at a time.
//!
//! It deliberately does not:
//!
//! * measure or limit input sizes ([`Limits::max_input_bytes`] is for the caller to check);
//! * limit memory: an evaluation can allocate until its deadline;
//! * decide what outputs mean (none, one or several): [`Outputs`] only reports them;
//! * know about doors, hooks or subjects beyond the names of the variables they declare.

mod check;
mod deadline;
mod error;
mod input;
mod library;
mod limits;
mod outputs;
mod pool;
mod program;

pub use error::{CompileError, CompileErrors, EvalError};
pub(crate) use input::Input;
pub(crate) use limits::Limits;
pub(crate) use outputs::Outputs;
pub(crate) use program::{DOOR_VARS, MAX_SOURCE_BYTES, Program};

#[cfg(test)]
mod tests;

#[cfg(test)]
pub(crate) mod scratch;
