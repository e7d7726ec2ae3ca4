//! `parkway crash`: kill a child driving a workload with `SIGKILL`, again and again, and
//! check after each kill that everything it had acknowledged is in the store.
//! `parkway crash-child` (hidden) is that child.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use parkway_cli::crash::{self, ChildConfig, CrashConfig};

/// Arguments of `parkway crash`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How many times a child is killed.
    #[arg(long, default_value_t = 200)]
    kills: u64,
    /// The seed of the workloads, of the wait before each kill and of the checker's
    /// samples. A failure prints it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The work directory (the store and the log); it must not exist or be empty.
    /// Default: a fresh directory under the system's temporary directory, removed
    /// after a clean run.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Keep the store in this PostgreSQL database instead of the work directory (a
    /// schema that holds no store yet: `options=-c search_path=NAME` in the URL names
    /// one); the log stays in the work directory.
    #[arg(long, value_name = "URL", conflicts_with = "by_hand")]
    postgres: Option<String>,
    /// Subjects the workload drives.
    #[arg(long, default_value_t = 32)]
    subjects: usize,
    /// Concurrent tasks in each child.
    #[arg(long, default_value_t = 8)]
    tasks: usize,
    /// The shortest wait before a kill, once the child is ready.
    #[arg(long, default_value = "5ms", value_parser = humantime::parse_duration)]
    min_wait: Duration,
    /// The longest.
    #[arg(long, default_value = "150ms", value_parser = humantime::parse_duration)]
    max_wait: Duration,
    /// Keep the work directory after a clean run.
    #[arg(long)]
    keep: bool,
    /// Leave each child running until you kill it with `kill -9 PID` (the pid is
    /// printed once it is ready), at a moment of your choosing, instead of after a
    /// random wait; the directory is then checked as after any kill.
    #[arg(long)]
    by_hand: bool,
    /// With --by-hand: how long each child drives its workload before it only waits to
    /// be killed (what it keeps grows by about 10 MB a second at 8 tasks).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    drive_for: Duration,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
}

/// Arguments of `parkway crash-child`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChildArgs {
    /// The store directory.
    #[arg(long)]
    store: PathBuf,
    /// The PostgreSQL database that keeps the store instead.
    #[arg(long)]
    postgres: Option<String>,
    /// The crash log.
    #[arg(long)]
    log: PathBuf,
    /// This child's generation.
    #[arg(long = "gen")]
    generation: u64,
    /// The workload's seed.
    #[arg(long)]
    seed: u64,
    /// Subjects.
    #[arg(long)]
    subjects: usize,
    /// Concurrent tasks.
    #[arg(long)]
    tasks: usize,
    /// How long an idle subject keeps its actor, in milliseconds.
    #[arg(long)]
    passivate_ms: u64,
    /// Stop starting operations this many milliseconds after being ready.
    #[arg(long)]
    drive_for_ms: Option<u64>,
}

pub(crate) fn main(args: Args) -> ExitCode {
    if args.subjects == 0 || args.tasks == 0 || args.min_wait > args.max_wait {
        eprintln!(
            "parkway crash: --subjects and --tasks must be at least 1, and --min-wait at most --max-wait"
        );
        return ExitCode::from(2);
    }
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("parkway crash: cannot find this program to run as the child: {e}");
            return ExitCode::from(2);
        }
    };
    let (dir, fresh) = match &args.data {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "parkway-crash-{}-{}",
                args.seed,
                std::process::id()
            )),
            true,
        ),
    };
    let config = CrashConfig {
        kills: args.kills,
        seed: args.seed,
        dir: dir.clone(),
        subjects: args.subjects,
        tasks: args.tasks,
        min_wait: args.min_wait,
        max_wait: args.max_wait,
        ready_timeout: Duration::from_secs(60),
        program,
        by_hand: args.by_hand.then_some(args.drive_for),
        postgres: args.postgres.clone(),
    };
    let quiet = args.quiet || args.json;
    let step = (args.kills / 10).max(1);
    let report = crash::run(&config, |kill, counts| {
        if !quiet && (kill % step == 0 || kill == args.kills) {
            let acked: u64 = counts.acked.values().sum();
            eprintln!(
                "kill {kill}/{}: {acked} operations acknowledged, {} in flight at a kill",
                args.kills,
                counts.in_flight_happened + counts.in_flight_lost
            );
        }
    });
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            eprintln!("parkway crash: {e}");
            eprintln!(
                "parkway crash: the work directory is kept: {}",
                dir.display()
            );
            eprintln!(
                "parkway crash: replay with --seed {} --kills {}",
                args.seed, args.kills
            );
            return ExitCode::from(2);
        }
    };
    if args.json {
        match serde_json::to_string(&report) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("parkway crash: could not write the report: {e}"),
        }
    } else {
        print!("{report}");
    }
    if report.clean() {
        if fresh && !args.keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "parkway crash: the work directory is kept: {}",
            dir.display()
        );
        eprintln!(
            "parkway crash: replay with: parkway crash --seed {} --kills {} --subjects {} --tasks {}",
            args.seed,
            report.failed_at.unwrap_or(args.kills),
            args.subjects,
            args.tasks
        );
        ExitCode::FAILURE
    }
}

pub(crate) fn child_main(args: ChildArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("parkway crash-child: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let why = runtime.block_on(crash::drive(ChildConfig {
        store: args.store,
        postgres: args.postgres,
        log: args.log,
        generation: args.generation,
        seed: args.seed,
        subjects: args.subjects,
        tasks: args.tasks,
        passivate: Duration::from_millis(args.passivate_ms),
        drive_for: args.drive_for_ms.map(Duration::from_millis),
    }));
    eprintln!("parkway crash-child: {why}");
    ExitCode::from(2)
}
