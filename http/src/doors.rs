//! Doors as saved: save (every problem at once), list, read, delete; and a schedule's
//! fire now.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use parkway::{DoorSpec, Visit};
use serde_json::{Value, json};

use crate::{ApiError, Face, JsonBody};

/// `GET /v1/doors`: every door as saved, in name order.
pub(crate) async fn list(State(face): State<Arc<Face>>) -> Json<Value> {
    Json(json!({ "doors": face.runtime.doors() }))
}

/// `GET /v1/doors/{name}`.
pub(crate) async fn read(
    State(face): State<Arc<Face>>,
    Path(name): Path<String>,
) -> Result<Json<DoorSpec>, ApiError> {
    face.runtime
        .door(&name)
        .map(Json)
        .ok_or_else(|| ApiError::not_found("unknown_door", format!("unknown door {name}")))
}

/// `PUT /v1/doors/{name}`: the body is the door's spec; its `name`, if given, must be the
/// path's. 201 when new, 200 when replaced; 400 lists every problem.
pub(crate) async fn save(
    State(face): State<Arc<Face>>,
    Path(name): Path<String>,
    body: JsonBody,
) -> Result<(StatusCode, Json<DoorSpec>), ApiError> {
    let mut body = body.0;
    let Value::Object(fields) = &mut body else {
        return Err(ApiError::field(
            "body",
            "a door's spec must be a JSON object",
        ));
    };
    match fields.get("name") {
        None => {
            fields.insert("name".to_owned(), json!(name));
        }
        Some(Value::String(given)) if *given == name => {}
        Some(_) => {
            return Err(ApiError::field(
                "name",
                format!("the body names another door than the path's {name}"),
            ));
        }
    }
    let spec: DoorSpec = JsonBody(body).into()?;
    let existed = face.runtime.door(&name).is_some();
    let runtime = face.runtime.clone();
    let saved = spec.clone();
    // Saving waits until the door is durable: off the async threads.
    tokio::task::spawn_blocking(move || runtime.save_door(saved))
        .await
        .map_err(|_| ApiError::stopped())??;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(spec)))
}

/// `DELETE /v1/doors/{name}`: 204, or 404 if there was none.
pub(crate) async fn delete(
    State(face): State<Arc<Face>>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let runtime = face.runtime.clone();
    let gone = {
        let name = name.clone();
        tokio::task::spawn_blocking(move || runtime.remove_door(&name))
            .await
            .map_err(|_| ApiError::stopped())?
    };
    if gone {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(
            "unknown_door",
            format!("unknown door {name}"),
        ))
    }
}

/// `POST /v1/schedules/{name}/fire`: fire a schedule now; 202 with what its visit did.
pub(crate) async fn fire_schedule(
    State(face): State<Arc<Face>>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<Visit>), ApiError> {
    let visit = face.runtime.fire_schedule(&name).await;
    face.metrics.count(&name, &visit);
    Ok((StatusCode::ACCEPTED, Json(visit?)))
}
