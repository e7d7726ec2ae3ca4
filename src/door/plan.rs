//! [`Plan`]: what a visit will do, read off the contract's outputs and checked for shape.
//!
//! Each expression must emit exactly one value of its column's shape; anything else is a
//! [`VisitProblem`] naming the expression, what it emitted, and why that is wrong. Every
//! problem of a visit is collected, none is acted on.

use serde_json::Value;
use thiserror::Error;

use crate::error::IdProblem;

/// One resolution a `resume_expr` asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item {
    /// `{id, payload}`: resume an ask with an answer.
    Resume {
        /// The interaction.
        id: String,
        /// The answer.
        payload: Value,
    },
    /// A bare id: take a waiting outcome.
    Take {
        /// The interaction.
        id: String,
    },
}

impl Item {
    /// The interaction it names.
    pub(crate) fn id(&self) -> &str {
        match self {
            Item::Resume { id, .. } | Item::Take { id } => id,
        }
    }
}

/// What a visit will do, once every check passes.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Plan {
    /// Interactions to cancel, first.
    pub(crate) cancels: Vec<String>,
    /// The resolutions, when `resume_expr` yielded non-null: then nothing starts.
    pub(crate) resolve: Option<Vec<Item>>,
    /// The kwargs to start the target on, when nothing is resolved.
    pub(crate) start: Option<Value>,
    /// The extras of the start.
    pub(crate) extras: Option<Value>,
}

/// One thing wrong with a visit; the visit applied nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum VisitProblem {
    /// The expression raised an error.
    #[error("{expr} failed: {error}")]
    Eval {
        /// The expression.
        expr: String,
        /// The error.
        error: String,
    },
    /// The expression passed the evaluation deadline; the door is marked broken.
    #[error(
        "{expr} passed its evaluation deadline of {ms} ms; the door is broken until saved again"
    )]
    Deadline {
        /// The expression.
        expr: String,
        /// The deadline.
        ms: u64,
    },
    /// The expression emitted nothing.
    #[error("{expr} emitted no value; it must emit exactly one")]
    NoOutput {
        /// The expression.
        expr: String,
    },
    /// The expression emitted more than one value.
    #[error("{expr} emitted more than one value (the first: {first}); it must emit exactly one")]
    Many {
        /// The expression.
        expr: String,
        /// The first value, as JSON (shortened).
        first: String,
    },
    /// The value is outside the expression's column's shape.
    #[error("{expr} emitted {emitted}: {why}")]
    Shape {
        /// The expression.
        expr: String,
        /// The value, as JSON (shortened).
        emitted: String,
        /// What is wrong with it.
        why: String,
    },
    /// A named interaction cannot be acted on.
    #[error("{expr}: {problem}")]
    Id {
        /// The expression that named it.
        expr: String,
        /// Why.
        problem: IdProblem,
    },
    /// The same id is named by `cancel_expr` and `resume_expr`.
    #[error("interaction {id} is named by both cancel_expr and resume_expr")]
    CancelAndResume {
        /// The id.
        id: String,
    },
    /// A resolution names an entry the visit's own cancels tear down.
    #[error("resume_expr: interaction {id} would be torn down by the cancel of {by}")]
    TornDown {
        /// The id.
        id: String,
        /// The cancelled interaction whose chain it is in.
        by: String,
    },
    /// The extras name keys the target did not declare.
    #[error("extras_expr: target {target} does not declare extras key(s) {}", .keys.join(", "))]
    UndeclaredExtras {
        /// The target.
        target: String,
        /// The keys.
        keys: Vec<String>,
    },
    /// A take on a door whose visits have no receiver: the result would be lost.
    #[error("resume_expr: door {door} has no receiver to take interaction {id}")]
    NoReceiver {
        /// The door.
        door: String,
        /// The id.
        id: String,
    },
    /// The expression emitted a value nesting deeper than
    /// [`MAX_VALUE_DEPTH`](crate::MAX_VALUE_DEPTH).
    #[error("{expr} emitted a value nested deeper than {limit} levels")]
    TooDeep {
        /// The expression.
        expr: String,
        /// The limit.
        limit: usize,
    },
    /// The started target is not registered.
    #[error("target {target} is not registered")]
    UnknownTarget {
        /// The target.
        target: String,
    },
}

