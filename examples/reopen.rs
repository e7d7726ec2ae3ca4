//! Reopen a data directory and time the recovery: how long `build` takes, how long the
//! first visit after it takes, and the process's resident memory after it.
//!
//! `cargo run --release --example reopen -- DIR [SUBJECT]` (a directory written by
//! `parkway load --data DIR`; the first visit lists `SUBJECT`, by default `s0`). A
//! `postgres://` URL in place of `DIR` opens that database (written by `parkway load
//! --postgres URL`; run with `--features postgres`). The clock
//! is the load's starting instant, so the asks it left an hour to live do not all expire
//! at once.

use std::time::Instant;

use parkway::{ManualClock, Runtime};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let Some(dir) = args.next() else {
        eprintln!("usage: reopen DIR [SUBJECT]");
        std::process::exit(2);
    };
    let subject = args.next().unwrap_or_else(|| "s0".to_owned());
    let opened = Instant::now();
    let builder = Runtime::builder()
        .without_env()
        .clock(ManualClock::default());
    let builder = if dir.starts_with("postgres://") || dir.starts_with("postgresql://") {
        builder.postgres(&dir)
    } else {
        builder.data_dir(&dir)
    };
    let rt = match builder.build().await {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let built = opened.elapsed();
    let first = Instant::now();
    let listed = rt.list(&subject).await.map(|l| l.len());
    let visit = first.elapsed();
    let stats = rt.stats().await;
    println!(
        "built in {:.3} s; first visit (list {subject}: {listed:?}) {:.3} ms after; \
         caller asks open {}; subjects {} live, {} passive; RSS {} MiB",
        built.as_secs_f64(),
        visit.as_secs_f64() * 1000.0,
        stats.caller_open,
        stats.live_subjects,
        stats.passive_subjects,
        rss_mib()
    );
    rt.shutdown().await;
}

/// The process's resident memory, from `/proc/self/status`.
fn rss_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(0, |kb| kb / 1024)
}
