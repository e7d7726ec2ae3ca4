//! A run's kwargs and extras as they wait between activations: compact JSON text.
//!
//! A parked run may wait for hours. Held as a `serde_json::Value`, a small object costs
//! several hundred bytes (an ordered map with its index, a node and a string per value);
//! its text costs a few dozen. Each activation reads the text back into fresh values, in
//! the run's own task rather than the subject's.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A JSON value kept as its compact text, shared by every activation.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Stored(Arc<str>);

impl Stored {
    /// Keep `value`.
    pub(crate) fn new(value: &Value) -> Self {
        Self(Arc::from(value.to_string()))
    }

    /// The value back. The text was written from a value, so this fails only if that
    /// value could not be written faithfully. The parser's own limit (a level fewer than
    /// [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH)) is off: the text was written from a
    /// value checked against that limit, so its depth is bounded already.
    pub(crate) fn read(&self) -> Result<Value, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(&self.0);
        de.disable_recursion_limit();
        let value = Value::deserialize(&mut de)?;
        de.end()?;
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_value_reads_back_equal_with_its_key_order() {
        let value =
            json!({"z": 1, "a": [1.5, -0.0, 1e300, "x\u{0}y"], "m": {"b": null, "a": true}});
        let back = Stored::new(&value).read().expect("reads back");
        assert_eq!(back, value);
        assert_eq!(back.to_string(), value.to_string());
    }

    #[test]
    fn a_value_deeper_than_the_parsers_default_limit_reads_back() {
        let mut value = json!(0);
        for _ in 0..300 {
            value = json!([value]);
        }
        assert_eq!(Stored::new(&value).read().expect("reads back"), value);
    }
}
