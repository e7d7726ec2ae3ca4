//! The bare baseline: the workload's compiled door expressions over the same inputs and
//! `$parked` values, evaluated in a tight loop with no runtime around them.
//!
//! Each thread replays the first visits of the visitors' seeded streams, in turn, with
//! the same door variables a visit binds (`$parked` as the subject keeps it, converted
//! once; `$subject`, `$door` and `$now` converted per visit, as the subject does), and
//! reads the plan off the outputs. It applies nothing. Evaluation runs on the calling
//! thread: the runtime's hand-off to its evaluation pool is part of what the ratio
//! measures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use chrono::SecondsFormat;
use serde_json::Value;

use super::config::LoadConfig;
use super::workload::{self, Visits};
use parkway::Runtime;
use parkway::bench::{Contracts, Parked};

/// How many visits each visitor stream contributes to the replayed sequence, at most.
const PER_VISITOR: usize = 2_000;
/// How long the replayed sequence is, at most (each visit holds its input, a few
/// hundred bytes): with many visitors each contributes fewer visits, so the baseline's
/// memory does not grow with `--concurrency` (`docs/benchmarks.md`).
const SEQUENCE: usize = 128_000;

/// What the bare loop measured.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Bare {
    /// Visits evaluated.
    pub(crate) visits: u64,
    /// Over this many seconds.
    pub(crate) seconds: f64,
    /// Visits whose plan had a problem (there should be none).
    pub(crate) problems: u64,
}

impl Bare {
    /// Visits per second.
    pub(crate) fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.visits as f64 / self.seconds
        } else {
            0.0
        }
    }
}

/// Evaluate the workload's visits against `parked` (one per subject) on
/// `config.workers` threads for `config.bare_for`.
pub(crate) fn measure(rt: &Runtime, config: &LoadConfig, parked: &[Parked]) -> Bare {
    let Some(contracts) = Contracts::of(rt, &[workload::WORK, workload::SWEEP]) else {
        return Bare::default();
    };
    let mut streams: Vec<Visits> = (0..config.concurrency)
        .map(|i| Visits::new(config, i))
        .collect();
    let per_visitor = (SEQUENCE / streams.len().max(1)).clamp(1, PER_VISITOR);
    let mut sequence = Vec::with_capacity(per_visitor * streams.len());
    for _ in 0..per_visitor {
        for stream in &mut streams {
            sequence.push(stream.next_visit());
        }
    }
    let names: Vec<Value> = (0..config.subjects)
        .map(|i| Value::String(workload::subject_name(i)))
        .collect();
    let now = rt.now().to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let visits = AtomicU64::new(0);
    let problems = AtomicU64::new(0);
    let started = Instant::now();
    let until = started + config.bare_for;
    std::thread::scope(|scope| {
        for thread in 0..config.workers {
            let (sequence, names, now) = (&sequence, &names, &now);
            let contracts = &contracts;
            let (visits, problems) = (&visits, &problems);
            scope.spawn(move || {
                let (mut done, mut bad) = (0u64, 0u64);
                let mut at = thread;
                loop {
                    // The clock is read once every 64 visits.
                    if done % 64 == 0 && Instant::now() >= until {
                        break;
                    }
                    let (op, subject, input) = &sequence[at % sequence.len()];
                    at += config.workers;
                    let door = usize::from(op.door() != workload::WORK);
                    let planned = contracts.evaluate(
                        door,
                        input,
                        parked.get(*subject),
                        &names[*subject],
                        now,
                    );
                    if !planned {
                        bad += 1;
                    }
                    done += 1;
                }
                visits.fetch_add(done, Ordering::Relaxed);
                problems.fetch_add(bad, Ordering::Relaxed);
            });
        }
    });
    Bare {
        visits: visits.into_inner(),
        seconds: started.elapsed().as_secs_f64(),
        problems: problems.into_inner(),
    }
}
