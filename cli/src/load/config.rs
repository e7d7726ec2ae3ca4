//! What a load run does: how many subjects and visitors, the mix, and when it stops.

use std::time::Duration;

use thiserror::Error;

/// When the visits stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// After this many visits.
    Count(u64),
    /// After this much wall-clock time.
    For(Duration),
}

/// The relative weights of the four kinds of visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Start a run that asks its caller.
    pub start: u32,
    /// Resume the oldest asking entry.
    pub resume: u32,
    /// Take the oldest waiting outcome.
    pub take: u32,
    /// Cancel the oldest asking entry.
    pub cancel: u32,
}

impl Default for Mix {
    /// 4 : 3 : 1 : 1.
    fn default() -> Self {
        Self {
            start: 4,
            resume: 3,
            take: 1,
            cancel: 1,
        }
    }
}

impl Mix {
    /// The sum of the weights.
    pub(crate) fn total(&self) -> u64 {
        u64::from(self.start)
            + u64::from(self.resume)
            + u64::from(self.take)
            + u64::from(self.cancel)
    }
}

/// A load run's parameters; [`LoadConfig::default`] is the reference workload at
/// a size that runs in seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Subjects visited, uniformly at random.
    pub subjects: usize,
    /// Visitors, each visiting one door at a time.
    pub concurrency: usize,
    /// When the visits stop.
    pub stop: Stop,
    /// Offered visits per second, spread over the visitors; `None` visits as fast as the
    /// runtime answers. With a rate, a visit's latency counts from when it was due, so
    /// falling behind shows in the percentiles.
    pub rate: Option<u64>,
    /// The mix of visits.
    pub mix: Mix,
    /// A start is refused by the door's own `start_expr` on a subject already holding
    /// this many entries.
    pub max_entries: usize,
    /// Asks started on every subject before the measured visits (at most `max_entries`),
    /// with a long expiry.
    pub prefill: usize,
    /// The expiry of the asks that expire during the run.
    pub short_ttl: Duration,
    /// The share of started asks with `short_ttl`; the rest wait an hour.
    pub short_share: f64,
    /// The share of short-lived asks that resume on expiry (the rest are killed).
    pub resume_share: f64,
    /// How long a waiting outcome is kept before it is dropped.
    pub retention: Duration,
    /// How long an idle subject keeps its actor.
    pub passivate_after: Duration,
    /// How many subjects may hold an actor before the one idle longest passivates at
    /// once; `None`: the runtime's default.
    pub max_live_subjects: Option<usize>,
    /// Seed of the visitors' choices.
    pub seed: u64,
    /// How long the bare baseline runs.
    pub bare_for: Duration,
    /// Threads the bare baseline uses: the runtime's worker count.
    pub workers: usize,
    /// Keep the runtime's state durable in this directory (new or empty), as an embedder
    /// with a data directory does; `None` runs in memory.
    pub data: Option<std::path::PathBuf>,
    /// Keep the runtime's state in this PostgreSQL database instead, whose schema holds
    /// no parkway tables yet.
    pub postgres: Option<String>,
    /// Measure where each durable change spends its time, stage by stage, during the
    /// measured visits (`Builder::measure_stages`).
    pub stages: bool,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self {
            subjects: 10_000,
            concurrency: 64,
            stop: Stop::Count(200_000),
            rate: None,
            mix: Mix::default(),
            max_entries: 10,
            prefill: 5,
            short_ttl: Duration::from_secs(1),
            short_share: 0.2,
            resume_share: 0.5,
            retention: Duration::from_secs(2),
            passivate_after: Duration::from_secs(5),
            max_live_subjects: None,
            seed: 1,
            bare_for: Duration::from_secs(2),
            workers: std::thread::available_parallelism().map_or(2, usize::from),
            data: None,
            postgres: None,
            stages: false,
        }
    }
}

/// Why a load run did not start.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A parameter is out of range; the message names it.
    #[error("{0}")]
    Invalid(String),
    /// The runtime did not build.
    #[error("the runtime did not build: {0}")]
    Build(#[from] parkway::BuildError),
    /// A workload door was refused.
    #[error("a workload door was refused: {0}")]
    Door(#[from] parkway::SaveError),
    /// The load tool's own machinery (a thread, a runtime) could not be set up.
    #[error("could not set up {0}")]
    Setup(String),
    /// Over HTTP: the server could not be reached; the message names it and why.
    #[error("{0}")]
    Unreachable(String),
    /// Over HTTP: the server refused the token, or the token lacks the visit scope.
    #[error("{0}")]
    Token(String),
    /// Over HTTP: the server does not serve the load's workload (its target and doors),
    /// or serves other doors under their names; the message says what differs.
    #[error("{0}")]
    Workload(String),
    /// The runtime stopped while the load ran (its store failed, say on a full disk):
    /// the visits stopped at once, and no report is made of them.
    #[error("the runtime stopped during the {phase}: {why}")]
    Stopped {
        /// The phase it stopped in: `prefill` or `visits`.
        phase: &'static str,
        /// Why: the store's failure, naming the directory and the cause, or a shutdown.
        why: String,
    },
}

impl LoadError {
    /// The runtime stopped during `phase`; `failure` is its store's, if that is why.
    pub(crate) fn stopped(phase: &'static str, failure: Option<String>) -> LoadError {
        let why = match failure {
            Some(failure) => format!("its store failed: {failure}"),
            None => "it was shut down".to_owned(),
        };
        LoadError::Stopped { phase, why }
    }
}

impl LoadConfig {
    /// Every parameter in range, or the first that is not, named.
    pub(crate) fn check(&self) -> Result<(), LoadError> {
        let bad = |m: String| Err(LoadError::Invalid(m));
        if self.subjects == 0 {
            return bad("subjects must be at least 1".into());
        }
        if self.concurrency == 0 {
            return bad("concurrency must be at least 1".into());
        }
        if self.workers == 0 {
            return bad("workers must be at least 1".into());
        }
        if let Some(dir) = &self.data
            && std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some())
        {
            return bad(format!(
                "--data {} holds something already: the load needs a new or empty directory",
                dir.display()
            ));
        }
        if self.stages && self.data.is_none() && self.postgres.is_none() {
            return bad("--stages measures the durable path: give --data or --postgres".into());
        }
        if self.mix.total() == 0 {
            return bad("the mix must give at least one kind of visit a weight".into());
        }
        if self.max_entries == 0 {
            return bad("max_entries must be at least 1".into());
        }
        if self.prefill > self.max_entries {
            return bad(format!(
                "prefill ({}) must not exceed max_entries ({})",
                self.prefill, self.max_entries
            ));
        }
        for (name, share) in [
            ("short_share", self.short_share),
            ("resume_share", self.resume_share),
        ] {
            if !(0.0..=1.0).contains(&share) {
                return bad(format!("{name} must be between 0 and 1, not {share}"));
            }
        }
        if self.short_ttl.is_zero() {
            return bad("short_ttl must be positive".into());
        }
        if self.rate == Some(0) {
            return bad("rate must be at least 1 visit per second".into());
        }
        if let Stop::For(d) = self.stop
            && d.is_zero()
        {
            return bad("the duration must be positive".into());
        }
        Ok(())
    }
}
