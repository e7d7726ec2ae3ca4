//! Which programs may be evaluated in place, on the caller's thread, before any hand-off to
//! the pool: the *shallow* ones.
//!
//! The pool exists for what the program's own deadline ticks cannot stop: one native step
//! that runs long (sorting, comparing or printing a huge value, or one that jaq shares so
//! that `[., .] | [., .] | ...` is astronomically large once walked), and recursion deep
//! enough to overflow a runtime worker's stack. A program is shallow when it can do
//! neither, so that the ticks alone bound it:
//!
//! * every native step it takes looks at the top level of a value at most: no comparison
//!   unless one side is a literal scalar (`.status == "asking"` compares a type tag or one
//!   string), no arithmetic unless one side is a number literal, no string interpolation or
//!   `@format`, no assignment or update, no `try ... catch` (the handler receives the error
//!   rendered as text, which prints the value it names), and no call but to the
//!   [`SHALLOW_BUILTINS`];
//! * it cannot repeat itself: no `reduce`, `foreach`, `def` or `..`;
//! * its syntax tree nests at most [`MAX_NESTING`] deep, which bounds the stack its
//!   evaluation needs, and the nesting of the values it builds beyond its input's.
//!
//! A shallow program's work is then linear in what it iterates, and each iteration passes
//! through a tick. The caller still gives an in-place evaluation a short budget and hands
//! it to the pool if the budget runs out (`Program::run_batch`): the screen makes the
//! budget enforceable, the budget keeps the time taken from the caller's thread short.
//!
//! The screen is deliberately conservative: whatever it does not recognise goes to the
//! pool, which is always safe and only slower.

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Pattern, Term};
use jaq_core::ops::Math;
use jaq_core::path::Part;

/// The deepest syntax tree evaluated in place.
pub(super) const MAX_NESTING: usize = 32;

/// The library filters (name, arity) a shallow program may call: each looks at the top
/// level of its input at most, or is a generator the save-time checks bound.
pub(super) const SHALLOW_BUILTINS: &[(&str, usize)] = &[
    ("empty", 0),
    ("not", 0),
    ("select", 1),
    ("true", 0),
    ("false", 0),
    ("null", 0),
    ("length", 0),
    ("type", 0),
    ("first", 0),
    ("last", 0),
    ("first", 1),
    ("last", 1),
    ("limit", 2),
    ("map", 1),
    ("isempty", 1),
    ("all", 0),
    ("all", 1),
    ("all", 2),
    ("any", 0),
    ("any", 1),
    ("any", 2),
    ("values", 0),
    ("nulls", 0),
    ("booleans", 0),
    ("numbers", 0),
    ("strings", 0),
    ("arrays", 0),
    ("objects", 0),
    ("iterables", 0),
    ("scalars", 0),
    ("isboolean", 0),
    ("isnumber", 0),
    ("isstring", 0),
    ("isarray", 0),
    ("isobject", 0),
    ("has", 1),
    ("keys", 0),
    ("keys_unsorted", 0),
    ("to_entries", 0),
    ("range", 1),
    ("range", 2),
    ("range", 3),
    ("ascii_downcase", 0),
    ("ascii_upcase", 0),
    ("startswith", 1),
    ("endswith", 1),
    ("ltrimstr", 1),
    ("rtrimstr", 1),
    ("abs", 0),
    ("floor", 0),
    ("utf8bytelength", 0),
];

/// Whether `term`, a checked door expression, is shallow (see the module docs).
pub(super) fn is_shallow(term: &Term<&str>) -> bool {
    shallow(term, 0)
}

fn shallow(t: &Term<&str>, depth: usize) -> bool {
    if depth > MAX_NESTING {
        return false;
    }
    let sub = |t: &Term<&str>| shallow(t, depth + 1);
    match t {
        Term::Id | Term::Num(_) | Term::Var(_) | Term::Break(_) => true,
        Term::Recurse | Term::Fold(..) | Term::Def(..) | Term::TryCatch(_, Some(_)) => false,
        Term::Str(format, parts) => format.is_none() && parts.iter().all(plain),
        Term::Arr(inner) => inner.as_deref().is_none_or(sub),
        Term::Obj(entries) => entries
            .iter()
            .all(|(k, v)| sub(k) && v.as_ref().is_none_or(sub)),
        Term::Neg(t) | Term::Label(_, t) | Term::TryCatch(t, None) => sub(t),
        Term::BinOp(l, op, r) => {
            let operands = match op {
                BinaryOp::Pipe(None)
                | BinaryOp::Comma
                | BinaryOp::Alt
                | BinaryOp::Or
                | BinaryOp::And => true,
                BinaryOp::Pipe(Some(pattern)) => pattern_shallow(pattern, depth + 1),
                BinaryOp::Math(Math::Add | Math::Sub | Math::Rem) => {
                    number(l).is_some() || number(r).is_some()
                }
                BinaryOp::Cmp(_) => scalar(l) || scalar(r),
                _ => false,
            };
            operands && sub(l) && sub(r)
        }
        Term::IfThenElse(branches, otherwise) => {
            branches.iter().all(|(c, then)| sub(c) && sub(then))
                && otherwise.as_deref().is_none_or(sub)
        }
        Term::Call(name, args) => {
            SHALLOW_BUILTINS.contains(&(*name, args.len())) && args.iter().all(sub)
        }
        Term::Path(t, path) => {
            sub(t)
                && path.0.iter().all(|(part, _)| match part {
                    // `.[x]` with an array `x` searches for it, comparing deeply.
                    Part::Index(i) => number(i).is_some() || literal_str(i),
                    Part::Range(from, upto) => from.iter().chain(upto).all(|b| number(b).is_some()),
                })
        }
    }
}

/// A destructuring pattern whose computed keys are shallow.
fn pattern_shallow(pattern: &Pattern<&str>, depth: usize) -> bool {
    match pattern {
        Pattern::Var(_) => true,
        Pattern::Arr(patterns) => patterns.iter().all(|p| pattern_shallow(p, depth)),
        Pattern::Obj(entries) => entries
            .iter()
            .all(|(k, p)| shallow(k, depth) && pattern_shallow(p, depth)),
    }
}

/// A string part that is text, not an interpolated term.
fn plain(part: &StrPart<&str, Term<&str>>) -> bool {
    !matches!(part, StrPart::Term(_))
}

/// A number literal, possibly negated.
fn number<'a>(t: &'a Term<&'a str>) -> Option<&'a str> {
    match t {
        Term::Num(n) => Some(n),
        Term::Neg(t) => number(t),
        _ => None,
    }
}

/// A string literal without interpolation or format.
fn literal_str(t: &Term<&str>) -> bool {
    matches!(t, Term::Str(None, parts) if parts.iter().all(plain))
}

/// A literal scalar: a number, a plain string, `true`, `false` or `null`.
fn scalar(t: &Term<&str>) -> bool {
    number(t).is_some()
        || literal_str(t)
        || matches!(t, Term::Call(name, args) if args.is_empty() && matches!(*name, "true" | "false" | "null"))
}
