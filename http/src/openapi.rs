//! The OpenAPI document of the HTTP face, served at `/openapi.json`.
//!
//! The answers' schemas are generated from the library's own types (their serde
//! attributes included) by schemars, so the document says what the server really
//! sends; the paths are listed here beside the router's table, and a test checks that
//! the two name the same routes. CI runs schemathesis against a live server with it.

use parkway::{DoorSpec, Entry, Page, Resumed, RunRecord, Visit};
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

/// The document's paths: `(method, path)` for every route the router serves under a
/// token, for the test that holds the two together.
pub const ROUTES: &[(&str, &str)] = &[
    ("get", "/v1/doors"),
    ("get", "/v1/doors/{name}"),
    ("put", "/v1/doors/{name}"),
    ("delete", "/v1/doors/{name}"),
    ("post", "/v1/schedules/{name}/fire"),
    ("post", "/v1/subjects/{subject}/cancel"),
    ("get", "/v1/events"),
    ("get", "/metrics"),
    ("post", "/v1/routes/{door}/visit"),
    ("post", "/v1/hooks/{topic}"),
    ("post", "/v1/targets/{target}/run"),
    ("post", "/v1/targets/{target}/submit"),
    ("get", "/v1/runs/{id}"),
    ("get", "/v1/subjects/{subject}/parked"),
    ("post", "/v1/subjects/{subject}/parked/{id}/resume"),
    ("post", "/v1/subjects/{subject}/parked/{id}/take"),
    ("get", "/v1/interactions"),
    ("get", "/v1/interactions/stream"),
    ("post", "/v1/interactions/{id}/answer"),
];

/// The schemas of the answers, under `#/components/schemas/`.
struct Schemas {
    generator: SchemaGenerator,
}

impl Schemas {
    fn new() -> Schemas {
        Schemas {
            generator: SchemaSettings::openapi3().for_serialize().into_generator(),
        }
    }

    /// A reference to `T`'s schema.
    fn of<T: JsonSchema>(&mut self) -> Value {
        self.generator.subschema_for::<T>().to_value()
    }

    fn take(mut self) -> Map<String, Value> {
        self.generator.take_definitions(true)
    }
}

/// A JSON answer with `schema`.
fn json_answer(description: &str, schema: Value) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": schema}}})
}

/// The error answers, each `{"error": {...}}`.
fn error(description: &str) -> Value {
    json_answer(description, json!({"$ref": "#/components/schemas/Error"}))
}

/// An operation: its id, summary, scope, parameters, body and answers (the common error
/// answers added).
fn operation(
    id: &str,
    summary: &str,
    scope: &str,
    parameters: Vec<Value>,
    body: Option<(Value, bool)>,
    mut answers: Map<String, Value>,
) -> Value {
    for (code, description) in [
        ("400", "the request is invalid; the error names what"),
        ("401", "no token, or an unknown one"),
        ("403", "the token lacks the scope"),
        ("408", "the request took too long"),
        ("413", "the body is too large"),
        ("414", "the URI is too long"),
        (
            "431",
            "the request line and headers are too large, or too many",
        ),
        (
            "500",
            "the data directory is damaged where the request read (`corrupt`, naming the keyspace)",
        ),
        ("503", "the runtime cannot take work (Retry-After)"),
    ] {
        answers.entry(code).or_insert_with(|| error(description));
    }
    let mut op = json!({
        "operationId": id,
        "summary": summary,
        "description": format!("Needs a token with the `{scope}` scope."),
        "security": [{"bearer": []}],
        "parameters": parameters,
        "responses": answers,
    });
    if let Some((body, required)) = body {
        op["requestBody"] =
            json!({"required": required, "content": {"application/json": {"schema": body}}});
    }
    op
}

/// An optional header of at most 255 bytes, not empty.
fn header_param(name: &str) -> Value {
    json!({"name": name, "in": "header", "required": false,
           "schema": {"type": "string", "minLength": 1, "maxLength": 255}})
}

/// The answer to an idempotency key in use or reused.
fn idempotency() -> Value {
    error("the idempotency key's first request is under way, or the key came with another request")
}

/// A path parameter.
fn path(name: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}})
}

/// A query parameter of `schema`.
fn query(name: &str, required: bool, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": required, "schema": schema})
}

/// Answers from `(code, answer)` pairs.
fn answers<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(c, a)| (c.to_owned(), a)).collect()
}

