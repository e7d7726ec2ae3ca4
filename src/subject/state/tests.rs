//! The transitions on their own: a state, one operation, and the effects it returned,
//! with no runtime, no actor and no task. One test per rule of `docs/semantics.md`;
//! each reads the effects as short lines, in order.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{After, State, Touch};
use crate::ask::{Ask, OnExpiry};
use crate::entry::EntryStatus;
use crate::error::{IdProblem, RunError, Suspension};
use crate::ids::Ids;
use crate::ids::ReplyId;
use crate::run::journal::JournalEntry;
use crate::run::port::{Ending, Parent, Replay};
use crate::settings::Settings;
use crate::subject::Op;
use crate::subject::effect::{Effect, Step};
use crate::subject::packed::Packed;
use crate::subject::reply::Answer;
use crate::supervisor::{Timer, TimerKey, TimerKeys};
use crate::target::{Target, Targets};

mod fires;
mod recovery;
mod rules;
mod visits;

/// One subject and what its transitions read.
struct World {
    state: State,
    /// The targets: `t`, which takes the extra `tag`.
    targets: Targets,
    settings: Settings,
    ids: Ids,
    keys: TimerKeys,
    now: DateTime<Utc>,
    target: Arc<Target>,
    /// Each ask's deadline timer, by interaction.
    timers: Vec<(String, TimerKey)>,
}

impl World {
    fn new() -> Self {
        let targets = Targets::default();
        targets.register("t", &["tag"], |_, _, _| async { Ok(Value::Null) });
        let Some(target) = targets.get("t") else {
            panic!("the target was just registered");
        };
        Self {
            state: State::new(Arc::from("s")),
            targets,
            settings: Settings::default(),
            ids: Ids::sequential(),
            keys: TimerKeys::default(),
            now: DateTime::from_timestamp(1_000_000, 0).unwrap_or_default(),
            target,
            timers: Vec::new(),
        }
    }

    /// Handle `op`; its effects.
    fn op(&mut self, op: Op) -> Vec<Effect> {
        self.op_kept(op).0
    }

    /// Handle `op`; its effects, and the channels the state holds past it.
    fn op_kept(&mut self, op: Op) -> (Vec<Effect>, Vec<ReplyId>) {
        let mut step = Step::new(self.now, &self.settings, &self.ids, &self.keys);
        self.state.handle(op, &mut step);
        let kept = std::mem::take(&mut step.kept);
        let effects = step.into_effects();
        for effect in &effects {
            if let Effect::Arm(key, Timer::Expiry { interaction, .. }) = effect {
                self.timers.push((interaction.to_string(), *key));
            }
        }
        (effects, kept)
    }

    /// The supervisor's walk for the teardown `token` comes back with `chains`.
    fn walked(&mut self, token: u64, chains: &[&[&Arc<str>]]) -> Vec<Effect> {
        let chains = chains
            .iter()
            .map(|chain| chain.iter().map(|run| Arc::clone(run)).collect())
            .collect();
        self.op(Op::Walked { token, chains })
    }

    /// Start a run of `t`, under `parent`; its id and its receiver's.
    fn start(&mut self, parent: Parent) -> (Arc<str>, ReplyId, Vec<Effect>) {
        let receiver = self.ids.reply();
        let reply = self.ids.reply();
        let effects = self.op(Op::Start {
            target: Arc::clone(&self.target),
            kwargs: json!({}),
            extras: json!({}),
            identity: Arc::from("me"),
            parent,
            receiver: Some(receiver),
            key: None,
            reply,
        });
        let run = effects
            .iter()
            .find_map(|e| match e {
                Effect::Activate(launch) => Some(Arc::clone(&launch.run)),
                _ => None,
            })
            .unwrap_or_else(|| Arc::from("none"));
        (run, receiver, effects)
    }

    /// Park `ask` for activation `epoch` of `run`; its interaction id.
    fn ask(&mut self, run: &Arc<str>, epoch: u64, ask: Ask) -> (String, Vec<Effect>) {
        let checked = match ask.validate(self.now, self.settings.max_question_chars) {
            Ok(checked) => checked,
            Err(problems) => panic!("a valid ask: {problems:?}"),
        };
        let id = self.ids.next(crate::ids::Kind::Interaction);
        let effects = self.op(Op::Ask {
            run: Arc::clone(run),
            epoch,
            lineage: Arc::from(vec!["t".to_owned()]),
            ask,
            checked,
            id: id.clone(),
            waiter: None,
            reply: None,
        });
        (id, effects)
    }

