//! Core benchmarks: a caller ask's park -> resume -> outcome round trip, and a
//! whole-chain cancel.
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use parkway::{Ask, Ids, ManualClock, RunStatus, Runtime, Start};
use serde_json::{Value, json};

fn runtime(rt: &tokio::runtime::Runtime) -> Runtime {
    rt.block_on(async {
        let runtime = Runtime::builder()
            .without_env()
            .clock(ManualClock::default())
            .ids(Ids::sequential())
            .max_concurrent_caller(usize::MAX)
            .build()
            .await
            .expect("runtime builds");
        runtime.register("asker", &[], |ctx, _, _| async move {
            let answer = ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?;
            Ok(answer)
        });
        runtime.register("noop", &[], |_, _, _| async move { Ok(Value::Null) });
        runtime.register("link", &[], |ctx, kwargs, _| async move {
            let depth = kwargs["depth"].as_u64().unwrap_or(0);
            let record = if depth == 0 {
                ctx.call("asker", json!({})).await?
            } else {
                ctx.call("link", json!({"depth": depth - 1})).await?
            };
            if record.status == RunStatus::Parked {
                ctx.ask(Ask::caller("up").expiry_at("10m")).await?;
            }
            Ok(Value::Null)
        });
        runtime
    })
}

fn round_trip(c: &mut Criterion) {
    let tokio = parkway::bench::tokio().expect("tokio");
    let rt = runtime(&tokio);
    let mut group = c.benchmark_group("core");
    group.throughput(Throughput::Elements(1));
    // The baseline: a run that returns at once, start to outcome.
    group.bench_function("start_outcome", |b| {
        b.to_async(&tokio)
            .iter(|| async { rt.run(Start::new("s", "noop")).await.expect("runs") })
    });
    group.bench_function("park_resume_outcome", |b| {
        b.to_async(&tokio).iter(|| async {
            let parked = rt.run(Start::new("s", "asker")).await.expect("starts");
            let id = parked.asks.unwrap_or_default()[0].id.clone();
            rt.resume("s", &id, json!("yes")).await.expect("resumes")
        })
    });
    for depth in [10u64, 100] {
        group.bench_with_input(
            BenchmarkId::new("cancel_chain", depth),
            &depth,
            |b, &depth| {
                b.to_async(&tokio).iter(|| async {
                    rt.run(Start::new("c", "link").kwargs(json!({"depth": depth - 1})))
                        .await
                        .expect("starts");
                    let entries = rt.list("c").await.expect("lists");
                    let bottom = entries
                        .iter()
                        .find(|e| e.asked_by.as_ref().is_some_and(|a| a[0] == "asker"))
                        .map(|e| e.id.clone())
                        .unwrap_or_default();
                    rt.cancel("c", &[&bottom]).await.expect("cancels")
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
