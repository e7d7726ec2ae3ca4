//! Crash tests with a real `kill -9`: the engine behind `parkway crash`.
//!
//! The parent ([`run`]) spawns a child process (`parkway crash-child`, [`child::drive`])
//! on a data directory. The child opens a runtime on it and drives a mixed workload on a
//! few dozen subjects with several concurrent tasks: runs that park asking their caller
//! (one ask, a group of two, or a journaled step and then an ask), resumes inline and
//! detached, cancels, takes of waiting outcomes. Every operation is written to the crash
//! log before it is called ([`log::Line::Begin`]) and again once it returned
//! ([`log::Line::Ack`]); every step a target runs for real is written too. After a
//! seeded wait the parent kills the child with `SIGKILL`, reopens the directory in its
//! own process (the runs in flight are replayed), and checks every subject's entries and
//! the runs' records against a model built from the log ([`model::Checker`]). Then the
//! next child opens the same directory.
//!
//! What is checked, and why each check is what `docs/semantics.md` and
//! `docs/durability.md` promise, is in `docs/durability.md`, "Crash tests".

pub mod child;
pub mod log;
pub mod model;
pub mod parent;
pub mod targets;

pub use child::{ChildConfig, drive};
pub use parent::{CrashConfig, CrashError, CrashReport, run};

#[cfg(test)]
mod tests;
