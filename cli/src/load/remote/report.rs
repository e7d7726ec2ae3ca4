//! The report of a `--url` run: the visits' figures, the baseline's beside them, and the
//! account.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

use super::super::config::LoadConfig;
use super::super::drive::Latencies;
pub(crate) use super::super::report::Did;
use super::super::report::{Account, Latency, Measured, per_sec};
use super::tally::Tally;

/// The baseline: the same client, at the same concurrency (and rate, if any), sending
/// `GET /healthz` to the same server: its HTTP stack with no runtime work.
#[derive(Debug, Clone, Serialize)]
pub struct Baseline {
    /// The path requested.
    pub path: &'static str,
    /// Requests answered or failed.
    pub requests: u64,
    /// Their wall-clock time.
    pub seconds: f64,
    /// Requests per second.
    pub requests_per_sec: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Slowest, µs.
    pub max_us: u64,
    /// Failed requests by kind, with the first message.
    pub errors: BTreeMap<String, (u64, String)>,
}

impl Baseline {
    /// The figures of `latencies` over `seconds`, with `errors`.
    pub(crate) fn new(latencies: &Latencies, seconds: f64, tally: Tally) -> Self {
        let h = latencies.all();
        let requests = h.len();
        let l = Latency::of(&h);
        Baseline {
            path: "/healthz",
            requests,
            seconds,
            requests_per_sec: per_sec(requests, seconds),
            p50_us: l.p50_us,
            p99_us: l.p99_us,
            max_us: l.max_us,
            errors: tally.errors,
        }
    }
}

/// What a `--url` run measured. Serialised, it is the `--json` output.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteReport {
    /// The server.
    pub url: String,
    /// The load's subjects are this prefix and a number, fresh for each run.
    pub subject_prefix: String,
    /// Whether the server's doors were read and found to be the load's (a token with
    /// the admin scope may read them; otherwise only their behaviour was checked).
    pub doors_checked: bool,
    /// Subjects.
    pub subjects: usize,
    /// Concurrent visitors.
    pub concurrency: usize,
    /// Threads of the client's async runtime.
    pub workers: usize,
    /// Offered visits per second, if limited.
    pub offered_rate: Option<u64>,
    /// The measured visits: their count, rate and latencies, and what they did.
    #[serde(flatten)]
    pub measured: Measured,
    /// Failed visits by kind (prefill included), with the first message.
    pub errors: BTreeMap<String, (u64, String)>,
    /// Asks started before the measured visits.
    pub prefilled_asks: u64,
    /// How long the run waited after the visits for the short asks' deadlines to pass
    /// before listing the subjects, seconds.
    pub settle_seconds: f64,
    /// The account, kept by interaction id (`docs/benchmarks.md`, "Over HTTP").
    pub account: Account,
    /// The sum of every imbalance in the account: must be 0.
    pub lost: u64,
    /// The `GET /healthz` baseline, measured before the prefill; absent with
    /// `--bare-for 0s`.
    pub baseline: Option<Baseline>,
    /// Visits per second ÷ the baseline's requests per second.
    pub rate_vs_baseline: Option<f64>,
    /// The visits' p50 ÷ the baseline's.
    pub p50_vs_baseline: Option<f64>,
    /// The visits' p99 ÷ the baseline's.
    pub p99_vs_baseline: Option<f64>,
}

/// What [`RemoteReport::new`] is made from.
pub(crate) struct Parts<'a> {
    pub(crate) config: &'a LoadConfig,
    pub(crate) url: String,
    pub(crate) subject_prefix: String,
    pub(crate) doors_checked: bool,
    pub(crate) prefilled_asks: u64,
    /// What the measured visits did.
    pub(crate) did: Did,
    /// Failed requests of the prefill and the visits.
    pub(crate) errors: BTreeMap<String, (u64, String)>,
    pub(crate) latencies: Latencies,
    pub(crate) seconds: f64,
    pub(crate) settle_seconds: f64,
    pub(crate) account: Account,
    pub(crate) baseline: Option<Baseline>,
}

fn ratio(a: f64, b: f64) -> Option<f64> {
    (a > 0.0 && b > 0.0).then(|| a / b)
}

impl RemoteReport {
    pub(crate) fn new(parts: Parts<'_>) -> Self {
        let Parts {
            config,
            url,
            subject_prefix,
            doors_checked,
            prefilled_asks,
            did,
            errors,
            latencies,
            seconds,
            settle_seconds,
            account,
            baseline,
        } = parts;
        let measured = Measured::new(&latencies, seconds, did);
        let (rate, p50, p99) = (measured.visits_per_sec, measured.p50_us, measured.p99_us);
        let vs = |f: &dyn Fn(&Baseline) -> f64, ours: f64| {
            baseline.as_ref().and_then(|b| ratio(ours, f(b)))
        };
        RemoteReport {
            url,
            subject_prefix,
            doors_checked,
            subjects: config.subjects,
            concurrency: config.concurrency,
            workers: config.workers,
            offered_rate: config.rate,
            measured,
            errors,
            prefilled_asks,
            settle_seconds,
            lost: account.lost,
            account,
            rate_vs_baseline: vs(&|b| b.requests_per_sec, rate),
            p50_vs_baseline: vs(&|b| b.p50_us as f64, p50 as f64),
            p99_vs_baseline: vs(&|b| b.p99_us as f64, p99 as f64),
            baseline,
        }
    }

    /// Whether the run proved nothing was lost and no request failed.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.errors.is_empty()
            && self.baseline.as_ref().is_none_or(|b| b.errors.is_empty())
    }
}

impl fmt::Display for RemoteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.account;
        writeln!(
            f,
            "over HTTP   {} ({}); subjects {}0 … {}{}",
            self.url,
            if self.doors_checked {
                "its doors read and found to be the load's"
            } else {
                "its doors behave as the load's; the token may not read them"
            },
            self.subject_prefix,
            self.subject_prefix,
            self.subjects.saturating_sub(1)
        )?;
        writeln!(
            f,
            "{} subjects, {} visitors, {} client workers{}",
            self.subjects,
            self.concurrency,
            self.workers,
            self.offered_rate
                .map(|r| format!(", {r} visits/s offered"))
                .unwrap_or_default()
        )?;
        write!(f, "{}", self.measured)?;
        match &self.baseline {
            Some(b) => {
                writeln!(
                    f,
                    "healthz     {} in {:.2} s: {:.0} requests/s, p50 {} p99 {} max {} µs",
                    b.requests, b.seconds, b.requests_per_sec, b.p50_us, b.p99_us, b.max_us
                )?;
                let show = |r: Option<f64>| r.map_or("-".to_owned(), |r| format!("{r:.2}"));
                writeln!(
                    f,
                    "vs healthz  visits/s {}×, p50 {}×, p99 {}×",
                    show(self.rate_vs_baseline),
                    show(self.p50_vs_baseline),
                    show(self.p99_vs_baseline)
                )?;
                for (kind, (n, message)) in &b.errors {
                    writeln!(f, "  healthz failed {kind} x{n}: {message}")?;
                }
            }
            None => writeln!(f, "healthz     not measured (--bare-for 0s)")?,
        }
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
        writeln!(
            f,
            "            listed {:.2} s after the visits, once every short ask's deadline had passed",
            self.settle_seconds
        )?;
        writeln!(f, "lost        {}", self.lost)?;
        for line in &a.imbalances {
            writeln!(f, "  imbalance: {line}")?;
        }
        for (kind, (n, message)) in &self.errors {
            writeln!(f, "  refused {kind} x{n}: {message}")?;
        }
        Ok(())
    }
}
