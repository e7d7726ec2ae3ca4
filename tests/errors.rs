//! Errors an embedder can live with: `?` inside a target on any error (std, `anyhow`, the
//! runtime's own), a park that survives the trip through `anyhow` or a box, and a run's
//! failure usable with `?` in an embedder's `anyhow` function.

mod common;

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use parkway::{
    AnswerError, Ask, AskError, AskProblem, BuildError, CancelError, CompileError, CompileErrors,
    CtxError, EvalError, IdProblem, NoResult, ResumeError, Resumed, RunError, RunStatus, Runtime,
    SaveError, SaveProblem, SettingsError, Start, StartError, Suspension, TakeError, VisitError,
    VisitProblem,
};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A path that does not exist, and the error reading it gives on this system.
fn missing_file() -> (String, String) {
    let path = std::env::temp_dir()
        .join("parkway-errors-test-no-such-dir")
        .join("config.json")
        .to_string_lossy()
        .into_owned();
    let error = std::fs::read(&path)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(!error.is_empty(), "{path} unexpectedly exists");
    (path, error)
}

/// Run `target` once on subject `s` and hand back its record.
async fn run(rt: &Runtime, target: &str, kwargs: Value) -> parkway::RunRecord {
    rt.run(Start::new("s", target).kwargs(kwargs))
        .await
        .expect("the run starts")
}

/// `?` on an `std::io::Error` inside a target: the run fails with the error's message.
#[tokio::test]
async fn io_error_fails_the_run_with_its_message() {
    let (rt, _clock) = common::runtime().await;
    rt.register("reads", &[], |_, kwargs, _| async move {
        let path = kwargs["path"].as_str().unwrap_or_default().to_owned();
        let bytes = std::fs::read(path)?;
        Ok(json!(bytes.len()))
    });
    let (path, error) = missing_file();
    let record = run(&rt, "reads", json!({ "path": path })).await;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.error, Some(error));
}

/// `?` on an `anyhow::Error` inside a target: the run fails with the error's message and
/// every context around it, outermost first.
#[tokio::test]
async fn anyhow_error_fails_the_run_with_its_chain() {
    let (rt, _clock) = common::runtime().await;
    rt.register("plain", &[], |_, _, _| async move {
        Err(anyhow::anyhow!("quota of {} exceeded", 3))?;
        Ok(Value::Null)
    });
    rt.register("with_context", &[], |_, kwargs, _| async move {
        let path = kwargs["path"].as_str().unwrap_or_default().to_owned();
        let bytes = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
        Ok(json!(bytes.len()))
    });
    let record = run(&rt, "plain", json!({})).await;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.error.as_deref(), Some("quota of 3 exceeded"));

    let (path, error) = missing_file();
    let record = run(&rt, "with_context", json!({ "path": path })).await;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(record.error, Some(format!("reading {path}: {error}")));
}

/// `?` on the runtime's own errors inside a target: a `ResumeError` as it is, and a
/// refused `resume_parked` (one `?`, no nested result to unwrap).
#[tokio::test]
async fn runtime_errors_fail_the_run_with_their_message() {
    let (rt, _clock) = common::runtime().await;
    rt.register("stopped", &[], |_, _, _| async move {
        let refused: Result<(), ResumeError> = Err(ResumeError::Stopped);
        refused?;
        Ok(Value::Null)
    });
    rt.register("resumes_unknown", &[], |ctx, _, _| async move {
        let resumed = ctx.resume_parked("i-404", json!("yes")).await?;
        Ok(serde_json::to_value(resumed)?)
    });
    let record = run(&rt, "stopped", json!({})).await;
    assert_eq!(record.error.as_deref(), Some("the runtime is shut down"));
    let record = run(&rt, "resumes_unknown", json!({})).await;
    assert_eq!(record.status, RunStatus::Failed);
    assert_eq!(
        record.error.as_deref(),
        Some("unknown interaction i-404 on subject s")
    );
}

