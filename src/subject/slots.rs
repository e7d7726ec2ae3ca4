//! The slots a runtime owns: giving one up and taking one back, while the runtime runs.
//!
//! A slot is given up when the store refuses a write to it (another process owns it:
//! `StoreError::NotOwner`), or when asked ([`Runtime::unload_slot`]). From that moment
//! its subjects are refused as [`StoreFault::NotOwner`](crate::StoreFault::NotOwner)
//! (`crate::slot::Away`); each loaded subject unloads once nothing it wrote is pending
//! (`super::actor`), its activations stopped and its waiters told; then what the slot's
//! subjects fed outside themselves is withdrawn, slot-wide: their timers, their runs in
//! the run tree and the records' index, their asks in the inbox, and their share of the
//! counts. Every other slot goes on.
//!
//! Taking a slot back reads it as an open reads the whole store: first its idempotency
//! keys (`super::keyed`), before any of its subjects is served, then its subjects
//! (`super::durable::recover_subjects`, within the slot's prefix): its heads counted,
//! the subjects that offer a user ask or were executing read back (the latter replayed),
//! its undelivered outcomes left waiting, and its wakes read again by the ticker. The
//! rest of its subjects are read back when first touched.
//!
//! On a database that nodes share, the store tells which slots this process owns as it
//! opens and every change after ([`crate::store::owners`]): the slots it does not own
//! start away ([`start_away`]), and [`follow`] gives up a slot lost, takes back a slot
//! gained, and unloads a slot to hand over before the store gives it back.
//!
//! [`Runtime::unload_slot`]: crate::Runtime::unload_slot

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use tokio::sync::mpsc::UnboundedReceiver;

use super::hub::Hub;
use super::registry::Leaving;
use crate::slot::Slot;
use crate::store::owners::Change;
use crate::supervisor;

/// How often the doors other nodes saved are read again.
const DOORS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Before the open reads the store: every slot but `owned` is away, with nothing of it
/// loaded to withdraw.
pub(crate) async fn start_away(hub: &Arc<Hub>, owned: &[Slot]) {
    let owned: BTreeSet<Slot> = owned.iter().copied().collect();
    let mut withdrawn = hub.moves.lock().await;
    for slot in Slot::all().filter(|slot| !owned.contains(slot)) {
        hub.services.away.leave(slot);
        withdrawn.insert(slot);
    }
}

/// Follows the changes of the slots this process owns, in order, until the store stops
/// telling them or the runtime is gone: a slot lost is given up at once, a slot gained
/// read back, and a slot to hand over unloaded and then given back.
///
/// Every [`DOORS_EVERY`] meanwhile, the doors other nodes saved, replaced or removed are
/// taken (`crate::door::shared`).
pub(crate) async fn follow(hub: Weak<Hub>, mut changes: UnboundedReceiver<Change>) {
    let mut doors = crate::door::shared::Seen::default();
    let mut tick = tokio::time::interval(DOORS_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let change = tokio::select! {
            change = changes.recv() => change,
            _ = tick.tick() => {
                let Some(hub) = hub.upgrade() else {
                    return;
                };
                // A read of the store: off the runtime's threads.
                let mut seen = std::mem::take(&mut doors);
                let read = tokio::task::spawn_blocking(move || {
                    let refreshed = seen.refresh(&hub.services, &hub.doors);
                    (seen, refreshed)
                })
                .await;
                if let Ok((seen, refreshed)) = read {
                    doors = seen;
                    if let Err(error) = refreshed {
                        tracing::warn!(%error, "the doors other nodes saved could not be read; read again in a second");
                    }
                }
                continue;
            }
        };
        let Some(change) = change else {
            return;
        };
        let Some(hub) = hub.upgrade() else {
            return;
        };
        match change {
            Change::Lost(slots) => {
                for slot in slots {
                    give_up(&hub, slot);
                }
            }
            Change::Gained(slots) => {
                for slot in slots {
                    if let Err(error) = load(&hub, slot).await {
                        // Given back, so it is not held unserved: a node (this one at its
                        // next round, or another) takes it and reads it again.
                        tracing::error!(slot = slot.number(), %error, "a slot taken could not be read back; it is given back");
                        release(&hub, slot).await;
                    }
                }
            }
            Change::Drain(slots) => {
                for slot in slots {
                    hand_over(&hub, slot).await;
                    release(&hub, slot).await;
                }
            }
        }
    }
}

