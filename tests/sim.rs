//! The simulation harness itself: scenario parsing, expectations, determinism, and the
//! reference model's ability to catch a fault.

use parkway::sim::{Check, ModelFault, RandomConfig, Scenario, random, run};

fn scenario(text: &str) -> Scenario {
    Scenario::from_json(text).unwrap_or_else(|e| panic!("scenario parses: {e}"))
}

const PARK: &str = r#"{
  "name": "park",
  "targets": {"deploy": {"steps": [
    {"step": "plan", "value": "$kwargs.service", "as": "plan"},
    {"ask": {"question": "deploy ${plan}?", "answer_format": "confirm", "expiry_at": "10m"}, "as": "go"},
    {"return": {"service": "$plan", "go": "$go"}}
  ]}},
  "doors": [{"name": "confirm", "kind": "route", "target": "deploy",
             "resume_expr": "if ($parked | length) > 0 then {id: $parked[0].id, payload: .answer} else null end",
             "start_expr": "{service: .service}"}],
  "timeline": [
    {"visit": "confirm", "subject": "t", "input": {"service": "api"}, "as": "v",
     "expect": {"action": "started", "record": {"status": "parked"}}},
    {"visit": "confirm", "subject": "t", "input": {"answer": "yes"},
     "expect": {"action": "resolved", "results": [{"op": "resumed", "outcome": {"result": {"service": "api", "go": "yes"}}}]}},
    {"resume": "$v.record.asks.0.id", "subject": "t", "payload": "again",
     "expect_error": {"kind": "already_resolved", "message": "i-1 on subject t already resolved (resumed)"}}
  ]
}"#;

/// A scenario whose expectations hold passes, and a journaled step runs once although
/// the run was replayed.
#[tokio::test]
async fn a_sound_scenario_passes_and_notes_each_real_step_once() {
    let transcript = run(&scenario(PARK)).await.unwrap();
    assert!(transcript.passed(), "{}", transcript.text());
    let notes: Vec<&String> = transcript.lines.iter().flat_map(|l| &l.notes).collect();
    assert_eq!(notes, ["run r-1 ran step \"plan\""]);
}

