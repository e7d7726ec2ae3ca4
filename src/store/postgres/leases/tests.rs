//! Nodes sharing one database by the slots' leases, against the real server
//! (`PARKWAY_TEST_POSTGRES_URL`). Rounds of the keeping are run by hand
//! ([`Store::lease_round`]) and leases ended by hand in SQL, so nothing waits for a lease.

use std::sync::mpsc;
use std::time::Duration;

use crate::entry::To;
use crate::slot::Slot;
use crate::store::layout::slot_prefix;
use crate::store::owners::{Change, Leasing, Owners};
use crate::store::postgres::{test_database, test_sql};
use crate::store::{Batch, OpenError, Space, Store, StoreError};

/// How long a test waits for an acknowledgement.
const WAIT: Duration = Duration::from_secs(60);

/// The store of node `name` on the database at `url`.
fn node(url: &str, name: &str) -> Store {
    Store::open_postgres_as(url, &leasing(name)).expect("opens")
}

/// Node `name` with the default lease.
fn leasing(name: &str) -> Leasing {
    Leasing {
        node: name.to_string(),
        lease: Leasing::DEFAULT_LEASE,
        address: Some(format!("http://{name}.example:8080")),
        audit: false,
    }
}

/// A change of a subject of `slot`, written and acknowledged (or refused).
fn write(store: &Store, slot: Slot, name: &str) -> Result<(), StoreError> {
    let mut key = slot_prefix(slot).to_vec();
    key.extend_from_slice(name.as_bytes());
    let mut batch = Batch::of_slot(slot);
    batch.put(Space::Subjects, key, b"state");
    let (tx, rx) = mpsc::channel();
    store.submit(
        batch,
        Box::new(move |result| {
            let _ = tx.send(result.map(|_| ()));
        }),
    );
    rx.recv_timeout(WAIT).expect("the ack arrives")
}

/// Every change told so far.
fn changes(owners: &mut Owners) -> Vec<Change> {
    std::iter::from_fn(|| owners.changes.try_recv().ok()).collect()
}

/// `from` gives back the slots it `drained`, and `to` takes them at its next round.
fn hand_over(from: &Store, to: &Store, to_owners: &mut Owners, drained: &[Slot]) {
    for slot in drained {
        from.release(*slot).unwrap();
    }
    to.lease_round().unwrap();
    assert_eq!(changes(to_owners), vec![Change::Gained(drained.to_vec())]);
}

/// The slots numbered `numbers`.
fn slots(numbers: impl IntoIterator<Item = u16>) -> Vec<Slot> {
    numbers.into_iter().filter_map(Slot::numbered).collect()
}

