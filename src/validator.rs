//! JSON Schema validation: a `form` user ask's schema and the answers to it, and a tool's
//! input and output schemas and the arguments of its calls.
//!
//! With the `forms` feature (on by default) a schema is compiled and checked by
//! jsonschema. Without it this build validates no JSON Schema: the only schemas it takes
//! are those that need no validator, `true` and `{}` (any value) and `{"type": "object"}`
//! (any object, a tool's default input); any other is refused where it is given, naming
//! the feature ([`SchemaError::NoForms`]). No value is ever taken unchecked against a
//! schema this build cannot check.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a build without the `forms` feature says of a schema it cannot check.
pub(crate) const NO_FORMS: &str = "this build of parkway checks no JSON schema other than \
     {\"type\": \"object\"}: enable the `forms` feature to validate this one";

/// Why a schema was not compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaError {
    /// It is not a valid JSON schema: what the validator said.
    // Only a validator tells it.
    #[cfg_attr(not(feature = "forms"), allow(dead_code))]
    Invalid(String),
    /// This build has no JSON Schema validator, and the schema needs one.
    // Never made with the `forms` feature.
    #[cfg_attr(feature = "forms", allow(dead_code))]
    NoForms,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaError::Invalid(reason) => f.write_str(reason),
            SchemaError::NoForms => f.write_str(NO_FORMS),
        }
    }
}

/// A compiled schema, which checks values.
pub(crate) struct Validator {
    /// The jsonschema validator.
    #[cfg(feature = "forms")]
    inner: jsonschema::Validator,
    /// Whether the schema asks for an object (`{"type": "object"}`) rather than any
    /// value (`true`, `{}`): all a build without a validator takes.
    #[cfg(not(feature = "forms"))]
    object: bool,
}

#[cfg(feature = "forms")]
impl Validator {
    /// Compiles `schema`.
    pub(crate) fn new(schema: &Value) -> Result<Validator, SchemaError> {
        jsonschema::validator_for(schema)
            .map(|inner| Validator { inner })
            .map_err(|e| SchemaError::Invalid(e.to_string()))
    }

    /// Every way `value` fails the schema, each at its JSON pointer (a missing property
    /// at its own path, not its object's); empty when it passes.
    pub(crate) fn problems(&self, value: &Value) -> Vec<AnswerProblem> {
        self.inner
            .iter_errors(value)
            .map(|e| {
                let missing = match e.kind() {
                    jsonschema::error::ValidationErrorKind::Required {
                        property: Value::String(p),
                    } => Some(p.replace('~', "~0").replace('/', "~1")),
                    _ => None,
                };
                let at = match missing {
                    Some(p) => format!("{}/{p}", e.instance_path().as_str()),
                    None => e.instance_path().as_str().to_owned(),
                };
                AnswerProblem::new(at, e.to_string())
            })
            .collect()
    }
}

#[cfg(not(feature = "forms"))]
impl Validator {
    /// Takes `true`, `{}` and `{"type": "object"}`; refuses any other schema.
    pub(crate) fn new(schema: &Value) -> Result<Validator, SchemaError> {
        match schema {
            Value::Bool(true) => Ok(Validator { object: false }),
            Value::Object(map) if map.is_empty() => Ok(Validator { object: false }),
            Value::Object(map)
                if map.len() == 1 && map.get("type").and_then(Value::as_str) == Some("object") =>
            {
                Ok(Validator { object: true })
            }
            _ => Err(SchemaError::NoForms),
        }
    }

    /// Whether `value` is an object, if the schema asks for one, in jsonschema's words.
    pub(crate) fn problems(&self, value: &Value) -> Vec<AnswerProblem> {
        if self.object && !value.is_object() {
            vec![AnswerProblem::whole(format!(
                "{value} is not of type \"object\""
            ))]
        } else {
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The schemas that need no validator are checked the same with or without one.
    #[test]
    fn the_schemas_that_need_no_validator() {
        let object = Validator::new(&json!({"type": "object"})).unwrap();
        assert!(object.problems(&json!({"a": 1})).is_empty());
        let problems = object.problems(&json!([1]));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].at, "");
        assert_eq!(problems[0].message, "[1] is not of type \"object\"");
        for any in [json!(true), json!({})] {
            let any = Validator::new(&any).unwrap();
            assert!(any.problems(&json!("x")).is_empty());
        }
    }

    /// Without a validator every other schema is refused, naming the feature: nothing
    /// is ever taken unchecked.
    #[cfg(not(feature = "forms"))]
    #[test]
    fn without_forms_any_other_schema_is_refused_naming_the_feature() {
        for schema in [
            json!({"type": "object", "required": ["a"]}),
            json!({"type": "string"}),
            json!(false),
            json!({"type": ["object"]}),
        ] {
            let refused = Validator::new(&schema).err();
            assert_eq!(refused, Some(SchemaError::NoForms), "{schema}");
        }
        assert!(NO_FORMS.contains("`forms` feature"));
    }

    /// With a validator, the schema's own words, a missing property at its path.
    #[cfg(feature = "forms")]
    #[test]
    fn with_forms_a_missing_property_is_named_at_its_path() {
        let v = Validator::new(&json!({"type": "object", "required": ["a/b"]})).unwrap();
        let problems = v.problems(&json!({}));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].at, "/a~1b");
        assert!(matches!(
            Validator::new(&json!({"type": 12})),
            Err(SchemaError::Invalid(_))
        ));
    }
}

/// One thing wrong with an answer: where, as a JSON pointer into the answer (`""` for
/// the whole answer; a missing property at its own pointer, `/name`), and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[non_exhaustive]
pub struct AnswerProblem {
    /// The JSON pointer of the part at fault; `""` for the whole answer.
    pub at: String,
    /// What is wrong with it.
    pub message: String,
}

impl AnswerProblem {
    /// A problem `message` at the pointer `at`.
    pub fn new(at: impl Into<String>, message: impl Into<String>) -> AnswerProblem {
        AnswerProblem {
            at: at.into(),
            message: message.into(),
        }
    }

    /// A problem with the whole answer.
    pub fn whole(message: impl Into<String>) -> AnswerProblem {
        AnswerProblem::new("", message)
    }
}

impl std::fmt::Display for AnswerProblem {
    /// `at /name: message`, or the message alone for the whole answer.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.at.as_str() {
            "" => f.write_str(&self.message),
            at => write!(f, "at {at}: {}", self.message),
        }
    }
}

/// The problems as one line.
pub(crate) fn joined(problems: &[AnswerProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
