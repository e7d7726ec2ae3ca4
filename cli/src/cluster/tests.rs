//! The harness's own checks: the account, the audit, the database URL and the proxy's
//! cut.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Database;
use super::ledger::{self, Answer, Ask, Attempt, Final, Ledger, Listed, Written};
use super::proxy::Proxy;

fn attempt(payload: &str, answer: Answer) -> Attempt {
    Attempt {
        payload: payload.into(),
        answer,
    }
}

fn ledger(asks: &[(&str, usize, Vec<Attempt>)]) -> Ledger {
    let mut ledger = Ledger::default();
    for (id, subject, attempts) in asks {
        ledger.asks.insert(
            (*id).into(),
            Ask {
                subject: *subject,
                run: format!("r-{id}"),
                attempts: attempts.clone(),
            },
        );
    }
    ledger
}

fn finished(id: &str, payload: &str) -> (String, Final) {
    (
        format!("r-{id}"),
        Final {
            status: "succeeded".into(),
            result: Some(json!({"answer": payload})),
        },
    )
}

fn unknown() -> Answer {
    Answer::Unknown("502 owner_failed".into())
}

#[test]
fn every_way_an_ask_ends_balances() {
    let ledger = ledger(&[
        ("a", 0, vec![attempt("p-1", Answer::Acked)]),
        ("b", 0, vec![attempt("p-2", unknown())]),
        (
            "c",
            1,
            vec![attempt("p-3", unknown()), attempt("end-1", Answer::Acked)],
        ),
        (
            "d",
            1,
            vec![
                attempt("p-4", Answer::Refused("404".into())),
                attempt("p-5", unknown()),
            ],
        ),
    ]);
    let finals = HashMap::from([
        finished("a", "p-1"),
        finished("b", "p-2"),
        finished("c", "end-1"),
        finished("d", "p-5"),
    ]);
    // A's outcome was delivered and is left waiting as well: at least once.
    let listed = BTreeMap::from([(
        0,
        HashMap::from([(
            "a".to_string(),
            Listed {
                status: "finished".into(),
            },
        )]),
    )]);
    let a = ledger::account(&ledger, &listed, &finals);
    assert!(a.violations.is_empty(), "{:?}", a.violations);
    assert_eq!(
        (a.asks, a.resolved_acked, a.resolved_unknown, a.open_at_end),
        (4, 1, 2, 1)
    );
    assert_eq!(a.delivered_and_left_waiting, 1);
}

#[test]
fn a_lost_a_doubled_and_a_wrong_resolution_show() {
    let ledger = ledger(&[
        ("lost", 0, vec![attempt("p-1", Answer::Acked)]),
        ("twice", 0, vec![attempt("p-2", Answer::Acked)]),
        (
            "wrong",
            0,
            vec![attempt("p-3", Answer::Refused("503 not_owner".into()))],
        ),
        ("open", 0, vec![attempt("p-4", Answer::Acked)]),
    ]);
    let mut twice = finished("twice", "p-2");
    twice.1.status = "failed".into();
    let finals = HashMap::from([
        twice,
        finished("wrong", "p-3"),
        finished("open", "p-4"),
        (
            "r-lost".to_string(),
            Final {
                status: "parked".into(),
                result: None,
            },
        ),
    ]);
    let listed = BTreeMap::from([(
        0,
        HashMap::from([(
            "open".to_string(),
            Listed {
                status: "asking".into(),
            },
        )]),
    )]);
    let a = ledger::account(&ledger, &listed, &finals);
    let all = a.violations.join("; ");
    assert_eq!(a.violations.len(), 4, "{all}");
    for what in [
        "ended parked",
        "ended failed",
        "no resume sent for it without a refusal",
        "still asking",
    ] {
        assert!(all.contains(what), "{what}: {all}");
    }
}

#[test]
fn a_second_acknowledged_resume_is_a_violation() {
    let mut ledger = ledger(&[("a", 0, vec![attempt("p-1", Answer::Acked)])]);
    ledger.resumed("a", attempt("p-2", Answer::Refused("404".into())));
    assert!(ledger.violations.is_empty());
    ledger.resumed("a", attempt("p-3", Answer::Acked));
    assert_eq!(ledger.violations.len(), 1, "{:?}", ledger.violations);
    assert_eq!(ledger.counts.get("resume acked"), Some(&1));
    assert_eq!(ledger.counts.get("resume refused (404)"), Some(&1));
}

