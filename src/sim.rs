//! Simulation: scenario files and seeded random workloads, run on virtual time.
//!
//! A [`Scenario`] is a JSON file holding settings, scripted targets, doors and a
//! timeline of steps, each with an optional expectation; [`run`] plays it on a runtime
//! with a [`ManualClock`](crate::ManualClock) and sequential ids and returns a
//! [`Transcript`], the same bytes on every run. [`random`] generates a seeded workload
//! and checks the runtime against a small sequential reference model after every step.
//! The file format is documented in `docs/simulation.md`.
//!
//! Values in scripted targets and timeline steps are *templates*: a string `$name.path`
//! is replaced by an earlier binding (`kwargs`, `extras`, `run`, or a step's `as`), and
//! `${name.path}` inside a longer string by its text.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use parkway::sim::{Scenario, run};
//! let scenario = Scenario::from_json(r#"{
//!   "name": "one park",
//!   "targets": {"deploy": {"steps": [
//!     {"ask": {"question": "proceed?", "expiry_at": "10m"}, "as": "go"},
//!     {"return": {"go": "$go"}}
//!   ]}},
//!   "timeline": [
//!     {"run": "deploy", "subject": "t", "as": "first", "expect": {"status": "parked"}},
//!     {"resume": "$first.asks.0.id", "subject": "t", "payload": "yes",
//!      "expect": {"result": {"go": "yes"}}}
//!   ]
//! }"#).unwrap();
//! let transcript = run(&scenario).await.unwrap();
//! assert!(transcript.passed(), "{}", transcript.text());
//! # }
//! ```

mod driver;
mod expect;
mod failure;
mod model;
mod nodes;
mod random;
mod rounds;
mod runner;
mod scenario;
mod script;
mod template;
mod transcript;

pub use driver::{AfterStep, DataDir, Driver, HANG, InProcess, Outcome};
pub use model::{ModelFault, Tally};
pub use random::{NodeTally, RandomConfig, RandomReport};
pub use rounds::{Answering, RoundAnswer, RoundTrip, Rounds, TOOL};
pub use runner::{play, run};
pub use scenario::{
    Action, AskSpec, ExpectError, McpServer, Op, Scenario, ScenarioError, Script, Scripts,
    SimSettings, StartSpec, Step,
};
pub use script::{Notes, RemoteTools};
pub use transcript::{Check, Failure, Line, Transcript};

/// Run one seeded workload and check it against the reference model after every step:
/// on one runtime, or with [`RandomConfig::nodes`] of 2 or more, the node workload
/// (`docs/simulation.md`, "Random simulation" and "Nodes").
pub async fn random(config: &RandomConfig) -> Result<RandomReport, crate::BuildError> {
    if config.nodes > 1 {
        nodes::random_nodes(config).await
    } else {
        random::one_runtime(config).await
    }
}
