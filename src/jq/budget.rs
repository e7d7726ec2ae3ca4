//! The work and memory budget of one evaluation, what its charges cost, and how an
//! evaluation is stopped.
//!
//! The deadline's ticks stop the interpreter, but not one native step: comparing, sorting,
//! printing or searching a value walks it inside a single call, and jaq shares values, so
//! `[., .] | [., .] | ...` forty times is a few hundred bytes in memory and 2^40 leaves to
//! walk. A thread cannot be killed, so every step that can take time or memory in
//! proportion to a value's *tree* is guarded instead (see [`guard`](super::guard)): it
//! charges this budget for the work it does as it does it (a node visited, a comparison, 64
//! bytes of a string compared or copied) and for the memory it is about to allocate, and it
//! stops at the first of:
//!
//! * [`MAX_WORK`] units of work for the whole evaluation (a tick of the program is a unit
//!   too), whatever its deadline;
//! * [`MAX_BYTES`] bytes allocated by guarded steps and by the interpreter
//!   ([`collect`](super::collect)) for the whole evaluation, and [`MAX_VALUE_BYTES`] for
//!   any one string or array they make;
//! * values nested deeper than [`MAX_DEPTH`];
//! * the deadline, read every [`CHECK_UNITS`] units, so that a long native step ends
//!   within a few microseconds of it rather than when it is done.
//!
//! A limit ends the evaluation with an exception nothing catches (like the deadline's), and
//! the budget keeps which limit it was, for the error. Both are a [`Stop`], which this module
//! owns so that everything that charges the budget or reads the deadline can build on it.
//!
//! It also holds the estimates of what jaq's values take in memory ([`CONTAINER_BYTES`] and
//! the like), which the interpreter's allocations ([`collect`](super::collect)), the ticks
//! of an update ([`deadline`](super::deadline)) and the guarded natives charge alike.
//!
//! It imports nothing else of the evaluator: every other part of it builds on this one.

use std::cell::Cell;

use jaq_core::Exn;
use jaq_json::Val;

/// Units of work one evaluation may do: ticks of the program and the work of guarded native
/// steps. A unit is at most a few tens of nanoseconds of a native step, so a native step ends
/// well within a second whatever the value, and the deadline (read every [`CHECK_UNITS`])
/// usually ends it sooner.
pub(super) const MAX_WORK: u64 = 20_000_000;

/// Bytes that guarded native steps and the interpreter's own allocations of one evaluation
/// may take, in total (never given back when a value is dropped).
pub(super) const MAX_BYTES: u64 = 64 << 20;

/// Bytes any one string (or array, at 16 bytes an element) made by a guarded step may have.
pub(super) const MAX_VALUE_BYTES: u64 = 16 << 20;

/// The deepest nesting of arrays and objects a guarded step walks. jq's own parser stops
/// at the same depth.
pub(super) const MAX_DEPTH: usize = 10_000;

/// Units between two reads of the clock by a native step.
pub(super) const CHECK_UNITS: u64 = 4096;

/// Bytes charged for an array the interpreter makes (or copies in an update), besides
/// its elements: the shared pointer's counts, the vector's header, and the spare capacity
/// of its first buffer. Also what bounds the nesting an evaluation can build (see
/// [`collect`](super::collect)).
pub(super) const CONTAINER_BYTES: u64 = 128;

/// Bytes charged for an object the interpreter makes, besides its entries: a map keeps an
/// index table as well as its entries.
pub(super) const OBJECT_BYTES: u64 = 256;

/// Bytes a value takes in an array (jaq's `Val`).
pub(super) const VAL_BYTES: u64 = 16;

/// Bytes an entry takes in an object (hash, key and value).
pub(super) const ENTRY_BYTES: u64 = 48;

/// Exit code carried by the exception that ends an evaluation whose deadline has passed.
pub(super) const HALT_CODE: i32 = -0x0dead;

/// Exit code carried by the exception that ends an evaluation past one of its limits; the
/// limit is kept in the evaluation's [`Budget`].
pub(super) const LIMIT_CODE: i32 = -0x0b16;

/// Why a guarded step refused to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// The deadline passed (or the caller stopped waiting).
    Deadline,
    /// A limit of the budget was reached; the budget keeps which.
    Limit,
}

impl Stop {
    /// The uncatchable exception that ends the evaluation.
    pub(super) fn exn<'a>(self) -> Exn<'a, Val> {
        Exn::halt(match self {
            Stop::Deadline => HALT_CODE,
            Stop::Limit => LIMIT_CODE,
        })
    }
}

