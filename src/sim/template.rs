//! Templates: JSON values whose strings may name earlier bindings.
//!
//! A string that is exactly `$name` or `$name.path.0.to` is replaced by that binding's
//! value (a missing field or index is `null`). Inside a longer string, `${name.path}` is
//! replaced by the value's text (a string as is, anything else as JSON). `$$` at the
//! start of a string stands for a literal `$`. Naming a binding that does not exist is
//! an error, never a silent `null`.

use indexmap::IndexMap;
use serde_json::{Map, Value};

/// Named values a template may refer to.
pub(crate) type Bindings = IndexMap<String, Value>;

/// `value` with every reference replaced.
pub(crate) fn resolve(value: &Value, bindings: &Bindings) -> Result<Value, String> {
    match value {
        Value::String(s) => string(s, bindings),
        Value::Array(items) => items
            .iter()
            .map(|v| resolve(v, bindings))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(k.clone(), resolve(v, bindings)?);
            }
            Ok(Value::Object(out))
        }
        other => Ok(other.clone()),
    }
}

fn string(s: &str, bindings: &Bindings) -> Result<Value, String> {
    if let Some(rest) = s.strip_prefix("$$") {
        return Ok(Value::String(format!("${rest}")));
    }
    if let Some(reference) = s.strip_prefix('$')
        && !reference.starts_with('{')
    {
        return lookup(reference, bindings);
    }
    if !s.contains("${") {
        return Ok(Value::String(s.to_owned()));
    }
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed ${{ in template {s:?}"));
        };
        match lookup(&after[..end], bindings)? {
            Value::String(text) => out.push_str(&text),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(Value::String(out))
}

fn lookup(reference: &str, bindings: &Bindings) -> Result<Value, String> {
    let mut parts = reference.split('.');
    let name = parts.next().unwrap_or_default();
    let Some(mut value) = bindings.get(name) else {
        let known: Vec<&String> = bindings.keys().collect();
        return Err(format!("unknown binding ${name} (known: {known:?})"));
    };
    for part in parts {
        value = match value {
            Value::Object(map) => map.get(part).unwrap_or(&Value::Null),
            Value::Array(items) => part
                .parse::<usize>()
                .ok()
                .and_then(|i| items.get(i))
                .unwrap_or(&Value::Null),
            _ => &Value::Null,
        };
    }
    Ok(value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bindings() -> Bindings {
        let mut b = Bindings::new();
        b.insert("go".into(), json!({"answer": "yes", "list": [1, 2]}));
        b.insert("name".into(), json!("api"));
        b
    }

    #[test]
    fn whole_string_references_keep_their_type() {
        let b = bindings();
        assert_eq!(resolve(&json!("$go.list.1"), &b), Ok(json!(2)));
        assert_eq!(resolve(&json!("$go.missing"), &b), Ok(Value::Null));
        assert_eq!(
            resolve(&json!({"a": ["$go.answer"]}), &b),
            Ok(json!({"a": ["yes"]}))
        );
    }

    #[test]
    fn interpolation_and_escapes() {
        let b = bindings();
        assert_eq!(
            resolve(&json!("deploy ${name}?"), &b),
            Ok(json!("deploy api?"))
        );
        assert_eq!(resolve(&json!("n=${go.list}"), &b), Ok(json!("n=[1,2]")));
        assert_eq!(resolve(&json!("$$5"), &b), Ok(json!("$5")));
        assert!(resolve(&json!("${name"), &b).is_err());
    }

    #[test]
    fn an_unknown_binding_is_an_error() {
        let err = resolve(&json!("$nope"), &bindings()).unwrap_err();
        assert!(err.contains("unknown binding $nope"), "{err}");
    }
}
