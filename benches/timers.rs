//! Timer benchmarks: arming and disarming a million ask expiries in the supervisor's
//! timer structure, and what an armed expiry costs in memory.
#![allow(missing_docs)] // criterion_main! generates an undocumented `main`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use parkway::bench::ExpiryTimers;

/// Counts the bytes live on the heap, to measure what armed expiries hold.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to the system allocator unchanged; only a counter is
// updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's layout is passed on as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const MILLION: usize = 1_000_000;

/// Interaction ids as the runtime makes them.
fn ids() -> Vec<String> {
    (0..MILLION).map(|i| format!("i-{i:016x}")).collect()
}

/// Deadlines spread over an hour, in a scrambled order.
fn offsets() -> Vec<i64> {
    (0..MILLION as i64)
        .map(|i| (i * 7_919) % 3_600_000)
        .collect()
}

fn expiries(c: &mut Criterion) {
    let (ids, offsets) = (ids(), offsets());

    // Memory: the heap held by a million armed expiries, per expiry.
    let before = LIVE.load(Ordering::Relaxed);
    let mut timers = ExpiryTimers::default();
    let armed: Vec<_> = ids
        .iter()
        .zip(&offsets)
        .map(|(id, &at)| timers.arm(at, id))
        .collect();
    let held = LIVE.load(Ordering::Relaxed) - before;
    let handles = (armed.capacity() * std::mem::size_of_val(&armed[0])) as isize;
    println!(
        "timers/expiries/memory: {:.1} bytes per armed expiry (1M armed, the caller's handles excluded)",
        (held - handles) as f64 / MILLION as f64
    );
    drop(armed);
    drop(timers);

    let mut group = c.benchmark_group("timers/expiries");
    group.sample_size(10);
    group.throughput(Throughput::Elements(MILLION as u64));
    group.bench_function("arm_then_disarm/1M", |b| {
        b.iter(|| {
            let mut timers = ExpiryTimers::default();
            let armed: Vec<_> = ids
                .iter()
                .zip(&offsets)
                .map(|(id, &at)| timers.arm(at, id))
                .collect();
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