    /// End activation `epoch` of `run` with `result`, its journal being `journal`.
    fn end(
        &mut self,
        run: &Arc<str>,
        epoch: u64,
        result: Result<Value, RunError>,
        journal: Vec<JournalEntry>,
        refused: Option<&str>,
    ) -> Vec<Effect> {
        let cursor = journal.len();
        self.op(Op::Ended(Box::new(Ending {
            run: Arc::clone(run),
            epoch,
            result,
            replay: Replay {
                journal,
                cursor,
                diverged: None,
                refused: refused.map(str::to_owned),
            },
        })))
    }

    /// End activation `epoch` of `run` parked on the asks `ids`, journaled unanswered.
    fn park(&mut self, run: &Arc<str>, epoch: u64, ids: &[&str]) -> Vec<Effect> {
        let journal = ids.iter().map(|id| unanswered(id)).collect();
        let suspended = Err(RunError::Suspended(Suspension {
            interaction: ids.first().map(|s| (*s).to_owned()).unwrap_or_default(),
        }));
        self.end(run, epoch, suspended, journal, None)
    }

    /// A run of `t` parked on one caller ask: its id and the ask's.
    fn parked(&mut self) -> (Arc<str>, String) {
        let (run, _, _) = self.start(Parent::Top);
        let (id, _) = self.ask(&run, 1, caller_ask());
        self.park(&run, 1, &[&id]);
        (run, id)
    }

    /// Resume `id` with `payload`, and a receiver unless `detached`.
    fn resume_with(&mut self, id: &str, payload: Value, detached: bool) -> Vec<Effect> {
        let receiver = self.ids.reply();
        let reply = self.ids.reply();
        self.op(Op::Resume {
            interaction: id.to_owned(),
            payload,
            receiver: (!detached).then_some(receiver),
            resumer: None,
            reply,
        })
    }

    /// Resume `id` with `payload` and a receiver.
    fn resume(&mut self, id: &str, payload: Value) -> Vec<Effect> {
        self.resume_with(id, payload, false)
    }

    /// Resume `id` with `payload` and no receiver.
    fn resume_detached(&mut self, id: &str, payload: Value) -> Vec<Effect> {
        self.resume_with(id, payload, true)
    }

    fn cancel(&mut self, ids: &[&str]) -> Vec<Effect> {
        let reply = self.ids.reply();
        self.op(Op::Cancel {
            ids: ids.iter().map(|s| (*s).to_owned()).collect(),
            canceller: None,
            reply,
        })
    }

    /// The expiry timer armed for `id`.
    fn timer(&self, id: &str) -> TimerKey {
        match self.timers.iter().find(|(i, _)| i == id) {
            Some((_, key)) => *key,
            None => panic!("no timer was armed for {id}"),
        }
    }

    fn advance(&mut self, d: Duration) {
        self.now += chrono::Duration::from_std(d).unwrap_or_default();
    }
}

fn unanswered(id: &str) -> JournalEntry {
    JournalEntry::Ask {
        interaction: id.to_owned(),
        question: Some("q?".to_owned()),
        answer: None,
    }
}

fn caller_ask() -> Ask {
    Ask::caller("q?").expiry_at("10m")
}

/// The effects as short lines: what each does, to what.
fn show(effects: &[Effect]) -> Vec<String> {
    effects.iter().map(line).collect()
}

