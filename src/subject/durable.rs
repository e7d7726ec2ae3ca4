//! What a subject's change is in the store: its state in its durable form, the records
//! of runs that ended for good, and the counters of sequential ids; and reading them
//! back after a restart.
//!
//! A change writes the parts of the subject's state it touched, a key each
//! (`super::state::parts`), with the subject's head and wake (`super::index`); a subject
//! that holds nothing is deleted. An ended run's record is written with the change that
//! ended it, and deleted when its horizon passes.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::effect::{Effect, Step};
use super::hub::Hub;
use super::index;
use super::packed::Packed;
use super::registry::Undelivered;
use super::reply::Brought;
use super::state::{State, Unread};
use super::{Msg, Op};
use crate::error::StoreFault;
use crate::event::Event;
use crate::record::RunRecord;
use crate::slot::Slot;
use crate::store::layout::{self, SEQUENTIAL, TIMERS, undelivered_key};
use crate::store::{Batch, Space};

/// An ended run's record as kept: with its subject, for the event that drops it.
#[derive(Serialize, Deserialize)]
pub(crate) struct KeptRecord {
    pub(crate) subject: String,
    pub(crate) record: RunRecord,
}

/// The batch that makes `state`'s change with `effects` at `now` durable: the subject as it
/// stands (`super::index::write_subject`, which moves its wake), the run index, the
/// records of runs that ended with their horizons, its events, and the outcomes handed
/// to receivers.
pub(crate) fn change(state: &mut State, effects: &[Effect], now: DateTime<Utc>) -> Batch {
    let slot = Slot::of(&state.name);
    let mut batch = Batch::fenced(slot, state.slot_epoch.unwrap_or_default());
    if let Err(error) = index::write_subject(state, now, &mut batch) {
        // Not expected: the state was built from checked values.
        tracing::error!(subject = %state.name, %error, "a subject's state could not be written");
    }
    let name = &state.name;
    for effect in effects {
        match effect {
            Effect::Event(event) => match serde_json::to_vec(event) {
                Ok(bytes) => {
                    batch.append_log(bytes);
                }
                // Not expected: an event is plain data.
                Err(error) => {
                    tracing::error!(subject = %name, %error, "an event could not be logged");
                }
            },
            // Until it is delivered, a crash that loses its receiver leaves it waiting.
            Effect::Deliver(_, _, Some(waiting)) => match serde_json::to_vec(waiting) {
                Ok(bytes) => {
                    batch.put(
                        Space::Undelivered,
                        undelivered_key(name, &waiting.id),
                        bytes,
                    );
                }
                // Not expected: an outcome is plain data.
                Err(error) => {
                    tracing::error!(subject = %name, %error, "an outcome could not be kept");
                }
            },
            Effect::Keep(key, kept) => {
                if let Ok(bytes) = serde_json::to_vec(kept) {
                    batch.put(Space::Keys, layout::kept_key(key), bytes);
                }
            }
            Effect::Delivered(id) => {
                batch.delete(Space::Undelivered, undelivered_key(name, id));
            }
            Effect::Live(run) => {
                batch.put(Space::Runs, layout::run_key(run), name.as_bytes().to_vec());
            }
            Effect::Record(record) => {
                let kept = KeptRecord {
                    subject: name.to_string(),
                    record: RunRecord::clone(record),
                };
                let run = record.run_id.as_str();
                batch.delete(Space::Runs, layout::run_key(run));
                if let Ok(bytes) = serde_json::to_vec(&kept) {
                    batch.put(Space::Records, layout::run_key(run), bytes);
                }
                if let Some(at) = horizon_of(effects, run) {
                    batch.put(
                        Space::Wakes,
                        layout::record_wake(at, run),
                        name.as_bytes().to_vec(),
                    );
                }
            }
            _ => {}
        }
    }
    batch
}

/// The user asks whose resolution the durable log holds, by id with their subject,
/// oldest first: where the answer door finds the subject of one that left the inbox
/// before the runtime was opened. A log that cannot be read recalls what it read.
pub(crate) fn left_in_log(store: &crate::store::Store) -> Vec<(String, Arc<str>)> {
    const PAGE: usize = 4096;
    let mut left = Vec::new();
    let mut from = 1;
    loop {
        let entries = match store.log_from(from, PAGE) {
            Ok(entries) => entries,
            Err(error) => {
                tracing::warn!(%error, "the log could not be read to recall the user asks that left");
                break;
            }
        };
        let Some(&(last, _)) = entries.last() else {
            break;
        };
        for (_, bytes) in &entries {
            if let Ok(Event::AskResolved {
                subject,
                interaction,
                to: crate::entry::To::User,
                ..
            }) = serde_json::from_slice(bytes)
            {
                left.push((interaction, Arc::from(subject)));
            }
        }
        from = last + 1;
    }
    left
}

