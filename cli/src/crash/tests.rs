//! The checker against made-up histories: it passes what the semantics allow and catches
//! each kind of loss (an acknowledged park or resolution gone, an id issued twice, a
//! journaled step run again, a buffered answer dropped, a record gone wrong).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use parkway::{Entry, EntryStatus, RunRecord, RunStatus, To};
use serde_json::{Value, json};

use super::log::{Acked, Call, Line, Reader, Target};
use super::model::Checker;

/// A history being written: lines fed to a checker as they are made.
struct History {
    checker: Checker,
    position: u64,
    generation: u64,
    seq: u64,
}

impl History {
    fn new() -> History {
        History {
            checker: Checker::new(["s".to_owned()], 1),
            position: 0,
            generation: 1,
            seq: 0,
        }
    }

    fn feed(&mut self, line: Line) {
        self.checker.line(self.position, line);
        self.position += 1;
    }

    /// Begin `call` on `s`; its sequence number.
    fn begin(&mut self, call: Call) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        self.feed(Line::Begin {
            generation: self.generation,
            seq,
            subject: "s".to_owned(),
            call,
        });
        seq
    }

    fn ack(&mut self, seq: u64, acked: Acked) {
        self.feed(Line::Ack {
            generation: self.generation,
            seq,
            acked,
        });
    }

    /// Begin and acknowledge.
    fn done(&mut self, call: Call, acked: Acked) {
        let seq = self.begin(call);
        self.ack(seq, acked);
    }

    fn step(&mut self, nonce: &str, run: &str) {
        self.feed(Line::Step {
            generation: self.generation,
            nonce: nonce.to_owned(),
            run: run.to_owned(),
        });
    }

    /// The child is killed; the next lines are the checker's generation.
    fn kill(&mut self) {
        self.checker.killed();
        self.generation += 1;
    }

    /// The reopened store lists `entries` on `s`, and the records are `records`.
    fn observe(&mut self, entries: Vec<Entry>, records: &[(&str, Option<RunRecord>)]) {
        let lists = BTreeMap::from([("s".to_owned(), entries)]);
        self.checker.observe(&lists);
        let wanted = self.checker.records_wanted();
        let found: Vec<_> = wanted
            .into_iter()
            .map(|w| {
                let record = records
                    .iter()
                    .find(|(id, _)| *id == w.run())
                    .and_then(|(_, r)| r.clone());
                (w, record)
            })
            .collect();
        self.checker.check_records(&found);
        self.generation += 1;
    }

    fn violations(&self) -> Vec<String> {
        self.checker.violations().to_vec()
    }
}

fn at() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default()
}

fn ask(id: &str, nonce: &str, run: &str, k: usize, group: &str) -> Entry {
    Entry {
        id: id.to_owned(),
        status: EntryStatus::Asking,
        to: Some(To::Caller),
        asked_by: Some(vec!["one".to_owned()]),
        question: Some(format!("answer {k}?")),
        answer_format: None,
        group_id: Some(group.to_owned()),
        payload: Some(json!({"nonce": nonce, "run": run, "k": k})),
    }
}

fn waiting(id: &str) -> Entry {
    Entry {
        id: id.to_owned(),
        status: EntryStatus::Finished,
        to: None,
        asked_by: None,
        question: None,
        answer_format: None,
        group_id: None,
        payload: None,
    }
}

fn record(
    run: &str,
    target: Target,
    status: RunStatus,
    result: Option<Value>,
    asks: Option<Vec<Entry>>,
) -> RunRecord {
    RunRecord {
        run_id: run.to_owned(),
        target: target.name().to_owned(),
        identity: "system".to_owned(),
        status,
        started_at: at(),
        finished_at: status.is_terminal().then(at),
        result,
        error: None,
        asks,
        suspension: None,
        resumed_interactions: Vec::new(),
    }
}

fn start(target: Target, nonce: &str) -> Call {
    Call::Start {
        target,
        nonce: nonce.to_owned(),
    }
}

fn parked(run: &str, target: Target, asks: Vec<Entry>) -> Acked {
    Acked::Started(Box::new(record(
        run,
        target,
        RunStatus::Parked,
        None,
        Some(asks),
    )))
}

/// `one` started as r-1 with ask i-1, acknowledged.
fn started_one(h: &mut History) {
    h.done(
        start(Target::One, "n1"),
        parked("r-1", Target::One, vec![ask("i-1", "n1", "r-1", 0, "g-1")]),
    );
}

fn resume(id: &str, payload: &str) -> Call {
    Call::Resume {
        interaction: id.to_owned(),
        payload: payload.to_owned(),
    }
}

fn succeeded(run: &str, target: Target, result: Value) -> Option<RunRecord> {
    Some(record(
        run,
        target,
        RunStatus::Succeeded,
        Some(result),
        None,
    ))
}

