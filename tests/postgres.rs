//! A runtime on PostgreSQL: what was acknowledged before it stopped is found again when a
//! runtime is built on the same database. Needs a server: `PARKWAY_TEST_POSTGRES_URL`
//! (`.ci/test` starts a throwaway one and sets it).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parkway::{Builder, EntryStatus, ManualClock, Resumed, RunStatus, Runtime, Start};
use serde_json::json;

/// The URL of a fresh schema of the test server.
async fn database() -> String {
    database_named().await.0
}

/// The URL of a fresh schema of the test server, whose connections carry the schema's
/// name as their `application_name`, and that name.
async fn database_named() -> (String, String) {
    let url = std::env::var("PARKWAY_TEST_POSTGRES_URL").expect(
        "PARKWAY_TEST_POSTGRES_URL is not set: these tests need a PostgreSQL server \
         (`bash .ci/test` starts a throwaway one and sets it)",
    );
    let schema = format!(
        "parkway_it_{}_{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("a schema is made");
    let separator = if url.contains('?') { '&' } else { '?' };
    (
        format!("{url}{separator}options=-c%20search_path%3D{schema}&application_name={schema}"),
        schema,
    )
}

/// Has the server end every connection named `name`, as a restart of it does, and
/// returns how many it ended.
async fn end_connections(name: &str) -> i64 {
    let url = std::env::var("PARKWAY_TEST_POSTGRES_URL").unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    client
        .query_one(
            "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1) AS ended",
            &[&name],
        )
        .await
        .expect("the connections are ended")
        .get(0)
}

/// A runtime on `url`, with a target that counts its journaled step and asks its caller.
async fn open(url: &str, clock: &ManualClock, steps: &Arc<AtomicUsize>) -> Runtime {
    common::with_deploy(Builder::default().postgres(url), clock, steps)
        .build()
        .await
        .expect("the runtime opens its database")
}

/// Runs parked on many subjects before a restart are resumed after it, each once, and
/// their journaled steps do not run again; a deadline set before the restart fires after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_parked_before_a_restart_are_resumed_after_it() {
    let url = database().await;
    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let rt = open(&url, &clock, &steps).await;
    let mut parked = Vec::new();
    for n in 0..40 {
        let record = rt.run(Start::new(format!("s{n}"), "deploy")).await.unwrap();
        assert_eq!(record.status, RunStatus::Parked);
        parked.push((
            format!("s{n}"),
            record.asks.unwrap()[0].id.clone(),
            record.run_id,
        ));
    }
    rt.shutdown().await;
    drop(rt);

    let rt = open(&url, &clock, &steps).await;
    for (subject, id, _) in &parked[..30] {
        let listed = rt.list(subject).await.unwrap();
        assert_eq!(listed.len(), 1, "{subject}");
        assert_eq!(listed[0].status, EntryStatus::Asking);
        let Resumed::Outcome(done) = rt.resume(subject, id, json!("yes")).await.unwrap() else {
            panic!("a single ask resumes at once")
        };
        assert_eq!(
            done.result,
            Some(
                json!({"prepared": 1 + parked.iter().position(|p| &p.0 == subject).unwrap(), "answer": "yes"})
            )
        );
    }
    assert_eq!(
        steps.load(Ordering::SeqCst),
        40,
        "each journaled step ran once"
    );
    // The other ten expire after the restart, at the deadline set before it.
    clock.advance(Duration::from_secs(3601));
    rt.settle().await;
    for (subject, _, run) in &parked[30..] {
        assert!(rt.list(subject).await.unwrap().is_empty(), "{subject}");
        assert_eq!(
            rt.record(run).await.map(|r| r.status),
            Some(RunStatus::Cancelled)
        );
    }
    rt.shutdown().await;
}

/// A data directory and a database are refused together, and a database in use by a
/// runtime is refused to a second one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_is_one_runtime_s_and_the_only_store() {
    let url = database().await;
    let dir = tempfile::tempdir().unwrap();
    let both = Builder::default()
        .without_env()
        .data_dir(dir.path())
        .postgres(&url)
        .build()
        .await
        .expect_err("a data directory and a database are refused together");
    assert!(both.to_string().contains("both a data directory"), "{both}");

    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let rt = open(&url, &clock, &steps).await;
    let second = Builder::default()
        .without_env()
        .postgres(&url)
        .build()
        .await
        .expect_err("a second runtime is refused the database");
    assert!(
        second
            .to_string()
            .contains("held by another parkway process"),
        "{second}"
    );
    rt.shutdown().await;
    let again = Builder::default()
        .without_env()
        .postgres(&url)
        .build()
        .await
        .expect("free once the first has shut down");
    again.shutdown().await;
}

