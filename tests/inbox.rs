//! User asks and the inbox: both modes, answer validation by format, paging, the live
//! stream, and caller asks hidden from every user-facing surface.

mod common;

use std::time::Duration;

use parkway::{AnswerError, Ask, Clock, Frame, Mode, RunStatus, Settled, Start, is_expiry_marker};
use serde_json::{Value, json};

fn register_user(rt: &parkway::Runtime) {
    rt.register("user_text", &[], |ctx, _, _| async move {
        Ok(ctx.ask(Ask::user("your name?").expiry_at("1h")).await?)
    });
    rt.register("user_select", &[], |ctx, _, _| async move {
        Ok(ctx
            .ask(
                Ask::user("colour?")
                    .answer_format("select")
                    .options(["red", "blue"])
                    .expiry_at("1h"),
            )
            .await?)
    });
    rt.register("user_form", &[], |ctx, _, _| async move {
        let schema = json!({
            "type": "object",
            "properties": {"age": {"type": "integer", "minimum": 0}},
            "required": ["age"]
        });
        Ok(ctx
            .ask(
                Ask::user("about you")
                    .answer_format("form")
                    .schema(schema)
                    .expiry_at("1h"),
            )
            .await?)
    });
    rt.register("user_sync", &[], |ctx, _, _| async move {
        let answer = ctx
            .ask(
                Ask::user("ok?")
                    .answer_format("confirm")
                    .mode(Mode::Sync)
                    .timeout(Duration::from_secs(60)),
            )
            .await?;
        Ok(json!({"answer": answer, "expired": is_expiry_marker(&answer)}))
    });
}

/// An async user ask parks; the answer door resumes the run, whose terminal then waits
/// on the subject (the answer door has no receiver).
#[tokio::test]
async fn an_async_user_ask_is_answered_through_the_door() {
    let (rt, clock) = common::runtime().await;
    register_user(&rt);
    let record = rt.run(Start::new("s", "user_text")).await.unwrap();
    assert_eq!(record.status, RunStatus::Suspended);
    let page = rt.inbox(1, None).unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.items[0].question.as_deref(), Some("your name?"));
    rt.answer(&page.items[0].id, json!("Ada")).await.unwrap();
    rt.settle().await;
    assert_eq!(rt.inbox(1, None).unwrap().total, 0);
    assert_eq!(rt.take("s", &page.items[0].id).await.unwrap(), json!("Ada"));
    // A second answer is refused as already answered, even once the outcome was taken.
    let again = rt
        .answer(&page.items[0].id, json!("Bob"))
        .await
        .unwrap_err();
    assert_eq!(
        again,
        AnswerError::AlreadyResolved {
            id: page.items[0].id.clone(),
            how: Settled::Resumed,
            at: clock.now(),
        }
    );
}

/// A sync user ask blocks the activation until answered, and returns the answer inline.
#[tokio::test]
async fn a_sync_user_ask_blocks_until_answered() {
    let (rt, _clock) = common::runtime().await;
    register_user(&rt);
    let rt2 = rt.clone();
    let run = tokio::spawn(async move { rt2.run(Start::new("s", "user_sync")).await });
    let id = loop {
        if let Some(item) = rt.inbox(1, None).unwrap().items.first() {
            break item.id.clone();
        }
        tokio::task::yield_now().await;
    };
    assert!(!run.is_finished());
    rt.answer(&id, json!(true)).await.unwrap();
    let record = run.await.unwrap().unwrap();
    assert_eq!(record.status, RunStatus::Succeeded);
    assert_eq!(
        record.result,
        Some(json!({"answer": true, "expired": false}))
    );
}

