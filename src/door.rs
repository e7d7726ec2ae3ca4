//! Doors: saved definitions that drive runs on a subject through the door contract.
//!
//! - [`spec`]: [`DoorSpec`](crate::DoorSpec), a door as its author writes it.
//! - [`saved`]: a door compiled and checked at save.
//! - [`contract`]: the four expressions, evaluated over one snapshot.
//! - [`plan`]: the shapes each expression must yield, and the visit's plan.
//! - [`visit`]: what a visit hands back, and its errors.
//! - [`registry`]: the saved doors; a visit, a hook fire, a schedule fire.
//!
//! A visit is checked whole before anything is applied; the checks against the parked
//! set and the application happen in one message to the subject's actor, so nothing can
//! change between them.

pub(crate) mod contract;
pub(crate) mod plan;
pub(crate) mod registry;
pub(crate) mod saved;
pub(crate) mod spec;
pub(crate) mod visit;
