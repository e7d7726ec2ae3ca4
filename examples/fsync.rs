//! What the disk alone does: append 4 KiB to a file in DIR and `fdatasync` it, again and
//! again for SECONDS (default 15), then print the percentiles of the syncs. The baseline
//! beside the durable path's `sync` stage (`parkway load --data DIR --stages`):
//!
//! ```sh
//! cargo run --release --example fsync -- /tmp 15
//! ```

use std::io::Write;
use std::time::{Duration, Instant};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| ".".to_owned());
    let seconds: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(15);
    let path = std::path::Path::new(&dir).join("parkway-fsync-probe");
    let mut file = std::fs::File::create(&path)?;
    let mut syncs = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
        .map_err(std::io::Error::other)?;
    let block = [0x5au8; 4096];
    let until = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < until {
        file.write_all(&block)?;
        let began = Instant::now();
        file.sync_data()?;
        let micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
        syncs.saturating_record(micros.max(1));
    }
    drop(file);
    std::fs::remove_file(&path)?;
    println!(
        "{} syncs of a 4 KiB append in {seconds} s: p50 {} µs  p99 {} µs  p99.9 {} µs  max {} µs",
        syncs.len(),
        syncs.value_at_quantile(0.5),
        syncs.value_at_quantile(0.99),
        syncs.value_at_quantile(0.999),
        syncs.max()
    );
    Ok(())
}
