//! The subject actor: owns one subject's state while the subject is active.
//!
//! One message at a time, in mailbox order. For each it runs the state's transition
//! ([`State::handle`], or for a visit, the door's contract evaluation and then
//! [`State::visit`]) and applies the effects it returned, in order. A teardown that
//! needs the supervisor's walk asks for it with an effect, and the answer comes back as
//! an ordinary message (ARCHITECTURE.md, "The subject's protocol"). No handler awaits
//! another actor.
//!
//! When the state says the subject is idle the actor passivates: it marks its registry
//! slot busy (so new senders wait), drains its mailbox (every message already queued is
//! still handled here), and on stopping hands its state back to the registry as plain
//! data. ractor's `stop()` would drop queued messages; `drain()` does not. Only a
//! shutdown stops an actor: it then aborts the subject's activations, waits for them,
//! and forgets the state.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use ractor::{ActorProcessingErr, ActorRef, MessagingErr};
use tokio::sync::watch;

use super::durable;
use super::effect::{Effect, Step};
use super::hub::Hub;
use super::registry::Stopped;
use super::reply::Channels;
use super::state::{After, Planned, State, Touch};
use super::turn;
use super::{Msg, Op};
use crate::event::{Event, Resolution};
use crate::ids::ReplyId;
use crate::jq::Limits;
use crate::run::Ctx;
use crate::run::activation::{self, Activation};
use crate::run::port::Port;
use crate::slot::Slot;
use crate::store::{Batch, Receipt, StoreError};
use crate::supervisor;

/// The actor type.
pub(crate) struct Active;

/// Spawn a subject's actor over `state` and the channels its ids name, with its task.
pub(crate) async fn spawn(
    hub: Arc<Hub>,
    state: Box<State>,
    channels: Channels,
) -> Result<(ActorRef<Msg>, tokio::task::JoinHandle<()>), Stopped> {
    ractor::Actor::spawn(None, Active, (hub, state, channels))
        .await
        .map_err(|_| Stopped)
}

/// What the actor holds.
pub(crate) struct Held {
    hub: Arc<Hub>,
    /// `None` only after the state was handed back on stop.
    state: Option<Box<State>>,
    /// Set once passivation began; later messages are still handled.
    draining: bool,
    /// Set once the subject unloaded (its slot was given up): its actor drains what is
    /// queued, dropping each message, and its place is removed when it stops.
    unloaded: Option<Arc<str>>,
    /// The subject's activations and the gates of runs whose start is not yet durable.
    tasks: Tasks,
}

/// What a subject's actor holds of its runs' activations.
struct Tasks {
    /// The subject's slot, whose share of the counts its effects move.
    slot: Slot,
    /// The tasks of the subject's executing activations, by run.
    activations: HashMap<Arc<str>, activation::Handle>,
    /// New runs whose start is not yet durable, by run: their activations run at once,
    /// but a step waits until the gate opens, when the start's change is acknowledged
    /// (`Effect::Live` applied), so no step runs for a run a crash could forget.
    starts: HashMap<Arc<str>, watch::Sender<bool>>,
    /// The changes of this turn, one batch, handed to the store when the turn ends
    /// (`Work::submit_turn`); their effects are the last entry of `unacked`.
    turn: Option<Batch>,
    /// What activations polled in place this turn sent their own subject
    /// (`super::turn`), handled next, in the order sent.
    queued: VecDeque<Msg>,
    /// The channels the state's ids name (`super::reply`).
    channels: Channels,
    /// Set when the subject is to unload: its slot was given up. Its messages are then
    /// refused, but for the answers to what it started.
    unload: bool,
    /// Set with `unload` when the slot is handed over: its own activations' messages
    /// are taken too, and it unloads once none is running (or when told again).
    drain: bool,
}

impl ractor::Actor for Active {
    type Msg = Msg;
    type State = Held;
    type Arguments = (Arc<Hub>, Box<State>, Channels);

