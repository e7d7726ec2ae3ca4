//! The load engine behind `parkway load`: a small run balances its account, with
//! expiries, cancels, takes and drops all landing, and bad parameters are refused by name.

use std::time::Duration;

use parkway_cli::load::{self, LoadConfig, LoadError, Mix, Progress, Stop};

fn small() -> LoadConfig {
    LoadConfig {
        subjects: 40,
        concurrency: 8,
        stop: Stop::Count(3_000),
        prefill: 3,
        // Half the asks expire within a millisecond or two of wall time, and all of those
        // resume, so waiting outcomes are there for takes to find.
        short_ttl: Duration::from_millis(1),
        short_share: 0.5,
        resume_share: 1.0,
        bare_for: Duration::from_millis(50),
        workers: 2,
        ..LoadConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_run_loses_nothing() {
    let progress = Progress::new();
    let report = load::run(&small(), &progress).await.expect("the load runs");
    let a = &report.account;
    assert_eq!(report.lost, 0, "{report}");
    assert!(a.imbalances.is_empty(), "{report}");
    assert!(report.errors.is_empty(), "{report}");
    assert_eq!(report.measured.visits, 3_000);
    assert_eq!(progress.visits(), 3_000);
    assert_eq!(report.measured.by_op.values().sum::<u64>(), 3_000);
    assert_eq!(report.prefilled_asks, 40 * 3);
    // Every way an ask or an outcome can end was exercised. The closing clock moves
    // land every short expiry, and drop the outcomes they leave waiting.
    for (what, n) in [
        ("resumed", a.resumed),
        ("cancelled", a.cancelled),
        ("expired", a.expired),
        ("delivered", a.delivered),
        ("taken", a.taken),
        ("dropped", a.dropped),
        ("open", a.open),
    ] {
        assert!(n > 0, "no asks or outcomes {what}: {report}");
    }
    assert_eq!(a.asks_raised, a.resumed + a.cancelled + a.expired + a.open);
    // The asks the visits resolved are the resumes and cancels the runtime reported (the
    // prefill only starts runs; expiries are the clock's).
    assert_eq!(
        report.measured.resolved,
        a.resumed + a.cancelled,
        "{report}"
    );
    assert!(report.measured.resolved_per_sec > 0.0, "{report}");
    assert_eq!(a.outcomes, a.delivered + a.taken + a.dropped + a.waiting);
    // Idle subjects gave up their actors.
    assert_eq!(report.live_subjects, 0, "{report}");
    assert!(report.passive_subjects > 0);
    assert!(report.bare_visits_per_sec > 0.0);
    assert!(report.overhead_ratio.is_some());
    assert_eq!(report.bare_problems, 0);
    let json = serde_json::to_value(&report).expect("serialises");
    for field in [
        "visits",
        "visits_per_sec",
        "p50_us",
        "p99_us",
        "p999_us",
        "max_us",
        "peak_rss_bytes",
        "process_peak_rss_bytes",
        "rss_held_bytes",
        "lost",
        "bare_visits_per_sec",
        "overhead_ratio",
        "resolved",
        "resolved_per_sec",
    ] {
        assert!(json.get(field).is_some(), "--json lacks {field}");
    }
    let m = &report.measured;
    assert!(m.p50_us <= m.p99_us && m.p99_us <= m.max_us);
    // The process's peak includes the run's, read earlier.
    assert!(
        report.process_peak_rss_bytes >= report.peak_rss_bytes,
        "{report}"
    );
    // What is held at the end is within the peak.
    assert!(
        report.rss_held_bytes > 0 && report.rss_held_bytes <= report.peak_rss_bytes,
        "{report}"
    );
    // The passivated subjects are packed.
    assert!(report.passive_bytes > 0, "{report}");
    // Each kind's latencies, and together they bound the whole run's.
    let kinds = &m.by_op_latency;
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    for (kind, l) in kinds {
        assert!(m.by_op[kind] > 0, "no {kind} visits");
        assert!(
            l.p50_us > 0 && l.p50_us <= l.p99_us && l.p99_us <= l.max_us,
            "{kind}: {l:?}"
        );
    }
    assert_eq!(kinds.values().map(|l| l.max_us).max(), Some(m.max_us));
    assert!(json["by_op_latency"]["start"]["p99_us"].is_u64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_by_duration_stops_and_balances() {
    let config = LoadConfig {
        stop: Stop::For(Duration::from_millis(200)),
        mix: Mix {
            start: 1,
            resume: 0,
            take: 0,
            cancel: 1,
        },
        ..small()
    };
    let report = load::run(&config, &Progress::new())
        .await
        .expect("the load runs");
    assert_eq!(report.lost, 0, "{report}");
    assert!(report.measured.visits > 0);
    assert_eq!(
        report.measured.by_op["resume"] + report.measured.by_op["take"],
        0
    );
    assert_eq!(report.account.resumed, 0, "{report}");
}

/// Thousands of visitors, most of them waiting on the same few subjects: every event is
/// read (the counter is not a task queued behind the visitors), and every visit is
/// counted in its latency figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_visitors_lose_nothing() {
    let config = LoadConfig {
        concurrency: 3_000,
        stop: Stop::Count(12_000),
        ..small()
    };
    let report = load::run(&config, &Progress::new())
        .await
        .expect("the load runs");
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.account.events_lagged, 0, "{report}");
    assert_eq!(report.measured.visits, 12_000);
    assert_eq!(report.measured.by_op.values().sum::<u64>(), 12_000);
    assert!(report.bare_visits_per_sec > 0.0);
}

/// A run without measured visits (the memory run) accounts for its prefill and skips
/// the bare baseline, which has nothing to be compared with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_visits_balances_and_skips_the_baseline() {
    let config = LoadConfig {
        stop: Stop::Count(0),
        ..small()
    };
    let report = load::run(&config, &Progress::new())
        .await
        .expect("the load runs");
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.measured.visits, 0);
    assert_eq!(report.account.asks_raised, 40 * 3, "{report}");
    assert_eq!(
        report.account.open,
        40 * 3 - report.account.expired,
        "{report}"
    );
    assert_eq!(report.bare_visits_per_sec, 0.0);
    assert!(report.overhead_ratio.is_none());
    assert!(
        report.to_string().contains("bare        not measured"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_parameters_are_refused_by_name() {
    let cases: [(LoadConfig, &str); 5] = [
        (
            LoadConfig {
                subjects: 0,
                ..small()
            },
            "subjects",
        ),
        (
            LoadConfig {
                prefill: 11,
                ..small()
            },
            "prefill (11) must not exceed max_entries (10)",
        ),
        (
            LoadConfig {
                short_share: 1.5,
                ..small()
            },
            "short_share",
        ),
        (
            LoadConfig {
                mix: Mix {
                    start: 0,
                    resume: 0,
                    take: 0,
                    cancel: 0,
                },
                ..small()
            },
            "mix",
        ),
        (
            LoadConfig {
                rate: Some(0),
                ..small()
            },
            "rate",
        ),
    ];
    for (config, named) in cases {
        match load::run(&config, &Progress::new()).await {
            Err(LoadError::Invalid(message)) => assert!(message.contains(named), "{message}"),
            other => panic!("{named}: {other:?}"),
        }
    }
}

/// A durable run asked for its stages reports each one, measured over the visits, in
/// the report and its JSON; one not asked reports none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_durable_run_measures_its_stages() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = LoadConfig {
        data: Some(dir.path().join("data")),
        stages: true,
        bare_for: Duration::ZERO,
        ..small()
    };
    let report = load::run(&config, &Progress::new())
        .await
        .expect("the load runs");
    assert_eq!(report.lost, 0, "{report}");
    let stages = report.stages.as_ref().expect("measured");
    let names: Vec<&str> = stages.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(
        names,
        ["turn", "queued", "write", "sync", "durable", "delivery"]
    );
    let count = |name: &str| {
        stages
            .stages
            .iter()
            .find(|s| s.stage == name)
            .map_or(0, |s| s.count)
    };
    for s in &stages.stages {
        assert!(s.count > 0, "{} was not measured: {report}", s.stage);
        assert!(s.p50 <= s.p99 && s.p99 <= s.max, "{s:?}");
    }
    // Every batch queues and is acknowledged; a subject's turn is one batch, and its
    // acknowledgement reaches it at most once; a group is one write, and a sync covers
    // one or more. Only the batches in flight as the measuring began or ended (a few
    // per visitor at most) may be counted in one stage and not the next.
    let near = |a: u64, b: u64| a.abs_diff(b) <= 64;
    assert!(near(count("queued"), count("durable")), "{report}");
    assert!(count("turn") <= count("queued") + 64, "{report}");
    assert!(count("delivery") <= count("turn") + 64, "{report}");
    assert!(count("sync") <= count("write") + 1, "{report}");
    let text = report.to_string();
    assert!(text.contains("stage µs    sync"), "{text}");
    assert!(text.contains("stalls "), "{text}");
    let json = serde_json::to_value(&report).expect("serialises");
    assert_eq!(json["stages"]["stages"][3]["stage"], "sync");

    let unmeasured = LoadConfig {
        data: Some(dir.path().join("again")),
        bare_for: Duration::ZERO,
        ..small()
    };
    let report = load::run(&unmeasured, &Progress::new())
        .await
        .expect("the load runs");
    assert!(report.stages.is_none());
    assert!(
        serde_json::to_value(&report)
            .expect("serialises")
            .get("stages")
            .is_none()
    );
}
