//! The report of a load run: figures, the account, and the bare baseline.

use std::collections::BTreeMap;
use std::fmt;

use hdrhistogram::Histogram;
use serde::Serialize;

use super::account::{Left, Observed};
use super::bare::Bare;
use super::config::LoadConfig;
use super::drive::{Client, Latencies, Prefilled};
use parkway::{Stats, StoreStats};

use super::stages::StageReport;

/// Whether nothing was lost: each line of the account, with both of its sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Account {
    /// Asks raised (prefill included).
    pub asks_raised: u64,
    /// Resolved by a resume.
    pub resumed: u64,
    /// Resolved by a cancel.
    pub cancelled: u64,
    /// Resolved by their expiry.
    pub expired: u64,
    /// Still `asking` or `running` at the end.
    pub open: u64,
    /// Runs that finished or failed.
    pub outcomes: u64,
    /// Handed to a resuming visitor.
    pub delivered: u64,
    /// Taken from the subject.
    pub taken: u64,
    /// Dropped past the retention horizon.
    pub dropped: u64,
    /// Still waiting on a subject at the end.
    pub waiting: u64,
    /// Waiting outcomes stored.
    pub stored: u64,
    /// Events the account could not read.
    pub events_lagged: u64,
    /// Every line that did not balance, in words; empty when nothing was lost.
    pub imbalances: Vec<String>,
    /// The sum of every imbalance and every unread event: 0 when nothing was lost.
    pub lost: u64,
}

impl Account {
    /// Balance the visitors' counts against the runtime's events and what is left.
    pub(crate) fn balance(
        client: &Client,
        observed: &Observed,
        left: &Left,
        stats: &Stats,
        prefill: &Client,
    ) -> Self {
        let mut imbalances = Vec::new();
        let mut lost = observed.lagged + left.unread;
        let mut check = |what: &str, lhs: u64, rhs: u64| {
            if lhs != rhs {
                lost += lhs.abs_diff(rhs);
                imbalances.push(format!("{what}: {lhs} != {rhs}"));
            }
        };
        let o = observed;
        let delivered = client.delivered + prefill.delivered;
        let taken = client.taken + prefill.taken;
        check(
            "asks raised = resumed + cancelled + expired + open",
            o.asks,
            o.resumed + o.cancelled + o.expired + left.open,
        );
        check(
            "outcomes = delivered + taken + dropped + waiting",
            o.finished + o.failed,
            delivered + taken + o.dropped + left.waiting,
        );
        check(
            "stored = taken + dropped + waiting",
            o.stored,
            o.taken + o.dropped + left.waiting,
        );
        // An `asker` raises exactly one ask; when that ask is cancelled or killed by its
        // expiry before the first activation ends, the start record is the cancellation.
        check(
            "asks raised = asks in the start records + starts cancelled before their record",
            o.asks,
            client.asks_seen
                + prefill.asks_seen
                + client.starts_cancelled
                + prefill.starts_cancelled,
        );
        check("takes the visitors saw = takes reported", taken, o.taken);
        check(
            "cancels the visitors saw = cancels reported",
            client.cancelled + prefill.cancelled,
            o.cancelled,
        );
        check(
            "the runtime's open count = open + waiting",
            stats.caller_open as u64,
            left.open + left.waiting,
        );
        check("runs not ended = open asks", stats.runs as u64, left.open);
        check(
            "resumes that handed back no final outcome",
            client.delivered_other + prefill.delivered_other,
            0,
        );
        if observed.lagged > 0 {
            imbalances.push(format!("{} events were not read", observed.lagged));
        }
        if left.unread > 0 {
            imbalances.push(format!("{} subjects could not be listed", left.unread));
        }
        Account {
            asks_raised: o.asks,
            resumed: o.resumed,
            cancelled: o.cancelled,
            expired: o.expired,
            open: left.open,
            outcomes: o.finished + o.failed,
            delivered,
            taken,
            dropped: o.dropped,
            waiting: left.waiting,
            stored: o.stored,
            events_lagged: o.lagged,
            imbalances,
            lost,
        }
    }
}

