//! parkway: a runtime in which agent and tool runs park on a *subject* to ask the run
//! that called them, and are resumed, taken, cancelled or expired through *doors*.
//!
//! # Layout
//!
//! - [`runtime`](Runtime): the public face, built with a [`Builder`].
//! - `services`: the leaf services every part shares (settings, clock, ids, targets,
//!   events, ceilings, the timer handle, the count of work in flight).
//! - `subject`: one actor per subject owning its parked set. Its transitions are a
//!   function of the state and one message that returns effects as data; the actor
//!   applies them. The hub, the registry that spawns and passivates actors, the client
//!   operations (start, park, list, resume, take, cancel, visit, answer), and the run
//!   records and inbox the effects keep.
//! - `run`: a run's [`Ctx`] (`ask`, `step`, `call`), its [`Journal`], the activation
//!   that executes it, and the port through which it reaches the runtime.
//! - `supervisor`: the run tree and whole-chain walks; every timer, and the ticker that
//!   waits on the clock for them.
//! - `door`: a door's definition, its compiled contract and the plan it yields, the
//!   saved doors, and what a visit hands back.
//! - `inbox`: the interactions inbox of user asks, its frame stream and answer checks.
//! - `tools`: the generic tools `list_parked`, `resume_parked`, `cancel_parked`.
//! - `validator`: JSON Schema validation of form answers and tool arguments (jsonschema,
//!   the `forms` feature).
//! - `jq`: door expressions, compiled and evaluated with jaq under a deadline and a
//!   budget.
//! - `store`: the durable store: keyspaces of bytes, atomic batches, group commit, in
//!   memory or on disk (fjall, the `disk` feature).
//! - `depth`: the nesting limit every value entering the runtime is checked against.
//! - [`Ask`], [`Entry`], [`RunRecord`], [`Event`], the errors: the data the runtime takes
//!   and hands out.
//! - [`Clock`], [`Ids`], [`Settings`]: the seams time, identifiers and tunables come in by.
//! - [`sim`]: scenario files and seeded random workloads on virtual time, checked
//!   against a reference model.
//! - [`check`]: a data directory read whole to find damage, changing nothing in it
//!   (the `disk` feature's).
//! - `bench`: internals the benchmarks and the load tool reach (hidden, not API).
//!
//! # A first run
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use parkway::{Ask, Ids, ManualClock, Resumed, RunStatus, Runtime, Start};
//! use serde_json::json;
//!
//! let rt = Runtime::builder().without_env().clock(ManualClock::default())
//!     .ids(Ids::sequential()).build().await.unwrap();
//! rt.register("deploy", &[], |ctx, _kwargs, _extras| async move {
//!     let answer = ctx.ask(Ask::caller("proceed?").answer_format("confirm").expiry_at("10m")).await?;
//!     Ok(json!({"deployed": answer["answer"] == "yes"}))
//! });
//! let record = rt.run(Start::new("thread-1", "deploy")).await.unwrap();
//! assert_eq!(record.status, RunStatus::Parked);
//! let parked = rt.list("thread-1").await.unwrap();
//! let Resumed::Outcome(done) = rt.resume("thread-1", &parked[0].id, json!({"answer": "yes"})).await.unwrap()
//!     else { unreachable!() };
//! assert_eq!(done.result, Some(json!({"deployed": true})));
//! # }
//! ```

#![warn(missing_docs, unreachable_pub)]

mod ask;
#[doc(hidden)]
pub mod bench;
#[cfg(feature = "disk")]
pub mod check;
mod clock;
mod depth;
mod door;
mod entry;
mod error;
mod event;
mod health;
mod ids;
mod inbox;
mod jq;
mod keys;
mod name;
mod record;
mod run;
mod runtime;
mod services;
mod settings;
pub mod sim;
// The memory engine, the figures and the event keys are reached only by the store's own
// tests (built with the `disk` feature) until a simulation or an event log uses them.
#[cfg_attr(
    any(not(test), not(feature = "disk")),
    allow(dead_code, unused_imports)
)]
mod store;
mod subject;
mod supervisor;
mod target;
mod tool_spec;
mod tools;
mod validator;

/// The README's example, compiled as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

pub use ask::{
    Ask, AskProblem, EXPIRY_MARKER_KEY, Expiry, Mode, OnExpiry, expiry_marker, is_expiry_marker,
};
pub use clock::{Clock, ClockError, ManualClock, SystemClock};
pub use depth::{MAX_SCHEMA_DEPTH, MAX_VALUE_DEPTH, json_nesting};
pub use door::outcome::{ItemOutcome, SaveError, Visit, VisitError, VisitOutcome};
pub use door::plan::VisitProblem;
pub use door::registry::HookFire;
pub use door::saved::SaveProblem;
pub use door::spec::{Kind as DoorKind, Spec as DoorSpec};
pub use entry::{Entry, EntryStatus, To, WAIT_KEY};
pub use error::{
    AskError, BuildError, CancelError, CtxError, IdProblem, LogError, Problems, RecordError,
    ResumeError, RunError, StartError, StoreFault, Suspension, TakeError,
};
pub use event::{Event, Logged, Resolution, Settled};
pub use health::Health;
pub use ids::Ids;
pub use inbox::{
    AnswerError, AnswerProblem, DEFAULT_PAGE_SIZE, Frame, InboxItem, MAX_PAGE_SIZE, Page,
    check_answer,
};
pub use jq::{CompileError, CompileErrors, EvalError};
pub use keys::{DeliveryError, MAX_KEY_BYTES};
pub use name::MAX_NAME_BYTES;
pub use record::{Buffered, NoResult, Resumed, RunRecord, RunStatus, Suspended};
pub use run::Ctx;
pub use run::journal::{Journal, JournalEntry};
pub use runtime::{Builder, Runtime, Start, Stats, StoreRecovery, StoreStats};
pub use settings::{
    MAX_CONCURRENT, MAX_CONCURRENT_CALLER, Settings, SettingsError, WAITING_RETENTION,
};
pub use tool_spec::{
    MAX_TOOL_NAME, ResultForm, TaskSupport, Tool, ToolCallError, ToolSpec, ToolSpecError,
};
pub use tools::{GENERIC_TOOLS, generic_tool_descriptions};
