//! The depth limit on JSON values entering the runtime, checked without recursion.
//!
//! Every value a caller, a door or a target hands the runtime (kwargs, extras, resume
//! payloads, answers, ask payloads and schemas, visit and hook-fire inputs, step
//! results, a run's result) is checked here before anything else touches it: serde's
//! serialisation, `clone`, `==`, the drop of a `serde_json::Value`, the conversion to
//! jq's values and the JSON-schema validator all recurse once per level, so a value
//! thousands of levels deep would overflow the stack of the task handling it. A value
//! deeper than [`MAX_VALUE_DEPTH`] is refused by its operation's own error and dropped
//! here, level by level ([`drop_deep`]), so refusing it recurses no more than accepting
//! a shallow one. Both walks use a heap stack, never the call stack.
//!
//! It deliberately does not bound a value's width or size (the door input cap and the
//! question length do that where it matters), and it does not look inside the jq
//! evaluator, which bounds its own nesting; a door's outputs are checked as they leave
//! it ([`crate::door::plan`]).

use serde_json::Value;

/// The deepest nesting of arrays and objects a value entering the runtime may have:
/// `0` and `"x"` are 0 levels deep, `[]` and `{}` are 1, `[[1]]` is 2.
///
/// The figure of `serde_json`'s default parser limit, which accepts a level fewer: any
/// value parsed from JSON text with its defaults fits. At this depth every recursive path in the runtime
/// and its dependencies uses a small fraction of a 2 MiB Tokio worker stack
/// (`docs/semantics.md`, "Value depth").
pub const MAX_VALUE_DEPTH: usize = 128;

/// The deepest nesting a `form` ask's JSON schema may have. Lower than
/// [`MAX_VALUE_DEPTH`]: compiling a schema validates it against the meta-schema, which
/// costs several stack frames per level of the schema, and real forms are shallow.
pub const MAX_SCHEMA_DEPTH: usize = 32;

/// The children still to visit at one level of the walk.
enum Level<'a> {
    Array(std::slice::Iter<'a, Value>),
    Object(serde_json::map::Values<'a>),
}

impl<'a> Level<'a> {
    /// The level `value` opens, if it is an array or an object.
    fn open(value: &'a Value) -> Option<Self> {
        match value {
            Value::Array(items) => Some(Level::Array(items.iter())),
            Value::Object(map) => Some(Level::Object(map.values())),
            _ => None,
        }
    }

    fn next(&mut self) -> Option<&'a Value> {
        match self {
            Level::Array(items) => items.next(),
            Level::Object(values) => values.next(),
        }
    }
}

/// Whether `value` nests arrays and objects deeper than [`MAX_VALUE_DEPTH`] levels.
///
/// Iterative, and it stops at the first level past the limit: the walk's own stack
/// never holds more than the limit's worth of levels.
pub(crate) fn too_deep(value: &Value) -> bool {
    exceeds(value, MAX_VALUE_DEPTH)
}

/// Whether `value` nests deeper than `limit` levels.
pub(crate) fn exceeds(value: &Value, limit: usize) -> bool {
    let Some(top) = Level::open(value) else {
        return false;
    };
    if limit == 0 {
        return true;
    }
    let mut stack = Vec::with_capacity(16);
    stack.push(top);
    while let Some(level) = stack.last_mut() {
        match level.next() {
            None => {
                stack.pop();
            }
            Some(child) => {
                if let Some(open) = Level::open(child) {
                    if stack.len() >= limit {
                        return true;
                    }
                    stack.push(open);
                }
            }
        }
    }
    false
}

/// Drop `value` level by level, so a value of any depth is freed without recursion
/// (`serde_json::Value`'s own drop recurses once per level).
pub(crate) fn drop_deep(value: Value) {
    let mut pending = vec![value];
    while let Some(mut value) = pending.pop() {
        match &mut value {
            Value::Array(items) => pending.append(items),
            Value::Object(map) => {
                pending.extend(std::mem::take(map).into_iter().map(|(_, v)| v));
            }
            _ => {}
        }
        // `value` has no children left: its drop is one level deep.
    }
}

/// Refuse `value` when it is too deep: `Err` with `refusal` after dropping the value
/// level by level, else the value back.
pub(crate) fn check<E>(value: Value, refusal: impl FnOnce() -> E) -> Result<Value, E> {
    if too_deep(&value) {
        drop_deep(value);
        Err(refusal())
    } else {
        Ok(value)
    }
}

/// A value `levels` arrays deep around `0`, built without recursion (for tests).
#[cfg(test)]
pub(crate) fn nested(levels: usize) -> Value {
    let mut value = Value::from(0);
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// An upper bound of how deep arrays and objects nest in a JSON text, read flat (no
/// recursion, whatever the text): brackets outside strings are counted. Text that is
/// not JSON gets a number too; the parser refuses it. Check this before parsing text
/// from outside with `serde_json`, whose recursion this crate leaves unbounded.
///
/// ```
/// assert_eq!(parkway::json_nesting(br#"{"a": [1, "[[["]}"#), 2);
/// ```
pub fn json_nesting(text: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &byte in text {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match byte {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    deepest = deepest.max(depth);
                }
                b']' | b'}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_counts_levels_of_arrays_and_objects() {
        for (value, depth) in [
            (json!(0), 0),
            (json!("x"), 0),
            (json!([]), 1),
            (json!({}), 1),
            (json!([[1]]), 2),
            (json!({"a": [1, {"b": []}], "c": 2}), 4),
            (json!([1, 2, [3, [4, [5]]], 6]), 4),
        ] {
            assert!(!exceeds(&value, depth), "{value} fits {depth}");
            if depth > 0 {
                assert!(exceeds(&value, depth - 1), "{value} exceeds {}", depth - 1);
            }
        }
    }

    #[test]
    fn the_limit_itself_is_allowed_and_one_more_level_is_not() {
        assert!(!too_deep(&nested(MAX_VALUE_DEPTH)));
        assert!(too_deep(&nested(MAX_VALUE_DEPTH + 1)));
        let deep_object = (0..=MAX_VALUE_DEPTH).fold(json!(null), |v, _| json!({ "k": v }));
        assert!(too_deep(&deep_object));
    }

    #[test]
    fn a_value_far_past_the_limit_is_checked_and_dropped_without_recursion() {
        // The default test thread's stack: a recursive walk or drop of this overflows.
        let value = nested(200_000);
        assert!(too_deep(&value));
        assert!(check(value, || "refused").is_err());
        let shallow = json!({"a": [1, 2]});
        assert_eq!(check(shallow.clone(), || "refused"), Ok(shallow));
    }
}
