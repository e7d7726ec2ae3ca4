//! `parkway cluster`: several `parkway serve` nodes on one PostgreSQL database, driven
//! by a client that records every answer while nodes are killed, frozen and cut off and
//! the database restarts; then every ask is checked resolved exactly once and the write
//! audit is checked for a slot written by two owners.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use parkway_cli::cluster::{self, ClusterConfig, Fault};

/// Arguments of `parkway cluster`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The database: a schema that holds no store yet (`options=-c search_path=NAME` in
    /// the URL names one), at a TCP host and port (each node reaches it through a proxy
    /// of the harness's).
    #[arg(long, value_name = "URL")]
    postgres: String,
    /// How many nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// How long the client drives the nodes while the faults happen.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    drive_for: Duration,
    /// The seed of the workload and of the faults' schedule. A failure prints it.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The nodes' lease: faults last one and a half to three of them.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    lease: Duration,
    /// Subjects the workload drives.
    #[arg(long, default_value_t = 48)]
    subjects: usize,
    /// Concurrent client tasks.
    #[arg(long, default_value_t = 12)]
    tasks: usize,
    /// The faults to draw from, comma-separated: kill, freeze, cut, restart-database
    /// (the last only with --restart-database). Default: all that can be made; `none`
    /// for none.
    #[arg(long, value_delimiter = ',')]
    faults: Vec<String>,
    /// A shell command that restarts the database (e.g. `pg_ctl -D DIR -l LOG -w -m
    /// fast restart`), for the fault restart-database.
    #[arg(long, value_name = "COMMAND")]
    restart_database: Option<String>,
    /// Where the nodes' logs go. Default: a fresh directory under the system's temporary
    /// directory, removed after a clean run.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub(crate) fn main(args: Args) -> ExitCode {
    let faults = match faults(&args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("parkway cluster: {e}");
            return ExitCode::from(2);
        }
    };
    let program = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("parkway cluster: cannot find this program to run the nodes with: {e}");
            return ExitCode::from(2);
        }
    };
    let (dir, fresh) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "parkway-cluster-{}-{}",
                args.seed,
                std::process::id()
            )),
            true,
        ),
    };
    let config = ClusterConfig {
        postgres: args.postgres.clone(),
        nodes: args.nodes,
        drive_for: args.drive_for,
        seed: args.seed,
        lease: args.lease,
        subjects: args.subjects,
        tasks: args.tasks,
        faults,
        restart_database: args.restart_database.clone(),
        program,
        dir: dir.clone(),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("parkway cluster: could not start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = match runtime.block_on(cluster::run(&config)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("parkway cluster: {e}");
            eprintln!("parkway cluster: the nodes' logs are in {}", dir.display());
            return ExitCode::from(2);
        }
    };
    if args.json {
        match serde_json::to_string(&report) {
            Ok(line) => println!("{line}"),
            Err(e) => eprintln!("parkway cluster: could not write the report: {e}"),
        }
    } else {
        println!("{report}");
    }
    if report.clean() {
        if fresh {
            let _ = std::fs::remove_dir_all(&dir);
        }
        ExitCode::SUCCESS
    } else {
        eprintln!("parkway cluster: the nodes' logs are in {}", dir.display());
        eprintln!(
            "parkway cluster: replay the schedule with --seed {} (the nodes' timing is not replayed)",
            args.seed
        );
        ExitCode::FAILURE
    }
}

/// The faults named, or every one that can be made.
fn faults(args: &Args) -> Result<Vec<Fault>, String> {
    if args.faults.is_empty() {
        return Ok(Fault::ALL
            .iter()
            .map(|(_, f)| *f)
            .filter(|f| *f != Fault::RestartDatabase || args.restart_database.is_some())
            .collect());
    }
    if args.faults == ["none"] {
        return Ok(Vec::new());
    }
    args.faults
        .iter()
        .map(|name| {
            Fault::ALL
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, f)| *f)
                .ok_or_else(|| {
                    format!("no fault {name:?}: kill, freeze, cut, restart-database or none")
                })
        })
        .collect()
}
