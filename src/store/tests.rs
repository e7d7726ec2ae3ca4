//! The store's behaviour, on both engines: what is acknowledged is durable, in order,
//! and what fails says where and why.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use super::batch::{Op, last_per_key};
use super::disk::{DATA_DIR, VERSION_KEY};
use super::layout::{sequence_key, sequence_of};
use super::{Ack, Batch, FORMAT_VERSION, Faults, OpenError, Space, Store, StoreError, Syncing};

/// The longest a test waits for an ack: a bound, never a pause.
const WAIT: Duration = Duration::from_secs(30);

/// An ack that sends its result, tagged, on `tx`.
fn ack_to<T: Send + 'static>(tx: &mpsc::Sender<(T, Result<(), StoreError>)>, tag: T) -> Ack {
    let tx = tx.clone();
    Box::new(move |result| {
        let _ = tx.send((tag, result.map(|_| ())));
    })
}

/// The fates of `count` acks tagged `0..count`, checked to arrive in that order.
fn acks_in_order(
    rx: &mpsc::Receiver<(u32, Result<(), StoreError>)>,
    count: u32,
) -> Vec<Result<(), StoreError>> {
    (0..count)
        .map(|expected| {
            let (tag, fate) = rx.recv_timeout(WAIT).expect("every ack arrives");
            assert_eq!(tag, expected, "acks in submission order");
            fate
        })
        .collect()
}

/// Submits `batch` and waits for its ack.
fn durable(store: &Store, batch: Batch) -> Result<(), StoreError> {
    let (tx, rx) = mpsc::channel();
    store.submit(batch, ack_to(&tx, ()));
    if !store.has_writer() {
        store.sync_now();
    }
    rx.recv_timeout(WAIT).expect("the ack arrives").1
}

/// A batch of one put.
fn put(space: Space, key: &[u8], value: &[u8]) -> Batch {
    let mut batch = Batch::new();
    batch.put(space, key, value);
    batch
}

/// A fresh data directory inside a temporary one (so the store creates it).
fn data_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = tmp.path().join("store");
    (tmp, dir)
}

/// Every engine a behaviour should hold on.
fn engines(dir: &Path) -> Vec<Store> {
    vec![
        Store::memory(),
        Store::memory_with(Syncing::Manual, Faults::default()),
        Store::open(dir).expect("opens"),
        #[cfg(feature = "postgres")]
        Store::open_postgres(&super::postgres::test_database()).expect("opens"),
    ]
}

/// Where a durable store is kept, to open it again: a data directory, or a database.
enum Place {
    /// A data directory.
    Dir(PathBuf),
    /// A PostgreSQL database (a schema of the test server's).
    #[cfg(feature = "postgres")]
    Database(String),
}

impl Place {
    /// Opens the store kept there.
    fn open(&self) -> Result<Store, OpenError> {
        match self {
            Place::Dir(dir) => Store::open(dir),
            #[cfg(feature = "postgres")]
            Place::Database(url) => Store::open_postgres(url),
        }
    }
}

/// Every place a durable behaviour should hold in: `dir`, and a fresh database.
fn places(dir: &Path) -> Vec<Place> {
    vec![
        Place::Dir(dir.to_path_buf()),
        #[cfg(feature = "postgres")]
        Place::Database(super::postgres::test_database()),
    ]
}

/// What is written is read back, per space, in key order, and a delete removes it.
#[test]
fn round_trip() {
    let (_tmp, dir) = data_dir();
    for store in engines(&dir) {
        let mut batch = Batch::new();
        batch
            .put(Space::Subjects, "thread-2", "b")
            .put(Space::Subjects, "thread-1", "a")
            .put(Space::Records, "thread-1", "not a subject")
            .put(Space::Events, sequence_key(258), "e258")
            .put(Space::Events, sequence_key(7), "e7");
        durable(&store, batch).expect("durable");
        assert_eq!(
            store.get(Space::Subjects, b"thread-1").unwrap(),
            Some(b"a".to_vec())
        );
        assert_eq!(store.get(Space::Doors, b"thread-1").unwrap(), None);
        let subjects = store.scan(Space::Subjects).unwrap();
        assert_eq!(
            subjects,
            vec![
                (b"thread-1".to_vec(), b"a".to_vec()),
                (b"thread-2".to_vec(), b"b".to_vec())
            ]
        );
        let events: Vec<_> = store
            .scan(Space::Events)
            .unwrap()
            .into_iter()
            .map(|(k, _)| sequence_of(&k).unwrap())
            .collect();
        assert_eq!(events, vec![7, 258], "big-endian keys sort as numbers");

        let mut batch = Batch::new();
        batch.delete(Space::Subjects, "thread-1");
        durable(&store, batch).expect("durable");
        assert_eq!(store.get(Space::Subjects, b"thread-1").unwrap(), None);
        assert_eq!(store.scan(Space::Subjects).unwrap().len(), 1);
        assert!(store.stats().syncs >= 2, "{:?}", store.stats());
    }
}

/// A batch is all or nothing, and within it (and across a group) the later write of a
/// key wins.
#[test]
fn batch_is_atomic_and_later_writes_win() {
    let (_tmp, dir) = data_dir();
    for store in engines(&dir) {
        let mut batch = Batch::new();
        batch
            .put(Space::Subjects, "s", "first")
            .put(Space::Ids, "run", "42")
            .delete(Space::Subjects, "s")
            .put(Space::Subjects, "s", "last")
            .put(Space::Doors, "gone", "x")
            .delete(Space::Doors, "gone");
        // Two batches queued together form one group: the second's write wins.
        let (tx, rx) = mpsc::channel();
        store.submit(batch, ack_to(&tx, 1));
        store.submit(put(Space::Ids, b"run", b"43"), ack_to(&tx, 2));
        store.sync_now();
        for expected in [1, 2] {
            let (tag, result) = rx.recv_timeout(WAIT).unwrap();
            assert_eq!(tag, expected);
            result.unwrap();
        }
        assert_eq!(
            store.get(Space::Subjects, b"s").unwrap(),
            Some(b"last".to_vec())
        );
        assert_eq!(store.get(Space::Doors, b"gone").unwrap(), None);
        assert_eq!(store.get(Space::Ids, b"run").unwrap(), Some(b"43".to_vec()));
    }
}

/// Pending batches are invisible, and a crash drops them and only them: the figure a
/// simulation's crash step relies on.
#[test]
fn memory_crash_drops_only_pending() {
    let store = Store::memory_with(Syncing::Manual, Faults::default());
    let (tx, rx) = mpsc::channel();
    let mut kept = Batch::new();
    kept.put(Space::Subjects, "kept", "1")
        .put(Space::Ids, "run", "1");
    store.submit(kept, ack_to(&tx, "kept"));
    assert_eq!(
        store.get(Space::Subjects, b"kept").unwrap(),
        None,
        "pending"
    );
    assert_eq!(store.sync_now(), 1);
    assert_eq!(rx.try_recv().unwrap().0, "kept");

    let mut lost = Batch::new();
    lost.put(Space::Subjects, "lost", "2")
        .put(Space::Ids, "run", "2")
        .delete(Space::Subjects, "kept");
    store.submit(lost, ack_to(&tx, "lost"));
    drop(tx);
    store.crash();
    assert_eq!(store.sync_now(), 0, "nothing left to sync");
    assert_eq!(
        rx.recv_timeout(WAIT).unwrap_err(),
        mpsc::RecvTimeoutError::Disconnected,
        "a lost batch's ack is dropped, never called"
    );
    assert_eq!(
        store.get(Space::Subjects, b"kept").unwrap(),
        Some(b"1".to_vec())
    );
    assert_eq!(store.get(Space::Subjects, b"lost").unwrap(), None);
    assert_eq!(store.get(Space::Ids, b"run").unwrap(), Some(b"1".to_vec()));

    // The store goes on after the crash, as a restarted process would.
    durable(&store, put(Space::Subjects, b"after", b"3")).unwrap();
    assert_eq!(store.scan(Space::Subjects).unwrap().len(), 2);
}