fn line(effect: &Effect) -> String {
    match effect {
        Effect::Reply(_, answer) => match answer {
            Answer::Start(run) => format!("reply start {run}"),
            Answer::Ask(result) => format!("reply ask {result:?}"),
            Answer::List(entries) => format!("reply list {}", entries.len()),
            Answer::Done => "reply done".to_owned(),
            Answer::Recall(recalled) => format!("reply recall {}", recalled.is_some()),
            Answer::Record(record) => format!("reply record {}", record.is_some()),
            Answer::Resume(Ok(ack)) => format!("reply resume {ack:?}"),
            Answer::Resume(Err(problem)) => format!("reply resume refused: {problem}"),
            Answer::Take(Ok(result)) => format!("reply take {result:?}"),
            Answer::Take(Err(problem)) => format!("reply take refused: {problem}"),
            Answer::Cancel(result) => format!("reply cancel {}", result.is_ok()),
            Answer::Visit(Ok(applied)) => format!(
                "reply visit cancelled {:?} resolved {} started {}",
                applied.cancelled,
                applied.resolved.as_ref().map_or(0, Vec::len),
                applied.started.is_some()
            ),
            Answer::Visit(Err(problems)) => format!(
                "reply visit refused: {}",
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        },
        Effect::Deliver(_, record, waiting) => format!(
            "deliver {} {:?}{}",
            record.run_id,
            record.status,
            if waiting.is_some() { " (or wait)" } else { "" }
        ),
        Effect::Answer(_, answer) => format!("answer {answer}"),
        Effect::Event(event) => {
            let v = serde_json::to_value(event).unwrap_or_default();
            let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
            let mut s = format!("event {}", text("event").unwrap_or_default());
            for key in ["interaction", "run", "how", "reason"] {
                if let Some(t) = text(key).filter(|_| key != "run" || text("interaction").is_none())
                {
                    s.push(' ');
                    s.push_str(&t);
                }
            }
            s
        }
        Effect::Offer(item) => format!("offer {}", item.id),
        Effect::Arm(_, timer) => format!(
            "arm {}",
            match timer {
                Timer::Expiry { interaction, .. } => format!("expiry {interaction}"),
                Timer::Retention { interaction, .. } => format!("retention {interaction}"),
                Timer::Record { run, .. } => format!("record {run}"),
                Timer::Idle { .. } => "idle".to_owned(),
                Timer::Forget { key } => format!("forget {key}"),
                Timer::Wake { subject } => format!("wake {subject}"),
                Timer::Schedule { door, .. } => format!("schedule {door}"),
            }
        ),
        Effect::Disarm(_) => "disarm".to_owned(),
        Effect::Release(to) => format!("release {to:?}"),
        Effect::CountWaiting => "count waiting".to_owned(),
        Effect::Occupy(to) => format!("occupy {to:?}"),
        Effect::Alive => "alive".to_owned(),
        Effect::Record(record) => format!("record {} {:?}", record.run_id, record.status),
        Effect::Live(run) => format!("live {run}"),
        Effect::Activate(launch) => format!("activate {}#{}", launch.run, launch.epoch),
        Effect::Gone(run) => format!("gone {run}"),
        Effect::Abort(run) => format!("abort {run}"),
        Effect::Link { run, parent } => format!(
            "link {run} under {}",
            parent.as_deref().unwrap_or("nothing")
        ),
        Effect::Unlink(run) => format!("unlink {run}"),
        Effect::Drop(_) => "drop".to_owned(),
        Effect::Walk { token, runs, .. } => format!("walk {token} {}", runs.join(",")),
        Effect::Delivered(id) => format!("delivered {id}"),
        Effect::Keep(name, _) => format!("keep {name}"),
    }
}

/// The answers the activation a transition started will replay with.
fn answers(effects: &[Effect]) -> Vec<Option<Value>> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Activate(launch) => Some(launch),
            _ => None,
        })
        .flat_map(|launch| {
            launch.journal.iter().filter_map(|entry| match entry {
                JournalEntry::Ask { answer, .. } => Some(answer.clone()),
                _ => None,
            })
        })
        .collect()
}

fn status(world: &World, id: &str) -> Option<EntryStatus> {
    world
        .state
        .list()
        .into_iter()
        .find(|e| e.id == id)
        .map(|e| e.status)
}

#[test]
fn a_start_activates_the_run_and_keeps_its_record() {
    let mut w = World::new();
    let (run, _, effects) = w.start(Parent::Top);
    assert_eq!(
        show(&effects),
        [
            "event run_started r-1",
            "live r-1",
            "activate r-1#1",
            "reply start r-1"
        ]
    );
    assert_eq!(&*run, "r-1");
}

