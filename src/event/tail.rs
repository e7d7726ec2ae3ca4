//! The logged events of a log every node sharing a database writes (`docs/postgres.md`,
//! "Streams across nodes"): read back in order from the log and shown to the subscribers
//! of [`Runtime::logged_events`](crate::Runtime::logged_events), every node's.
//!
//! The log's numbers are given in commit order, so what the log holds up to a number
//! never grows behind it: reading on from the last entry shown shows each once, in
//! order, with no gap. While someone subscribes, a commit of this node's wakes the
//! reader at once, and the others' are read at the next poll. While no one does, the
//! reader only keeps its place at the log's end, a poll at a time, so a subscriber is
//! shown everything committed from the poll before it subscribed (a subscriber that
//! resumes from a number reads what it missed from the log, as after any lag).

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::{Logged, Shared};
use crate::store::{Store, StoreError};
use crate::subject::hub::Hub;

/// How often the log is read for the other nodes' entries.
pub(crate) const POLL: Duration = Duration::from_millis(100);

/// How many entries one read takes.
const PAGE: usize = 512;

/// What one read of the log asked for.
enum Read {
    /// The last entry's number: the place to go on from.
    Place(u64),
    /// The entries after a place, a page at most.
    Page(Vec<(u64, Vec<u8>)>),
}

/// Reads the shared log on from where it last showed, while `hub` lives.
pub(crate) async fn follow(hub: Weak<Hub>, shared: Arc<Shared>) {
    let mut poll = tokio::time::interval(POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The last entry shown, or the log's end as last polled.
    let mut last: Option<u64> = None;
    // Whether the last read failed (said once, until one succeeds).
    let mut failing = false;
    loop {
        let polled = tokio::select! {
            _ = poll.tick() => true,
            () = shared.wake.notified() => false,
        };
        let Some(hub) = hub.upgrade() else {
            return;
        };
        if hub.services.is_closed() {
            return;
        }
        let events = hub.services.events.clone();
        let followed = events.followed();
        if !followed && !polled {
            continue;
        }
        let Some(store) = hub.services.store.clone() else {
            return;
        };
        drop(hub);
        let from = last.filter(|_| followed);
        let read = tokio::task::spawn_blocking(move || read(&store, from)).await;
        let read = match read {
            Ok(Ok(read)) => read,
            Ok(Err(error)) => {
                if !failing {
                    tracing::error!(%error, "the shared event log could not be read; reading it again at each poll");
                }
                failing = true;
                continue;
            }
            // The blocking pool is shutting down with the runtime.
            Err(_) => return,
        };
        if failing {
            tracing::info!("the shared event log is read again");
            failing = false;
        }
        let page = match read {
            Read::Place(end) => {
                last = Some(end);
                continue;
            }
            Read::Page(page) => page,
        };
        if page.len() == PAGE {
            // Read on at once.
            shared.wake.notify_one();
        }
        for (seq, bytes) in page {
            last = Some(seq);
            match serde_json::from_slice(&bytes) {
                Ok(event) => events.show_logged(Logged { seq, event }),
                // Not shown: a stream that meets the gap reads the log, which refuses
                // the entry, loudly.
                Err(error) => {
                    tracing::error!(seq, %error, "an entry of the shared event log is damaged");
                }
            }
        }
    }
}

/// The entries after `last`, or where the log ends if there is no place to go on from.
fn read(store: &Store, last: Option<u64>) -> Result<Read, StoreError> {
    match last {
        None => Ok(Read::Place(store.log_last()?)),
        Some(last) => Ok(Read::Page(store.log_from(last.saturating_add(1), PAGE)?)),
    }
}