/// Many submitters at once: every ack arrives, each submitter's in its order, and the
/// writer formed groups larger than one (group commit, not a sync per batch).
#[test]
fn acks_arrive_in_order_under_concurrent_submitters() {
    const THREADS: u64 = 8;
    const PER_THREAD: u64 = 1000;
    let (_tmp, dir) = data_dir();
    let durable = places(&dir)
        .into_iter()
        .map(|place| place.open().expect("opens"));
    for store in std::iter::once(Store::memory()).chain(durable) {
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let (store, tx) = (store.clone(), tx.clone());
                scope.spawn(move || {
                    for n in 0..PER_THREAD {
                        let key = [thread.to_be_bytes(), n.to_be_bytes()].concat();
                        let mut batch = Batch::new();
                        batch.put(Space::Records, key, vec![7u8; 200]);
                        store.submit(batch, ack_to(&tx, (thread, n)));
                    }
                });
            }
        });
        drop(tx);
        let mut next = [0u64; THREADS as usize];
        for _ in 0..THREADS * PER_THREAD {
            let ((thread, n), result) = rx.recv_timeout(WAIT).expect("every ack arrives");
            result.expect("durable");
            assert_eq!(
                n, next[thread as usize],
                "submitter {thread}'s acks in order"
            );
            next[thread as usize] += 1;
        }
        let stats = store.stats();
        assert_eq!(stats.batches, THREADS * PER_THREAD);
        // One put a batch, and no log entry to add a chunk.
        assert_eq!(stats.keys, THREADS * PER_THREAD, "{stats:?}");
        assert!(stats.largest_group > 1, "no group formed: {stats:?}");
        assert!(stats.syncs < stats.batches, "{stats:?}");
        assert!(stats.mean_group() > 1.0, "{stats:?}");
        assert_eq!(
            store.scan(Space::Records).unwrap().len() as u64,
            THREADS * PER_THREAD
        );
    }
}

/// What was acknowledged is there after the store is dropped and opened again.
#[test]
fn acknowledged_survives_reopen() {
    let (_tmp, dir) = data_dir();
    for place in places(&dir) {
        acknowledged_survives_reopen_in(&place);
    }
}

/// [`acknowledged_survives_reopen`] in one place.
fn acknowledged_survives_reopen_in(place: &Place) {
    {
        let store = place.open().unwrap();
        for n in 0..50u64 {
            let mut batch = Batch::new();
            batch
                .put(Space::Events, sequence_key(n), format!("event {n}"))
                .put(Space::Ids, "event", n.to_string());
            durable(&store, batch).unwrap();
        }
        durable(&store, put(Space::Doors, b"approve", b"{}")).unwrap();
    }
    let store = place.open().unwrap();
    assert_eq!(store.scan(Space::Events).unwrap().len(), 50);
    assert_eq!(
        store.get(Space::Ids, b"event").unwrap(),
        Some(b"49".to_vec())
    );
    assert_eq!(
        store.get(Space::Doors, b"approve").unwrap(),
        Some(b"{}".to_vec())
    );
    assert_eq!(
        store.get(Space::Meta, VERSION_KEY).unwrap(),
        Some(FORMAT_VERSION.to_string().into_bytes())
    );
}

/// Batches still queued when the last handle drops are synced and acknowledged, not lost.
#[test]
fn drop_finishes_what_is_queued() {
    let (_tmp, dir) = data_dir();
    for place in places(&dir) {
        let (tx, rx) = mpsc::channel();
        {
            let store = place.open().unwrap();
            for n in 0..100u64 {
                store.submit(put(Space::Events, &sequence_key(n), b"e"), ack_to(&tx, n));
            }
        }
        drop(tx);
        let acked: Vec<u64> = rx.iter().map(|(n, r)| r.map(|()| n).unwrap()).collect();
        assert_eq!(acked, (0..100).collect::<Vec<_>>());
        let store = place.open().unwrap();
        assert_eq!(store.scan(Space::Events).unwrap().len(), 100);
    }
}

/// A directory of another format version is refused, naming it, and left as it was.
#[test]
fn another_format_version_is_refused() {
    let (_tmp, dir) = data_dir();
    {
        let store = Store::open(&dir).unwrap();
        durable(&store, put(Space::Subjects, b"s", b"state")).unwrap();
    }
    write_to_engine(&dir, put(Space::Meta, VERSION_KEY, b"999"));
    for _ in 0..2 {
        let err = Store::open(&dir).unwrap_err();
        assert!(
            matches!(&err, OpenError::Version { found, expected: FORMAT_VERSION, .. } if found == "999"),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&dir.display().to_string()), "{text}");
        assert!(text.contains("format version 999"), "{text}");
    }
}

/// One open store per directory: a second open is refused while the first is alive
/// (the lock is an OS file lock, so another process is refused the same way), and
/// allowed once it is dropped.
#[test]
fn second_open_is_refused_while_the_first_lives() {
    let (_tmp, dir) = data_dir();
    let first = Store::open(&dir).unwrap();
    let err = Store::open(&dir).unwrap_err();
    assert!(matches!(err, OpenError::Held { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "store directory {} is held by another process",
            dir.display()
        )
    );
    // The refused open left the first one working.
    durable(&first, put(Space::Subjects, b"s", b"1")).unwrap();
    drop(first);
    let again = Store::open(&dir).unwrap();
    assert_eq!(
        again.get(Space::Subjects, b"s").unwrap(),
        Some(b"1".to_vec())
    );
}

/// What open refuses, each with the path and the reason, never a panic.
#[test]
fn open_refuses_what_it_cannot_use() {
    let tmp = tempfile::tempdir().unwrap();

    let orphan = tmp.path().join("missing").join("store");
    let err = Store::open(&orphan).unwrap_err();
    assert!(matches!(err, OpenError::Directory { .. }), "{err:?}");
    assert!(err.to_string().contains(&orphan.display().to_string()));
    assert!(!orphan.exists());

    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let err = Store::open(&file).unwrap_err();
    assert!(matches!(err, OpenError::Directory { .. }), "{err:?}");

    let foreign = tmp.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), b"mine").unwrap();
    let err = Store::open(&foreign).unwrap_err();
    assert!(matches!(err, OpenError::Foreign { .. }), "{err:?}");
    assert_eq!(
        std::fs::read_dir(&foreign).unwrap().count(),
        1,
        "nothing written"
    );

    // The engine's own version marker overwritten with garbage.
    let (_tmp, dir) = data_dir();
    drop(Store::open(&dir).unwrap());
    std::fs::write(dir.join(DATA_DIR).join("version"), b"garbage").unwrap();
    let err = Store::open(&dir).unwrap_err();
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&dir.display().to_string()),
        "{err}"
    );
    // Refused, and not left half-open: the lock is free again.
    let err = Store::open(&dir).unwrap_err();
    assert!(matches!(err, OpenError::Corrupt { .. }), "{err:?}");
}

