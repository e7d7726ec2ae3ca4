//! The `parkway` command line: `parkway sim` runs simulation scenarios on virtual time,
//! `parkway load` drives concurrent door visits and reports throughput and latency.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod sim;

/// A runtime in which runs park on a subject to ask their caller.
#[derive(Debug, Parser)]
#[command(name = "parkway", version, about)]
struct Cli {
    /// What to do.
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Run scenario files, or a seeded random workload, on virtual time.
    Sim(sim::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim::main(args),
    }
}
