//! The door contract, table-driven: an expression, a parked set and an input document
//! give an action, or the exact error; a refused visit changes nothing.

mod common;

use std::time::Duration;

use parkway::{DoorSpec, Runtime, Start, Visit, VisitError, VisitOutcome};
use serde_json::{Value, json};

/// A runtime whose subject `s` holds `i-1` (asking, raised by `asker`) and `i-2` (a
/// finished waiting outcome), and whose door `d` is `door`.
async fn setup(door: DoorSpec) -> Result<Runtime, String> {
    let (rt, _clock) = common::runtime_with(|b| b.jq_deadline(Duration::from_millis(50))).await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.resume_detached("s", "i-2", json!("earlier"))
        .await
        .unwrap();
    rt.settle().await;
    rt.save_door(door).map_err(|e| e.to_string())?;
    Ok(rt)
}

/// What a visit did, in brief: cancels, then the action with the ids or kwargs.
fn summary(visit: &Visit) -> Value {
    let action = match &visit.outcome {
        VisitOutcome::Nothing => json!("nothing"),
        VisitOutcome::Resolved { results } => json!({ "resolved": results.iter().map(|r| {
            let v = serde_json::to_value(r).unwrap();
            json!(format!("{} {}", v["op"].as_str().unwrap(), v["id"].as_str().unwrap()))
        }).collect::<Vec<_>>() }),
        VisitOutcome::Started { record, .. } => {
            json!({ "started": record.as_ref().and_then(|r| r.result.clone()) })
        }
        other => json!(format!("{other:?}")),
    };
    json!({ "cancelled": visit.cancelled, "action": action })
}

fn route() -> DoorSpec {
    DoorSpec::route("d", "echo").start_expr("null")
}

