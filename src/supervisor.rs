//! The supervisor: the run tree, whole-chain cancellation, and every timer.
//!
//! - [`tree`]: parent/child links and executing activations, and the chain walk.
//! - [`timers`]: the one ordered structure holding every armed timer.
//! - [`arming`]: the queue through which subjects and doors change the timers.
//! - [`actor`]: the actor that owns both, one message at a time.
//! - [`ticker`]: the task that waits on the clock and delivers fired timers.

pub(crate) mod actor;
pub(crate) mod arming;
pub(crate) mod ticker;
pub(crate) mod timers;
pub(crate) mod tree;

pub(crate) use actor::{Answer, Msg, Supervisor};
pub(crate) use arming::Arming;
pub(crate) use timers::{Timer, TimerKey, TimerKeys};
