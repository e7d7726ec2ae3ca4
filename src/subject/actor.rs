//! The subject actor: owns one subject's state while the subject is active.
//!
//! One message at a time, in mailbox order. When the state says the subject is idle the
//! actor passivates: it marks its registry slot busy (so new senders wait), drains its
//! mailbox (every message already queued is still handled here), and on stopping hands
//! its state back to the registry as plain data. ractor's `stop()` would drop queued
//! messages; `drain()` does not. Only a shutdown stops an actor: it then aborts the
//! subject's activations, waits for them, and forgets the state.

use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef};

use super::SubjectMsg;
use super::state::{After, SubjectState};
use crate::shared::Shared;

/// The actor type.
pub(crate) struct SubjectActor;

/// What the actor holds.
pub(crate) struct Held {
    shared: Arc<Shared>,
    /// `None` only after the state was handed back on stop.
    state: Option<Box<SubjectState>>,
    /// Set once passivation began; later messages are still handled.
    draining: bool,
}

impl Actor for SubjectActor {
    type Msg = SubjectMsg;
    type State = Held;
    type Arguments = (Arc<Shared>, Box<SubjectState>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (shared, state): Self::Arguments,
    ) -> Result<Held, ActorProcessingErr> {
        Ok(Held {
            shared,
            state: Some(state),
            draining: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: SubjectMsg,
        held: &mut Held,
    ) -> Result<(), ActorProcessingErr> {
        let shared = Arc::clone(&held.shared);
        let Some(state) = held.state.as_mut() else {
            shared.inflight.done();
            return Ok(());
        };
        // Boxed: the largest message's future (a visit awaiting its evaluation) is held
        // only while it runs; inline, it would size every live subject's task for it,
        // idle or not (7.1 KiB against 11.7 per empty live subject, `examples/memory`).
        let idle = Box::pin(handle(&shared, state, msg)).await;
        // A draining actor's state is on its way to be stored: a message queued before
        // the drain marker arms no idle check, which would outlive the state it was for
        // and wake the subject later for nothing.
        let after = if held.draining {
            After::Stay
        } else {
            state.after(&shared, idle)
        };
        if after == After::Passivate {
            held.draining = true;
            state.clear_idle(&shared);
            shared.subjects.begin_passivation(&state.name);
            // Messages queued before the drain marker are still handled by this actor;
            // later ones are refused and go back through the registry.
            let _ = myself.drain();
            // This message counts as in flight until the state is stored in post_stop,
            // so `settle` never sees a subject half-way through passivating.
            return Ok(());
        }
        shared.inflight.done();
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        held: &mut Held,
    ) -> Result<(), ActorProcessingErr> {
        if held.shared.is_closed() {
            // Shutting down: nothing is kept. Activations are aborted and waited for;
            // dropping the state fails every receiver as stopped.
            if let Some(mut state) = held.state.take() {
                let activations = state.stop_activations();
                let name = Arc::clone(&state.name);
                drop(state);
                for activation in activations {
                    activation.stopped().await;
                }
                held.shared.subjects.forget(&name);
            }
        } else if let Some(mut state) = held.state.take() {
            state.forget_conversions();
            let name = Arc::clone(&state.name);
            held.shared.subjects.store(&name, state);
        }
        if held.draining {
            held.shared.inflight.done();
        }
        Ok(())
    }
}

/// Handle one message; returns the idle timer key when the message was an idle check.
async fn handle(
    shared: &Arc<Shared>,
    state: &mut SubjectState,
    msg: SubjectMsg,
) -> Option<crate::supervisor::TimerKey> {
    match msg {
        SubjectMsg::Start {
            target,
            kwargs,
            extras,
            identity,
            parent,
            receiver,
            reply,
        } => {
            let run = state.start(shared, target, kwargs, extras, identity, parent, receiver);
            let _ = reply.send(run);
        }
        SubjectMsg::Ask {
            run,
            epoch,
            lineage,
            ask,
            checked,
            id,
            waiter,
            reply,
        } => {
            let stored = state.ask(shared, run, epoch, lineage, ask, checked, id, waiter);
            // A teardown removes a run before any later message of it is handled, so the
            // asking activation is alive to receive this reply.
            if let Some(reply) = reply {
                let _ = reply.send(stored);
            }
        }
        SubjectMsg::Ended(ending) => {
            let run = state.ended(shared, *ending);
            state.activate_prepared(shared, run);
        }
        SubjectMsg::List { reply } => {
            let _ = reply.send(state.list());
        }
        SubjectMsg::Recall { interaction, reply } => {
            let _ = reply.send(state.recall(shared, &interaction));
        }
        SubjectMsg::Resume {
            interaction,
            payload,
            receiver,
            resumer,
            reply,
        } => match state.resume(shared, &interaction, payload, receiver, resumer) {
            Ok((ack, run)) => {
                let _ = reply.send(Ok(ack));
                state.activate_prepared(shared, run);
            }
            Err(problem) => {
                let _ = reply.send(Err(problem));
            }
        },
        SubjectMsg::Take {
            interaction,
            taker,
            reply,
        } => {
            let _ = reply.send(state.take(shared, &interaction, taker));
        }
        SubjectMsg::Cancel {
            ids,
            canceller,
            reply,
        } => match state.check_cancel(shared, &ids) {
            Err(problems) => {
                let _ = reply.send(Err(problems));
            }
            Ok(()) => {
                state.cancel(shared, ids, canceller).await;
                let _ = reply.send(Ok(()));
            }
        },
        SubjectMsg::Expire { interaction, key } => state.expire(shared, &interaction, key).await,
        SubjectMsg::Retire { interaction, key } => state.retire(shared, &interaction, key),
        SubjectMsg::Visit { door, input, reply } => {
            let _ = reply.send(state.visit(shared, &door, input).await);
        }
        SubjectMsg::Scheduled { door, input } => {
            crate::door::registry::scheduled_visit(shared, state, &door, input).await;
        }
        SubjectMsg::Idle { key } => return Some(key),
    }
    None
}
