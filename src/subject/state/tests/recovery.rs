//! `State::recover` and `State::replay` on their own: a state read back after a stop
//! (`docs/durability.md`, "Recovery"), as plain data, with no store and no actor.

use std::sync::Arc;

use serde_json::json;

use super::{World, caller_ask, show, status};
use crate::ask::Ask;
use crate::entry::EntryStatus;
use crate::error::IdProblem;
use crate::event::Settled;
use crate::run::port::Parent;
use crate::subject::effect::{Effect, Step};
use crate::subject::reply::Answer;
use crate::subject::state::State;

impl World {
    /// The state as a stop leaves it: what is kept of it, read back, with nothing of
    /// this process (no executing activation, no receiver, no timer).
    fn stop_and_read_back(&mut self) {
        let kept = match serde_json::to_value(&self.state) {
            Ok(kept) => kept,
            Err(e) => panic!("a state is kept: {e}"),
        };
        let mut state: State = match serde_json::from_value(kept) {
            Ok(state) => state,
            Err(e) => panic!("it reads back: {e}"),
        };
        state.name = Arc::from("s");
        self.state = state;
    }

    /// Recover the state read back; its effects.
    fn recover(&mut self) -> Vec<Effect> {
        let mut step = Step::new(self.now, &self.settings, &self.ids, &self.keys);
        self.state.recover(&mut step);
        step.into_effects()
    }
}

#[test]
fn recovery_withdraws_the_asks_of_a_stopped_activation_and_brings_back_the_rest() {
    let mut w = World::new();
    // r-1 was executing at the stop, with an ask of its activation open; r-2 parked on a
    // user ask; r-3 is a child of r-1, so both are linked.
    let (stopped, _, _) = w.start(Parent::Top);
    let (orphan, _) = w.ask(&stopped, 1, caller_ask());
    let (parked, _, _) = w.start(Parent::Top);
    let (user, _) = w.ask(&parked, 1, Ask::user("name?").expiry_at("10m"));
    w.park(&parked, 1, &[&user]);
    let (child, _, _) = w.start(Parent::Run {
        run: Arc::clone(&stopped),
        lineage: Arc::from(vec!["t".to_owned()]),
    });
    w.stop_and_read_back();
    assert!(w.state.executing_at_stop());
    let effects = w.recover();
    assert_eq!(
        show(&effects),
        [
            // The stopped activation's ask is resolved `cancelled`: its replay asks again.
            "event ask_resolved i-1 cancelled",
            // The user ask counts again, its deadline is armed again, the inbox lists it.
            "occupy User",
            "arm expiry i-2",
            "offer i-2",
            // The chain links again; every live run counts and is found here.
            "link r-1 under nothing",
            "link r-3 under r-1",
            "alive",
            "live r-1",
            "alive",
            "live r-2",
            "alive",
            "live r-3",
        ]
    );
    assert_eq!(status(&w, &orphan), None);
    assert_eq!(status(&w, &user), Some(EntryStatus::Asking));
    // The withdrawn ask is remembered as resolved.
    let effects = w.resume(&orphan, json!(1));
    let [Effect::Reply(_, Answer::Resume(Err(problem)))] = effects.as_slice() else {
        panic!("a refusal: {:?}", show(&effects));
    };
    assert!(
        matches!(
            problem,
            IdProblem::AlreadyResolved {
                how: Settled::Cancelled,
                ..
            }
        ),
        "{problem}"
    );
    // Replay activates the runs that were executing, each as a new activation.
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    w.state.replay(&mut step);
    assert_eq!(
        show(&step.into_effects()),
        [
            format!("activate {stopped}#2"),
            format!("activate {child}#2")
        ]
    );
    // The parked run answers as before.
    let effects = w.resume(&user, json!("Ada"));
    assert!(
        show(&effects).contains(&format!("activate {parked}#2")),
        "{:?}",
        show(&effects)
    );
}

#[test]
fn a_state_with_nothing_executing_recovers_without_replaying() {
    let mut w = World::new();
    let (_, id) = w.parked();
    w.stop_and_read_back();
    assert!(!w.state.executing_at_stop());
    assert_eq!(
        show(&w.recover()),
        ["occupy Caller", "arm expiry i-1", "alive", "live r-1"]
    );
    let mut step = Step::new(w.now, &w.settings, &w.ids, &w.keys);
    w.state.replay(&mut step);
    assert_eq!(show(&step.into_effects()), Vec::<String>::new());
    assert_eq!(status(&w, &id), Some(EntryStatus::Asking));
}
