//! `parkway load`: concurrent door visits against a fresh runtime, with a progress bar,
//! then throughput, latency percentiles, peak memory, the account, and the bare baseline;
//! with `--url`, the same visits over HTTP against a live `parkway serve`, beside a
//! `GET /healthz` baseline; with `--url --mcp`, MCP tool calls answered in a round.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use parkway_cli::load::remote::{self, Server};
use parkway_cli::load::{self, LoadConfig, Mix, Phase, Progress, Stop};

/// Arguments of `parkway load`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Subjects the visits spread over, uniformly.
    #[arg(long, default_value_t = 10_000)]
    subjects: usize,
    /// Concurrent visitors.
    #[arg(long, short = 'c', default_value_t = 64)]
    concurrency: usize,
    /// Stop after this many measured visits (the default, 200000, unless --duration).
    #[arg(long, conflicts_with = "duration")]
    visits: Option<u64>,
    /// Stop after this long instead (a duration such as 10s).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
    /// Offered visits per second; without it, visitors go as fast as they are answered.
    #[arg(long)]
    rate: Option<u64>,
    /// Weights of start:resume:take:cancel visits.
    #[arg(long, default_value = "4:3:1:1", value_parser = parse_mix)]
    mix: Mix,
    /// A start is refused (by the door's own start_expr) on a subject holding this many
    /// entries.
    #[arg(long, default_value_t = 10)]
    max_entries: usize,
    /// Long-lived asks started on every subject before the measured visits, one subject
    /// at a time.
    #[arg(long, default_value_t = 5)]
    prefill: usize,
    /// The expiry of asks meant to expire during the run.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    short_ttl: Duration,
    /// Share of started asks that get the short expiry.
    #[arg(long, default_value_t = 0.2)]
    short_share: f64,
    /// Share of the short-lived asks that resume on expiry instead of being killed.
    #[arg(long, default_value_t = 0.5)]
    resume_share: f64,
    /// How long a waiting outcome is kept before it is dropped.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    retention: Duration,
    /// How long an idle subject keeps its actor.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    passivate_after: Duration,
    /// How many subjects may hold an actor before the one idle longest passivates at
    /// once (default: the runtime's, 10000).
    #[arg(long, value_name = "N")]
    max_live_subjects: Option<usize>,
    /// How long the bare baseline runs (with --url: the GET /healthz baseline).
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    bare_for: Duration,
    /// Worker threads (default: one per core).
    #[arg(long)]
    workers: Option<usize>,
    /// Seed of the visitors' choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Keep the runtime's state durable in this directory (new or empty), as an
    /// embedder with a data directory does; without it the runtime runs in memory. (To
    /// kill a durable load with kill -9 when you choose and have every acknowledged
    /// operation checked, use `parkway crash --by-hand`.)
    #[arg(long, value_name = "DIR")]
    data: Option<std::path::PathBuf>,
    /// Keep the runtime's state in this PostgreSQL database instead (a schema that holds
    /// no parkway tables yet: `options=-c search_path=NAME` in the URL names one).
    #[arg(long, value_name = "URL", conflicts_with = "data")]
    postgres: Option<String>,
    /// With --data: measure where each durable change spends its time during the
    /// measured visits (its turn on the subject, the wait for the writer, the write,
    /// the sync, the acknowledgement's way back) and what the store's engine was doing
    /// when a write or a sync stalled; reported as percentiles per stage.
    #[arg(long)]
    stages: bool,
    /// Visit a live `parkway serve` at this address (http://HOST:PORT) over HTTP instead
    /// of a runtime in this process; it must serve the load's workload
    /// (`parkway serve --targets examples/serve/load-targets.json`). The runtime's
    /// settings (--data, --retention, --passivate-after, --max-live-subjects) are then the
    /// server's.
    #[arg(long, value_name = "URL", conflicts_with_all = ["data", "postgres", "retention", "passivate_after", "max_live_subjects"])]
    url: Option<String>,
    /// With --url: a bearer token with the visit scope (with admin too, the server's
    /// doors are read and compared with the load's).
    #[arg(long, env = "PARKWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// With --url: instead of door visits, each client calls the MCP tool load_ask at
    /// /mcp, whose run asks its caller once, and answers the input_required round
    /// (protocol 2026-07-28, stateless); reports calls/s, each round's latency and an
    /// account of every call. The door workload's settings are not read.
    #[arg(long, requires = "url")]
    mcp: bool,
}