/// A wrong expectation fails the scenario and names the step, what was expected at
/// which path, and what came.
#[tokio::test]
async fn a_wrong_expectation_says_which_step_what_was_expected_and_what_came() {
    let wrong = PARK.replace(r#""go": "yes"}}}"#, r#""go": "no"}}}"#);
    let transcript = run(&scenario(&wrong)).await.unwrap();
    assert!(!transcript.passed());
    let failures = transcript.failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let f = &failures[0];
    assert!(
        f.starts_with("park: step 3 (visit door confirm on t with"),
        "{f}"
    );
    assert!(
        f.contains(r#"at .results[0].outcome.result.go: expected "no", got "yes""#),
        "{f}"
    );
    assert!(transcript.text().contains("expect: FAILED"));
}

/// An expected error that does not come, or comes with another kind, fails too.
#[tokio::test]
async fn a_wrong_error_expectation_names_the_error_that_came() {
    let wrong = PARK.replace(r#""kind": "already_resolved""#, r#""kind": "wrong_status""#);
    let transcript = run(&scenario(&wrong)).await.unwrap();
    let failures = transcript.failures();
    assert_eq!(failures.len(), 1);
    assert!(
        failures[0].contains("expected an error of kind wrong_status")
            && failures[0].contains(
                "got already_resolved: interaction i-1 on subject t already resolved (resumed)"
            ),
        "{failures:?}"
    );
    let Some(Check::Failed(_)) = &transcript.lines[3].check else {
        panic!("step 4 carries the failed check");
    };
}

/// A malformed file is refused before anything runs, with every problem and its path.
#[test]
fn a_malformed_scenario_reports_every_problem_with_its_path() {
    let err = Scenario::from_json(
        r#"{"name": "bad", "settings": {"waiting_retention": "soon"},
            "targets": {"t": {"steps": [{"ask": {"question": "q", "expiry": "1m"}}]}},
            "timeline": [{"vist": "d"}, {"advance": "10 parsecs"}, {"visit": "d"}],
            "extra": 1}"#,
    )
    .unwrap_err();
    let all = err.problems.join("\n");
    for fragment in [
        "settings.waiting_retention: \"soon\" is not a duration",
        "targets.t.steps[0].ask: unknown field `expiry`",
        "timeline[0]: no action found among the keys [\"vist\"]",
        "timeline[1].advance: \"10 parsecs\" is not a duration",
        "timeline[2]: a visit needs a \"subject\"",
        "unknown key \"extra\"",
    ] {
        assert!(all.contains(fragment), "missing {fragment:?} in:\n{all}");
    }
}

/// An unknown key is named with every key its place accepts (it used to end with
/// `expected ` and an empty list), and zero settings that make no sense are refused
/// with their path.
#[test]
fn unknown_keys_and_zero_settings_are_refused_by_name() {
    let err = Scenario::from_json(
        r#"{"name": "bad",
            "settings": {"jq_deadline": "0s", "waiting_retention": "0m", "max_input_bytes": 0,
                         "passivate_after": "0s"},
            "targets": {"t": {"steps": [{"return": 1, "sa": "x"}]}},
            "timeline": [{"parked": "s", "subjct": "s"}, {"stats": {}, "asx": 1},
                         {"visit": "d", "subject": "s", "inptu": {}}]}"#,
    )
    .unwrap_err();
    let problems = err.problems;
    for expected in [
        "settings.jq_deadline: \"0s\" must be more than zero",
        "settings.waiting_retention: \"0m\" must be more than zero",
        "settings.max_input_bytes: 0 must be more than zero",
        "targets.t.steps[0]: unknown key \"sa\"; expected return, as",
        "timeline[0]: unknown key \"subjct\"; expected parked, as, note, expect, expect_error",
        "timeline[1]: unknown key \"asx\"; expected stats, as, note, expect, expect_error",
        "timeline[2]: unknown key \"inptu\"; expected visit, subject, input, as, note, expect, expect_error",
    ] {
        assert!(
            problems.iter().any(|p| p == expected),
            "missing {expected:?} in {problems:#?}"
        );
    }
    assert!(
        !problems.iter().any(|p| p.contains("passivate_after")),
        "{problems:#?}"
    );
    assert!(
        !problems.iter().any(|p| p.ends_with("expected ")),
        "{problems:#?}"
    );
}

/// A step that waits on something no later step can give (a `run` of a target blocked
/// in a sync user ask) is reported `hung` rather than hanging the simulation; the
/// runtime is left settled, so a later `answer` still releases the run. Paused time
/// skips the 20 s the harness allows a step.
#[tokio::test(start_paused = true)]
async fn a_step_that_cannot_finish_is_reported_hung() {
    let s = scenario(
        r#"{"name": "blocked",
            "targets": {"t": {"steps": [
              {"ask": {"to": "user", "question": "ok?", "answer_format": "confirm",
                       "mode": "sync", "timeout": "5m"}, "as": "ok"},
              {"return": "$ok"}]}},
            "timeline": [
              {"run": "t", "subject": "s", "expect_error": {"kind": "hung"}},
              {"answer": "i-1", "with": true, "expect": null},
              {"record": "r-1", "expect": {"status": "succeeded", "result": true}}
            ]}"#,
    );
    let transcript = run(&s).await.unwrap();
    assert_eq!(transcript.failures(), Vec::<String>::new());
}

/// The scenario files in `scenarios/`, in name order.
#[cfg(feature = "disk")]
fn shipped() -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("scenarios/ exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
}

/// The same scenario gives the same bytes, text and JSON lines, on every run: every
/// file in `scenarios/` is run twice and must pass.
#[cfg(feature = "disk")]
#[tokio::test]
async fn every_shipped_scenario_passes_and_replays_byte_for_byte() {
    let paths = shipped();
    assert!(
        paths.len() >= 12,
        "at least twelve scenarios ship, found {}",
        paths.len()
    );
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let s = Scenario::from_json(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let first = run(&s).await.unwrap();
        let second = run(&s).await.unwrap();
        assert!(
            first.passed(),
            "{}:\n{}",
            path.display(),
            first.failures().join("\n")
        );
        assert_eq!(first.text(), second.text(), "{}", path.display());
        assert_eq!(
            first.json_lines(),
            second.json_lines(),
            "{}",
            path.display()
        );
    }
}

/// A seed replays exactly: the same operations and the same outputs.
#[tokio::test]
async fn a_random_seed_replays_exactly() {
    let config = RandomConfig::new(42, 250, 3);
    let a = random(&config).await.unwrap();
    let b = random(&config).await.unwrap();
    assert_eq!(a.failure, None, "{}", a.trace.join("\n"));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.tally, b.tally);
    // The workload really does what it claims: every kind of resolution happens.
    let t = a.tally;
    assert!(
        t.resumed > 0 && t.cancelled > 0 && t.expired > 0,
        "{}",
        a.summary()
    );
    assert!(
        t.stored > 0 && t.taken + t.dropped > 0 && t.passivations > 0,
        "{}",
        a.summary()
    );
}