/// The retention horizon armed for `run`'s record among `effects`.
fn horizon_of(effects: &[Effect], run: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    effects.iter().find_map(|effect| match effect {
        Effect::Arm(key, crate::supervisor::Timer::Record { run: r, .. }) if &**r == run => {
            Some(key.at)
        }
        _ => None,
    })
}

/// The batch that forgets an outcome as undelivered once its receiver took it.
pub(crate) fn delivered(subject: &str, interaction: &str) -> Batch {
    let mut batch = Batch::of_slot(Slot::of(subject));
    batch.delete(Space::Undelivered, undelivered_key(subject, interaction));
    batch
}

/// The stamp on each group the store commits: the id counters' marks as they stand when
/// the group is committed, so they cover every id its batches hold, whatever order
/// their subjects made them in (a mark written with each change could be overtaken by
/// an older one and fall behind an id already durable elsewhere).
pub(crate) fn stamp(hub: std::sync::Weak<Hub>) -> crate::store::Stamp {
    Box::new(move |batch: &mut Batch| {
        let Some(hub) = hub.upgrade() else {
            return;
        };
        if let Some(marks) = hub.services.ids.high_water() {
            batch.put(Space::Ids, SEQUENTIAL, marks_bytes(marks));
        }
        // Likewise the timer keys: a subject keeps its timers' keys, armed again as they
        // are after a restart, so no key made later may equal one. A node of several
        // keeps its own counter: read by another node, it would make that node's keys.
        batch.put(
            Space::Ids,
            timers_key(&hub),
            hub.services.keys.next().to_be_bytes().to_vec(),
        );
    })
}

/// Where the timer keys' counter is kept: under the node's key on a store nodes share.
fn timers_key(hub: &Hub) -> Vec<u8> {
    match hub.services.node.get() {
        Some(&node) => layout::node_timers_key(node),
        None => TIMERS.to_vec(),
    }
}

/// The ids' counters as 24 big-endian bytes.
pub(crate) fn marks_bytes(marks: [u64; 3]) -> Vec<u8> {
    marks.iter().flat_map(|m| m.to_be_bytes()).collect()
}

/// The ids' counters back from their bytes.
pub(crate) fn marks_of(bytes: &[u8]) -> Option<[u64; 3]> {
    let mut marks = [0u64; 3];
    if bytes.len() != 24 {
        return None;
    }
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        marks[i] = u64::from_be_bytes(chunk.try_into().ok()?);
    }
    Some(marks)
}

/// A subject's state as format version 1 kept it, whole and packed, read back.
pub(crate) fn state_of(key: &[u8], value: &[u8]) -> Result<Box<State>, String> {
    let name = layout::subject_of(key).map_err(|e| format!("a subject's key: {e}"))?;
    Packed::decode(value, Arc::from(name)).map_err(|e| format!("subject {name}: {e}"))
}

/// Whether `effect` is one a recovery applies outside the subject only (counts, timers,
/// the inbox, the run tree, the records' index), with nothing to write or show.
fn outside_only(effect: &Effect) -> bool {
    matches!(
        effect,
        Effect::Occupy(_)
            | Effect::Arm(..)
            | Effect::Offer(_)
            | Effect::Link { .. }
            | Effect::Alive
            | Effect::Live(_)
    )
}

/// Apply a recovery's `effect` (one [`outside_only`] accepts) for `subject`, as its
/// actor would, but for the counts: the ceilings and the count of runs were summed from
/// the heads when the store was opened.
fn apply_outside(hub: &Arc<Hub>, subject: &Arc<str>, effect: Effect) {
    let s = &hub.services;
    match effect {
        Effect::Arm(key, timer) => s.timers.arm(key, timer),
        Effect::Offer(item) => hub.inbox.add(*item, &s.tools),
        Effect::Link { run, parent } => {
            let _ = hub
                .supervisor
                .cast(crate::supervisor::Msg::Link { run, parent });
        }
        Effect::Live(run) => hub.records.live(run, Arc::clone(subject)),
        _ => {}
    }
}

