//! The subject registry: finds a subject's actor, spawning it from its passive state
//! when needed.
//!
//! Each place is `Live` (an actor handles the subject), `Busy` (an actor is being
//! spawned, or is draining towards passivation) or `Passive` (the state as data, packed
//! into text by [`super::packed`], no actor). A sender that finds `Busy` waits for the
//! place to change; a sender whose message is refused by a draining actor (it arrived
//! after the drain marker) gets the message back and tries again, by which time the
//! place is `Busy` or `Passive`. So a message racing a passivation is handled exactly
//! once: by the old actor if it was queued before the drain marker, else by the next.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry as PlaceEntry;
use hashlink::LinkedHashSet;
use ractor::{ActorId, ActorRef, MessagingErr};
use tokio::sync::Notify;

use super::Msg;
use super::packed::Packed;
use super::reply::Channels;
use super::state::State;
use crate::error::StoreFault;
use crate::services::{Services, Tasks};
use crate::slot::Slot;
use tokio::task::JoinHandle;

/// One subject's place.
enum Place {
    /// An actor handles the subject.
    Live(ActorRef<Msg>),
    /// Spawning or passivating: wait.
    Busy,
    /// No actor; the state as data.
    Passive(Passive),
}

/// A passive subject's state.
enum Passive {
    /// Packed: the usual case.
    Packed(Packed),
    /// Held as it was, when it could not be packed, with the channels its ids name.
    Plain(Box<State>, Channels),
}

/// The runtime is stopping: the message could not be delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// How a slot's subjects leave (`super::slots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaving {
    /// Once nothing they wrote is pending (`Msg::Unload`).
    Now,
    /// Once their running activations have parked or ended as well, or the wait ran
    /// out (`Msg::Drain`).
    Drained,
}

/// Why a message was not delivered to its subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Undelivered {
    /// The runtime is stopping.
    Stopped,
    /// The subject's state could not be read back (damage, or a read the store refused);
    /// nothing was made in its place.
    Store(StoreFault),
}

impl From<Stopped> for Undelivered {
    fn from(Stopped: Stopped) -> Undelivered {
        Undelivered::Stopped
    }
}

impl Undelivered {
    /// The operation's own error: `stopped` for a stopping runtime, `store` with the
    /// fault otherwise.
    pub(crate) fn or<E>(self, stopped: E, store: impl FnOnce(StoreFault) -> E) -> E {
        match self {
            Undelivered::Stopped => stopped,
            Undelivered::Store(fault) => store(fault),
        }
    }
}

/// What the registry needs of whoever sends through it: the services, and how to start
/// a subject's actor over a state. The hub is the one spawner; the registry names neither
/// it nor the actor, so neither imports the other through it.
pub(crate) trait Spawner: Send + Sync + 'static {
    /// The leaf services: whether the runtime is closed, the count of work in flight.
    fn services(&self) -> &Services;

    /// Read `subject` back from the store on its first touch, recovered (its timers
    /// armed again, its runs known). `None`
    /// when the store does not hold it (or there is no store); an error when it holds it
    /// and it cannot be read back (the fault already tallied and logged).
    fn load(this: &Arc<Self>, subject: &Arc<str>) -> Result<Option<Box<State>>, Undelivered>;

    /// Spawn the actor of a subject over `state` and the channels its ids name, with its
    /// task.
    fn spawn(
        this: &Arc<Self>,
        state: Box<State>,
        channels: Channels,
    ) -> impl Future<Output = Result<(ActorRef<Msg>, JoinHandle<()>), Stopped>> + Send;
}

/// The fault of a passive subject whose packed state does not unpack: it is kept in
/// memory, not in the store, but it is the subject's state all the same.
fn unpack_fault(subject: &str, e: &dyn std::fmt::Display) -> StoreFault {
    StoreFault::corrupt(
        crate::store::Space::Subjects.name(),
        subject,
        format!("its state kept in memory does not unpack: {e}"),
    )
}

