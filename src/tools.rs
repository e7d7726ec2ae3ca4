//! The generic tools: `list_parked`, `resume_parked` and `cancel_parked`, builtin targets
//! any run may call to inspect and resolve the parks on its own subject.
//!
//! They are the language-model-facing face of the door contract: a run calls one like
//! any other target (`ctx.call("resume_parked", …)`), and it acts for the **calling** run —
//! the caller is the resumer, the receiver of the resumed run's outcome, and the
//! canceller below which a whole-chain kill stops. Refusals fail the tool run with the
//! same messages a door gives.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::RunError;
use crate::run::Ctx;
use crate::run::port::Port;
use crate::target::Targets;

/// The names of the builtin tools.
pub const GENERIC_TOOLS: [&str; 3] = ["list_parked", "resume_parked", "cancel_parked"];

/// Each generic tool's name, description and JSON-schema parameters, in the shape an
/// orchestrator hands to a language model.
///
/// ```
/// let tools = parkway::generic_tool_descriptions();
/// assert_eq!(tools[1]["name"], "resume_parked");
/// assert_eq!(tools[1]["parameters"]["required"][0], "interaction_id");
/// ```
pub fn generic_tool_descriptions() -> Vec<Value> {
    vec![
        json!({
            "name": "list_parked",
            "description": "Return every parked interaction on this run's subject: asks \
                waiting for an answer (status asking), asks being resumed (running), and \
                waiting outcomes of resolved runs (finished or failed).",
            "parameters": {
                "type": "object",
                "properties": {},
                "additionalProperties": false
            }
        }),
        json!({
            "name": "resume_parked",
            "description": "With payload, resume the asking interaction with that payload \
                as its answer and return the resumed run's next outcome. Without payload, \
                take the named waiting outcome: return its result, or fail with its error \
                if it failed.",
            "parameters": {
                "type": "object",
                "properties": {
                    "interaction_id": {
                        "type": "string",
                        "description": "The id of a parked interaction, e.g. i-42."
                    },
                    "payload": {
                        "description": "The answer. Omit it to take a waiting outcome."
                    }
                },
                "required": ["interaction_id"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": "cancel_parked",
            "description": "Cancel each named parked interaction: the asking run and every \
                run linked above it (stopping below this run) are torn down for good; a \
                waiting outcome is removed.",
            "parameters": {
                "type": "object",
                "properties": {
                    "ids": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": "The ids of the interactions to cancel."
                    }
                },
                "required": ["ids"],
                "additionalProperties": false
            }
        }),
    ]
}

/// Check a tool's kwargs against its parameters: only the named keys, of the right type.
fn check_kwargs(tool: &str, kwargs: &Value) -> Result<(), RunError> {
    let allowed: &[&str] = match tool {
        "resume_parked" => &["interaction_id", "payload"],
        "cancel_parked" => &["ids"],
        _ => &[],
    };
    let extra: Vec<&str> = kwargs
        .as_object()
        .map(|m| {
            m.keys()
                .map(String::as_str)
                .filter(|k| !allowed.contains(k))
                .collect()
        })
        .unwrap_or_default();
    if extra.is_empty() {
        Ok(())
    } else {
        Err(RunError::fail(format!(
            "{tool} takes no parameter(s) {}",
            extra.join(", ")
        )))
    }
}

/// Register the three tools.
pub(crate) fn register(targets: &Targets) {
    targets.register("list_parked", &[], |ctx: Ctx, kwargs, _| async move {
        check_kwargs("list_parked", &kwargs)?;
        let port = Arc::clone(ctx.port());
        let subject: Arc<str> = Arc::from(ctx.subject());
        let entries = port
            .list(&subject)
            .await
            .map_err(|e| RunError::fail(e.to_string()))?;
        Ok(serde_json::to_value(entries)?)
    });
    targets.register("resume_parked", &[], |ctx: Ctx, kwargs, _| async move {
        check_kwargs("resume_parked", &kwargs)?;
        let Some(id) = kwargs.get("interaction_id").and_then(Value::as_str) else {
            return Err(RunError::fail(
                "resume_parked needs interaction_id, an interaction id string",
            ));
        };
        let (port, subject) = (Arc::clone(ctx.port()), Arc::<str>::from(ctx.subject()));
        let caller = ctx.parent().cloned();
        match kwargs.get("payload") {
            Some(payload) => {
                let resumed = resume(port, &subject, id, payload.clone(), caller).await?;
                Ok(serde_json::to_value(resumed)?)
            }
            None => port
                .take(&subject, id, caller)
                .await
                .map_err(|e| RunError::fail(e.to_string())),
        }
    });
    targets.register("cancel_parked", &[], |ctx: Ctx, kwargs, _| async move {
        check_kwargs("cancel_parked", &kwargs)?;
        let ids: Option<Vec<String>> = kwargs.get("ids").and_then(|v| {
            v.as_array()?
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect()
        });
        let Some(ids) = ids.filter(|ids| !ids.is_empty()) else {
            return Err(RunError::fail(
                "cancel_parked needs ids, a non-empty array of interaction id strings",
            ));
        };
        let (port, subject) = (Arc::clone(ctx.port()), Arc::<str>::from(ctx.subject()));
        port.cancel(&subject, ids.clone(), ctx.parent().cloned())
            .await
            .map_err(|e| RunError::fail(e.to_string()))?;
        Ok(json!({ "cancelled": ids }))
    });
}

async fn resume(
    port: Arc<dyn Port>,
    subject: &Arc<str>,
    id: &str,
    payload: Value,
    caller: Option<Arc<str>>,
) -> Result<crate::record::Resumed, RunError> {
    port.resume(subject, id, payload, caller)
        .await
        .map_err(|e| RunError::fail(e.to_string()))
}