/// A sync user ask that times out returns the expiry marker to the blocked activation.
#[tokio::test]
async fn a_sync_user_ask_times_out_with_the_marker() {
    let (rt, clock) = common::runtime().await;
    register_user(&rt);
    let rt2 = rt.clone();
    let run = tokio::spawn(async move { rt2.run(Start::new("s", "user_sync")).await });
    while rt.inbox(1, None).unwrap().total == 0 {
        tokio::task::yield_now().await;
    }
    clock.advance(Duration::from_secs(60));
    let record = run.await.unwrap().unwrap();
    assert_eq!(record.result.unwrap()["expired"], true);
}

/// An async user ask that lapses resumes its run with the marker (the user-ask default).
#[tokio::test]
async fn an_async_user_ask_resumes_on_expiry() {
    let (rt, clock) = common::runtime().await;
    register_user(&rt);
    rt.run(Start::new("s", "user_text")).await.unwrap();
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    let entries = rt.list("s").await.unwrap();
    assert_eq!(entries.len(), 1);
    let result = rt.take("s", &entries[0].id).await.unwrap();
    assert!(is_expiry_marker(&result), "{result}");
}

/// The answer door validates by format, naming the field at fault; nothing changes.
#[cfg(feature = "forms")]
#[tokio::test]
async fn answers_are_validated_by_format() {
    let (rt, _clock) = common::runtime().await;
    register_user(&rt);
    for target in ["user_text", "user_select", "user_form"] {
        rt.run(Start::new("s", target)).await.unwrap();
    }
    let page = rt.inbox(1, None).unwrap();
    let (text, select, form) = (&page.items[0].id, &page.items[1].id, &page.items[2].id);
    let cases: Vec<(&String, Value, &str)> = vec![
        (
            text,
            json!(5),
            "a text answer must be a string, not a number",
        ),
        (
            select,
            json!("green"),
            "\"green\" is not one of the options red, blue",
        ),
        (
            select,
            json!(1),
            "a select answer must be one of the options",
        ),
        (form, json!({"age": -1}), "at /age:"),
        (form, json!({}), "at /age: \"age\" is a required property"),
        (form, json!("x"), "is not of type \"object\""),
    ];
    for (id, answer, fragment) in cases {
        let e = rt.answer(id, answer.clone()).await.unwrap_err();
        assert!(e.to_string().contains(fragment), "{answer}: {e}");
    }
    // Each problem says where, as a JSON pointer: a missing property at its own.
    match rt.answer(form, json!({"age": -1, "extra": {}})).await {
        Err(AnswerError::Invalid { problems, .. }) => {
            let at: Vec<&str> = problems.iter().map(|p| p.at.as_str()).collect();
            assert!(at.contains(&"/age"), "{problems:?}");
        }
        other => panic!("{other:?}"),
    }
    match rt.answer(form, json!({})).await {
        Err(AnswerError::Invalid { problems, .. }) => {
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert_eq!(problems[0].at, "/age");
            assert_eq!(problems[0].message, "\"age\" is a required property");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rt.inbox(1, None).unwrap().total, 3);
    rt.answer(select, json!("blue")).await.unwrap();
    rt.answer(form, json!({"age": 36})).await.unwrap();
    assert_eq!(rt.inbox(1, None).unwrap().total, 1);
}

/// A select without options, a form without a schema, and an unknown format are
/// refused when asked.
#[tokio::test]
async fn malformed_user_asks_are_refused() {
    let (rt, _clock) = common::runtime().await;
    for (name, ask, message) in [
        (
            "sel",
            Ask::user("q").answer_format("select").expiry_at("1h"),
            "a select ask needs options",
        ),
        (
            "frm",
            Ask::user("q").answer_format("form").expiry_at("1h"),
            "a form ask needs a JSON schema",
        ),
        (
            "odd",
            Ask::user("q").answer_format("telepathy").expiry_at("1h"),
            "answer_format \"telepathy\" is not one of",
        ),
    ] {
        rt.register(name, &[], move |ctx, _, _| {
            let ask = ask.clone();
            async move { Ok(ctx.ask(ask).await?) }
        });
        let record = rt.run(Start::new("s", name)).await.unwrap();
        assert!(
            record.error.as_deref().unwrap_or("").contains(message),
            "{record:?}"
        );
    }
    assert_eq!(rt.inbox(1, None).unwrap().total, 0);
    assert_eq!(rt.stats().await.user_open, 0);
}

/// An `external` ask is refused at the answer door.
#[tokio::test]
async fn external_asks_are_refused_at_the_door() {
    let (rt, _clock) = common::runtime().await;
    rt.register("ext", &[], |ctx, _, _| async move {
        Ok(ctx
            .ask(Ask::user("sign").answer_format("external").expiry_at("1h"))
            .await?)
    });
    rt.run(Start::new("s", "ext")).await.unwrap();
    let id = rt.inbox(1, None).unwrap().items[0].id.clone();
    let e = rt.answer(&id, json!("signed")).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("interaction {id} is answered externally, not through the answer door")
    );
}

