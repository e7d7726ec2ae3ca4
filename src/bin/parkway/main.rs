//! The `parkway` command line: `parkway sim` runs simulation scenarios on virtual time,
//! `parkway load` drives concurrent door visits and reports throughput and latency.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    /// Print the version.
    Version,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("parkway {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
    }
}