/// Recover `state`, read back with nothing executing, in place: its timers armed again
/// under the keys it keeps, the inbox, the run tree and the records' index told of it.
/// Nothing it keeps changes, so nothing is written. An error if its recovery would change it (a run was executing: such a subject
/// is recovered by its actor when the store is opened, never here).
fn recover_in_place(hub: &Arc<Hub>, state: &mut State) -> Result<(), String> {
    let s = &hub.services;
    let mut step = Step::new(s.clock.now(), &s.settings, &s.ids, &s.keys);
    state.recover(&mut step);
    let effects = step.into_effects();
    if !effects.iter().all(outside_only) {
        return Err(format!(
            "subject {} was executing when it was written and was not replayed at open",
            state.name
        ));
    }
    let name = Arc::clone(&state.name);
    for effect in effects {
        apply_outside(hub, &name, effect);
    }
    Ok(())
}

/// Read `subject` back from the store on its first touch (`Spawner::load`), recovered
/// in place. `None` when the store does not hold it.
///
/// A subject whose state cannot be read (damage, or a read the store refused) is the
/// fault, tallied by the services (damage marks the runtime unhealthy); nothing is made
/// in its place, so nothing writes over it.
pub(crate) fn load(hub: &Arc<Hub>, subject: &Arc<str>) -> Result<Option<Box<State>>, Undelivered> {
    let Some(store) = &hub.services.store else {
        return Ok(None);
    };
    hub.services
        .away
        .check(subject)
        .map_err(Undelivered::Store)?;
    let damage = &hub.services.damage;
    let read = State::read_parts(store, subject).map_err(|unread| match unread {
        Unread::Store(err) => damage
            .read_failed(&err)
            .map_or(Undelivered::Stopped, Undelivered::Store),
        Unread::Damaged(fault) => {
            damage.met(&fault);
            Undelivered::Store(fault)
        }
    });
    let Some(mut state) = read? else {
        return Ok(None);
    };
    recover_in_place(hub, &mut state).map_err(|detail| {
        let fault = StoreFault::corrupt(Space::Heads.name(), subject, detail);
        damage.met(&fault);
        Undelivered::Store(fault)
    })?;
    Ok(Some(state))
}

/// Where the store says `run`'s record is, for a run no subject read back since the
/// store was opened has told of: its kept record if it ended, its subject if not; `None`
/// if the store holds neither. A read that fails, or a kept record that does not decode,
/// is the fault (tallied): a damaged record is not a run that never was.
pub(crate) fn find_stored(
    hub: &Arc<Hub>,
    run: &str,
) -> Result<Option<super::records::Found>, Undelivered> {
    use super::records::Found;
    let Some(store) = hub.services.store.as_ref() else {
        return Ok(None);
    };
    let damage = &hub.services.damage;
    let read = |space| {
        store.get(space, &layout::run_key(run)).map_err(|err| {
            damage
                .read_failed(&err)
                .map_or(Undelivered::Stopped, Undelivered::Store)
        })
    };
    let damaged = |space: Space, what: String| {
        let fault = StoreFault::corrupt(space.name(), run, what);
        damage.met(&fault);
        Undelivered::Store(fault)
    };
    if let Some(bytes) = read(Space::Records)? {
        return match serde_json::from_slice::<KeptRecord>(&bytes) {
            Ok(kept) => Ok(Some(Found::Ended(Box::new(kept.record)))),
            Err(error) => Err(damaged(
                Space::Records,
                format!("the kept record of run {run} does not decode: {error}"),
            )),
        };
    }
    let Some(subject) = read(Space::Runs)? else {
        return Ok(None);
    };
    match std::str::from_utf8(&subject) {
        Ok(subject) => Ok(Some(Found::Live(Arc::from(subject)))),
        Err(error) => Err(damaged(
            Space::Runs,
            format!("the subject of run {run} is not text: {error}"),
        )),
    }
}

/// How many entries an open reads at a time from a space it walks whole.
const CHUNK: usize = 4096;

/// Walk the keys of `space` that start with `within` (empty: every key), a chunk at a
/// time (nothing more is held at once), calling `f` on each key and value in key order.
pub(crate) fn walk(
    store: &crate::store::Store,
    space: Space,
    within: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), String>,
) -> Result<(), String> {
    let mut from = within.to_vec();
    loop {
        let chunk = store
            .range_from(space, &from, within, CHUNK)
            .map_err(|e| e.to_string())?;
        for (key, value) in &chunk {
            f(key, value)?;
        }
        match chunk.last() {
            Some((last, _)) if chunk.len() == CHUNK => {
                from.clone_from(last);
                // The next key after `last`.
                from.push(0);
            }
            _ => return Ok(()),
        }
    }
}