#[test]
fn an_ask_parks_an_entry_and_arms_its_deadline() {
    // Table: a caller ask and a user ask; only the user ask is offered to the inbox.
    let cases: [(Ask, &[&str]); 2] = [
        (caller_ask(), &["arm expiry i-1", "event ask_parked i-1"]),
        (
            Ask::user("name?").expiry_at("10m"),
            &["arm expiry i-1", "offer i-1", "event ask_parked i-1"],
        ),
    ];
    for (ask, expected) in cases {
        let mut w = World::new();
        let (run, _, _) = w.start(Parent::Top);
        let (id, effects) = w.ask(&run, 1, ask);
        assert_eq!(show(&effects), expected);
        assert_eq!(status(&w, &id), Some(EntryStatus::Asking));
    }
}

#[test]
fn an_ask_of_a_stale_activation_is_refused_and_gives_its_unit_back() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (_, effects) = w.ask(&run, 7, caller_ask());
    assert_eq!(show(&effects), ["release Caller"]);
    assert!(w.state.list().is_empty());
}

#[test]
fn an_activation_that_asked_parks_and_its_receiver_gets_the_parked_record() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (id, _) = w.ask(&run, 1, caller_ask());
    let effects = w.park(&run, 1, &[&id]);
    assert_eq!(show(&effects), ["gone r-1", "deliver r-1 Parked"]);
}

#[test]
fn a_resume_of_the_last_ask_of_a_group_replays_the_run_with_every_answer() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (a, _) = w.ask(&run, 1, caller_ask());
    let (b, _) = w.ask(&run, 1, caller_ask());
    w.park(&run, 1, &[&a, &b]);
    // The first answer is buffered: the entry runs, the run does not resume yet.
    let effects = w.resume(&a, json!("A"));
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "event ask_resolved i-1 resumed",
            "reply resume Buffered { remaining: 1 }"
        ]
    );
    assert_eq!(status(&w, &a), Some(EntryStatus::Running));
    // The last one resumes the run once, with both answers in its journal.
    let effects = w.resume(&b, json!("B"));
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "event ask_resolved i-2 resumed",
            "reply resume Started",
            "activate r-1#2"
        ]
    );
    assert_eq!(answers(&effects), [Some(json!("A")), Some(json!("B"))]);
}

#[test]
fn a_resume_while_the_asking_activation_runs_is_held_until_it_ends() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (id, _) = w.ask(&run, 1, caller_ask());
    let effects = w.resume(&id, json!(1));
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "event ask_resolved i-1 resumed",
            "reply resume Started"
        ]
    );
    let effects = w.park(&run, 1, &[&id]);
    let shown = show(&effects);
    assert_eq!(shown.last().map(String::as_str), Some("activate r-1#2"));
    assert_eq!(answers(&effects), [Some(json!(1))]);
}

#[test]
fn a_second_resolution_is_refused_and_changes_nothing() {
    let mut w = World::new();
    let (run, id) = w.parked();
    w.resume(&id, json!(1));
    // The entry runs: a resume is a second resolution.
    let effects = w.resume(&id, json!(2));
    assert_eq!(
        show(&effects),
        ["reply resume refused: interaction i-1 is not asking (status: running)"]
    );
    // Once the entry is gone, the subject remembers how it was resolved.
    w.end(&run, 2, Ok(json!("done")), vec![], None);
    let effects = w.resume(&id, json!(3));
    let [Effect::Reply(_, Answer::Resume(Err(problem)))] = effects.as_slice() else {
        panic!("a refusal: {:?}", show(&effects));
    };
    assert!(
        matches!(problem, IdProblem::AlreadyResolved { .. }),
        "{problem}"
    );
}

#[test]
fn a_resolved_run_without_a_receiver_leaves_its_outcome_waiting_to_be_taken() {
    let mut w = World::new();
    let (run, id) = w.parked();
    w.resume_detached(&id, json!(1));
    let effects = w.end(&run, 2, Ok(json!("done")), vec![], None);
    assert_eq!(
        show(&effects),
        [
            "gone r-1",
            "release Caller",
            "arm record r-1",
            "record r-1 Succeeded",
            "event run_finished r-1",
            "arm retention i-1",
            "count waiting",
            "event waiting_outcome_stored i-1"
        ]
    );
    assert_eq!(status(&w, &id), Some(EntryStatus::Finished));
    let reply = w.ids.reply();
    let effects = w.op(Op::Take {
        interaction: id.clone(),
        taker: None,
        reply,
    });
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "release Caller",
            "event waiting_outcome_taken i-1",
            "reply take Ok(String(\"done\"))"
        ]
    );
}