/// Pages: default size 50, capped at 200, with total and next page.
#[tokio::test]
async fn the_inbox_pages() {
    let (rt, _clock) = common::runtime().await;
    register_user(&rt);
    for _ in 0..230 {
        rt.run(Start::new("s", "user_text")).await.unwrap();
    }
    let first = rt.inbox(1, None).unwrap();
    assert_eq!(
        (
            first.items.len(),
            first.page_size,
            first.total,
            first.next_page
        ),
        (50, 50, 230, Some(2))
    );
    let big = rt.inbox(1, Some(1000)).unwrap();
    assert_eq!(
        (big.items.len(), big.page_size, big.next_page),
        (200, 200, Some(2))
    );
    let last = rt.inbox(2, Some(200)).unwrap();
    assert_eq!((last.items.len(), last.next_page), (30, None));
    assert_eq!(rt.inbox(0, None).unwrap_err(), AnswerError::BadPage);
}

/// Hidden from the inbox: caller asks never appear in the list, in any frame of the
/// stream (raised, answered, expired or cancelled), and the answer door answers for them
/// exactly as for an unknown id.
#[tokio::test]
async fn caller_asks_are_hidden_from_every_user_surface() {
    let (rt, clock) = common::runtime().await;
    register_user(&rt);
    let mut frames = rt.inbox_frames();
    // Caller asks: one answered, one expired, one cancelled.
    for _ in 0..3 {
        rt.run(Start::new("s", "asker")).await.unwrap();
    }
    // User asks: one answered, one expired (1h), one cancelled.
    for _ in 0..3 {
        rt.run(Start::new("u", "user_text")).await.unwrap();
    }
    let caller = common::ids(&rt.list("s").await.unwrap());
    let user = common::ids(&rt.list("u").await.unwrap());
    assert_eq!(rt.inbox(1, None).unwrap().total, 3);
    for id in &caller {
        assert_eq!(
            rt.answer(id, json!("x")).await.unwrap_err(),
            rt.answer("i-999", json!("x"))
                .await
                .unwrap_err()
                .clone_with_id(id)
        );
    }
    rt.resume("s", &caller[0], json!("yes")).await.unwrap();
    rt.cancel("s", &[&caller[2]]).await.unwrap();
    rt.answer(&user[0], json!("Ada")).await.unwrap();
    rt.cancel("u", &[&user[2]]).await.unwrap();
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    let mut seen = Vec::new();
    while let Ok(frame) = frames.try_recv() {
        seen.push(serde_json::to_value(&frame).unwrap());
    }
    let frame_ids: Vec<String> = seen
        .iter()
        .map(|f| {
            f["id"]
                .as_str()
                .or(f["item"]["id"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(caller.iter().all(|c| !frame_ids.contains(c)), "{seen:?}");
    let kinds: Vec<(String, String)> = seen
        .iter()
        .map(|f| {
            (
                f["frame"].as_str().unwrap().to_owned(),
                f["reason"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    let k = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        kinds,
        [
            k("add", ""),
            k("add", ""),
            k("add", ""),
            k("answered", ""),
            k("removed", "cancelled"),
            k("removed", "expired")
        ]
    );
    assert!(matches!(&seen_frame(&seen[0]), Frame::Add { .. }));
}

fn seen_frame(v: &Value) -> Frame {
    serde_json::from_value(v.clone()).unwrap()
}

trait WithId {
    fn clone_with_id(&self, id: &str) -> AnswerError;
}

impl WithId for AnswerError {
    /// The same refusal, for another id: the door answers alike for both.
    fn clone_with_id(&self, id: &str) -> AnswerError {
        match self {
            AnswerError::Unknown { .. } => AnswerError::Unknown { id: id.to_owned() },
            other => other.clone(),
        }
    }
}

/// Issue 18, item 10: a form ask whose schema allows any object, answered with the expiry
/// marker, was refused as `unknown interaction` while the inbox still listed it. The door
/// now names the reserved key, and nothing changes.
#[tokio::test]
async fn an_answer_carrying_the_reserved_key_is_refused_naming_it() {
    let (rt, _clock) = common::runtime().await;
    rt.register("open_form", &[], |ctx, _, _| async move {
        let ask = Ask::user("anything?")
            .answer_format("form")
            .schema(json!({"type": "object"}))
            .expiry_at("1h");
        Ok(ctx.ask(ask).await?)
    });
    rt.submit(Start::new("s", "open_form")).await.unwrap();
    rt.settle().await;
    let before = rt.inbox(1, None).unwrap();
    let id = before.items[0].id.clone();
    let refused = rt
        .answer(&id, json!({"interaction_expired": true}))
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        AnswerError::Invalid {
            id: id.clone(),
            problems: vec![parkway::AnswerProblem::whole(
                "the answer carries the reserved key interaction_expired"
            )],
        }
    );
    assert_eq!(rt.inbox(1, None).unwrap(), before, "still pending");
    rt.answer(&id, json!({"ok": true})).await.unwrap();
}

/// An expired user ask answers a late answer with how and when it went, and an id that
/// was never issued stays unknown: a client retrying can tell the two apart.
#[tokio::test]
async fn a_late_answer_to_an_expired_ask_reads_already_resolved() {
    let (rt, clock) = common::runtime().await;
    register_user(&rt);
    rt.submit(Start::new("s", "user_text")).await.unwrap();
    rt.settle().await;
    let id = rt.inbox(1, None).unwrap().items[0].id.clone();
    clock.advance(Duration::from_secs(3600));
    rt.settle().await;
    let late = rt.answer(&id, json!("Ada")).await.unwrap_err();
    assert_eq!(
        late,
        AnswerError::AlreadyResolved {
            id: id.clone(),
            how: Settled::Expired,
            at: clock.now(),
        }
    );
    assert_eq!(
        late.to_string(),
        format!("interaction {id} already resolved (expired) at 2026-01-01T01:00:00Z")
    );
    assert_eq!(
        rt.answer("i-999", json!("Ada")).await.unwrap_err(),
        AnswerError::Unknown { id: "i-999".into() }
    );
}

/// A run that stops waiting for its `sync` ask (a `select!` took another branch) is busy
/// again: `settle` waits for it instead of counting it idle for as long as the ask stands.
#[tokio::test(start_paused = true)]
async fn a_sync_ask_given_up_by_its_run_no_longer_counts_it_idle() {
    let (rt, _clock) = common::runtime().await;
    let gate = std::sync::Arc::new(tokio::sync::Notify::new());
    let done = std::sync::Arc::new(tokio::sync::Notify::new());
    let (g, d) = (gate.clone(), done.clone());
    rt.register("chooser", &[], move |ctx, _, _| {
        let (gate, done) = (g.clone(), d.clone());
        async move {
            let ask = Ask::user("ok?")
                .answer_format("confirm")
                .mode(Mode::Sync)
                .timeout(Duration::from_secs(60));
            tokio::select! {
                answer = ctx.ask(ask) => return Ok(answer?),
                () = gate.notified() => {}
            }
            // The ask's future is dropped: the run now waits on something else.
            done.notified().await;
            Ok(json!("chose"))
        }
    });
    let run = rt.submit(Start::new("s", "chooser")).await.unwrap();
    // Blocked in its sync ask: idle for `settle`.
    rt.settle().await;
    gate.notify_one();
    // No longer blocked in the ask (which still stands on the subject): not idle. The
    // paused clock moves on to the timeout once nothing else can run.
    let waited = tokio::time::timeout(Duration::from_secs(5), rt.settle()).await;
    assert!(waited.is_err(), "settle returned while the run was busy");
    done.notify_one();
    rt.settle().await;
    assert_eq!(rt.record(&run).await.unwrap().status, RunStatus::Succeeded);
}

/// A person reads who asked by the targets' titles: an item carries the title of each
/// target in its `asked_by` chain that a tool offers one for (the first tool by name when
/// several do), in the list and in the `add` frame alike; an item none of whose targets
/// has a title carries no `asked_by_titles` at all, as before there were titles.
#[tokio::test]
async fn inbox_items_carry_the_titles_of_the_targets_that_asked() {
    let (rt, _clock) = common::runtime().await;
    register_user(&rt);
    rt.register("pipeline", &[], |ctx, _, _| async move {
        let record = ctx.call("user_text", json!({})).await?;
        Ok(serde_json::to_value(record)?)
    });
    let tool = |name: &str, title: &str| parkway::ToolSpec::new(name).title(title);
    rt.add_tool("pipeline", tool("pipeline_b", "Second pipeline title"))
        .unwrap();
    rt.add_tool("pipeline", tool("pipeline_a", "Release pipeline"))
        .unwrap();
    rt.add_tool("pipeline", parkway::ToolSpec::new("pipeline_0"))
        .unwrap();
    let mut frames = rt.inbox_frames();
    rt.run(Start::new("s", "pipeline")).await.unwrap();
    rt.run(Start::new("t", "user_text")).await.unwrap();
    let page = rt.inbox(1, None).unwrap();
    let chained = &page.items[0];
    assert_eq!(chained.asked_by, ["user_text", "pipeline"]);
    assert_eq!(
        common::json_of(&chained.asked_by_titles),
        json!({"pipeline": "Release pipeline"})
    );
    let Ok(Frame::Add { item }) = frames.try_recv() else {
        panic!("an add frame")
    };
    assert_eq!(*item, *chained);
    let plain = common::json_of(&page.items[1]);
    assert_eq!(plain["asked_by"], json!(["user_text"]));
    assert!(plain.get("asked_by_titles").is_none(), "{plain}");
}

/// Read back from a data directory, a pending user ask is offered again with the titles
/// the tools give as the runtime opens, not those it was raised under.
#[cfg(feature = "disk")]
#[tokio::test]
async fn a_user_ask_read_back_carries_the_titles_of_the_tools_as_opened() {
    let dir = tempfile::tempdir().unwrap();
    let open = |title: &'static str| {
        parkway::Runtime::builder()
            .without_env()
            .ids(parkway::Ids::sequential())
            .data_dir(dir.path())
            .register("review", &[], |ctx, _, _| async move {
                Ok(ctx.ask(Ask::user("approve?").expiry_at("1h")).await?)
            })
            .tool("review", parkway::ToolSpec::new("review").title(title))
            .build()
    };
    let rt = open("Review a release").await.unwrap();
    rt.run(Start::new("u", "review")).await.unwrap();
    let titles = |rt: &parkway::Runtime| {
        common::json_of(&rt.inbox(1, None).unwrap().items[0].asked_by_titles)
    };
    assert_eq!(titles(&rt), json!({"review": "Review a release"}));
    rt.shutdown().await;
    drop(rt);
    let rt = open("Approve the release").await.unwrap();
    assert_eq!(titles(&rt), json!({"review": "Approve the release"}));
    rt.shutdown().await;
}