/// Gives `slot`, unloaded, back to the store's owners, once what its subjects queued
/// without waiting for it (an outcome's delivery noted) is written.
async fn release(hub: &Arc<Hub>, slot: Slot) {
    let Some(store) = hub.services.store.clone() else {
        return;
    };
    let released = tokio::task::spawn_blocking(move || {
        store.sync_now();
        store.release(slot)
    })
    .await;
    if let Ok(Err(error)) = released {
        tracing::warn!(slot = slot.number(), %error, "a slot handed over could not be given back: another node takes it when its lease ends");
    }
}

/// Give `slot` up, if the runtime owns it: from now on its subjects are refused, and a
/// task (which a shutdown waits for) unloads them.
pub(crate) fn give_up(hub: &Arc<Hub>, slot: Slot) {
    if !hub.services.away.leave(slot) {
        return;
    }
    tracing::warn!(
        slot = slot.number(),
        "the slot is no longer this process's (the store refused a write to it, or its lease was lost): its subjects are unloaded, the others go on"
    );
    let task = tokio::spawn({
        let hub = Arc::clone(hub);
        async move {
            let mut withdrawn = hub.moves.lock().await;
            withdraw(&hub, slot, &mut withdrawn, Leaving::Now).await;
        }
    });
    hub.services.tasks.push(task);
}

/// Give `slot` up and wait until its subjects are unloaded and what they fed is
/// withdrawn (also when the slot was given up already, by a write the store refused).
pub(crate) async fn unload(hub: &Arc<Hub>, slot: Slot) {
    hub.services.away.leave(slot);
    let mut withdrawn = hub.moves.lock().await;
    withdraw(hub, slot, &mut withdrawn, Leaving::Now).await;
}

/// Hand `slot` over to another node: as [`unload`], but each subject's running
/// activations first park or end, for at most [`crate::subject::DRAIN_WAIT`], so a
/// visitor waiting on one gets its outcome rather than a refusal.
async fn hand_over(hub: &Arc<Hub>, slot: Slot) {
    hub.services.away.leave(slot);
    let mut withdrawn = hub.moves.lock().await;
    withdraw(hub, slot, &mut withdrawn, Leaving::Drained).await;
}

/// Unload every subject of `slot`, given up, then withdraw what they fed, unless that
/// is done (`withdrawn`, held under the lock of the runtime's slot moves: one at a
/// time) or the slot was taken back meanwhile.
async fn withdraw(hub: &Arc<Hub>, slot: Slot, withdrawn: &mut BTreeSet<Slot>, leaving: Leaving) {
    if !hub.services.away.is_away(slot) || withdrawn.contains(&slot) {
        return;
    }
    hub.registry.unload_slot(hub, slot, leaving).await;
    let s = &hub.services;
    s.timers.leave(slot);
    for run in hub.records.leave(slot) {
        let _ = hub.supervisor.cast(supervisor::Msg::Ended { run });
    }
    hub.inbox.leave(slot);
    s.caps.leave(slot);
    withdrawn.insert(slot);
}

