//! Values converted once into jaq's representation.

use std::sync::OnceLock;

use jaq_json::{Map, Num, Val};
use serde_json::Value;

use crate::entry::{Entry, EntryStatus, To};

/// The words every parked entry repeats, converted once and shared by every entry's
/// conversion: its field names and the values of `status` and `to`. Sharing them saves
/// most of an entry's allocations.
struct Words {
    id: Val,
    status: Val,
    to: Val,
    asked_by: Val,
    question: Val,
    answer_format: Val,
    group_id: Val,
    payload: Val,
    asking: Val,
    running: Val,
    finished: Val,
    failed: Val,
    caller: Val,
    user: Val,
}

impl Words {
    fn get() -> &'static Words {
        static WORDS: OnceLock<Words> = OnceLock::new();
        WORDS.get_or_init(|| Words {
            id: owned("id"),
            status: owned("status"),
            to: owned("to"),
            asked_by: owned("asked_by"),
            question: owned("question"),
            answer_format: owned("answer_format"),
            group_id: owned("group_id"),
            payload: owned("payload"),
            asking: owned(EntryStatus::Asking.as_str()),
            running: owned(EntryStatus::Running.as_str()),
            finished: owned(EntryStatus::Finished.as_str()),
            failed: owned(EntryStatus::Failed.as_str()),
            caller: owned(To::Caller.as_str()),
            user: owned(To::User.as_str()),
        })
    }

    fn status(&self, status: EntryStatus) -> Val {
        match status {
            EntryStatus::Asking => self.asking.clone(),
            EntryStatus::Running => self.running.clone(),
            EntryStatus::Finished => self.finished.clone(),
            EntryStatus::Failed => self.failed.clone(),
        }
    }

    fn to(&self, to: To) -> Val {
        match to {
            To::Caller => self.caller.clone(),
            To::User => self.user.clone(),
        }
    }
}

/// `text` copied into a jaq string of its own: one allocation for the bytes (a `String`
/// handed to jaq would be wrapped in a second, reference-counted one).
fn owned(text: &str) -> Val {
    Val::utf8_str(text.as_bytes().to_vec())
}

/// A value in jaq's representation, ready to be passed to [`Program::run_batch`] any number
/// of times.
///
/// Converting a `serde_json::Value` walks the whole value, so a value that is used by many
/// evaluations (such as `$parked`) is converted once and kept. Cloning is cheap: arrays,
/// objects and strings are shared, not copied. Built with jaq-json's `sync` feature, the
/// sharing is atomic, so an `Input` can be handed to the evaluation threads.
///
/// [`Program::run_batch`]: super::Program::run_batch
#[derive(Debug, Clone, Default)]
pub(crate) struct Input(Val);

impl Input {
    /// Convert a JSON value.
    pub(crate) fn from_json(value: &Value) -> Input {
        Input(convert(value))
    }

    /// A string.
    pub(crate) fn string(text: &str) -> Input {
        Input(owned(text))
    }

    /// A parked entry, exactly as its JSON form converts (fields in the same order, unset
    /// ones absent), built directly with the field names and status words shared.
    pub(crate) fn from_entry(entry: &Entry) -> Input {
        let words = Words::get();
        let set = [
            entry.to.is_some(),
            entry.asked_by.is_some(),
            entry.question.is_some(),
            entry.answer_format.is_some(),
            entry.group_id.is_some(),
            entry.payload.is_some(),
        ];
        let count = 2 + set.iter().filter(|set| **set).count();
        let mut fields = Map::with_capacity_and_hasher(count, Default::default());
        fields.insert(words.id.clone(), owned(&entry.id));
        fields.insert(words.status.clone(), words.status(entry.status));
        if let Some(to) = entry.to {
            fields.insert(words.to.clone(), words.to(to));
        }
        if let Some(names) = &entry.asked_by {
            let names = names.iter().map(|name| owned(name)).collect();
            fields.insert(words.asked_by.clone(), names);
        }
        let texts = [
            (&words.question, &entry.question),
            (&words.answer_format, &entry.answer_format),
            (&words.group_id, &entry.group_id),
        ];
        for (name, text) in texts {
            if let Some(text) = text {
                fields.insert(name.clone(), owned(text));
            }
        }
        if let Some(payload) = &entry.payload {
            fields.insert(words.payload.clone(), convert(payload));
        }
        Input(Val::obj(fields))
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
        Value::String(s) => owned(s),
        Value::Array(items) => items.iter().map(convert).collect(),
        Value::Object(fields) => Val::obj(
            fields
                .iter()
                .map(|(k, v)| (owned(k), convert(v)))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entries() -> Vec<Entry> {
        let full = Entry {
            id: "i-1".into(),
            status: EntryStatus::Asking,
            to: Some(To::Caller),
            asked_by: Some(vec!["child".into(), "main".into()]),
            question: Some("proceed?".into()),
            answer_format: Some("confirm".into()),
            group_id: Some("g-1".into()),
            payload: Some(json!({"n": 1, "tags": ["a", null, 2.5]})),
        };
        let user = Entry {
            to: Some(To::User),
            status: EntryStatus::Running,
            payload: None,
            ..full.clone()
        };
        let statuses = [
            EntryStatus::Asking,
            EntryStatus::Running,
            EntryStatus::Finished,
            EntryStatus::Failed,
        ];
        let waiting = statuses.map(|status| Entry::waiting("i-2".into(), status));
        [full, user].into_iter().chain(waiting).collect()
    }

    #[test]
    fn an_entry_converts_as_its_json_form_does() {
        for entry in entries() {
            let json = serde_json::to_value(&entry).unwrap();
            let direct = Input::from_entry(&entry).0;
            let via_json = Input::from_json(&json).0;
            assert_eq!(direct, via_json, "{json}");
            // Same fields in the same order: jq's `keys_unsorted` and `to_entries` see it.
            let order = |val: &Val| match val {
                Val::Obj(map) => map.keys().map(|k| k.to_string()).collect::<Vec<_>>(),
                _ => panic!("not an object: {val}"),
            };
            assert_eq!(order(&direct), order(&via_json), "{json}");
        }
    }

    #[test]
    fn a_string_converts_as_its_json_form_does() {
        let text = "caller \u{e9}";
        assert_eq!(Input::string(text).0, Input::from_json(&json!(text)).0);
    }
}