#[test]
fn a_receiver_that_stopped_waiting_leaves_the_outcome_waiting() {
    let mut w = World::new();
    let (run, id) = w.parked();
    w.resume(&id, json!(1));
    // The transition hands the outcome to the receiver with the waiting entry to fall
    // back on; the actor leaves it waiting if the receiver is gone by then.
    let effects = w.end(&run, 2, Ok(json!("done")), vec![], None);
    let waiting = effects.into_iter().find_map(|e| match e {
        Effect::Deliver(_, _, Some(waiting)) => Some(waiting),
        _ => None,
    });
    let Some(waiting) = waiting else {
        panic!("a delivery with a waiting entry to fall back on");
    };
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    w.state.leave_waiting(&mut step, waiting);
    assert_eq!(status(&w, &id), Some(EntryStatus::Finished));
}

#[test]
fn a_waiting_outcome_is_dropped_at_the_retention_horizon() {
    let mut w = World::new();
    let (run, id) = w.parked();
    w.resume_detached(&id, json!(1));
    let effects = w.end(&run, 2, Err(RunError::fail("no")), vec![], None);
    let key = effects.iter().find_map(|e| match e {
        Effect::Arm(key, Timer::Retention { .. }) => Some(*key),
        _ => None,
    });
    let Some(key) = key else {
        panic!("a retention timer: {:?}", show(&effects));
    };
    let effects = w.op(Op::Retire {
        interaction: Arc::from(id.as_str()),
        key,
    });
    assert_eq!(
        show(&effects),
        // The timer that fired is gone already: nothing to disarm.
        [
            "release Caller",
            "event waiting_outcome_dropped i-1 retention"
        ]
    );
    assert!(w.state.list().is_empty());
}

#[test]
fn a_cancel_of_a_lone_run_tears_it_down_without_the_supervisor() {
    let mut w = World::new();
    let (_, id) = w.parked();
    let effects = w.cancel(&[&id]);
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "release Caller",
            "event ask_resolved i-1 cancelled",
            "event run_cancelled i-1",
            "arm record r-1",
            "record r-1 Cancelled",
            "reply cancel true"
        ]
    );
}

#[test]
fn a_cancel_in_a_chain_asks_for_the_chain_and_then_tears_it_all_down() {
    let mut w = World::new();
    let (parent, _, _) = w.start(Parent::Top);
    let (child, _, effects) = w.start(Parent::Run {
        run: Arc::clone(&parent),
        lineage: Arc::from(vec!["t".to_owned()]),
    });
    assert!(show(&effects).contains(&"link r-2 under r-1".to_owned()));
    let (id, _) = w.ask(&child, 1, caller_ask());
    w.park(&child, 1, &[&id]);
    // The child is linked: the cancel asks for its chain, and changes nothing meanwhile
    // but claim the id it names.
    let effects = w.cancel(&[&id]);
    assert_eq!(show(&effects), ["walk 0 r-2"]);
    assert_eq!(status(&w, &id), Some(EntryStatus::Asking));
    assert!(
        w.state.holds_activation(),
        "a waiting teardown is not packed"
    );
    // With the walk, the asker and its caller (still executing) are torn down.
    let effects = w.walked(0, &[&[&child, &parent]]);
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "release Caller",
            "event ask_resolved i-1 cancelled",
            "unlink r-2",
            "event run_cancelled i-1",
            "arm record r-2",
            "record r-2 Cancelled",
            "abort r-1",
            "unlink r-1",
            "event run_cancelled i-1",
            "arm record r-1",
            "record r-1 Cancelled",
            "deliver r-1 Cancelled",
            "reply cancel true"
        ]
    );
}