/// Every subject, active or passive.
#[derive(Default)]
pub(crate) struct Registry {
    /// By subject name.
    places: DashMap<Arc<str>, Place>,
    /// Notified whenever a place leaves `Busy`.
    changed: Notify,
    /// How many times a subject passivated.
    passivations: AtomicU64,
    /// How many subjects hold an actor that is not draining towards passivation or
    /// unloading: counted up when one is spawned, down when it begins to drain.
    live: AtomicUsize,
    /// With a bound on live subjects: the live ones that are idle, idle longest first.
    idle: Mutex<LinkedHashSet<Arc<str>>>,
    /// How many messages a draining actor refused and the registry delivered again.
    redelivered: AtomicU64,
    /// Every actor's task, which a shutdown waits for.
    tasks: Tasks,
}

enum Step {
    Cast(ActorRef<Msg>),
    Wait,
    Spawn(Box<State>, Channels),
    Unpack(Packed),
    Load,
}

impl Registry {
    /// Deliver `msg` to `subject`'s actor, spawning it if the subject is passive or new.
    pub(crate) async fn send<S: Spawner>(
        &self,
        hub: &Arc<S>,
        subject: &Arc<str>,
        mut msg: Msg,
    ) -> Result<(), Undelivered> {
        if hub.services().is_closed() {
            return Err(Undelivered::Stopped);
        }
        // Handed on with the message once it is in a mailbox; given back if this future
        // is dropped first or the message cannot be delivered.
        let pending = hub.services().inflight.pending();
        // The usual case, a live actor, needs only a read of its place (the map's shared
        // lock, held while the message is queued; nothing is cloned).
        if let Some(place) = self.places.get(subject)
            && let Place::Live(actor) = place.value()
        {
            match self.cast(actor, msg)? {
                None => {
                    pending.handed_on();
                    return Ok(());
                }
                // Refused after the drain marker: wait for the place below.
                Some(back) => msg = back,
            }
        }
        loop {
            if hub.services().is_closed() {
                return Err(Undelivered::Stopped);
            }
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let step = match self.places.entry(Arc::clone(subject)) {
                PlaceEntry::Occupied(mut place) => match place.get() {
                    Place::Live(actor) => Step::Cast(actor.clone()),
                    Place::Busy => Step::Wait,
                    Place::Passive(_) => match std::mem::replace(place.get_mut(), Place::Busy) {
                        Place::Passive(Passive::Packed(packed)) => Step::Unpack(packed),
                        Place::Passive(Passive::Plain(state, channels)) => {
                            Step::Spawn(state, channels)
                        }
                        _ => Step::Wait,
                    },
                },
                PlaceEntry::Vacant(place) => {
                    place.insert(Place::Busy);
                    Step::Load
                }
            };
            match step {
                Step::Cast(actor) => match self.cast(&actor, msg)? {
                    None => {
                        pending.handed_on();
                        return Ok(());
                    }
                    // Refused after the drain marker: the place turns Busy, then Passive.
                    Some(back) => msg = back,
                },
                Step::Wait => changed.await,
                Step::Spawn(state, channels) => self.spawn(hub, subject, state, channels).await?,
                // Read from the store outside the map's lock, the place `Busy` meanwhile;
                // a subject the store does not hold starts empty.
                Step::Load => match S::load(hub, subject) {
                    Ok(Some(state)) => self.spawn(hub, subject, state, Channels::default()).await?,
                    Ok(None) => {
                        let state = Box::new(State::new(Arc::clone(subject)));
                        self.spawn(hub, subject, state, Channels::default()).await?;
                    }
                    // Nothing is made in its place: the place is left empty, so the
                    // next touch reads it again and fails the same way.
                    Err(why) => {
                        self.places.remove(subject);
                        self.changed.notify_waiters();
                        return Err(why);
                    }
                },
                // Unpacked outside the map's lock, the place `Busy` meanwhile.
                Step::Unpack(packed) => match packed.unpack(Arc::clone(subject)) {
                    Ok(state) => self.spawn(hub, subject, state, Channels::default()).await?,
                    Err(e) => {
                        // Not expected (the text was written from a state); the state is
                        // kept, and every message to the subject fails loudly.
                        let fault = unpack_fault(subject, &e);
                        hub.services().damage.met(&fault);
                        self.places
                            .insert(Arc::clone(subject), Place::Passive(Passive::Packed(packed)));
                        self.changed.notify_waiters();
                        return Err(Undelivered::Store(fault));
                    }
                },
            }
        }
    }

