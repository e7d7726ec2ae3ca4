//! The cooperative half of the deadline guard: a clock check that the evaluated program itself
//! runs at every point where its work can multiply.
//!
//! jaq has no fuel counter or interrupt hook, but three of its features combine into one:
//!
//! * A door expression is handed to jaq as a parsed syntax tree (as the last definition of the
//!   prelude), so it can be rewritten before compilation. [`instrument`] puts a call to a native
//!   filter, [`TICK`], in front of the right-hand side of every pipe (`f | g`, `f as $x | g`),
//!   the update of every `reduce`/`foreach`, and the body of every definition that mentions its
//!   own name. Those are the only places where a jq program repeats work: everything else runs
//!   each sub-term once per output of its input. The library's own definitions (`map`,
//!   `recurse`, `limit(n; repeat(f))`, ...) are instrumented the same way.
//! * A native filter reaches the evaluation's global data, which for door expressions holds a
//!   [`Deadline`].
//! * `halt` raises an exception that `try`, `?` and `label` do not catch, and that every jaq
//!   construct passes on. The tick raises it when the deadline has passed, and the evaluator
//!   recognises it by its exit code (door expressions cannot call `halt` themselves).
//!
//! The tick behaves as `.` for paths and updates too, so `path(..)`, `|=` and friends work on
//! instrumented programs. Its cost is a few boxed iterators and an atomic load per call, plus
//! a clock read at most every [`CHECK_EVERY`] calls.
//!
//! What the tick cannot interrupt is a single native step: one comparison, `contains`, `sort`
//! or `tojson` over a huge (or exponentially shared) value runs to completion without passing
//! through the program. [`Pool`](super::pool::Pool) covers that case.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use jaq_core::box_iter::box_once;
use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::native::Fun;
use jaq_core::path::{Part, Path};
use jaq_core::{Exn, Native};

use super::library::Door;

/// Name of the tick filter. It cannot be lexed as an identifier, so no door expression can
/// call or shadow it.
pub(super) const TICK: &str = "!tick";

/// Exit code carried by the exception that ends an evaluation whose deadline has passed.
pub(super) const HALT_CODE: i32 = -0x0dead;

/// The most ticks between two clock reads.
///
/// A tick costs tens of nanoseconds and a clock read about as much, so while ticks come fast
/// the clock is read only every so many of them. When they come slowly (much work between
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
        }
    }

    /// Whether the evaluation may go on.
    pub(super) fn tick(&self) -> bool {
        if self.passed.get() {
            return false;
        }
        if self.cancelled.load(Ordering::Relaxed) {
            self.passed.set(true);
            return false;
        }
        let left = self.countdown.get();
        if left > 0 {
            self.countdown.set(left - 1);
            return true;
        }
        let now = Instant::now();
        if now >= self.at {
            self.passed.set(true);
            return false;
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
        true
    }

    /// Whether the deadline has passed, reading the clock.
    pub(super) fn has_passed(&self) -> bool {
        self.passed.get() || self.cancelled.load(Ordering::Relaxed) || Instant::now() >= self.at
    }
}

/// The tick as a native filter: `.` while the deadline has not passed, then an uncatchable
/// exception.
pub(super) fn tick() -> Fun<Door> {
    // Closures rather than functions: jaq does not export the types of a path's value or of
    // an update function, so only inference can name them.
    let native = Native::<Door>::new(|cv| {
        if cv.0.data().deadline.tick() {
            box_once(Ok(cv.1))
        } else {
            box_once(Err(Exn::halt(HALT_CODE)))
        }
    })
    .with_paths(|cv| {
        if cv.0.data().deadline.tick() {
            box_once(Ok(cv.1))
        } else {
            box_once(Err(Exn::halt(HALT_CODE)))
        }
    })
    .with_update(|cv, f| {
        if cv.0.data().deadline.tick() {
            f(cv.1)
        } else {
            box_once(Err(Exn::halt(HALT_CODE)))
        }
    });
    (TICK, Box::new([]), native)
}

/// Instrument a definition: its body, and the body itself if the definition can recurse.
pub(super) fn instrument_def(def: Def<&str>) -> Def<&str> {
    let recursive = mentions(&def.body, def.name, def.args.len());
    let body = instrument(def.body);
    Def {
        name: def.name,
        args: def.args,
        body: if recursive { ticked(body) } else { body },
    }
}

