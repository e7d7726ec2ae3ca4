//! Native steps that walk a value, made to charge the evaluation's [`budget`](super::budget)
//! as they go, so that none outlives its deadline or the budget whatever the value.
//!
//! Three ways in, all decided at compile time ([`rewrite`](super::rewrite)):
//!
//! * **Operators.** `==`, `!=`, `<`, `<=`, `>`, `>=`, `+`, `-`, `/` and `%` (and their `op=`
//!   forms) become calls of the natives [`OPERATORS`] unless one side is a literal scalar
//!   (then the step is constant or linear in one string, and jaq's own operator is kept: the
//!   common `.status == "asking"` costs nothing more). `*` was already [`MULTIPLY`].
//!   Comparisons are reimplemented (budgeted, iterative where they can nest); arithmetic
//!   charges its cost and allocation, then lets jaq compute.
//! * **Replaced natives.** `sort`, `sort_by`, `group_by`, `min_by_or_empty`,
//!   `max_by_or_empty` and `bsearch` compare values: they are reimplemented here with the
//!   budgeted comparison and shadow jaq's (a stable merge sort, like Rust's, so results are
//!   the same).
//! * **Prechecked natives.** A call of one of [`PRECHECKED`] (`tojson`, `contains`,
//!   `indices`, `has`, `explode`, the regular expressions, ...) gets a native in front of it
//!   that measures what it is about to walk, charges an upper bound of its work and
//!   allocation, and refuses it when that is over the budget; jaq's native then runs on a
//!   value known to be small enough. So do string interpolation (`"\(.)"`, hence `tostring`
//!   and every `@format`), computed object keys and computed indices.
//!
//! A refusal is an exception nothing catches, like the deadline's.
//!
//! [`MULTIPLY`]: super::names::MULTIPLY
//! [`PRECHECKED`]: super::names::PRECHECKED

use std::cmp::Ordering;

use jaq_core::box_iter::box_once;
use jaq_core::native::{Fun, v};
use jaq_core::{Bind, Exn, Native};
use jaq_json::{Num, Rc, Val};
use jaq_std::ValT as _;

use super::budget::{CONTAINER_BYTES, ENTRY_BYTES, Limit, MAX_VALUE_BYTES, Stop, VAL_BYTES};
use super::deadline::{Deadline, Door};
use super::names::{INDEX, KEY, OPERATORS, SHOW};

/// Units charged locally before they are handed to the budget.
const BATCH: u64 = 1024;

/// Bytes of a string one unit of work stands for (compared, copied or scanned).
const BYTES_PER_UNIT: u64 = 64;

/// The largest regular expression, in states by a rough count (its length times its
/// counted repetitions), that may be compiled.
pub(super) const MAX_REGEX_WEIGHT: u64 = 100_000;

/// Bytes charged per possible match of a global regular expression (a match object with its
/// captures).
const MATCH_BYTES: u64 = 320;

/// The largest time in seconds from the epoch the time functions take (the end of year 9999).
const MAX_EPOCH: f64 = 253_402_300_799.0;

/// The largest order of the Bessel functions `jn` and `yn`, whose work grows with it.
const MAX_BESSEL_ORDER: f64 = 10_000.0;

/// A running charge: units are added up here and handed to the deadline in batches.
struct Meter<'d> {
    deadline: &'d Deadline<'d>,
    op: &'static str,
    pending: u64,
}

impl<'d> Meter<'d> {
    fn new(deadline: &'d Deadline<'d>, op: &'static str) -> Meter<'d> {
        Meter {
            deadline,
            op,
            pending: 0,
        }
    }

    fn charge(&mut self, units: u64) -> Result<(), Stop> {
        self.pending = self.pending.saturating_add(units);
        if self.pending >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), Stop> {
        let units = std::mem::take(&mut self.pending);
        self.deadline.spend(units, self.op)
    }

    fn nest(&self, depth: usize) -> Result<(), Stop> {
        self.deadline.nest(depth, self.op)
    }
}

fn bytes_units(len: usize) -> u64 {
    1 + len as u64 / BYTES_PER_UNIT
}

/// What a walk of a value found.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Size {
    /// Units of work a walk of the value costs: a unit per node, and per 64 bytes of string.
    pub(super) units: u64,
    /// An upper bound of the length of its JSON text.
    pub(super) text: u64,
}