/// The server ending a runtime's connections (as its restart does) costs the runtime
/// nothing: the next change is sent on a new connection and acknowledged. Its hold on the
/// database ended with them, so a second runtime may open it, taking it over: from then
/// on the first writes nothing, its next change is refused and its store stops, saying
/// so, and the second finds everything the first acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_outlives_its_connections_until_another_takes_the_database_over() {
    let (url, name) = database_named().await;
    let clock = ManualClock::default();
    let steps = Arc::new(AtomicUsize::new(0));
    let first = open(&url, &clock, &steps).await;
    let before = first.run(Start::new("s0", "deploy")).await.unwrap();
    assert_eq!(before.status, RunStatus::Parked);
    assert!(
        end_connections(&name).await >= 2,
        "the pool's and the hold's"
    );
    let after = first.run(Start::new("s1", "deploy")).await.unwrap();
    assert_eq!(after.status, RunStatus::Parked);
    assert_eq!(first.store_failure(), None);

    let second = open(&url, &clock, &steps).await;
    let refused = first.run(Start::new("s2", "deploy")).await;
    assert!(refused.is_err(), "{refused:?}");
    let failure = first.store_failure().expect("the first's store stopped");
    assert!(
        failure.contains("another process took node default over"),
        "{failure}"
    );
    for (subject, record) in [("s0", &before), ("s1", &after)] {
        let listed = second.list(subject).await.unwrap();
        assert_eq!(listed.len(), 1, "{subject}");
        assert_eq!(
            second.record(&record.run_id).await.map(|r| r.status),
            Some(RunStatus::Parked)
        );
    }
    assert!(second.list("s2").await.unwrap().is_empty());
    first.shutdown().await;
    second.shutdown().await;
}

/// A runtime on `url` as node `name`, its leases `lease` long (random ids: nodes make
/// their ids apart), with the target that asks its caller.
async fn node(url: &str, name: &str, lease: Duration) -> Runtime {
    let steps = Arc::new(AtomicUsize::new(0));
    common::with_deploy(Builder::default(), &ManualClock::default(), &steps)
        .ids(parkway::Ids::random(rand::random()))
        .postgres(url)
        .node(name)
        .lease(lease)
        .build()
        .await
        .expect("the node opens the database")
}

/// A subject whose slot is `slot`.
fn subject_in(slot: u16) -> String {
    (0..)
        .map(|n| format!("s{n}"))
        .find(|name| Runtime::slot_of(name) == slot)
        .unwrap()
}