    async fn pre_start(
        &self,
        _myself: ActorRef<Msg>,
        (hub, mut state, channels): Self::Arguments,
    ) -> Result<Held, ActorProcessingErr> {
        let slot = Slot::of(&state.name);
        // A state made or unpacked (every change of it acknowledged) writes under the
        // slot's epoch as the actor begins.
        if state.slot_epoch.is_none() {
            state.slot_epoch = Some(hub.services.store.as_ref().map_or(0, |s| s.epoch(slot)));
        }
        Ok(Held {
            hub,
            state: Some(state),
            draining: false,
            unloaded: None,
            tasks: Tasks {
                slot,
                activations: HashMap::new(),
                starts: HashMap::new(),
                turn: None,
                queued: VecDeque::new(),
                channels,
                unload: false,
                drain: false,
            },
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Msg>,
        msg: Msg,
        held: &mut Held,
    ) -> Result<(), ActorProcessingErr> {
        let hub = Arc::clone(&held.hub);
        let Some(mut state) = held.state.take() else {
            hub.services.inflight.done();
            return Ok(());
        };
        // Boxed: the largest message's future (a visit awaiting its evaluation) is held
        // only while it runs; inline, it would size every live subject's task for it.
        let mut touch = Touch::Ack;
        let mut handled = 0;
        let began = hub
            .services
            .stages
            .as_ref()
            .map(|_| std::time::Instant::now());
        match msg {
            Msg::Durable(result, epoch) => {
                // The change's unit in flight rode on this message.
                handled += 1;
                Work::new(&hub, &myself, &mut held.tasks).durable(&mut state, result, epoch);
            }
            Msg::Unload => {
                handled += 1;
                held.tasks.unload = true;
                held.tasks.drain = false;
            }
            Msg::Drain => {
                handled += 1;
                if !held.tasks.unload {
                    held.tasks.unload = true;
                    held.tasks.drain = true;
                    // Unloads at the latest then, whatever still runs.
                    drop(myself.send_after(crate::subject::DRAIN_WAIT, || Msg::Unload));
                }
            }
            // Unloading: refused, its channels dropped (their senders are told the slot
            // is not this runtime's); the supervisor's answer to a walk still lands, and
            // while the slot is handed over, its own activations' messages too.
            msg if held.tasks.unload
                && !msg.is_answer()
                && !(held.tasks.drain && msg.is_from_activation()) =>
            {
                handled += 1;
                drop(msg);
            }
            msg => {
                let mut work = Work::new(&hub, &myself, &mut held.tasks);
                touch = Box::pin(work.message(&mut state, msg)).await;
                handled += 1;
            }
        }
        // What activations polled in place sent, as if next in the mailbox.
        while let Some(msg) = held.tasks.queued.pop_front() {
            let mut work = Work::new(&hub, &myself, &mut held.tasks);
            let said = Box::pin(work.message(&mut state, msg)).await;
            handled += 1;
            touch = touch.then(said);
        }
        // The turn's changes go to the store as one batch.
        let submitted = Work::new(&hub, &myself, &mut held.tasks).submit_turn(&state);
        if let (true, Some(stages), Some(began)) = (submitted, &hub.services.stages, began) {
            stages.since(crate::stages::Stage::Turn, began);
        }
        if held.tasks.unload
            && state.unacked.is_empty()
            && !(held.tasks.drain && state.executing_at_stop())
        {
            // Nothing written is pending: the store holds the subject as it stands.
            Work::new(&hub, &myself, &mut held.tasks).unload();
            let name = Arc::clone(&state.name);
            drop(state);
            // One unit stays in flight until post_stop: this message's, unless the actor
            // was passivating already, whose trigger holds it.
            let kept = usize::from(!held.draining);
            for _ in kept..handled {
                hub.services.inflight.done();
            }
            if !held.draining {
                hub.registry.no_longer_live(&name);
            }
            held.draining = true;
            hub.registry.begin_unload(&name);
            held.unloaded = Some(name);
            // Whatever is queued is dropped by this actor (no state is left); the
            // message counts in flight until the place is gone, in post_stop.
            let _ = myself.drain();
            return Ok(());
        }
        // A draining actor's state is on its way to be stored, idle: a message queued
        // before the drain marker arms no idle check, which would outlive the state it
        // was for and wake the subject later for nothing. Otherwise, undecided (a change
        // not yet durable, an operation waiting), what the message said of the subject's
        // activity is noted for the decision made later.
        let after = if held.draining {
            After::Stay
        } else if state.walking() || !state.unacked.is_empty() {
            state.deferred(hub.services.clock.now(), touch);
            After::Stay
        } else {
            let s = &hub.services;
            let mut step = Step::new(s.clock.now(), &s.settings, &s.ids, &s.keys);
            let after = state.after(&mut step, touch);
            Work::new(&hub, &myself, &mut held.tasks).apply(&mut state, step.into_effects());
            // With a bound on live subjects: an idle subject goes to the back of the idle
            // order, and over the bound the one idle longest is told to passivate.
            let bound = s.settings.max_live_subjects;
            if after == After::Stay && bound != usize::MAX && !state.executing() {
                hub.registry.went_idle(&state.name);
                if hub.registry.live() > bound {
                    hub.registry.evict_idlest(&hub, &state.name);
                }
            }
            after
        };
        let name = Arc::clone(&state.name);
        held.state = Some(state);
        for _ in 1..handled {
            hub.services.inflight.done();
        }
        if after == After::Passivate {
            held.draining = true;
            hub.registry.begin_passivation(&name);
            // Messages queued before the drain marker are still handled by this actor;
            // later ones are refused and go back through the registry.
            let _ = myself.drain();
            // This message counts as in flight until the state is stored in post_stop,
            // so `settle` never sees a subject half-way through passivating.
            return Ok(());
        }
        if handled > 0 {
            hub.services.inflight.done();
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Msg>,
        held: &mut Held,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(name) = held.unloaded.take() {
            held.hub.registry.unloaded(&name);
        } else if held.hub.services.is_closed() {
            // Shutting down: nothing is kept. Activations are aborted and waited for;
            // dropping the channels fails every receiver as stopped.
            if let Some(state) = held.state.take() {
                let name = Arc::clone(&state.name);
                drop(state);
                drop(std::mem::take(&mut held.tasks.channels));
                for (_, activation) in held.tasks.activations.drain() {
                    activation.stopped().await;
                }
                held.hub.registry.forget(&name);
            }
        } else if let Some(mut state) = held.state.take() {
            state.forget_conversions();
            let name = Arc::clone(&state.name);
            let channels = std::mem::take(&mut held.tasks.channels);
            held.hub.registry.store(&name, state, channels);
        }
        if held.draining {
            held.hub.services.inflight.done();
        }
        Ok(())
    }
}

/// One handler's work: the transitions of its messages and the application of their
/// effects.
struct Work<'a> {
    hub: &'a Arc<Hub>,
    myself: &'a ActorRef<Msg>,
    tasks: &'a mut Tasks,
    /// While a durable change's effects are applied: the log number of its next event.
    log: Option<u64>,
}

impl<'a> Work<'a> {
    fn new(hub: &'a Arc<Hub>, myself: &'a ActorRef<Msg>, tasks: &'a mut Tasks) -> Self {
        Self {
            hub,
            myself,
            tasks,
            log: None,
        }
    }

    fn step(&self) -> Step<'a> {
        let s = &self.hub.services;
        Step::new(s.clock.now(), &s.settings, &s.ids, &s.keys)
    }

    /// Handle one message from the mailbox (or sent by an activation polled in place):
    /// what it says of the subject's activity.
    async fn message(&mut self, state: &mut State, msg: Msg) -> Touch {
        match msg {
            Msg::Op(op, brought) => {
                let brought = self.tasks.channels.bring(brought);
                let touch = match &op {
                    Op::Idle { key } => Touch::Idle(*key),
                    Op::Expire { .. } | Op::Retire { .. } => Touch::Timer,
                    // The supervisor's answer: the end of earlier work, not new work.
                    Op::Walked { .. } => Touch::Ack,
                    _ => Touch::Active,
                };
                let mut step = self.step();
                state.handle(op, &mut step);
                self.sweep(&brought, &step);
                self.commit(state, step.into_effects());
                touch
            }
            Msg::Visit {
                door,
                input,
                reply,
                brought,
                fire,
            } => {
                if let (Some(boundary), Some(interval)) = (fire, door.interval)
                    && !state.admit_fire(door.name(), boundary, interval)
                {
                    tracing::debug!(door = door.name(), subject = %state.name, %boundary, "a schedule's boundary fired here already is not fired again");
                    return Touch::Active;
                }
                let brought = self.tasks.channels.bring(brought);
                let s = &self.hub.services;
                let limits = Limits {
                    deadline: s.settings.jq_deadline,
                    max_input_bytes: s.settings.max_input_bytes,
                };
                let parked = state.parked_input();
                let plan = door
                    .contract
                    .evaluate(&input, parked, &state.name, s.clock.now(), &limits)
                    .await;
                let target = s.targets.get(&door.spec.target);
                let planned = Planned {
                    door,
                    plan,
                    target,
                    reply,
                };
                let mut step = self.step();
                state.visit(planned, &mut step);
                self.sweep(&brought, &step);
                self.commit(state, step.into_effects());
                Touch::Active
            }
            // Taken in `handle`, never queued; handled the same way if they were.
            Msg::Durable(result, epoch) => {
                self.durable(state, result, epoch);
                Touch::Ack
            }
            Msg::Unload => {
                self.tasks.unload = true;
                self.tasks.drain = false;
                Touch::Ack
            }
            Msg::Drain => {
                self.tasks.unload = true;
                Touch::Ack
            }
            // Told by the registry: it changes nothing but the decision after the turn.
            Msg::Evict => Touch::Crowded,
        }
    }

    /// Drop the channels a message brought that its transition neither kept nor answers
    /// in its effects: whoever waits on one learns at once that no answer comes.
    fn sweep(&mut self, brought: &[ReplyId], step: &Step<'_>) {
        for id in brought {
            let answered = step.effects.iter().any(|effect| match effect {
                Effect::Reply(to, _) | Effect::Deliver(to, _, _) | Effect::Answer(to, _) => {
                    to == id
                }
                _ => false,
            });
            if !answered && !step.holds(*id) {
                self.tasks.channels.drop_channel(*id);
            }
        }
    }

    /// Ask the supervisor to walk chains for the teardown `token`; its answer comes back
    /// as [`Op::Walked`]. The exchange counts as one unit in flight until the answer is
    /// in the mailbox, where it rides on the answer.
    fn ask_walk(
        &self,
        token: u64,
        runs: Vec<Arc<str>>,
        canceller: Option<Arc<str>>,
        subject: Arc<str>,
    ) {
        let hub = Arc::clone(self.hub);
        hub.services.inflight.add();
        let me = self.myself.clone();
        let reply =
            supervisor::Answer::new(move |chains| deliver(&hub, &me, &subject, token, chains));
        let asked = self.hub.supervisor.cast(supervisor::Msg::Chains {
            runs,
            canceller,
            reply,
        });
        if let Err(MessagingErr::SendErr(supervisor::Msg::Chains { reply, .. })) = asked {
            // No supervisor (a stopping runtime): every run is a chain of its own.
            reply.send(Vec::new());
        }
    }

    /// Add a transition's change to the turn's batch (handed to the store when the turn
    /// ends) and hold its effects until it is durable; without a store (a runtime in
    /// memory), apply them now. A transition that changed nothing (only replies) needs
    /// no write, but still waits behind any change not yet durable, so nothing it shows
    /// can be ahead of what is durable.
    fn commit(&mut self, state: &mut State, effects: Vec<Effect>) {
        if self.hub.services.store.is_none() {
            // Nothing is written in memory: what changed is not kept for a write.
            state.discard_unwritten();
            return self.apply(state, effects);
        }
        // Replies and the ask for a walk change nothing kept.
        let writes = state.has_unwritten()
            || effects
                .iter()
                .any(|e| !matches!(e, Effect::Reply(..) | Effect::Walk { .. }));
        if !writes {
            match state.unacked.back_mut() {
                Some(last) => last.extend(effects),
                None => self.apply(state, effects),
            }
            return;
        }
        let batch = durable::change(state, &effects, self.hub.services.clock.now());
        // Activations start now: one shows nothing by starting, and what it does reaches
        // the subject (or another) as messages whose changes queue behind this one in
        // the store's one queue, so none is durable before it and they can share its
        // sync. A step a resumed run takes before the resolution is durable runs again
        // after a crash (at least once). A new run's steps wait behind a gate opened when
        // its start is durable: no step runs for a run a crash could forget.
        for effect in &effects {
            if let Effect::Live(run) = effect {
                self.tasks
                    .starts
                    .insert(Arc::clone(run), watch::Sender::new(false));
            }
        }
        let (start, held): (Vec<Effect>, Vec<Effect>) = effects
            .into_iter()
            .partition(|e| matches!(e, Effect::Activate(_)));
        // Changes of one turn are one batch, their effects one entry released by its
        // acknowledgement, in order (their events are the batch's log entries, in order).
        let joined = match self.tasks.turn.as_mut() {
            Some(turn) => {
                turn.append(batch);
                true
            }
            None => {
                self.tasks.turn = Some(batch);
                false
            }
        };
        match state.unacked.back_mut() {
            Some(last) if joined => last.extend(held),
            _ => state.unacked.push_back(held),
        }
        if !start.is_empty() {
            self.apply(state, start);
        }
    }

    /// Hand the turn's changes to the store, as one batch, if it made any; whether it
    /// did.
    fn submit_turn(&mut self, state: &State) -> bool {
        let (Some(batch), Some(store)) = (self.tasks.turn.take(), &self.hub.services.store) else {
            return false;
        };
        let hub = Arc::clone(self.hub);
        hub.services.inflight.add();
        let (me, subject) = (self.myself.clone(), Arc::clone(&state.name));
        let epoch = batch.epoch().unwrap_or_default();
        // The store calls back from its writer thread, outside the async runtime.
        let runtime = tokio::runtime::Handle::current();
        store.submit(
            batch,
            Box::new(move |result| {
                hand_back(&runtime, &hub, &me, &subject, Msg::Durable(result, epoch));
            }),
        );
        true
    }

    /// The store acknowledged the oldest change not yet durable: release its effects.
    /// A failed write stops the runtime: nothing after it is acknowledged. A change
    /// made under another `epoch` of the slot than the state's was an earlier actor's,
    /// whose slot was given up meanwhile: nothing of this state waits for it.
    fn durable(&mut self, state: &mut State, result: Result<Receipt, StoreError>, epoch: u32) {
        if state.slot_epoch != Some(epoch) {
            return;
        }
        match result {
            Ok(receipt) => {
                if let Some(stages) = &self.hub.services.stages {
                    stages.since(crate::stages::Stage::Delivery, receipt.at);
                }
                if let Some(effects) = state.unacked.pop_front() {
                    // Its events are the log's entries from `receipt.log` on, in order.
                    self.log = Some(receipt.log);
                    self.apply(state, effects);
                    self.log = None;
                }
            }
            Err(StoreError::NotOwner { slot, .. }) => {
                // Another process owns the slot: nothing of this change, or of any after
                // it, is written. The slot is given up, and this subject unloads now;
                // what its senders wait on is dropped, and they are told the slot is not
                // this runtime's.
                state.unacked.clear();
                self.tasks.turn = None;
                self.tasks.unload = true;
                if let Some(slot) = Slot::numbered(slot) {
                    super::slots::give_up(self.hub, slot);
                }
            }
            Err(StoreError::Stale { .. }) => {
                // The slot was refused or taken back since the state was read: this state
                // is an earlier epoch's, and unloads (the slot, if it is owned again, is
                // read back by the next touch).
                state.unacked.clear();
                self.tasks.turn = None;
                self.tasks.unload = true;
            }
            Err(error) => {
                tracing::error!(subject = %state.name, %error, "the store failed: the runtime stops");
                self.hub.services.close();
                // Their senders learn the runtime stopped; nothing of them is shown, and
                // no step runs for a run whose start was not durable.
                state.unacked.clear();
                drop(std::mem::take(&mut self.tasks.channels));
                self.tasks.starts.clear();
                self.tasks.turn = None;
            }
        }
    }

    /// The subject unloads: its activations stop (each gives its unit in flight back),
    /// the gates of starts not durable close, and every channel is dropped. The indexes
    /// the subject fed are withdrawn slot-wide once every subject of the slot is gone
    /// (`super::slots`).
    fn unload(&mut self) {
        let s = &self.hub.services;
        for (_, activation) in self.tasks.activations.drain() {
            activation.abort();
        }
        // Every activation not yet gone gives its unit back: more than the map holds
        // when a run was activated again before the end of its last activation was
        // durable, or when an earlier actor of the subject started it, or when the
        // store refused the change that ended it.
        for _ in 0..self.tasks.channels.take_activations() {
            s.inflight.done();
        }
        self.tasks.starts.clear();
        self.tasks.turn = None;
        for _ in self.tasks.queued.drain(..) {
            s.inflight.done();
        }
        drop(std::mem::take(&mut self.tasks.channels));
    }

    /// Apply `effects` in order.
    fn apply(&mut self, state: &mut State, effects: Vec<Effect>) {
        let hub = self.hub;
        let s = &hub.services;
        for effect in effects {
            match effect {
                Effect::Reply(id, answer) => self.tasks.channels.reply(id, answer),
                Effect::Deliver(receiver, record, waiting) => {
                    let delivered = self.tasks.channels.deliver(receiver, *record);
                    let Some(waiting) = waiting else { continue };
                    if delivered {
                        // Kept as undelivered with the change that ended the run: the
                        // receiver has it now. Nothing waits on this write; a crash
                        // before it is durable leaves the outcome waiting as well.
                        if let Some(store) = &s.store {
                            store.submit(
                                durable::delivered(&state.name, &waiting.id),
                                Box::new(|_| {}),
                            );
                        }
                    } else {
                        let mut step = self.step();
                        let id = waiting.id.clone();
                        state.leave_waiting(&mut step, waiting);
                        step.push(Effect::Delivered(id));
                        self.commit(state, step.into_effects());
                    }
                }
                Effect::Delivered(_) => {}
                Effect::Keep(name, kept) => hub.keep_key(name, kept),
                Effect::Answer(waiter, answer) => self.tasks.channels.answer(waiter, answer),
                Effect::Drop(id) => self.tasks.channels.drop_channel(id),
                Effect::Event(event) => {
                    self.project(&event);
                    match self.log.as_mut() {
                        Some(seq) => {
                            s.events.publish_logged(*seq, event);
                            *seq += 1;
                        }
                        None => s.events.publish(event),
                    }
                }
                Effect::Offer(item) => hub.inbox.add(*item, &s.tools),
                Effect::Arm(key, timer) => s.timers.arm(key, timer),
                Effect::Disarm(key) => s.timers.disarm(key),
                Effect::Release(to) => s.caps.release(self.tasks.slot, to),
                Effect::CountWaiting => s.caps.occupy(self.tasks.slot, crate::entry::To::Caller),
                Effect::Live(run) => {
                    // The run's start is durable: its steps may run.
                    if let Some(gate) = self.tasks.starts.remove(&run) {
                        gate.send_replace(true);
                    }
                    hub.records.live(run, Arc::clone(&state.name));
                }
                Effect::Record(record) => hub.records.ended(Arc::clone(&state.name), *record),
                Effect::Occupy(to) => s.caps.occupy(self.tasks.slot, to),
                Effect::Alive => s.caps.run_began(self.tasks.slot),
                Effect::Activate(launch) => {
                    s.inflight.add();
                    self.tasks.channels.started();
                    let port: Arc<dyn Port> = Arc::clone(hub) as Arc<dyn Port>;
                    let run = Arc::clone(&launch.run);
                    let ctx = Ctx::new(
                        port,
                        launch.run,
                        launch.target,
                        launch.identity,
                        Arc::clone(&state.name),
                        launch.lineage,
                        launch.parent,
                        launch.epoch,
                        launch.journal,
                        self.tasks.starts.get(&run).map(watch::Sender::subscribe),
                    );
                    let activation = Activation {
                        ctx,
                        kwargs: launch.kwargs,
                        extras: launch.extras,
                    };
                    // What it sends this subject while polled in place is handled in
                    // this turn, next (`super::turn`).
                    let (handle, sent) =
                        turn::capturing(&state.name, || activation::spawn(activation));
                    self.tasks.activations.insert(run, handle);
                    self.tasks.queued.extend(sent);
                }
                Effect::Gone(run) => {
                    self.tasks.activations.remove(&run);
                    self.tasks.channels.gone();
                    s.inflight.done();
                }
                Effect::Abort(run) => {
                    if let Some(handle) = self.tasks.activations.remove(&run) {
                        handle.abort();
                    }
                    self.tasks.channels.gone();
                    s.inflight.done();
                }
                Effect::Link { run, parent } => {
                    let _ = hub.supervisor.cast(supervisor::Msg::Link { run, parent });
                }
                Effect::Unlink(run) => {
                    let _ = hub.supervisor.cast(supervisor::Msg::Ended { run });
                }
                Effect::Walk {
                    token,
                    runs,
                    canceller,
                } => self.ask_walk(token, runs, canceller, Arc::clone(&state.name)),
            }
        }
    }

    /// What the subject's events change outside it: the inbox loses a user ask when it
    /// is resolved, and the count of live runs follows starts and ends.
    fn project(&self, event: &Event) {
        let hub = self.hub;
        let (caps, slot) = (&hub.services.caps, self.tasks.slot);
        match event {
            Event::AskResolved {
                interaction, how, ..
            } => {
                let (answered, reason) = match how {
                    Resolution::Resumed => (true, "answered"),
                    Resolution::Expired => (false, "expired"),
                    Resolution::Cancelled => (false, "cancelled"),
                };
                hub.inbox.remove(interaction, answered, reason);
            }
            Event::RunStarted { .. } => caps.run_began(slot),
            Event::RunFinished { .. } | Event::RunFailed { .. } | Event::RunCancelled { .. } => {
                caps.run_ended(slot);
            }
            _ => {}
        }
    }
}

/// Hand the supervisor's walk to the subject that asked (see [`hand_back`]).
fn deliver(
    hub: &Arc<Hub>,
    me: &ActorRef<Msg>,
    subject: &Arc<str>,
    token: u64,
    chains: Vec<Vec<Arc<str>>>,
) {
    hand_back(
        &tokio::runtime::Handle::current(),
        hub,
        me,
        subject,
        Msg::op(Op::Walked { token, chains }),
    );
}

/// Hand `msg`, the answer to something a subject started, back to it: to its actor's
/// mailbox or, if that actor is draining towards passivation, through the registry to
/// the next one (the state that waits is kept as it is meanwhile, not packed). The
/// unit in flight the subject counted for it rides on the message.
fn hand_back(
    runtime: &tokio::runtime::Handle,
    hub: &Arc<Hub>,
    me: &ActorRef<Msg>,
    subject: &Arc<str>,
    msg: Msg,
) {
    match me.cast(msg) {
        Ok(()) => {}
        Err(MessagingErr::SendErr(msg)) => {
            let (hub, subject) = (Arc::clone(hub), Arc::clone(subject));
            let task = runtime.spawn({
                let hub = Arc::clone(&hub);
                async move {
                    let _ = hub.registry.send(&hub, &subject, msg).await;
                    hub.services.inflight.done();
                }
            });
            hub.services.tasks.push(task);
        }
        // Stopped: nothing waits for it any more.
        Err(_) => hub.services.inflight.done(),
    }
}
