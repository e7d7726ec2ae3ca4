//! Helpers shared by the behaviour tests: a runtime on a manual clock with sequential
//! ids, and a few targets.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use parkway::{Ask, Event, Ids, ManualClock, Runtime};
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// A runtime on a manual clock with sequential ids, no environment, and `passivate_after`
/// long enough that subjects stay active unless a test says otherwise.
pub async fn runtime() -> (Runtime, ManualClock) {
    runtime_with(|b| b).await
}

/// The same, with the builder adjusted by `f`.
pub async fn runtime_with(
    f: impl FnOnce(parkway::Builder) -> parkway::Builder,
) -> (Runtime, ManualClock) {
    let clock = ManualClock::default();
    let builder = Runtime::builder()
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .passivate_after(Duration::from_secs(3600));
    let rt = f(builder).build().await.expect("runtime builds");
    register_common(&rt);
    (rt, clock)
}

/// `asker`: asks its caller `kwargs.question` (default "proceed?") with a 10m deadline
/// and returns `{"answer": <answer>}`.
/// `main`: calls `kwargs.child` (default "asker") and, if the child parked, asks its own
/// caller to carry the question up; returns the child's result.
pub fn register_common(rt: &Runtime) {
    rt.register("asker", &[], |ctx, kwargs, _| async move {
        let question = kwargs["question"].as_str().unwrap_or("proceed?").to_owned();
        let answer = ctx
            .ask(
                Ask::caller(question)
                    .answer_format("confirm")
                    .expiry_at("10m"),
            )
            .await?;
        Ok(json!({ "answer": answer }))
    });
    rt.register("echo", &["trace"], |_ctx, kwargs, extras| async move {
        Ok(json!({ "kwargs": kwargs, "extras": extras }))
    });
}

/// Every event received so far, without waiting.
pub fn drain(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = rx.try_recv() {
        out.push(e);
    }
    out
}

/// The `json!` of an event's tag, e.g. `"ask_parked"`.
pub fn kind(e: &Event) -> String {
    serde_json::to_value(e)
        .ok()
        .and_then(|v| v["event"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The ids of the parked entries.
pub fn ids(entries: &[parkway::Entry]) -> Vec<String> {
    entries.iter().map(|e| e.id.clone()).collect()
}

/// A JSON value for an entry.
pub fn json_of<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("serialises")
}

/// `builder` on `clock` with sequential ids, no environment, and the target `deploy`: it
/// counts its journaled step in `steps` and asks its caller `proceed?` (expiring in an
/// hour); its result names the step's count and the answer. The durable tests build it
/// on a data directory or a database and restart it.
pub fn with_deploy(
    builder: parkway::Builder,
    clock: &ManualClock,
    steps: &std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> parkway::Builder {
    let steps = std::sync::Arc::clone(steps);
    builder
        .without_env()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .register("deploy", &[], move |ctx, _, _| {
            let steps = std::sync::Arc::clone(&steps);
            async move {
                let n: usize = ctx
                    .step("prepare", || async move {
                        Ok::<_, String>(steps.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1)
                    })
                    .await?;
                let answer = ctx.ask(Ask::caller("proceed?").expiry_at("1h")).await?;
                Ok(json!({"prepared": n, "answer": answer}))
            }
        })
}
