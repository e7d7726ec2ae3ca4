//! Subject benchmarks: spawning a subject's actor for a message and passivating it when
//! the message is handled, against a message to a subject whose actor stays; and a list,
//! which reads a passive subject without waking it.
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parkway::{Ask, DoorSpec, Ids, ManualClock, Runtime, Start};
use serde_json::json;

/// A door whose visit reaches the subject's actor and applies nothing.
const PEEK: &str = "peek";

fn runtime(tokio: &tokio::runtime::Runtime, passivate_after: Duration) -> Runtime {
    tokio.block_on(async {
        let rt = Runtime::builder()
            .without_env()
            .clock(ManualClock::default())
            .ids(Ids::sequential())
            .max_concurrent_caller(usize::MAX)
            .passivate_after(passivate_after)
            .build()
            .await
            .expect("runtime builds");
        rt.register("asker", &[], |ctx, _, _| async move {
            Ok(ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?)
        });
        rt.save_door(DoorSpec::route(PEEK, "asker").start_expr("null"))
            .expect("door saves");
        rt
    })
}

fn spawn_and_passivate(c: &mut Criterion) {
    let tokio = parkway::bench::tokio().expect("tokio");
    let mut group = c.benchmark_group("subject");
    group.throughput(Throughput::Elements(1));

    // Baseline: a visit to a subject whose actor stays live, then settle, as the others
    // do.
    let live = runtime(&tokio, Duration::from_secs(3600));
    tokio.block_on(async {
        live.run(Start::new("s", "asker")).await.expect("parks");
    });
    group.bench_function("visit/live", |b| {
        b.to_async(&tokio).iter(|| async {
            let visit = live.visit(PEEK, "s", json!({})).await.expect("visits");
            live.settle().await;
            visit
        })
    });

    // A subject holding one parked ask, passivated after every message: each visit
    // spawns its actor from the passive state and passivates it again.
    let passive = runtime(&tokio, Duration::ZERO);
    tokio.block_on(async {
        passive.run(Start::new("p", "asker")).await.expect("parks");
        passive.settle().await;
    });
    group.bench_function("visit/spawn_passivate", |b| {
        b.to_async(&tokio).iter(|| async {
            let visit = passive.visit(PEEK, "p", json!({})).await.expect("visits");
            passive.settle().await;
            visit
        })
    });

    // A fresh, empty subject each time: spawned, then forgotten when it passivates.
    let fresh = AtomicU64::new(0);
    group.bench_function("visit/spawn_forget", |b| {
        b.to_async(&tokio).iter(|| async {
            let name = format!("f{}", fresh.fetch_add(1, Ordering::Relaxed));
            let visit = passive.visit(PEEK, &name, json!({})).await.expect("visits");
            passive.settle().await;
            visit
        })
    });

    // A list of the live subject, read by its actor; and of the passive one, read from
    // its packed state without waking it.
    group.bench_function("list/live", |b| {
        b.to_async(&tokio).iter(|| async {
            let entries = live.list("s").await.expect("lists");
            live.settle().await;
            entries
        })
    });
    group.bench_function("list/passive", |b| {
        b.to_async(&tokio).iter(|| async {
            let entries = passive.list("p").await.expect("lists");
            passive.settle().await;
            entries
        })
    });
    group.finish();
}

criterion_group!(benches, spawn_and_passivate);
criterion_main!(benches);