#[test]
fn entries_no_start_names_are_allowed_only_for_lost_starts() {
    let mut ledger = ledger(&[]);
    ledger.unknown_starts.insert(0, 1);
    let set = |ids: &[&str]| {
        ids.iter()
            .map(|id| {
                (
                    (*id).to_string(),
                    Listed {
                        status: "asking".into(),
                    },
                )
            })
            .collect::<HashMap<_, _>>()
    };
    let listed = BTreeMap::from([(0, set(&["x"])), (1, set(&["y"]))]);
    let a = ledger::account(&ledger, &listed, &HashMap::new());
    assert_eq!(a.unnamed_entries, 1);
    assert_eq!(a.violations.len(), 1, "{:?}", a.violations);
    assert!(
        a.violations[0].starts_with("subject 1"),
        "{:?}",
        a.violations
    );
}

fn written(seq: i64, slot: i32, epoch: i64, node: i32, node_epoch: i64) -> Written {
    Written {
        seq,
        slot,
        epoch,
        node,
        node_epoch,
    }
}

#[test]
fn the_audit_passes_terms_that_follow_each_other() {
    let rows = [
        written(1, 7, 1, 1, 1),
        written(2, 7, 1, 1, 1),
        written(3, 8, 1, 2, 1),
        written(4, 7, 2, 2, 1),
        written(5, 7, 3, 1, 2),
    ];
    let a = ledger::audit(&rows);
    assert!(a.violations.is_empty(), "{:?}", a.violations);
    assert_eq!((a.rows, a.terms, a.slots_moved), (5, 4, 1));
}

#[test]
fn the_audit_finds_an_epoch_going_back_and_a_term_written_twice() {
    // Node 1 writes slot 7 under epoch 1 after node 2 took it under epoch 2.
    let back = ledger::audit(&[
        written(1, 7, 1, 1, 1),
        written(2, 7, 2, 2, 1),
        written(3, 7, 1, 1, 1),
    ]);
    assert_eq!(back.violations.len(), 1, "{:?}", back.violations);
    assert!(back.violations[0].contains("after epoch 2"));
    // Two processes of node 1 under one term.
    let twice = ledger::audit(&[written(1, 7, 1, 1, 1), written(2, 7, 1, 1, 2)]);
    assert_eq!(twice.violations.len(), 1, "{:?}", twice.violations);
}

#[test]
fn the_database_url_is_sent_through_a_proxy_whole() {
    let db =
        Database::new("postgres://postgres:secret@db.example:5433/app?options=-c%20x").unwrap();
    assert_eq!(db.upstream, "db.example:5433");
    assert_eq!(
        db.through(4000),
        "postgres://postgres:secret@127.0.0.1:4000/app?options=-c%20x"
    );
    let plain = Database::new("postgres://127.0.0.1:55432").unwrap();
    assert_eq!(plain.through(1), "postgres://127.0.0.1:1");
    for bad in [
        "postgres://host/db",
        "no scheme",
        "postgres://user:pw@host:notaport/db",
        "postgres://%2Frun%2Fpostgresql:5432/db",
    ] {
        let text = Database::new(bad).err().unwrap_or_default();
        assert!(text.contains("TCP host and port"), "{bad}: {text}");
        assert!(!text.contains("pw@"), "{text}");
    }
}

/// Bytes sent while a cut lasts pass once it heals, and not before.
#[tokio::test]
async fn a_cut_holds_what_is_sent_until_it_heals() {
    let upstream = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = Proxy::start(upstream.local_addr().unwrap().to_string())
        .await
        .unwrap();
    let mut client = tokio::net::TcpStream::connect(proxy.address).await.unwrap();
    let (mut server, _) = upstream.accept().await.unwrap();
    let mut got = [0u8; 5];

    client.write_all(b"hello").await.unwrap();
    server.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"hello");

    proxy.cut(true);
    // The cut takes hold in the proxy's tasks: wait until a byte sent is held.
    tokio::task::yield_now().await;
    client.write_all(b"again").await.unwrap();
    let held = tokio::time::timeout(Duration::from_millis(300), server.read_exact(&mut got)).await;
    assert!(held.is_err(), "bytes passed a cut");

    proxy.cut(false);
    tokio::time::timeout(Duration::from_secs(10), server.read_exact(&mut got))
        .await
        .expect("the cut healed but nothing passed")
        .unwrap();
    assert_eq!(&got, b"again");
}