/// Waits (polling, for at most 30 s) until `node` serves `subject`, and returns what it
/// lists there.
async fn served(node: &Runtime, subject: &str) -> Vec<parkway::Entry> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match node.list(subject).await {
            Ok(listed) => return listed,
            Err(error) => {
                assert!(error.to_string().contains("not own"), "{error}");
                assert!(
                    std::time::Instant::now() < deadline,
                    "{subject} was not served within 30 s: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// A node that joins a running one is refused the first's subjects until they are
/// handed over, a few slots at a time; the runs parked there are then served by the new
/// node, resumed once, and refused by the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_joins_is_handed_its_share_with_what_is_parked_there() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let a = node(&url, "a", lease).await;
    // The highest slot is the first handed over.
    let subject = subject_in(1023);
    let parked = a.run(Start::new(&subject, "deploy")).await.unwrap();
    let ask = parked.asks.unwrap()[0].id.clone();
    let b = node(&url, "b", lease).await;
    let listed = served(&b, &subject).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let refused = a.list(&subject).await.unwrap_err();
    assert!(refused.to_string().contains("not own"), "{refused}");
    let Resumed::Outcome(done) = b.resume(&subject, &ask, json!("yes")).await.unwrap() else {
        panic!("a single ask resumes at once")
    };
    assert_eq!(done.result, Some(json!({"prepared": 1, "answer": "yes"})));
    assert!(a.resume(&subject, &ask, json!("again")).await.is_err());
    // The lowest slot stays the first node's.
    let kept = subject_in(0);
    let run = a.run(Start::new(&kept, "deploy")).await.unwrap();
    assert_eq!(run.status, RunStatus::Parked);
    assert!(b.list(&kept).await.is_err());
    a.shutdown().await;
    b.shutdown().await;
}

/// A node that shuts down gives its slots back; another node takes them at its next
/// round and serves what was parked there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_shuts_down_hands_its_slots_to_another() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let a = node(&url, "a", lease).await;
    let subject = subject_in(0);
    let parked = a.run(Start::new(&subject, "deploy")).await.unwrap();
    let ask = parked.asks.unwrap()[0].id.clone();
    let b = node(&url, "b", lease).await;
    a.shutdown().await;
    let listed = served(&b, &subject).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let Resumed::Outcome(done) = b.resume(&subject, &ask, json!("yes")).await.unwrap() else {
        panic!("a single ask resumes at once")
    };
    assert_eq!(done.result, Some(json!({"prepared": 1, "answer": "yes"})));
    b.shutdown().await;
}

/// A node paused past its leases (here: the leases ended in the database, as a pause
/// ends them) has its slots taken by another, which serves what was parked there; the
/// paused node's own attempt is refused, and the ask is resolved once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_past_its_leases_loses_its_slots_and_the_ask_is_resolved_once() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let a = node(&url, "a", lease).await;
    let subject = subject_in(5);
    let parked = a.run(Start::new(&subject, "deploy")).await.unwrap();
    let ask = parked.asks.unwrap()[0].id.clone();
    let b = node(&url, "b", lease).await;
    end_leases(&url, "a").await;
    // Whichever node serves the subject once the dust settles resumes it, once.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut outcomes = 0;
    loop {
        for node in [&b, &a] {
            if let Ok(Resumed::Outcome(done)) = node.resume(&subject, &ask, json!("yes")).await {
                assert_eq!(done.result, Some(json!({"prepared": 1, "answer": "yes"})));
                outcomes += 1;
            }
        }
        if outcomes > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never resumed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(outcomes, 1);
    a.shutdown().await;
    b.shutdown().await;
}

/// An idempotency key is its subject's, kept in its slot: the node that takes the slot
/// from the node that started the run answers a retry with that run, though it opened
/// before the key was kept. A delivery id is every node's: fired on one node, it is
/// refused as seen by another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_kept_by_one_node_hold_on_the_others() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let a = node(&url, "a", lease).await;
    let b = node(&url, "b", lease).await;
    // The lowest slot stays the first node's while both run.
    let subject = subject_in(0);
    let keyed = || Start::new(&subject, "deploy").idempotency_key("k-1");
    let run = a
        .submit(keyed())
        .await
        .expect("the first node serves the slot");
    assert_eq!(a.submit(keyed()).await.unwrap(), run);
    // The same key on another subject is another start.
    let other = subject_in(1);
    let elsewhere = a
        .submit(Start::new(&other, "deploy").idempotency_key("k-1"))
        .await
        .unwrap();
    assert_ne!(elsewhere, run);
    let fired = a.fire_delivery("push", "d-1", json!({"n": 1})).await;
    assert_eq!(fired, Ok(Vec::new()));
    let seen = b.fire_delivery("push", "d-1", json!({"n": 1})).await;
    assert!(
        matches!(seen, Err(parkway::DeliveryError::AlreadySeen { .. })),
        "{seen:?}"
    );
    let reused = b.fire_delivery("push", "d-1", json!({"n": 2})).await;
    assert_eq!(reused, Err(parkway::DeliveryError::Reused));
    a.shutdown().await;
    served(&b, &subject).await;
    assert_eq!(b.submit(keyed()).await.unwrap(), run, "no second run");
    let changed = Start::new(&subject, "deploy")
        .idempotency_key("k-1")
        .kwargs(json!({"changed": true}));
    let refused = b.submit(changed).await.unwrap_err();
    assert_eq!(refused.kind(), "idempotency_key_reused", "{refused}");
    b.shutdown().await;
}

/// Ends every lease node `name` holds, in the database.
async fn end_leases(url: &str, name: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    client
        .execute(
            "UPDATE parkway_slots SET lease_end = now() - interval '1 second' \
             WHERE owner = (SELECT node FROM parkway_nodes WHERE name = $1)",
            &[&name],
        )
        .await
        .expect("the leases end");
}