#[test]
fn a_run_started_under_a_chain_while_its_walk_was_out_is_torn_down_with_it() {
    let mut w = World::new();
    let (parent, _, _) = w.start(Parent::Top);
    let (child, _, _) = w.start(Parent::Run {
        run: Arc::clone(&parent),
        lineage: Arc::from(vec!["t".to_owned()]),
    });
    let (id, _) = w.ask(&child, 1, caller_ask());
    w.park(&child, 1, &[&id]);
    assert_eq!(show(&w.cancel(&[&id])), ["walk 0 r-2"]);
    // The supervisor's chain names the asker and its caller; a second child of the
    // caller started while the walk was out is reached through the subject's own links.
    let (late, _, _) = w.start(Parent::Run {
        run: Arc::clone(&parent),
        lineage: Arc::from(vec!["t".to_owned()]),
    });
    let effects = w.walked(0, &[&[&child, &parent]]);
    assert!(
        show(&effects).contains(&format!("abort {late}")),
        "{:?}",
        show(&effects)
    );
}

#[test]
fn a_chain_never_leaves_its_subject() {
    let mut w = World::new();
    // A caller that lives here links its child; one this subject does not hold (a run
    // of another subject, or one that ended) does not: the child is a chain of its own.
    let (caller, _, _) = w.start(Parent::Top);
    let (_, _, here) = w.start(Parent::Run {
        run: Arc::clone(&caller),
        lineage: Arc::from(vec!["t".to_owned()]),
    });
    assert!(show(&here).contains(&format!("link r-2 under {caller}")));
    let (lone, _, elsewhere) = w.start(Parent::Run {
        run: Arc::from("r-elsewhere"),
        lineage: Arc::from(vec!["t".to_owned()]),
    });
    assert!(
        !show(&elsewhere).iter().any(|l| l.starts_with("link")),
        "{:?}",
        show(&elsewhere)
    );
    // So its park is torn down without a walk.
    let (id, _) = w.ask(&lone, 1, caller_ask());
    w.park(&lone, 1, &[&id]);
    let shown = show(&w.cancel(&[&id]));
    assert_eq!(
        shown.last().map(String::as_str),
        Some("reply cancel true"),
        "{shown:?}"
    );
    assert!(!shown.iter().any(|l| l.starts_with("walk")), "{shown:?}");
}

#[test]
fn an_expiry_that_kills_tears_the_chain_down_as_expired() {
    let mut w = World::new();
    let (_, id) = w.parked();
    w.advance(Duration::from_secs(600));
    let key = w.timer(&id);
    let effects = w.op(Op::Expire {
        interaction: Arc::from(id.as_str()),
        key,
    });
    assert_eq!(
        show(&effects),
        [
            "event expiry_fired i-1",
            "release Caller",
            "event ask_resolved i-1 expired",
            "event run_cancelled i-1",
            "arm record r-1",
            "record r-1 Cancelled"
        ]
    );
}

#[test]
fn an_expiry_that_resumes_replays_the_run_with_the_marker() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (id, _) = w.ask(&run, 1, caller_ask().on_expiry(OnExpiry::Resume));
    w.park(&run, 1, &[&id]);
    let key = w.timer(&id);
    let effects = w.op(Op::Expire {
        interaction: Arc::from(id.as_str()),
        key,
    });
    assert_eq!(
        show(&effects),
        [
            "event expiry_fired i-1",
            "event ask_resolved i-1 expired",
            "activate r-1#2"
        ]
    );
    assert_eq!(answers(&effects), [Some(crate::ask::expiry_marker())]);
    // A stale timer (the ask resolved meanwhile) does nothing.
    let effects = w.op(Op::Expire {
        interaction: Arc::from(id.as_str()),
        key,
    });
    assert_eq!(show(&effects), Vec::<String>::new());
}

#[test]
fn a_refused_ask_withdraws_the_group_and_fails_a_run_that_parks_anyway() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let (id, _) = w.ask(&run, 1, caller_ask());
    let refusal = "INTERACTIONS_MAX_CONCURRENT_CALLER reached: limit is 1, ask refused";
    let suspended = Err(RunError::Suspended(Suspension {
        interaction: id.clone(),
    }));
    let effects = w.end(&run, 1, suspended, vec![unanswered(&id)], Some(refusal));
    assert_eq!(
        show(&effects),
        [
            "gone r-1",
            "disarm",
            "release Caller",
            "event ask_resolved i-1 cancelled",
            "arm record r-1",
            "record r-1 Failed",
            "event run_failed r-1",
            "deliver r-1 Failed"
        ]
    );
    assert!(w.state.list().is_empty());
}