/// The flattened resolutions keep the refusal typed, for a target that handles it.
#[tokio::test]
async fn a_refused_resolution_can_be_matched() {
    let (rt, _clock) = common::runtime().await;
    rt.register("inspects", &[], |ctx, _, _| async move {
        let resumed = match ctx.resume_parked("i-404", json!("yes")).await {
            Err(CtxError::Resolution(ResumeError::Refused(IdProblem::Unknown { id, .. }))) => id,
            other => return Err(format!("unexpected resume: {other:?}").into()),
        };
        let taken = match ctx.take_parked("i-405").await {
            Err(CtxError::Resolution(TakeError::Refused(IdProblem::Unknown { id, .. }))) => id,
            other => return Err(format!("unexpected take: {other:?}").into()),
        };
        let cancelled = match ctx.cancel_parked(&["i-406"]).await {
            Err(CtxError::Resolution(CancelError::Refused(problems))) => problems.to_string(),
            other => return Err(format!("unexpected cancel: {other:?}").into()),
        };
        Ok(json!([resumed, taken, cancelled]))
    });
    let record = run(&rt, "inspects", json!({})).await;
    assert_eq!(record.status, RunStatus::Succeeded, "{:?}", record.error);
    assert_eq!(
        record.result,
        Some(json!([
            "i-404",
            "i-405",
            "unknown interaction i-406 on subject s"
        ]))
    );
}

/// A target written against `anyhow`: its ask's suspension passes through
/// `anyhow::Error` (here wrapped in a context, too) and the run still parks; the resume
/// replays it, its journaled step included, to its result.
async fn anyhow_deploy(ctx: parkway::Ctx, kwargs: Value) -> anyhow::Result<Value> {
    let version: u64 = ctx
        .step("read version", || async { Ok::<_, std::io::Error>(7) })
        .await?;
    let answer = ctx
        .ask(
            Ask::caller("proceed?")
                .answer_format("confirm")
                .expiry_at("10m"),
        )
        .await
        .context("asking the caller")?;
    anyhow::ensure!(answer == json!("yes"), "the caller said {answer}");
    Ok(json!({ "service": kwargs["service"], "version": version }))
}

/// The same target against `Box<dyn Error + Send + Sync>`.
async fn boxed_deploy(ctx: parkway::Ctx, kwargs: Value) -> Result<Value, BoxError> {
    let answer = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?;
    if answer != json!("yes") {
        return Err(format!("the caller said {answer}").into());
    }
    Ok(json!({ "service": kwargs["service"] }))
}

/// Parking works whether the target's error is `anyhow::Error` or a box, and a resume
/// replays it to its result; an answer the target rejects fails it with its message.
#[tokio::test]
async fn anyhow_and_boxed_targets_park_and_resume() {
    let (rt, _clock) = common::runtime().await;
    rt.register("anyhow_deploy", &[], |ctx, kwargs, _| async move {
        Ok(anyhow_deploy(ctx, kwargs).await?)
    });
    rt.register("boxed_deploy", &[], |ctx, kwargs, _| async move {
        Ok(boxed_deploy(ctx, kwargs).await?)
    });
    for (target, result) in [
        ("anyhow_deploy", json!({"service": "api", "version": 7})),
        ("boxed_deploy", json!({"service": "api"})),
    ] {
        let record = run(&rt, target, json!({"service": "api"})).await;
        assert_eq!(
            record.status,
            RunStatus::Parked,
            "{target}: {:?}",
            record.error
        );
        let asks = record.asks.unwrap_or_default();
        assert_eq!(asks.len(), 1, "{target}");
        let Resumed::Outcome(done) = rt.resume("s", &asks[0].id, json!("yes")).await.unwrap()
        else {
            panic!("{target}: the resume was buffered");
        };
        assert_eq!(
            done.status,
            RunStatus::Succeeded,
            "{target}: {:?}",
            done.error
        );
        assert_eq!(done.result, Some(result), "{target}");

        let record = run(&rt, target, json!({"service": "api"})).await;
        let asks = record.asks.unwrap_or_default();
        let Resumed::Outcome(done) = rt.resume("s", &asks[0].id, json!("no")).await.unwrap() else {
            panic!("{target}: the resume was buffered");
        };
        assert_eq!(done.status, RunStatus::Failed, "{target}");
        assert_eq!(done.error.as_deref(), Some("the caller said \"no\""));
    }
}

