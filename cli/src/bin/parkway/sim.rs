//! `parkway sim`: run scenario files, or seeded random workloads, on virtual time.

use std::path::PathBuf;
use std::process::ExitCode;

use parkway::sim::{self, Scenario};

/// Arguments of `parkway sim`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Scenario files to run, in order.
    #[arg(required_unless_present = "random", conflicts_with = "random")]
    files: Vec<PathBuf>,
    /// Print the transcript as JSON lines instead of text.
    #[arg(long)]
    json: bool,
    /// Play each scenario over HTTP too, against a `parkway serve` child in test mode,
    /// and compare the two transcripts line by line (exit 1 on any difference). With
    /// --random: a share of the workload's calls are MCP tool calls over Streamable
    /// HTTP, their input_required rounds answered by the MCP retry.
    #[arg(long)]
    http: bool,
    /// Run a generated workload checked against the reference model instead of files.
    #[arg(long)]
    random: bool,
    /// The first seed of the random workload (default 1).
    #[arg(long, requires = "random")]
    seed: Option<u64>,
    /// How many consecutive seeds to run, from `--seed` (default 1).
    #[arg(long, requires = "random")]
    seeds: Option<u64>,
    /// Operations per seed (default 200).
    #[arg(long, requires = "random")]
    ops: Option<usize>,
    /// Subjects the workload spreads over (default 4).
    #[arg(long, requires = "random")]
    subjects: Option<usize>,
    /// Run the node workload over this many nodes (2 to 5): runtimes on one cluster
    /// engine whose slots are owned under leases on the virtual clock, nodes killed,
    /// restarted, added, frozen and thawed.
    #[arg(long, requires = "random", conflicts_with_all = ["http", "model_fault"], value_parser = clap::value_parser!(u8).range(2..=5))]
    nodes: Option<u8>,
    /// Print every operation of the random workload, not only the summary.
    #[arg(long, requires = "random")]
    trace: bool,
    /// Break the reference model on purpose (`uncounted-waiting`, `late-expiry`), to
    /// see the checks catch it.
    #[arg(long, requires = "random")]
    model_fault: Option<sim::ModelFault>,
}

pub(crate) fn main(args: Args) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("parkway sim: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.random {
        return random(&args);
    }
    let random_only = args.seed.is_some()
        || args.seeds.is_some()
        || args.ops.is_some()
        || args.subjects.is_some()
        || args.trace
        || args.model_fault.is_some();
    if random_only {
        eprintln!(
            "parkway sim: --seed, --seeds, --ops, --subjects, --trace and --model-fault \
             need --random"
        );
        return ExitCode::from(2);
    }
    runtime.block_on(files(&args))
}

async fn files(args: &Args) -> ExitCode {
    let mut failures = Vec::new();
    for path in &args.files {
        let shown = path.display();
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) => {
                failures.push(format!("{shown}: cannot read: {e}"));
                continue;
            }
        };
        let scenario = match Scenario::from_json(&text) {
            Ok(s) => s,
            Err(e) => {
                for problem in e.problems {
                    failures.push(format!("{shown}: {problem}"));
                }
                continue;
            }
        };
        if args.http {
            failures.extend(over_http(path).await);
            continue;
        }
        match sim::run(&scenario).await {
            Ok(transcript) => {
                if args.json {
                    print!("{}", transcript.json_lines());
                } else {
                    print!("{}", transcript.text());
                }
                failures.extend(
                    transcript
                        .failures()
                        .into_iter()
                        .map(|f| format!("{shown}: {f}")),
                );
            }
            Err(e) => failures.push(format!("{shown}: the runtime did not start: {e}")),
        }
    }
    report(&failures)
}

/// Play the scenario at `path` over HTTP beside the runtime in process; every
/// difference and failed check, each a line of the report.
async fn over_http(path: &std::path::Path) -> Vec<String> {
    let shown = path.display();
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return vec![format!("{shown}: cannot find this program to serve: {e}")],
    };
    match parkway_cli::replay::replay(&exe, path).await {
        Err(e) => vec![format!("{shown}: the replay over HTTP broke: {e}")],
        Ok((transcript, differences)) => {
            let mut failures: Vec<String> = differences
                .into_iter()
                .chain(transcript.failures())
                .map(|f| format!("{shown}: {f}"))
                .collect();
            if failures.is_empty() {
                println!(
                    "{shown}: {} steps over HTTP, the same as in process",
                    transcript.lines.len()
                );
            } else {
                failures.insert(0, format!("{shown}: over HTTP, not as in process:"));
            }
            failures
        }
    }
}

fn report(failures: &[String]) -> ExitCode {
    if failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    for f in failures {
        eprintln!("FAILED {f}");
    }
    ExitCode::FAILURE
}

/// Each seed runs on an async runtime of its own, dropped after it: a dropped `Runtime`
/// handle leaves its actors and ticker running, and a batch of seeds would otherwise
/// keep every one of them alive until the process ends.
fn random(args: &Args) -> ExitCode {
    let mut failures = Vec::new();
    let first = args.seed.unwrap_or(1);
    let (ops, subjects) = (args.ops.unwrap_or(200), args.subjects.unwrap_or(4));
    if subjects == 0 {
        eprintln!("parkway sim: --subjects must be at least 1");
        return ExitCode::FAILURE;
    }
    for seed in first..first.saturating_add(args.seeds.unwrap_or(1)) {
        let mut config = sim::RandomConfig::new(seed, ops, subjects);
        config.fault = args.model_fault;
        config.nodes = args.nodes.map_or(1, usize::from);
        if args.http {
            config.rounds = Some(sim::Rounds(std::sync::Arc::new(
                parkway_cli::replay::McpOverHttp::new(),
            )));
        }
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("parkway sim: could not start the async runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        let report = match runtime.block_on(sim::random(&config)) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("parkway sim: the runtime did not start: {e}");
                return ExitCode::FAILURE;
            }
        };
        if args.trace {
            for line in &report.trace {
                println!("{line}");
            }
        }
        if args.json {
            let t = &report.tally;
            let line = serde_json::json!({
                "seed": report.seed,
                "ops": report.ops_run,
                "ok": report.failure.is_none(),
                "failure": report.failure,
                "asks": t.asks,
                "resumed": t.resumed,
                "cancelled": t.cancelled,
                "expired": t.expired,
                "open": report.open,
                "stored": t.stored,
                "taken": t.taken,
                "dropped": t.dropped,
                "waiting": report.waiting,
                "cap_refused": t.cap_refused,
                "visits_refused": t.visits_refused,
                "passivations": t.passivations,
            });
            println!("{line}");
        } else {
            println!("{}", report.summary());
        }
        if let Some(f) = report.failure {
            failures.push(f);
        }
    }
    report(&failures)
}