/// What a load run measured. Serialised, it is the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Subjects.
    pub subjects: usize,
    /// Concurrent visitors.
    pub concurrency: usize,
    /// Threads of the async runtime and of the bare baseline.
    pub workers: usize,
    /// Offered visits per second, if limited.
    pub offered_rate: Option<u64>,
    /// The measured visits: their count, rate and latencies, and what they did.
    #[serde(flatten)]
    pub measured: Measured,
    /// Refused visits by kind of error (prefill included), with the first message.
    pub errors: BTreeMap<String, (u64, String)>,
    /// Asks started before the measured visits.
    pub prefilled_asks: u64,
    /// Resident memory after the prefill, bytes.
    pub rss_after_prefill_bytes: u64,
    /// Resident memory at the end, once every idle subject passivated and the allocator
    /// gave back the pages it kept free: what the run's parked asks and their subjects
    /// hold, bytes.
    pub rss_held_bytes: u64,
    /// Peak resident memory of the run, read before the closing listing and the bare
    /// baseline (which convert every parked set once more), bytes.
    pub peak_rss_bytes: u64,
    /// Peak resident memory of the whole command, the closing listing and the bare
    /// baseline included (the process's `VmHWM` at the end), bytes.
    pub process_peak_rss_bytes: u64,
    /// Subjects with an actor at the end, after the passivation delay.
    pub live_subjects: usize,
    /// Subjects kept as data, without an actor, at the end.
    pub passive_subjects: usize,
    /// The bytes of packed state the passive subjects hold at the end.
    pub passive_bytes: usize,
    /// Armed timers at the end.
    pub timers: usize,
    /// The account.
    pub account: Account,
    /// The sum of every imbalance in the account: must be 0.
    pub lost: u64,
    /// Bare-baseline visits per second; 0 when there were no measured visits to compare
    /// with, and the baseline was not run.
    pub bare_visits_per_sec: f64,
    /// Bare visits whose plan had a problem.
    pub bare_problems: u64,
    /// `bare_visits_per_sec / visits_per_sec`; absent without measured visits.
    pub overhead_ratio: Option<f64>,
    /// The durable store during the measured visits, with `--data`.
    pub store: Option<Durable>,
    /// Where durable changes spent their time during the measured visits, stage by
    /// stage, with `--stages`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<StageReport>,
}

/// What the durable store did during the measured visits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Durable {
    /// Syncs made.
    pub syncs: u64,
    /// Syncs per second.
    pub syncs_per_sec: f64,
    /// Changes made durable.
    pub changes: u64,
    /// Changes per sync: what group commit gathered.
    pub mean_group: f64,
    /// The largest group since the store opened.
    pub largest_group: u64,
    /// Bytes written per measured visit.
    pub bytes_per_visit: f64,
    /// Keys written (puts and deletes) per measured visit.
    pub keys_per_visit: f64,
}

impl Durable {
    /// The store's work between `before` and `after`, over `seconds` and `visits`.
    fn between(before: &StoreStats, after: &StoreStats, seconds: f64, visits: u64) -> Self {
        let syncs = after.syncs.saturating_sub(before.syncs);
        let changes = after.batches.saturating_sub(before.batches);
        let bytes = after.bytes.saturating_sub(before.bytes);
        let keys = after.keys.saturating_sub(before.keys);
        let per = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
        Durable {
            syncs,
            syncs_per_sec: per(syncs as f64, seconds),
            changes,
            mean_group: per(changes as f64, syncs as f64),
            largest_group: after.largest_group,
            bytes_per_visit: per(bytes as f64, visits as f64),
            keys_per_visit: per(keys as f64, visits as f64),
        }
    }
}

/// Latency percentiles of one kind of visit, in microseconds; zero without visits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Slowest.
    pub max_us: u64,
}

impl Latency {
    /// The percentiles of `h`.
    pub(crate) fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }
}

/// What the measured visits showed: their count, rate and latencies, and what they did.
/// Both [`Report`] and [`RemoteReport`](super::remote::RemoteReport) carry it; its
/// fields stand among theirs in the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct Measured {
    /// Measured visits.
    pub visits: u64,
    /// Their wall-clock time.
    pub seconds: f64,
    /// Visits per second.
    pub visits_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Slowest visit, µs.
    pub max_us: u64,
    /// Mean latency, µs.
    pub mean_us: f64,
    /// Measured visits by kind.
    pub by_op: BTreeMap<String, u64>,
    /// Latency percentiles by kind of visit.
    pub by_op_latency: BTreeMap<String, Latency>,
    /// Runs started by measured visits.
    pub started: u64,
    /// Measured visits that applied nothing (nothing fitting in `$parked`, or a full
    /// subject).
    pub idle: u64,
    /// Asks the measured visits resolved: resumed or cancelled (asks that expired are
    /// resolved by the clock, not by a visit, and are not counted here).
    pub resolved: u64,
    /// `resolved` per second of the measured visits.
    pub resolved_per_sec: f64,
}

