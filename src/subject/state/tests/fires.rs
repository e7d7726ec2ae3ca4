//! A schedule's fires on its subject: once per boundary, whichever process fires it
//! (`super::super::fires`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::super::State;
use crate::store::{Batch, Faults, Store, Syncing};

const MINUTE: Duration = Duration::from_secs(60);

fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_000_000 + seconds, 0).unwrap_or_default()
}

/// Consecutive boundaries of one process fire; the same boundary fired again, one fired
/// by another process less than half an interval after it (another phase, another
/// clock), or an older one, does not; each schedule is kept on its own.
#[test]
fn a_boundary_fires_once_whoever_fires_it() {
    let mut state = State::new(Arc::from("cron"));
    assert!(state.admit_fire("tick", at(0), MINUTE));
    assert!(
        !state.admit_fire("tick", at(0), MINUTE),
        "the same boundary"
    );
    assert!(
        !state.admit_fire("tick", at(20), MINUTE),
        "another process's phase, 20 s after"
    );
    assert!(
        !state.admit_fire("tick", at(-60), MINUTE),
        "an older boundary"
    );
    assert_eq!(state.last_fire("tick"), Some(at(0)));
    assert!(
        state.admit_fire("tick", at(60), MINUTE),
        "the next boundary"
    );
    assert!(
        state.admit_fire("tick", at(95), MINUTE),
        "another process's next one, past half an interval"
    );
    assert!(
        state.admit_fire("other", at(95), MINUTE),
        "another schedule"
    );
    assert_eq!(state.last_fire("tick"), Some(at(95)));
}

/// The last fire is kept with the subject's state in the store, so the process that
/// takes the subject's slot reads it back; a subject that holds nothing else is kept
/// for it.
#[test]
fn the_last_fire_moves_with_the_subject() {
    let store = Store::memory_with(Syncing::Inline, Faults::default());
    let name: Arc<str> = Arc::from("cron");
    let mut state = State::new(Arc::clone(&name));
    assert!(!state.has_unwritten());
    assert!(state.admit_fire("tick", at(0), MINUTE));
    assert!(state.has_unwritten(), "a fire kept is a change to write");
    assert!(
        !state.is_empty(),
        "a subject that keeps a fire is not dropped"
    );
    let mut batch = Batch::of_slot(crate::slot::Slot::of(&name));
    state.write_parts(&mut batch).expect("writes");
    assert!(!state.has_unwritten());
    let (tx, rx) = std::sync::mpsc::channel();
    store.submit(
        batch,
        Box::new(move |result| {
            let _ = tx.send(result.is_ok());
        }),
    );
    assert!(rx.recv().expect("acknowledged"), "written");

    let Ok(Some(mut read)) = State::read_parts(&store, &name) else {
        panic!("the subject is read back");
    };
    assert_eq!(read.last_fire("tick"), Some(at(0)));
    assert!(
        !read.admit_fire("tick", at(10), MINUTE),
        "the new owner does not fire the boundary again"
    );
}
