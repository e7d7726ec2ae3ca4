//! The doors a caller visits: a route (the outcome inline), a hook fire, and the
//! run-tool and submit tool doors.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use parkway::{DeliveryError, HookFire, RunRecord, Start, StoreFault, Visit, VisitError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{ApiError, Face, JsonBody, forward};

/// The `subject` query parameter, required (an empty one is the runtime's to refuse,
/// as `empty_subject`, like every other door's).
fn subject_of(query: &HashMap<String, String>) -> Result<String, ApiError> {
    match query.get("subject") {
        Some(s) => Ok(s.clone()),
        None => Err(ApiError::field(
            "subject",
            "the subject is missing: add ?subject=<name>",
        )),
    }
}

/// `POST /v1/routes/{door}/visit?subject=`: the body is the door's input document; 200
/// with what the visit did (a park answers at once with the parked record).
pub(crate) async fn route(
    State(face): State<Arc<Face>>,
    Path(door): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    body: JsonBody,
) -> Result<Json<Visit>, ApiError> {
    let subject = subject_of(&query)?;
    let visit = face.runtime.visit(&door, &subject, body.0).await;
    face.metrics.count(&door, &visit);
    Ok(Json(visit?))
}

/// One hook's fire as answered.
fn fire_json(fire: HookFire) -> Value {
    match fire.visit {
        None => json!({"door": fire.door, "fired": false}),
        Some(Ok(visit)) => {
            json!({"door": fire.door, "subject": fire.subject, "fired": true, "visit": visit})
        }
        Some(Err(error)) => json!({
            "door": fire.door,
            "subject": fire.subject,
            "fired": true,
            "error": {"kind": error.kind(), "message": error.to_string()},
        }),
    }
}

/// The headers a delivery id may come in, in order: the Standard Webhooks one, then a
/// plain one.
const DELIVERY_HEADERS: [&str; 2] = ["webhook-id", "x-delivery-id"];

/// A header's value as text, or a 400 naming it.
fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, ApiError> {
    headers
        .get(name)
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::field(name, format!("the {name} header is not text")))
        })
        .transpose()
}

/// `POST /v1/hooks/{topic}`: fire every hook on the topic with the body as input; 202
/// with what each hook did. With a delivery id (`Webhook-Id` or `X-Delivery-Id`), a
/// delivery fired before within the retention horizon fires nothing and answers 200
/// `{"status": "already_seen"}`.
pub(crate) async fn hook(
    State(face): State<Arc<Face>>,
    Path(topic): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    // Every delivery header given must be a valid id, and all must agree.
    let mut delivery: Option<(&str, &str)> = None;
    for name in DELIVERY_HEADERS {
        let Some(id) = header_text(&headers, name)? else {
            continue;
        };
        DeliveryError::check_id(id)
            .map_err(|e| ApiError::field(name, format!("the {name} header: {e}")))?;
        match delivery {
            Some((first, other)) if other != id => {
                return Err(ApiError::field(
                    name,
                    format!("the {name} header differs from the {first} header"),
                ));
            }
            Some(_) => {}
            None => delivery = Some((name, id)),
        }
    }
    // On a database nodes share, a visit of a subject another node serves is sent on.
    let sent_on = (face.runtime.shares_store() && !headers.contains_key(&forward::FORWARDED))
        .then(|| body.0.clone());
    let answer = |fires| answered(&face, &headers, sent_on.as_ref(), fires);
    let fires = match delivery {
        None => answer(face.runtime.fire(&topic, body.0).await).await,
        // The visits sent on are made before the delivery id is kept.
        Some((name, id)) => match face
            .runtime
            .fire_delivery_then(&topic, id, body.0, answer)
            .await
        {
            Ok(fires) => fires,
            Err(DeliveryError::AlreadySeen { at }) => {
                return Ok((
                    StatusCode::OK,
                    Json(json!({"status": "already_seen", "delivery": id, "first_seen_at": at})),
                ));
            }
            Err(e @ DeliveryError::InvalidId { .. }) => {
                return Err(ApiError::field(name, e.to_string()));
            }
            Err(e) => return Err(ApiError::new(StatusCode::CONFLICT, e.kind(), e.to_string())),
        },
    };
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "status": "fired", "hooks": fires })),
    ))
}

/// The hooks' fires as answered, counted; with the fire's input (`sent_on`), each visit
/// refused `not_owner` is sent on to the node that serves its subject, and answered as
/// that node answered.
async fn answered(
    face: &Face,
    headers: &HeaderMap,
    sent_on: Option<&Value>,
    fires: Vec<HookFire>,
) -> Vec<Value> {
    let mut answered = Vec::with_capacity(fires.len());
    for fire in fires {
        match &fire.visit {
            None => face.metrics.visit(&fire.door, true, "not_fired"),
            Some(visit) => face.metrics.count(&fire.door, visit),
        }
        let owner = match (&fire.visit, &fire.subject, sent_on) {
            (
                Some(Err(VisitError::Store(StoreFault::NotOwner { slot, .. }))),
                Some(subject),
                Some(input),
            ) => forward::hook_visit(face, headers, *slot, &fire.door, subject, input).await,
            _ => None,
        };
        answered.push(match owner {
            None => fire_json(fire),
            Some(Ok(visit)) => {
                json!({"door": fire.door, "subject": fire.subject, "fired": true, "visit": visit})
            }
            Some(Err(error)) => {
                json!({"door": fire.door, "subject": fire.subject, "fired": true, "error": error})
            }
        });
    }
    answered
}

/// A tool door's body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCall {
    subject: String,
    #[serde(default)]
    kwargs: Option<Value>,
    #[serde(default)]
    extras: Option<Value>,
    #[serde(default)]
    identity: Option<String>,
}

/// The start a tool door's body asks for, under the request's `Idempotency-Key`.
fn start_of(target: &str, headers: &HeaderMap, body: JsonBody) -> Result<Start, ApiError> {
    let key = header_text(headers, "idempotency-key")?.map(str::to_owned);
    let call: ToolCall = body.into()?;
    let mut start = Start::new(call.subject, target);
    if let Some(kwargs) = call.kwargs {
        start = start.kwargs(kwargs);
    }
    if let Some(extras) = call.extras {
        start = start.extras(extras);
    }
    if let Some(identity) = call.identity {
        start = start.identity(identity);
    }
    if let Some(key) = key {
        start = start.idempotency_key(key);
    }
    Ok(start)
}

/// `POST /v1/targets/{target}/run`: run the target; 200 with its record once its first
/// activation ends (`parked` or `suspended` at once if it asks: nothing waits for a
/// person).
pub(crate) async fn run_tool(
    State(face): State<Arc<Face>>,
    Path(target): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> Result<Json<RunRecord>, ApiError> {
    let start = start_of(&target, &headers, body)?;
    Ok(Json(face.runtime.run_tool(start).await?))
}

/// `POST /v1/targets/{target}/submit`: start the target in the background; 202 with its
/// run id and `Location: /v1/runs/{id}`.
pub(crate) async fn submit(
    State(face): State<Arc<Face>>,
    Path(target): Path<String>,
    headers: HeaderMap,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let start = start_of(&target, &headers, body)?;
    let id = face.runtime.submit(start).await?;
    let mut answer = HeaderMap::new();
    if let Ok(location) = format!("/v1/runs/{id}").parse() {
        answer.insert(header::LOCATION, location);
    }
    Ok((StatusCode::ACCEPTED, answer, Json(json!({ "run_id": id }))).into_response())
}