/// A value as JSON, shortened for an error message. A value past the depth limit is
/// described, not written: writing it recurses once per level.
pub(crate) fn shown(value: &Value) -> String {
    const MAX: usize = 200;
    if crate::depth::too_deep(value) {
        return format!(
            "a value nested deeper than {} levels",
            crate::depth::MAX_VALUE_DEPTH
        );
    }
    let text = value.to_string();
    if text.len() <= MAX {
        return text;
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Refuse an output nested deeper than the depth limit before anything else reads it:
/// every output of a door is checked here as it leaves the jq evaluator.
fn within_depth(expr: &str, value: &Value) -> Result<(), VisitProblem> {
    if crate::depth::too_deep(value) {
        return Err(VisitProblem::TooDeep {
            expr: expr.to_owned(),
            limit: crate::depth::MAX_VALUE_DEPTH,
        });
    }
    Ok(())
}

fn shape(expr: &str, value: &Value, why: &str) -> VisitProblem {
    VisitProblem::Shape {
        expr: expr.to_owned(),
        emitted: shown(value),
        why: why.to_owned(),
    }
}

/// `cancel_expr`: `null`, an id string, or an array of id strings.
pub(crate) fn cancels(value: &Value) -> Result<Vec<String>, VisitProblem> {
    const WHY: &str = "cancel_expr must yield null, an id string, or an array of id strings";
    within_depth("cancel_expr", value)?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::String(id) => Ok(vec![id.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::String(id) => Ok(id.clone()),
                _ => Err(shape("cancel_expr", value, WHY)),
            })
            .collect(),
        _ => Err(shape("cancel_expr", value, WHY)),
    }
}

/// `resume_expr`: `null`, `{id, payload}`, a bare id, or an array of these.
pub(crate) fn resolutions(value: &Value) -> Result<Option<Vec<Item>>, VisitProblem> {
    within_depth("resume_expr", value)?;
    let item = |v: &Value| -> Result<Item, String> {
        match v {
            Value::String(id) => Ok(Item::Take { id: id.clone() }),
            Value::Object(map) => {
                let extra: Vec<&str> = map
                    .keys()
                    .map(String::as_str)
                    .filter(|k| *k != "id" && *k != "payload")
                    .collect();
                if !extra.is_empty() {
                    return Err(format!(
                        "a resume object has exactly the keys id and payload, not {}",
                        extra.join(", ")
                    ));
                }
                let Some(Value::String(id)) = map.get("id") else {
                    return Err("a resume object needs an id string".to_owned());
                };
                let Some(payload) = map.get("payload") else {
                    return Err(
                        "a resume object needs a payload (a take is a bare id string)".to_owned(),
                    );
                };
                Ok(Item::Resume {
                    id: id.clone(),
                    payload: payload.clone(),
                })
            }
            _ => Err(
                "resume_expr must yield null, {id, payload}, a bare id string, or an array of these"
                    .to_owned(),
            ),
        }
    };
    match value {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .iter()
            .map(|v| item(v).map_err(|why| shape("resume_expr", v, &why)))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        single => item(single)
            .map(|i| Some(vec![i]))
            .map_err(|why| shape("resume_expr", single, &why)),
    }
}

/// `start_expr` and `extras_expr`: an object, or `null`.
pub(crate) fn object(expr: &str, value: &Value) -> Result<Option<Value>, VisitProblem> {
    within_depth(expr, value)?;
    match value {
        Value::Null => Ok(None),
        Value::Object(_) => Ok(Some(value.clone())),
        _ => Err(shape(
            expr,
            value,
            &format!("{expr} must yield an object or null"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cancel_shapes() {
        assert_eq!(cancels(&json!(null)), Ok(vec![]));
        assert_eq!(cancels(&json!("i-1")), Ok(vec!["i-1".to_owned()]));
        assert_eq!(cancels(&json!(["i-1", "i-2"])).map(|v| v.len()), Ok(2));
        for bad in [json!(1), json!({"id": "i-1"}), json!(["i-1", 2])] {
            assert!(cancels(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resume_shapes() {
        assert_eq!(resolutions(&json!(null)), Ok(None));
        assert_eq!(
            resolutions(&json!("i-1")),
            Ok(Some(vec![Item::Take { id: "i-1".into() }]))
        );
        assert_eq!(
            resolutions(&json!([{"id": "i-1", "payload": null}, "i-2"])),
            Ok(Some(vec![
                Item::Resume {
                    id: "i-1".into(),
                    payload: Value::Null
                },
                Item::Take { id: "i-2".into() }
            ]))
        );
        let e = resolutions(&json!({"id": "i-1", "payload": 1, "x": 2})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"resume_expr emitted {"id":"i-1","payload":1,"x":2}: a resume object has exactly the keys id and payload, not x"#
        );
        assert!(resolutions(&json!({"id": "i-1"})).is_err());
        assert!(resolutions(&json!({"id": 1, "payload": 1})).is_err());
        assert!(resolutions(&json!(true)).is_err());
    }

    #[test]
    fn outputs_past_the_depth_limit_are_refused_naming_the_expression() {
        let deep = crate::depth::nested(crate::depth::MAX_VALUE_DEPTH + 1);
        let payload = json!({"id": "i-1", "payload": deep});
        let expected = |expr: &str| VisitProblem::TooDeep {
            expr: expr.to_owned(),
            limit: crate::depth::MAX_VALUE_DEPTH,
        };
        assert_eq!(resolutions(&payload), Err(expected("resume_expr")));
        assert_eq!(cancels(&deep), Err(expected("cancel_expr")));
        assert_eq!(
            object("start_expr", &json!({ "k": deep })),
            Err(expected("start_expr"))
        );
        assert_eq!(
            shown(&deep),
            format!(
                "a value nested deeper than {} levels",
                crate::depth::MAX_VALUE_DEPTH
            )
        );
        let fits = crate::depth::nested(crate::depth::MAX_VALUE_DEPTH - 2);
        assert!(resolutions(&json!({"id": "i-1", "payload": fits})).is_ok());
    }

    #[test]
    fn long_values_are_shortened() {
        let long = json!("x".repeat(1000));
        assert!(shown(&long).chars().count() <= 201);
    }
}