/// Why a recovery did not finish.
const STOPPED: &str = "the runtime stopped while it recovered";
/// What every subject's read-back needs first: the ids' counters, the timer keys'
/// counter, the saved doors and the keys in use.
pub(crate) fn recover_shared(hub: &Arc<Hub>, store: &crate::store::Store) -> Result<(), String> {
    let read = |e: crate::store::StoreError| e.to_string();
    if let Some(bytes) = store.get(Space::Ids, SEQUENTIAL).map_err(read)? {
        let marks = marks_of(&bytes).ok_or("the ids' counters are damaged")?;
        hub.services.ids.raise(marks);
    }
    match store.get(Space::Ids, &timers_key(hub)).map_err(read)? {
        Some(bytes) => {
            let next: [u8; 8] = bytes
                .as_slice()
                .try_into()
                .map_err(|_| "the timer keys' counter is damaged")?;
            hub.services.keys.raise(u64::from_be_bytes(next));
        }
        // A node's first process starts in its range (raised as the store opened), or,
        // on a database a build before kept one counter in, past that counter if it
        // is in the node's range (the one node of a database then: it goes on past
        // every key it made).
        None if let Some(&node) = hub.services.node.get() => {
            if let Some(next) = store.get(Space::Ids, TIMERS).map_err(read)?
                && let Ok(next) = <[u8; 8]>::try_from(next.as_slice())
                && u64::from_be_bytes(next) >> crate::store::owners::NODE_SHIFT == u64::from(node)
            {
                hub.services.keys.raise(u64::from_be_bytes(next));
            }
        }
        // Written before the counter was kept: start past any key a process could have
        // made (2^40 timers).
        None => hub.services.keys.raise(1 << 40),
    }
    for (key, value) in store.scan(Space::Doors).map_err(read)? {
        let name = layout::plain_shown(&key).into_owned();
        let spec: crate::door::spec::Spec = serde_json::from_slice(&value)
            .map_err(|e| format!("door {name} cannot be read back: {e}"))?;
        if let Err(error) = hub.doors.restore(&hub.services, spec) {
            tracing::error!(door = %name, %error, "a saved door no longer compiles; it is left out");
        }
    }
    hub.recover_keys(store, &[])
}

