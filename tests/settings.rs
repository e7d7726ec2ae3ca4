//! Settings: defaults, the environment's names, and the builder winning over both.

use std::collections::HashMap;
use std::time::Duration;

use parkway::{Runtime, Settings};

fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

/// The defaults are the page's and SPEC's.
#[test]
fn defaults() {
    let s = Settings::default();
    assert_eq!(s.max_concurrent_caller, 10_000);
    assert_eq!(s.max_concurrent, 1_000);
    assert_eq!(s.waiting_retention, Duration::from_secs(24 * 3600));
}

/// The three variables are read under their documented names; retention is humantime.
#[test]
fn environment_names() {
    let s = Settings::from_lookup(lookup(&[
        ("INTERACTIONS_MAX_CONCURRENT_CALLER", "7"),
        ("INTERACTIONS_MAX_CONCURRENT", "3"),
        ("INTERACTIONS_WAITING_RETENTION", "90m"),
    ]))
    .unwrap();
    assert_eq!(s.max_concurrent_caller, 7);
    assert_eq!(s.max_concurrent, 3);
    assert_eq!(s.waiting_retention, Duration::from_secs(90 * 60));
}

/// Every malformed variable is reported, each naming the variable and its value.
#[test]
fn malformed_values_are_all_reported() {
    let errors = Settings::from_lookup(lookup(&[
        ("INTERACTIONS_MAX_CONCURRENT_CALLER", "lots"),
        ("INTERACTIONS_WAITING_RETENTION", "a while"),
    ]))
    .unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        text,
        [
            "INTERACTIONS_MAX_CONCURRENT_CALLER=\"lots\" is not a whole number",
            "INTERACTIONS_WAITING_RETENTION=\"a while\" is not a duration such as 24h or 90m",
        ]
    );
}

/// The builder's settings win over the ones it starts from.
#[tokio::test]
async fn the_builder_wins() {
    let base = Settings::from_lookup(lookup(&[("INTERACTIONS_MAX_CONCURRENT", "3")])).unwrap();
    let rt = Runtime::builder()
        .settings(base)
        .max_concurrent(9)
        .build()
        .await
        .unwrap();
    assert_eq!(rt.settings().max_concurrent, 9);
    assert_eq!(rt.settings().max_concurrent_caller, 10_000);
}

/// A zero where zero makes the runtime useless is refused by the builder, each setting
/// named, all reported together; a zero `passivate_after` stays allowed (it passivates an
/// idle subject at once).
#[tokio::test]
async fn zero_durations_that_make_no_sense_are_refused() {
    let err = Runtime::builder()
        .without_env()
        .jq_deadline(Duration::ZERO)
        .waiting_retention(Duration::ZERO)
        .max_input_bytes(0)
        .passivate_after(Duration::ZERO)
        .build()
        .await
        .unwrap_err();
    let text = err.to_string();
    for fragment in [
        "jq_deadline must be more than zero",
        "INTERACTIONS_WAITING_RETENTION must be more than zero",
        "max_input_bytes must be more than zero",
    ] {
        assert!(text.contains(fragment), "missing {fragment:?} in {text:?}");
    }
    assert!(!text.contains("passivate_after"), "{text}");
    let rt = Runtime::builder()
        .without_env()
        .passivate_after(Duration::ZERO)
        .build()
        .await
        .unwrap();
    assert_eq!(rt.settings().passivate_after, Duration::ZERO);
}

/// A zero retention in the environment is refused like a malformed one.
#[test]
fn a_zero_retention_in_the_environment_is_refused() {
    let errors =
        Settings::from_lookup(lookup(&[("INTERACTIONS_WAITING_RETENTION", "0s")])).unwrap_err();
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        [
            "INTERACTIONS_WAITING_RETENTION must be more than zero: every waiting outcome would be dropped before it could be taken"
        ]
    );
}
