//! parkway: a runtime in which agent and tool runs park on a *subject* to ask the run
//! that called them, and are resumed, taken, cancelled or expired through *doors* whose
//! behaviour is written in jq.
//!
//! # Start with the guide
//!
//! The guide in the repository's `docs/guide/` has one short page per task, each with a
//! complete example that CI runs:
//!
//! 1. embed parkway and run a target that asks its caller (`embed.md`);
//! 2. answer an ask from another run (`answer-from-a-run.md`);
//! 3. drive runs through doors: routes, hooks, schedules (`doors.md`);
//! 4. ask a person: user asks and the inbox (`user-asks.md`);
//! 5. deadlines: expiry and the marker (`expiry.md`);
//! 6. waiting outcomes: results nobody received (`waiting-outcomes.md`);
//! 7. keep state across restarts: the data directory (`durability.md`);
//! 8. serve it in production, and load and simulation (`serve-in-production.md`,
//!    `load-and-simulation.md`).
//!
//! # A first run
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use parkway::{Ask, Runtime, Start};
//! use serde_json::json;
//!
//! let rt = Runtime::builder()
//!     .register("deploy", &[], |ctx, _kwargs, _extras| async move {
//!         let answer = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?;
//!         Ok(json!({"deployed": answer == "yes"}))
//!     })
//!     .build()
//!     .await?;
//! let record = rt.run(Start::new("thread-1", "deploy")).await?; // parked on its ask
//! let ask = record.first_ask()?;
//! let outcome = rt.resume("thread-1", &ask.id, json!("yes")).await?;
//! assert_eq!(outcome.into_result()?, json!({"deployed": true}));
//! # Ok(()) }
//! ```
//!
//! # The public types
//!
//! - **The runtime:** [`Runtime`], built with a [`Builder`]; [`Start`] names a run to
//!   start. Targets are registered on the builder (or the runtime) and receive a
//!   [`Ctx`]: [`Ctx::ask`], [`Ctx::step`], [`Ctx::call`], and the generic tools
//!   [`Ctx::list_parked`], [`Ctx::resume_parked`], [`Ctx::take_parked`],
//!   [`Ctx::cancel_parked`].
//! - **Asks and parked entries:** [`Ask`] (with [`OnExpiry`], [`Mode`], [`Expiry`]),
//!   [`Entry`] with its [`EntryStatus`] and addressee [`To`], and the expiry marker
//!   ([`is_expiry_marker`]).
//! - **Outcomes:** [`RunRecord`] and its [`RunStatus`], [`Resumed`], and [`NoResult`],
//!   which every result helper ([`RunRecord::into_result`], [`RunRecord::first_ask`],
//!   [`Resumed::into_result`], [`Visit::result`]) returns when there is no value.
//!   [`Runtime::await_outcome`] takes a result nobody received once it is there.
//! - **Doors:** [`DoorSpec`] (route, hook, schedule), what a visit did ([`Visit`],
//!   [`VisitOutcome`], [`ItemOutcome`]), a hook fire ([`HookFire`]).
//! - **The inbox:** [`Runtime::inbox`] pages of [`InboxItem`]s, [`Runtime::answer`],
//!   its live [`Frame`]s, and [`check_answer`].
//! - **Tools:** [`ToolSpec`] describes a target as a tool for the MCP face
//!   ([`Runtime::call_tool`]).
//! - **Events:** [`Event`], and the durable log's [`Logged`] entries.
//! - **Errors:** one enum per operation ([`StartError`], [`ResumeError`], [`TakeError`],
//!   [`CancelError`], [`VisitError`], [`AnswerError`], [`AwaitError`], …), each naming
//!   what was wrong; [`RunError`] and [`AskError`] inside a target.
//! - **Seams:** [`Clock`] ([`SystemClock`], [`ManualClock`]), [`Ids`], [`Settings`].
//! - **Tools around it:** [`sim`] (scenario files and seeded random workloads checked
//!   against a reference model) and `check` (a data directory read whole for damage,
//!   with the `disk` feature).
//!
//! # Features
//!
//! `disk` (the data directory's store, fjall) and `forms` (JSON Schema validation of form
//! answers and tool arguments, jsonschema) are on by default; `default-features = false`
//! leaves both out, and what each build without them refuses is in `docs/features.md`.
//!
//! How the code is laid out: `ARCHITECTURE.md` in the repository.

#![warn(missing_docs, unreachable_pub)]

mod ask;
#[doc(hidden)]
pub mod bench;
mod caps;
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
mod slot;
mod stages;
// The memory engine, the figures and the event keys are reached only by the store's own
// tests (built with the `disk` feature) until a simulation or an event log uses them.
#[cfg_attr(
    any(not(test), not(feature = "disk")),
    allow(dead_code, unused_imports)
)]
mod store;
mod subject;
mod supervisor;
mod sync;
mod target;
mod tool_spec;
mod tools;
mod validator;

/// The README's example, compiled as a doctest so it cannot rot.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The guide's pages, each example compiled and run as a doctest so none can rot.
#[cfg(doctest)]
mod guide {
    #[doc = include_str!("../docs/guide/embed.md")]
    struct Embed;
    #[doc = include_str!("../docs/guide/answer-from-a-run.md")]
    struct AnswerFromARun;
    #[doc = include_str!("../docs/guide/doors.md")]
    struct Doors;
    #[doc = include_str!("../docs/guide/user-asks.md")]
    struct UserAsks;
    #[doc = include_str!("../docs/guide/expiry.md")]
    struct Expiry;
    #[doc = include_str!("../docs/guide/waiting-outcomes.md")]
    struct WaitingOutcomes;
    #[doc = include_str!("../docs/guide/durability.md")]
    struct Durability;
}

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
    AskError, AwaitError, BuildError, CancelError, CtxError, IdProblem, LogError, Problems,
    RecordError, ResumeError, RunError, SlotError, StartError, StoreFault, Suspension, TakeError,
};
pub use event::{Event, Logged, Resolution, Settled};
pub use health::Health;
pub use ids::Ids;
pub use inbox::{
    AnswerError, DEFAULT_PAGE_SIZE, Frame, InboxItem, MAX_PAGE_SIZE, Page, check_answer,
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
#[doc(hidden)]
pub use stages::{STALL, Stage, StageSink};
pub use tool_spec::{
    MAX_TOOL_NAME, ResultForm, TaskSupport, Tool, ToolCallError, ToolSpec, ToolSpecError,
};
pub use tools::{GENERIC_TOOLS, generic_tool_descriptions};
pub use validator::AnswerProblem;
