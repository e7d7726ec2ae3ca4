//! Values converted once into jaq's representation.

use std::sync::OnceLock;

use jaq_json::{Map, Num, Val};
use serde_json::Value;

/// The words every parked entry repeats: its field names and the values of `status` and
/// `to`. Each is converted once and shared by every conversion, which saves most of an
/// entry's string allocations (a converted string is three allocations of its own).
const VOCABULARY: [&str; 14] = [
    "id",
    "status",
    "to",
    "asked_by",
    "question",
    "answer_format",
    "group_id",
    "payload",
    "asking",
    "running",
    "finished",
    "failed",
    "caller",
    "user",
];

/// `text` as a jaq string, shared when it is one of the [`VOCABULARY`].
fn string(text: &str) -> Val {
    static SHARED: OnceLock<Vec<Val>> = OnceLock::new();
    match VOCABULARY.iter().position(|word| *word == text) {
        Some(i) => {
            let shared = SHARED.get_or_init(|| VOCABULARY.iter().map(|word| owned(word)).collect());
            shared.get(i).cloned().unwrap_or_else(|| owned(text))
        }
        None => owned(text),
    }
}

/// `text` copied into a jaq string of its own: one allocation for the bytes (a `String`
/// handed to jaq would be wrapped in a second, reference-counted one).
fn owned(text: &str) -> Val {
    Val::utf8_str(text.as_bytes().to_vec())
}

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
        Value::String(s) => string(s),
        Value::Array(items) => items.iter().map(convert).collect(),
        Value::Object(fields) => Val::obj(
            fields
                .iter()
                .map(|(k, v)| (string(k), convert(v)))
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