/// The heads of the subjects whose keys start with `within` (every subject when empty,
/// one slot's with its prefix) read back: the ceilings summed, the inbox offered again,
/// each subject whose run was executing recovered by its own actor, and the outcomes
/// whose receivers were lost left waiting.
pub(crate) async fn recover_subjects(
    hub: &Arc<Hub>,
    store: &crate::store::Store,
    within: &[u8],
) -> Result<(), String> {
    let (mut replay, mut offering) = (Vec::new(), Vec::new());
    let caps = &hub.services.caps;
    walk(store, Space::Heads, within, |key, value| {
        let name = layout::subject_of(key).map_err(|e| format!("a subject's head: {e}"))?;
        let head = index::Head::from_bytes(value)
            .ok_or_else(|| format!("subject {name}: its head is damaged"))?;
        if head.executing {
            // Counted by its recovery, which withdraws the asks the replay raises again.
            replay.push(Arc::<str>::from(name));
            return Ok(());
        }
        let c = head.counts;
        caps.occupy_many(Slot::of(name), c.caller, c.user, c.runs);
        if head.offers {
            offering.push(Arc::<str>::from(name));
        }
        Ok(())
    })?;
    let stopped = |_| STOPPED.to_owned();
    for name in &offering {
        hub.registry
            .load_passive(hub, name)
            .map_err(|why| match why {
                Undelivered::Store(fault) => format!("subject {name} cannot be read back: {fault}"),
                Undelivered::Stopped => STOPPED.to_owned(),
            })?;
    }
    let mut recovered = Vec::new();
    for name in &replay {
        let state = State::read_parts(store, name)
            .map_err(|e| format!("subject {name} cannot be read back: {e}"))?
            .ok_or_else(|| format!("subject {name} has a head and no state"))?;
        hub.registry.restore(name, state);
        let done = hub
            .send_request(name, Brought::none(), |reply| Op::Recover { reply })
            .await
            .map_err(stopped)?;
        recovered.push(done);
    }
    // Every ceiling counts what was read back before a replayed run asks again.
    for done in recovered {
        done.await.map_err(|_| STOPPED.to_owned())?;
    }
    // Outcomes durable when their receivers were lost in the crash: each is left
    // waiting on its subject, which forgets it as undelivered in the same change.
    let mut undelivered = Vec::new();
    let mut outcomes = Vec::new();
    walk(store, Space::Undelivered, within, |key, value| {
        let subject = layout::name_of(key).ok_or("an undelivered outcome's key is damaged")?;
        let waiting: super::effect::Waiting = serde_json::from_slice(value).map_err(|e| {
            format!("an undelivered outcome on subject {subject} cannot be read back: {e}")
        })?;
        outcomes.push((Arc::<str>::from(subject), waiting));
        Ok(())
    })?;
    for (subject, waiting) in outcomes {
        let done = hub
            .send_request(&subject, Brought::none(), |reply| Op::Undelivered {
                waiting,
                reply,
            })
            .await
            .map_err(stopped)?;
        undelivered.push(done);
    }
    for done in undelivered {
        done.await.map_err(|_| STOPPED.to_owned())?;
    }
    for name in replay {
        hub.send(&name, Msg::op(Op::Replay))
            .await
            .map_err(stopped)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::ask::Ask;
    use crate::clock::ManualClock;
    use crate::ids::Ids;
    use crate::runtime::{Runtime, Start};
    use crate::store::{Faults, Store, Syncing};

    /// A runtime on `store` with a target that asks its caller.
    async fn open(store: Store) -> Runtime {
        Runtime::builder()
            .without_env()
            .clock(ManualClock::default())
            .ids(Ids::sequential())
            .store(store)
            .register("asker", &[], |ctx, _, _| async move {
                let answer = ctx
                    .ask(Ask::caller("go?").expiry_at(Duration::from_secs(60)))
                    .await?;
                Ok(json!({ "answer": answer }))
            })
            .build()
            .await
            .expect("builds")
    }

    /// A failed sync stops the runtime: the change is not acknowledged, nothing of it is
    /// shown, nothing is taken after it, and the next process finds none of it.
    #[tokio::test]
    async fn a_failed_sync_stops_the_runtime_and_acknowledges_nothing() {
        let faults = Faults {
            fail_sync_after: Some(0),
            ..Faults::default()
        };
        let store = Store::memory_with(Syncing::Inline, faults);
        let rt = open(store.clone()).await;
        assert_eq!(rt.store_failure(), None, "the store works");
        let mut events = rt.events();
        let refused = rt.run(Start::new("s", "asker")).await;
        assert!(refused.is_err(), "{refused:?}");
        assert!(rt.is_shut_down(), "the runtime stopped");
        assert_eq!(
            rt.store_failure().as_deref(),
            Some("store memory: sync failed: injected failure of sync 1"),
            "the runtime says why"
        );
        assert!(
            events.try_recv().is_err(),
            "nothing of the change was shown"
        );
        assert!(rt.run(Start::new("t", "asker")).await.is_err());
        assert!(store.is_poisoned());
        rt.shutdown().await;

        let next = open(store.crash_and_reopen().expect("a memory store")).await;
        assert!(next.list("s").await.expect("lists").is_empty());
        assert!(next.list("t").await.expect("lists").is_empty());
        assert_eq!(next.stats().await.caller_open, 0);
        next.shutdown().await;
    }

    /// An outcome whose delivery is not yet durable when the process crashes is left
    /// waiting on its subject by the next process: the receiver is gone with the old
    /// process, and nothing is dropped silently. A clean shutdown leaves nothing waiting.
    #[tokio::test]
    async fn an_outcome_whose_receiver_was_lost_in_a_crash_is_left_waiting() {
        for crash in [true, false] {
            let store = Store::memory_with(Syncing::Automatic, Faults::default());
            let rt = open(store.clone()).await;
            let parked = rt.run(Start::new("s", "asker")).await.expect("parks");
            let id = parked.asks.as_ref().expect("asks")[0].id.clone();
            if crash {
                // The resolution and the run's end (one turn, one batch) are durable;
                // the note that the receiver took the outcome, written after it, is lost.
                store.crash_after(1);
            }
            let resumed = rt.resume("s", &id, json!("yes")).await.expect("resumes");
            assert!(
                matches!(&resumed, crate::Resumed::Outcome(r) if r.status == crate::RunStatus::Succeeded),
                "{resumed:?}"
            );
            let next = if crash {
                store.crashed().await;
                let reopened = store.crash_and_reopen().expect("a memory store");
                rt.shutdown().await;
                open(reopened).await
            } else {
                rt.settle().await;
                rt.shutdown().await;
                open(store.crash_and_reopen().expect("a memory store")).await
            };
            let listed = next.list("s").await.expect("lists");
            if crash {
                assert_eq!(listed.len(), 1, "{listed:?}");
                assert_eq!(listed[0].id, id);
                assert_eq!(listed[0].status, crate::EntryStatus::Finished);
                let log = next.event_log(1, usize::MAX).expect("reads the log");
                assert!(
                    log.iter().any(|l| matches!(&l.event, crate::Event::WaitingOutcomeStored { interaction, .. } if *interaction == id)),
                    "{log:?}"
                );
                // Stored once: a second restart finds it waiting, and not twice.
                next.shutdown().await;
                let again = open(store.crash_and_reopen().expect("a memory store")).await;
                assert_eq!(again.list("s").await.expect("lists").len(), 1);
                again.shutdown().await;
            } else {
                assert!(listed.is_empty(), "{listed:?}");
                next.shutdown().await;
            }
        }
    }

    /// A new run's activation starts before its start is durable, but its first step
    /// waits for it: no step runs for a run a crash could forget.
    #[tokio::test]
    async fn a_new_runs_step_waits_until_its_start_is_durable() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};

        let store = Store::memory_with(Syncing::Manual, Faults::default());
        let steps = Arc::new(AtomicUsize::new(0));
        let reached = Arc::new(tokio::sync::Notify::new());
        let rt = Runtime::builder()
            .without_env()
            .clock(ManualClock::default())
            .ids(Ids::sequential())
            .store(store.clone())
            .register("stepper", &[], {
                let (steps, reached) = (Arc::clone(&steps), Arc::clone(&reached));
                move |ctx, _, _| {
                    let (steps, reached) = (Arc::clone(&steps), Arc::clone(&reached));
                    async move {
                        reached.notify_one();
                        // Without the gate, the step would run in this same poll.
                        let n: usize = ctx
                            .step("side effect", || async {
                                Ok::<_, String>(steps.fetch_add(1, Ordering::SeqCst) + 1)
                            })
                            .await?;
                        let answer = ctx
                            .ask(Ask::caller("go?").expiry_at(Duration::from_secs(60)))
                            .await?;
                        Ok(json!({ "n": n, "answer": answer }))
                    }
                }
            })
            .build()
            .await
            .expect("builds");
        let started = tokio::spawn({
            let rt = rt.clone();
            async move { rt.run(Start::new("s", "stepper")).await }
        });
        tokio::time::timeout(Duration::from_secs(10), reached.notified())
            .await
            .expect("the activation starts before its start is durable");
        assert_eq!(
            steps.load(Ordering::SeqCst),
            0,
            "no step before the start is durable"
        );
        // Sync until the run parks: its start, then its ask.
        let parked = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                store.sync_now();
                if started.is_finished() {
                    break started.await.expect("joins");
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("parks once synced")
        .expect("starts");
        assert_eq!(steps.load(Ordering::SeqCst), 1, "the step ran once");
        assert_eq!(parked.asks.expect("asks").len(), 1);
        rt.shutdown().await;
    }

    /// A resume whose activation finishes in place is one batch with the run's end: the
    /// activation's `Ended` is handled in the resume's turn (`super::super::turn`), not
    /// a later one; then the note that the receiver took the outcome.
    #[tokio::test]
    async fn a_resume_and_the_end_it_causes_are_one_batch() {
        let store = Store::memory_with(Syncing::Inline, Faults::default());
        let rt = open(store.clone()).await;
        let parked = rt.run(Start::new("s", "asker")).await.expect("parks");
        let id = parked.asks.as_ref().expect("asks")[0].id.clone();
        rt.settle().await;
        let before = store.stats().batches;
        let resumed = rt.resume("s", &id, json!("yes")).await.expect("resumes");
        assert!(matches!(resumed, crate::Resumed::Outcome(_)), "{resumed:?}");
        rt.settle().await;
        assert_eq!(
            store.stats().batches - before,
            2,
            "the resume with the run's end, then the delivery's note"
        );
        rt.shutdown().await;
    }
}
