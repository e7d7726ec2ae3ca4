//! Deep values: every value entering the runtime is checked against `MAX_VALUE_DEPTH`
//! and refused with its operation's own error, changing nothing.
//!
//! The bug these protect against: kwargs or a resume payload 10,000 levels deep (20 KB)
//! or a visit input 30,000 levels deep (60 KB) aborted the whole process with a stack
//! overflow. These tests run on the default test thread (a 2 MiB stack, Tokio's
//! current-thread runtime), so a regression aborts the test binary rather than passing.

mod common;

#[cfg(feature = "forms")]
use parkway::MAX_SCHEMA_DEPTH;
use parkway::{
    Ask, AskError, DoorSpec, IdProblem, MAX_VALUE_DEPTH, Mode, ResumeError, RunStatus, Runtime,
    Start, StartError, VisitError, VisitProblem,
};
use serde_json::{Value, json};

/// The depths of the issue: 10,000 levels (20 KB) and 30,000 (60 KB).
const DEPTHS: [usize; 2] = [10_000, 30_000];

/// `levels` arrays around `0`, built without recursion.
fn nested(levels: usize) -> Value {
    let mut value = json!(0);
    for _ in 0..levels {
        value = Value::Array(vec![value]);
    }
    value
}

/// `{key: value}`, built without `json!`, which would copy `value` recursively.
fn object(key: &str, value: Value) -> Value {
    let mut map = serde_json::Map::new();
    map.insert(key.to_owned(), value);
    Value::Object(map)
}