/// A failed sync stops the store: that group's acks and every later one get an error
/// naming the cause, it says it is poisoned, and reads refuse.
#[test]
fn failed_sync_poisons_the_store() {
    let (_tmp, dir) = data_dir();
    let faults = Faults {
        fail_sync_after: Some(2),
        ..Faults::default()
    };
    for store in [
        Store::memory_with(Syncing::Automatic, faults.clone()),
        Store::memory_with(Syncing::Manual, faults.clone()),
        Store::open_with(&dir, faults).unwrap(),
    ] {
        durable(&store, put(Space::Subjects, b"a", b"1")).unwrap();
        durable(&store, put(Space::Subjects, b"b", b"2")).unwrap();
        assert!(!store.is_poisoned());
        let err = durable(&store, put(Space::Subjects, b"c", b"3")).unwrap_err();
        assert!(matches!(err, StoreError::Sync { .. }), "{err:?}");
        assert!(
            err.to_string().contains("injected failure of sync 3"),
            "{err}"
        );
        assert!(store.is_poisoned());
        for _ in 0..3 {
            let later = durable(&store, put(Space::Subjects, b"d", b"4")).unwrap_err();
            assert!(matches!(later, StoreError::Poisoned { .. }), "{later:?}");
            assert!(
                later.to_string().contains("injected failure of sync 3"),
                "{later}"
            );
            assert!(store.is_poisoned(), "it stays poisoned");
        }
        assert!(matches!(
            store.get(Space::Subjects, b"a"),
            Err(StoreError::Poisoned { .. })
        ));
        let stats = store.stats();
        assert_eq!((stats.syncs, stats.batches), (2, 2), "{stats:?}");
    }
}

/// On disk the writer writes a group while the sync thread syncs the one before: the
/// acks still come once each, in submission order, groups form, and every acknowledged
/// batch is there after a reopen.
#[test]
fn on_disk_overlapping_groups_are_acknowledged_in_order() {
    let (_tmp, dir) = data_dir();
    let store = Store::open(&dir).unwrap();
    let (tx, rx) = mpsc::channel();
    for wave in 0..20u32 {
        for n in wave * 200..(wave + 1) * 200 {
            store.submit(put(Space::Ids, &n.to_be_bytes(), b"v"), ack_to(&tx, n));
        }
        std::thread::yield_now();
    }
    drop(tx);
    let results = acks_in_order(&rx, 4000);
    assert!(results.iter().all(Result::is_ok));
    let stats = store.stats();
    assert_eq!(stats.batches, 4000);
    assert!(stats.syncs < 4000, "no group formed: {stats:?}");
    store.close();
    drop(store);
    let reopened = Store::open(&dir).unwrap();
    assert_eq!(reopened.scan(Space::Ids).unwrap().len(), 4000);
}

/// On disk, groups the writer wrote while a sync failed are refused, in order, never
/// acknowledged, though a later sync of the journal would have succeeded.
#[test]
fn on_disk_nothing_written_behind_a_failed_sync_is_acknowledged() {
    let (_tmp, dir) = data_dir();
    let store = Store::open_with(
        &dir,
        Faults {
            fail_sync_after: Some(1),
            only_once: true,
            ..Faults::default()
        },
    )
    .unwrap();
    durable(&store, put(Space::Ids, b"first", b"v")).unwrap();
    let (tx, rx) = mpsc::channel();
    for n in 0..500u32 {
        store.submit(put(Space::Ids, &n.to_be_bytes(), b"v"), ack_to(&tx, n));
    }
    drop(tx);
    let results = acks_in_order(&rx, 500);
    let first = &results[0];
    assert!(matches!(first, Err(StoreError::Sync { .. })), "{first:?}");
    assert!(results.iter().all(Result::is_err), "none acknowledged");
    assert_eq!(store.stats().batches, 1);
}

/// A group queued behind a failed one is refused too, in order, never acknowledged.
#[test]
fn nothing_is_acknowledged_after_a_failure() {
    let store = Store::memory_with(
        Syncing::Manual,
        Faults {
            fail_sync_after: Some(0),
            ..Faults::default()
        },
    );
    let (tx, rx) = mpsc::channel();
    for n in 0..5 {
        store.submit(put(Space::Ids, b"k", b"v"), ack_to(&tx, n));
    }
    store.sync_now();
    for n in 5..8 {
        store.submit(put(Space::Ids, b"k", b"v"), ack_to(&tx, n));
    }
    store.sync_now();
    drop(tx);
    let results: Vec<_> = rx.iter().collect();
    assert_eq!(
        results.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert!(results.iter().all(|(_, r)| r.is_err()));
    assert_eq!(store.stats().batches, 0);
}

/// A batch reads back as built, and an engine that numbers a batch once is handed each
/// key's last mutation only, in the order they were added.
#[test]
fn batch_keeps_each_keys_last_mutation() {
    let mut batch = Batch::new();
    assert!(batch.is_empty());
    batch
        .put(Space::Subjects, "a", "1")
        .put(Space::Records, "a", "r")
        .delete(Space::Subjects, "a")
        .put(Space::Subjects, "b", "2");
    assert_eq!(batch.len(), 4);
    assert_eq!(batch.bytes(), 2 + 2 + 1 + 2);
    let last: Vec<_> = last_per_key(std::slice::from_ref(&batch))
        .into_iter()
        .cloned()
        .collect();
    assert_eq!(last, batch.ops()[1..].to_vec());
    // A group is taken as one batch: a later batch's mutation of a key wins.
    let mut later = Batch::new();
    later
        .put(Space::Records, "a", "r2")
        .put(Space::Subjects, "c", "3");
    let group = [batch.clone(), later.clone()];
    let last: Vec<_> = last_per_key(&group).into_iter().cloned().collect();
    let mut expected = batch.ops()[2..].to_vec();
    expected.extend(later.ops().iter().cloned());
    assert_eq!(last, expected);
}

/// The newest fjall journal of a data directory, and where its written bytes end (fjall
/// preallocates its journal with zeros, so the end of the data is the last non-zero byte).
fn newest_journal(dir: &Path) -> (PathBuf, usize) {
    let journal = std::fs::read_dir(dir.join(DATA_DIR))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "jnl"))
        .max_by_key(|path| {
            path.file_stem()
                .and_then(|stem| stem.to_str()?.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .expect("a journal");
    let bytes = super::damage::load(&journal).unwrap();
    (journal, super::damage::data_end_of(&bytes))
}

/// Writes `count` events, each acknowledged, into a new data directory, then drops it.
fn write_events(dir: &Path, count: u64) {
    let store = Store::open(dir).unwrap();
    for n in 0..count {
        durable(
            &store,
            put(
                Space::Events,
                &sequence_key(n),
                format!("event {n}").as_bytes(),
            ),
        )
        .unwrap();
    }
}

/// Writes `batch` straight into the engine of `dir`, synced, as a build before the
/// change log left it: what an open checks before it replays the log (the format
/// version) is then already there.
fn write_to_engine(dir: &Path, batch: Batch) {
    let disk = super::disk::Disk::open(dir).unwrap();
    super::engine::Engine::write(&disk, &mut vec![batch], 0).unwrap();
    assert!(super::engine::Engine::sync(&disk).unwrap());
}

/// What a damaged directory opened as: the events read back, or the refusal.
fn reopen_events(dir: &Path) -> Result<Vec<(u64, Vec<u8>)>, OpenError> {
    let store = Store::open(dir)?;
    Ok(store
        .scan(Space::Events)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (sequence_of(&k).unwrap(), v))
        .collect())
}

/// Checks a damaged directory either opens with an unbroken prefix of what was written,
/// every value exact and at least `at_least` events, or is refused naming the directory;
/// never a panic, never garbage. Returns what happened, for the docs.
fn opens_with_prefix_or_refuses(dir: &Path, at_least: u64) -> String {
    match reopen_events(dir) {
        Ok(events) => {
            for (i, (n, value)) in events.iter().enumerate() {
                assert_eq!(*n, i as u64, "an unbroken prefix");
                assert_eq!(value, format!("event {n}").as_bytes(), "exact values");
            }
            assert!(events.len() as u64 >= at_least, "{} events", events.len());
            // Open after the damage, the store takes writes and keeps them.
            {
                let store = Store::open(dir).unwrap_or_else(|err| panic!("{err}"));
                durable(&store, put(Space::Doors, b"after", b"1")).unwrap();
            }
            let store = Store::open(dir).unwrap();
            assert_eq!(
                store.get(Space::Doors, b"after").unwrap(),
                Some(b"1".to_vec())
            );
            format!("opened with {} events", events.len())
        }
        Err(err) => {
            assert!(
                err.to_string().contains(&dir.display().to_string()),
                "{err}"
            );
            format!("refused: {err}")
        }
    }
}

/// Copies the data directory `from` into `to`; a journal is written up to its last byte
/// that is not zero and then extended with a hole, as fjall preallocates it.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else if entry.path().extension().is_some_and(|ext| ext == "jnl") {
            let bytes = super::damage::load(&entry.path()).unwrap();
            let end = super::damage::data_end_of(&bytes);
            std::fs::write(&target, &bytes[..end]).unwrap();
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&target)
                .unwrap();
            file.set_len(entry.metadata().unwrap().len()).unwrap();
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Writes `count` events, each acknowledged, then one more group that reaches the
/// journal but is never synced or acknowledged (as the group a kill lands in), and drops
/// the store without closing it. Where the acknowledged groups end in the newest journal.
fn write_events_and_one_unacknowledged(dir: &Path, count: u64) -> usize {
    write_events(dir, count);
    let (_, acknowledged_end) = newest_journal(dir);
    let disk = super::disk::Disk::open(dir).unwrap();
    let mut group = vec![put(
        Space::Events,
        &sequence_key(count),
        format!("event {count}").as_bytes(),
    )];
    super::engine::Engine::write(&disk, &mut group, 0).unwrap();
    acknowledged_end
}

