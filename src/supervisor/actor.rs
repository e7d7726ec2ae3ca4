//! The supervisor actor: the run tree and the timers.
//!
//! It handles one message at a time and never awaits anything in its handlers. A subject
//! that tears a chain down asks it for the chain with [`Msg::Chains`] and goes on with
//! its other messages; the answer goes back through the callback the subject gave, which
//! puts it in the subject's mailbox. Fired timers are handed to the
//! [ticker](super::ticker), which delivers them.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

use super::arming::Armed;
use super::timers::{Fired, Timers};
use super::tree::Tree;

/// What the supervisor is asked to do.
#[derive(Debug)]
pub(crate) enum Msg {
    /// A run was started under `parent`.
    Link {
        /// The new run.
        run: Arc<str>,
        /// Its caller, for a child run.
        parent: Option<Arc<str>>,
    },
    /// `run` ended for good.
    Ended { run: Arc<str> },
    /// The chains a teardown of the parks of `runs` reaches, each stopping below
    /// `canceller`, answered in the order asked. The subject tears them down and
    /// unlinks them with [`Msg::Ended`].
    Chains {
        /// The runs whose parks are cancelled.
        runs: Vec<Arc<str>>,
        /// The cancelling run, below which each chain stops.
        canceller: Option<Arc<str>>,
        /// Where the chains go, asker first in each.
        reply: Answer,
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

/// Takes the supervisor's answer to a [`Msg::Chains`] back to the subject that asked.
pub(crate) struct Answer(Box<dyn FnOnce(Chained) + Send>);

/// Chains, in the order asked, each asker first.
pub(crate) type Chained = Vec<Vec<Arc<str>>>;

impl Answer {
    /// An answer that calls `f` with the chains.
    pub(crate) fn new(f: impl FnOnce(Chained) + Send + 'static) -> Self {
        Self(Box::new(f))
    }

    /// Send the chains.
    pub(crate) fn send(self, chains: Chained) {
        (self.0)(chains);
    }
}

impl std::fmt::Debug for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Answer")
    }
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
    type Msg = Msg;
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
        msg: Msg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Msg::Link { run, parent } => state.tree.link(run, parent),
            Msg::Ended { run } => state.tree.remove(&run),
            Msg::Chains {
                runs,
                canceller,
                reply,
            } => {
                let chains = runs
                    .iter()
                    .map(|run| state.tree.chain(run, canceller.as_deref()))
                    .collect();
                reply.send(chains);
            }
            Msg::FireDue { now, reply } => {
                state.armed.drain(&mut state.timers);
                let fired = state.timers.fire_due(now);
                let next = state.timers.next();
                state.armed.publish(next);
                let _ = reply.send((fired, next));
            }
            Msg::Stats { reply } => {
                state.armed.drain(&mut state.timers);
                state.armed.publish(state.timers.next());
                let _ = reply.send((state.tree.len(), state.timers.len()));
            }
        }
        Ok(())
    }
}