/// A caller-parked run on `subject`, and the parked set it leaves.
async fn parked(rt: &Runtime, subject: &str) -> (String, Vec<parkway::Entry>) {
    let record = rt.run(Start::new(subject, "asker")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    let id = record.asks.expect("asks")[0].id.clone();
    (id, rt.list(subject).await.unwrap())
}

/// Runs and entries: nothing may change across a refusal.
async fn footprint(rt: &Runtime, subject: &str) -> (usize, usize, Vec<String>) {
    rt.settle().await;
    let stats = rt.stats().await;
    let listed = rt.list(subject).await.unwrap();
    (stats.runs, stats.caller_open, common::ids(&listed))
}

/// A value at the limit is accepted, and one level more is refused: kwargs at the
/// limit start, and `echo`'s result, one level deeper than its kwargs, fails the run.
#[tokio::test]
async fn the_limit_itself_passes_and_one_level_more_is_refused() {
    let (rt, _clock) = common::runtime().await;
    // `{"v": [[…]]}`: the object is one level, the arrays the rest.
    let at_limit = || object("v", nested(MAX_VALUE_DEPTH - 1));
    let below = || object("v", nested(MAX_VALUE_DEPTH - 2));
    let record = rt
        .run(Start::new("s", "echo").kwargs(below()))
        .await
        .unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(record.result.expect("a result")["kwargs"], below());

    let record = rt
        .run(Start::new("s", "echo").kwargs(at_limit()))
        .await
        .unwrap();
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(
        record.error.as_deref(),
        Some("target echo returned a value nested deeper than 128 levels")
    );

    let refused = rt
        .run(Start::new("s", "echo").kwargs(object("v", nested(MAX_VALUE_DEPTH))))
        .await;
    assert_eq!(
        refused,
        Err(StartError::TooDeep {
            what: "kwargs",
            limit: MAX_VALUE_DEPTH
        })
    );
}

/// Kwargs and extras through every door that starts a run.
#[tokio::test]
async fn deep_kwargs_and_extras_are_refused_by_every_start() {
    let (rt, _clock) = common::runtime().await;
    let before = footprint(&rt, "s").await;
    for depth in DEPTHS {
        let kwargs = || Start::new("s", "echo").kwargs(object("v", nested(depth)));
        let extras = || Start::new("s", "echo").extras(object("trace", nested(depth)));
        let too_deep = |what| StartError::TooDeep {
            what,
            limit: MAX_VALUE_DEPTH,
        };
        assert_eq!(rt.run(kwargs()).await, Err(too_deep("kwargs")));
        assert_eq!(rt.run_tool(kwargs()).await, Err(too_deep("kwargs")));
        assert_eq!(rt.submit(kwargs()).await, Err(too_deep("kwargs")));
        assert_eq!(rt.spawn(kwargs()).await, Err(too_deep("kwargs")));
        assert_eq!(rt.run(extras()).await, Err(too_deep("extras")));
        assert_eq!(rt.spawn(extras()).await, Err(too_deep("extras")));
        assert_eq!(
            rt.run(kwargs()).await.unwrap_err().to_string(),
            "kwargs are nested deeper than 128 levels"
        );
    }
    assert_eq!(footprint(&rt, "s").await, before, "nothing started");
}

/// A run's `ctx.call` with deep kwargs is refused; the calling run sees the error.
#[tokio::test]
async fn a_deep_call_is_refused_to_the_calling_run() {
    let (rt, _clock) = common::runtime().await;
    rt.register("caller", &[], |ctx, kwargs, _| async move {
        let depth = kwargs["depth"].as_u64().unwrap_or(0) as usize;
        match ctx.call("echo", object("v", nested(depth))).await {
            Ok(record) => Ok(json!({ "child": record.status })),
            Err(e) => Ok(json!({ "refused": e.to_string() })),
        }
    });
    for depth in DEPTHS {
        let record = rt
            .run(Start::new("s", "caller").kwargs(json!({ "depth": depth })))
            .await
            .unwrap();
        assert_eq!(
            record.result,
            Some(json!({"refused": "kwargs are nested deeper than 128 levels"}))
        );
    }
    rt.settle().await;
    assert_eq!(rt.stats().await.runs, 0);
}

/// Resume payloads through the API, detached, and from a run: refused, the entry still
/// asking.
#[tokio::test]
async fn deep_resume_payloads_are_refused_and_the_ask_stays_open() {
    let (rt, _clock) = common::runtime().await;
    let (id, listed) = parked(&rt, "s").await;
    rt.register("resumer", &[], |ctx, kwargs, _| async move {
        let id = kwargs["id"].as_str().unwrap_or_default().to_owned();
        let depth = kwargs["depth"].as_u64().unwrap_or(0) as usize;
        match ctx.resume_parked(&id, nested(depth)).await {
            Ok(_) => Ok(json!("resumed")),
            Err(e) => Ok(json!(e.to_string())),
        }
    });
    let before = footprint(&rt, "s").await;
    let too_deep = ResumeError::Refused(IdProblem::TooDeep {
        id: id.clone(),
        limit: MAX_VALUE_DEPTH,
    });
    for depth in DEPTHS {
        assert_eq!(
            rt.resume("s", &id, nested(depth)).await,
            Err(too_deep.clone())
        );
        assert_eq!(
            rt.resume_detached("s", &id, nested(depth)).await,
            Err(too_deep.clone())
        );
        let record = rt
            .run(Start::new("r", "resumer").kwargs(json!({ "id": id, "depth": depth })))
            .await
            .unwrap();
        // The resumer lives on another subject: the id is refused there for depth
        // before anything looks it up.
        assert_eq!(
            record.result,
            Some(json!(format!(
                "payload for interaction {id} is nested deeper than 128 levels"
            )))
        );
    }
    assert_eq!(footprint(&rt, "s").await, before);
    assert_eq!(
        rt.list("s").await.unwrap(),
        listed,
        "the entry is unchanged"
    );
}

/// A user ask's answer through the answer door: refused as invalid, still pending.
#[cfg(feature = "forms")]
#[tokio::test]
async fn a_deep_answer_is_refused_and_the_user_ask_stays_pending() {
    let (rt, _clock) = common::runtime().await;
    rt.register("user-asker", &[], |ctx, _, _| async move {
        let answer = ctx
            .ask(
                Ask::user("data?")
                    .answer_format("form")
                    .schema(json!({"type": "array"}))
                    .expiry_at("10m"),
            )
            .await?;
        Ok(answer)
    });
    let record = rt.run(Start::new("u", "user-asker")).await.unwrap();
    assert_eq!(record.status, RunStatus::Suspended);
    let page = rt.inbox(1, None).unwrap();
    assert_eq!(page.total, 1);
    let id = page.items[0].id.clone();
    for depth in DEPTHS {
        let refused = rt.answer(&id, nested(depth)).await.unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "answer to interaction {id} is invalid: the answer is nested deeper than 128 levels"
            )
        );
    }
    assert_eq!(
        rt.inbox(1, None).unwrap().items,
        page.items,
        "still pending"
    );
}