/// Walk `v` (iteratively: it may nest deeply), charging the walk.
fn measure(v: &Val, meter: &mut Meter<'_>) -> Result<Size, Stop> {
    let mut size = Size::default();
    let mut stack = vec![(v, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        let (units, text) = match v {
            Val::Null | Val::Bool(_) => (1, 5),
            Val::Num(n) => (1, number_text(n)),
            Val::TStr(s) | Val::BStr(s) => (bytes_units(s.len()), 2 + 6 * s.len() as u64),
            Val::Arr(items) => {
                meter.nest(depth + 1)?;
                stack.extend(items.iter().map(|item| (item, depth + 1)));
                (1, 2 + items.len() as u64)
            }
            Val::Obj(fields) => {
                meter.nest(depth + 1)?;
                for (k, v) in fields.iter() {
                    stack.push((k, depth + 1));
                    stack.push((v, depth + 1));
                }
                (1, 2 + 2 * fields.len() as u64)
            }
        };
        size.units = size.units.saturating_add(units);
        size.text = size.text.saturating_add(text);
        meter.charge(units)?;
    }
    meter.flush()?;
    Ok(size)
}

fn number_text(n: &Num) -> u64 {
    match n {
        Num::Int(_) | Num::Float(_) => 24,
        Num::BigInt(i) => 2 + i.bits() / 3,
        Num::Dec(s) => s.len() as u64,
    }
}

/// Whether `a == b`, as jaq decides it (the same shortcut for a value compared with itself).
fn equal(a: &Val, b: &Val, meter: &mut Meter<'_>) -> Result<bool, Stop> {
    let mut stack = vec![(a, b, 0usize)];
    while let Some((a, b, depth)) = stack.pop() {
        meter.charge(1)?;
        let same = match (a, b) {
            (Val::Arr(x), Val::Arr(y)) => {
                if Rc::ptr_eq(x, y) {
                    continue;
                }
                if x.len() == y.len() {
                    meter.nest(depth + 1)?;
                    stack.extend(x.iter().zip(y.iter()).map(|(a, b)| (a, b, depth + 1)));
                    continue;
                }
                false
            }
            (Val::Obj(x), Val::Obj(y)) => {
                if Rc::ptr_eq(x, y) {
                    continue;
                }
                if x.len() != y.len() {
                    return Ok(false);
                }
                meter.nest(depth + 1)?;
                for (k, v) in x.iter() {
                    meter.charge(key_units(k))?;
                    match y.get(k) {
                        Some(w) => stack.push((v, w, depth + 1)),
                        None => return Ok(false),
                    }
                }
                continue;
            }
            (Val::TStr(x) | Val::BStr(x), Val::TStr(y) | Val::BStr(y)) => {
                meter.charge(bytes_units(x.len().min(y.len())))?;
                x == y
            }
            // Scalars, or values of different types.
            _ => a == b,
        };
        if !same {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Work of hashing an object key (keys made by door expressions are scalars: see [`KEY`]).
fn key_units(k: &Val) -> u64 {
    match k {
        Val::TStr(s) | Val::BStr(s) => bytes_units(s.len()),
        _ => 1,
    }
}

/// `a` ordered against `b`, as jaq orders them. Recursive, but refuses to go deeper than
/// [`MAX_DEPTH`](super::budget::MAX_DEPTH).
fn order(a: &Val, b: &Val, meter: &mut Meter<'_>, depth: usize) -> Result<Ordering, Stop> {
    meter.charge(1)?;
    Ok(match (a, b) {
        (Val::Arr(x), Val::Arr(y)) => {
            meter.nest(depth + 1)?;
            sequence(x.iter(), y.iter(), meter, depth + 1)?
        }
        (Val::Obj(x), Val::Obj(y)) => {
            meter.nest(depth + 1)?;
            let l = sorted(x, meter)?;
            let r = sorted(y, meter)?;
            let keys = sequence(l.iter().map(|e| e.0), r.iter().map(|e| e.0), meter, depth)?;
            match keys {
                Ordering::Equal => {
                    let (lv, rv) = (l.iter().map(|e| e.1), r.iter().map(|e| e.1));
                    sequence(lv, rv, meter, depth + 1)?
                }
                other => other,
            }
        }
        (Val::TStr(x) | Val::BStr(x), Val::TStr(y) | Val::BStr(y)) => {
            meter.charge(bytes_units(x.len().min(y.len())))?;
            x.cmp(y)
        }
        _ => a.cmp(b),
    })
}

/// The entries of an object sorted by key, as jaq compares objects.
fn sorted<'v>(
    map: &'v jaq_json::Map,
    meter: &mut Meter<'_>,
) -> Result<Vec<(&'v Val, &'v Val)>, Stop> {
    let mut entries: Vec<(&Val, &Val)> = map.iter().collect();
    let n = entries.len() as u64;
    let keys: u64 = entries.iter().map(|(k, _)| key_units(k)).sum();
    meter.charge(n * (1 + u64::from(n.max(1).ilog2())) + keys)?;
    // Keys are scalars (see `KEY`): comparing two is constant or linear in them, which was
    // just charged.
    entries.sort_by_key(|(k, _)| *k);
    Ok(entries)
}

/// Two sequences ordered lexicographically.
fn sequence<'v>(
    mut xs: impl Iterator<Item = &'v Val>,
    mut ys: impl Iterator<Item = &'v Val>,
    meter: &mut Meter<'_>,
    depth: usize,
) -> Result<Ordering, Stop> {
    loop {
        match (xs.next(), ys.next()) {
            (None, None) => return Ok(Ordering::Equal),
            (None, Some(_)) => return Ok(Ordering::Less),
            (Some(_), None) => return Ok(Ordering::Greater),
            (Some(x), Some(y)) => match order(x, y, meter, depth)? {
                Ordering::Equal => {}
                other => return Ok(other),
            },
        }
    }
}

/// Sort `items` stably with a comparison that can fail: a merge sort, so the result is the
/// one a stable sort gives (jaq's), and a failure stops it at once.
fn merge_sort<T: Clone>(
    items: &mut Vec<T>,
    mut cmp: impl FnMut(&T, &T) -> Result<Ordering, Stop>,
) -> Result<(), Stop> {
    let n = items.len();
    let mut width = 1;
    let mut from = std::mem::take(items);
    let mut into: Vec<T> = Vec::with_capacity(n);
    while width < n {
        into.clear();
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j) = (start, mid);
            while i < mid && j < end {
                if cmp(&from[j], &from[i])? == Ordering::Less {
                    into.push(from[j].clone());
                    j += 1;
                } else {
                    into.push(from[i].clone());
                    i += 1;
                }
            }
            into.extend_from_slice(&from[i..mid]);
            into.extend_from_slice(&from[j..end]);
            start = end;
        }
        std::mem::swap(&mut from, &mut into);
        width *= 2;
    }
    *items = from;
    Ok(())
}

