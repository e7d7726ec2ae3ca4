//! The durable path's stages, as the load reports them: the runtime tells each stage of
//! each durable change and each stall (`parkway::StageSink`); [`Stages`] keeps an HDR
//! histogram of microseconds a stage, counts the stalls by what the engine was doing, and
//! describes the longest.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hdrhistogram::Histogram;
use parkway::{Stage, StageSink};

/// Locks `m`, whatever a panicked holder left: a histogram is whole between records.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How many stalls are described, the longest; the others are only counted.
const DESCRIBED: usize = 16;

/// The histograms of the stages, and the stalls seen.
pub(crate) struct Stages {
    /// One histogram of microseconds per stage, in [`Stage::ALL`]'s order.
    histograms: [Mutex<Histogram<u64>>; 6],
    /// The stalls seen.
    stalls: Mutex<Stalls>,
}

/// The stalls seen: counted by what the engine was doing, the first few described.
#[derive(Default)]
struct Stalls {
    /// How many stalls there were.
    count: u64,
    /// How many stalls fell while the engine was doing each thing it reported.
    by_activity: Vec<(String, u64)>,
    /// The [`DESCRIBED`] longest stalls, longest first, with how long each took.
    described: Vec<(Duration, String)>,
}

impl Default for Stages {
    fn default() -> Self {
        Stages {
            histograms: std::array::from_fn(|_| Mutex::new(histogram())),
            stalls: Mutex::new(Stalls::default()),
        }
    }
}

impl StageSink for Stages {
    /// Record that `stage` took `took`.
    fn record(&self, stage: Stage, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
        let index = Stage::ALL.iter().position(|s| *s == stage).unwrap_or(0);
        lock(&self.histograms[index]).saturating_record(micros);
    }

    /// Note a stall of `stage`, which took `took`; the engine was doing `began` as it
    /// began and `ended` as it ended (each thing it does, named, its kind first).
    fn stalled(&self, stage: Stage, took: Duration, began: &[String], ended: &[String]) {
        let mut stalls = lock(&self.stalls);
        stalls.count += 1;
        // Each kind of activity once a stall, without its figures: `flushing 2
        // memtables` counts as `flushing`.
        let mut kinds: Vec<&str> = Vec::new();
        for what in began.iter().chain(ended) {
            let kind = what.split_whitespace().next().unwrap_or_default();
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        if kinds.is_empty() {
            kinds.push("nothing");
        }
        for kind in kinds {
            match stalls.by_activity.iter_mut().find(|(k, _)| k == kind) {
                Some((_, n)) => *n += 1,
                None => stalls.by_activity.push((kind.to_owned(), 1)),
            }
        }
        let shown = |doing: &[String]| {
            if doing.is_empty() {
                "nothing reported".to_owned()
            } else {
                doing.join(", ")
            }
        };
        let at = stalls
            .described
            .partition_point(|(longer, _)| *longer >= took);
        if at < DESCRIBED {
            let line = format!(
                "{} took {} ms: as it began {}; as it ended {}",
                stage.name(),
                took.as_millis(),
                shown(began),
                shown(ended)
            );
            stalls.described.insert(at, (took, line));
            stalls.described.truncate(DESCRIBED);
        }
    }
}

impl Stages {
    /// What was measured since the last report, which starts the next afresh.
    pub(crate) fn take(&self) -> StageReport {
        let stages = Stage::ALL
            .iter()
            .zip(&self.histograms)
            .map(|(stage, histogram)| {
                let mut h = lock(histogram);
                let figures = StageFigures {
                    stage: stage.name().to_owned(),
                    count: h.len(),
                    p50: h.value_at_quantile(0.5),
                    p90: h.value_at_quantile(0.9),
                    p99: h.value_at_quantile(0.99),
                    p999: h.value_at_quantile(0.999),
                    max: h.max(),
                };
                h.reset();
                figures
            })
            .collect();
        let stalls = std::mem::take(&mut *lock(&self.stalls));
        StageReport {
            stages,
            stalls: stalls.count,
            stalls_by_activity: stalls.by_activity,
            stalls_described: stalls.described.into_iter().map(|(_, line)| line).collect(),
        }
    }
}

/// Where durable changes spent their time, stage by stage, since the last report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StageReport {
    /// One entry per stage, in the order a change goes through them.
    pub stages: Vec<StageFigures>,
    /// Writes and syncs that took longer than the stall threshold.
    pub stalls: u64,
    /// How many stalls fell while the engine was doing each kind of thing.
    pub stalls_by_activity: Vec<(String, u64)>,
    /// The longest stalls, longest first, each with what the engine was doing.
    pub stalls_described: Vec<String>,
}

/// The percentiles of one stage, in microseconds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StageFigures {
    /// The stage's name.
    pub stage: String,
    /// How many times it was measured.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Longest.
    pub max: u64,
}

/// An empty latency histogram: 1 µs to 1 h, three significant figures (the visits' and
/// the stages' alike).
pub(crate) fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .expect("1 µs to 1 h at three significant figures are valid bounds")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each stage keeps its own figures, and stalls are counted by the kind of thing
    /// the engine was doing, the first ones described.
    #[test]
    fn stages_and_stalls_are_reported_apart() {
        let stages = Stages::default();
        for ms in [1, 2, 3, 100] {
            stages.record(Stage::Sync, Duration::from_millis(ms));
        }
        stages.record(Stage::Write, Duration::from_micros(10));
        stages.stalled(
            Stage::Sync,
            Duration::from_millis(100),
            &["flushing 2 memtables".to_owned(), "compacting 1".to_owned()],
            &["flushing 1 memtables".to_owned()],
        );
        stages.stalled(Stage::Write, Duration::from_millis(6), &[], &[]);
        stages.stalled(
            Stage::Sync,
            Duration::from_millis(200),
            &[],
            &["compacting 1".to_owned()],
        );
        let report = stages.take();
        let sync = &report.stages[3];
        assert_eq!((sync.stage.as_str(), sync.count), ("sync", 4));
        assert!(sync.p50 >= 1_900 && sync.p50 <= 3_100, "{sync:?}");
        assert!(sync.max >= 99_000, "{sync:?}");
        assert_eq!(report.stages[2].count, 1);
        assert_eq!(report.stages[0].count, 0);
        assert_eq!(report.stalls, 3);
        assert_eq!(
            report.stalls_by_activity,
            vec![
                ("flushing".to_owned(), 1),
                ("compacting".to_owned(), 2),
                ("nothing".to_owned(), 1)
            ]
        );
        assert_eq!(
            report.stalls_described,
            [
                "sync took 200 ms: as it began nothing reported; as it ended compacting 1",
                "sync took 100 ms: as it began flushing 2 memtables, compacting 1; as it ended flushing 1 memtables",
                "write took 6 ms: as it began nothing reported; as it ended nothing reported",
            ]
        );
        let next = stages.take();
        assert!(next.stages.iter().all(|s| s.count == 0), "{next:?}");
        assert_eq!(next.stalls, 0);
    }
}
