//! One caller ask as an MCP input request, and the client's response read back as the
//! ask's answer (`docs/mcp.md`, "Rounds").
//!
//! An ask whose payload holds `mcp: {method, params}` (`elicitation/create`,
//! `sampling/createMessage` or `roots/list`) is sent as that request, as it is, and the
//! client's result is the answer, as it came: this is how a run relays a question it was
//! itself asked over MCP, or asks the calling agent's model or roots. Any other ask is
//! an `elicitation/create` in form mode derived from its `answer_format`:
//!
//! | format    | requested schema                               | the answer                  |
//! |-----------|------------------------------------------------|-----------------------------|
//! | `text`    | `answer`: a string                             | the string                  |
//! | `confirm` | `answer`: a boolean                            | the boolean                 |
//! | `select`  | `answer`: one of `payload.options`             | the chosen string           |
//! | `form`    | `payload.schema` when elicitation can carry it | the content object          |
//! | `form`    | else `json`: a string holding the answer       | the JSON the string holds   |
//!
//! Every answer is then checked as the answer door checks a person's
//! ([`parkway::check_answer`]); an ask without `answer_format` is `text`.

// Sampling and roots are deprecated (SEP-2577) and still in the 2026-07-28 protocol.
#![allow(deprecated)]

use parkway::{Entry, check_answer};
use rmcp::model::{ElicitationSchema, InputRequest};
use serde_json::{Value, json};

/// Which client capability an input request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// `elicitation` (form mode).
    Elicitation,
    /// `sampling`.
    Sampling,
    /// `roots`.
    Roots,
}

impl Needs {
    /// The capability's name, as the client declares it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Needs::Elicitation => "elicitation",
            Needs::Sampling => "sampling",
            Needs::Roots => "roots",
        }
    }
}

/// How one ask is put to the client.
#[derive(Debug, Clone)]
pub(crate) enum Shape {
    /// An MCP request named by the ask's payload; the answer is the client's result.
    Relayed(Needs),
    /// A form elicitation derived from the answer format.
    Derived {
        format: String,
        options: Option<Vec<String>>,
        schema: Option<Value>,
        /// The form's answer travels as JSON text in a `json` field.
        as_text: bool,
    },
}

/// The ask's key in a round's `inputRequests`: the key its payload names (`key`, as a
/// tool author names an input request, e.g. `user_name`), else its interaction id.
pub(crate) fn key(entry: &Entry) -> String {
    entry
        .payload
        .as_ref()
        .and_then(|p| p.get("key"))
        .and_then(Value::as_str)
        .filter(|k| !k.is_empty() && k.len() <= parkway::MAX_NAME_BYTES)
        .map_or_else(|| entry.id.clone(), str::to_owned)
}

/// The ask's shape.
pub(crate) fn shape(entry: &Entry) -> Shape {
    if let Some(needs) = relayed(entry) {
        return Shape::Relayed(needs);
    }
    let payload = entry.payload.as_ref();
    let format = entry.answer_format.clone().unwrap_or_else(|| "text".into());
    let options = payload
        .and_then(|p| p.get("options"))
        .and_then(|o| serde_json::from_value::<Vec<String>>(o.clone()).ok())
        .filter(|o| !o.is_empty());
    let schema = payload.and_then(|p| p.get("schema")).cloned();
    match format.as_str() {
        "confirm" => derived("confirm", None, None, false),
        "select" if options.is_some() => derived("select", options, None, false),
        "form" if schema.is_some() => {
            let flat = schema
                .clone()
                .is_some_and(|s| serde_json::from_value::<ElicitationSchema>(s).is_ok());
            derived("form", None, schema, !flat)
        }
        // A select without options, a form without a schema, `external`, an unknown
        // format: a text answer, as a person would give through the inbox.
        _ => derived("text", None, None, false),
    }
}

fn derived(
    format: &str,
    options: Option<Vec<String>>,
    schema: Option<Value>,
    as_text: bool,
) -> Shape {
    Shape::Derived {
        format: format.to_owned(),
        options,
        schema,
        as_text,
    }
}

/// The request the ask's payload names, and what it needs, when it names one.
fn relayed(entry: &Entry) -> Option<Needs> {
    let request = entry.payload.as_ref()?.get("mcp")?;
    let needs = match request.get("method")?.as_str()? {
        "elicitation/create" => Needs::Elicitation,
        "sampling/createMessage" => Needs::Sampling,
        "roots/list" => Needs::Roots,
        _ => return None,
    };
    serde_json::from_value::<InputRequest>(request.clone()).ok()?;
    Some(needs)
}

impl Shape {
    /// The capability the request needs.
    pub(crate) fn needs(&self) -> Needs {
        match self {
            Shape::Relayed(needs) => *needs,
            Shape::Derived { .. } => Needs::Elicitation,
        }
    }
}