/// The suspension an ask returns is found again in what `?` makes of it, however it was
/// carried: as itself, in an `anyhow::Error` with contexts around it, in a box. (A run
/// that raised an ask parks whatever it returns; this is what the target sees.)
#[tokio::test]
async fn the_suspension_survives_anyhow_and_boxes() {
    let (rt, _clock) = common::runtime().await;
    let seen: Arc<Mutex<Vec<RunError>>> = Arc::default();
    let slot = Arc::clone(&seen);
    rt.register("carries", &[], move |ctx, _, _| {
        let slot = Arc::clone(&slot);
        async move {
            let asked = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await;
            let Err(suspended) = asked else {
                return Ok(Value::Null);
            };
            let direct = RunError::from(suspended.clone());
            let wrapped = anyhow::Error::from(suspended.clone())
                .context("asking the caller")
                .context("deploying");
            let through_anyhow = RunError::from(wrapped);
            let boxed: BoxError = Box::new(suspended);
            let through_box = RunError::from(boxed);
            let mut seen = slot.lock().unwrap_or_else(|p| p.into_inner());
            seen.extend([direct, through_anyhow, through_box.clone()]);
            Err(through_box)
        }
    });
    let record = run(&rt, "carries", json!({})).await;
    assert_eq!(record.status, RunStatus::Parked);
    let id = record.asks.unwrap_or_default()[0].id.clone();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    for carried in seen {
        let RunError::Suspended(s) = carried else {
            panic!("the suspension was lost: {carried}");
        };
        assert_eq!(s.interaction(), id);
    }
}

/// An ask error that is not a suspension is a failure even through `anyhow`, so a target
/// cannot park by accident.
#[tokio::test]
async fn a_refused_ask_through_anyhow_fails_the_run() {
    let (rt, _clock) = common::runtime().await;
    rt.register("bad_ask", &[], |ctx, _, _| async move {
        let asked: anyhow::Result<Value> = async {
            // A user ask may not carry a payload: refused, nothing stored.
            let ask = Ask::user("pick one")
                .answer_format("text")
                .payload(json!({"x": 1}));
            Ok(ctx.ask(ask).await?)
        }
        .await;
        Ok(asked?)
    });
    let record = run(&rt, "bad_ask", json!({})).await;
    assert_eq!(record.status, RunStatus::Failed);
    let error = record.error.unwrap_or_default();
    assert!(error.starts_with("invalid ask: "), "{error}");
    assert!(rt.list("s").await.unwrap().is_empty());
}

/// What an embedder writes: an `anyhow` function using `?` on the runtime's calls and on
/// a run's outcome.
async fn embedder(target: &str) -> anyhow::Result<Value> {
    let (rt, _clock) = common::runtime().await;
    rt.register("broken", &[], |_, _, _| async move {
        Err(RunError::fail("disk full"))
    });
    let record = rt.run(Start::new("s", target)).await?;
    let result = record.into_result()?;
    Ok(result)
}

/// A failed run, a parked run and an unknown target each come out of the embedder's
/// `anyhow` function as an error it can read and downcast; a success as its result.
#[tokio::test]
async fn an_embedders_anyhow_function_uses_question_mark_on_runs() {
    let error = embedder("broken").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "run r-1 of target broken failed: disk full"
    );
    assert!(matches!(
        error.downcast_ref::<NoResult>(),
        Some(NoResult::Failed { error, .. }) if error == "disk full"
    ));

    let error = embedder("asker").await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "run r-1 of target asker has no result yet (status: parked)"
    );
    assert!(matches!(
        error.downcast_ref::<NoResult>(),
        Some(NoResult::NotEnded {
            status: RunStatus::Parked,
            ..
        })
    ));

    let error = embedder("nobody").await.unwrap_err();
    assert_eq!(error.to_string(), "unknown target nobody");
    assert!(error.downcast_ref::<StartError>().is_some());

    let result = embedder("echo").await.unwrap();
    assert_eq!(result, json!({"kwargs": {}, "extras": {}}));
}

/// A cancelled run's record, as a receiver is handed it, gives its reason as the error.
#[test]
fn a_cancelled_run_has_no_result() {
    let record: parkway::RunRecord = serde_json::from_value(json!({
        "run_id": "r-3",
        "target": "deploy",
        "status": "cancelled",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:01:00Z",
        "error": "cancelled: interaction i-1 was cancelled",
    }))
    .unwrap();
    let error = record.into_result().unwrap_err();
    assert_eq!(
        error,
        NoResult::Cancelled {
            run_id: "r-3".into(),
            target: "deploy".into(),
            reason: "cancelled: interaction i-1 was cancelled".into(),
        }
    );
    assert_eq!(
        error.to_string(),
        "run r-3 of target deploy was cancelled: cancelled: interaction i-1 was cancelled"
    );
}

