//! Runs: one execution of a target, replayed from its journal on every activation.
//!
//! - [`ctx`]: [`Ctx`], what a target sees: `ask`, `step`, `call`, and the parked-set
//!   operations on its own subject.
//! - [`journal`]: the plain-data record of what a run did.
//! - [`activation`]: the run actor that executes one activation.
//! - [`stored`]: a run's kwargs and extras kept as compact text between activations.
//! - [`port`]: what an activation needs of the runtime, as a trait the subjects
//!   implement; what starts a run and what an activation's end reports.

pub(crate) mod activation;
pub(crate) mod ctx;
pub(crate) mod journal;
pub(crate) mod port;
pub(crate) mod stored;

pub use ctx::Ctx;