/// The input request for `entry`, with `problem` (a refused earlier answer) said first
/// in its message.
pub(crate) fn request(entry: &Entry, shape: &Shape, problem: Option<&str>) -> InputRequest {
    let value = match shape {
        Shape::Relayed(_) => entry
            .payload
            .as_ref()
            .and_then(|p| p.get("mcp"))
            .cloned()
            .unwrap_or(Value::Null),
        Shape::Derived {
            format,
            options,
            schema,
            as_text,
        } => {
            let question = entry
                .question
                .clone()
                .unwrap_or_else(|| match &entry.payload {
                    Some(payload) => payload.to_string(),
                    None => format!("answer {}", entry.id),
                });
            let message = match problem {
                Some(problem) => format!("{problem}. {question}"),
                None => question,
            };
            let answer = |property: Value| json!({"type": "object", "properties": {"answer": property}, "required": ["answer"]});
            let requested = match (format.as_str(), *as_text) {
                ("confirm", _) => answer(json!({"type": "boolean", "title": "Answer"})),
                ("select", _) => {
                    answer(json!({"type": "string", "title": "Answer", "enum": options}))
                }
                ("form", false) => schema.clone().unwrap_or(Value::Null),
                ("form", true) => json!({
                    "type": "object",
                    "properties": {"json": {
                        "type": "string",
                        "title": "Answer (JSON)",
                        "description": format!("A JSON value matching this schema: {}",
                            schema.as_ref().map(Value::to_string).unwrap_or_default()),
                    }},
                    "required": ["json"],
                }),
                _ => answer(json!({"type": "string", "title": "Answer"})),
            };
            json!({
                "method": "elicitation/create",
                "params": {"mode": "form", "message": message, "requestedSchema": requested},
            })
        }
    };
    // Both shapes were checked to read as an input request (a derived form schema was
    // read as an elicitation schema before it was chosen).
    serde_json::from_value(value).unwrap_or_else(|_| {
        serde_json::from_value(json!({
            "method": "elicitation/create",
            "params": {"mode": "form", "message": entry.id,
                       "requestedSchema": {"type": "object", "properties": {}}},
        }))
        .expect("a fixed elicitation request reads")
    })
}

/// What the client's response makes of an ask.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    /// Resume the ask with this payload.
    Resume(Value),
    /// The client declined or cancelled: the ask is cancelled.
    Refused(String),
    /// The response is not an answer; the ask is asked again, naming why.
    Invalid(String),
}

/// Read `response` as the answer to `entry`.
pub(crate) fn answer(entry: &Entry, shape: &Shape, response: &Value) -> Answer {
    match shape {
        Shape::Relayed(needs) => {
            let fits = match needs {
                Needs::Elicitation => {
                    serde_json::from_value::<rmcp::model::ElicitResult>(response.clone()).is_ok()
                }
                Needs::Sampling => {
                    serde_json::from_value::<rmcp::model::CreateMessageResult>(response.clone())
                        .is_ok()
                }
                Needs::Roots => {
                    serde_json::from_value::<rmcp::model::ListRootsResult>(response.clone()).is_ok()
                }
            };
            if fits {
                Answer::Resume(response.clone())
            } else {
                Answer::Invalid(format!(
                    "the response to {} is not a {} result",
                    entry.id,
                    needs.name()
                ))
            }
        }
        Shape::Derived {
            format,
            options,
            schema,
            as_text,
        } => {
            let action = response.get("action").and_then(Value::as_str);
            match action {
                Some("accept") => {}
                Some(action @ ("decline" | "cancel")) => {
                    return Answer::Refused(format!(
                        "the client answered {action} to {}",
                        entry.id
                    ));
                }
                _ => {
                    return Answer::Invalid(format!(
                        "the response to {} is not an elicitation result (action accept, decline or cancel)",
                        entry.id
                    ));
                }
            }
            let content = response.get("content").cloned().unwrap_or(Value::Null);
            let value = match (format.as_str(), *as_text) {
                ("form", false) => Some(content),
                ("form", true) => match content.get("json").and_then(Value::as_str) {
                    Some(text)
                        if parkway::json_nesting(text.as_bytes()) > parkway::MAX_VALUE_DEPTH =>
                    {
                        return Answer::Invalid(format!(
                            "the answer to {} is nested deeper than {} levels",
                            entry.id,
                            parkway::MAX_VALUE_DEPTH
                        ));
                    }
                    Some(text) => match serde_json::from_str::<Value>(text) {
                        Ok(v) => Some(v),
                        Err(e) => {
                            return Answer::Invalid(format!(
                                "the answer to {} is not JSON: {e}",
                                entry.id
                            ));
                        }
                    },
                    None => None,
                },
                _ => content.get("answer").cloned(),
            };
            let Some(value) = value else {
                let field = if *as_text { "json" } else { "answer" };
                return Answer::Invalid(format!("the answer to {} has no {field}", entry.id));
            };
            match check_answer(format, options.as_deref(), schema.as_ref(), &value) {
                Ok(()) => Answer::Resume(value),
                Err(problems) => Answer::Invalid(format!(
                    "the answer to {} was refused: {}",
                    entry.id,
                    problems
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests;