fn parked_record(run: &str, target: Target) -> Option<RunRecord> {
    Some(record(run, target, RunStatus::Parked, None, None))
}

#[test]
fn an_acknowledged_park_that_stays_passes() {
    let mut h = History::new();
    started_one(&mut h);
    h.kill();
    h.observe(
        vec![ask("i-1", "n1", "r-1", 0, "g-1")],
        &[("r-1", parked_record("r-1", Target::One))],
    );
    assert_eq!(h.violations(), Vec::<String>::new());
}

#[test]
fn an_acknowledged_park_lost_is_caught() {
    let mut h = History::new();
    started_one(&mut h);
    h.kill();
    h.observe(vec![], &[("r-1", parked_record("r-1", Target::One))]);
    let v = h.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].starts_with("subject s lists {}, the model holds"),
        "{v:?}"
    );
}

#[test]
fn an_acknowledged_resume_undone_is_caught() {
    let mut h = History::new();
    started_one(&mut h);
    let result = json!({"nonce": "n1", "answers": ["a1"]});
    h.done(
        resume("i-1", "a1"),
        Acked::Resumed(Box::new(record(
            "r-1",
            Target::One,
            RunStatus::Succeeded,
            Some(result.clone()),
            None,
        ))),
    );
    h.kill();
    h.observe(
        vec![ask("i-1", "n1", "r-1", 0, "g-1")],
        &[("r-1", parked_record("r-1", Target::One))],
    );
    let v = h.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(v[0].contains("subject s lists {\"i-1\""), "{v:?}");
    assert!(v[1].contains("run r-1's record is"), "{v:?}");
}

/// A resume in flight at the kill: not durable (still asking), durable with its outcome
/// handed over (gone), or durable and replayed without its caller (left waiting).
#[test]
fn a_resume_in_flight_may_have_happened_or_not() {
    let result = json!({"nonce": "n1", "answers": ["a1"]});
    for (listed, happened) in [
        (vec![ask("i-1", "n1", "r-1", 0, "g-1")], false),
        (vec![], true),
        (vec![waiting("i-1")], true),
    ] {
        let mut h = History::new();
        started_one(&mut h);
        h.begin(resume("i-1", "a1"));
        h.kill();
        let record = if happened {
            succeeded("r-1", Target::One, result.clone())
        } else {
            parked_record("r-1", Target::One)
        };
        h.observe(listed.clone(), &[("r-1", record)]);
        assert_eq!(h.violations(), Vec::<String>::new(), "{listed:?}");
        let c = &h.checker.counts;
        assert_eq!(
            (c.in_flight_happened, c.in_flight_lost),
            if happened { (1, 0) } else { (0, 1) }
        );
    }
}

/// A take of an outcome left waiting gets the result the run was resumed to.
#[test]
fn an_outcome_left_waiting_is_taken_with_its_result() {
    let mut h = History::new();
    started_one(&mut h);
    h.begin(resume("i-1", "a1"));
    h.kill();
    let result = json!({"nonce": "n1", "answers": ["a1"]});
    h.observe(
        vec![waiting("i-1")],
        &[("r-1", succeeded("r-1", Target::One, result.clone()))],
    );
    h.done(
        Call::Take {
            interaction: "i-1".to_owned(),
        },
        Acked::Taken(json!({"nonce": "n1", "answers": ["other"]})),
    );
    let v = h.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("the model expects {\"nonce\":\"n1\",\"answers\":[\"a1\"]}"),
        "{v:?}"
    );
}

#[test]
fn an_id_issued_twice_is_caught() {
    let mut h = History::new();
    started_one(&mut h);
    h.kill();
    h.observe(
        vec![ask("i-1", "n1", "r-1", 0, "g-1")],
        &[("r-1", parked_record("r-1", Target::One))],
    );
    h.done(
        start(Target::One, "n2"),
        parked("r-1", Target::One, vec![ask("i-1", "n2", "r-1", 0, "g-2")]),
    );
    let v = h.violations();
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].contains("run id r-1 was issued to nonce n2 and before to nonce n1"),
        "{v:?}"
    );
    assert!(
        v[1].contains("interaction id i-1 (run r-1) was issued before"),
        "{v:?}"
    );
}

#[test]
fn a_journaled_step_run_again_is_caught() {
    let mut h = History::new();
    let seq = h.begin(start(Target::Stepped, "n1"));
    h.step("n1", "r-1");
    h.ack(
        seq,
        parked(
            "r-1",
            Target::Stepped,
            vec![ask("i-1", "n1", "r-1", 0, "g-1")],
        ),
    );
    h.kill();
    // The reopening replayed the run's step although its journal was acknowledged.
    h.step("n1", "r-1");
    h.observe(
        vec![ask("i-1", "n1", "r-1", 0, "g-1")],
        &[("r-1", parked_record("r-1", Target::Stepped))],
    );
    let v = h.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("ran again in generation 2"), "{v:?}");
}

