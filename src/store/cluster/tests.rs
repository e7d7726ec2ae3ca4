//! The cluster engine: leases on the cluster's clock, fenced commits, one log.

use std::sync::Arc;
use std::time::Duration;

use super::{Cluster, Node};
use crate::clock::{Clock, ManualClock};
use crate::slot::Slot;
use crate::store::engine::{Engine, WriteFailure};
use crate::store::owners::Change;
use crate::store::{Batch, Space, Store};

const LEASE: Duration = Duration::from_secs(30);

/// A cluster on its clock, and a node's clock that moves with it.
fn cluster() -> (Cluster, ManualClock) {
    let clock = ManualClock::default();
    (Cluster::new(clock.clone(), LEASE), clock)
}

/// A group of one batch of `slot`'s putting `key`.
fn put(slot: Slot, key: &[u8]) -> Vec<Batch> {
    let mut batch = Batch::of_slot(slot);
    batch.put(Space::Meta, key.to_vec(), b"v".to_vec());
    vec![batch]
}

/// Advances `clocks` by `by`.
fn advance(clocks: &[&ManualClock], by: Duration) {
    for clock in clocks {
        clock.advance(by);
    }
}

/// Hands over what `node` was told to drain, as the runtime does: each slot given back.
fn hand_over(node: &Node, changes: &mut tokio::sync::mpsc::UnboundedReceiver<Change>) -> usize {
    let mut given = 0;
    while let Ok(change) = changes.try_recv() {
        if let Change::Drain(slots) = change {
            for slot in slots {
                node.release(slot).expect("given back");
                given += 1;
            }
        }
    }
    given
}

#[test]
fn a_node_that_joins_is_handed_its_share_a_few_slots_a_round() {
    let (cluster, clock) = cluster();
    let a = cluster.join("a", clock.clone()).unwrap();
    assert_eq!(
        a.served().len(),
        usize::from(Slot::COUNT),
        "alone, it takes every slot"
    );
    let mut a_changes = a.owners().unwrap().changes;
    let b = cluster.join("b", clock.clone()).unwrap();
    assert!(b.served().is_empty(), "every slot is a's");
    let mut rounds = 0;
    while b.served().len() < 512 {
        rounds += 1;
        assert!(rounds < 40, "b never got its share: {}", b.served().len());
        a.round();
        hand_over(&a, &mut a_changes);
        b.round();
    }
    assert_eq!(a.served().len(), 512);
    assert!(
        rounds >= 512 / crate::store::owners::DRAIN_STEP,
        "handed over a few at a time"
    );
    let first_of_b = b.served()[0];
    assert_eq!(cluster.owner(first_of_b).as_deref(), Some("b"));
    assert_eq!(a.owner(first_of_b).as_deref(), Some("node:b"));
    assert!(cluster.audit().is_empty());
}

#[test]
fn a_frozen_node_commits_nothing_once_its_slot_is_taken() {
    let (cluster, db) = cluster();
    let frozen_clock = db.clone();
    let a = cluster
        .join("a", ManualClock::at(frozen_clock.now()))
        .unwrap();
    let slot = a.served()[0];
    a.write(&mut put(slot, b"before"), 0).unwrap();
    // b joins once a's leases ended: a was frozen (its clock stood still).
    let b_clock = ManualClock::at(db.now());
    db.advance(LEASE + Duration::from_secs(1));
    b_clock.advance(LEASE + Duration::from_secs(1));
    let b = cluster.join("b", b_clock.clone()).unwrap();
    assert!(b.served().contains(&slot), "b took the lapsed slot");
    b.write(&mut put(slot, b"by b"), 0).unwrap();
    // a, thawed, still thinks it serves the slot (its own clock says so): the table
    // refuses its write, and a learns it lost the slot.
    let mut a_changes = a.owners().unwrap().changes;
    let refused = a.write(&mut put(slot, b"stale"), 0);
    assert_eq!(refused, Err(WriteFailure::NotOwner(vec![slot])));
    assert_eq!(
        a.get(Space::Meta, b"stale").unwrap(),
        None,
        "nothing of it is written"
    );
    let told: Vec<Change> = std::iter::from_fn(|| a_changes.try_recv().ok()).collect();
    assert!(
        told.iter()
            .any(|c| matches!(c, Change::Lost(s) if s.contains(&slot))),
        "a is told: {told:?}"
    );
    assert!(!a.served().contains(&slot));
    assert!(cluster.audit().is_empty(), "{:?}", cluster.audit());
}