    /// Queue `msg` in `actor`'s mailbox: `None` once queued, the message back when a
    /// draining actor refused it (it arrived after the drain marker).
    fn cast(&self, actor: &ActorRef<Msg>, msg: Msg) -> Result<Option<Msg>, Stopped> {
        match actor.cast(msg) {
            Ok(()) => Ok(None),
            Err(MessagingErr::SendErr(back)) => {
                self.redelivered.fetch_add(1, Ordering::Relaxed);
                Ok(Some(back))
            }
            Err(_) => Err(Stopped),
        }
    }

    /// Read `subject`'s state without waking it, when no actor handles it: a passive
    /// subject is read from a copy of its packed state and stays passive, and a subject
    /// never seen (or forgotten when empty) reads as empty. `None` when an actor handles
    /// it or is on its way, so the read goes to the actor in order with its other
    /// messages, or when the packed state cannot be read back (the message path then
    /// reports it).
    ///
    /// A subject the store holds and cannot read back is the error: it is not read as
    /// empty.
    pub(crate) fn read_idle<S: Spawner, T>(
        &self,
        hub: &Arc<S>,
        subject: &Arc<str>,
        read: impl FnOnce(&State) -> T,
    ) -> Result<Option<T>, Undelivered> {
        hub.services()
            .check_served(subject)
            .map_err(Undelivered::Store)?;
        // One the store holds and no message has touched yet is read back first.
        if hub.services().store.is_some() {
            self.load_passive(hub, subject)?;
        }
        // Copied under the map's lock, unpacked outside it.
        let packed = match self.places.get(subject).as_deref() {
            None => return Ok(Some(read(&State::new(Arc::clone(subject))))),
            Some(Place::Passive(Passive::Plain(state, _))) => return Ok(Some(read(state))),
            Some(Place::Passive(Passive::Packed(packed))) => packed.clone(),
            Some(Place::Live(_) | Place::Busy) => return Ok(None),
        };
        // One that does not unpack is reported by the message path.
        Ok(packed
            .unpack(Arc::clone(subject))
            .ok()
            .map(|state| read(&state)))
    }

    /// Spawn `subject`'s actor over `state`; its place is `Busy` until then.
    async fn spawn<S: Spawner>(
        &self,
        hub: &Arc<S>,
        subject: &Arc<str>,
        state: Box<State>,
        channels: Channels,
    ) -> Result<(), Stopped> {
        let spawned = S::spawn(hub, state, channels).await;
        let result = match spawned {
            Ok((actor, task)) => {
                self.tasks.push(task);
                self.live.fetch_add(1, Ordering::Relaxed);
                self.places
                    .insert(Arc::clone(subject), Place::Live(actor.clone()));
                // Checked after the place is live: a shutdown that began meanwhile either
                // finds the place live and stops the actor, or is seen closed here.
                if hub.services().is_closed() {
                    actor.stop(None);
                    Err(Stopped)
                } else {
                    Ok(())
                }
            }
            Err(Stopped) => {
                self.places.remove(subject);
                Err(Stopped)
            }
        };
        self.changed.notify_waiters();
        result
    }

    /// Read `subject` back from the store, if it holds it and no place does, and keep it
    /// passive (an actor is spawned only when a message comes). Its place is `Busy`
    /// meanwhile, so a message racing this waits for it. An error when it cannot be read
    /// back (tallied and logged; the place stays empty, so the next touch tries again).
    pub(crate) fn load_passive<S: Spawner>(
        &self,
        hub: &Arc<S>,
        subject: &Arc<str>,
    ) -> Result<(), Undelivered> {
        // The usual case, a subject in a place, needs only a read of the map.
        if self.places.contains_key(subject) {
            return Ok(());
        }
        match self.places.entry(Arc::clone(subject)) {
            PlaceEntry::Occupied(_) => return Ok(()),
            PlaceEntry::Vacant(place) => {
                place.insert(Place::Busy);
            }
        }
        let loaded = S::load(hub, subject);
        let result = match loaded {
            Ok(Some(state)) => {
                let passive = match Packed::pack(state) {
                    Ok(packed) => Passive::Packed(packed),
                    Err(state) => Passive::Plain(state, Channels::default()),
                };
                self.places
                    .insert(Arc::clone(subject), Place::Passive(passive));
                Ok(())
            }
            Ok(None) => {
                self.places.remove(subject);
                Ok(())
            }
            Err(why) => {
                self.places.remove(subject);
                Err(why)
            }
        };
        self.changed.notify_waiters();
        result
    }

