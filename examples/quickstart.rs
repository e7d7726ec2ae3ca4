//! A first tour: park a caller ask, list it, resume it, and let another one expire.
//!
//! Run with `cargo run --release --example quickstart`. The runtime runs on a manual
//! clock here, so the expiry happens the moment the clock is moved past it.

use std::time::Duration;

use parkway::{Ask, Ids, ManualClock, Resumed, Runtime, Start};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::default();
    let rt = Runtime::builder()
        .clock(clock.clone())
        .ids(Ids::sequential())
        .build()
        .await?;
    let mut events = rt.events();

    // A tool that asks the run that called it before it deploys.
    rt.register("deploy", &[], |ctx, kwargs, _extras| async move {
        let answer = ctx
            .ask(
                Ask::caller("proceed?")
                    .answer_format("confirm")
                    .payload(json!({"service": kwargs["service"]}))
                    .expiry_at("10m"),
            )
            .await?;
        let go = answer["answer"] == "yes";
        Ok(json!({"service": kwargs["service"], "deployed": go}))
    });

    println!("== start deploy(api) on subject thread-1");
    let record = rt
        .run(Start::new("thread-1", "deploy").kwargs(json!({"service": "api"})))
        .await?;
    println!("record: {}", serde_json::to_string(&record)?);

    println!("\n== list the parked set of thread-1");
    let parked = rt.list("thread-1").await?;
    for entry in &parked {
        println!("entry:  {}", serde_json::to_string(entry)?);
    }

    println!("\n== resume {} with {{\"answer\": \"yes\"}}", parked[0].id);
    match rt
        .resume("thread-1", &parked[0].id, json!({"answer": "yes"}))
        .await?
    {
        Resumed::Outcome(done) => println!("outcome: {}", serde_json::to_string(&done)?),
        other => println!("unexpected: {}", serde_json::to_string(&other)?),
    }

    println!("\n== start deploy(db) and let its ask expire (on_expiry = kill)");
    let record = rt
        .run(Start::new("thread-1", "deploy").kwargs(json!({"service": "db"})))
        .await?;
    println!("record: {}", serde_json::to_string(&record)?);
    clock.advance(Duration::from_secs(11 * 60));
    rt.settle().await;
    println!(
        "parked after 11 minutes: {}",
        serde_json::to_string(&rt.list("thread-1").await?)?
    );

    println!("\n== events");
    while let Ok(event) = events.try_recv() {
        println!("event:  {}", serde_json::to_string(&event)?);
    }
    Ok(())
}