/// A refusal from the runtime meets `anyhow` with `?` and downcasts back.
#[tokio::test]
async fn runtime_refusals_meet_anyhow() {
    let (rt, _clock) = common::runtime().await;
    let refused = async {
        rt.resume("s", "i-9", json!("yes")).await?;
        Ok::<_, anyhow::Error>(())
    }
    .await
    .unwrap_err();
    assert_eq!(refused.to_string(), "unknown interaction i-9 on subject s");
    assert!(refused.downcast_ref::<ResumeError>().is_some());
}

/// `RunError` converts from every error and from text; a failure keeps the message.
#[test]
fn run_error_converts_from_any_error() {
    let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no config");
    assert_eq!(RunError::from(io), RunError::fail("no config"));
    let boxed: BoxError = "boxed".into();
    assert_eq!(RunError::from(boxed), RunError::fail("boxed"));
    assert_eq!(RunError::from("text"), RunError::fail("text"));
    assert_eq!(
        RunError::from(String::from("owned")),
        RunError::fail("owned")
    );
    let nested = anyhow::anyhow!("inner").context("middle").context("outer");
    assert_eq!(
        RunError::from(nested),
        RunError::fail("outer: middle: inner")
    );
    let invalid = AskError::Invalid(parkway::Problems(vec![]));
    assert!(matches!(RunError::from(invalid), RunError::Failed(_)));
}

/// Every public error type an embedder can meet works with `?` into `anyhow` and boxes.
#[test]
fn public_errors_are_std_errors() {
    fn is_error<E: std::error::Error + Send + Sync + 'static>() {}
    is_error::<AnswerError>();
    is_error::<AskError>();
    is_error::<AskProblem>();
    is_error::<BuildError>();
    is_error::<CancelError>();
    is_error::<CompileError>();
    is_error::<CompileErrors>();
    is_error::<CtxError>();
    is_error::<CtxError<ResumeError>>();
    is_error::<CtxError<TakeError>>();
    is_error::<CtxError<CancelError>>();
    is_error::<EvalError>();
    is_error::<IdProblem>();
    is_error::<NoResult>();
    is_error::<ResumeError>();
    is_error::<SaveError>();
    is_error::<SaveProblem>();
    is_error::<SettingsError>();
    is_error::<StartError>();
    is_error::<Suspension>();
    is_error::<TakeError>();
    is_error::<VisitError>();
    is_error::<VisitProblem>();
}

/// Kinds are what the simulation's transcripts and the load tool's report print: each
/// error's variant in snake case, an id problem's own kind for a refusal about one id.
/// A changed kind changes every recorded transcript, so the table is pinned here.
#[test]
fn every_error_has_its_stable_kind() {
    let unknown = IdProblem::Unknown {
        id: "i-1".into(),
        subject: "s".into(),
    };
    let wrong = IdProblem::WrongStatus {
        id: "i-1".into(),
        wanted: "asking".into(),
        status: parkway::EntryStatus::Finished,
    };
    let door = || "d".to_owned();
    let kinds = [
        (VisitError::EmptySubject.kind(), "empty_subject"),
        (
            VisitError::UnknownDoor { door: door() }.kind(),
            "unknown_door",
        ),
        (VisitError::Broken { door: door() }.kind(), "broken"),
        (
            VisitError::InputTooLarge {
                door: door(),
                bytes: 2,
                max: 1,
            }
            .kind(),
            "input_too_large",
        ),
        (
            VisitError::InputTooDeep {
                door: door(),
                limit: 1,
            }
            .kind(),
            "input_too_deep",
        ),
        (VisitError::Stopped.kind(), "stopped"),
        (
            StartError::UnknownTarget("t".into()).kind(),
            "unknown_target",
        ),
        (StartError::Stopped.kind(), "stopped"),
        (ResumeError::Refused(unknown.clone()).kind(), "unknown"),
        (TakeError::Refused(wrong.clone()).kind(), "wrong_status"),
        (
            TakeError::Failed {
                id: "i-1".into(),
                error: "e".into(),
            }
            .kind(),
            "failed",
        ),
        (
            CancelError::Refused(parkway::Problems(vec![wrong.clone()])).kind(),
            "wrong_status",
        ),
        (
            CancelError::Refused(parkway::Problems(vec![unknown, wrong])).kind(),
            "refused",
        ),
        (CancelError::EmptySubject.kind(), "empty_subject"),
        (AnswerError::BadPage.kind(), "bad_page"),
        (AnswerError::Unknown { id: "i-1".into() }.kind(), "unknown"),
    ];
    for (i, (got, want)) in kinds.iter().enumerate() {
        assert_eq!(got, want, "row {i}");
    }
}