    /// Whether a place holds `subject`: it is read back, or being read or spawned.
    pub(crate) fn holds(&self, subject: &str) -> bool {
        self.places.contains_key(subject)
    }

    /// After a restart: keep `state`, read back from the store, as `subject`'s passive
    /// state until a message wakes it.
    pub(crate) fn restore(&self, subject: &Arc<str>, state: Box<State>) {
        let passive = Passive::Plain(state, Channels::default());
        self.places
            .insert(Arc::clone(subject), Place::Passive(passive));
    }

    /// The subjects of `slot` that have a place.
    pub(crate) fn subjects_in(&self, slot: Slot) -> Vec<Arc<str>> {
        self.places
            .iter()
            .filter(|place| Slot::of(place.key()) == slot)
            .map(|place| Arc::clone(place.key()))
            .collect()
    }

    /// Unload `subject`, whose slot the runtime gave up (`super::slots`): a passive
    /// state with nothing pending is dropped (it is what the store holds); an actor, or
    /// a passive state that waits on the store or holds channels, is told to unload, and
    /// does so once nothing it wrote is pending (`super::actor`). An actor in `told` was
    /// told already; a busy place is left for the caller's next look.
    async fn unload<S: Spawner>(
        &self,
        hub: &Arc<S>,
        subject: &Arc<str>,
        told: &mut HashMap<Arc<str>, ActorId>,
        leaving: Leaving,
    ) {
        let actor = {
            let PlaceEntry::Occupied(place) = self.places.entry(Arc::clone(subject)) else {
                return;
            };
            match place.get() {
                Place::Busy => return,
                Place::Live(actor) if told.get(subject) == Some(&actor.get_id()) => return,
                Place::Live(actor) => Some(actor.get_id()),
                Place::Passive(Passive::Plain(state, channels))
                    if !state.unacked.is_empty() || !channels.is_empty() =>
                {
                    None
                }
                Place::Passive(_) => {
                    place.remove();
                    self.changed.notify_waiters();
                    return;
                }
            }
        };
        // Spawned from its passive state if need be; refused only by a stopping runtime,
        // which drops every subject anyway. An actor told may still stop without
        // unloading (it was passivating, with a change pending): its place then turns
        // passive, and the next look tells the next actor.
        let msg = match leaving {
            Leaving::Now => Msg::Unload,
            Leaving::Drained => Msg::Drain,
        };
        if self.send(hub, subject, msg).await.is_ok()
            && let Some(actor) = actor
        {
            told.insert(Arc::clone(subject), actor);
        }
    }