/// The first node takes every slot; a second that joins takes none until the first
/// hands some over, a few a round, each given back once unloaded; each node then writes
/// only the slots it holds (the other's refused for those slots alone), and a node's
/// close gives its slots back to whoever keeps its leases next.
#[test]
fn nodes_that_join_share_the_slots_and_each_writes_only_its_own() {
    let url = test_database();
    let a = node(&url, "a");
    let mut a_owners = a.owners().expect("a database's slots have owners");
    assert!(a.owners().is_none(), "the owners are told once");
    assert_eq!(a_owners.owned, Slot::all().collect::<Vec<_>>());
    let b = node(&url, "b");
    let mut b_owners = b.owners().unwrap();
    assert!(b_owners.owned.is_empty(), "{:?}", b_owners.owned);
    let first = Slot::numbered(0).unwrap();
    let last = Slot::numbered(Slot::COUNT - 1).unwrap();
    write(&a, last, "x").expect("a writes what it holds");
    let refused = write(&b, last, "y").unwrap_err();
    assert!(
        matches!(refused, StoreError::NotOwner { slot, .. } if slot == last.number()),
        "{refused}"
    );
    // Two nodes seen: a's share is half, handed over from its highest slots.
    a.lease_round().unwrap();
    let drained = match changes(&mut a_owners).as_slice() {
        [Change::Drain(drained)] => drained.clone(),
        other => panic!("a hands slots over: {other:?}"),
    };
    assert_eq!(drained, slots(Slot::COUNT - 32..Slot::COUNT));
    // Being handed over: still written (its subjects' last changes land as they
    // unload) and renewed, until given back.
    write(&a, last, "x").expect("a slot being handed over takes its last changes");
    b.lease_round().unwrap();
    assert!(changes(&mut b_owners).is_empty(), "nothing free yet");
    hand_over(&a, &b, &mut b_owners, &drained);
    write(&b, last, "y").expect("b writes what it took");
    let refused = write(&a, last, "x").unwrap_err();
    assert!(matches!(refused, StoreError::NotOwner { .. }), "{refused}");
    write(&a, first, "x").expect("a goes on with the rest");
    assert!(!a.is_poisoned() && !b.is_poisoned());
    // a's next round hands over the next few, and so on to half each.
    a.lease_round().unwrap();
    assert_eq!(
        changes(&mut a_owners),
        vec![Change::Drain(slots(Slot::COUNT - 64..Slot::COUNT - 32))]
    );
    // Each knows where the other's slots are served once it has read the owners.
    assert_eq!(a.owner(last).as_deref(), Some("http://b.example:8080"));
    assert_eq!(a.owner(first), None, "a's own");
    assert_eq!(b.owner(first).as_deref(), Some("http://a.example:8080"));
    assert_eq!(b.owner(last), None, "b's own");
    let owners = test_sql(
        &url,
        "SELECT n.name || ':' || count(*) FROM parkway_slots s JOIN parkway_nodes n \
         ON s.owner = n.node GROUP BY n.name ORDER BY n.name",
    );
    assert_eq!(owners, ["a:992", "b:32"]);
    // a closes: its slots are free, and b takes its share of them at its next round.
    a.close();
    b.lease_round().unwrap();
    match changes(&mut b_owners).as_slice() {
        [Change::Gained(gained)] => assert_eq!(gained.len(), 992),
        other => panic!("b takes what a gave back: {other:?}"),
    }
    write(&b, first, "y").expect("b writes a slot a held");
}

/// A node whose lease ended (paused, cut off) before anyone took the slot cannot commit
/// to it: the database refuses the write for that slot alone, the node learns it lost
/// the slot, and another node takes it under the next epoch.
#[test]
fn a_node_past_its_lease_cannot_commit_and_learns_it_lost_the_slot() {
    let url = test_database();
    let a = node(&url, "a");
    let mut a_owners = a.owners().unwrap();
    let (lapsed, other) = (Slot::numbered(7).unwrap(), Slot::numbered(8).unwrap());
    test_sql(
        &url,
        "UPDATE parkway_slots SET lease_end = now() - interval '1 second' WHERE slot = 7",
    );
    let refused = write(&a, lapsed, "x").unwrap_err();
    assert!(
        matches!(refused, StoreError::NotOwner { slot: 7, .. }),
        "{refused}"
    );
    assert_eq!(changes(&mut a_owners), vec![Change::Lost(vec![lapsed])]);
    write(&a, other, "x").expect("the other slots go on");
    assert!(!a.is_poisoned());
    let before = test_sql(&url, "SELECT epoch FROM parkway_slots WHERE slot = 7");
    let b = node(&url, "b");
    assert_eq!(b.owners().unwrap().owned, vec![lapsed]);
    let after = test_sql(&url, "SELECT epoch FROM parkway_slots WHERE slot = 7");
    assert_eq!(
        after[0].parse::<i64>().unwrap(),
        before[0].parse::<i64>().unwrap() + 1
    );
    write(&b, lapsed, "y").expect("the new owner writes");
    // a does not take it back, though its share is larger: b's lease holds.
    a.lease_round().unwrap();
    assert!(
        changes(&mut a_owners)
            .iter()
            .all(|change| matches!(change, Change::Drain(_))),
        "a gains nothing"
    );
    assert!(write(&a, lapsed, "x").is_err());
}