/// The exception for `stop`.
fn fail<'a>(stop: Stop) -> Exn<'a, Val> {
    stop.exn()
}

/// A jq error with `message`.
fn error<'a>(message: String) -> Exn<'a, Val> {
    Exn::from(jaq_core::Error::str(message))
}

/// The comparison natives.
fn comparison(name: &'static str) -> Fun<Door> {
    macro_rules! cmp_native {
        ($op:literal, $test:expr) => {
            Native::<Door>::new(|mut cv| {
                let r = cv.0.pop_var();
                let l = cv.0.pop_var();
                let deadline = cv.0.data().deadline;
                let mut meter = Meter::new(deadline, $op);
                let test: fn(&Val, &Val, &mut Meter<'_>) -> Result<bool, Stop> = $test;
                let result = test(&l, &r, &mut meter).and_then(|b| meter.flush().map(|()| b));
                box_once(result.map(Val::from).map_err(fail))
            })
        };
    }
    let native = match name {
        "!eq" => cmp_native!("==", |l, r, m| equal(l, r, m)),
        "!ne" => cmp_native!("!=", |l, r, m| equal(l, r, m).map(|b| !b)),
        "!lt" => cmp_native!("<", |l, r, m| Ok(order(l, r, m, 0)?.is_lt())),
        "!le" => cmp_native!("<=", |l, r, m| Ok(order(l, r, m, 0)?.is_le())),
        "!gt" => cmp_native!(">", |l, r, m| Ok(order(l, r, m, 0)?.is_gt())),
        _ => cmp_native!(">=", |l, r, m| Ok(order(l, r, m, 0)?.is_ge())),
    };
    (name, v(2), native)
}

/// The work and allocation of `l op r` (`+`, `-`, `/`, `%`), charged before jaq computes it.
fn arithmetic_cost(
    op: &'static str,
    l: &Val,
    r: &Val,
    deadline: &Deadline<'_>,
) -> Result<(), Stop> {
    let mut meter = Meter::new(deadline, op);
    match (op, l, r) {
        ("+", Val::TStr(x) | Val::BStr(x), Val::TStr(y) | Val::BStr(y)) => {
            let total = (x.len() + y.len()) as u64;
            if total > MAX_VALUE_BYTES {
                return Err(deadline.budget.reach(Limit::Value(op)));
            }
            // Appending to a string no one else holds grows it in place.
            let copied = if x.is_unique() {
                y.len()
            } else {
                x.len() + y.len()
            };
            meter.charge(bytes_units(copied))?;
            deadline.allocate(copied as u64, op)?;
        }
        ("+", Val::Arr(x), Val::Arr(y)) => {
            let total = (x.len() + y.len()) as u64 * VAL_BYTES;
            if total > MAX_VALUE_BYTES {
                return Err(deadline.budget.reach(Limit::Value(op)));
            }
            let copied = if Rc::strong_count(x) == 1 {
                y.len()
            } else {
                x.len() + y.len()
            };
            meter.charge(1 + copied as u64)?;
            deadline.allocate(copied as u64 * VAL_BYTES, op)?;
        }
        ("+", Val::Obj(x), Val::Obj(y)) => {
            let copied = if Rc::strong_count(x) == 1 {
                y.len()
            } else {
                x.len() + y.len()
            };
            let keys: u64 = y.iter().map(|(k, _)| key_units(k)).sum();
            meter.charge(1 + copied as u64 + keys)?;
            deadline.allocate(copied as u64 * ENTRY_BYTES, op)?;
        }
        ("-", Val::Arr(x), Val::Arr(_)) => {
            // jaq keeps the elements of `l` not in `r`, looking each up in a tree of `r`'s:
            // comparisons, each walking at most the smaller side. Charged as a walk of both
            // sides for every level of the tree.
            let lx = measure(l, &mut meter)?;
            let ry = measure(r, &mut meter)?;
            let levels = 1 + (x.len() as u64).max(1).ilog2() as u64;
            meter.charge(lx.units.saturating_add(ry.units).saturating_mul(levels))?;
            deadline.allocate(x.len() as u64 * VAL_BYTES, op)?;
        }
        ("/", Val::TStr(x) | Val::BStr(x), Val::TStr(_) | Val::BStr(_)) => {
            // At most a piece per byte.
            meter.charge(bytes_units(x.len()))?;
            let pieces = x.len() as u64 + 1;
            deadline.make(pieces * VAL_BYTES, op)?;
        }
        (_, Val::Num(a), Val::Num(b)) => meter.charge(1 + big_limbs(a) + big_limbs(b))?,
        _ => meter.charge(1)?,
    }
    meter.flush()
}

/// 64-bit words of a big integer (0 for any other number).
fn big_limbs(n: &Num) -> u64 {
    match n {
        Num::BigInt(i) => i.bits() / 64,
        _ => 0,
    }
}

/// The arithmetic natives.
fn arithmetic(name: &'static str) -> Fun<Door> {
    macro_rules! math_native {
        ($op:literal, $apply:expr) => {
            Native::<Door>::new(|mut cv| {
                let r = cv.0.pop_var();
                let l = cv.0.pop_var();
                let env = *cv.0.data();
                // The input may be `l` itself: dropped, so that `l` is not shared for nothing
                // and jaq can extend it in place.
                drop(cv);
                if let Err(stop) = arithmetic_cost($op, &l, &r, env.deadline) {
                    return box_once(Err(fail(stop)));
                }
                let apply: fn(Val, Val) -> jaq_json::ValR = $apply;
                box_once(apply(l, r).map_err(Exn::from))
            })
        };
    }
    let native = match name {
        "!add" => math_native!("+", |l, r| l + r),
        "!sub" => math_native!("-", |l, r| l - r),
        "!div" => math_native!("/", |l, r| l / r),
        _ => math_native!("%", |l, r| l % r),
    };
    (name, v(2), native)
}

/// The cost of `l * r`, charged by [`MULTIPLY`](super::names::MULTIPLY) before jaq
/// computes it (string repetition has its own limit there).
pub(super) fn multiply_cost(l: &Val, r: &Val, deadline: &Deadline<'_>) -> Result<(), Stop> {
    let mut meter = Meter::new(deadline, "*");
    match (l, r) {
        (Val::Obj(_), Val::Obj(_)) => {
            // A deep merge: walks `r`, and copies the levels of `l` it merges into.
            let lx = measure(l, &mut meter)?;
            let ry = measure(r, &mut meter)?;
            meter.charge(lx.units.saturating_add(ry.units))?;
            deadline.allocate(lx.units.saturating_add(ry.units) * ENTRY_BYTES, "*")?;
        }
        (Val::Num(a), Val::Num(b)) => {
            let (x, y) = (big_limbs(a), big_limbs(b));
            if x + y > 0 {
                // Schoolbook multiplication: a word operation per pair of words.
                meter.charge((x + 1).saturating_mul(y + 1))?;
                deadline.make((x + y + 2) * 8, "*")?;
            }
        }
        _ => meter.charge(1)?,
    }
    meter.flush()
}

/// `"\(x)"`: `x` printed as JSON (strings as they are) is charged and bounded before jaq
/// prints it.
fn show() -> Fun<Door> {
    let native = Native::<Door>::new(|cv| {
        let deadline = cv.0.data().deadline;
        let result = match &cv.1 {
            Val::TStr(s) | Val::BStr(s) => deadline.make(s.len() as u64, "string interpolation"),
            v => {
                let mut meter = Meter::new(deadline, "string interpolation");
                measure(v, &mut meter)
                    .and_then(|size| deadline.make(size.text, "string interpolation"))
            }
        };
        match result {
            Ok(()) => box_once(Ok(cv.1)),
            Err(stop) => box_once(Err(fail(stop))),
        }
    });
    (SHOW, Box::new([]), native)
}

/// A computed object key: a scalar, as jq requires (jaq would hash any value, walking it).
fn key() -> Fun<Door> {
    let native = Native::<Door>::new(|cv| match &cv.1 {
        Val::Arr(_) | Val::Obj(_) => box_once(Err(error(format!(
            "cannot use an array or object as an object key (a door expression's keys are \
             strings, numbers, booleans or null); got {}",
            kind(&cv.1)
        )))),
        _ => box_once(Ok(cv.1)),
    });
    (KEY, Box::new([]), native)
}

/// A computed index `.[x]`: an array index would search the indexed array for it, comparing
/// deeply, and is refused (`indices` does the same, budgeted); an object index (a slice
/// `{start, end}`, or an object's key) is measured.
fn index() -> Fun<Door> {
    let native = Native::<Door>::new(|cv| {
        let deadline = cv.0.data().deadline;
        let result = match &cv.1 {
            Val::Arr(_) => Err(error(
                "cannot index with an array in a door expression: use indices(...)".to_owned(),
            )),
            v @ Val::Obj(_) => measure(v, &mut Meter::new(deadline, "an index"))
                .map_err(fail)
                .map(drop),
            _ => Ok(()),
        };
        box_once(result.map(|()| cv.1))
    });
    (INDEX, Box::new([]), native)
}

fn kind(v: &Val) -> &'static str {
    match v {
        Val::Arr(_) => "an array",
        Val::Obj(_) => "an object",
        _ => "a scalar",
    }
}