    /// Unload every subject of `slot`, which the runtime gave up, and wait until none
    /// has a place ([`Registry::unload`]), looking again whenever a place changes.
    ///
    /// The places are scanned once: no place of a slot away is made after (a message's
    /// read-back is refused, and its `Busy` place removed by the same call).
    pub(crate) async fn unload_slot<S: Spawner>(&self, hub: &Arc<S>, slot: Slot, leaving: Leaving) {
        let mut told = HashMap::new();
        let mut left = self.subjects_in(slot);
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            left.retain(|subject| self.places.contains_key(subject));
            if left.is_empty() || hub.services().is_closed() {
                return;
            }
            for subject in &left {
                self.unload(hub, subject, &mut told, leaving).await;
            }
            left.retain(|subject| self.places.contains_key(subject));
            if !left.is_empty() {
                changed.await;
            }
        }
    }

    /// An actor begins to drain (to passivate or to unload): it no longer counts as live.
    pub(crate) fn no_longer_live(&self, subject: &Arc<str>) {
        self.live.fetch_sub(1, Ordering::Relaxed);
        self.idle_order().remove(subject);
    }

    /// `subject`'s actor is idle after its turn: it goes to the back of the idle order.
    pub(crate) fn went_idle(&self, subject: &Arc<str>) {
        let mut idle = self.idle_order();
        if !idle.to_back(subject) {
            idle.insert(Arc::clone(subject));
        }
    }

    /// More subjects are live than the bound: tell the one idle longest, other than
    /// `except` (the subject asking), to passivate if it still is idle. One that is
    /// busy again, or already draining, lets the message pass; it is back in the order
    /// when it is next idle.
    pub(crate) fn evict_idlest<S: Spawner>(&self, hub: &Arc<S>, except: &Arc<str>) {
        let victim = {
            let mut idle = self.idle_order();
            match idle.pop_front() {
                Some(front) if front == *except => {
                    let next = idle.pop_front();
                    idle.insert(front);
                    next
                }
                front => front,
            }
        };
        let Some(victim) = victim else {
            return;
        };
        if let Some(place) = self.places.get(&victim)
            && let Place::Live(actor) = place.value()
        {
            let pending = hub.services().inflight.pending();
            if actor.cast(Msg::Evict).is_ok() {
                pending.handed_on();
            }
        }
    }

    fn idle_order(&self) -> std::sync::MutexGuard<'_, LinkedHashSet<Arc<str>>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many subjects hold an actor that is not draining.
    pub(crate) fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// The subject's actor begins to unload: senders wait until its place is removed.
    pub(crate) fn begin_unload(&self, subject: &Arc<str>) {
        self.places.insert(Arc::clone(subject), Place::Busy);
    }

    /// The unloading actor of `subject` stopped: its place goes, unless the slot was
    /// taken back meanwhile and the place holds the subject read back again.
    pub(crate) fn unloaded(&self, subject: &Arc<str>) {
        self.places
            .remove_if(subject, |_, place| matches!(place, Place::Busy));
        self.changed.notify_waiters();
    }

    /// The subject's actor begins to passivate: senders wait from now on.
    pub(crate) fn begin_passivation(&self, subject: &Arc<str>) {
        self.passivations.fetch_add(1, Ordering::Relaxed);
        self.no_longer_live(subject);
        self.places.insert(Arc::clone(subject), Place::Busy);
    }

    /// The draining actor stopped and hands its state back, to be packed; an empty
    /// subject is forgotten altogether. A state with changes the store has not yet
    /// acknowledged, or with channels still open, is kept as it is, effects and channels
    /// and all, for the acknowledgement (or the answer) to wake.
    pub(crate) fn store(&self, subject: &Arc<str>, state: Box<State>, channels: Channels) {
        if !state.unacked.is_empty() || !channels.is_empty() {
            let passive = Passive::Plain(state, channels);
            self.places
                .insert(Arc::clone(subject), Place::Passive(passive));
        } else if state.is_empty() {
            self.places.remove(subject);
        } else {
            let passive = match Packed::pack(state) {
                Ok(packed) => Passive::Packed(packed),
                Err(state) => Passive::Plain(state, Channels::default()),
            };
            self.places
                .insert(Arc::clone(subject), Place::Passive(passive));
        }
        self.changed.notify_waiters();
    }

    /// Stop every live subject's actor (the runtime is shutting down); each aborts its
    /// activations and forgets its state as it stops (`super::actor`).
    pub(crate) fn stop_all(&self) {
        for place in self.places.iter() {
            if let Place::Live(actor) = place.value() {
                actor.stop(None);
            }
        }
    }

    /// Wait until every subject's actor has stopped and its task ended, stopping any
    /// that a message in flight spawned meanwhile. Called after the runtime closed.
    pub(crate) async fn stopped(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            self.stop_all();
            let active = self
                .places
                .iter()
                .any(|place| matches!(place.value(), Place::Live(_) | Place::Busy));
            if !active {
                break;
            }
            changed.await;
        }
        self.tasks.join().await;
    }

    /// A stopped actor's subject is gone with the runtime: its place is removed.
    pub(crate) fn forget(&self, subject: &Arc<str>) {
        self.places.remove(subject);
        self.changed.notify_waiters();
    }

    /// How many passivations happened, and how many messages raced one and were
    /// delivered again.
    pub(crate) fn passivation_counts(&self) -> (u64, u64) {
        (
            self.passivations.load(Ordering::Relaxed),
            self.redelivered.load(Ordering::Relaxed),
        )
    }

    /// How many subjects have an actor, how many are passive, and the bytes of packed
    /// text the passive ones hold.
    pub(crate) fn census(&self) -> (usize, usize, usize) {
        let (mut live, mut passive, mut bytes) = (0, 0, 0);
        for place in self.places.iter() {
            match place.value() {
                Place::Live(_) | Place::Busy => live += 1,
                Place::Passive(state) => {
                    passive += 1;
                    if let Passive::Packed(packed) = state {
                        bytes += packed.len();
                    }
                }
            }
        }
        (live, passive, bytes)
    }
}
