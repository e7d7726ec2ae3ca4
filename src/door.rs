//! Doors: saved definitions that drive runs on a subject through the door contract.
//!
//! - [`spec`]: [`DoorSpec`](crate::DoorSpec), a door as its author writes it.
//! - [`saved`]: a door compiled and checked at save.
//! - [`contract`]: the four expressions, and a visit's evaluation of them over one
//!   snapshot: the variables bound, the plan read off the outputs, shape by shape.
//! - [`plan`]: the visit's plan, and what can be wrong with a visit.
//! - [`outcome`]: what a visit hands back, and its errors.
//! - [`registry`]: the saved doors, a hook's condition and subject, a schedule's fires.
//!
//! Everything here is the door's side of a visit: its definition and its contract's
//! evaluation. The subject checks and applies the plan (`crate::subject`), in the same
//! message as the evaluation, so nothing can change between them; nothing here sends to
//! a subject.

pub(crate) mod contract;
pub(crate) mod outcome;
pub(crate) mod plan;
pub(crate) mod registry;
pub(crate) mod saved;
pub(crate) mod shared;
pub(crate) mod spec;
