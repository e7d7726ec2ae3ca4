//! Heap held by subjects and parked asks, counted by an allocator wrapper: an empty live
//! subject, a parked caller ask while its subject is live, once a door visit has converted
//! the parked set for jq, and once the subject is passive.
//!
//! ```sh
//! cargo run --release --example memory
//! ```

use std::time::Duration;

use parkway::bench::Counting;
use parkway::{Ask, DoorSpec, ManualClock, Runtime, Start};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// Enough that the runtime's fixed parts (the event buffers) do not show per ask.
const SUBJECTS: usize = 10_000;
const PER_SUBJECT: usize = 5;

fn live() -> isize {
    Counting::live()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let clock = ManualClock::default();
    let rt = Runtime::builder()
        .without_env()
        .clock(clock.clone())
        .max_concurrent_caller(usize::MAX)
        .passivate_after(Duration::from_secs(5))
        // Every subject stays live until the clock moves: the live figures are measured.
        .max_live_subjects(usize::MAX)
        .event_capacity(16)
        .build()
        .await?;
    rt.register("asker", &[], |ctx, _, _| async move {
        Ok(ctx.ask(Ask::caller("proceed?").expiry_at("1h")).await?)
    });
    rt.save_door(DoorSpec::route("peek", "asker").start_expr("null"))?;
    // Warm up every lazily built part (the jq library, the pools) first.
    rt.run(Start::new("warm-up", "asker")).await?;
    rt.visit("peek", "warm-up", json!({})).await?;
    rt.settle().await;

    let start = live();
    // A visit that applies nothing wakes each subject (a list would not: it reads a
    // subject without an actor as it is kept).
    for i in 0..SUBJECTS {
        rt.visit("peek", &format!("s{i}"), json!({})).await?;
    }
    rt.settle().await;
    let subjects = live();
    println!(
        "an empty live subject: {} bytes",
        (subjects - start) / SUBJECTS as isize
    );

    for i in 0..SUBJECTS {
        for _ in 0..PER_SUBJECT {
            rt.run(Start::new(format!("s{i}"), "asker")).await?;
        }
    }
    rt.settle().await;
    let asks = (SUBJECTS * PER_SUBJECT) as isize;
    println!(
        "a parked caller ask, subject live: {} bytes",
        (live() - subjects) / asks
    );

    let parked = live();
    for i in 0..SUBJECTS {
        rt.visit("peek", &format!("s{i}"), json!({})).await?;
    }
    rt.settle().await;
    println!(
        "the same ask converted for jq by a visit: {} bytes more",
        (live() - parked) / asks
    );

    clock.advance(Duration::from_secs(10));
    rt.settle().await;
    let stats = rt.stats().await;
    println!(
        "a parked caller ask, subject passive: {} bytes (everything over the start, per ask; {} subjects passive, {} live)",
        (live() - start) / asks,
        stats.passive_subjects,
        stats.live_subjects
    );
    println!(
        "  of which its subject's packed text: {} bytes",
        stats.passive_bytes as isize / asks
    );
    Ok(())
}
