//! `State::visit` on its own: a planned visit checked against the parked set and applied
//! in one transition (`docs/doors.md`, "The contract"), or, when it cancels an ask of a
//! linked run, decided and kept until the supervisor's walk comes back
//! (`docs/semantics.md`, "What cancel tears down").

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::{World, caller_ask, show, status};
use crate::door::plan::{Item, Plan};
use crate::door::saved::Saved;
use crate::entry::EntryStatus;
use crate::run::port::Parent;
use crate::subject::Op;
use crate::subject::effect::{Effect, Step};
use crate::subject::state::Planned;
use crate::{DoorSpec, IdProblem};

impl World {
    /// Visit the route door `d` (on `t`) with a plan as its contract would have made it.
    fn visit(&mut self, plan: Plan) -> Vec<Effect> {
        let door = match Saved::compile(DoorSpec::route("d", "t"), &self.targets, 0) {
            Ok(door) => Arc::new(door),
            Err(problems) => panic!("a valid door: {problems:?}"),
        };
        let reply = self.ids.reply();
        let planned = Planned {
            door,
            plan: Ok(plan),
            target: Some(Arc::clone(&self.target)),
            reply: Some(reply),
        };
        let mut step = Step::new(self.now, &self.settings, &self.ids, &self.keys);
        self.state.visit(planned, &mut step);
        step.into_effects()
    }

    /// A parent run executing with a caller ask open (for an hour), and a child of it
    /// (linked) parked on one (for ten minutes): the runs, the parent's ask and the
    /// child's.
    fn chain(&mut self) -> (Arc<str>, Arc<str>, String, String) {
        let (parent, _, _) = self.start(Parent::Top);
        let (up, _) = self.ask(&parent, 1, crate::Ask::caller("q?").expiry_at("1h"));
        let (child, _, _) = self.start(Parent::Run {
            run: Arc::clone(&parent),
            lineage: Arc::from(vec!["t".to_owned()]),
        });
        let (down, _) = self.ask(&child, 1, caller_ask());
        self.park(&child, 1, &[&down]);
        (parent, child, up, down)
    }
}

fn plan(cancels: &[&str], resolve: Option<Vec<Item>>) -> Plan {
    Plan {
        cancels: cancels.iter().map(|s| (*s).to_owned()).collect(),
        resolve,
        start: None,
        extras: None,
    }
}

fn resume(id: &str, payload: Value) -> Item {
    Item::Resume {
        id: id.to_owned(),
        payload,
    }
}

#[test]
fn a_visit_resumes_what_its_plan_names_and_replies_with_what_it_applied() {
    let mut w = World::new();
    let (_, id) = w.parked();
    let effects = w.visit(plan(&[], Some(vec![resume(&id, json!("yes"))])));
    assert_eq!(
        show(&effects),
        [
            "disarm",
            "event ask_resolved i-1 resumed",
            "activate r-1#2",
            "reply visit cancelled [] resolved 1 started false"
        ]
    );
    assert_eq!(status(&w, &id), Some(EntryStatus::Running));
}

#[test]
fn a_plan_is_checked_whole_and_any_problem_refuses_it_changing_nothing() {
    let mut w = World::new();
    let (_, id) = w.parked();
    // An unknown cancel, the same id twice, and an id both cancelled and resumed: every
    // problem is named, and nothing is applied.
    let effects = w.visit(plan(
        &["i-9", &id],
        Some(vec![resume(&id, json!(1)), resume(&id, json!(2))]),
    ));
    assert_eq!(
        show(&effects),
        [
            "reply visit refused: cancel_expr: unknown interaction i-9 on subject s; \
             interaction i-1 is named by both cancel_expr and resume_expr; \
             resume_expr: interaction i-1 is named more than once; \
             interaction i-1 is named by both cancel_expr and resume_expr"
        ]
    );
    assert_eq!(status(&w, &id), Some(EntryStatus::Asking));
}

#[test]
fn a_payload_with_the_expiry_marker_is_refused() {
    let mut w = World::new();
    let (_, id) = w.parked();
    let effects = w.visit(plan(
        &[],
        Some(vec![resume(&id, json!({crate::EXPIRY_MARKER_KEY: true}))]),
    ));
    let shown = show(&effects);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].contains("reserved key"), "{shown:?}");
    assert_eq!(status(&w, &id), Some(EntryStatus::Asking));
}

#[test]
fn a_visit_cancels_first_then_resolves() {
    let mut w = World::new();
    let (_, a) = w.parked();
    let (_, b) = w.parked();
    let effects = w.visit(plan(&[&a], Some(vec![resume(&b, json!(1))])));
    let shown = show(&effects);
    let cancelled = shown
        .iter()
        .position(|l| l == "event ask_resolved i-1 cancelled");
    let resumed = shown
        .iter()
        .position(|l| l == "event ask_resolved i-2 resumed");
    assert!(
        matches!((cancelled, resumed), (Some(c), Some(r)) if c < r),
        "{shown:?}"
    );
    assert_eq!(
        shown.last().map(String::as_str),
        Some("reply visit cancelled [\"i-1\"] resolved 1 started false")
    );
}

