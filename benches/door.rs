//! Door benchmarks: the cost of a visit against the size of `$parked`, for an expression
//! that does not scan the set and one that does. `$parked` is kept converted by the
//! subject, so the non-scanning visit should cost the same at every size. Also one visit
//! of each kind (start, resume, take, cancel), and the cost of each further expression.
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use parkway::{Ask, DoorSpec, Ids, ManualClock, Runtime, Start};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn runtime(tokio: &tokio::runtime::Runtime, parked: usize) -> Runtime {
    tokio.block_on(async {
        let rt = Runtime::builder()
            .without_env()
            .clock(ManualClock::default())
            .ids(Ids::sequential())
            .max_concurrent_caller(usize::MAX)
            .build()
            .await
            .expect("runtime builds");
        rt.register("asker", &[], |ctx, _, _| async move {
            Ok(ctx.ask(Ask::caller("proceed?").expiry_at("10m")).await?)
        });
        for _ in 0..parked {
            rt.run(Start::new("s", "asker")).await.expect("parks");
        }
        rt.save_door(
            DoorSpec::route("flat", "asker")
                .resume_expr(r#"if .pick then {id: .pick, payload: 1} else null end"#)
                .start_expr("null"),
        )
        .expect("saves");
        rt.save_door(
            DoorSpec::route("scan", "asker")
                .resume_expr(
                    r#"[$parked[] | select(.status == "finished") | .id]
                       | if length == 0 then null else . end"#,
                )
                .start_expr("null"),
        )
        .expect("saves");
        // Guarded steps: a comparison of two computed values, a sort and a print, each
        // charging the evaluation's budget (`docs/doors.md`, the sandbox).
        rt.save_door(
            DoorSpec::route("guarded", "asker")
                .resume_expr(
                    r#"($parked | map(.id) | sort | tojson) as $ids
                       | if .pick == $ids then {id: .pick, payload: 1} else null end"#,
                )
                .start_expr("null"),
        )
        .expect("saves");
        rt
    })
}

fn visit_by_parked_size(c: &mut Criterion) {
    let tokio = parkway::bench::tokio().expect("tokio");
    let mut group = c.benchmark_group("door/visit");
    group.throughput(Throughput::Elements(1));
    for size in [1usize, 10, 100, 1000] {
        let rt = runtime(&tokio, size);
        let input = json!({"pick": Value::Null});
        for door in ["flat", "scan", "guarded"] {
            group.bench_with_input(
                BenchmarkId::new(format!("parked/{door}"), size),
                &size,
                |b, _| {
                    b.to_async(&tokio).iter(|| async {
                        rt.visit(door, "s", input.clone()).await.expect("visits")
                    })
                },
            );
        }
    }
    group.finish();
}

/// The marginal cost of one more door expression (a shallow `null`, evaluated in place on
/// the subject) against a visit with a single expression.
fn visit_by_expression_count(c: &mut Criterion) {
    let tokio = parkway::bench::tokio().expect("tokio");
    let rt = runtime(&tokio, 1);
    let doors = [
        ("1", DoorSpec::route("e1", "asker").start_expr("null")),
        (
            "2",
            DoorSpec::route("e2", "asker")
                .resume_expr("null")
                .start_expr("null"),
        ),
        (
            "4",
            DoorSpec::route("e4", "asker")
                .cancel_expr("null")
                .resume_expr("null")
                .start_expr("null")
                .extras_expr("null"),
        ),
    ];
    let mut group = c.benchmark_group("door/visit/expressions");
    group.throughput(Throughput::Elements(1));
    for (n, spec) in doors {
        let name = spec.name.clone();
        rt.save_door(spec).expect("saves");
        group.bench_function(n, |b| {
            b.to_async(&tokio)
                .iter(|| async { rt.visit(&name, "s", json!({})).await.expect("visits") })
        });
    }
    group.finish();
}

/// One visit of each kind, timed alone: what it takes to set it up (a parked ask, a
/// waiting outcome) and to clean up after it is left out.
fn visit_by_kind(c: &mut Criterion) {
    let tokio = parkway::bench::tokio().expect("tokio");
    let rt = &runtime(&tokio, 0);
    for spec in [
        DoorSpec::route("kstart", "asker").start_expr("{}"),
        DoorSpec::route("kresume", "asker")
            .resume_expr(r#"{id: .id, payload: "yes"}"#)
            .start_expr("null"),
        DoorSpec::route("ktake", "asker")
            .resume_expr(".id")
            .start_expr("null"),
        DoorSpec::route("kcancel", "asker")
            .cancel_expr(".id")
            .start_expr("null"),
    ] {
        rt.save_door(spec).expect("saves");
    }
    let park = || async move {
        let parked = rt.run(Start::new("k", "asker")).await.expect("parks");
        parked.asks.unwrap_or_default()[0].id.clone()
    };
    let mut group = c.benchmark_group("door/visit/kind");
    group.throughput(Throughput::Elements(1));
    group.bench_function("start", |b| {
        b.to_async(&tokio).iter_custom(|iters| async move {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let at = Instant::now();
                let visit = rt.visit("kstart", "k", json!({})).await.expect("visits");
                spent += at.elapsed();
                let parkway::VisitOutcome::Started {
                    record: Some(record),
                    ..
                } = visit.outcome
                else {
                    panic!("no start: {visit:?}");
                };
                let id = record.asks.unwrap_or_default()[0].id.clone();
                rt.cancel("k", &[&id]).await.expect("cancels");
            }
            spent
        })
    });
    for kind in ["resume", "take", "cancel"] {
        let park = &park;
        group.bench_function(kind, |b| {
            b.to_async(&tokio).iter_custom(|iters| async move {
                let mut spent = Duration::ZERO;
                for _ in 0..iters {
                    let id = park().await;
                    if kind == "take" {
                        rt.resume_detached("k", &id, json!("yes"))
                            .await
                            .expect("resumes");
                        rt.settle().await;
                    }
                    let door = format!("k{kind}");
                    let at = Instant::now();
                    rt.visit(&door, "k", json!({"id": id}))
                        .await
                        .expect("visits");
                    spent += at.elapsed();
                }
                spent
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    visit_by_parked_size,
    visit_by_expression_count,
    visit_by_kind
);
criterion_main!(benches);
