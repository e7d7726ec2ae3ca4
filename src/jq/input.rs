//! Values converted once into jaq's representation.

use jaq_json::{Map, Num, Val};
use serde_json::Value;

/// A value in jaq's representation, ready to be passed to [`Program::run`] any number of times.
///
/// Converting a `serde_json::Value` walks the whole value, so a value that is used by many
/// evaluations (such as `$parked`) is converted once and kept. Cloning is cheap: arrays,
/// objects and strings are shared, not copied. Built with jaq-json's `sync` feature, the
/// sharing is atomic, so an `Input` can be handed to the evaluation threads.
///
/// [`Program::run`]: super::Program::run
#[derive(Debug, Clone, Default)]
pub(crate) struct Input(Val);

impl Input {
    /// Convert a JSON value.
    pub(crate) fn from_json(value: &Value) -> Input {
        Input(convert(value))
    }

    /// An array of `items`, sharing them.
    pub(crate) fn array<'a>(items: impl IntoIterator<Item = &'a Input>) -> Input {
        Input(items.into_iter().map(|i| i.0.clone()).collect())
    }

    /// The value itself, for the evaluator.
    pub(super) fn val(&self) -> &Val {
        &self.0
    }
}

fn convert(value: &Value) -> Val {
    match value {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => number(n),
        Value::String(s) => Val::from(s.clone()),
        Value::Array(items) => items.iter().map(convert).collect(),
        Value::Object(fields) => Val::obj(
            fields
                .iter()
                .map(|(k, v)| (Val::from(k.clone()), convert(v)))
                .collect::<Map>(),
        ),
    }
}

fn number(n: &serde_json::Number) -> Val {
    // Integers stay integers so that they can index arrays and print without a fraction.
    if let Some(i) = n.as_i64() {
        Val::Num(Num::from_integral(i))
    } else if let Some(u) = n.as_u64() {
        Val::Num(Num::from_integral(u))
    } else {
        // Without serde_json's arbitrary_precision every other number is an f64.
        Val::from(n.as_f64().unwrap_or(f64::NAN))
    }
}