#[test]
fn a_visit_that_resolves_nothing_starts_the_target_with_declared_extras_only() {
    let mut w = World::new();
    let mut start = plan(&[], None);
    start.start = Some(json!({"n": 1}));
    start.extras = Some(json!({"tag": "x"}));
    let effects = w.visit(start);
    assert_eq!(
        show(&effects),
        [
            "event run_started r-1",
            "live r-1",
            "activate r-1#1",
            "reply visit cancelled [] resolved 0 started true"
        ]
    );
    let mut undeclared = plan(&[], None);
    undeclared.start = Some(json!({}));
    undeclared.extras = Some(json!({"nope": 1}));
    let effects = w.visit(undeclared);
    assert_eq!(
        show(&effects),
        ["reply visit refused: extras_expr: target t does not declare extras key(s) nope"]
    );
}

#[test]
fn a_visit_that_cancels_a_linked_run_waits_for_the_walk_and_claims_what_it_names() {
    let mut w = World::new();
    let (parent, child, up, down) = w.chain();
    let effects = w.visit(plan(&[&down], None));
    assert_eq!(show(&effects), ["walk 0 r-2"]);
    assert_eq!(status(&w, &down), Some(EntryStatus::Asking));
    // Meanwhile the claimed id is refused to anyone else; the rest is served.
    let effects = w.resume(&down, json!(1));
    let [Effect::Reply(_, crate::subject::reply::Answer::Resume(Err(problem)))] =
        effects.as_slice()
    else {
        panic!("a refusal: {:?}", show(&effects));
    };
    assert!(
        matches!(problem, IdProblem::BeingResolved { .. }),
        "{problem}"
    );
    assert_eq!(
        problem.to_string(),
        "interaction i-2 on subject s is being resolved by an earlier teardown"
    );
    // The walk comes back: the whole chain is torn down, and the visitor is answered.
    let effects = w.walked(0, &[&[&child, &parent]]);
    let shown = show(&effects);
    for line in [
        format!("event ask_resolved {down} cancelled"),
        format!("event ask_resolved {up} cancelled"),
        "abort r-1".to_owned(),
        "reply visit cancelled [\"i-2\"] resolved 0 started false".to_owned(),
    ] {
        assert!(shown.contains(&line), "{line} in {shown:?}");
    }
    assert!(w.state.list().is_empty());
    assert!(!w.state.walking());
}

#[test]
fn a_resolution_the_walked_chain_tears_down_refuses_the_visit_and_frees_its_claims() {
    let mut w = World::new();
    let (parent, child, up, down) = w.chain();
    // The parent's ask is in the chain the cancel tears down: only the walk tells.
    let effects = w.visit(plan(&[&down], Some(vec![resume(&up, json!(1))])));
    assert_eq!(show(&effects), ["walk 0 r-2"]);
    let effects = w.walked(0, &[&[&child, &parent]]);
    assert_eq!(
        show(&effects),
        [
            "reply visit refused: resume_expr: interaction i-1 would be torn down by the cancel of i-2"
        ]
    );
    assert_eq!(status(&w, &up), Some(EntryStatus::Asking));
    assert_eq!(status(&w, &down), Some(EntryStatus::Asking));
    // Nothing is claimed any more.
    let effects = w.resume(&up, json!(1));
    assert!(
        show(&effects).contains(&"reply resume Started".to_owned()),
        "{:?}",
        show(&effects)
    );
}

#[test]
fn a_deadline_that_passes_while_its_entry_is_claimed_is_handled_when_the_claim_ends() {
    let mut w = World::new();
    let (parent, child, up, down) = w.chain();
    w.visit(plan(&[&down], Some(vec![resume(&up, json!(1))])));
    // The child's deadline fires while the visit claims its ask: nothing happens yet.
    w.advance(Duration::from_secs(600));
    let key = w.timer(&down);
    let effects = w.op(Op::Expire {
        interaction: Arc::from(down.as_str()),
        key,
    });
    assert_eq!(show(&effects), Vec::<String>::new());
    // The visit is refused at its walk; the ask, still there and past its deadline,
    // expires then: a killing expiry of a linked run, which asks for its own walk.
    let effects = w.walked(0, &[&[&child, &parent]]);
    let shown = show(&effects);
    assert_eq!(
        shown.last().map(String::as_str),
        Some("walk 1 r-2"),
        "{shown:?}"
    );
    let effects = w.walked(1, &[&[&child, &parent]]);
    assert!(
        show(&effects).contains(&format!("event ask_resolved {down} expired")),
        "{:?}",
        show(&effects)
    );
}

#[test]
fn a_cancel_of_an_id_a_teardown_claims_is_refused_and_a_stale_walk_changes_nothing() {
    let mut w = World::new();
    let (_, _, _, down) = w.chain();
    assert_eq!(show(&w.cancel(&[&down])), ["walk 0 r-2"]);
    let shown = show(&w.cancel(&[&down]));
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(shown[0].starts_with("reply cancel false"), "{shown:?}");
    // An answer for no waiting teardown is ignored.
    assert_eq!(show(&w.walked(7, &[])), Vec::<String>::new());
    assert_eq!(status(&w, &down), Some(EntryStatus::Asking));
}