#[test]
fn a_node_serves_a_slot_only_two_thirds_of_a_lease_unrenewed() {
    let (cluster, clock) = cluster();
    let a = cluster.join("a", clock.clone()).unwrap();
    let slot = a.served()[0];
    advance(&[&clock], LEASE * 2 / 3);
    assert!(a.served().is_empty(), "its time to be served passed");
    assert_eq!(
        a.write(&mut put(slot, b"late"), 0),
        Err(WriteFailure::NotOwner(vec![slot]))
    );
    // Its next round takes the slot again under a new epoch: it held it.
    a.round();
    assert!(a.served().contains(&slot));
    a.write(&mut put(slot, b"again"), 0).unwrap();
}

#[test]
fn a_killed_node_keeps_its_slots_until_their_leases_end() {
    let (cluster, clock) = cluster();
    let a = cluster.join("a", clock.clone()).unwrap();
    let slot = a.served()[0];
    a.kill();
    assert!(a.write(&mut put(slot, b"dead"), 0).is_err());
    a.close(false);
    assert!(
        cluster.join("a", clock.clone()).is_err(),
        "a node seen within a lease is held"
    );
    let b = cluster.join("b", clock.clone()).unwrap();
    assert!(b.served().is_empty(), "a's leases hold");
    advance(&[&clock], LEASE);
    b.round();
    assert_eq!(b.served().len(), usize::from(Slot::COUNT));
    // a comes back under its name: a new process, and b hands it its share.
    let again = cluster.join("a", clock.clone()).unwrap();
    assert!(again.served().is_empty());
    assert!(cluster.audit().is_empty());
}

#[test]
fn a_node_closed_gives_its_slots_back_at_once() {
    let (cluster, clock) = cluster();
    let a = cluster.join("a", clock.clone()).unwrap();
    a.close(true);
    let b = cluster.join("b", clock.clone()).unwrap();
    assert_eq!(b.served().len(), usize::from(Slot::COUNT));
}

#[test]
fn the_log_is_every_node_s_numbered_in_commit_order() {
    let (cluster, clock) = cluster();
    let a = cluster.join("a", clock.clone()).unwrap();
    let b = cluster.join("b", clock.clone()).unwrap();
    let mut a_changes = a.owners().unwrap().changes;
    while b.served().is_empty() {
        a.round();
        hand_over(&a, &mut a_changes);
        b.round();
    }
    let (a_slot, b_slot) = (a.served()[0], b.served()[0]);
    let a_store = Store::on_cluster(Arc::clone(&a)).unwrap();
    let b_store = Store::on_cluster(Arc::clone(&b)).unwrap();
    for (store, slot, entry) in [
        (&a_store, a_slot, "a1"),
        (&b_store, b_slot, "b1"),
        (&a_store, a_slot, "a2"),
    ] {
        let mut batch = Batch::of_slot(slot);
        batch.append_log(entry.as_bytes().to_vec());
        let (tx, rx) = std::sync::mpsc::channel();
        store.submit(batch, Box::new(move |fate| tx.send(fate.is_ok()).unwrap()));
        assert!(rx.recv().unwrap(), "{entry} committed");
    }
    let expected: Vec<(u64, Vec<u8>)> = [(1, "a1"), (2, "b1"), (3, "a2")]
        .map(|(n, e)| (n, e.as_bytes().to_vec()))
        .to_vec();
    assert_eq!(
        b_store.log_from(1, 10).unwrap(),
        expected,
        "b reads a's too"
    );
    assert_eq!(a_store.log_from(2, 1).unwrap(), expected[1..2]);
    assert_eq!(cluster.log_from(3).unwrap(), expected[2..]);
    assert_eq!(a_store.log_last().unwrap(), 3);
}

/// A runtime of the node `name` on `cluster`, on `clock` (the node's own), whose target
/// asks its caller, the answer due in a minute.
async fn node_runtime(
    cluster: &Cluster,
    name: &str,
    clock: &ManualClock,
) -> (Arc<Node>, crate::Runtime) {
    let node = cluster.join(name, clock.clone()).unwrap();
    let rt = crate::Runtime::builder()
        .without_env()
        .clock(clock.clone())
        .ids(crate::ids::Ids::random(u64::from(node.number)))
        .store(Store::on_cluster(Arc::clone(&node)).unwrap())
        .register("asker", &[], |ctx, _, _| async move {
            let ask = crate::ask::Ask::caller("go?").expiry_at(Duration::from_secs(60));
            Ok(serde_json::json!({ "answer": ctx.ask(ask).await? }))
        })
        .build()
        .await
        .expect("builds");
    (node, rt)
}

