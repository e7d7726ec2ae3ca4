//! The cooperative half of the deadline guard: a check that the evaluated program itself runs
//! wherever its work can repeat.
//!
//! jaq has no fuel counter or interrupt hook, but three of its features combine into one:
//!
//! * A door expression is handed to jaq as a parsed syntax tree, so it can be rewritten before
//!   compilation: [`rewrite`](super::rewrite) puts a call to the native filter [`TICK`] at
//!   every point where jaq evaluates a sub-term once per output of another one.
//! * A native filter reaches the evaluation's global data, which for door expressions is an
//!   [`Env`] holding a [`Deadline`]. [`Door`], jaq's data type for door expressions, is
//!   defined here with it, so that every native (the tick, [`collect`](super::collect),
//!   [`guard`](super::guard), the [`library`](super::library)'s) builds on this module
//!   rather than on the library that gathers them.
//! * `halt` raises an exception that `try`, `?` and `label` do not catch, and that every jaq
//!   construct passes on. The tick raises it once the deadline has passed, and the evaluator
//!   recognises it by its exit code (see [`Stop`]; door expressions cannot call `halt`
//!   themselves).
//!
//! The tick behaves as `.` for paths and updates too, so `path(f)`, `|=` and friends work on
//! rewritten programs. Its cost is a few boxed iterators and an atomic load per call, plus a
//! clock read at most every [`CHECK_EVERY`] calls.
//!
//! A tick is also a unit of the evaluation's [`Budget`], and a tick run by an update
//! (`l |= f` and friends, whose left-hand side the rewrite ticks once per path part) also
//! charges the container the update may copy at that level. A single native step does
//! not pass through the program: the guarded ones ([`guard`](super::guard)) charge the same
//! budget and read the clock through [`Deadline::spend`] instead.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jaq_core::box_iter::box_once;
use jaq_core::data::{DataT, HasLut};
use jaq_core::native::Fun;
use jaq_core::{Lut, Native};
use jaq_json::Val;

use super::budget::{Budget, CONTAINER_BYTES, Stop, VAL_BYTES};
use super::names::TICK;

/// The most ticks between two clock reads.
///
/// A tick costs a hundred nanoseconds or so (jaq boxes a few iterators for every native call)
/// and a clock read a few tens, so while ticks come fast the clock is read only every so many
/// of them. When they come slowly (much work between
/// them), the clock is read at every one: see [`Deadline::tick`].
pub(super) const CHECK_EVERY: u32 = 64;

/// Below this time between two clock reads, ticks count as fast and reads are spaced out.
const FAST: Duration = Duration::from_micros(20);

/// The deadline of one evaluation, checked by the program's ticks.
///
/// Lives on the stack of the thread running the evaluation. Two things end it: the caller
/// raising `cancelled` when it stops waiting (read at every tick: one relaxed load), and the
/// clock, for evaluations nobody waits on from another thread.
pub(super) struct Deadline<'a> {
    at: Instant,
    cancelled: &'a AtomicBool,
    /// Ticks left before the next clock read.
    countdown: Cell<u32>,
    /// Ticks between clock reads, adapted to how fast ticks come.
    interval: Cell<u32>,
    /// When the clock was last read.
    checked: Cell<Instant>,
    /// Once passed, stays passed, so that every later tick fails without reading the clock.
    passed: Cell<bool>,
    /// The evaluation's work and memory budget, charged by the ticks and the guarded natives.
    pub(super) budget: Budget,
}