/// A slot whose time to be served here passed (a renewal that came back too late) is
/// given up by the write that finds it so, in the leases as in the runtime, and taken
/// again under its next epoch at the next round: were the leases to go on renewing it,
/// the database would hold it as this node's while the runtime refused it for good.
#[test]
fn a_slot_no_longer_served_here_is_given_up_then_taken_again() {
    let url = test_database();
    let a = node(&url, "a");
    let mut owners = a.owners().unwrap();
    let slot = Slot::numbered(9).unwrap();
    a.lapse_served(slot);
    let refused = write(&a, slot, "x").unwrap_err();
    assert!(
        matches!(refused, StoreError::NotOwner { slot: 9, .. }),
        "{refused}"
    );
    assert_eq!(changes(&mut owners), vec![Change::Lost(vec![slot])]);
    let epoch = |url: &str| {
        test_sql(url, "SELECT epoch FROM parkway_slots WHERE slot = 9")[0]
            .parse::<i64>()
            .unwrap()
    };
    let before = epoch(&url);
    a.lease_round().unwrap();
    assert_eq!(changes(&mut owners), vec![Change::Gained(vec![slot])]);
    assert_eq!(epoch(&url), before + 1);
    write(&a, slot, "x").expect("served again");
}

/// The connection that holds a node for its process is held again when it ends (as a
/// restart of the database ends it): a second process of the node is still refused.
#[test]
fn a_node_is_held_again_when_its_holding_connection_ends() {
    let url = test_database();
    let a = node(&url, "a");
    let holder = || {
        test_sql(
            &url,
            "SELECT pid FROM pg_locks WHERE relation = 'parkway_nodes'::regclass \
             AND mode = 'RowShareLock' AND granted",
        )
    };
    let first = holder();
    assert_eq!(first.len(), 1, "{first:?}");
    test_sql(&url, &format!("SELECT pg_terminate_backend({})", first[0]));
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let now = holder();
        if now.len() == 1 && now != first {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not held again: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = Store::open_postgres_as(&url, &leasing("a"))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("node a is held by another parkway process"),
        "{text}"
    );
    write(&a, Slot::numbered(3).unwrap(), "x").expect("a goes on");
}

/// A group commit that fails for the database's own reasons stops the store, and the
/// node gives every slot back at once and takes none again, so the other nodes serve
/// them (a node whose store had stopped kept taking slots it could not serve, and a
/// third of a cluster's subjects were refused for good).
#[test]
fn a_failed_group_commit_gives_the_slots_back() {
    let url = test_database();
    let a = node(&url, "a");
    let b = node(&url, "b");
    let slot = a.owners().unwrap().owned[0];
    // Every statement of a's connections fails from now on for the row it writes.
    test_sql(
        &url,
        "ALTER TABLE parkway_kv ADD CONSTRAINT no_more CHECK (value <> 'y')",
    );
    let mut key = slot_prefix(slot).to_vec();
    key.extend_from_slice(b"y");
    let mut batch = Batch::of_slot(slot);
    batch.put(Space::Subjects, key, b"y");
    let (tx, rx) = mpsc::channel();
    a.submit(
        batch,
        Box::new(move |result| {
            let _ = tx.send(result.map(|_| ()));
        }),
    );
    assert!(rx.recv_timeout(WAIT).expect("the ack arrives").is_err());
    assert!(a.is_poisoned());
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let left = test_sql(
            &url,
            "SELECT count(*) FROM parkway_slots WHERE owner = \
             (SELECT node FROM parkway_nodes WHERE name = 'a')",
        );
        if left[0] == "0" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a kept {left:?} slots"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    b.lease_round().unwrap();
    let taken = test_sql(
        &url,
        "SELECT count(*) FROM parkway_slots WHERE owner = \
         (SELECT node FROM parkway_nodes WHERE name = 'b')",
    );
    assert_ne!(taken[0], "0", "b takes what a gave back");
}

/// Each round publishes what the node holds under the ceilings and reads what the other
/// live nodes hold; a node that left is not counted.
#[test]
fn nodes_publish_their_counts_and_read_the_others() {
    let url = test_database();
    let a = node(&url, "a");
    let b = node(&url, "b");
    let (a_owners, b_owners) = (a.owners().unwrap(), b.owners().unwrap());
    a_owners.counted.count_with(Box::new(|| (7, 2)));
    b_owners.counted.count_with(Box::new(|| (1, 0)));
    a.lease_round().unwrap();
    b.lease_round().unwrap();
    assert_eq!(
        (
            b_owners.counted.others(To::Caller),
            b_owners.counted.others(To::User)
        ),
        (7, 2)
    );
    a.lease_round().unwrap();
    assert_eq!(a_owners.counted.others(To::Caller), 1);
    a.close();
    b.lease_round().unwrap();
    assert_eq!(b_owners.counted.others(To::Caller), 0, "a left");
}