/// A seed of the node workload replays exactly, passes, and does what it claims: nodes
/// killed, restarted, added, frozen and thawed, slots taken again and again, visits
/// through a node that does not serve the subject refused, and a node thawed after its
/// slot was taken refused by the slot's epoch.
#[tokio::test]
async fn a_node_seed_replays_exactly_and_moves_every_kind_of_node() {
    let mut config = RandomConfig::new(1, 300, 4);
    config.nodes = 3;
    let a = random(&config).await.unwrap();
    let b = random(&config).await.unwrap();
    assert_eq!(a.failure, None, "{}", a.trace.join("\n"));
    assert_eq!(a.trace, b.trace);
    assert_eq!(a.tally, b.tally);
    assert_eq!(a.nodes, b.nodes);
    let n = a.nodes.expect("the node workload's account");
    assert!(
        n.killed > 0 && n.restarted > 0 && n.added > 0 && n.frozen > 0 && n.thawed > 0,
        "{}",
        a.summary()
    );
    assert!(
        n.slots_taken > 1024 && n.astray > 0 && n.stale > 0,
        "{}",
        a.summary()
    );
    let t = a.tally;
    assert!(t.resumed > 0 && t.expired > 0, "{}", a.summary());
    assert_eq!(
        t.asks,
        t.resumed + t.expired + t.cancelled,
        "{}",
        a.summary()
    );
    assert_eq!(a.open, 0, "{}", a.summary());
}

/// The checker can fail: a model that forgets that waiting outcomes count against the
/// ceiling, or that believes asks lapse five minutes late, is caught, and the failure
/// prints the seed and the command that replays it.
#[tokio::test]
async fn a_deliberately_broken_model_is_caught_with_its_replay_command() {
    for (fault, flag) in [
        (ModelFault::UncountedWaiting, "uncounted-waiting"),
        (ModelFault::LateExpiry, "late-expiry"),
    ] {
        let mut config = RandomConfig::new(3, 300, 4);
        config.fault = Some(fault);
        let report = random(&config).await.unwrap();
        let failure = report
            .failure
            .unwrap_or_else(|| panic!("{fault:?} went unnoticed"));
        assert!(failure.starts_with("seed 3: step "), "{failure}");
        assert!(
            failure.contains(&format!(
                "replay: parkway sim --random --seed 3 --ops 300 --subjects 4 --model-fault {flag} --trace"
            )),
            "{failure}"
        );
    }
}

/// On a data directory every event is in the durable log, which a step's line reads
/// back: each step of each shipped scenario shows the same events as in memory (in the
/// log's order, which may differ from the order they were shown in memory), those
/// raised outside any subject's change included (a ceiling's refusal, a record
/// dropped), but for a visit refused to its visitor: its `visit_refused` is published,
/// not logged, so a refusal costs the store nothing. The guided tour restarts, so is
/// durable only.
#[cfg(feature = "disk")]
#[tokio::test]
async fn on_a_data_directory_every_step_logs_the_events_it_shows_in_memory() {
    let paths = shipped();
    let mut kinds = std::collections::BTreeSet::new();
    let mut unlogged = 0;
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut s = Scenario::from_json(&text).unwrap();
        if s.settings.durable {
            continue;
        }
        let memory = run(&s).await.unwrap();
        s.settings.durable = true;
        let durable = run(&s).await.unwrap();
        assert!(durable.passed(), "{}", durable.failures().join("\n"));
        for (a, b) in memory.lines.iter().zip(&durable.lines) {
            let sorted = |events: &[serde_json::Value]| {
                let mut texts: Vec<String> = events.iter().map(|e| e.to_string()).collect();
                texts.sort();
                texts
            };
            // What memory showed and the log does not hold: only refused visits.
            let mut logged = sorted(&b.events);
            let mut shown = Vec::new();
            for text in sorted(&a.events) {
                match logged.iter().position(|l| *l == text) {
                    Some(i) => {
                        logged.remove(i);
                    }
                    None => shown.push(text),
                }
            }
            assert!(
                logged.is_empty(),
                "{} step {}: logged, never shown: {logged:?}",
                path.display(),
                a.step
            );
            for text in &shown {
                assert!(
                    text.starts_with(r#"{"event":"visit_refused""#),
                    "{} step {}: shown, not logged: {text}",
                    path.display(),
                    a.step
                );
            }
            unlogged += shown.len();
            kinds.extend(
                b.events
                    .iter()
                    .filter_map(|e| e["event"].as_str().map(str::to_owned)),
            );
        }
    }
    for kind in ["cap_refused", "record_dropped"] {
        assert!(kinds.contains(kind), "no scenario logs {kind}: {kinds:?}");
    }
    assert!(unlogged > 0, "no scenario refuses a visit");
}