/// An ask's payload or a form's schema past the limit: the ask is invalid, nothing is
/// stored and no cap is taken.
#[tokio::test]
async fn deep_ask_payloads_and_schemas_are_refused() {
    let (rt, _clock) = common::runtime().await;
    rt.register("deep-asker", &[], |ctx, kwargs, _| async move {
        let depth = kwargs["depth"].as_u64().unwrap_or(0) as usize;
        let ask = match kwargs["what"].as_str() {
            Some("payload") => Ask::caller_payload(nested(depth)).expiry_at("10m"),
            _ => Ask::user("data?")
                .answer_format("form")
                .schema(object("items", nested(depth)))
                .mode(Mode::Async)
                .expiry_at("10m"),
        };
        match ctx.ask(ask).await {
            Err(AskError::Invalid(problems)) => Ok(json!(problems.to_string())),
            other => Ok(json!(format!("{other:?}"))),
        }
    });
    let before = footprint(&rt, "s").await;
    for depth in DEPTHS {
        for what in ["payload", "schema"] {
            let record = rt
                .run(Start::new("s", "deep-asker").kwargs(json!({ "what": what, "depth": depth })))
                .await
                .unwrap();
            let limit = if what == "schema" { 32 } else { 128 };
            assert_eq!(
                record.result,
                Some(json!(format!(
                    "{what} is nested deeper than {limit} levels"
                )))
            );
        }
    }
    assert_eq!(footprint(&rt, "s").await, before);
    let stats = rt.stats().await;
    assert_eq!((stats.caller_open, stats.user_open), (0, 0));
}

/// Visit and hook-fire inputs: refused before any expression reads them.
#[tokio::test]
async fn deep_visit_and_fire_inputs_are_refused() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(DoorSpec::route("go", "asker")).unwrap();
    rt.save_door(
        DoorSpec::hook("on-push", "asker")
            .topic("push")
            .subject("s"),
    )
    .unwrap();
    let (_, listed) = parked(&rt, "s").await;
    let before = footprint(&rt, "s").await;
    for depth in DEPTHS {
        let refused = rt.visit("go", "s", nested(depth)).await.unwrap_err();
        assert!(
            matches!(&refused, VisitError::InputTooDeep { door, limit } if door == "go" && *limit == MAX_VALUE_DEPTH),
            "{refused:?}"
        );
        assert_eq!(
            refused.to_string(),
            "input document of door go is nested deeper than 128 levels"
        );
        // An unknown door is no way around the check.
        assert!(matches!(
            rt.visit("nope", "s", nested(depth)).await,
            Err(VisitError::InputTooDeep { .. })
        ));
        let fires = rt.fire("push", nested(depth)).await;
        assert_eq!(fires.len(), 1);
        assert!(matches!(
            &fires[0].visit,
            Some(Err(VisitError::InputTooDeep { door, .. })) if door == "on-push"
        ));
    }
    assert_eq!(footprint(&rt, "s").await, before);
    assert_eq!(rt.list("s").await.unwrap(), listed);
}

/// A door whose `resume_expr` emits a payload past the limit: the visit is refused,
/// naming the expression, and the ask stays open. (The jq evaluator refuses outputs this
/// deep itself; the door boundary checks again, `door::plan`'s unit tests.)
#[tokio::test]
async fn a_door_output_past_the_limit_is_refused() {
    let (rt, _clock) = common::runtime().await;
    let (_, listed) = parked(&rt, "s").await;
    let levels = MAX_VALUE_DEPTH + 1;
    rt.save_door(DoorSpec::route("deep", "asker").resume_expr(&format!(
        "{{id: $parked[0].id, payload: (reduce range({levels}) as $i (0; [.]))}}"
    )))
    .unwrap();
    let refused = rt.visit("deep", "s", json!({})).await.unwrap_err();
    let VisitError::Refused { problems, .. } = &refused else {
        panic!("refused, not {refused:?}");
    };
    assert!(
        matches!(
            problems.0.as_slice(),
            [VisitProblem::TooDeep { expr, .. } | VisitProblem::Eval { expr, .. }]
                if expr == "resume_expr"
        ),
        "{refused}"
    );
    assert!(refused.to_string().contains("deeper than"), "{refused}");
    assert_eq!(rt.list("s").await.unwrap(), listed);
}