/// The story: a few bytes flipped inside the journal after a kill let the next open
/// succeed with no word while every batch after them was gone (fjall takes the first batch
/// it cannot read for a torn tail and truncates there). Damaged anywhere, a journal must
/// give back every acknowledged batch exactly, or be refused naming the journal and where
/// its whole batches end.
#[test]
fn a_damaged_journal_gives_back_everything_acknowledged_or_is_refused() {
    let (tmp, template) = data_dir();
    write_events(&template, 40);
    // An open replays them from the change log into the engine and checkpoints.
    drop(Store::open(&template).unwrap());
    let (journal, end) = newest_journal(&template);
    let name = journal.strip_prefix(&template).unwrap().to_path_buf();
    let written = std::fs::read(&journal).unwrap()[..end].to_vec();
    let step = (end / 50).max(1);
    let mut offsets: Vec<usize> = (0..end).step_by(step).collect();
    offsets.extend(end.saturating_sub(12)..end);
    let (mut refused, mut opened) = (0, 0);
    for offset in offsets {
        let dir = tmp.path().join(format!("at-{offset}"));
        copy_dir(&template, &dir);
        let damaged = dir.join(&name);
        let mut bytes = written.clone();
        for byte in &mut bytes[offset..(offset + 3).min(end)] {
            *byte ^= 0xa5;
        }
        // Written over the copy's data; the hole after it stays a hole.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(&damaged)
            .unwrap();
        std::io::Write::write_all(&mut file, &bytes).unwrap();
        drop(file);
        match reopen_events(&dir) {
            Ok(events) => {
                // Only a changed sequence number that keeps the order leaves every batch
                // readable; then every value is there, exact.
                let expected: Vec<(u64, Vec<u8>)> = (0..40)
                    .map(|n| (n, format!("event {n}").into_bytes()))
                    .collect();
                assert_eq!(events, expected, "damage at byte {offset}");
                opened += 1;
            }
            Err(err @ OpenError::DamagedJournal { .. }) => {
                let OpenError::DamagedJournal {
                    ref journal,
                    offset: at,
                    ..
                } = err
                else {
                    unreachable!()
                };
                let text = err.to_string();
                assert_eq!(journal, &damaged, "{text}");
                // At the damaged batch (where it starts, at or before the damage), or at
                // the next one when the damage changed a sequence number (seen where it
                // breaks the order; the events' batch, replayed at once, is large).
                assert!(
                    at <= offset as u64 || text.contains("does not follow"),
                    "damage at byte {offset}: {text}"
                );
                assert!(text.contains(&damaged.display().to_string()), "{text}");
                assert!(text.contains(&format!("at byte {at}")), "{text}");
                refused += 1;
            }
            Err(other) => panic!("damage at byte {offset}: {other}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    assert!(refused > 40, "{refused} refused, {opened} opened");
}

/// A torn tail: the last group was being written when the process was killed, so it was
/// never synced nor acknowledged; its bytes stop partway, then the file ends or its
/// preallocated zeros follow. It is dropped, and everything acknowledged opens.
#[test]
fn a_torn_last_batch_never_acknowledged_opens_with_everything_acknowledged() {
    let (tmp, template) = data_dir();
    let acknowledged_end = write_events_and_one_unacknowledged(&template, 20);
    let (journal, end) = newest_journal(&template);
    assert!(
        end > acknowledged_end + 10,
        "the unacknowledged group is in the journal"
    );
    let name = journal.strip_prefix(&template).unwrap().to_path_buf();
    for cut in [acknowledged_end + 1, (acknowledged_end + end) / 2, end - 1] {
        for zeros in [false, true] {
            let dir = tmp.path().join(format!("cut-{cut}-{zeros}"));
            copy_dir(&template, &dir);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join(&name))
                .unwrap();
            file.set_len(cut as u64).unwrap();
            if zeros {
                file.set_len(64 << 20).unwrap();
            }
            drop(file);
            let store = Store::open(&dir).unwrap_or_else(|err| panic!("cut at {cut}: {err}"));
            assert_eq!(
                store.recovered().torn_bytes,
                (cut - acknowledged_end) as u64
            );
            assert_eq!(store.recovered().cuts, 0);
            drop(store);
            let observed = opens_with_prefix_or_refuses(&dir, 20);
            assert_eq!(observed, "opened with 20 events", "cut at {cut}");
        }
    }
}

/// The groups acknowledged since the last checkpoint are only in the change log (the
/// engine holds none of them, not even unsynced): a reopen after a kill replays every
/// one the engine lacks. (The open's first checkpoint, with nothing to write when it is
/// prompt, may run late on busy cores and write the first groups into the engine: those
/// the log need not give back.)
#[test]
fn groups_acknowledged_since_the_last_checkpoint_are_given_back_by_the_log() {
    let (_tmp, dir) = data_dir();
    write_events(&dir, 20);
    let held = {
        let disk = super::disk::Disk::open(&dir).unwrap();
        super::logged::applied(&dir, &disk).unwrap()
    };
    assert!(held <= 20, "the engine holds group {held} of 20");
    let store = Store::open(&dir).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(
        store.recovered().log_groups,
        20 - held,
        "{:?}",
        store.recovered()
    );
    drop(store);
    let observed = opens_with_prefix_or_refuses(&dir, 20);
    assert_eq!(observed, "opened with 20 events");
}

/// The change log loses its last record, whose segment's header says that group was
/// acknowledged: refused, naming the segment; the operator may cut there.
#[test]
fn an_acknowledged_group_missing_from_the_change_log_is_refused() {
    for garble in [false, true] {
        let (_tmp, dir) = data_dir();
        write_events(&dir, 20);
        let segment = dir.join(super::changelog::LOG_DIR).join("00000000.log");
        let mut bytes = std::fs::read(&segment).unwrap();
        let last = (super::changelog::HEADER as usize..bytes.len())
            .rev()
            .find(|&at| bytes[at] != 0)
            .unwrap();
        if garble {
            bytes[last - 2] ^= 0x5a;
        } else {
            for byte in &mut bytes[last - 20..=last] {
                *byte = 0;
            }
        }
        std::fs::write(&segment, &bytes).unwrap();
        let err = reopen_events(&dir).expect_err("refused");
        let text = err.to_string();
        assert!(
            matches!(
                err,
                OpenError::DamagedLog {
                    missing: 20,
                    acknowledged: 20,
                    ..
                }
            ),
            "{text}"
        );
        assert!(text.contains(&segment.display().to_string()), "{text}");
        let store = Store::open_as(&dir, super::OnDamage::Truncate, Faults::default()).unwrap();
        assert_eq!(store.recovered().cuts, 1);
        drop(store);
        assert!(
            dir.join(super::disk::DROPPED_DIR)
                .join("00000000.log")
                .exists()
        );
        let observed = opens_with_prefix_or_refuses(&dir, 19);
        assert_eq!(observed, "opened with 19 events", "garbled: {garble}");
    }
}

/// Damage in the middle, before the last checkpoint, opened with the operator's option to cut there: an unbroken
/// prefix opens, the cut is counted, what was dropped is kept aside, and the next open
/// (without the option) finds nothing to refuse and keeps new writes.
#[test]
fn the_operator_may_cut_a_damaged_journal_at_the_damage() {
    let (_tmp, dir) = data_dir();
    write_events(&dir, 20);
    // An open checkpoints: the events are then before its mark, and the change log
    // holds none of them.
    drop(Store::open(&dir).unwrap());
    let (journal, end) = newest_journal(&dir);
    let mut bytes = std::fs::read(&journal).unwrap();
    let middle = end / 2;
    for byte in &mut bytes[middle..middle + 4] {
        *byte ^= 0x5a;
    }
    std::fs::write(&journal, &bytes).unwrap();
    let Err(OpenError::DamagedJournal {
        offset, batches, ..
    }) = Store::open(&dir)
    else {
        panic!("refused without the option");
    };
    assert!(batches > 0);
    let store = Store::open_as(&dir, super::OnDamage::Truncate, Faults::default()).unwrap();
    let recovered = store.recovered();
    assert_eq!(recovered.cuts, 1);
    assert_eq!(recovered.dropped_batches, batches);
    assert!(recovered.dropped_bytes > 0);
    let kept: Vec<_> = std::fs::read_dir(dir.join(super::disk::DROPPED_DIR))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    let name = journal.file_name().unwrap().to_str().unwrap().to_owned();
    // With the log's segment whose header says the dropped groups were acknowledged.
    assert!(kept.contains(&format!("{name}.from-{offset}")), "{kept:?}");
    drop(store);
    // The events were replayed into the engine as one batch, which the cut drops whole.
    let observed = opens_with_prefix_or_refuses(&dir, 0);
    assert!(observed.starts_with("opened with"), "{observed}");
    let store = Store::open(&dir).unwrap();
    assert_eq!(store.recovered().cuts, 0);
}

/// An ack may hold the last handle: dropping it on the writer's own thread stops the
/// writer rather than have it wait for itself.
#[test]
fn the_last_handle_may_drop_in_an_ack() {
    let (_tmp, dir) = data_dir();
    let (tx, rx) = mpsc::channel();
    {
        let store = Store::open(&dir).unwrap();
        let held = store.clone();
        store.submit(
            put(Space::Ids, b"k", b"v"),
            Box::new(move |result| {
                drop(held);
                let _ = tx.send(result);
            }),
        );
    }
    rx.recv_timeout(WAIT).unwrap().unwrap();
}

/// The log's entries are numbered in commit order from where the log ends, each
/// receipt names its batch's first number, appending past the capacity deletes the
/// oldest, and a reopened disk store goes on from the last number kept.
#[test]
fn the_log_is_numbered_in_commit_order_and_trimmed() {
    let (_tmp, dir) = data_dir();
    for store in engines(&dir) {
        store.set_log_capacity(3);
        let mut firsts = Vec::new();
        for n in 0..3u8 {
            let mut batch = Batch::new();
            batch.append_log([n]).append_log([n + 10]);
            let (tx, rx) = mpsc::channel();
            store.submit(
                batch,
                Box::new(move |result| {
                    let _ = tx.send(result);
                }),
            );
            if !store.has_writer() {
                store.sync_now();
            }
            let receipt = rx
                .recv_timeout(WAIT)
                .expect("the ack arrives")
                .expect("durable");
            firsts.push(receipt.log);
        }
        // A log several processes write is numbered after the commit: its
        // acknowledgements name no number.
        let expected = if store.shares_log() {
            [0; 3]
        } else {
            [1, 3, 5]
        };
        assert_eq!(firsts, expected, "{store:?}");
        let kept: Vec<(u64, Vec<u8>)> = store.log_from(1, 100).expect("reads");
        assert_eq!(
            kept,
            [(4, vec![11]), (5, vec![2]), (6, vec![12])],
            "{store:?}"
        );
        assert_eq!(store.log_from(5, 1).expect("reads"), [(5, vec![2])]);
    }
    let reopened = Store::open(&dir).expect("opens again");
    let mut batch = Batch::new();
    batch.append_log([7]);
    durable(&reopened, batch).expect("durable");
    assert_eq!(reopened.log_from(7, 10).expect("reads"), [(7, vec![7])]);
    #[cfg(feature = "postgres")]
    {
        let place = Place::Database(super::postgres::test_database());
        {
            let store = place.open().expect("opens");
            store.set_log_capacity(3);
            for n in 0..5u8 {
                let mut batch = Batch::new();
                batch.append_log([n]);
                durable(&store, batch).expect("durable");
            }
        }
        let reopened = place.open().expect("opens again");
        let mut batch = Batch::new();
        batch.append_log([9]);
        durable(&reopened, batch).expect("durable");
        assert_eq!(
            reopened.log_from(1, 10).expect("reads"),
            [(3, vec![2]), (4, vec![3]), (5, vec![4]), (6, vec![9])]
        );
    }
}

/// A directory of format version 2 kept a key per log entry: opening it converts them
/// into chunks and marks it as this version; a conversion cut short (some chunks
/// written, the rest still a key each) goes on from where it stopped; either way the
/// log reads back whole and in order, and goes on after its last entry.
#[test]
fn an_older_log_is_converted_at_open() {
    for cut_short in [false, true] {
        let (_tmp, dir) = data_dir();
        {
            let mut batch = Batch::new();
            for seq in 3..=2_000u64 {
                batch.put(Space::Events, sequence_key(seq), seq.to_string());
            }
            if cut_short {
                // The first 1,024 already converted, their keys deleted with it.
                let mut chunk = Batch::new();
                super::log::convert(
                    (3..3 + 1024u64).map(|seq| (seq, seq.to_string().into_bytes())),
                    1024,
                    |b| {
                        chunk = b;
                        Ok::<_, ()>(())
                    },
                )
                .unwrap();
                for op in chunk.into_ops() {
                    match op {
                        Op::Put { space, key, value } => batch.put(space, key, value),
                        Op::Delete { space, key } => batch.delete(space, key),
                    };
                }
            }
            batch.put(Space::Meta, VERSION_KEY, "2");
            write_to_engine(&dir, batch);
        }
        let store = Store::open(&dir).expect("opens and converts");
        assert_eq!(store.format_version().unwrap(), FORMAT_VERSION);
        assert!(
            store
                .scan(Space::Events)
                .unwrap()
                .iter()
                .all(|(key, _)| key.len() == 12),
            "only chunks are left"
        );
        let log = store.log_from(1, usize::MAX).expect("reads");
        assert_eq!(log.len(), 1_998);
        assert!(
            log.iter()
                .zip(3u64..)
                .all(|((seq, value), n)| *seq == n && *value == n.to_string().into_bytes())
        );
        assert_eq!(store.log_from(1500, 2).unwrap()[1].0, 1501);
        let mut batch = Batch::new();
        batch.append_log(b"next".to_vec());
        durable(&store, batch).expect("durable");
        assert_eq!(store.log_from(2001, 5).unwrap(), [(2001, b"next".to_vec())]);
    }
}

/// A copy of the directory of format version 3 that `tests/format.rs` opens, and the
/// engine opened on it (to change it as that version would not).
fn version_three() -> (tempfile::TempDir, PathBuf, fjall::Database) {
    let (tmp, dir) = data_dir();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format-3"),
        &dir,
    );
    let db = fjall::Database::builder(dir.join(DATA_DIR))
        .open()
        .expect("the engine opens the copy");
    (tmp, dir, db)
}

/// [`version_three`] with `key` written into its old space `space`, synced.
fn version_three_with(space: &str, key: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir, db) = version_three();
    let old = db
        .keyspace(space, fjall::KeyspaceCreateOptions::default)
        .expect("the old space");
    old.insert(key, b"{}").expect("writes");
    db.persist(fjall::PersistMode::SyncAll).expect("syncs");
    drop((old, db));
    (tmp, dir)
}

