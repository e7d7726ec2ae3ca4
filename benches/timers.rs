//! Timer benchmarks: arming and disarming a million ask expiries in the supervisor's
//! timer structure, and what an armed expiry costs in memory, armed in a scrambled order
//! and in deadline order (one expiry for every ask: the order a runtime arms them in).
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`

use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parkway::bench::{Armed, Counting, ExpiryTimers};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MILLION: usize = 1_000_000;

/// Interaction ids as the runtime makes them; a parked entry owns its id and shares it
/// with its timer.
fn ids() -> Vec<Arc<str>> {
    (0..MILLION)
        .map(|i| Arc::from(format!("i-{i:016x}")))
        .collect()
}

/// Deadlines spread over an hour, in a scrambled order.
fn scrambled() -> Vec<i64> {
    (0..MILLION as i64)
        .map(|i| (i * 7_919) % 3_600_000)
        .collect()
}

/// Deadlines in the order they fall.
fn in_order() -> Vec<i64> {
    (0..MILLION as i64).map(|i| i * 3).collect()
}

/// Arm one expiry per id, at its offset.
fn arm_all(timers: &mut ExpiryTimers, ids: &[Arc<str>], offsets: &[i64]) -> Vec<Armed> {
    ids.iter()
        .zip(offsets)
        .map(|(id, &at)| timers.arm(at, id))
        .collect()
}

fn expiries(c: &mut Criterion) {
    let (ids, offsets) = (ids(), scrambled());

    // Memory: the heap held by a million armed expiries, per expiry.
    for (order, offsets) in [("scrambled", &offsets), ("in deadline order", &in_order())] {
        let before = Counting::live();
        let mut timers = ExpiryTimers::default();
        let armed = arm_all(&mut timers, &ids, offsets);
        let held = Counting::live() - before;
        let handles = (armed.capacity() * std::mem::size_of_val(&armed[0])) as isize;
        println!(
            "timers/expiries/memory: {:.1} bytes per armed expiry (1M armed {order}, the caller's handles excluded)",
            (held - handles) as f64 / MILLION as f64
        );
    }

    let mut group = c.benchmark_group("timers/expiries");
    group.sample_size(10);
    group.throughput(Throughput::Elements(MILLION as u64));
    group.bench_function("arm_then_disarm/1M", |b| {
        b.iter(|| {
            let mut timers = ExpiryTimers::default();
            let armed = arm_all(&mut timers, &ids, &offsets);
            for a in armed {
                timers.disarm(a);
            }
            assert!(timers.is_empty());
        })
    });
    group.finish();
}

criterion_group!(benches, expiries);
criterion_main!(benches);