/// A step's result and a target's result past the limit fail the run with a message
/// naming them.
#[tokio::test]
async fn deep_step_and_target_results_fail_the_run() {
    let (rt, _clock) = common::runtime().await;
    rt.register("deep-step", &[], |ctx, kwargs, _| async move {
        let depth = kwargs["depth"].as_u64().unwrap_or(0) as usize;
        let value: Value = ctx
            .step("build", || async move { Ok::<_, String>(nested(depth)) })
            .await?;
        Ok(value)
    });
    rt.register("deep-result", &[], |_ctx, kwargs, _| async move {
        let depth = kwargs["depth"].as_u64().unwrap_or(0) as usize;
        Ok(nested(depth))
    });
    for depth in DEPTHS {
        let record = rt
            .run(Start::new("s", "deep-step").kwargs(json!({ "depth": depth })))
            .await
            .unwrap();
        assert_eq!(record.status, RunStatus::Failed);
        assert_eq!(
            record.error.as_deref(),
            Some("step \"build\" returned a value nested deeper than 128 levels")
        );
        let record = rt
            .run(Start::new("s", "deep-result").kwargs(json!({ "depth": depth })))
            .await
            .unwrap();
        assert_eq!(record.status, RunStatus::Failed);
        assert_eq!(
            record.error.as_deref(),
            Some("target deep-result returned a value nested deeper than 128 levels")
        );
    }
    rt.settle().await;
    assert_eq!(rt.stats().await.runs, 0);
}

/// Values at the limit through every recursive path (start, ask, packing and unpacking,
/// list, a door's `$parked` and input, resume and replay, a step, a form's schema and
/// its answer, the result), on Tokio workers with a third of the usual 2 MiB stack, in
/// a debug build: the limit leaves a wide margin. (The heaviest path, unpacking a
/// passive subject's state, needs about 400 KiB here.) An overflow aborts the test
/// binary.
#[cfg(feature = "forms")]
#[test]
fn values_at_the_limit_fit_a_third_of_a_worker_stack() {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_stack_size(2 * 1024 * 1024 / 3)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let body = tokio.spawn(at_the_limit());
    tokio.block_on(body).expect("the body ran to its end");
}

#[cfg(feature = "forms")]
async fn at_the_limit() {
    let (rt, _clock) = common::runtime_with(|b| b.passivate_after(std::time::Duration::ZERO)).await;
    let limit = MAX_VALUE_DEPTH;
    rt.register("deep", &[], move |ctx, kwargs, _| async move {
        let payload = ctx
            .ask(Ask::caller_payload(nested(limit)).expiry_at("10m"))
            .await?;
        let stepped: Value = ctx
            .step("again", || async move { Ok::<_, String>(nested(limit)) })
            .await?;
        // `{"items": {"items": … {"type": "integer"}}}`, as deep as a schema may be;
        // the answer it takes is arrays that deep around an integer.
        let mut schema = json!({"type": "integer"});
        for _ in 0..MAX_SCHEMA_DEPTH - 1 {
            schema = object("items", schema);
        }
        let answer = ctx
            .ask(
                Ask::user("form?")
                    .answer_format("form")
                    .schema(schema)
                    .expiry_at("10m"),
            )
            .await?;
        assert_eq!(stepped, nested(limit));
        assert_eq!(kwargs["v"], nested(limit - 1));
        Ok(Value::Array(vec![payload, answer]))
    });
    rt.save_door(
        DoorSpec::route("pass", "asker").resume_expr("{id: $parked[0].id, payload: .payload}"),
    )
    .unwrap();

    let record = rt
        .run(Start::new("s", "deep").kwargs(object("v", nested(limit - 1))))
        .await
        .unwrap();
    assert_eq!(record.status, RunStatus::Parked);
    rt.settle().await;
    assert_eq!(rt.stats().await.passive_subjects, 1, "packed");
    let listed = rt.list("s").await.unwrap();
    assert_eq!(listed[0].payload, Some(nested(limit)));

    // The door reads the deep `$parked` and passes a payload (nested as deep as a jq
    // output may be) from its input on.
    let visit = rt
        .visit("pass", "s", object("payload", nested(limit - 2)))
        .await
        .unwrap();
    assert!(
        matches!(visit.outcome, parkway::VisitOutcome::Resolved { .. }),
        "{visit:?}"
    );
    rt.settle().await;
    let id = rt.inbox(1, None).unwrap().items[0].id.clone();
    rt.answer(&id, nested(MAX_SCHEMA_DEPTH - 1)).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.stats().await.runs, 0, "the run finished");
    let outcome = rt.list("s").await.unwrap();
    assert_eq!(outcome.len(), 1, "its outcome waits: {outcome:?}");
    let result = rt.take("s", &outcome[0].id).await.unwrap();
    assert_eq!(
        result,
        Value::Array(vec![nested(limit - 2), nested(MAX_SCHEMA_DEPTH - 1)])
    );
}
