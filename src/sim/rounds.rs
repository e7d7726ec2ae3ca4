//! [`Rounds`]: the seam through which the random workload makes MCP tool calls and
//! answers their `input_required` rounds. The library has no MCP face; the command line
//! plugs its own in (`parkway sim --random --http`: the face served over Streamable
//! HTTP), so the workload's calls travel the protocol as a client's would.
//!
//! The workload offers its target `asker` as the tool [`TOOL`], whose `subject_expr`
//! reads the subject off the arguments, so a call's ask parks on one of the workload's
//! subjects beside the asks its doors start, and any of them may resolve it: a route, a
//! hook, a resume, a cancel, its expiry, or the call's own retry. The model checks every
//! ask is resolved once whichever did, and that a retry that lost the race is refused.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::runtime::Runtime;

/// The tool the random workload offers: its target `asker`, on the subject named by
/// the argument `subject`.
pub const TOOL: &str = "ask";

/// What a `tools/call` answered, as far as the workload reads it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RoundAnswer {
    /// `input_required`: the keys of its input requests (the asks' interaction ids) and
    /// the sealed `requestState`.
    Round {
        /// The keys, in the round's order.
        keys: Vec<String>,
        /// The state to send back.
        state: String,
    },
    /// The run's result (`structuredContent`).
    Result(Value),
    /// A tool error (`isError`), its text.
    ToolError(String),
    /// A protocol error or a broken exchange, its text.
    Error(String),
}

/// A future of a [`RoundAnswer`].
pub type Answering<'a> = Pin<Box<dyn Future<Output = RoundAnswer> + 'a>>;

/// How the random workload reaches an MCP face over its runtime.
pub trait RoundTrip {
    /// Serve the face over `rt`: called once the workload's runtime is built, and again
    /// after each restart (crash), with the new runtime.
    fn attach<'a>(&'a self, rt: &'a Runtime) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

    /// `tools/call` of `tool` with `arguments`.
    fn call<'a>(&'a self, tool: &'a str, arguments: Value) -> Answering<'a>;

    /// The retry of a round: the same call with `responses` (by key) and its `state`.
    fn retry<'a>(
        &'a self,
        tool: &'a str,
        arguments: Value,
        state: &'a str,
        responses: Value,
    ) -> Answering<'a>;
}

/// A shared [`RoundTrip`], as [`RandomConfig::rounds`](super::RandomConfig::rounds)
/// holds it.
#[derive(Clone)]
pub struct Rounds(pub Arc<dyn RoundTrip>);

impl fmt::Debug for Rounds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Rounds(..)")
    }
}
