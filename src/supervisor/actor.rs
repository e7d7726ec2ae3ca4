//! The supervisor actor: the run tree and the timers.
//!
//! It handles one message at a time, never awaits anything in its handlers and never
//! sends to a subject: subjects may wait on it (a teardown), so it must never wait on
//! them. Fired timers are handed to the [ticker](super::ticker), which delivers them.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::arming::Armed;
use super::timers::{Fired, Timers};
use super::tree::Tree;

/// What the supervisor is asked to do.
#[derive(Debug)]
pub(crate) enum SupervisorMsg {
    /// A run was started under `parent`.
    Link {
        /// The new run.
        run: Arc<str>,
        /// Its caller, for a child run.
        parent: Option<Arc<str>>,
    },
    /// `run` ended for good.
    Ended {
        /// The run.
        run: Arc<str>,
    },
    /// Tear down the chain of a park raised by `run`; reply with the runs torn down.
    TearDown {
        /// The run whose park is cancelled.
        run: Arc<str>,
        /// The cancelling run, below which the chain stops.
        canceller: Option<Arc<str>>,
        /// The runs torn down, asker first.
        reply: oneshot::Sender<Vec<Arc<str>>>,
    },
    /// The runs a teardown of `run`'s park would reach, without tearing anything down.
    Chain {
        /// The run whose park would be cancelled.
        run: Arc<str>,
        /// The runs, asker first.
        reply: oneshot::Sender<Vec<Arc<str>>>,
    },
    /// Pop every timer due at `now`; reply with them and the next deadline.
    FireDue {
        /// The clock's now.
        now: DateTime<Utc>,
        /// The due timers and when the next one fires.
        reply: oneshot::Sender<(Vec<Fired>, Option<DateTime<Utc>>)>,
    },
    /// Report sizes, for tests and benchmarks.
    Stats {
        /// Runs in the tree, timers armed.
        reply: oneshot::Sender<(usize, usize)>,
    },
}

/// The supervisor's state.
pub(crate) struct Supervisor;

/// The tree, the timers, and the queue of changes to them.
pub(crate) struct State {
    tree: Tree,
    timers: Timers,
    /// Timer changes, drained before the timers are read.
    armed: Armed,
}

impl Actor for Supervisor {
    type Msg = SupervisorMsg;
    type State = State;
    type Arguments = Armed;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        armed: Armed,
    ) -> Result<State, ActorProcessingErr> {
        Ok(State {
            tree: Tree::default(),
            timers: Timers::default(),
            armed,
        })
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: SupervisorMsg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SupervisorMsg::Link { run, parent } => state.tree.link(run, parent),
            SupervisorMsg::Ended { run } => state.tree.remove(&run),
            SupervisorMsg::TearDown {
                run,
                canceller,
                reply,
            } => {
                let runs = state.tree.chain(&run, canceller.as_deref());
                state.tree.tear_down(&runs);
                let _ = reply.send(runs);
            }
            SupervisorMsg::Chain { run, reply } => {
                let _ = reply.send(state.tree.chain(&run, None));
            }
            SupervisorMsg::FireDue { now, reply } => {
                state.armed.drain(&mut state.timers);
                let fired = state.timers.fire_due(now);
                let next = state.timers.next();
                state.armed.publish(next);
                let _ = reply.send((fired, next));
            }
            SupervisorMsg::Stats { reply } => {
                state.armed.drain(&mut state.timers);
                state.armed.publish(state.timers.next());
                let _ = reply.send((state.tree.len(), state.timers.len()));
            }
        }
        Ok(())
    }
}
