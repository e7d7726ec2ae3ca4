//! Door expressions: compiling jq source with jaq, refusing what a door expression must not
//! do, and evaluating the result under a deadline.
//!
//! This module owns:
//!
//! * the save-time checks ([`check`]): syntax, declared variables, defined functions, the
//!   impure builtins, and the constructs that can loop without bound, all reported together;
//! * the jq library expressions are compiled against ([`library`]): jaq's core, standard and
//!   JSON libraries, less `env`, `now`, `input`, `debug`, `halt` and the like, with
//!   `fromjson` limited in depth and string repetition (`s * n`) in size, where jaq would
//!   otherwise abort the process;
//! * evaluation: [`Input`] converts a value to jaq's representation once, [`Program::run`]
//!   yields the first output and whether there is a second, and converts back to JSON;
//! * the deadline guard, in two layers:
//!   - evaluations run on a small pool of dedicated threads ([`pool`]), and the caller
//!     waits no longer than the deadline, whatever the evaluation does; a worker left running
//!     an abandoned evaluation is replaced at once, so other evaluations are not stalled;
//!   - the program itself checks the deadline (and the caller's cancellation) wherever jaq
//!     repeats a sub-term ([`rewrite`], [`deadline`]), so that an abandoned evaluation stops
//!     soon after its deadline instead of holding its thread;
//! * the shortcut past the pool: a door visit's batch of *shallow* programs ([`shallow`]: no
//!   deep walk of a value, no repetition, bounded nesting, so the ticks alone bound them) is
//!   first evaluated in place, on the caller's thread, under a budget of
//!   [`IN_PLACE_BUDGET`](program::IN_PLACE_BUDGET); past the budget it is dropped and the
//!   batch evaluated again on the pool (the expressions are pure). The hand-off to a pool
//!   thread and back is most of what a small expression costs, so the common case pays none.
//!
//! Why both: jaq-core 3 has no fuel or interrupt hook, but it takes the program as a syntax
//! tree, and a native filter inserted into the tree can raise an exception nothing catches
//! (the one `halt` uses). That costs next to nothing (a few percent on the seed examples) and
//! stops everything the interpreter loops over. It cannot stop a single long native step
//! (`contains` on two long arrays, sorting, comparing or printing a huge or exponentially
//! shared value), and jaq recurses deeply enough on nested values to overflow the 2 MiB stack
//! of an async runtime's worker (`reduce range(100000) as $i (0; [.]) | length` does), which
//! aborts the process. Threads of our own, with large stacks, close both gaps, for a hand-off
//! of a few microseconds per evaluation (which a shallow batch skips).
//!
//! What remains: an evaluation stuck in a native step keeps its CPU and memory until it ends
//! by itself (at most [`pool::MAX_STUCK`] such workers are replaced at a time; past that,
//! evaluations queue and meet their deadlines); and values nested deeper than the workers'
//! stacks hold (about a quarter of a million levels for the deepest-recursing builtins, more
//! than a program builds within the default deadline) still overflow them.
//!
//! It deliberately does not:
//!
//! * measure or limit input sizes ([`Limits::max_input_bytes`] is for the caller to check);
//! * limit memory: an evaluation can allocate until its deadline;
//! * decide what outputs mean (none, one or several): [`Outputs`] only reports them;
//! * know about doors, hooks or subjects beyond the names of the variables they declare.

mod budget;
mod check;
mod deadline;
mod error;
mod guard;
mod input;
mod library;
mod limits;
mod outputs;
mod pool;
mod program;
mod rewrite;
mod shallow;
mod watchdog;

pub use error::{CompileError, CompileErrors, EvalError};
pub(crate) use input::Input;
pub(crate) use limits::Limits;
pub(crate) use outputs::Outputs;

pub(crate) use program::Program;

#[cfg(test)]
mod tests;
