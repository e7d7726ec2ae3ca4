//! `parkway check --data DIR`: read every key of a data directory and report the damage
//! found, so that a directory (or a backup of one) is verified before it is served. It
//! changes nothing in the directory, and refuses one a running server holds.
//!
//! Exit status: 0 when nothing is damaged, 1 when damage was found, 2 when the directory
//! could not be checked (missing, no store, held, refused by the engine, another format).

use std::path::PathBuf;
use std::process::ExitCode;

use parkway::check::{Report, check};

/// Arguments of `parkway check`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The data directory to check (as given to `parkway serve --data`).
    #[arg(long)]
    data: PathBuf,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `parkway check`.
pub(crate) fn main(args: Args) -> ExitCode {
    let report = match check(&args.data) {
        Ok(report) => report,
        Err(error) => {
            eprintln!("parkway check: {error}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        match serde_json::to_string(&report) {
            Ok(text) => println!("{text}"),
            Err(error) => {
                eprintln!("parkway check: the report could not be written: {error}");
                return ExitCode::from(2);
            }
        }
    } else {
        print!("{}", text(&report));
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// The report as lines for a person: a line per keyspace, then each damage.
fn text(report: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let version = report.format_version.as_deref().unwrap_or("none");
    let _ = writeln!(
        out,
        "data directory {} (format version {version}{})",
        report.dir.display(),
        if report.decoded {
            ""
        } else {
            "; values not decoded: a runtime upgrades it when it opens it"
        }
    );
    for space in &report.keyspaces {
        let _ = writeln!(
            out,
            "  {:<12} {:>10} keys {:>12} bytes  {}",
            space.name,
            space.keys,
            space.bytes,
            match space.damage_found {
                0 => "ok".to_owned(),
                n => format!("{n} damaged"),
            }
        );
    }
    if let Some(journal) = &report.journal {
        let _ = writeln!(out, "damaged: {journal}");
    }
    for space in &report.keyspaces {
        for damage in &space.damage {
            let _ = writeln!(out, "damaged: {damage}");
        }
        let unlisted = space.damage_found.saturating_sub(space.damage.len() as u64);
        if unlisted > 0 {
            let _ = writeln!(
                out,
                "damaged: keyspace {}: {unlisted} more not listed",
                space.name
            );
        }
        if space.damage_found > 0
            && let Some(folder) = &space.folder
        {
            let _ = writeln!(
                out,
                "  keyspace {}'s tables are in {}",
                space.name,
                folder.display()
            );
        }
    }
    let _ = if report.is_clean() {
        writeln!(out, "{} keys read, no damage found", report.keys())
    } else {
        writeln!(
            out,
            "{} keys read, {} damaged: restore the directory from a backup that checks clean",
            report.keys(),
            report.damage_found()
        )
    };
    out
}
