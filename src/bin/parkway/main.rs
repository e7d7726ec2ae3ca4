//! The `parkway` command line: `parkway sim` runs simulation scenarios on virtual time,
//! `parkway load` drives concurrent door visits and reports throughput and latency.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The command line's allocator. Every activation spawns an actor, whose channels are
/// allocated and freed in blocks that glibc's allocator handles poorly under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod load;
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
    /// Drive concurrent door visits and report throughput, latency, memory, an account
    /// of every ask and outcome, and the bare-evaluation baseline.
    Load(load::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim::main(args),
        Command::Load(args) => load::main(args),
    }
}