impl Measured {
    /// The figures of `latencies` over `seconds`, with what the visits did: the runs
    /// they started, how many were idle, and the asks they resolved.
    pub(crate) fn new(latencies: &Latencies, seconds: f64, did: Did) -> Self {
        let Did {
            started,
            idle,
            resolved,
        } = did;
        let h = &latencies.all();
        let visits = h.len();
        Measured {
            visits,
            seconds,
            visits_per_sec: per_sec(visits, seconds),
            p50_us: at(h, 0.5),
            p90_us: at(h, 0.9),
            p99_us: at(h, 0.99),
            p999_us: at(h, 0.999),
            max_us: if h.is_empty() { 0 } else { h.max() },
            mean_us: if h.is_empty() { 0.0 } else { h.mean() },
            by_op: latencies.counts(),
            by_op_latency: latencies
                .by_op()
                .map(|(op, h)| (op.to_owned(), Latency::of(h)))
                .collect(),
            started,
            idle,
            resolved,
            resolved_per_sec: per_sec(resolved, seconds),
        }
    }
}

/// `n` per second over `seconds`; 0 without time.
pub(crate) fn per_sec(n: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

/// The value at quantile `q` of `h`; 0 when `h` is empty.
fn at(h: &Histogram<u64>, q: f64) -> u64 {
    if h.is_empty() {
        0
    } else {
        h.value_at_quantile(q)
    }
}

/// What the measured visits did, as their visitors counted it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Did {
    /// Runs started.
    pub(crate) started: u64,
    /// Visits that applied nothing.
    pub(crate) idle: u64,
    /// Asks resumed or cancelled.
    pub(crate) resolved: u64,
}

/// The report's lines for the measured visits: count and rate, what they did, and their
/// latencies, overall and by kind.
impl fmt::Display for Measured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "visits      {} in {:.2} s: {:.0} visits/s  ({})",
            self.visits,
            self.seconds,
            self.visits_per_sec,
            self.by_op
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        writeln!(
            f,
            "            {} runs started, {} visits applied nothing, {} asks resolved ({:.0}/s)",
            self.started, self.idle, self.resolved, self.resolved_per_sec
        )?;
        writeln!(
            f,
            "latency µs  p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  (mean {:.1})",
            self.p50_us, self.p90_us, self.p99_us, self.p999_us, self.max_us, self.mean_us
        )?;
        writeln!(
            f,
            "by kind µs  {}",
            self.by_op_latency
                .iter()
                .map(|(k, l)| format!("{k} p50 {} p99 {} max {}", l.p50_us, l.p99_us, l.max_us))
                .collect::<Vec<_>>()
                .join(" · ")
        )
    }
}

/// What [`Report::new`] is made from.
pub(crate) struct Parts<'a> {
    pub(crate) config: &'a LoadConfig,
    pub(crate) client: Client,
    pub(crate) latencies: Latencies,
    pub(crate) seconds: f64,
    pub(crate) account: Account,
    pub(crate) prefilled: Prefilled,
    pub(crate) stats: Stats,
    pub(crate) peak_rss: u64,
    pub(crate) process_peak_rss: u64,
    pub(crate) rss_after_prefill: u64,
    pub(crate) rss_held: u64,
    pub(crate) bare: Bare,
    /// The store's figures before and after the measured visits, with a data directory.
    pub(crate) store: Option<(StoreStats, StoreStats)>,
    /// The durable path's stages during the measured visits, when measured.
    pub(crate) stages: Option<StageReport>,
}

impl Report {
    pub(crate) fn new(parts: Parts<'_>) -> Self {
        let Parts {
            config,
            client,
            latencies,
            seconds,
            account,
            prefilled,
            stats,
            peak_rss,
            process_peak_rss,
            rss_after_prefill,
            rss_held,
            bare,
            store,
            stages,
        } = parts;
        let did = Did {
            started: client.started,
            idle: client.idle,
            resolved: client.resumed + client.cancelled,
        };
        let measured = Measured::new(&latencies, seconds, did);
        let (visits, rate) = (measured.visits, measured.visits_per_sec);
        let mut errors: BTreeMap<String, (u64, String)> = BTreeMap::new();
        for (kind, (n, message)) in client.errors.iter().chain(&prefilled.client.errors) {
            errors
                .entry((*kind).to_owned())
                .or_insert((0, message.clone()))
                .0 += n;
        }
        Report {
            subjects: config.subjects,
            concurrency: config.concurrency,
            workers: config.workers,
            offered_rate: config.rate,
            measured,
            errors,
            prefilled_asks: prefilled.client.asks_seen,
            rss_after_prefill_bytes: rss_after_prefill,
            rss_held_bytes: rss_held,
            peak_rss_bytes: peak_rss,
            process_peak_rss_bytes: process_peak_rss,
            live_subjects: stats.live_subjects,
            passive_subjects: stats.passive_subjects,
            passive_bytes: stats.passive_bytes,
            timers: stats.timers,
            lost: account.lost,
            account,
            bare_visits_per_sec: bare.rate(),
            bare_problems: bare.problems,
            overhead_ratio: (rate > 0.0 && bare.visits > 0).then(|| bare.rate() / rate),
            store: store.map(|(before, after)| Durable::between(&before, &after, seconds, visits)),
            stages,
        }
    }

