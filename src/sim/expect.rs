//! Expectations: whether an output contains a JSON subset, and where it does not.
//!
//! An expected object matches an object holding at least its keys, each matching; an
//! expected array matches an array of the same length, element by element; an expected
//! `null` matches a missing key or a `null`; any other value matches only itself.

use serde_json::Value;

/// `None` when `actual` contains `expected`; else where and how it differs.
pub(crate) fn contains(actual: &Value, expected: &Value) -> Option<String> {
    at(actual, expected, &mut String::new())
}

fn at(actual: &Value, expected: &Value, path: &mut String) -> Option<String> {
    let here = |path: &str| {
        if path.is_empty() {
            ".".to_owned()
        } else {
            path.to_owned()
        }
    };
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, w) in want {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                let found = match got.get(key) {
                    Some(g) => at(g, w, path),
                    None if w.is_null() => None,
                    None => Some(format!("at {path}: expected {w}, but the key is absent")),
                };
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(want), Value::Array(got)) => {
            if want.len() != got.len() {
                return Some(format!(
                    "at {}: expected {} item(s), got {}: {}",
                    here(path),
                    want.len(),
                    got.len(),
                    Value::Array(got.clone())
                ));
            }
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                let found = at(g, w, path);
                path.truncate(len);
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (w, g) if w == g => None,
        (w, g) => Some(format!("at {}: expected {w}, got {g}", here(path))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_matches() {
        let actual = json!({"a": 1, "b": [{"x": 1, "y": 2}], "c": "s"});
        assert_eq!(contains(&actual, &json!({"b": [{"y": 2}]})), None);
        assert_eq!(contains(&actual, &json!({"missing": null})), None);
        assert_eq!(contains(&actual, &json!({})), None);
    }

    #[test]
    fn a_difference_names_its_path() {
        let actual = json!({"a": 1, "b": [{"x": 1}]});
        assert_eq!(
            contains(&actual, &json!({"b": [{"x": 2}]})),
            Some("at .b[0].x: expected 2, got 1".into())
        );
        assert_eq!(
            contains(&actual, &json!({"z": 3})),
            Some("at .z: expected 3, but the key is absent".into())
        );
        assert!(
            contains(&actual, &json!({"b": []}))
                .unwrap()
                .contains("expected 0 item(s), got 1")
        );
    }
}
