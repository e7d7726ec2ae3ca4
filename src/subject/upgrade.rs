//! Upgrading a data directory of the older format version (`store::UPGRADES_FROM`) in
//! place, when it is opened.
//!
//! Version 1 kept each subject's state, the ended runs' records and the run tree inside
//! the states, and was read back whole at each open. Version 2 adds what lets an open
//! leave them on disk (`super::index`): each subject's head and wake, the run index, and
//! a wake per kept record at its retention horizon. The upgrade reads every subject and
//! record once, writes those beside them (and the subject again, with its wake noted),
//! and writes the new version last, once everything else is durable: an upgrade
//! interrupted by a crash is done again, whole, at the next open, and writes the same.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use super::durable::{KeptRecord, state_of, walk};
use super::hub::Hub;
use super::index;
use crate::store::{Batch, FORMAT_VERSION, Space, Store, VERSION_KEY, layout};

/// How many subjects or records one batch of the upgrade carries.
const PER_BATCH: usize = 1024;

/// Upgrade the directory behind `store` to [`FORMAT_VERSION`].
pub(crate) async fn upgrade(hub: &Arc<Hub>, store: &Store) -> Result<(), String> {
    let retention = chrono::Duration::from_std(hub.services.settings.waiting_retention).ok();
    let mut writes = Writes::new(store);
    walk(store, Space::Subjects, b"", |key, value| {
        let mut state = state_of(key, value)?;
        // Version 1 kept the state whole, with no wake and no places: every part is
        // written afresh, the entries placed in the order they were kept in.
        state.wake = None;
        state.mark_all_unwritten();
        index::write_subject(&mut state, hub.services.clock.now(), writes.batch())
            .map_err(|e| format!("subject {}: {e}", state.name))?;
        for run in state.run_ids() {
            writes.batch().put(
                Space::Runs,
                layout::run_key(run),
                state.name.as_bytes().to_vec(),
            );
        }
        writes.counted();
        Ok(())
    })?;
    walk(store, Space::Records, b"", |key, value| {
        let kept: KeptRecord = serde_json::from_slice(value).map_err(|e| {
            format!(
                "the record of run {} cannot be read back: {e}",
                layout::unslotted_shown(key)
            )
        })?;
        let end = kept.record.finished_at.unwrap_or(kept.record.started_at);
        let horizon = retention
            .and_then(|d| end.checked_add_signed(d))
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        writes.batch().put(
            Space::Wakes,
            layout::record_wake(horizon, &kept.record.run_id),
            kept.subject.into_bytes(),
        );
        writes.counted();
        Ok(())
    })?;
    writes.durable().await?;
    let mut last = Writes::new(store);
    last.batch().put(
        Space::Meta,
        VERSION_KEY,
        FORMAT_VERSION.to_string().into_bytes(),
    );
    last.durable().await?;
    tracing::info!("the data directory was upgraded to format version {FORMAT_VERSION}");
    Ok(())
}

/// The upgrade's batches: each submitted once it carries [`PER_BATCH`] items, all
/// awaited at the end.
struct Writes<'a> {
    store: &'a Store,
    batch: Batch,
    items: usize,
    acks: Vec<oneshot::Receiver<Result<(), String>>>,
}

impl<'a> Writes<'a> {
    fn new(store: &'a Store) -> Self {
        Self {
            store,
            batch: Batch::new(),
            items: 0,
            acks: Vec::new(),
        }
    }

    /// The batch being filled.
    fn batch(&mut self) -> &mut Batch {
        &mut self.batch
    }

    /// One more item is in the batch: submit it if it is full.
    fn counted(&mut self) {
        self.items += 1;
        if self.items.is_multiple_of(PER_BATCH) {
            self.submit();
        }
    }

    fn submit(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        let (tx, rx) = oneshot::channel();
        self.store.submit(
            batch,
            Box::new(move |result| {
                let _ = tx.send(result.map(|_| ()).map_err(|e| e.to_string()));
            }),
        );
        self.acks.push(rx);
    }