/// Take `slot` back, if it was given up, and read it back as an open does: first what
/// its unloading had still to withdraw, so nothing of it is held twice. An error (with
/// the slot given up again) when the store cannot be read.
pub(crate) async fn load(hub: &Arc<Hub>, slot: Slot) -> Result<(), String> {
    let mut withdrawn = hub.moves.lock().await;
    withdraw(hub, slot, &mut withdrawn, Leaving::Now).await;
    if !hub.services.away.is_away(slot) {
        return Ok(());
    }
    if let Some(store) = hub.services.store.clone() {
        // The slot's next epoch, once every change queued before is written: a change
        // the unloaded subjects made and the store has not yet written (behind one it
        // refused, say) is refused from now on, and the reading below sees every one it
        // wrote.
        let moved = tokio::task::spawn_blocking(move || store.next_epoch(slot)).await;
        if let Err(error) = moved {
            return Err(format!("the slot's epoch could not be moved on: {error}"));
        }
    }
    let prefix = crate::store::layout::slot_prefix(slot);
    if let Some(store) = &hub.services.store {
        // Its idempotency keys, before any start on its subjects is taken: a start
        // under a key another node kept answers with that node's run.
        hub.recover_keys(store, &prefix)?;
    }
    if !hub.services.away.take(slot) {
        return Ok(());
    }
    withdrawn.remove(&slot);
    let Some(store) = hub.services.store.clone() else {
        return Ok(());
    };
    if let Err(error) = super::durable::recover_subjects(hub, &store, &prefix).await {
        // What was read back is withdrawn again.
        hub.services.away.leave(slot);
        withdraw(hub, slot, &mut withdrawn, Leaving::Now).await;
        return Err(error);
    }
    // Its wakes are read again (`super::index::Pager`).
    hub.services.timers.kick();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use crate::ask::Ask;
    use crate::clock::ManualClock;
    use crate::error::{ResumeError, StartError, StoreFault};
    use crate::ids::Ids;
    use crate::runtime::{Runtime, Start};
    use crate::slot::Slot;
    use crate::store::{Faults, NotOwned, Store, Syncing};
    use crate::{Event, Resolution, Resumed};

    /// A runtime on `store` whose target asks its caller, the answer due in a minute.
    async fn open(store: Store, clock: &ManualClock) -> Runtime {
        Runtime::builder()
            .without_env()
            .clock(clock.clone())
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

    /// A memory store syncing as `syncing` that refuses the slots `NotOwned` is told of.
    fn refusing(syncing: Syncing) -> (NotOwned, Store) {
        let refused = NotOwned::default();
        let faults = Faults {
            not_owner: Some(refused.clone()),
            ..Faults::default()
        };
        (refused, Store::memory_with(syncing, faults))
    }

    /// Two subjects in different slots.
    const A: &str = "a";
    const B: &str = "b";

    /// Park a run on `subject`: its ask's id.
    async fn park(rt: &Runtime, subject: &str) -> String {
        let parked = rt.run(Start::new(subject, "asker")).await.expect("parks");
        parked.asks.expect("asks")[0].id.clone()
    }

    fn not_owner(subject: &str) -> StoreFault {
        StoreFault::not_owner(subject, Slot::of(subject))
    }

    /// A slot given up refuses its subjects and takes its share of the counts; the other
    /// slots go on; taken back, its subject serves as it was, and the deadline that
    /// passed while it was away fires.
    #[tokio::test]
    async fn a_slot_given_up_and_taken_back_loses_and_doubles_nothing() {
        assert_ne!(Slot::of(A), Slot::of(B));
        let clock = ManualClock::default();
        let rt = open(
            Store::memory_with(Syncing::Automatic, Faults::default()),
            &clock,
        )
        .await;
        let (ia, ib) = (park(&rt, A).await, park(&rt, B).await);
        let second = park(&rt, A).await;
        rt.settle().await;
        let before = rt.stats().await;
        assert_eq!((before.caller_open, before.runs), (3, 3));

        let slot = Runtime::slot_of(A);
        rt.unload_slot(slot).await.expect("unloads");
        rt.unload_slot(slot)
            .await
            .expect("a second time waits for nothing");
        assert_eq!(
            rt.list(A).await.expect_err("refused"),
            StartError::Store(not_owner(A))
        );
        assert_eq!(
            rt.resume(A, &ia, json!("yes")).await.expect_err("refused"),
            ResumeError::Store(not_owner(A))
        );
        let away = rt.stats().await;
        assert_eq!(
            (away.caller_open, away.runs, away.records),
            (1, 1, 1),
            "{away:?}"
        );
        // Each subject had its ask's deadlines and an idle check: a's three are gone.
        assert_eq!(before.timers - away.timers, 3, "{before:?} {away:?}");

        // The other slot goes on, its deadline included.
        let mut events = rt.events();
        clock.advance(Duration::from_secs(61));
        rt.settle().await;
        let mut expired = Vec::new();
        while let Ok(event) = events.try_recv() {
            if let Event::AskResolved {
                subject,
                how: Resolution::Expired,
                ..
            } = event
            {
                expired.push(subject);
            }
        }
        assert_eq!(expired, [B], "only the owned slot's deadline fired");
        assert!(rt.list(B).await.expect("lists").is_empty());

        // Taken back: the deadlines that passed fire once, and the counts are whole.
        rt.load_slot(slot).await.expect("loads");
        rt.settle().await;
        let mut expired = Vec::new();
        while let Ok(event) = events.try_recv() {
            if let Event::AskResolved {
                subject,
                interaction,
                how: Resolution::Expired,
                ..
            } = event
            {
                expired.push((subject, interaction));
            }
        }
        expired.sort();
        let mut want = vec![(A.to_owned(), ia.clone()), (A.to_owned(), second)];
        want.sort();
        assert_eq!(expired, want);
        let after = rt.stats().await;
        assert_eq!((after.caller_open, after.runs), (0, 0), "{after:?}");
        assert!(matches!(
            rt.resume(A, &ia, json!("late")).await,
            Err(ResumeError::Refused(_))
        ));
        drop(ib);
        rt.shutdown().await;
    }

    /// A subject whose slot is given up while it serves is unloaded once its writes are
    /// durable, then reads back as it was: the ask it held is resumed once.
    #[tokio::test]
    async fn a_slot_taken_back_serves_its_asks_once() {
        let clock = ManualClock::default();
        let rt = open(
            Store::memory_with(Syncing::Automatic, Faults::default()),
            &clock,
        )
        .await;
        let ia = park(&rt, A).await;
        let slot = Runtime::slot_of(A);
        rt.unload_slot(slot).await.expect("unloads");
        rt.load_slot(slot).await.expect("loads");
        rt.load_slot(slot)
            .await
            .expect("a second time reads nothing");
        let listed = rt.list(A).await.expect("lists");
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].id, ia);
        let stats = rt.stats().await;
        assert_eq!((stats.caller_open, stats.runs), (1, 1), "{stats:?}");
        let resumed = rt.resume(A, &ia, json!("yes")).await.expect("resumes");
        assert!(matches!(resumed, Resumed::Outcome(_)), "{resumed:?}");
        assert!(matches!(
            rt.resume(A, &ia, json!("again")).await,
            Err(ResumeError::Refused(_))
        ));
        rt.settle().await;
        let stats = rt.stats().await;
        assert_eq!((stats.caller_open, stats.runs), (0, 0), "{stats:?}");
        rt.shutdown().await;
    }

    /// A store that refuses a write to a slot (another process owns it) makes the
    /// runtime give the slot up: the operation whose write was refused is told so and
    /// changed nothing, the slot's subjects are refused, and the runtime goes on with
    /// every other slot.
    #[tokio::test]
    async fn a_write_refused_for_its_slot_unloads_that_slot_only() {
        let (refused, store) = refusing(Syncing::Automatic);
        let clock = ManualClock::default();
        let rt = open(store.clone(), &clock).await;
        let ia = park(&rt, A).await;
        rt.settle().await;
        refused.set(Slot::of(A), true);
        assert_eq!(
            rt.resume(A, &ia, json!("yes")).await.expect_err("refused"),
            ResumeError::Store(not_owner(A))
        );
        assert_eq!(
            rt.list(A).await.expect_err("refused"),
            StartError::Store(not_owner(A))
        );
        assert!(!rt.is_shut_down());
        assert_eq!(rt.store_failure(), None);
        let ib = park(&rt, B).await;
        let resumed = rt.resume(B, &ib, json!("yes")).await.expect("resumes");
        assert!(matches!(resumed, Resumed::Outcome(_)), "{resumed:?}");

        // Owned again: the ask was never resolved, and is resumed once.
        refused.set(Slot::of(A), false);
        rt.load_slot(Runtime::slot_of(A)).await.expect("loads");
        let listed = rt.list(A).await.expect("lists");
        assert_eq!(listed.len(), 1, "{listed:?}");
        let resumed = rt.resume(A, &ia, json!("yes")).await.expect("resumes");
        assert!(matches!(resumed, Resumed::Outcome(_)), "{resumed:?}");
        rt.settle().await;
        let stats = rt.stats().await;
        assert_eq!((stats.caller_open, stats.runs), (0, 0), "{stats:?}");
        rt.shutdown().await;
    }

    /// A subject with a change not yet durable unloads only once it is: the unload
    /// waits for the store, and what the change held is found when the slot is back.
    #[tokio::test]
    async fn an_unload_waits_for_what_its_subjects_wrote() {
        let store = Store::memory_with(Syncing::Manual, Faults::default());
        let clock = ManualClock::default();
        let rt = open(store.clone(), &clock).await;
        let parked = tokio::spawn({
            let rt = rt.clone();
            async move { rt.run(Start::new(A, "asker")).await }
        });
        // The start's change waits on a sync: let it reach the store.
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let unload = tokio::spawn({
            let rt = rt.clone();
            async move { rt.unload_slot(Runtime::slot_of(A)).await }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(
            !unload.is_finished(),
            "the unload waits for the change the store has not synced"
        );
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while !unload.is_finished() {
                store.sync_now();
                tokio::task::yield_now().await;
            }
        })
        .await;
        assert!(waited.is_ok(), "the unload ends once the store syncs");
        unload.await.expect("joins").expect("unloads");
        let parked = parked.await.expect("joins");
        rt.load_slot(Runtime::slot_of(A)).await.expect("loads");
        let listed = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                store.sync_now();
                if let Ok(listed) = rt.list(A).await {
                    break listed;
                }
            }
        })
        .await
        .expect("lists");
        match parked {
            // Parked before the slot left: its ask is there when it is back.
            Ok(record) => {
                let id = &record.asks.expect("asks")[0].id;
                assert_eq!(listed.len(), 1, "{listed:?}");
                assert_eq!(&listed[0].id, id);
            }
            // Refused or cut short as the slot left: whatever it made durable is
            // there once, a run that was executing replayed.
            Err(error) => {
                assert!(
                    matches!(&error, StartError::Store(f) if *f == not_owner(A)),
                    "{error:?}"
                );
                assert!(listed.len() <= 1, "{listed:?}");
            }
        }
        rt.shutdown().await;
    }

    /// A user ask of a slot given up leaves the inbox; an answer to it is told the slot
    /// is not this runtime's (not that the ask is unknown), and once the slot is back the
    /// ask is in the inbox again and takes the answer.
    #[tokio::test]
    async fn an_answer_to_a_user_ask_of_a_slot_away_is_told_not_owner() {
        let rt = Runtime::builder()
            .without_env()
            .clock(ManualClock::default())
            .ids(Ids::sequential())
            .store(Store::memory_with(Syncing::Automatic, Faults::default()))
            .register("user_asker", &[], |ctx, _, _| async move {
                let answer = ctx
                    .ask(Ask::user("ok?").expiry_at(Duration::from_secs(600)))
                    .await?;
                Ok(json!({ "answer": answer }))
            })
            .build()
            .await
            .expect("builds");
        rt.run(Start::new(A, "user_asker")).await.expect("suspends");
        rt.settle().await;
        let items = rt.inbox(1, None).expect("pages").items;
        assert_eq!(items.len(), 1);
        let id = items[0].id.clone();
        rt.unload_slot(Runtime::slot_of(A)).await.expect("unloads");
        assert!(rt.inbox(1, None).expect("pages").items.is_empty());
        assert_eq!(
            rt.answer(&id, json!("yes")).await,
            Err(crate::AnswerError::Store(not_owner(A)))
        );
        rt.load_slot(Runtime::slot_of(A)).await.expect("loads");
        assert_eq!(rt.inbox(1, None).expect("pages").items.len(), 1);
        rt.answer(&id, json!("yes")).await.expect("answers");
        rt.shutdown().await;
    }

    /// Slots are numbered below 1024, and a runtime in memory has nowhere to put a slot's
    /// subjects.
    #[tokio::test]
    async fn a_slot_that_cannot_move_is_refused_by_name() {
        let rt = Runtime::builder()
            .without_env()
            .build()
            .await
            .expect("builds");
        assert_eq!(
            rt.unload_slot(1024).await,
            Err(crate::SlotError::NoSuchSlot(1024))
        );
        assert_eq!(rt.unload_slot(7).await, Err(crate::SlotError::InMemory));
        rt.shutdown().await;
    }

    /// Set `key` in `space` to `value`, durably, as damage would.
    fn overwrite(store: &Store, space: crate::store::Space, key: Vec<u8>, value: Vec<u8>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut batch = crate::store::Batch::new();
        batch.put(space, key, value);
        store.submit(
            batch,
            Box::new(move |fate| {
                let _ = tx.send(fate.is_ok());
            }),
        );
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(true));
    }

    /// A slot whose keys are damaged while it is away is not taken back: the load fails
    /// naming the slot and what is wrong, the slot stays away (its subjects refused as
    /// `not_owner`, not read as empty) and every other slot goes on; repaired, it loads.
    #[tokio::test]
    async fn a_slot_damaged_while_away_is_refused_loudly_and_stays_away() {
        use crate::store::{Space, layout};
        let store = Store::memory_with(Syncing::Automatic, Faults::default());
        let clock = ManualClock::default();
        let rt = open(store.clone(), &clock).await;
        let ia = park(&rt, A).await;
        let ib = park(&rt, B).await;
        rt.settle().await;
        let slot = Runtime::slot_of(A);
        rt.unload_slot(slot).await.expect("unloads");

        let key = layout::subject_key(A);
        let head = store
            .get(Space::Heads, &key)
            .expect("reads")
            .expect("a head");
        overwrite(
            &store,
            Space::Heads,
            key.clone(),
            b"\xffnot a head".to_vec(),
        );
        let error = rt.load_slot(slot).await.expect_err("damaged");
        let crate::SlotError::Unreadable {
            slot: named,
            reason,
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(*named, slot);
        assert!(
            reason.contains("heads") || reason.contains("head"),
            "{reason}"
        );
        assert_eq!(
            rt.list(A).await.expect_err("still away"),
            StartError::Store(not_owner(A))
        );
        let resumed = rt.resume(B, &ib, json!("yes")).await.expect("resumes");
        assert!(matches!(resumed, Resumed::Outcome(_)), "{resumed:?}");

        overwrite(&store, Space::Heads, key, head);
        rt.load_slot(slot).await.expect("repaired: loads");
        let listed = rt.list(A).await.expect("lists");
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].id, ia);
        rt.settle().await;
        let stats = rt.stats().await;
        assert_eq!((stats.caller_open, stats.runs), (1, 1), "{stats:?}");
        rt.shutdown().await;
    }

    /// Await `work` on a store synced by hand, syncing while it waits.
    async fn synced<T>(store: &Store, work: impl std::future::Future<Output = T>) -> T {
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                out = &mut work => return out,
                () = tokio::task::yield_now() => {
                    store.sync_now();
                }
            }
        }
    }

    /// A change the subject made after one the store refused for its slot, still queued
    /// when the slot is taken back, is not written: it was made over the refused change.
    /// The slot taken back holds the subject as the store had it, and a restart finds no
    /// trace of the later change (its run would be replayed, and ask again).
    #[tokio::test]
    async fn a_change_queued_behind_a_refused_one_is_not_written_once_the_slot_is_back() {
        use futures::FutureExt;
        let (refused, store) = refusing(Syncing::Manual);
        let clock = ManualClock::default();
        let rt = open(store.clone(), &clock).await;
        let ia = synced(&store, park(&rt, A)).await;
        synced(&store, rt.settle()).await;
        assert_eq!(store.queued(), 0);

        // The resume's change waits in the store's queue.
        refused.set(Slot::of(A), true);
        let resume = tokio::spawn({
            let (rt, ia) = (rt.clone(), ia.clone());
            async move { rt.resume(A, &ia, json!("yes")).await }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(store.queued(), 1, "the resume's change is queued");
        // A start reaches the subject's mailbox, then the store refuses the resume's
        // change: the subject makes the start's change before it hears of the refusal.
        let started = rt.run(Start::new(A, "asker")).now_or_never();
        assert!(started.is_none(), "the start waits for its change");
        assert_eq!(store.sync_now(), 0, "the resume's change is refused");
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert_eq!(store.queued(), 1, "the start's change is queued behind it");
        assert_eq!(
            resume.await.expect("joins").expect_err("refused"),
            ResumeError::Store(not_owner(A))
        );

        // Owned again and taken back: the queued change is of the refused epoch.
        refused.set(Slot::of(A), false);
        rt.load_slot(Runtime::slot_of(A)).await.expect("loads");
        assert_eq!(store.sync_now(), 0, "the start's change is not written");
        assert_eq!(store.queued(), 0);
        let listed = rt.list(A).await.expect("lists");
        assert_eq!(
            listed.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            [ia.as_str()],
            "{listed:?}"
        );
        let stats = rt.stats().await;
        assert_eq!((stats.caller_open, stats.runs), (1, 1), "{stats:?}");
        let resumed = synced(&store, rt.resume(A, &ia, json!("yes")))
            .await
            .expect("resumes");
        assert!(matches!(resumed, Resumed::Outcome(_)), "{resumed:?}");
        synced(&store, rt.settle()).await;
        synced(&store, rt.shutdown()).await;

        // What is durable is what was acknowledged: the ask resumed once, no other run.
        let reopened = store.crash_and_reopen().expect("a memory store");
        let rt = synced(&reopened, open(reopened.clone(), &clock)).await;
        synced(&reopened, rt.settle()).await;
        // The resumed ask's outcome may be left waiting, if its delivery was not yet
        // durable; nothing else is there.
        let listed = rt.list(A).await.expect("lists");
        assert!(
            listed
                .iter()
                .all(|e| e.id == ia && e.status == crate::EntryStatus::Finished),
            "{listed:?}"
        );
        assert_eq!(rt.stats().await.runs, 0);
        synced(&reopened, rt.shutdown()).await;
    }
}