/// Put a tick before every pipe's right-hand side and every fold's update, and instrument
/// every definition inside `t`.
pub(super) fn instrument<'s>(t: Term<&'s str>) -> Term<&'s str> {
    let boxed = |t: Box<Term<&'s str>>| Box::new(instrument(*t));
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => t,
        Term::Str(fmt, parts) => Term::Str(fmt, parts.into_iter().map(str_part).collect()),
        Term::Arr(t) => Term::Arr(t.map(boxed)),
        Term::Obj(entries) => Term::Obj(
            entries
                .into_iter()
                .map(|(k, v)| (instrument(k), v.map(instrument)))
                .collect(),
        ),
        Term::Neg(t) => Term::Neg(boxed(t)),
        Term::BinOp(l, BinaryOp::Pipe(pattern), r) => Term::BinOp(
            boxed(l),
            BinaryOp::Pipe(pattern.map(instrument_pattern)),
            Box::new(ticked(instrument(*r))),
        ),
        Term::BinOp(l, op, r) => Term::BinOp(boxed(l), op, boxed(r)),
        Term::Label(x, t) => Term::Label(x, boxed(t)),
        Term::Fold(name, xs, pattern, args) => {
            // The arguments are `init; update` or `init; update; extract`.
            let args = args.into_iter().enumerate();
            let args = args.map(|(i, arg)| {
                let arg = instrument(arg);
                if i == 1 { ticked(arg) } else { arg }
            });
            Term::Fold(name, boxed(xs), instrument_pattern(pattern), args.collect())
        }
        Term::TryCatch(t, catch) => Term::TryCatch(boxed(t), catch.map(boxed)),
        Term::IfThenElse(branches, otherwise) => Term::IfThenElse(
            branches
                .into_iter()
                .map(|(c, t)| (instrument(c), instrument(t)))
                .collect(),
            otherwise.map(boxed),
        ),
        Term::Def(defs, t) => Term::Def(defs.into_iter().map(instrument_def).collect(), boxed(t)),
        Term::Call(name, args) => Term::Call(name, args.into_iter().map(instrument).collect()),
        Term::Path(t, path) => Term::Path(
            boxed(t),
            Path(
                path.0
                    .into_iter()
                    .map(|(part, opt)| (instrument_part(part), opt))
                    .collect(),
            ),
        ),
    }
}

fn ticked(t: Term<&str>) -> Term<&str> {
    let tick = Term::Call(TICK, Vec::new());
    Term::BinOp(Box::new(tick), BinaryOp::Pipe(None), Box::new(t))
}

fn str_part<'s>(part: StrPart<&'s str, Term<&'s str>>) -> StrPart<&'s str, Term<&'s str>> {
    match part {
        StrPart::Term(t) => StrPart::Term(instrument(t)),
        part => part,
    }
}

fn instrument_part(part: Part<Term<&str>>) -> Part<Term<&str>> {
    match part {
        Part::Index(i) => Part::Index(instrument(i)),
        Part::Range(from, upto) => Part::Range(from.map(instrument), upto.map(instrument)),
    }
}

fn instrument_pattern(p: Pattern<&str>) -> Pattern<&str> {
    match p {
        Pattern::Var(x) => Pattern::Var(x),
        Pattern::Arr(ps) => Pattern::Arr(ps.into_iter().map(instrument_pattern).collect()),
        Pattern::Obj(entries) => Pattern::Obj(
            entries
                .into_iter()
                .map(|(k, p)| (instrument(k), instrument_pattern(p)))
                .collect(),
        ),
    }
}

/// Whether `t` calls `name/arity` anywhere, shadowed or not.
///
/// Over-approximating is harmless (an extra tick); it catches direct recursion and recursion
/// through inner definitions (`def f: def g: f; g;`) alike.
fn mentions<S: Copy + PartialEq>(t: &Term<S>, name: S, arity: usize) -> bool {
    let m = |t: &Term<S>| mentions(t, name, arity);
    let pattern = |p: &Pattern<S>| pattern_mentions(p, name, arity);
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => false,
        Term::Str(fmt, parts) => {
            (arity == 0 && *fmt == Some(name))
                || parts.iter().any(|p| matches!(p, StrPart::Term(t) if m(t)))
        }
        Term::Arr(t) => t.as_deref().is_some_and(m),
        Term::Obj(entries) => entries
            .iter()
            .any(|(k, v)| m(k) || v.as_ref().is_some_and(m)),
        Term::Neg(t) | Term::Label(_, t) => m(t),
        Term::BinOp(l, op, r) => {
            m(l) || m(r) || matches!(op, BinaryOp::Pipe(Some(p)) if pattern(p))
        }
        Term::Fold(_, xs, p, args) => m(xs) || pattern(p) || args.iter().any(m),
        Term::TryCatch(t, catch) => m(t) || catch.as_deref().is_some_and(m),
        Term::IfThenElse(branches, otherwise) => {
            branches.iter().any(|(c, t)| m(c) || m(t)) || otherwise.as_deref().is_some_and(m)
        }
        Term::Def(defs, t) => defs.iter().any(|d| m(&d.body)) || m(t),
        Term::Call(f, args) => (*f == name && args.len() == arity) || args.iter().any(m),
        Term::Path(t, path) => {
            m(t) || path.0.iter().any(|(part, _)| match part {
                Part::Index(i) => m(i),
                Part::Range(from, upto) => from.iter().chain(upto).any(m),
            })
        }
    }
}

fn pattern_mentions<S: Copy + PartialEq>(p: &Pattern<S>, name: S, arity: usize) -> bool {
    match p {
        Pattern::Var(_) => false,
        Pattern::Arr(ps) => ps.iter().any(|p| pattern_mentions(p, name, arity)),
        Pattern::Obj(entries) => entries
            .iter()
            .any(|(k, p)| mentions(k, name, arity) || pattern_mentions(p, name, arity)),
    }
}