    /// Whether the run proved nothing was lost and met no refusal.
    pub fn clean(&self) -> bool {
        self.lost == 0 && self.errors.is_empty() && self.bare_problems == 0
    }
}

/// The stages of the durable path, one line each, then the stalls.
fn write_stages(f: &mut fmt::Formatter<'_>, report: &StageReport) -> fmt::Result {
    for s in &report.stages {
        writeln!(
            f,
            "stage µs    {:<9} p50 {}  p90 {}  p99 {}  p99.9 {}  max {}  ({} measured)",
            s.stage, s.p50, s.p90, s.p99, s.p999, s.max, s.count
        )?;
    }
    let by: Vec<String> = report
        .stalls_by_activity
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    writeln!(
        f,
        "stalls      {} writes or syncs over 5 ms; the engine was: {}",
        report.stalls,
        if by.is_empty() {
            "-".to_owned()
        } else {
            by.join(", ")
        }
    )?;
    for line in report.stalls_described.iter().take(8) {
        writeln!(f, "  {line}")?;
    }
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.account;
        writeln!(
            f,
            "{} subjects, {} visitors, {} workers{}",
            self.subjects,
            self.concurrency,
            self.workers,
            self.offered_rate
                .map(|r| format!(", {r} visits/s offered"))
                .unwrap_or_default()
        )?;
        write!(f, "{}", self.measured)?;
        writeln!(
            f,
            "memory      peak RSS {:.1} MiB; {:.1} MiB after {} prefilled asks; {:.1} MiB held at the end, subjects idle; {:.1} MiB for the whole command",
            mib(self.peak_rss_bytes),
            mib(self.rss_after_prefill_bytes),
            self.prefilled_asks,
            mib(self.rss_held_bytes),
            mib(self.process_peak_rss_bytes)
        )?;
        writeln!(
            f,
            "subjects    {} with an actor, {} passive (packed in {:.1} MiB); {} timers armed",
            self.live_subjects,
            self.passive_subjects,
            mib(self.passive_bytes as u64),
            self.timers
        )?;
        writeln!(
            f,
            "asks        {} raised = {} resumed + {} cancelled + {} expired + {} open",
            a.asks_raised, a.resumed, a.cancelled, a.expired, a.open
        )?;
        writeln!(
            f,
            "outcomes    {} = {} delivered + {} taken + {} dropped + {} waiting",
            a.outcomes, a.delivered, a.taken, a.dropped, a.waiting
        )?;
        writeln!(f, "lost        {}", self.lost)?;
        for line in &a.imbalances {
            writeln!(f, "  imbalance: {line}")?;
        }
        for (kind, (n, message)) in &self.errors {
            writeln!(f, "  refused {kind} x{n}: {message}")?;
        }
        if let Some(d) = &self.store {
            writeln!(
                f,
                "durable     {} syncs ({:.0}/s), {} changes, {:.1} per sync (largest {}), {:.0} bytes and {:.1} keys per visit",
                d.syncs,
                d.syncs_per_sec,
                d.changes,
                d.mean_group,
                d.largest_group,
                d.bytes_per_visit,
                d.keys_per_visit
            )?;
        }
        if let Some(report) = &self.stages {
            write_stages(f, report)?;
        }
        match self.overhead_ratio {
            Some(ratio) => writeln!(
                f,
                "bare        {:.0} visits/s: overhead ratio {ratio:.2}",
                self.bare_visits_per_sec
            ),
            None if self.measured.visits == 0 => {
                writeln!(f, "bare        not measured: no visits to compare with")
            }
            None => writeln!(f, "bare        {:.0} visits/s", self.bare_visits_per_sec),
        }
    }
}