/// An SSE answer.
fn stream_answer() -> Value {
    json!({"description": "a stream of server-sent events; each frame's id is its event-log number",
           "content": {"text/event-stream": {"schema": {"type": "string"}}}})
}

/// The whole document.
pub fn document() -> Value {
    let mut s = Schemas::new();
    let record = s.of::<RunRecord>();
    let visit = s.of::<Visit>();
    let entry_list = json!({"type": "array", "items": s.of::<Entry>()});
    let resumed = s.of::<Resumed>();
    let page = s.of::<Page>();
    let door = s.of::<DoorSpec>();
    let any = json!({});
    // A door's body as written: the kind's own fields are checked by the server, and
    // every expression is compiled there (a schema cannot say which text is valid jq).
    let expr = json!({"type": "string"});
    let door_body = json!({
        "type": "object",
        "required": ["kind", "target"],
        "additionalProperties": false,
        "properties": {
            "name": {"type": "string"},
            "kind": {"type": "string", "enum": ["route", "hook", "schedule"]},
            "target": {"type": "string"},
            "kwargs": {"type": "object"},
            "cancel_expr": expr, "resume_expr": expr, "start_expr": expr, "extras_expr": expr,
            "topic": {"type": "string"}, "condition": expr, "subject": {"type": "string"},
            "subject_expr": expr, "interval": {"type": "string"},
        },
    });
    let tool_call = json!({
        "type": "object",
        "required": ["subject"],
        "additionalProperties": false,
        "properties": {
            "subject": {"type": "string", "minLength": 1},
            "kwargs": {"type": "object"},
            "extras": {"type": "object"},
            "identity": {"type": "string"},
        },
    });
    let not_found = || error("unknown");
    let conflict = || error("already resolved, or in another state");
    let id = path("id");
    let subject = path("subject");
    let mut paths = Map::new();
    let mut add = |p: &str, method: &str, op: Value| {
        let item = paths.entry(p.to_owned()).or_insert_with(|| json!({}));
        item[method] = op;
    };
    add(
        "/v1/doors",
        "get",
        operation(
            "listDoors",
            "Every door as saved, by name.",
            "admin",
            vec![],
            None,
            answers([(
                "200",
                json_answer(
                    "the doors",
                    json!({"type": "object", "required": ["doors"],
            "properties": {"doors": {"type": "array", "items": door.clone()}}}),
                ),
            )]),
        ),
    );
    add(
        "/v1/doors/{name}",
        "get",
        operation(
            "readDoor",
            "A door as saved.",
            "admin",
            vec![path("name")],
            None,
            answers([
                ("200", json_answer("the door", door.clone())),
                ("404", not_found()),
            ]),
        ),
    );
    add(
        "/v1/doors/{name}",
        "put",
        operation(
            "saveDoor",
            "Save or replace a door; every problem is listed.",
            "admin",
            vec![path("name")],
            Some((door_body, true)),
            answers([
                ("200", json_answer("replaced", door.clone())),
                ("201", json_answer("saved", door.clone())),
            ]),
        ),
    );
    add(
        "/v1/doors/{name}",
        "delete",
        operation(
            "deleteDoor",
            "Delete a door.",
            "admin",
            vec![path("name")],
            None,
            answers([
                ("204", json!({"description": "deleted"})),
                ("404", not_found()),
            ]),
        ),
    );
    add(
        "/v1/schedules/{name}/fire",
        "post",
        operation(
            "fireSchedule",
            "Fire a schedule now.",
            "admin",
            vec![path("name")],
            None,
            answers([
                ("202", json_answer("what its visit did", visit.clone())),
                ("404", not_found()),
                ("409", error("the door is broken")),
            ]),
        ),
    );
    add(
        "/v1/subjects/{subject}/cancel",
        "post",
        operation(
            "cancel",
            "Cancel parked entries: all or none.",
            "admin",
            vec![subject.clone()],
            Some((
                json!({"type": "object", "required": ["ids"], "additionalProperties": false,
            "properties": {"ids": {"type": "array", "minItems": 1, "uniqueItems": true,
                "items": {"type": "string", "minLength": 1}}}}),
                true,
            )),
            answers([
                (
                    "200",
                    json_answer(
                        "cancelled",
                        json!({"type": "object", "required": ["cancelled"],
            "properties": {"cancelled": {"type": "array", "items": {"type": "string"}}}}),
                    ),
                ),
                ("404", not_found()),
                ("409", conflict()),
            ]),
        ),
    );
    add(
        "/v1/events",
        "get",
        operation(
            "events",
            "Platform events as SSE, resumable with Last-Event-ID.",
            "admin",
            vec![query(
                "last_event_id",
                false,
                json!({"type": "integer", "minimum": 0}),
            )],
            None,
            answers([("200", stream_answer())]),
        ),
    );
    add(
        "/v1/routes/{door}/visit",
        "post",
        operation(
            "visitRoute",
            "Visit a door on a subject; the body is its input document. A park answers at once.",
            "visit",
            vec![
                path("door"),
                query("subject", true, json!({"type": "string", "minLength": 1})),
            ],
            Some((any.clone(), false)),
            answers([
                ("200", json_answer("what the visit did", visit.clone())),
                ("404", not_found()),
                ("409", error("the door is broken")),
            ]),
        ),
    );
    add(
        "/v1/hooks/{topic}",
        "post",
        operation(
            "fireHook",
            "Fire every hook on a topic; the body is the input.",
            "visit",
            vec![
                path("topic"),
                header_param("Webhook-Id"),
                header_param("X-Delivery-Id"),
            ],
            Some((any.clone(), false)),
            answers([
                (
                    "202",
                    json_answer(
                        "what each hook did",
                        json!({"type": "object", "required": ["status", "hooks"],
                        "properties": {"status": {"type": "string", "enum": ["fired"]},
                            "hooks": {"type": "array", "items": {"type": "object"}}}}),
                    ),
                ),
                (
                    "200",
                    json_answer(
                        "the delivery was fired before: nothing fired now",
                        json!({"type": "object", "required": ["status", "delivery", "first_seen_at"],
                        "properties": {"status": {"type": "string", "enum": ["already_seen"]},
                            "delivery": {"type": "string"}, "first_seen_at": {"type": "string"}}}),
                    ),
                ),
                (
                    "409",
                    error(
                        "the same delivery is being fired now, or its id came with another input",
                    ),
                ),
            ]),
        ),
    );
    add(
        "/v1/targets/{target}/run",
        "post",
        operation(
            "runTool",
            "Run a target; its record once its first activation ends (parked or suspended at once if it asks).",
            "visit",
            vec![path("target"), header_param("Idempotency-Key")],
            Some((tool_call.clone(), true)),
            answers([
                ("200", json_answer("the run's record", record.clone())),
                ("404", not_found()),
                ("409", idempotency()),
            ]),
        ),
    );
    add(
        "/v1/targets/{target}/submit",
        "post",
        operation(
            "submit",
            "Start a target in the background.",
            "visit",
            vec![path("target"), header_param("Idempotency-Key")],
            Some((tool_call, true)),
            answers([
                (
                    "202",
                    json_answer(
                        "its run id; Location names its record",
                        json!({"type": "object",
            "required": ["run_id"], "properties": {"run_id": {"type": "string"}}}),
                    ),
                ),
                ("404", not_found()),
                ("409", idempotency()),
            ]),
        ),
    );
    add(
        "/v1/runs/{id}",
        "get",
        operation(
            "readRun",
            "A run's record; with wait, answered once it is not running or when the wait ends.",
            "visit",
            vec![
                id.clone(),
                query(
                    "wait",
                    false,
                    json!({"type": "string", "pattern": "^[0-9]{1,6}(ms|s|m)$",
            "description": "a duration such as 30s (any humantime duration is taken; longer waits are cut to the server's bound)"}),
                ),
            ],
            None,
            answers([
                ("200", json_answer("the record", record)),
                ("404", not_found()),
            ]),
        ),
    );
    add(
        "/v1/subjects/{subject}/parked",
        "get",
        operation(
            "listParked",
            "A subject's parked set, oldest first.",
            "visit",
            vec![subject.clone()],
            None,
            answers([("200", json_answer("the entries", entry_list))]),
        ),
    );
    add(
        "/v1/subjects/{subject}/parked/{id}/resume",
        "post",
        operation(
            "resume",
            "Resume a parked ask; the body is its payload. With detached=true nobody \
             receives the outcome: it waits on the subject.",
            "visit",
            vec![
                subject.clone(),
                id.clone(),
                query("detached", false, json!({"type": "boolean"})),
            ],
            Some((any.clone(), false)),
            answers([
                (
                    "200",
                    json_answer("the run's next record, or the buffered count", resumed),
                ),
                (
                    "202",
                    json_answer(
                        "resumed with no receiver: the outcome will wait on the subject",
                        json!({"type": "object", "required": ["status", "receiver"],
                               "properties": {"status": {"const": "resumed"},
                                              "receiver": {"const": "none"}}}),
                    ),
                ),
                ("404", not_found()),
                ("409", conflict()),
            ]),
        ),
    );
    add(
        "/v1/subjects/{subject}/parked/{id}/take",
        "post",
        operation(
            "take",
            "Take a waiting outcome; with wait, an interaction still asking or running is waited for, then answered as a take answers it then.",
            "visit",
            vec![
                subject,
                id.clone(),
                query(
                    "wait",
                    false,
                    json!({"type": "string", "pattern": "^[0-9]{1,6}(ms|s|m)$",
            "description": "a duration such as 30s (any humantime duration is taken; longer waits are cut to the server's bound)"}),
                ),
            ],
            None,
            answers([
                (
                    "200",
                    json_answer(
                        "the outcome",
                        json!({"type": "object", "required": ["status"],
            "properties": {"status": {"type": "string", "enum": ["finished", "failed"]}, "result": {}, "error": {"type": "string"}}}),
                    ),
                ),
                ("404", not_found()),
                ("409", conflict()),
            ]),
        ),
    );
    add(
        "/v1/interactions",
        "get",
        operation(
            "inbox",
            "Pending user asks, oldest first.",
            "answer",
            vec![
                query("page", false, json!({"type": "integer", "minimum": 1})),
                query(
                    "page_size",
                    false,
                    json!({"type": "integer", "minimum": 1, "description": "capped at 200"}),
                ),
            ],
            None,
            answers([("200", json_answer("one page", page))]),
        ),
    );
    add(
        "/v1/interactions/stream",
        "get",
        operation(
            "inboxStream",
            "The inbox's add, answered and removed frames as SSE, resumable with Last-Event-ID.",
            "answer",
            vec![query(
                "last_event_id",
                false,
                json!({"type": "integer", "minimum": 0}),
            )],
            None,
            answers([("200", stream_answer())]),
        ),
    );
    add(
        "/v1/interactions/{id}/answer",
        "post",
        operation(
            "answer",
            "Answer a user ask in its format.",
            "answer",
            vec![id],
            Some((
                json!({"type": "object", "required": ["answer"], "additionalProperties": false, "properties": {"answer": {}}}),
                true,
            )),
            answers([
                (
                    "200",
                    json_answer(
                        "answered",
                        json!({"type": "object", "required": ["id", "status"],
            "properties": {"id": {"type": "string"}, "status": {"type": "string"}}}),
                    ),
                ),
                ("404", error("unknown, or a caller ask")),
                ("409", error("already answered")),
            ]),
        ),
    );
    add(
        "/metrics",
        "get",
        operation(
            "metrics",
            "Metrics in the Prometheus text format.",
            "admin",
            vec![],
            None,
            answers([(
                "200",
                json!({"description": "the metrics",
                       "content": {"text/plain": {"schema": {"type": "string"}}}}),
            )]),
        ),
    );
    let open = |id: &str, summary: &str| {
        json!({"get": {"operationId": id, "summary": summary, "security": [],
            "responses": {"200": json_answer("ok", json!({"type": "object"})), "503": error("stopped")}}})
    };
    paths.insert(
        "/healthz".to_owned(),
        open("healthz", "The process answers."),
    );
    paths.insert(
        "/readyz".to_owned(),
        open(
            "readyz",
            "The runtime takes work: 503 `stopped` once it is shut down, 503 `corrupt` once it met damage in its data directory.",
        ),
    );
    let mut schemas = s.take();
    schemas.insert(
        "Error".to_owned(),
        json!({"type": "object", "required": ["error"], "properties": {"error": {
            "type": "object", "required": ["kind", "message"],
            "properties": {"kind": {"type": "string"}, "message": {"type": "string"}}}}}),
    );
    json!({
        "openapi": "3.0.3",
        "info": {"title": "parkway", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Every door of a parkway runtime over HTTP (docs/http.md)."},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    })
}