/// A door saved, replaced or removed on one node is taken by the others within a few
/// seconds: they read the saved doors again every second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doors_saved_on_one_node_are_taken_by_the_others() {
    let url = database().await;
    let a = node(&url, "a", Duration::from_secs(1)).await;
    let b = node(&url, "b", Duration::from_secs(1)).await;
    let door = parkway::DoorSpec::route("d", "deploy").start_expr("null");
    a.save_door(door.clone()).unwrap();
    until(|| b.door("d") == Some(door.clone())).await;
    let replaced = door.clone().kwargs(json!({"k": 1}));
    a.save_door(replaced.clone()).unwrap();
    until(|| b.door("d") == Some(replaced.clone())).await;
    assert!(a.remove_door("d"));
    until(|| b.door("d").is_none()).await;
    // And the other way.
    b.save_door(door.clone()).unwrap();
    until(|| a.door("d") == Some(door.clone())).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// Waits (polling, for at most 30 s) until `done` holds.
async fn until(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "not within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A slot handed over while a run of it is executing: the node lets the run reach its
/// end before it unloads the subject, so the visitor that resumed it gets its outcome
/// (not a refusal of a visit that was applied), and the next owner finds it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_handed_over_lets_a_running_activation_end_first() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let entered = Arc::new(tokio::sync::Notify::new());
    let a = {
        let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
        Builder::default()
            .without_env()
            .ids(parkway::Ids::random(rand::random()))
            .postgres(&url)
            .node("a")
            .lease(lease)
            .register("slow", &[], move |ctx, _, _| {
                let (gate, entered) = (Arc::clone(&gate), Arc::clone(&entered));
                async move {
                    let answer = ctx.ask(parkway::Ask::caller("go?").expiry_at("1h")).await?;
                    entered.notify_one();
                    let _held = gate.acquire().await;
                    Ok(json!({ "answer": answer }))
                }
            })
            .build()
            .await
            .unwrap()
    };
    // The highest slot is the first handed over.
    let subject = subject_in(1023);
    let parked = a.run(Start::new(&subject, "slow")).await.unwrap();
    let ask = parked.asks.unwrap()[0].id.clone();
    let resuming = tokio::spawn({
        let (a, subject) = (a.clone(), subject.clone());
        async move { a.resume(&subject, &ask, json!("yes")).await }
    });
    entered.notified().await;
    let b = Builder::default()
        .without_env()
        .ids(parkway::Ids::random(rand::random()))
        .postgres(&url)
        .node("b")
        .lease(lease)
        .register("slow", &[], |_, _, _| async move { Ok(json!("replayed")) })
        .build()
        .await
        .unwrap();
    // Handed over: a refuses the subject from now on, its run still executing.
    until_async(|| async { a.list(&subject).await.is_err() }).await;
    assert!(!resuming.is_finished());
    gate.add_permits(1);
    let Resumed::Outcome(done) = resuming.await.unwrap().unwrap() else {
        panic!("the resume's outcome arrives")
    };
    assert_eq!(done.result, Some(json!({"answer": "yes"})));
    let listed = served(&b, &subject).await;
    assert!(listed.is_empty(), "{listed:?}");
    assert_eq!(
        b.record(&parked.run_id).await.map(|r| r.status),
        Some(RunStatus::Succeeded)
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// Waits (polling, for at most 30 s) until `done` yields true.
async fn until_async<F: std::future::Future<Output = bool>>(done: impl Fn() -> F) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(std::time::Instant::now() < deadline, "not within 30 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The ceilings are the cluster's: a node that admitted up to the ceiling while it held
/// every slot keeps what it holds, and a node that joins admits nothing of that ceiling
/// until the first's asks end, once it has read what the first holds (each node
/// publishes its counts at each round of its leases and reads the others').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ceiling_holds_across_nodes() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let capped = |name: &'static str| {
        let url = url.clone();
        async move {
            let steps = Arc::new(AtomicUsize::new(0));
            let mut settings = parkway::Settings::default();
            settings.max_concurrent_caller = 4;
            common::with_deploy(Builder::default(), &ManualClock::default(), &steps)
                .settings(settings)
                .ids(parkway::Ids::random(rand::random()))
                .postgres(&url)
                .node(name)
                .lease(lease)
                .build()
                .await
                .expect("the node opens the database")
        }
    };
    let a = capped("a").await;
    // The lowest slots stay the first node's when another joins.
    for slot in 0..4 {
        let parked = a.run(Start::new(subject_in(slot), "deploy")).await.unwrap();
        assert_eq!(parked.status, RunStatus::Parked);
    }
    let refused = refusal(a.run(Start::new(subject_in(4), "deploy")).await);
    assert!(refused.contains("limit is 4"), "{refused}");

    let b = capped("b").await;
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    let seen = |name: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(
                    "SELECT h.caller, extract(epoch FROM h.seen_at)::float8 FROM parkway_holds AS h \
                     JOIN parkway_nodes AS n ON n.node = h.node WHERE n.name = $1",
                    &[&name],
                )
                .await
                .map(|row| (row.get::<_, i64>(0), row.get::<_, f64>(1)))
                .expect("reads the node's row")
        }
    };
    // Once a has published its four, two rounds of b later b has read them.
    until_async(|| async { seen("a").await.0 == 4 }).await;
    let published = seen("a").await.1;
    until_async(|| async { seen("b").await.1 > published }).await;
    let once = seen("b").await.1;
    until_async(|| async { seen("b").await.1 > once }).await;

    let high = subject_in(1023);
    assert!(served(&b, &high).await.is_empty());
    let refused = refusal(b.run(Start::new(&high, "deploy")).await);
    assert!(
        refused.contains("limit is 0"),
        "b admits nothing of the ceiling a holds: {refused}"
    );
    a.shutdown().await;
    b.shutdown().await;
}