/// Parks a run on `subject`: its ask's id.
async fn park(rt: &crate::Runtime, subject: &str) -> String {
    let parked = rt
        .run(crate::Start::new(subject, "asker"))
        .await
        .expect("parks");
    parked.asks.expect("asks")[0].id.clone()
}

/// The node a runtime's next timer key names (its high bits).
fn keys_node(rt: &crate::Runtime) -> u64 {
    rt.hub().services.keys.next() >> crate::store::owners::NODE_SHIFT
}

/// Each node makes its timer keys in its own range, whatever another node kept before
/// it opened: two nodes making the same key for the same instant would have a slot
/// taken from one bring a timer that overwrites one of the other's.
#[tokio::test]
async fn each_node_makes_timer_keys_in_a_range_of_its_own() {
    let (cluster, clock) = cluster();
    let (a_node, a) = node_runtime(&cluster, "a", &clock).await;
    park(&a, "s").await;
    let (b_node, b) = node_runtime(&cluster, "b", &clock).await;
    assert_eq!(keys_node(&a), u64::from(a_node.number));
    assert_eq!(
        keys_node(&b),
        u64::from(b_node.number),
        "b did not take a's range"
    );
    // a's next process goes on from where a's last kept its counter, under its own key.
    let kept = |number: u32| {
        let key = crate::store::layout::node_timers_key(number);
        let value = cluster.get(Space::Ids, &key).expect("kept");
        u64::from_be_bytes(value.try_into().expect("8 bytes"))
    };
    let made = kept(a_node.number);
    assert_eq!(
        made >> crate::store::owners::NODE_SHIFT,
        u64::from(a_node.number)
    );
    assert!(made > u64::from(a_node.number) << crate::store::owners::NODE_SHIFT);
    a_node.kill();
    a.shutdown().await;
    advance(&[&clock], LEASE);
    let (_, again) = node_runtime(&cluster, "a", &clock).await;
    assert!(again.hub().services.keys.next() >= made);
    assert_eq!(keys_node(&again), u64::from(a_node.number));
    b.shutdown().await;
    again.shutdown().await;
}

/// A node whose time to serve a slot passed unrenewed (paused past its lease, before
/// its next round) serves nothing of it, not even a read; its next round takes the
/// slot again under a new epoch, and it serves the slot as it was.
#[tokio::test]
async fn a_node_past_its_time_to_serve_a_slot_refuses_even_a_read() {
    let (cluster, clock) = cluster();
    let (node, rt) = node_runtime(&cluster, "a", &clock).await;
    let id = park(&rt, "s").await;
    advance(&[&clock], LEASE * 2 / 3);
    let slot = Slot::of("s");
    match rt.list("s").await {
        Err(crate::StartError::Store(crate::StoreFault::NotOwner { .. })) => {}
        other => panic!("expected a refusal as not_owner, got {other:?}"),
    }
    // The store gave the slot up and the runtime follows.
    let began = std::time::Instant::now();
    while rt.serves(slot.number()) {
        assert!(began.elapsed() < Duration::from_secs(10), "never given up");
        tokio::task::yield_now().await;
    }
    node.round();
    let began = std::time::Instant::now();
    while !rt.serves(slot.number()) {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "never taken again"
        );
        tokio::task::yield_now().await;
    }
    let listed = rt.list("s").await.expect("served again");
    assert_eq!(
        listed.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        [id]
    );
    rt.shutdown().await;
}

/// On a database where a build before kept one timer keys' counter, its one node goes
/// on past it (every key it made is below it), not from the start of its range.
#[tokio::test]
async fn a_node_goes_on_past_the_counter_a_build_before_kept() {
    let (cluster, clock) = cluster();
    let shift = crate::store::owners::NODE_SHIFT;
    let kept = (1u64 << shift) + 500;
    cluster.put(
        Space::Ids,
        crate::store::layout::TIMERS,
        &kept.to_be_bytes(),
    );
    let (node, rt) = node_runtime(&cluster, "a", &clock).await;
    assert_eq!(node.number, 1);
    assert!(rt.hub().services.keys.next() >= kept);
    rt.shutdown().await;
    // Another node's counter is not taken up: the node starts in its own range.
    let (cluster, clock) = self::cluster();
    cluster.put(
        Space::Ids,
        crate::store::layout::TIMERS,
        &((2u64 << shift) + 9).to_be_bytes(),
    );
    let (_, rt) = node_runtime(&cluster, "a", &clock).await;
    assert_eq!(keys_node(&rt), 1);
    rt.shutdown().await;
}