impl<'a> Deadline<'a> {
    /// A deadline at `at`, or when `cancelled` is raised. The first tick reads the clock, so
    /// an evaluation that starts late stops at once.
    pub(super) fn new(at: Instant, cancelled: &'a AtomicBool) -> Deadline<'a> {
        Deadline {
            at,
            cancelled,
            countdown: Cell::new(0),
            interval: Cell::new(1),
            checked: Cell::new(Instant::now()),
            passed: Cell::new(false),
            budget: Budget::default(),
        }
    }

    /// Whether the evaluation may go on: one step of its budget, and the deadline.
    pub(super) fn tick(&self) -> Result<(), Stop> {
        if self.passed.get() || self.cancelled.load(Ordering::Relaxed) {
            self.passed.set(true);
            return Err(Stop::Deadline);
        }
        self.budget.step()?;
        let left = self.countdown.get();
        if left > 0 {
            self.countdown.set(left - 1);
            return Ok(());
        }
        let now = Instant::now();
        if now >= self.at {
            self.passed.set(true);
            return Err(Stop::Deadline);
        }
        // Double the interval while ticks come fast; back to every tick as soon as they
        // do not, so that slow ticks cannot overshoot the deadline by many of them.
        let fast = now.duration_since(self.checked.get()) < FAST;
        let interval = if fast {
            (self.interval.get() * 2).min(CHECK_EVERY)
        } else {
            1
        };
        self.interval.set(interval);
        self.countdown.set(interval - 1);
        self.checked.set(now);
        Ok(())
    }

    /// A tick run by an update, which may copy a container at its level: also charges
    /// that container (see [`collect`](super::collect)).
    pub(super) fn tick_update(&self) -> Result<(), Stop> {
        self.tick()?;
        self.allocate(CONTAINER_BYTES + VAL_BYTES, "an update")
    }

    /// Whether the deadline has passed, reading the clock.
    pub(super) fn has_passed(&self) -> bool {
        let passed = self.passed.get()
            || self.cancelled.load(Ordering::Relaxed)
            || Instant::now() >= self.at;
        self.passed.set(passed);
        passed
    }

    /// Charge `units` of work done by `op` (see [`budget`](super::budget)), reading the
    /// clock every [`CHECK_UNITS`](super::budget::CHECK_UNITS) units or so: a long native
    /// step stops at the deadline too.
    pub(super) fn spend(&self, units: u64, op: &'static str) -> Result<(), Stop> {
        if self.budget.spend(units, op)? && self.has_passed() {
            return Err(Stop::Deadline);
        }
        Ok(())
    }

    /// Charge `bytes` of memory that `op` is about to allocate.
    pub(super) fn allocate(&self, bytes: u64, op: &'static str) -> Result<(), Stop> {
        self.budget.allocate(bytes, op)
    }

    /// Refuse a value `op` would make of more than
    /// [`MAX_VALUE_BYTES`](super::budget::MAX_VALUE_BYTES), and charge the rest.
    pub(super) fn make(&self, bytes: u64, op: &'static str) -> Result<(), Stop> {
        self.budget.make(bytes, op)
    }

    /// Refuse a value nested deeper than [`MAX_DEPTH`](super::budget::MAX_DEPTH).
    pub(super) fn nest(&self, depth: usize, op: &'static str) -> Result<(), Stop> {
        self.budget.nest(depth, op)
    }
}

/// Marker for jaq's data types: door expressions process [`Val`]s and their native functions
/// can reach the evaluation's [`Deadline`].
pub(super) struct Door;

/// What native functions can reach while a door expression runs.
pub(super) struct Env<'a> {
    /// The compiled program, which jaq needs to call definitions.
    pub(super) lut: &'a Lut<Door>,
    /// The guard ticked by the instrumented program.
    pub(super) deadline: &'a Deadline<'a>,
}

impl DataT for Door {
    type V<'a> = Val;
    type Data<'a> = &'a Env<'a>;
}

impl<'a> HasLut<'a, Door> for &'a Env<'a> {
    fn lut(&self) -> &'a Lut<Door> {
        self.lut
    }
}

/// The tick as a native filter: `.` while the deadline has not passed, then an uncatchable
/// exception.
pub(super) fn tick() -> Fun<Door> {
    // Closures rather than functions: jaq does not export the types of a path's value or of
    // an update function, so only inference can name them.
    let native = Native::<Door>::new(|cv| match cv.0.data().deadline.tick() {
        Ok(()) => box_once(Ok(cv.1)),
        Err(stop) => box_once(Err(stop.exn())),
    })
    .with_paths(|cv| match cv.0.data().deadline.tick() {
        Ok(()) => box_once(Ok(cv.1)),
        Err(stop) => box_once(Err(stop.exn())),
    })
    .with_update(|cv, f| match cv.0.data().deadline.tick_update() {
        Ok(()) => f(cv.1),
        Err(stop) => box_once(Err(stop.exn())),
    });
    (TICK, Box::new([]), native)
}

/// `now + after`, or a day from now if that does not fit in an `Instant`.
pub(super) fn deadline_after(now: Instant, after: Duration) -> Instant {
    now.checked_add(after)
        .or_else(|| now.checked_add(Duration::from_secs(24 * 3600)))
        .unwrap_or(now)
}
