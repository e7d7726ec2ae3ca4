//! The outputs of one evaluation, converted back to JSON.

use jaq_json::{Num, Val};
use serde_json::{Map, Number, Value};

use super::budget::Stop;
use super::deadline::Deadline;

/// What one evaluation produced, as far as the caller needs it: the first output, and whether
/// there was a second one.
///
/// Evaluation stops after the second output, so a generator with a million outputs costs no
/// more than one with two.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outputs {
    /// The first output, if there was one.
    pub(crate) first: Option<Value>,
    /// Whether there was more than one output.
    pub(crate) more: bool,
}

impl Outputs {
    /// The deepest nesting of arrays and objects an output may have.
    ///
    /// serde_json refuses to parse deeper documents by default, so an output within this limit
    /// can be stored as JSON and read back. It also bounds the recursion needed to convert
    /// (and later drop) the output on the caller's thread.
    pub(crate) const MAX_DEPTH: usize = 127;
}

/// Why an output could not be converted.
#[derive(Debug)]
pub(super) enum Unconvertible {
    /// It nests deeper than [`Outputs::MAX_DEPTH`].
    TooDeep,
    /// The deadline passed while converting it.
    Deadline,
    /// The evaluation's budget ran out while converting it.
    Limit,
}

/// Convert a jaq value to JSON, refusing values nested deeper than [`Outputs::MAX_DEPTH`].
///
/// Ticks `deadline` at every array and object: jaq shares values instead of copying them, so
/// a few steps of a program (`[., .] | [., .] | ...`) can build a value whose JSON is
/// astronomically large, and the conversion must stop at the deadline like the program.
pub(super) fn to_json(v: &Val, deadline: &Deadline<'_>) -> Result<Value, Unconvertible> {
    convert(v, Outputs::MAX_DEPTH, deadline)
}

fn convert(v: &Val, depth: usize, deadline: &Deadline<'_>) -> Result<Value, Unconvertible> {
    let nested = |depth: usize| {
        match deadline.tick() {
            Ok(()) => {}
            Err(Stop::Deadline) => return Err(Unconvertible::Deadline),
            Err(Stop::Limit) => return Err(Unconvertible::Limit),
        }
        depth.checked_sub(1).ok_or(Unconvertible::TooDeep)
    };
    Ok(match v {
        Val::Null => Value::Null,
        Val::Bool(b) => Value::Bool(*b),
        Val::Num(n) => number(n),
        Val::TStr(b) | Val::BStr(b) => {
            // A copy: charged like any other allocation of the evaluation.
            match deadline.allocate(b.len() as u64, "the output's conversion") {
                Ok(()) => {}
                Err(Stop::Deadline) => return Err(Unconvertible::Deadline),
                Err(Stop::Limit) => return Err(Unconvertible::Limit),
            }
            Value::String(String::from_utf8_lossy(b).into_owned())
        }
        Val::Arr(items) => {
            let depth = nested(depth)?;
            let items = items.iter().map(|item| convert(item, depth, deadline));
            Value::Array(items.collect::<Result<_, _>>()?)
        }
        Val::Obj(fields) => {
            let depth = nested(depth)?;
            let mut map = Map::with_capacity(fields.len());
            for (k, v) in fields.iter() {
                map.insert(key(k), convert(v, depth, deadline)?);
            }
            Value::Object(map)
        }
    })
}

/// jaq allows keys of any type (`{(1): 2}`); JSON only strings, so others become their JSON text.
fn key(k: &Val) -> String {
    match k {
        Val::TStr(b) | Val::BStr(b) => String::from_utf8_lossy(b).into_owned(),
        other => other.to_string(),
    }
}

fn number(n: &Num) -> Value {
    match n {
        Num::Int(i) => i64::try_from(*i).map_or_else(|_| float(*i as f64), Value::from),
        // Big integers and decimal literals keep their digits as text; serde_json makes the
        // closest i64, u64 or f64 of them.
        Num::BigInt(i) => text(&i.to_string()),
        Num::Dec(s) => text(s),
        Num::Float(f) => float(*f),
    }
}

fn text(digits: &str) -> Value {
    match digits.parse::<Number>() {
        Ok(n) => Value::Number(n),
        Err(_) => float(digits.parse().unwrap_or(f64::NAN)),
    }
}

/// JSON has no NaN or infinities: like jq, print NaN as null and infinities as the largest
/// finite numbers.
fn float(f: f64) -> Value {
    let f = if f.is_infinite() {
        f64::MAX.copysign(f)
    } else {
        f
    };
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}