    /// Submit what is left and wait until every batch is durable.
    async fn durable(mut self) -> Result<(), String> {
        self.submit();
        for ack in self.acks {
            ack.await
                .map_err(|_| "the store stopped during the upgrade".to_owned())??;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::ask::Ask;
    use crate::clock::ManualClock;
    use crate::ids::Ids;
    use crate::record::RunStatus;
    use crate::runtime::{Runtime, Start};
    use std::sync::Arc;

    use crate::store::{Batch, FORMAT_VERSION, Faults, Space, Store, Syncing, VERSION_KEY};
    use crate::subject::packed::Packed;
    use crate::subject::state::State;

    /// A runtime on `store` with a target that asks its caller, with an hour to answer.
    async fn open(store: Store, clock: &ManualClock) -> Runtime {
        Runtime::builder()
            .without_env()
            .clock(clock.clone())
            .ids(Ids::sequential())
            .store(store)
            .register("asker", &[], |ctx, _, _| async move {
                let answer = ctx.ask(Ask::caller("go?").expiry_at("1h")).await?;
                Ok(json!({ "answer": answer }))
            })
            .build()
            .await
            .expect("builds")
    }

    /// Make `store` what format version 1 wrote: each state whole and packed under its
    /// subject's name, no parts, heads, wakes or run index, and the version 1.
    fn as_version_one(store: &Store) {
        let mut batch = Batch::new();
        for (key, _) in store.scan(Space::Subjects).unwrap() {
            let name: Arc<str> = Arc::from(crate::store::layout::subject_of(&key).unwrap());
            let state = State::read_parts(store, &name).unwrap().unwrap();
            let packed = Packed::pack(state).expect("packs");
            batch.put(Space::Subjects, key, packed.bytes().to_vec());
        }
        // Every space after `Keys` came with version 2.
        for space in Space::ALL.into_iter().filter(|s| *s > Space::Keys) {
            for (key, _) in store.scan(space).unwrap() {
                batch.delete(space, key);
            }
        }
        batch.put(Space::Meta, VERSION_KEY, b"1".to_vec());
        store.submit(batch, Box::new(|r| assert!(r.is_ok(), "{r:?}")));
    }

    /// A directory of version 1 is upgraded when it is opened: then every subject is
    /// counted, found and expired as if this version had written it, and the version
    /// says so.
    #[tokio::test]
    async fn a_directory_of_version_one_is_upgraded_at_open() {
        let clock = ManualClock::default();
        let store = Store::memory_with(Syncing::Inline, Faults::default());
        let rt = open(store.clone(), &clock).await;
        let parked = rt.run(Start::new("a", "asker")).await.unwrap();
        let ended = rt.run(Start::new("b", "asker")).await.unwrap();
        let id = ended.asks.clone().unwrap()[0].id.clone();
        rt.resume("b", &id, json!("yes")).await.unwrap();
        rt.shutdown().await;
        let store = store.crash_and_reopen().unwrap();
        as_version_one(&store);
        assert_eq!(store.format_version().unwrap(), 1);
        assert!(store.scan(Space::Heads).unwrap().is_empty());

        let rt = open(store.clone(), &clock).await;
        assert_eq!(store.format_version().unwrap(), FORMAT_VERSION);
        assert_eq!(store.scan(Space::Heads).unwrap().len(), 2, "a and b");
        let stats = rt.stats().await;
        assert_eq!(
            (stats.caller_open, stats.runs, stats.passive_subjects),
            (1, 1, 0)
        );
        assert_eq!(
            rt.record(&ended.run_id).await.map(|r| r.status),
            Some(RunStatus::Succeeded)
        );
        // Untouched, its deadline fires from the wake the upgrade wrote.
        clock.advance(Duration::from_secs(3601));
        rt.settle().await;
        assert_eq!(
            rt.record(&parked.run_id).await.map(|r| r.status),
            Some(RunStatus::Cancelled)
        );
        assert_eq!(rt.stats().await.caller_open, 0);
        rt.shutdown().await;

        let rt = open(store.crash_and_reopen().unwrap(), &clock).await;
        let stats = rt.stats().await;
        assert_eq!((stats.caller_open, stats.runs), (0, 0));
        rt.shutdown().await;
    }
}