/// A key of an older space that does not read as that version's stops the conversion:
/// the open is refused naming the space and the key, and the directory keeps its version
/// and its old spaces, so the next open (after the key is dealt with) converts it whole.
#[test]
fn a_key_that_is_not_version_three_s_refuses_the_conversion() {
    let (_tmp, dir) = version_three_with("entries", b"\0\0\0\x09ab");
    let Err(err) = Store::open(&dir) else {
        panic!("a key that is not version 3's was converted")
    };
    let text = err.to_string();
    assert!(
        matches!(err, OpenError::Corrupt { .. }) && text.contains("space entries"),
        "{text}"
    );
    let report = crate::check::check(&dir).expect("checks");
    assert_eq!(report.format_version.as_deref(), Some("3"), "{report:?}");
}

/// A conversion done again (as after a crash before the new version was written) writes
/// the same keys over what the first wrote: the directory opens at this version with
/// what it held, once.
#[test]
fn a_conversion_done_twice_writes_the_same() {
    let (_tmp, dir, db) = version_three();
    drop(db);
    let first = {
        let store = Store::open(&dir).expect("opens and converts");
        assert_eq!(store.format_version().unwrap(), FORMAT_VERSION);
        Space::ALL
            .iter()
            .map(|space| store.scan(*space).unwrap())
            .collect::<Vec<_>>()
    };
    // As a conversion cut short leaves it: the old spaces whole, a new one partly
    // written, the version still 3.
    let (_copy, again, db) = version_three();
    let old = db
        .keyspace("entries", fjall::KeyspaceCreateOptions::default)
        .unwrap();
    let new = db
        .keyspace(Space::Entries.name(), fjall::KeyspaceCreateOptions::default)
        .unwrap();
    let (key, _) = old.iter().next().expect("an entry").into_inner().unwrap();
    let converted = super::layout::slot_first(Space::Entries, &key)
        .unwrap()
        .unwrap();
    new.insert(converted, b"half written").unwrap();
    db.persist(fjall::PersistMode::SyncAll).unwrap();
    drop((old, new, db));
    let store = Store::open(&again).expect("opens and converts again");
    assert_eq!(store.format_version().unwrap(), FORMAT_VERSION);
    let second = Space::ALL
        .iter()
        .map(|space| store.scan(*space).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(first, second);
}

/// A slot this process owns and one it can be told it does not (`NotOwned`), and a
/// store of each engine (memory, synced by hand; disk) whose faults refuse the latter.
fn owned_and_lost() -> (
    tempfile::TempDir,
    (crate::slot::Slot, crate::slot::Slot),
    super::NotOwned,
    [Store; 2],
) {
    use crate::slot::Slot;
    let (tmp, dir) = data_dir();
    let (mine, lost) = (Slot::of("b"), Slot::of("a"));
    assert_ne!(mine, lost);
    let not_owned = super::NotOwned::default();
    let faults = Faults {
        not_owner: Some(not_owned.clone()),
        ..Faults::default()
    };
    let stores = [
        Store::memory_with(Syncing::Manual, faults.clone()),
        Store::open_with(&dir, faults).expect("opens"),
    ];
    (tmp, (mine, lost), not_owned, stores)
}

/// An engine's refusal of a group for a slot this process does not own fails that
/// slot's batches only, as `not the owner`: the rest of the group is written, its log
/// entries numbered with no gap, and the store goes on; once the slot is owned again,
/// its batches are written.
#[test]
fn a_group_refused_for_one_slot_is_written_without_it() {
    let (_tmp, (mine, lost), not_owned, stores) = owned_and_lost();
    for store in stores {
        not_owned.set(lost, true);
        let (tx, rx) = mpsc::channel();
        for n in 0..6u32 {
            let mut batch = Batch::of_slot(if n % 2 == 0 { lost } else { mine });
            batch
                .put(Space::Ids, n.to_be_bytes(), b"v")
                .append_log(format!("e{n}"));
            store.submit(batch, ack_to(&tx, n));
        }
        if !store.has_writer() {
            store.sync_now();
        }
        for (n, fate) in acks_in_order(&rx, 6).into_iter().enumerate() {
            if n % 2 == 0 {
                assert!(
                    matches!(&fate, Err(StoreError::NotOwner { slot, .. }) if *slot == lost.number()),
                    "batch {n}: {fate:?}"
                );
            } else {
                assert!(fate.is_ok(), "batch {n}: {fate:?}");
            }
        }
        assert!(!store.is_poisoned());
        let keys: Vec<_> = store
            .scan(Space::Ids)
            .unwrap()
            .into_iter()
            .map(|(key, _)| key)
            .filter(|key| key.len() == 4)
            .collect();
        let written: Vec<Vec<u8>> = [1u32, 3, 5]
            .iter()
            .map(|n| n.to_be_bytes().to_vec())
            .collect();
        assert_eq!(keys, written);
        let log = store.log_from(1, 10).unwrap();
        let expected: Vec<(u64, Vec<u8>)> = vec![
            (1, b"e1".to_vec()),
            (2, b"e3".to_vec()),
            (3, b"e5".to_vec()),
        ];
        assert_eq!(log, expected, "no gap where the refused batches were");

        not_owned.set(lost, false);
        let mut batch = Batch::of_slot(lost);
        batch.append_log(b"e6".to_vec());
        durable(&store, batch).expect("owned again: written");
        assert_eq!(store.log_from(4, 10).unwrap(), vec![(4, b"e6".to_vec())]);
    }
}

/// A subject's changes are fenced by the epoch of its slot they were made under: once the
/// engine refuses the slot, a later change of that epoch (which may build on the refused
/// one) is not written even when the slot is owned again, and once the slot is taken
/// back (its next epoch) neither is one made before; changes of the current epoch, of
/// other slots, and batches that stand alone are written.
#[test]
fn a_change_of_an_epoch_that_passed_is_not_written() {
    let (_tmp, (mine, lost), not_owned, stores) = owned_and_lost();
    for store in stores {
        let put = |slot, epoch, n: u32| {
            let mut batch = Batch::fenced(slot, epoch);
            batch.put(Space::Ids, n.to_be_bytes(), b"v");
            batch
        };
        let written = |n: u32| store.get(Space::Ids, &n.to_be_bytes()).unwrap().is_some();
        let first = store.epoch(lost);
        assert_eq!(first, store.epoch(mine));

        // Refused by the engine: the slot's epoch moves on.
        not_owned.set(lost, true);
        let fate = durable(&store, put(lost, first, 0));
        assert!(
            matches!(&fate, Err(StoreError::NotOwner { slot, .. }) if *slot == lost.number()),
            "{fate:?}"
        );
        assert_ne!(store.epoch(lost), first);
        assert_eq!(store.epoch(mine), first, "another slot's epoch stays");

        // Owned again, but a change of the refused epoch is refused, in a group whose
        // other batches are written.
        not_owned.set(lost, false);
        let (tx, rx) = mpsc::channel();
        store.submit(put(lost, first, 1), ack_to(&tx, 0));
        store.submit(put(mine, first, 2), ack_to(&tx, 1));
        let mut alone = Batch::of_slot(lost);
        alone.put(Space::Ids, 3u32.to_be_bytes(), b"v");
        store.submit(alone, ack_to(&tx, 2));
        if !store.has_writer() {
            store.sync_now();
        }
        let fates = acks_in_order(&rx, 3);
        assert!(
            matches!(&fates[0], Err(StoreError::Stale { slot, epoch, .. }) if *slot == lost.number() && *epoch == first),
            "{fates:?}"
        );
        assert!(fates[1].is_ok() && fates[2].is_ok(), "{fates:?}");
        assert!(!store.is_poisoned());
        assert_eq!(
            (written(0), written(1), written(2), written(3)),
            (false, false, true, true)
        );

        // Taken back: the next epoch; a change of the one before is refused, one of the
        // new epoch is written.
        let current = store.epoch(lost);
        let next = store.next_epoch(lost);
        assert_ne!(next, current);
        assert_eq!(store.epoch(lost), next);
        let fate = durable(&store, put(lost, current, 4));
        assert!(matches!(&fate, Err(StoreError::Stale { .. })), "{fate:?}");
        durable(&store, put(lost, next, 5)).expect("the current epoch is written");
        assert_eq!((written(4), written(5)), (false, true));
    }
}

/// A range read within a prefix reads that prefix's keys only, from where it is told,
/// up to its limit, on every engine; an empty prefix is every key, and a prefix of
/// 0xff bytes has no successor but still stops at its end.
#[test]
fn a_range_within_a_prefix_reads_only_that_prefix() {
    let (_tmp, dir) = data_dir();
    for store in engines(&dir) {
        let keys: [&[u8]; 6] = [
            b"\x00\x01x",
            b"\x00\x02a",
            b"\x00\x02b",
            b"\x00\x02c",
            b"\x00\x03",
            b"\xff\xff\x01",
        ];
        let mut batch = Batch::new();
        for key in keys {
            batch.put(Space::Wakes, key, b"");
        }
        durable(&store, batch).unwrap();
        let read = |from: &[u8], within: &[u8], limit| -> Vec<Vec<u8>> {
            store
                .range_from(Space::Wakes, from, within, limit)
                .unwrap()
                .into_iter()
                .map(|(key, _)| key)
                .collect()
        };
        let owned = |keys: &[&[u8]]| keys.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
        assert_eq!(read(b"", b"\x00\x02", 10), owned(&keys[1..4]));
        assert_eq!(read(b"\x00\x02b", b"\x00\x02", 10), owned(&keys[2..4]));
        assert_eq!(read(b"", b"\x00\x02", 2), owned(&keys[1..3]));
        assert_eq!(read(b"\x00\x03", b"\x00\x02", 10), Vec::<Vec<u8>>::new());
        assert_eq!(read(b"", b"\xff\xff", 10), owned(&keys[5..]));
        assert_eq!(read(b"", b"", 10), owned(&keys));
        assert_eq!(read(b"\x00\x03", b"", 10), owned(&keys[4..]));
    }
}

/// What the reader of `parkway check` walks includes the groups only the change log
/// holds, as an open replays them; damage to the log is reported as an open refuses
/// it, and the directory is left as it was.
#[test]
fn the_reader_walks_what_the_change_log_holds_and_reports_its_damage() {
    let (_tmp, dir) = data_dir();
    write_events(&dir, 20);
    let events = |reader: &super::Reader| {
        let mut seen = Vec::new();
        reader.walk(Space::Events, &mut |walked| {
            seen.push(walked.unwrap().0.to_vec());
            true
        });
        seen.len()
    };
    let reader = super::Reader::open(&dir).unwrap();
    assert_eq!(events(&reader), 20);
    assert_eq!(reader.journal_damage(), None);
    drop(reader);
    // Its last record garbled, the header saying it was acknowledged.
    let segment = dir.join(super::changelog::LOG_DIR).join("00000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let last = bytes.iter().rposition(|&b| b != 0).unwrap();
    bytes[last - 2] ^= 0x5a;
    std::fs::write(&segment, &bytes).unwrap();
    let reader = super::Reader::open(&dir).unwrap();
    assert_eq!(events(&reader), 19, "what comes before the damage");
    let damage = reader.journal_damage().unwrap().to_owned();
    assert!(damage.contains("the change log is damaged"), "{damage}");
    drop(reader);
    assert_eq!(std::fs::read(&segment).unwrap(), bytes, "nothing changed");
}

/// A segment of the change log cut short loses records at its end with nothing left to
/// say they were there: refused, naming it, unless the operator asks to go on.
#[test]
fn a_change_log_segment_cut_short_is_refused() {
    let (_tmp, dir) = data_dir();
    write_events(&dir, 5);
    let segment = dir.join(super::changelog::LOG_DIR).join("00000000.log");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap();
    file.set_len(4096).unwrap();
    drop(file);
    let err = reopen_events(&dir).expect_err("refused");
    let text = err.to_string();
    assert!(text.contains("cut short"), "{text}");
    assert!(text.contains(&segment.display().to_string()), "{text}");
    // The check reports it too, and changes nothing.
    let reader = super::Reader::open(&dir).unwrap();
    let damage = reader.journal_damage().expect("reported").to_owned();
    assert!(damage.contains("cut short"), "{damage}");
    drop(reader);
    assert_eq!(std::fs::metadata(&segment).unwrap().len(), 4096);
    let store = Store::open_as(&dir, super::OnDamage::Truncate, Faults::default()).unwrap();
    assert_eq!(store.recovered().cuts, 1);
    drop(store);
    let observed = opens_with_prefix_or_refuses(&dir, 5);
    assert_eq!(observed, "opened with 5 events");
}

/// A range read merges the overlay (groups logged since the last checkpoint) with the
/// engine: an overlay delete hides the engine's entry and one more is read in its place,
/// an overlay put is placed in key order, and past a full window of the engine's the
/// overlay's later keys wait for the next read.
#[test]
fn a_range_read_lays_what_the_log_holds_over_the_engine() {
    let (_tmp, dir) = data_dir();
    let key = |n: u32| format!("k{n:02}").into_bytes();
    {
        let store = Store::open(&dir).unwrap();
        for n in 1..=10 {
            durable(&store, put(Space::Doors, &key(n), b"engine")).unwrap();
        }
        // A clean close checkpoints: the engine holds them all.
        store.close();
    }
    let store = Store::open(&dir).unwrap();
    assert_eq!(store.recovered().log_groups, 0);
    let mut batch = Batch::new();
    batch.delete(Space::Doors, key(2));
    batch.delete(Space::Doors, key(3));
    batch.put(Space::Doors, b"k02a".to_vec(), b"log".to_vec());
    batch.put(Space::Doors, key(99), b"log".to_vec());
    durable(&store, batch).unwrap();
    let keys =
        |entries: super::Entries| -> Vec<Vec<u8>> { entries.into_iter().map(|(k, _)| k).collect() };
    assert_eq!(
        keys(store.range_from(Space::Doors, b"", b"", 4).unwrap()),
        vec![key(1), b"k02a".to_vec(), key(4), key(5)]
    );
    let all = keys(store.range_from(Space::Doors, b"", b"", 100).unwrap());
    let mut expected = vec![key(1), b"k02a".to_vec()];
    expected.extend((4..=10).map(key));
    expected.push(key(99));
    assert_eq!(all, expected);
    assert_eq!(keys(store.scan(Space::Doors).unwrap()), expected);
    assert_eq!(
        keys(store.range_from(Space::Doors, &key(5), b"", 100).unwrap()),
        expected[3..].to_vec()
    );
    assert_eq!(store.get(Space::Doors, &key(2)).unwrap(), None);
    assert_eq!(
        store.get(Space::Doors, &key(99)).unwrap(),
        Some(b"log".to_vec())
    );
    assert_eq!(
        keys(store.prefixed(Space::Doors, b"k0").unwrap()),
        expected[..expected.len() - 2].to_vec()
    );
}

/// A database of another format version, or with rows and no version, is refused,
/// naming the database (never its password) and what was found; it is left as it was.
#[cfg(feature = "postgres")]
#[test]
fn a_database_of_another_format_or_with_no_version_is_refused() {
    let url = super::postgres::test_database();
    {
        let store = Store::open_postgres(&url).unwrap();
        durable(&store, put(Space::Subjects, b"s", b"state")).unwrap();
        durable(&store, put(Space::Meta, VERSION_KEY, b"999")).unwrap();
    }
    for _ in 0..2 {
        let err = Store::open_postgres(&url).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, OpenError::Database { .. }), "{err:?}");
        assert!(text.contains("format version 999"), "{text}");
        assert!(text.contains("this build reads version"), "{text}");
    }
    let url = super::postgres::test_database();
    {
        let store = Store::open_postgres(&url).unwrap();
        durable(&store, put(Space::Subjects, b"s", b"state")).unwrap();
        let mut batch = Batch::new();
        batch.delete(Space::Meta, VERSION_KEY);
        durable(&store, batch).unwrap();
    }
    let text = Store::open_postgres(&url).unwrap_err().to_string();
    assert!(text.contains("no format version"), "{text}");
}

