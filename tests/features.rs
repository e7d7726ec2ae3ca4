//! A build without a default feature (`docs/features.md`): what the feature would have
//! done is refused where it is asked for, naming the feature. A data directory is never
//! replaced by a runtime in memory, and a value is never taken unchecked against a schema
//! the build cannot check. With both features (the default) this file holds no test.

#![cfg(not(all(feature = "disk", feature = "forms")))]

mod common;

/// Without `disk`: a data directory fails the build, naming the feature, and nothing is
/// written where it was.
#[cfg(not(feature = "disk"))]
#[tokio::test]
async fn without_disk_a_data_directory_is_refused_naming_the_feature() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let refused = parkway::Runtime::builder()
        .without_env()
        .data_dir(&dir)
        .build()
        .await
        .expect_err("the build is refused");
    assert!(
        matches!(refused, parkway::BuildError::Store(_)),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        format!(
            "store directory {}: this build of parkway has no disk store: enable the `disk` \
             feature to use a data directory",
            dir.display()
        )
    );
    assert!(!dir.exists(), "nothing is created");
    // Without a data directory the same build runs in memory.
    let (rt, _clock) = common::runtime().await;
    let record = rt.run(parkway::Start::new("s", "echo")).await.unwrap();
    assert_eq!(record.status, parkway::RunStatus::Succeeded);
}

/// Without `postgres`: a database fails the build, naming the feature, before anything
/// connects to it.
#[cfg(not(feature = "postgres"))]
#[tokio::test]
async fn without_postgres_a_database_is_refused_naming_the_feature() {
    let refused = parkway::Runtime::builder()
        .without_env()
        .postgres("postgres://nobody@127.0.0.1:1/none")
        .build()
        .await
        .expect_err("the build is refused");
    assert_eq!(
        refused.to_string(),
        "this build of parkway has no PostgreSQL store: enable the `postgres` feature to use \
         a database"
    );
}

#[cfg(not(feature = "forms"))]
mod without_forms {
    use parkway::{AnswerError, Ask, RunStatus, Start, ToolSpec, check_answer};
    use serde_json::json;

    use super::common;

    /// What every refusal names.
    const FEATURE: &str = "enable the `forms` feature";

    /// A schema only a JSON Schema validator checks.
    fn rich() -> serde_json::Value {
        json!({"type": "object", "required": ["age"],
               "properties": {"age": {"type": "integer", "minimum": 0}}})
    }

    /// A `form` ask whose schema needs a validator is refused when asked: the run fails
    /// naming the feature, and nothing reaches the inbox.
    #[tokio::test]
    async fn a_form_ask_with_a_schema_is_refused_when_asked() {
        let (rt, _clock) = common::runtime().await;
        rt.register("form", &[], |ctx, _, _| async move {
            Ok(ctx
                .ask(
                    Ask::user("about you")
                        .answer_format("form")
                        .schema(rich())
                        .expiry_at("1h"),
                )
                .await?)
        });
        let record = rt.run(Start::new("s", "form")).await.unwrap();
        assert_eq!(record.status, RunStatus::Failed, "{record:?}");
        let error = record.error.unwrap_or_default();
        assert!(
            error.contains("the form's schema cannot be checked") && error.contains(FEATURE),
            "{error}"
        );
        assert_eq!(rt.inbox(1, None).unwrap().total, 0);
    }

    /// `{"type": "object"}` needs no validator: the ask parks, and an answer that is not
    /// an object is refused as a validator would refuse it.
    #[tokio::test]
    async fn a_form_that_asks_for_any_object_is_checked() {
        let (rt, _clock) = common::runtime().await;
        rt.register("form", &[], |ctx, _, _| async move {
            Ok(ctx
                .ask(
                    Ask::user("anything")
                        .answer_format("form")
                        .schema(json!({"type": "object"}))
                        .expiry_at("1h"),
                )
                .await?)
        });
        let record = rt.run(Start::new("s", "form")).await.unwrap();
        assert_eq!(record.status, RunStatus::Suspended, "{record:?}");
        let id = rt.inbox(1, None).unwrap().items[0].id.clone();
        match rt.answer(&id, json!("x")).await {
            Err(AnswerError::Invalid { problems, .. }) => {
                assert_eq!(problems[0].message, "\"x\" is not of type \"object\"");
            }
            other => panic!("{other:?}"),
        }
        rt.answer(&id, json!({"age": 36})).await.unwrap();
        assert_eq!(rt.inbox(1, None).unwrap().total, 0);
    }

    /// The answer door's check refuses a form answer it cannot check (a form kept by a
    /// build with the feature, read back by one without): never accepted unchecked.
    #[test]
    fn an_answer_to_a_schema_it_cannot_check_is_refused() {
        let problems =
            check_answer("form", None, Some(&rich()), &json!({"age": 36})).expect_err("refused");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains(FEATURE), "{problems:?}");
    }

    /// A tool whose input schema needs a validator fails the build naming the feature;
    /// one with the default input schema (any object) builds, and its arguments are
    /// checked.
    #[tokio::test]
    async fn a_tool_schema_it_cannot_check_fails_the_build() {
        let refused = parkway::Runtime::builder()
            .without_env()
            .tool("echo", ToolSpec::new("ages").input_schema(rich()))
            .build()
            .await
            .expect_err("the build is refused");
        let text = refused.to_string();
        assert!(
            text.contains("inputSchema: ") && text.contains(FEATURE),
            "{text}"
        );
        let (rt, _clock) = common::runtime_with(|b| b.tool("echo", ToolSpec::new("plain"))).await;
        let refused = rt
            .call_tool("plain", json!([1]), &json!({}), "tester")
            .await
            .expect_err("an array is not an object");
        assert!(
            refused.to_string().contains("is not of type \"object\""),
            "{refused}"
        );
        let (_, record) = rt
            .call_tool("plain", json!({"a": 1}), &json!({}), "tester")
            .await
            .unwrap();
        assert_eq!(record.status, RunStatus::Succeeded);
    }
}