#[test]
fn an_evicted_idle_subject_passivates_at_once_and_a_busy_one_stays() {
    let mut w = World::new();
    w.settings.passivate_after = Duration::from_secs(30);
    w.parked();
    // Just active, well inside the idle time: it arms its check and stays.
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    assert_eq!(w.state.after(&mut step, Touch::Active), After::Stay);
    assert_eq!(show(&step.into_effects()), ["arm idle"]);
    // Evicted a second later, still idle: it passivates, its check disarmed.
    w.advance(Duration::from_secs(1));
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    assert_eq!(w.state.after(&mut step, Touch::Crowded), After::Passivate);
    assert_eq!(show(&step.into_effects()), ["disarm"]);
    // An activation executing keeps it live, evicted or not.
    w.state.live = 1;
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    assert_eq!(w.state.after(&mut step, Touch::Crowded), After::Stay);
    // Activity in the same turn outweighs the eviction.
    assert_eq!(Touch::Crowded.then(Touch::Active), Touch::Active);
    assert_eq!(Touch::Timer.then(Touch::Crowded), Touch::Crowded);
}

#[test]
fn an_idle_subject_passivates_and_wakes_with_its_parked_set() {
    let mut w = World::new();
    w.settings.passivate_after = Duration::from_secs(30);
    let (_, id) = w.parked();
    // Not idle long enough: an idle check is armed.
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    assert_eq!(w.state.after(&mut step, Touch::Active), After::Stay);
    assert_eq!(show(&step.into_effects()), ["arm idle"]);
    // Its check fires past the idle time: passivate, disarming nothing left behind.
    w.advance(Duration::from_secs(31));
    let key = w.state.idle_timer.expect("an idle check is armed");
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    assert_eq!(w.state.after(&mut step, Touch::Idle(key)), After::Passivate);
    assert!(!w.state.holds_activation());
    // Packed and woken: the same parked set, answerable as before.
    let state = std::mem::replace(&mut w.state, State::new(Arc::from("s")));
    let packed = match Packed::pack(Box::new(state)) {
        Ok(packed) => packed,
        Err(_) => panic!("a passive state packs"),
    };
    w.state = match packed.unpack(Arc::from("s")) {
        Ok(state) => *state,
        Err(e) => panic!("it unpacks: {e}"),
    };
    assert_eq!(status(&w, &id), Some(EntryStatus::Asking));
    let effects = w.resume(&id, json!(1));
    assert!(show(&effects).contains(&"activate r-1#2".to_owned()));
}

#[test]
fn a_sync_ask_is_answered_in_place_and_joins_no_group() {
    let mut w = World::new();
    let (run, _, _) = w.start(Parent::Top);
    let waiter = w.ids.reply();
    let ask = Ask::user("ok?")
        .expiry_at("10m")
        .timeout(Duration::from_secs(60))
        .mode(crate::ask::Mode::Sync);
    let checked = match ask.validate(w.now, 100) {
        Ok(checked) => checked,
        Err(problems) => panic!("{problems:?}"),
    };
    let reply = w.ids.reply();
    let (effects, kept) = w.op_kept(Op::Ask {
        run: Arc::clone(&run),
        epoch: 1,
        lineage: Arc::from(vec!["t".to_owned()]),
        ask,
        checked,
        id: "i-9".to_owned(),
        waiter: Some(waiter),
        reply: Some(reply),
    });
    // The entry holds the waiter's id, the reply goes now.
    assert_eq!(kept, [waiter]);
    assert!(show(&effects).contains(&"reply ask Ok(\"i-9\")".to_owned()));
    let effects = w.resume("i-9", json!("yes"));
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "release User",
            "answer \"yes\"",
            "event ask_resolved i-9 resumed",
            "reply resume Started"
        ]
    );
    // The answer goes to the waiter's channel, which the actor holds.
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Answer(to, answer) if *to == waiter && answer == "yes"))
    );
    assert!(w.state.list().is_empty());
}