/// Which limit an evaluation reached, and in which operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Limit {
    /// [`MAX_WORK`].
    Work(&'static str),
    /// [`MAX_BYTES`].
    Bytes(&'static str),
    /// [`MAX_VALUE_BYTES`].
    Value(&'static str),
    /// [`MAX_DEPTH`].
    Depth(&'static str),
    /// A limit of one operation, with its own message.
    Other(&'static str, &'static str),
}

impl Limit {
    /// The limit as a door author reads it.
    pub(super) fn message(self) -> String {
        match self {
            Limit::Work(op) => {
                format!("{op} exceeds the evaluation's limit of {MAX_WORK} units of work")
            }
            Limit::Bytes(op) => {
                format!("{op} exceeds the evaluation's limit of {MAX_BYTES} bytes allocated")
            }
            Limit::Value(op) => {
                format!("{op} would make a value over the limit of {MAX_VALUE_BYTES} bytes")
            }
            Limit::Depth(op) => {
                format!("{op} meets a value nested deeper than the limit of {MAX_DEPTH} levels")
            }
            Limit::Other(op, what) => format!("{op} exceeds the limit of {what}"),
        }
    }
}

/// What is left of one evaluation's budget. Lives with its [`Deadline`], on the thread
/// running the evaluation.
///
/// [`Deadline`]: super::deadline::Deadline
#[derive(Debug)]
pub(super) struct Budget {
    work: Cell<u64>,
    bytes: Cell<u64>,
    /// Units charged since the clock was last read.
    unchecked: Cell<u64>,
    /// The limit reached, once one is.
    reached: Cell<Option<Limit>>,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            work: Cell::new(MAX_WORK),
            bytes: Cell::new(MAX_BYTES),
            unchecked: Cell::new(0),
            reached: Cell::new(None),
        }
    }
}

impl Budget {
    /// The limit reached, if any.
    pub(super) fn reached(&self) -> Option<Limit> {
        self.reached.get()
    }

    /// Record `limit` as reached (the first one stays).
    pub(super) fn reach(&self, limit: Limit) -> Stop {
        if self.reached.get().is_none() {
            self.reached.set(Some(limit));
        }
        Stop::Limit
    }

    /// One step of the program.
    pub(super) fn step(&self) -> Result<(), Stop> {
        match self.work.get().checked_sub(1) {
            Some(left) => {
                self.work.set(left);
                Ok(())
            }
            None => Err(self.reach(Limit::Work("the program"))),
        }
    }

    /// Charge `units`; `Ok(true)` when the clock should be read.
    pub(super) fn spend(&self, units: u64, op: &'static str) -> Result<bool, Stop> {
        let Some(left) = self.work.get().checked_sub(units) else {
            self.work.set(0);
            return Err(self.reach(Limit::Work(op)));
        };
        self.work.set(left);
        let unchecked = self.unchecked.get().saturating_add(units);
        let check = unchecked >= CHECK_UNITS;
        self.unchecked.set(if check { 0 } else { unchecked });
        Ok(check)
    }

    /// Charge `bytes` about to be allocated.
    pub(super) fn allocate(&self, bytes: u64, op: &'static str) -> Result<(), Stop> {
        match self.bytes.get().checked_sub(bytes) {
            Some(left) => {
                self.bytes.set(left);
                Ok(())
            }
            None => Err(self.reach(Limit::Bytes(op))),
        }
    }

    /// Refuse one value over [`MAX_VALUE_BYTES`], and charge the rest.
    pub(super) fn make(&self, bytes: u64, op: &'static str) -> Result<(), Stop> {
        if bytes > MAX_VALUE_BYTES {
            return Err(self.reach(Limit::Value(op)));
        }
        self.allocate(bytes, op)
    }

    /// Refuse a depth over [`MAX_DEPTH`].
    pub(super) fn nest(&self, depth: usize, op: &'static str) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(self.reach(Limit::Depth(op)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_limit_is_reached_once_and_named() {
        let budget = Budget::default();
        assert_eq!(budget.spend(MAX_WORK, "sort"), Ok(true));
        assert_eq!(budget.spend(1, "sort"), Err(Stop::Limit));
        assert_eq!(budget.step(), Err(Stop::Limit));
        assert_eq!(budget.reached(), Some(Limit::Work("sort")));
        assert!(
            Limit::Work("sort")
                .message()
                .contains("sort exceeds the evaluation's limit of 20000000 units of work")
        );

        let budget = Budget::default();
        assert_eq!(budget.make(MAX_VALUE_BYTES + 1, "+"), Err(Stop::Limit));
        assert_eq!(budget.allocate(MAX_BYTES, "+"), Ok(()));
        assert_eq!(budget.allocate(1, "+"), Err(Stop::Limit));
        assert_eq!(budget.reached(), Some(Limit::Value("+")));
        assert_eq!(budget.nest(MAX_DEPTH, "=="), Ok(()));
        assert_eq!(budget.nest(MAX_DEPTH + 1, "=="), Err(Stop::Limit));
    }
}