struct Case {
    name: &'static str,
    door: DoorSpec,
    input: Value,
    /// `Ok(summary)` or `Err(a fragment of the error)`.
    expect: Result<Value, &'static str>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "seed cancel_expr cancels every parked interaction",
            door: route().cancel_expr("[$parked[].id]"),
            input: json!({}),
            expect: Ok(json!({"cancelled": ["i-1", "i-2"], "action": "nothing"})),
        },
        Case {
            name: "seed resume_expr answers the first pending confirm ask",
            door: route().resume_expr(r#"{id: $parked[0].id, payload: {answer: "yes"}}"#),
            input: json!({}),
            expect: Ok(json!({"cancelled": [], "action": {"resolved": ["resumed i-1"]}})),
        },
        Case {
            name: "seed start_expr passes the count of what is parked",
            door: DoorSpec::route("d", "echo")
                .start_expr("{payload: .msg, waiting: ($parked | length)}"),
            input: json!({"msg": "hi"}),
            expect: Ok(json!({"cancelled": [], "action": {"started":
                {"kwargs": {"payload": "hi", "waiting": 2}, "extras": {}}}})),
        },
        Case {
            name: "no start_expr starts the door's default kwargs",
            door: DoorSpec::route("d", "echo").kwargs(json!({"k": 1})),
            input: json!({}),
            expect: Ok(json!({"cancelled": [], "action": {"started":
                {"kwargs": {"k": 1}, "extras": {}}}})),
        },
        Case {
            name: "cancels run first, then the start",
            door: DoorSpec::route("d", "echo").cancel_expr(r#""i-2""#),
            input: json!({}),
            expect: Ok(json!({"cancelled": ["i-2"], "action": {"started":
                {"kwargs": {}, "extras": {}}}})),
        },
        Case {
            name: "a non-null resume_expr means no start",
            door: DoorSpec::route("d", "echo").resume_expr("[]"),
            input: json!({}),
            expect: Ok(json!({"cancelled": [], "action": {"resolved": []}})),
        },
        Case {
            name: "a list mixing a resume and a take is one action",
            door: route().resume_expr(r#"[{id: "i-1", payload: "yes"}, "i-2"]"#),
            input: json!({}),
            expect: Ok(json!({"cancelled": [],
                "action": {"resolved": ["resumed i-1", "taken i-2"]}})),
        },
        Case {
            name: "extras of declared keys ride the start",
            door: DoorSpec::route("d", "echo").extras_expr("{trace: .t}"),
            input: json!({"t": "abc"}),
            expect: Ok(json!({"cancelled": [], "action": {"started":
                {"kwargs": {}, "extras": {"trace": "abc"}}}})),
        },
        Case {
            name: "variables $subject $door $now are bound",
            door: DoorSpec::route("d", "echo").start_expr("{s: $subject, d: $door, n: $now}"),
            input: json!({}),
            expect: Ok(json!({"cancelled": [], "action": {"started":
                {"kwargs": {"s": "s", "d": "d", "n": "2026-01-01T00:00:00Z"}, "extras": {}}}})),
        },
        Case {
            name: "zero outputs",
            door: route().resume_expr("empty"),
            input: json!({}),
            expect: Err("resume_expr emitted no value; it must emit exactly one"),
        },
        Case {
            name: "two outputs",
            door: route().cancel_expr(r#""i-1", "i-2""#),
            input: json!({}),
            expect: Err(
                r#"cancel_expr emitted more than one value (the first: "i-1"); it must emit exactly one"#,
            ),
        },
        Case {
            name: "cancel_expr of the wrong shape",
            door: route().cancel_expr("42"),
            input: json!({}),
            expect: Err(
                "cancel_expr emitted 42: cancel_expr must yield null, an id string, or an array of id strings",
            ),
        },
        Case {
            name: "resume_expr of the wrong shape",
            door: route().resume_expr("true"),
            input: json!({}),
            expect: Err(
                "resume_expr emitted true: resume_expr must yield null, {id, payload}, a bare id string, or an array of these",
            ),
        },
        Case {
            name: "start_expr of the wrong shape",
            door: DoorSpec::route("d", "echo").start_expr(r#""go""#),
            input: json!({}),
            expect: Err(r#"start_expr emitted "go": start_expr must yield an object or null"#),
        },
        Case {
            name: "extras_expr of the wrong shape",
            door: DoorSpec::route("d", "echo").extras_expr("[1]"),
            input: json!({}),
            expect: Err("extras_expr emitted [1]: extras_expr must yield an object or null"),
        },
        Case {
            name: "a resume object with an extra key",
            door: route().resume_expr(r#"{id: "i-1", payload: 1, note: "x"}"#),
            input: json!({}),
            expect: Err(
                r#"resume_expr emitted {"id":"i-1","payload":1,"note":"x"}: a resume object has exactly the keys id and payload, not note"#,
            ),
        },
        Case {
            name: "a resume object without payload",
            door: route().resume_expr(r#"{id: "i-1"}"#),
            input: json!({}),
            expect: Err("a resume object needs a payload (a take is a bare id string)"),
        },
        Case {
            name: "an id in both cancel and resume",
            door: route()
                .cancel_expr(r#""i-1""#)
                .resume_expr(r#"{id: "i-1", payload: 1}"#),
            input: json!({}),
            expect: Err("interaction i-1 is named by both cancel_expr and resume_expr"),
        },
        Case {
            name: "an unknown id",
            door: route().resume_expr(r#"{id: "i-9", payload: 1}"#),
            input: json!({}),
            expect: Err("resume_expr: unknown interaction i-9 on subject s"),
        },
        Case {
            name: "an unknown id to cancel",
            door: route().cancel_expr(r#"["i-1", "i-9"]"#),
            input: json!({}),
            expect: Err("cancel_expr: unknown interaction i-9 on subject s"),
        },
        Case {
            name: "a take of an asking entry",
            door: route().resume_expr(r#""i-1""#),
            input: json!({}),
            expect: Err(
                "resume_expr: interaction i-1 is not a waiting outcome (finished or failed) (status: asking)",
            ),
        },
        Case {
            name: "a resume of a waiting outcome",
            door: route().resume_expr(r#"{id: "i-2", payload: 1}"#),
            input: json!({}),
            expect: Err("resume_expr: interaction i-2 is not asking (status: finished)"),
        },
        Case {
            name: "a payload with the reserved key",
            door: route().resume_expr(r#"{id: "i-1", payload: {interaction_expired: true}}"#),
            input: json!({}),
            expect: Err(
                "resume_expr: payload for interaction i-1 carries the reserved key interaction_expired",
            ),
        },
        Case {
            name: "undeclared extras refuse the visit before the run starts",
            door: DoorSpec::route("d", "echo").extras_expr("{secret: 1}"),
            input: json!({}),
            expect: Err("extras_expr: target echo does not declare extras key(s) secret"),
        },
        Case {
            name: "a jq runtime error",
            door: route().resume_expr(r#"error("no way")"#),
            input: json!({}),
            expect: Err("resume_expr failed:"),
        },
        Case {
            name: "every problem of a visit is reported",
            door: DoorSpec::route("d", "echo")
                .cancel_expr("1")
                .resume_expr("empty"),
            input: json!({}),
            expect: Err(
                "resume_expr emitted no value; it must emit exactly one; cancel_expr emitted 1",
            ),
        },
        Case {
            name: "a deadline hit",
            door: DoorSpec::route("d", "echo")
                .start_expr("[range(100000) as $a | range(100000) | $a] | {n: length}"),
            input: json!({}),
            expect: Err(
                "start_expr passed its evaluation deadline of 50 ms; the door is broken until saved again",
            ),
        },
    ]
}

/// Each case of the table gives its action or its exact error; an error changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contract_table() {
    let mut failures = Vec::new();
    for case in cases() {
        let rt = setup(case.door).await.expect(case.name);
        let before = rt.list("s").await.unwrap();
        let runs = rt.stats().await.runs;
        let got = rt.visit("d", "s", case.input).await;
        match (&case.expect, got) {
            (Ok(want), Ok(visit)) => {
                let got = summary(&visit);
                if &got != want {
                    failures.push(format!("{}: got {got}, want {want}", case.name));
                }
            }
            (Err(fragment), Err(e)) => {
                let text = e.to_string();
                if !text.contains(fragment) {
                    failures.push(format!("{}: error {text:?} lacks {fragment:?}", case.name));
                }
                if rt.list("s").await.unwrap() != before {
                    failures.push(format!(
                        "{}: a refused visit changed the parked set",
                        case.name
                    ));
                }
                if rt.stats().await.runs != runs {
                    failures.push(format!("{}: a refused visit started a run", case.name));
                }
            }
            (want, got) => failures.push(format!("{}: got {got:?}, want {want:?}", case.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Save refuses what cannot be evaluated safely, naming it; every problem together.
#[tokio::test]
async fn save_time_refusals() {
    let table: Vec<(DoorSpec, Vec<&str>)> = vec![
        (
            route().resume_expr("$foo"),
            vec!["undeclared variable $foo in resume_expr"],
        ),
        (route().resume_expr("$ENV"), vec!["$ENV"]),
        (route().start_expr("env"), vec!["env", "start_expr"]),
        (route().start_expr("input"), vec!["input"]),
        (
            route().cancel_expr("def f: f; f"),
            vec!["recursive def f", "cancel_expr"],
        ),
        (route().cancel_expr("repeat(1)"), vec!["repeat"]),
        (route().cancel_expr("[limit(.n; 1)]"), vec!["limit"]),
        (route().cancel_expr("[range(.n)]"), vec!["range"]),
        (route().cancel_expr("[range(1000001)]"), vec!["range"]),
        (
            route().cancel_expr("$a").resume_expr("$b | repeat(.)"),
            vec!["$a", "$b", "repeat"],
        ),
        (
            DoorSpec::route("Bad Name", "echo"),
            vec!["door name \"Bad Name\""],
        ),
        (
            DoorSpec::route("d", "nobody"),
            vec!["target nobody is not registered"],
        ),
        (
            DoorSpec::route("d", "echo").kwargs(json!([1])),
            vec!["kwargs must be a JSON object"],
        ),
        (
            DoorSpec::schedule("d", "echo").every("soon").subject("s"),
            vec!["schedule interval \"soon\""],
        ),
        (
            DoorSpec::hook("d", "echo")
                .topic("t")
                .subject("s")
                .condition("$x"),
            vec!["undeclared variable $x in condition"],
        ),
        // The builder names each field; one left out, or set on a kind that does not
        // take it, is refused rather than dropped.
        (
            DoorSpec::hook("d", "echo").subject("s"),
            vec!["hook topic must not be empty"],
        ),
        (
            DoorSpec::hook("d", "echo").topic("t"),
            vec!["hook needs exactly one of subject and subject_expr"],
        ),
        (
            DoorSpec::schedule("d", "echo").subject("s"),
            vec!["schedule interval \"\""],
        ),
        (
            DoorSpec::route("d", "echo")
                .topic("t")
                .every("5m")
                .subject("s"),
            vec![
                "a route door takes no topic",
                "a route door takes no interval",
                "a route door takes no subject",
            ],
        ),
        (
            DoorSpec::schedule("d", "echo")
                .every("5m")
                .subject("s")
                .condition("true"),
            vec!["a schedule door takes no condition"],
        ),
    ];
    let (rt, _clock) = common::runtime().await;
    for (spec, fragments) in table {
        let text = rt.save_door(spec.clone()).unwrap_err().to_string();
        for f in fragments {
            assert!(text.contains(f), "{spec:?}: {text:?} lacks {f:?}");
        }
        // Nothing was saved.
        assert!(matches!(
            rt.visit(&spec.name, "s", json!({})).await,
            Err(VisitError::UnknownDoor { .. })
        ));
    }
    // Words that name refused constructs are fine as strings and keys.
    rt.save_door(route().start_expr(r#"{while: "repeat", env: .env}"#))
        .unwrap();
}

/// A door that passed its deadline is broken until saved again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_door_is_refused_until_saved_again() {
    let heavy = DoorSpec::route("d", "echo")
        .start_expr("[range(100000) as $a | range(100000) | $a] | {n: length}");
    let rt = setup(heavy).await.unwrap();
    assert!(rt.visit("d", "s", json!({})).await.is_err());
    let e = rt.visit("d", "s", json!({})).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "door d is broken: an expression passed its evaluation deadline; save it again"
    );
    rt.save_door(DoorSpec::route("d", "echo")).unwrap();
    assert!(rt.visit("d", "s", json!({})).await.is_ok());
}

/// The input document is capped; above the cap the visit is refused loudly.
#[tokio::test]
async fn the_input_document_is_capped() {
    let (rt, _clock) = common::runtime_with(|b| b.max_input_bytes(1000)).await;
    rt.save_door(DoorSpec::route("d", "echo")).unwrap();
    let big = json!({"x": "y".repeat(1000)});
    let e = rt.visit("d", "s", big).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "input document of door d is 1008 bytes, more than the limit of 1000"
    );
    assert_eq!(rt.stats().await.runs, 0);
}
