//! Internals reachable from the benchmarks and from the load tool of the command line,
//! which build as crates of their own. Not part of the API: hidden from the
//! documentation and free to change.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::door::saved::Saved;
use crate::jq::{Input, Limits};
use crate::supervisor::timers::{Timer, TimerKey, Timers};
use crate::{Entry, Runtime};

/// The supervisor's timer structure holding ask expiries, as a subject arms them.
#[derive(Debug)]
pub struct ExpiryTimers {
    timers: Timers,
    subject: Arc<str>,
    base: DateTime<Utc>,
    seq: u64,
}

/// An armed expiry, to disarm it.
#[derive(Debug, Clone, Copy)]
pub struct Armed(TimerKey);

impl Default for ExpiryTimers {
    fn default() -> Self {
        Self {
            timers: Timers::default(),
            subject: Arc::from("s"),
            base: DateTime::<Utc>::from_timestamp(1_767_225_600, 0).unwrap_or_default(),
            seq: 0,
        }
    }
}

impl ExpiryTimers {
    /// Arm the expiry of `interaction`, `after_ms` from a fixed instant. The interaction's
    /// name is shared, as a subject shares its entry's name with the timer.
    pub fn arm(&mut self, after_ms: i64, interaction: &Arc<str>) -> Armed {
        self.seq += 1;
        let key = TimerKey {
            at: self.base + chrono::Duration::milliseconds(after_ms),
            seq: self.seq,
        };
        self.timers.arm(
            key,
            Timer::Expiry {
                subject: Arc::clone(&self.subject),
                interaction: Arc::clone(interaction),
            },
        );
        Armed(key)
    }

    /// Disarm an expiry.
    pub fn disarm(&mut self, armed: Armed) {
        self.timers.disarm(armed.0);
    }

    /// How many are armed.
    pub fn len(&self) -> usize {
        self.timers.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.timers.len() == 0
    }
}

/// A global allocator that counts the bytes live on the heap, passing every call on to the
/// system allocator: for benches and examples that measure memory.
#[derive(Debug)]
pub struct Counting;

static LIVE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

impl Counting {
    /// Bytes live on the heap, as allocated through this allocator.
    pub fn live() -> isize {
        LIVE.load(std::sync::atomic::Ordering::Relaxed)
    }
}

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is
// updated beside it.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as given.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        LIVE.fetch_sub(layout.size() as isize, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

/// The async runtime the criterion benches drive the runtime on: one thread, so a visit
/// is timed as the work it makes, without handing it between threads. On a multi-thread
/// runtime the bench thread and the workers woke one another for every step, and those
/// wake-ups were most of a visit's time and most of its run-to-run spread (the figures
/// are in `docs/benchmarks.md`).
pub fn tokio() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
}

/// A subject's parked entries converted, once, to the `$parked` value its doors read.
#[derive(Debug, Clone)]
pub struct Parked(Input);

impl Parked {
    /// Convert `entries` as a visit converts its subject's parked set.
    pub fn new(entries: &[Entry]) -> Self {
        let converted: Vec<Input> = entries.iter().map(Input::from_entry).collect();
        Parked(Input::array(&converted))
    }
}

/// Saved doors' contracts, evaluated on the calling thread under the runtime's limits
/// with no runtime around them: the load tool's bare baseline.
#[derive(Debug)]
pub struct Contracts {
    /// The doors, in the order named.
    doors: Vec<Arc<Saved>>,
    /// The runtime's evaluation limits.
    limits: Limits,
}

impl Contracts {
    /// The doors called `names` as saved on `rt`; `None` when one of them is not.
    pub fn of(rt: &Runtime, names: &[&str]) -> Option<Self> {
        let hub = rt.hub();
        let doors = names
            .iter()
            .map(|name| hub.doors.get(name))
            .collect::<Option<Vec<_>>>()?;
        let settings = &hub.services.settings;
        let limits = Limits {
            deadline: settings.jq_deadline,
            max_input_bytes: settings.max_input_bytes,
        };
        Some(Self { doors, limits })
    }

    /// Evaluate the contract of door `index` (in the order named) over `input`, with
    /// `$parked` (`null` when `None`), `$subject`, `$door` and `$now` bound and converted
    /// as a visit converts them, and read the plan off its outputs: whether it planned
    /// without a problem. Nothing is applied; an index past the doors plans nothing.
    pub fn evaluate(
        &self,
        index: usize,
        input: &Value,
        parked: Option<&Parked>,
        subject: &Value,
        now: &str,
    ) -> bool {
        let Some(door) = self.doors.get(index) else {
            return false;
        };
        let vars = [
            parked
                .map(|p| p.0.clone())
                .unwrap_or_else(|| Input::from_json(&Value::Null)),
            Input::from_json(subject),
            Input::string(door.name()),
            Input::string(now),
        ];
        let input = Input::from_json(input);
        door.contract
            .evaluate_inline(&input, &vars, &self.limits)
            .plan
            .is_ok()
    }
}
