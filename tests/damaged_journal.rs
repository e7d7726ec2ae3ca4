//! A data directory whose journal is damaged before its end: building a runtime on it is
//! refused with the store's words, unless the builder is told to cut the journal there.

use parkway::{BuildError, Builder, DoorSpec, Runtime};

/// A runtime on `dir`, cutting a damaged journal if `truncate`.
async fn open(dir: &std::path::Path, truncate: bool) -> Result<Runtime, BuildError> {
    Builder::default()
        .without_env()
        .data_dir(dir)
        .truncate_damaged_journal(truncate)
        .register("nothing", &[], |_, _, _| async {
            Ok(serde_json::Value::Null)
        })
        .build()
        .await
}

/// The newest journal of a data directory and where its bytes that are not zero end.
fn newest_journal(dir: &std::path::Path) -> (std::path::PathBuf, usize) {
    let journal = std::fs::read_dir(dir.join("data"))
        .expect("the engine's folder")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jnl"))
        .max_by_key(|path| {
            path.file_stem()
                .and_then(|stem| stem.to_str()?.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .expect("a journal");
    let bytes = std::fs::read(&journal).expect("reads");
    let end = bytes.iter().rposition(|b| *b != 0).map_or(0, |i| i + 1);
    (journal, end)
}

/// The refusal reaches the one who builds the runtime, naming the directory, the journal
/// and the offset, and nothing of the directory changes; the builder's option cuts it,
/// and the runtime says so in what its open reports.
#[tokio::test]
async fn a_damaged_journal_refuses_the_build_unless_told_to_cut_it() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("data-dir");
    // The engine's journal is written at checkpoints: each shutdown writes one, with
    // the door saved since the open.
    for n in 0..12 {
        let runtime = open(&dir, false).await.expect("the directory opens");
        runtime
            .save_door(DoorSpec::route(&format!("door-{n}"), "nothing"))
            .expect("saved");
        runtime.shutdown().await;
    }
    let (journal, end) = newest_journal(&dir);
    let mut bytes = std::fs::read(&journal).expect("reads");
    // The start tag of a batch in the middle (each batch ends with the trailer `FJL\x03`):
    // the engine alone takes the first batch it cannot read for a torn tail, and opened
    // with every later batch gone.
    let ends: Vec<usize> = bytes[..end]
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"FJL\x03")
        .map(|(i, _)| i + 4)
        .collect();
    assert!(
        ends.len() > 20,
        "the journal holds the doors: {}",
        ends.len()
    );
    bytes[ends[ends.len() / 2]] ^= 0xa5;
    std::fs::write(&journal, &bytes).expect("writes");

    let Err(BuildError::Store(refusal)) = open(&dir, false).await else {
        panic!("the damaged directory is refused");
    };
    assert!(refusal.contains(&dir.display().to_string()), "{refusal}");
    assert!(
        refusal.contains(&journal.display().to_string()),
        "{refusal}"
    );
    assert!(refusal.contains("is damaged at byte"), "{refusal}");
    assert!(refusal.contains("truncate-damaged-journal"), "{refusal}");
    assert_eq!(
        std::fs::read(&journal).expect("reads"),
        bytes,
        "nothing changed"
    );

    let runtime = open(&dir, true).await.expect("opens, cut at the damage");
    let recovery = runtime.store_recovery().expect("a data directory");
    assert_eq!(recovery.cuts, 1);
    assert!(recovery.dropped_batches > 0, "{recovery:?}");
    runtime.shutdown().await;
    let runtime = open(&dir, false).await.expect("opens after the cut");
    assert_eq!(runtime.store_recovery().expect("a data directory").cuts, 0);
    runtime.shutdown().await;
}