/// A lease another node took (the slot's epoch moved on under another owner) is lost at
/// the node's next round, without a write; once that owner gives it back, the node takes
/// it again under a newer epoch.
#[test]
fn leases_another_node_took_are_lost_at_the_next_round() {
    let url = test_database();
    let a = node(&url, "a");
    let mut a_owners = a.owners().unwrap();
    let b = node(&url, "b");
    test_sql(
        &url,
        "UPDATE parkway_slots SET epoch = epoch + 1, \
         owner = (SELECT node FROM parkway_nodes WHERE name = 'b') WHERE slot IN (3, 4)",
    );
    a.lease_round().unwrap();
    let told = changes(&mut a_owners);
    assert_eq!(told.first(), Some(&Change::Lost(slots([3, 4]))), "{told:?}");
    assert!(write(&a, Slot::numbered(3).unwrap(), "x").is_err());
    b.close();
    a.lease_round().unwrap();
    assert_eq!(changes(&mut a_owners), vec![Change::Gained(slots([3, 4]))]);
    write(&a, Slot::numbered(3).unwrap(), "x").unwrap();
}

/// A node's name is one process's at a time: a second open of it is refused while the
/// first is open, naming the node; a name that is not one is refused before connecting.
#[test]
fn a_node_name_used_twice_or_badly_is_refused() {
    let url = test_database();
    let a = node(&url, "a");
    let err = Store::open_postgres_as(&url, &leasing("a")).unwrap_err();
    assert!(matches!(err, OpenError::Database { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("node a is held by another parkway process"),
        "{text}"
    );
    a.close();
    drop(a);
    let again = node(&url, "a");
    assert_eq!(
        again.owners().unwrap().owned.len(),
        usize::from(Slot::COUNT)
    );
    for bad in ["", "a b", "a'; DROP TABLE parkway_kv; --", &"n".repeat(65)] {
        let text = Store::open_postgres_as(&url, &leasing(bad))
            .unwrap_err()
            .to_string();
        assert!(text.contains("is not 1 to 64 letters"), "{bad:?}: {text}");
    }
    let short = Leasing {
        lease: Duration::from_millis(10),
        ..leasing("b")
    };
    let text = Store::open_postgres_as(&url, &short)
        .unwrap_err()
        .to_string();
    assert!(text.contains("outside 1 s to 1 h"), "{text}");
}

/// Submits `batch` to `store` and waits for its acknowledgement (its log's first
/// number: 0 here, where the log is numbered after the commit).
fn logged(store: &Store, batch: Batch) -> Result<u64, StoreError> {
    let (tx, rx) = mpsc::channel();
    store.submit(
        batch,
        Box::new(move |r| {
            let _ = tx.send(r.map(|receipt| receipt.log));
        }),
    );
    rx.recv_timeout(WAIT).expect("the ack arrives")
}

/// A change of a subject of `slot` with one entry of the log, `entry`.
fn change_logging(slot: Slot, entry: &str) -> Batch {
    let mut key = slot_prefix(slot).to_vec();
    key.extend_from_slice(entry.as_bytes());
    let mut batch = Batch::of_slot(slot);
    batch.put(Space::Subjects, key, b"state").append_log(entry);
    batch
}

/// Every node writes one log, numbered in commit order with no gap: each reads the
/// same entries under the same numbers, a node's in the order it committed them, and
/// each keeps its own ids' counters.
#[test]
fn every_node_writes_one_log_numbered_in_commit_order() {
    let url = test_database();
    let a = node(&url, "a");
    let mut batch = Batch::new();
    batch
        .put(Space::Ids, b"timers", 5u64.to_be_bytes())
        .append_log("a1")
        .append_log("a2");
    logged(&a, batch).unwrap();
    let b = node(&url, "b");
    let mut batch = Batch::new();
    batch.append_log("b1");
    logged(&b, batch).unwrap();
    assert_eq!(b.get(Space::Ids, b"timers").unwrap(), None);
    let expected = vec![
        (1, b"a1".to_vec()),
        (2, b"a2".to_vec()),
        (3, b"b1".to_vec()),
    ];
    assert_eq!(a.log_from(1, 10).unwrap(), expected);
    assert_eq!(b.log_from(1, 10).unwrap(), expected);
    assert_eq!(b.log_from(2, 1).unwrap(), expected[1..2]);
    assert_eq!((a.log_last().unwrap(), b.log_last().unwrap()), (3, 3));

    // b takes the slots a hands over, then both commit at once, from threads of their
    // own, each a change of a slot it owns: every entry once, each thread's in order.
    let mut a_owners = a.owners().unwrap();
    let mut b_owners = b.owners().unwrap();
    a.lease_round().unwrap();
    let Some(Change::Drain(drained)) = changes(&mut a_owners).pop() else {
        panic!("a hands slots over");
    };
    hand_over(&a, &b, &mut b_owners, &drained);
    let (slot_a, slot_b) = (Slot::numbered(0).unwrap(), drained[0]);
    let acked: Vec<(String, String)> = std::thread::scope(|scope| {
        let writers: Vec<_> = [(&a, slot_a, "a"), (&b, slot_b, "b"), (&a, slot_a, "x")]
            .into_iter()
            .map(|(store, slot, name)| {
                scope.spawn(move || {
                    (0..40)
                        .map(|i| {
                            let entry = format!("{name}-{i}");
                            logged(store, change_logging(slot, &entry)).unwrap();
                            (name.to_string(), entry)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        writers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let log = b.log_from(4, 1000).unwrap();
    assert_eq!(log, a.log_from(4, 1000).unwrap());
    let numbers: Vec<u64> = log.iter().map(|(seq, _)| *seq).collect();
    assert_eq!(
        numbers,
        (4..4 + 120).collect::<Vec<u64>>(),
        "no gap, no duplicate"
    );
    for name in ["a", "b", "x"] {
        let committed: Vec<Vec<u8>> = acked
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, e)| e.clone().into_bytes())
            .collect();
        let shown: Vec<Vec<u8>> = log
            .iter()
            .filter(|(_, e)| e.starts_with(format!("{name}-").as_bytes()))
            .map(|(_, e)| e.clone())
            .collect();
        assert_eq!(shown, committed, "{name}'s entries, once each, in order");
    }
}

/// A group commit sent again after its connection failed, which the server had made,
/// is made once: its log is not written twice, and it is acknowledged as written even
/// when the node lost the slot between the two (not refused as another node's).
#[test]
fn a_group_commit_sent_again_is_made_once() {
    let url = test_database();
    let a = node(&url, "a");
    let slot = Slot::numbered(7).unwrap();
    a.send_next_twice("SELECT 1");
    logged(&a, change_logging(slot, "once")).unwrap();
    a.send_next_twice("UPDATE parkway_slots SET lease_end = now() - interval '1 second'");
    logged(&a, change_logging(slot, "lost after")).unwrap();
    assert_eq!(
        a.log_from(1, 10).unwrap(),
        vec![(1, b"once".to_vec()), (2, b"lost after".to_vec())]
    );
    assert_eq!(test_sql(&url, "SELECT next FROM parkway_log_head"), ["3"]);
    // The next one is refused: the slot's lease has ended.
    assert!(matches!(
        logged(&a, change_logging(slot, "refused")),
        Err(StoreError::NotOwner { .. })
    ));
    assert_eq!(a.log_last().unwrap(), 2);
}

/// The log keeps its capacity: a read shows no entry further back, and a chunk wholly
/// further back is deleted when the log is numbered, or not kept at all.
#[test]
fn the_shared_log_is_trimmed_to_its_capacity() {
    let url = test_database();
    let a = node(&url, "a");
    a.set_log_capacity(3);
    for entry in ["1", "2", "3", "4", "5"] {
        let mut batch = Batch::new();
        batch.append_log(entry);
        logged(&a, batch).unwrap();
    }
    assert_eq!(
        a.log_from(1, 10).unwrap(),
        vec![(3, b"3".to_vec()), (4, b"4".to_vec()), (5, b"5".to_vec())]
    );
    assert_eq!(test_sql(&url, "SELECT count(*) FROM parkway_log"), ["3"]);
    let mut batch = Batch::new();
    batch.append_log("6");
    logged(&a, batch).unwrap();
    assert_eq!(a.log_last().unwrap(), 6);
    assert_eq!(
        test_sql(
            &url,
            "SELECT string_agg(seq::text, ',' ORDER BY seq) FROM parkway_log"
        ),
        ["4,5,6"]
    );
}

/// Nodes that open a new database at the same moment all open it: one makes the schema
/// and writes the format version, the others wait for it and read it.
#[test]
fn nodes_opening_a_new_database_at_once_all_open_it() {
    let url = test_database();
    let opened: Vec<Store> = std::thread::scope(|scope| {
        let opening: Vec<_> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|name| {
                let url = &url;
                scope.spawn(move || Store::open_postgres_as(url, &leasing(name)))
            })
            .collect();
        opening
            .into_iter()
            .map(|open| open.join().unwrap().expect("each node opens"))
            .collect()
    });
    assert_eq!(opened.len(), 4);
    let versions = test_sql(&url, "SELECT count(*) FROM parkway_kv WHERE space = 0");
    assert_eq!(versions, ["1"]);
}

/// A database of the format before the one log (migration 3: a log per node) is
/// migrated: node 1's log (`default`) keeps its numbers, another node's follows it,
/// and the next commit numbers on from there.
#[test]
fn the_nodes_own_logs_migrate_into_one() {
    use crate::store::layout::chunk_key;
    use crate::store::log::encode;
    use crate::store::postgres::MIGRATIONS;
    use crate::store::{FORMAT_VERSION, VERSION_KEY};
    let hex = |bytes: &[u8]| -> String {
        let digits: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("'\\x{digits}'::bytea")
    };
    let chunk = |slot: i32, first: u64, entries: &[&str]| -> String {
        let count = u32::try_from(entries.len()).unwrap();
        let value = encode(entries.iter().map(|e| e.as_bytes()));
        format!(
            "INSERT INTO parkway_kv VALUES ({slot}, 4, {}, {});",
            hex(&chunk_key(first, count)),
            hex(&value)
        )
    };
    let url = test_database();
    let mut sql = String::from(
        "CREATE TABLE parkway_migrations (version int4 PRIMARY KEY, \
         applied_at timestamptz NOT NULL DEFAULT now());",
    );
    for migration in &MIGRATIONS[..3] {
        sql.push_str(migration);
        sql.push(';');
    }
    sql.push_str("INSERT INTO parkway_migrations (version) VALUES (1), (2), (3);");
    sql.push_str(&format!(
        "INSERT INTO parkway_kv VALUES (-1, 0, {}, {});",
        hex(VERSION_KEY),
        hex(FORMAT_VERSION.to_string().as_bytes())
    ));
    // Node 1's log kept entries 5 to 7 (the first four trimmed); node 2's, 1 and 2.
    sql.push_str(&chunk(-2, 5, &["d5", "d6"]));
    sql.push_str(&chunk(-2, 7, &["d7"]));
    sql.push_str(&chunk(-3, 1, &["b1", "b2"]));
    test_sql(&url, &sql);
    let a = node(&url, "default");
    assert_eq!(
        a.log_from(1, 10).unwrap(),
        [(5, "d5"), (6, "d6"), (7, "d7"), (8, "b1"), (9, "b2")]
            .map(|(n, e)| (n, e.as_bytes().to_vec()))
    );
    let mut batch = Batch::new();
    batch.append_log("next");
    logged(&a, batch).unwrap();
    assert_eq!(a.log_from(10, 10).unwrap(), [(10, b"next".to_vec())]);
    assert_eq!(
        test_sql(&url, "SELECT count(*) FROM parkway_kv WHERE space = 4"),
        ["0"]
    );
}