/// Why a start did not park: its error, or its run's.
fn refusal(started: Result<parkway::RunRecord, parkway::StartError>) -> String {
    match started {
        Ok(record) => format!("{:?}: {}", record.status, record.error.unwrap_or_default()),
        Err(error) => error.to_string(),
    }
}

/// Receives the logged events `rx` shows until `done` holds of them (at most 30 s).
async fn shown_until(
    rx: &mut tokio::sync::broadcast::Receiver<parkway::Logged>,
    done: impl Fn(&[parkway::Logged]) -> bool,
) -> Vec<parkway::Logged> {
    let mut shown = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !done(&shown) {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok(logged)) => shown.push(logged),
            Ok(Err(error)) => panic!("the logged events stopped: {error}"),
            Err(_) => panic!("not shown within 30 s: {shown:?}"),
        }
    }
    shown
}

/// Every node shows every node's logged events, in one order with no gap and no
/// duplicate, under the numbers each node's event log reads back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_node_shows_every_node_s_events_in_one_order() {
    let url = database().await;
    let lease = Duration::from_secs(1);
    let a = node(&url, "a", lease).await;
    let b = node(&url, "b", lease).await;
    let (on_a, on_b) = (subject_in(0), subject_in(1023));
    served(&b, &on_b).await;
    let (mut shown_a, mut shown_b) = (a.logged_events(), b.logged_events());
    let mut runs = Vec::new();
    for (node, subject) in [(&a, &on_a), (&b, &on_b)] {
        let parked = node.run(Start::new(subject, "deploy")).await.unwrap();
        let ask = parked.asks.unwrap()[0].id.clone();
        node.resume(subject, &ask, json!("yes")).await.unwrap();
        runs.push(parked.run_id.clone());
    }
    let both_finished = |shown: &[parkway::Logged]| {
        runs.iter().all(|run| {
            shown
                .iter()
                .any(|l| matches!(&l.event, parkway::Event::RunFinished { run: r, .. } if r == run))
        })
    };
    let seen_a = shown_until(&mut shown_a, both_finished).await;
    let seen_b = shown_until(&mut shown_b, both_finished).await;
    for seen in [&seen_a, &seen_b] {
        let numbers: Vec<u64> = seen.iter().map(|l| l.seq).collect();
        let first = numbers[0];
        assert_eq!(
            numbers,
            (first..first + numbers.len() as u64).collect::<Vec<_>>(),
            "no gap, no duplicate"
        );
        let read = a.event_log(first, numbers.len()).unwrap();
        assert_eq!(&read, seen, "shown as the log reads back");
        assert_eq!(b.event_log(first, numbers.len()).unwrap(), read);
    }
    // Both show the same entries where they overlap (each started at its own poll).
    let from = seen_a[0].seq.max(seen_b[0].seq);
    let tail = |seen: &[parkway::Logged]| -> Vec<parkway::Logged> {
        seen.iter().filter(|l| l.seq >= from).cloned().collect()
    };
    assert_eq!(tail(&seen_a), tail(&seen_b));
    a.shutdown().await;
    b.shutdown().await;
}
