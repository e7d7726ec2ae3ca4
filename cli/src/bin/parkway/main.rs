//! The `parkway` command line: `parkway sim` runs simulation scenarios on virtual time,
//! `parkway load` drives concurrent door visits and reports throughput and latency,
//! `parkway crash` kills a runtime's process again and again and checks its store,
//! `parkway serve` serves every door over HTTP (and the MCP face at `/mcp`), `parkway mcp
//! --stdio` serves the MCP face to one local client, `parkway check` reads a data directory
//! whole and reports its damage.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The command line's allocator. Activations, channels and `$parked` conversions are
/// allocated and freed at a rate that glibc's allocator handles poorly under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (the `mi_option_e` enum of its `mimalloc.h`): how
/// many milliseconds freed memory waits before it is given back to the system.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory is kept for reuse before it goes back to the system, in
/// milliseconds. mimalloc's own default (10 ms) hands pages back and takes them again
/// at once under a load run, and every page taken again is a fault the kernel zeroes
/// (with transparent huge pages, 2 MiB at a time). A second covers that churn, and a
/// burst's memory still goes back a second after it ends: kept for good, a `parkway
/// serve` stayed at its peak resident size for the rest of its life. What each costs a
/// load run is in `docs/benchmarks.md`.
const PURGE_DELAY_MS: std::ffi::c_long = 1_000;

/// Set the purge delay, unless mimalloc's own variable `MIMALLOC_PURGE_DELAY` sets it.
fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mimalloc's option setter is not thread safe; this runs first in `main`,
    // before any other thread exists. The option takes a plain integer.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
}

mod check;
mod cluster;
mod crash;
mod load;
mod log;
mod mcp;
mod serve;
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
    /// Kill a child process driving a workload on a data directory with SIGKILL, again
    /// and again, and check after each kill that everything it had acknowledged is there.
    Crash(crash::Args),
    /// Run several `parkway serve` nodes on one PostgreSQL database under a client that
    /// records every answer, while nodes are killed, frozen and cut off and the database
    /// restarts; then check every ask resolved exactly once and no slot written by two
    /// owners at once.
    Cluster(cluster::Args),
    /// Serve every door over HTTP: doors, visits, runs, parked sets, the inbox and its
    /// stream, and platform events, behind bearer tokens with scopes.
    Serve(serve::Args),
    /// Serve the MCP face to one local client over standard input and output: every
    /// tool of a targets file, every caller ask an input_required round.
    Mcp(mcp::Args),
    /// Read every key of a data directory and report the damage found, changing
    /// nothing: exit 0 when clean, 1 when damaged, 2 when it cannot be checked.
    Check(check::Args),
    /// The child `parkway crash` runs and kills.
    #[command(hide = true)]
    CrashChild(crash::ChildArgs),
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(args) => sim::main(args),
        Command::Load(args) => load::main(args),
        Command::Crash(args) => crash::main(args),
        Command::Cluster(args) => cluster::main(args),
        Command::Serve(args) => serve::main(args),
        Command::Check(args) => check::main(args),
        Command::Mcp(args) => mcp::main(args),
        Command::CrashChild(args) => crash::child_main(args),
    }
}
