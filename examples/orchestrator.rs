//! An orchestrator's five parts on a data directory, across a restart: an agent resumes
//! the tool that asked it; a route door answers a parked ask and hands back the result;
//! a person answers a user ask through the inbox; an ask expires and its run resumes
//! with the marker; a hook answers an ask and the outcome waits on the subject.
//!
//! `cargo run --example orchestrator` (CI runs it; every part is asserted).

use std::time::Duration;

use parkway::{Ask, Builder, DoorSpec, ManualClock, OnExpiry, Runtime, Start, is_expiry_marker};
use serde_json::json;

const SECOND: Duration = Duration::from_secs(1);

/// Targets are registered on the builder: the runtime that reopens the directory knows
/// them before it recovers the runs parked there.
fn targets(builder: Builder) -> Builder {
    builder
        .register("deploy", &[], |ctx, _, _| async move {
            let go = ctx.ask(Ask::caller("deploy?").expiry_at("10m")).await?;
            Ok(json!({"deployed": go == "yes"}))
        })
        .register("agent", &[], |ctx, _, _| async move {
            // The tool parks on its caller; the agent answers it and gets its result.
            let ask = ctx.call("deploy", json!({})).await?.first_ask()?.id.clone();
            Ok(ctx.resume_parked(&ask, json!("yes")).await?.into_result()?)
        })
        .register("review", &[], |ctx, _, _| async move {
            Ok(ctx.ask(Ask::user("publish?").expiry_at("1h")).await?)
        })
        .register("patient", &[], |ctx, _, _| async move {
            let ask = Ask::caller("there?")
                .expiry_at("5m")
                .on_expiry(OnExpiry::Resume);
            Ok(json!({"expired": is_expiry_marker(&ctx.ask(ask).await?)}))
        })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (dir, clock) = (tempfile::tempdir()?, ManualClock::default());
    let open = || targets(Runtime::builder().data_dir(dir.path()).clock(clock.clone())).build();
    let rt = open().await?;

    // 1. An agent resumes the tool that asked it.
    let agent = rt.run(Start::new("t1", "agent")).await?.into_result()?;
    assert_eq!(agent, json!({"deployed": true}));

    // 2. A route door resumes the parked ask; its visitor receives the run's result.
    let yes = r#"{id: $parked[0].id, payload: "yes"}"#;
    rt.save_door(DoorSpec::route("approve", "deploy").resume_expr(yes))?;
    rt.run(Start::new("t2", "deploy")).await?;
    let routed = rt.visit("approve", "t2", json!({})).await?.result()?;
    assert_eq!(routed, json!({"deployed": true}));

    // Parts 3 to 5 park now and are answered after a restart on the same directory.
    let t3 = rt.run(Start::new("t3", "review")).await?;
    let t4 = rt.run(Start::new("t4", "patient")).await?;
    let t5 = rt.run(Start::new("t5", "deploy")).await?;
    rt.shutdown().await;
    let rt = open().await?;

    // 3. A person answers in the inbox; the run's result waits on its subject.
    let asked = &rt.inbox(1, None)?.items[0].id;
    assert_eq!(asked, &t3.user_asks()[0]);
    rt.answer(asked, json!("yes")).await?;
    assert_eq!(rt.await_outcome("t3", asked, SECOND).await?, json!("yes"));

    // 4. The ask expires; its run resumes with the marker.
    clock.advance(Duration::from_secs(6 * 60));
    let expired = rt.await_outcome("t4", &t4.first_ask()?.id, SECOND).await?;
    assert_eq!(expired, json!({"expired": true}));

    // 5. A hook fired by its topic resumes the ask; nobody receives it, so it waits.
    let hook = DoorSpec::hook("release", "deploy");
    rt.save_door(hook.topic("releases").subject("t5").resume_expr(yes))?;
    rt.fire("releases", json!({})).await;
    let released = rt.await_outcome("t5", &t5.first_ask()?.id, SECOND).await?;
    assert_eq!(released, json!({"deployed": true}));
    Ok(())
}