/// A start in flight whose step ran once before the kill and once in the replay is
/// allowed (the first was not durable); its result names the generation of the second.
#[test]
fn a_step_not_durable_may_run_again_once_per_kill() {
    let mut h = History::new();
    h.begin(start(Target::Stepped, "n1"));
    h.step("n1", "r-1");
    h.kill();
    h.step("n1", "r-1");
    h.observe(
        vec![ask("i-1", "n1", "r-1", 0, "g-1")],
        &[("r-1", parked_record("r-1", Target::Stepped))],
    );
    assert_eq!(h.violations(), Vec::<String>::new());
    h.done(
        resume("i-1", "a"),
        Acked::Resumed(Box::new(record(
            "r-1",
            Target::Stepped,
            RunStatus::Succeeded,
            Some(json!({"nonce": "n1", "answers": ["a"], "prep": 2})),
            None,
        ))),
    );
    assert_eq!(h.violations(), Vec::<String>::new());
    assert_eq!(h.checker.counts.steps_again, 1);
}

/// A start whose step ran (so its start was durable) and whose run is gone after the kill.
#[test]
fn a_durable_start_lost_is_caught() {
    let mut h = History::new();
    h.begin(start(Target::Stepped, "n1"));
    h.step("n1", "r-1");
    h.kill();
    h.observe(vec![], &[]);
    let v = h.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("ran its step (generations [1]), but its run is not in the store"),
        "{v:?}"
    );
}

#[test]
fn a_buffered_answer_dropped_is_caught() {
    let mut h = History::new();
    h.done(
        start(Target::Pair, "n1"),
        parked(
            "r-1",
            Target::Pair,
            vec![
                ask("i-1", "n1", "r-1", 0, "g-1"),
                ask("i-2", "n1", "r-1", 1, "g-1"),
            ],
        ),
    );
    h.done(resume("i-1", "A"), Acked::Buffered { remaining: 1 });
    h.kill();
    let mut buffered = ask("i-1", "n1", "r-1", 0, "g-1");
    buffered.status = EntryStatus::Running;
    h.observe(
        vec![buffered, ask("i-2", "n1", "r-1", 1, "g-1")],
        &[("r-1", parked_record("r-1", Target::Pair))],
    );
    assert_eq!(h.violations(), Vec::<String>::new());
    h.done(
        resume("i-2", "B"),
        Acked::Resumed(Box::new(record(
            "r-1",
            Target::Pair,
            RunStatus::Succeeded,
            Some(json!({"nonce": "n1", "answers": [null, "B"]})),
            None,
        ))),
    );
    let v = h.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("with {\"nonce\":\"n1\",\"answers\":[\"A\",\"B\"]}"),
        "{v:?}"
    );
}

#[test]
fn a_refusal_of_what_the_model_allows_is_caught() {
    let mut h = History::new();
    started_one(&mut h);
    h.done(
        Call::Cancel {
            interaction: "i-1".to_owned(),
        },
        Acked::Refused("unknown interaction i-1".to_owned()),
    );
    let v = h.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].contains("refused (unknown interaction i-1), but the model says it applies"),
        "{v:?}"
    );
}

#[test]
fn a_cancelled_run_must_stay_cancelled() {
    let mut h = History::new();
    started_one(&mut h);
    h.done(
        Call::Cancel {
            interaction: "i-1".to_owned(),
        },
        Acked::Cancelled,
    );
    h.kill();
    h.observe(vec![], &[("r-1", None)]);
    let v = h.violations();
    assert_eq!(
        v,
        vec!["run r-1 has no record; the model holds it cancelled".to_owned()]
    );
}

#[test]
fn the_reader_cuts_a_torn_tail_and_reads_whole_lines() {
    let dir = std::env::temp_dir().join(format!("parkway-crash-reader-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log.jsonl");
    let log = super::log::Log::open(&path).unwrap();
    let line = Line::Step {
        generation: 1,
        nonce: "n1".to_owned(),
        run: "r-1".to_owned(),
    };
    log.write(&line);
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"op\":\"st").unwrap();
    }
    let mut reader = Reader::open(&path).unwrap();
    assert_eq!(reader.next_lines().unwrap(), vec![(0, line.clone())]);
    assert!(reader.cut_torn_tail().unwrap());
    assert!(!reader.cut_torn_tail().unwrap());
    log.write(&line);
    assert_eq!(reader.next_lines().unwrap(), vec![(1, line)]);
    std::fs::remove_dir_all(&dir).unwrap();
}