/// `start:resume:take:cancel`, four whole numbers.
fn parse_mix(text: &str) -> Result<Mix, String> {
    let parts: Vec<&str> = text.split(':').collect();
    let [start, resume, take, cancel] = parts[..] else {
        return Err(format!(
            "{text:?} is not four weights start:resume:take:cancel, such as 4:3:1:1"
        ));
    };
    let weight = |name: &str, w: &str| {
        w.trim()
            .parse::<u32>()
            .map_err(|_| format!("the {name} weight {w:?} is not a whole number"))
    };
    Ok(Mix {
        start: weight("start", start)?,
        resume: weight("resume", resume)?,
        take: weight("take", take)?,
        cancel: weight("cancel", cancel)?,
    })
}

impl Args {
    fn config(&self) -> LoadConfig {
        let defaults = LoadConfig::default();
        LoadConfig {
            subjects: self.subjects,
            concurrency: self.concurrency,
            stop: match (self.visits, self.duration) {
                (_, Some(d)) => Stop::For(d),
                (Some(n), None) => Stop::Count(n),
                (None, None) => defaults.stop,
            },
            rate: self.rate,
            mix: self.mix,
            max_entries: self.max_entries,
            prefill: self.prefill,
            short_ttl: self.short_ttl,
            short_share: self.short_share,
            resume_share: self.resume_share,
            retention: self.retention,
            passivate_after: self.passivate_after,
            max_live_subjects: self.max_live_subjects,
            seed: self.seed,
            bare_for: self.bare_for,
            workers: self.workers.unwrap_or(defaults.workers),
            data: self.data.clone(),
            postgres: self.postgres.clone(),
            stages: self.stages,
        }
    }
}

pub(crate) fn main(args: Args) -> ExitCode {
    let config = args.config();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers.max(1))
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("parkway load: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let progress = Progress::new();
    let bar = (!args.quiet).then(|| bar(&config, &progress));
    let result = match &args.url {
        None => runtime
            .block_on(load::run(&config, &progress))
            .map(|report| (report.clean(), Report::Local(report))),
        Some(url) => {
            let server = Server {
                url: url.clone(),
                token: args.token.clone().unwrap_or_default(),
            };
            if args.mcp {
                runtime
                    .block_on(remote::run_mcp(&config, &server, &progress))
                    .map(|report| (report.clean(), Report::Mcp(report)))
            } else {
                runtime
                    .block_on(remote::run(&config, &server, &progress))
                    .map(|report| (report.clean(), Report::Remote(report)))
            }
        }
    };
    if let Some((bar, stop, ticker)) = bar {
        stop.store(true, Ordering::Relaxed);
        let _ = ticker.join();
        bar.finish_and_clear();
    }
    let (clean, report) = match result {
        Ok(done) => done,
        Err(e) => {
            eprintln!("parkway load: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        let line = match &report {
            Report::Local(r) => serde_json::to_string(r),
            Report::Remote(r) => serde_json::to_string(r),
            Report::Mcp(r) => serde_json::to_string(r),
        };
        match line {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("parkway load: could not write the report: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        match &report {
            Report::Local(r) => print!("{r}"),
            Report::Remote(r) => print!("{r}"),
            Report::Mcp(r) => print!("{r}"),
        }
    }
    // Dropping the async runtime with thousands of actors takes a while and proves
    // nothing: the report is out.
    std::mem::forget(runtime);
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// A run's report: in process, or over HTTP.
enum Report {
    Local(load::Report),
    Remote(remote::RemoteReport),
    Mcp(remote::McpReport),
}

/// A progress bar on stderr, updated from a thread of its own.
fn bar(
    config: &LoadConfig,
    progress: &Arc<Progress>,
) -> (ProgressBar, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let bar = match config.stop {
        Stop::Count(n) => ProgressBar::new(n),
        Stop::For(_) => ProgressBar::new_spinner(),
    };
    let template = match config.stop {
        Stop::Count(_) => {
            "{spinner} {msg:8} [{elapsed_precise}] {wide_bar} {pos}/{len} visits ({per_sec})"
        }
        Stop::For(_) => "{spinner} {msg:8} [{elapsed_precise}] {pos} visits ({per_sec})",
    };
    let style =
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    let (shown, watched) = (bar.clone(), Arc::clone(progress));
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = Arc::clone(&stop);
    let ticker = std::thread::spawn(move || {
        while !stopped.load(Ordering::Relaxed) {
            let phase = watched.phase();
            shown.set_message(match phase {
                Phase::Setup => "setup",
                Phase::Prefill => "prefill",
                Phase::Visits => "visits",
                Phase::Settle => "settle",
                Phase::Bare => "bare",
                Phase::Baseline => "baseline",
                _ => "done",
            });
            shown.set_position(watched.visits());
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    (bar, stop, ticker)
}