/// The precheck natives, one per entry of [`PRECHECKED`](super::names::PRECHECKED).
fn prechecks() -> Vec<Fun<Door>> {
    macro_rules! pre {
        ($name:literal, $args:expr, $check:expr) => {{
            let native = Native::<Door>::new(|mut cv| {
                // The last argument is popped first.
                let mut args: Vec<Val> = (0..$args).map(|_| cv.0.pop_var()).collect();
                args.reverse();
                let deadline = cv.0.data().deadline;
                let mut meter = Meter::new(deadline, &$name[1..]);
                let check: fn(&Val, &[Val], &mut Meter<'_>) -> Result<(), Exn<'static, Val>> =
                    $check;
                match check(&cv.1, &args, &mut meter) {
                    Ok(()) => match meter.flush() {
                        Ok(()) => box_once(Ok(cv.1)),
                        Err(stop) => box_once(Err(fail(stop))),
                    },
                    Err(e) => box_once(Err(e)),
                }
            });
            ($name, v($args), native)
        }};
    }
    vec![
        pre!("!tojson", 0, |v, _, m| text(v, m, 1)),
        pre!("!tobytes", 0, |v, _, m| text(v, m, 1)),
        pre!("!contains", 1, |v, args, m| {
            // jaq tries every element of one side against every element of the other, at
            // every level: at most the product of their sizes.
            let a = measure(v, m).map_err(fail)?;
            let b = measure(&args[0], m).map_err(fail)?;
            m.charge(a.units.saturating_mul(b.units)).map_err(fail)
        }),
        pre!("!indices", 1, |v, args, m| {
            let work = match (v, &args[0]) {
                (Val::TStr(x) | Val::BStr(x), Val::TStr(y) | Val::BStr(y)) => {
                    (x.len() as u64 + 1).saturating_mul(bytes_units(y.len()))
                }
                (Val::Arr(x), y) => {
                    // A window (or an element) compared at every position, each comparison
                    // walking at most the searched value.
                    let size = measure(y, m).map_err(fail)?;
                    (x.len() as u64 + 1).saturating_mul(size.units)
                }
                _ => 1,
            };
            m.charge(work).map_err(fail)?;
            let outputs = match v {
                Val::TStr(x) | Val::BStr(x) => x.len(),
                Val::Arr(x) => x.len(),
                _ => 0,
            };
            m.deadline
                .make(outputs as u64 * VAL_BYTES, "indices")
                .map_err(fail)
        }),
        pre!("!has", 1, |v, args, m| match (v, &args[0]) {
            (Val::Arr(_), k @ (Val::Arr(_) | Val::Obj(_))) => Err(error(format!(
                "cannot check whether an array has {} key",
                kind(k)
            ))),
            (_, k) => measure(k, m).map(drop).map_err(fail),
        }),
        pre!("!explode", 0, |v, _, m| string(v, m, VAL_BYTES)),
        pre!("!implode", 0, |v, _, m| match v {
            Val::Arr(items) => {
                m.charge(1 + items.len() as u64).map_err(fail)?;
                m.deadline
                    .make(items.len() as u64 * 4, "implode")
                    .map_err(fail)
            }
            _ => Ok(()),
        }),
        pre!("!ascii_downcase", 0, |v, _, m| string(v, m, 1)),
        pre!("!ascii_upcase", 0, |v, _, m| string(v, m, 1)),
        pre!("!escape_html", 0, |v, _, m| string(v, m, 6)),
        pre!("!unescape_html", 0, |v, _, m| string(v, m, 1)),
        pre!("!encode_uri", 0, |v, _, m| string(v, m, 3)),
        pre!("!decode_uri", 0, |v, _, m| string(v, m, 1)),
        pre!("!encode_base64", 0, |v, _, m| string(v, m, 2)),
        pre!("!decode_base64", 0, |v, _, m| string(v, m, 1)),
        pre!("!escape_sh", 0, |v, _, m| string(v, m, 4)),
        pre!("!matches", 2, |v, args, m| regex(v, args, m)),
        pre!("!split_matches", 2, |v, args, m| regex(v, args, m)),
        pre!("!split_", 2, |v, args, m| regex(v, args, m)),
        pre!("!todateiso8601", 0, |v, _, _| epoch(v)),
        pre!("!gmtime", 0, |v, _, _| epoch(v)),
        pre!("!strftime", 1, |v, _, _| epoch(v)),
        pre!("!jn", 2, |_, args, _| bessel(&args[0])),
        pre!("!yn", 2, |_, args, _| bessel(&args[0])),
    ]
}

/// A value about to be printed as JSON: its text is at most `factor` times [`Size::text`].
fn text(v: &Val, meter: &mut Meter<'_>, factor: u64) -> Result<(), Exn<'static, Val>> {
    let size = measure(v, meter).map_err(fail)?;
    let op = meter.op;
    meter
        .deadline
        .make(size.text.saturating_mul(factor), op)
        .map_err(fail)
}

/// A string about to be transformed into at most `factor` bytes per byte.
fn string(v: &Val, meter: &mut Meter<'_>, factor: u64) -> Result<(), Exn<'static, Val>> {
    if let Val::TStr(s) | Val::BStr(s) = v {
        meter.charge(bytes_units(s.len())).map_err(fail)?;
        let op = meter.op;
        let bytes = (s.len() as u64).saturating_mul(factor);
        meter.deadline.make(bytes, op).map_err(fail)?;
    }
    Ok(())
}

/// A regular expression search: its work grows with the text times the expression's
/// states, and a global search can make a match object per byte of the text.
fn regex(v: &Val, args: &[Val], meter: &mut Meter<'_>) -> Result<(), Exn<'static, Val>> {
    let (Some(text), Some(re)) = (v.as_bytes(), args[0].as_bytes()) else {
        return Ok(());
    };
    let weight = regex_weight(re);
    if weight > MAX_REGEX_WEIGHT {
        let limit = Limit::Other(
            "a regular expression",
            "100000 states (its length times its counted repetitions)",
        );
        return Err(fail(meter.deadline.budget.reach(limit)));
    }
    let work = (text.len() as u64 + 1).saturating_mul(weight);
    meter.charge(work).map_err(fail)?;
    let global = args[1].as_bytes().is_some_and(|f| f.contains(&b'g'));
    let matches = if global { text.len() as u64 + 1 } else { 1 };
    let op = meter.op;
    meter
        .deadline
        .allocate(matches.saturating_mul(MATCH_BYTES), op)
        .map_err(fail)
}

/// A rough upper bound of the states of a regular expression: its length, times every
/// counted repetition's count (`{n}`, `{n,m}`, `{n,}`) as if they all nested.
fn regex_weight(re: &[u8]) -> u64 {
    let mut weight = re.len() as u64 + 1;
    let mut i = 0;
    while i < re.len() {
        if re[i] == b'\\' {
            i += 2;
            continue;
        }
        if re[i] == b'{' {
            let mut j = i + 1;
            let mut count: u64 = 0;
            let mut largest: u64 = 0;
            while j < re.len() && (re[j].is_ascii_digit() || re[j] == b',') {
                if re[j] == b',' {
                    largest = largest.max(count);
                    count = 0;
                } else {
                    count = count
                        .saturating_mul(10)
                        .saturating_add(u64::from(re[j] - b'0'));
                }
                j += 1;
            }
            if j < re.len() && re[j] == b'}' {
                largest = largest.max(count).max(1);
                weight = weight.saturating_mul(largest);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    weight
}

/// A time in seconds from the epoch that the time functions can take.
fn epoch(v: &Val) -> Result<(), Exn<'static, Val>> {
    match v.as_f64() {
        Some(t) if t.is_nan() || t.abs() > MAX_EPOCH => Err(error(format!(
            "cannot use {t:e} as a time: more than {MAX_EPOCH:e} seconds from 1970"
        ))),
        _ => Ok(()),
    }
}

/// The order of a Bessel function.
fn bessel(n: &Val) -> Result<(), Exn<'static, Val>> {
    match n.as_f64() {
        Some(n) if n.is_nan() || n.abs() > MAX_BESSEL_ORDER => Err(error(format!(
            "cannot use {n} as the order of a Bessel function: more than {MAX_BESSEL_ORDER}"
        ))),
        _ => Ok(()),
    }
}

/// The natives replacing jaq's that compare values: `sort`, `sort_by`, `group_by`,
/// `min_by_or_empty`, `max_by_or_empty`, `bsearch`.
fn replaced() -> Vec<Fun<Door>> {
    let f = || -> Box<[Bind]> { [Bind::Fun(())].into() };
    let sort = Native::<Door>::new(|cv| {
        let deadline = cv.0.data().deadline;
        let mut meter = Meter::new(deadline, "sort");
        let result = array(cv.1).and_then(|mut items| {
            merge_sort(&mut items, |a, b| order(a, b, &mut meter, 0))
                .and_then(|()| meter.flush())
                .map_err(fail)?;
            Ok(items.into_iter().collect())
        });
        box_once(result)
    });
    let sort_by = Native::<Door>::new(|mut cv| {
        let (f, fc) = cv.0.pop_fun();
        let deadline = cv.0.data().deadline;
        let result = keyed(cv.1, |v| f.run((fc.clone(), v)).collect()).and_then(|mut pairs| {
            let mut meter = Meter::new(deadline, "sort_by");
            merge_sort(&mut pairs, |a, b| {
                sequence(a.0.iter(), b.0.iter(), &mut meter, 0)
            })
            .and_then(|()| meter.flush())
            .map_err(fail)?;
            Ok(pairs.into_iter().map(|(_, x)| x).collect())
        });
        box_once(result)
    });
    let group_by = Native::<Door>::new(|mut cv| {
        let (f, fc) = cv.0.pop_fun();
        let deadline = cv.0.data().deadline;
        let result = keyed(cv.1, |v| f.run((fc.clone(), v)).collect()).and_then(|mut pairs| {
            let mut meter = Meter::new(deadline, "group_by");
            let elements = pairs.len() as u64;
            merge_sort(&mut pairs, |a, b| {
                sequence(a.0.iter(), b.0.iter(), &mut meter, 0)
            })
            .map_err(fail)?;
            let mut groups: Vec<Val> = Vec::new();
            let mut group: Vec<Val> = Vec::new();
            let mut last: Option<Vec<Val>> = None;
            for (key, x) in pairs {
                if let Some(previous) = &last {
                    let same = previous.len() == key.len()
                        && equal_all(previous, &key, &mut meter).map_err(fail)?;
                    if !same {
                        groups.push(std::mem::take(&mut group).into_iter().collect());
                    }
                }
                last = Some(key);
                group.push(x);
            }
            if !group.is_empty() {
                groups.push(group.into_iter().collect());
            }
            meter.flush().map_err(fail)?;
            // Each group is an array of its own, a level deeper than the input's elements.
            let made = groups.len() as u64 * CONTAINER_BYTES + elements * VAL_BYTES;
            deadline.allocate(made, "group_by").map_err(fail)?;
            Ok(groups.into_iter().collect())
        });
        box_once(result)
    });
    macro_rules! extreme {
        ($op:literal, $replace:expr) => {
            Native::<Door>::new(|mut cv| {
                let (f, fc) = cv.0.pop_fun();
                let deadline = cv.0.data().deadline;
                let pairs = keyed(cv.1, |v| f.run((fc.clone(), v)).collect());
                let result = pairs.and_then(|pairs| {
                    let mut meter = Meter::new(deadline, $op);
                    let replace: fn(Ordering) -> bool = $replace;
                    let mut best: Option<(Vec<Val>, Val)> = None;
                    for (key, x) in pairs {
                        let better = match &best {
                            None => true,
                            Some((top, _)) => {
                                let o = sequence(key.iter(), top.iter(), &mut meter, 0);
                                replace(o.map_err(fail)?)
                            }
                        };
                        if better {
                            best = Some((key, x));
                        }
                    }
                    meter.flush().map_err(fail)?;
                    Ok(best.map(|(_, x)| x))
                });
                Box::new(result.transpose().into_iter())
            })
        };
    }
    // jaq: `y < my` replaces the minimum, `y >= my` the maximum.
    let min_by = extreme!("min_by", |o| o.is_lt());
    let max_by = extreme!("max_by", |o| o.is_ge());
    let bsearch = Native::<Door>::new(|mut cv| {
        let x = cv.0.pop_var();
        let deadline = cv.0.data().deadline;
        let mut meter = Meter::new(deadline, "bsearch");
        let result = match &cv.1 {
            Val::Arr(items) => {
                let mut stopped = None;
                let found = items.binary_search_by(|item| {
                    if stopped.is_some() {
                        return Ordering::Equal;
                    }
                    order(item, &x, &mut meter, 0).unwrap_or_else(|stop| {
                        stopped = Some(stop);
                        Ordering::Equal
                    })
                });
                match stopped.map_or_else(|| meter.flush(), Err) {
                    Ok(()) => Ok(Val::from(match found {
                        Ok(i) => i as isize,
                        Err(i) => -1 - i as isize,
                    })),
                    Err(stop) => Err(fail(stop)),
                }
            }
            v => Err(Exn::from(jaq_core::Error::typ(v.clone(), "array"))),
        };
        box_once(result)
    });
    vec![
        ("sort", v(0), sort),
        ("sort_by", f(), sort_by),
        ("group_by", f(), group_by),
        ("min_by_or_empty", f(), min_by),
        ("max_by_or_empty", f(), max_by),
        ("bsearch", v(1), bsearch),
    ]
}

fn equal_all(a: &[Val], b: &[Val], meter: &mut Meter<'_>) -> Result<bool, Stop> {
    for (x, y) in a.iter().zip(b) {
        if !equal(x, y, meter)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The elements of an array, as jaq's natives take them.
fn array<'a>(v: Val) -> Result<Vec<Val>, Exn<'a, Val>> {
    v.into_seq()
        .map_err(|v| Exn::from(jaq_core::Error::typ(v, "array")))
}

/// Each element of an array with the outputs of `f` on it.
fn keyed<'a>(
    v: Val,
    f: impl Fn(Val) -> Result<Vec<Val>, Exn<'a, Val>>,
) -> Result<Vec<(Vec<Val>, Val)>, Exn<'a, Val>> {
    array(v)?
        .into_iter()
        .map(|x| Ok((f(x.clone())?, x)))
        .collect()
}

/// Every native of this module: to be put before jaq's, so that the replaced ones shadow
/// theirs.
pub(super) fn natives() -> Vec<Fun<Door>> {
    let mut natives: Vec<Fun<Door>> = OPERATORS
        .iter()
        .map(|(_, name)| match *name {
            "!eq" | "!ne" | "!lt" | "!le" | "!gt" | "!ge" => comparison(name),
            _ => arithmetic(name),
        })
        .collect();
    natives.extend([show(), key(), index()]);
    natives.extend(prechecks());
    natives.extend(replaced());
    natives
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;

    fn val() -> impl Strategy<Value = Val> {
        let leaf = prop_oneof![
            Just(Val::Null),
            any::<bool>().prop_map(Val::Bool),
            (-3isize..3).prop_map(Val::from),
            prop_oneof![Just(0.5), Just(-0.0), Just(f64::NAN), Just(f64::INFINITY)]
                .prop_map(Val::from),
            "[ab]{0,2}".prop_map(Val::from),
        ];
        leaf.prop_recursive(4, 24, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(|v| v.into_iter().collect()),
                prop::collection::vec(("[ab]{0,1}", inner), 0..3).prop_map(|entries| {
                    Val::obj(
                        entries
                            .into_iter()
                            .map(|(k, v)| (Val::from(k), v))
                            .collect(),
                    )
                }),
            ]
        })
    }

    fn with_meter<T>(f: impl FnOnce(&mut Meter<'_>) -> T) -> T {
        let never = AtomicBool::new(false);
        let deadline = Deadline::new(Instant::now() + Duration::from_secs(3600), &never);
        let mut meter = Meter::new(&deadline, "test");
        f(&mut meter)
    }

    proptest! {
        #[test]
        fn budgeted_comparisons_agree_with_jaq(a in val(), b in val()) {
            with_meter(|m| {
                prop_assert_eq!(equal(&a, &b, m).ok(), Some(a == b));
                prop_assert_eq!(equal(&a, &a.clone(), m).ok(), Some(a == a.clone()));
                prop_assert_eq!(order(&a, &b, m, 0).ok(), Some(a.cmp(&b)));
                Ok(())
            })?;
        }

        #[test]
        fn the_merge_sort_sorts_as_jaq_does(items in prop::collection::vec(val(), 0..12)) {
            let mut expected = items.clone();
            expected.sort();
            let mut sorted = items;
            with_meter(|m| merge_sort(&mut sorted, |a, b| order(a, b, m, 0)))
                .map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            // Equal by order is not always the same value (1 and 1.0): compare as printed,
            // which a stable sort keeps in the same order.
            let shown = |v: &[Val]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
            prop_assert_eq!(shown(&sorted), shown(&expected));
        }
    }

    #[test]
    fn a_shared_value_runs_out_of_budget_not_of_time() {
        let mut v = Val::from(0isize);
        for _ in 0..40 {
            v = [v.clone(), v].into_iter().collect();
        }
        let mut w = Val::from(0isize);
        for _ in 0..40 {
            w = [w.clone(), w].into_iter().collect();
        }
        let never = AtomicBool::new(false);
        let deadline = Deadline::new(Instant::now() + Duration::from_secs(3600), &never);
        let mut meter = Meter::new(&deadline, "==");
        assert_eq!(equal(&v, &w, &mut meter), Err(Stop::Limit));
        assert_eq!(deadline.budget.reached(), Some(Limit::Work("==")));
        // The same value is equal to itself without a walk, as in jaq.
        let deadline = Deadline::new(Instant::now() + Duration::from_secs(3600), &never);
        let mut meter = Meter::new(&deadline, "==");
        assert_eq!(equal(&v, &v.clone(), &mut meter), Ok(true));
    }

    #[test]
    fn the_regex_weight_counts_repetitions() {
        assert_eq!(regex_weight(b"ab"), 3);
        assert_eq!(regex_weight(b"a{10}"), 6 * 10);
        assert_eq!(regex_weight(b"(a{10,20}){3}"), 14 * 20 * 3);
        assert_eq!(regex_weight(b"\\{5}"), 5);
    }
}
