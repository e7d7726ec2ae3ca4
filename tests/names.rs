//! Names from outside (subjects, door, target and topic names, interaction and run ids)
//! are bounded at `MAX_NAME_BYTES` and hold no control character: every operation
//! refuses such a name by its own error, naming the field and what is wrong, before
//! anything is stored or published. (A NUL or an escape in a subject once went into the
//! store, the logs and every event that named it.)

mod common;

use parkway::{DoorSpec, MAX_NAME_BYTES, SaveError, Start};
use serde_json::json;

/// Every operation that takes a subject or an id, with a bad one: the kind and message.
#[tokio::test]
async fn every_operation_refuses_a_control_character_or_an_over_long_name() {
    let (rt, _clock) = common::runtime().await;
    rt.save_door(DoorSpec::route("go", "asker")).unwrap();
    let parked = rt.run(Start::new("s", "asker")).await.unwrap();
    let id = parked.asks.unwrap()[0].id.clone();
    rt.settle().await;
    let before = rt.stats().await;
    let mut events = rt.events();

    let long = "x".repeat(MAX_NAME_BYTES + 1);
    let nul = "a\u{0}b";
    let nul_said = r#"subject "a\0b" holds a control character (U+0000) at byte 1"#;
    let long_said = "bytes long, more than 256";
    // (operation, kind, what the message says)
    let mut got: Vec<(&str, &str, String)> = Vec::new();
    let e = rt.run(Start::new(nul, "asker")).await.unwrap_err();
    got.push(("run subject", e.kind(), e.to_string()));
    let e = rt.run(Start::new(&long, "asker")).await.unwrap_err();
    got.push(("run long subject", e.kind(), e.to_string()));
    let e = rt.spawn(Start::new("s", "ask\u{7}er")).await.unwrap_err();
    got.push(("spawn target", e.kind(), e.to_string()));
    let e = rt.list(nul).await.unwrap_err();
    got.push(("list", e.kind(), e.to_string()));
    let e = rt.resume(nul, &id, json!(true)).await.unwrap_err();
    got.push(("resume subject", e.kind(), e.to_string()));
    let e = rt.resume("s", "i-1\n", json!(true)).await.unwrap_err();
    got.push(("resume id", e.kind(), e.to_string()));
    let e = rt
        .resume_detached("s", &long, json!(true))
        .await
        .unwrap_err();
    got.push(("resume_detached long id", e.kind(), e.to_string()));
    let e = rt.take(nul, &id).await.unwrap_err();
    got.push(("take", e.kind(), e.to_string()));
    let e = rt.cancel("s", &[&id, "i-\u{0}"]).await.unwrap_err();
    got.push(("cancel id", e.kind(), e.to_string()));
    let e = rt.visit("go", nul, json!({})).await.unwrap_err();
    got.push(("visit subject", e.kind(), e.to_string()));
    let e = rt.visit("g\u{0}o", "s", json!({})).await.unwrap_err();
    got.push(("visit door", e.kind(), e.to_string()));

    let expected: [(&str, &str); 11] = [
        ("run subject", nul_said),
        ("run long subject", long_said),
        (
            "spawn target",
            r#"target "ask\u{7}er" holds a control character (U+0007) at byte 3"#,
        ),
        ("list", nul_said),
        ("resume subject", nul_said),
        (
            "resume id",
            r#"interaction id "i-1\n" holds a control character (U+000A) at byte 3"#,
        ),
        ("resume_detached long id", long_said),
        ("take", nul_said),
        (
            "cancel id",
            r#"interaction id "i-\0" holds a control character (U+0000) at byte 2"#,
        ),
        ("visit subject", nul_said),
        (
            "visit door",
            r#"door name "g\0o" holds a control character (U+0000) at byte 1"#,
        ),
    ];
    assert_eq!(got.len(), expected.len());
    for ((op, kind, message), (expected_op, said)) in got.iter().zip(expected) {
        assert_eq!(*op, expected_op);
        assert_eq!(*kind, "invalid_name", "{op}: {message}");
        assert!(message.contains(said), "{op}: {message}");
    }
    // A bad run id is simply unknown, as is a bad id at the answer door.
    let e = rt.answer("i-\u{0}", json!("yes")).await.unwrap_err();
    assert_eq!(e.kind(), "unknown", "{e}");
    assert!(rt.record("r-1\u{0}").await.is_none());
    assert!(rt.record(&long).await.is_none());

    rt.settle().await;
    let after = rt.stats().await;
    assert_eq!(
        (
            after.live_subjects + after.passive_subjects,
            after.runs,
            after.caller_open
        ),
        (
            before.live_subjects + before.passive_subjects,
            before.runs,
            before.caller_open
        ),
        "nothing was created"
    );
    assert!(
        common::drain(&mut events).is_empty(),
        "nothing was published"
    );

    // The limit itself is taken.
    let at_limit = "y".repeat(MAX_NAME_BYTES);
    assert!(rt.run(Start::new(&at_limit, "echo")).await.is_ok());
}

/// A door naming a bad topic, subject or target is not saved, each problem named; a
/// hook whose `subject_expr` yields a bad subject refuses the fire.
#[tokio::test]
async fn doors_refuse_bad_names_at_save_and_a_hook_a_bad_computed_subject() {
    let (rt, _clock) = common::runtime().await;
    let long = "t".repeat(MAX_NAME_BYTES + 1);
    let table: [(DoorSpec, &[&str]); 4] = [
        (
            DoorSpec::hook("h", "asker")
                .topic("top\u{0}ic")
                .subject("s\u{1b}"),
            &[
                r#"topic "top\0ic" holds a control character (U+0000) at byte 3"#,
                r#"subject "s\u{1b}" holds a control character (U+001B) at byte 1"#,
            ],
        ),
        (
            DoorSpec::schedule("sch", "asker")
                .every("5m")
                .subject("s\u{7f}"),
            &[r#"subject "s\u{7f}" holds a control character (U+007F) at byte 1"#],
        ),
        (
            DoorSpec::route("r", &long),
            &["target \"ttt", "is 257 bytes long, more than 256"],
        ),
        (
            DoorSpec::route(&"d".repeat(300), "asker"),
            &["door name \"ddd", "is 300 bytes long"],
        ),
    ];
    for (spec, said) in table {
        let name = spec.name.clone();
        let Err(SaveError::Invalid { problems, .. }) = rt.save_door(spec) else {
            panic!("{name} saved");
        };
        let text = problems.to_string();
        for part in said {
            assert!(text.contains(part), "{text}");
        }
        assert!(rt.door(&name).is_none());
    }

    rt.save_door(
        DoorSpec::hook("h", "echo")
            .topic("topic")
            .subject("unused")
            .subject_expr(r#""a\u0000b""#),
    )
    .unwrap();
    let fires = rt.fire("topic", json!({})).await;
    let Some(Err(e)) = &fires[0].visit else {
        panic!("{fires:?}");
    };
    assert!(
        e.to_string()
            .contains(r#"subject "a\0b" holds a control character (U+0000) at byte 1"#),
        "{e}"
    );
    assert!(rt.list("a\u{0}b").await.is_err());
}