/// A URL that is not one, and a server that does not answer, are refused at open with
/// the reason; the password is never shown.
#[cfg(feature = "postgres")]
#[test]
fn a_database_that_cannot_be_used_is_refused_naming_why() {
    let err = Store::open_postgres("postgres://ann:hunter2@[::1").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("not a PostgreSQL URL"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    // A port nothing listens on: bound, then released, on the loopback.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://ann:hunter2@127.0.0.1:{port}/parks?connect_timeout=5");
    let text = Store::open_postgres(&url).unwrap_err().to_string();
    assert!(
        text.contains(&format!("database postgres://ann@127.0.0.1:{port}/parks")),
        "{text}"
    );
    assert!(
        text.contains("refused") || text.contains("connect"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}

/// One process per node (the default node unless named): a second open is refused while
/// the first store is open, and succeeds once it is closed.
#[cfg(feature = "postgres")]
#[test]
fn a_database_held_by_an_open_store_is_refused_to_a_second() {
    let url = super::postgres::test_database();
    let first = Store::open_postgres(&url).unwrap();
    let text = Store::open_postgres(&url).unwrap_err().to_string();
    assert!(text.contains("held by another parkway process"), "{text}");
    first.close();
    drop(first);
    let again = Store::open_postgres(&url).expect("opens once the first is closed");
    durable(&again, put(Space::Doors, b"d", b"{}")).unwrap();
}

/// A process whose node was taken over (the node's epoch moved on, as another process's
/// open of the node moves it) writes nothing more: its next group commit fails, saying
/// so, and stops the store; the group is not in the database.
#[cfg(feature = "postgres")]
#[test]
fn a_process_whose_node_was_taken_over_writes_nothing_more() {
    use super::postgres::test_sql;
    let url = super::postgres::test_database();
    let store = Store::open_postgres(&url).unwrap();
    durable(&store, put(Space::Doors, b"before", b"{}")).unwrap();
    test_sql(&url, "UPDATE parkway_holds SET epoch = epoch + 1");
    let err = durable(&store, put(Space::Doors, b"after", b"{}")).unwrap_err();
    assert!(
        err.to_string()
            .contains("another process took node default over"),
        "{err}"
    );
    assert!(store.is_poisoned());
    let doors = test_sql(
        &url,
        "SELECT convert_from(key, 'UTF8') FROM parkway_kv WHERE space = 3 ORDER BY key",
    );
    assert_eq!(doors, ["before"]);
}
