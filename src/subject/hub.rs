//! The hub: the subjects' registry and what their effects feed (the inbox, the run
//! records, the supervisor), beside the leaf services and the saved doors. Its
//! operations are in [`super::client`].

use ractor::ActorRef;

use super::records::Records;
use super::registry::Registry;
use crate::door::registry::Doors;
use crate::inbox::Inbox;
use crate::services::Services;
use crate::supervisor;

/// The subjects and what their effects feed.
pub(crate) struct Hub {
    pub(crate) services: Services,
    /// Finds or spawns each subject's actor.
    pub(crate) registry: Registry,
    pub(crate) doors: Doors,
    /// The interactions inbox: a projection of the subjects' effects.
    pub(crate) inbox: Inbox,
    /// Every run's latest record: a projection of the subjects' effects.
    pub(crate) records: Records,
    /// Idempotency keys and hook delivery ids in use.
    pub(crate) keys: crate::keys::Keys,
    pub(crate) supervisor: ActorRef<supervisor::Msg>,
    /// Set once an open has read back what it reads (`super::open::recover`), and an
    /// upgrade is done: until then the ticker reads no wake from the store.
    pub(crate) opened: std::sync::atomic::AtomicBool,
    /// Held while a slot is given up or taken back (`super::slots`), one move at a time:
    /// the slots given up whose subjects are unloaded and whose indexes are withdrawn.
    pub(crate) moves: tokio::sync::Mutex<std::collections::BTreeSet<crate::slot::Slot>>,
}

impl Hub {
    /// A hub over `services`, with the supervisor that walks its chains and keeps its
    /// timers.
    pub(crate) fn new(services: Services, supervisor: ActorRef<supervisor::Msg>) -> Self {
        Self {
            services,
            registry: Registry::default(),
            doors: Doors::default(),
            inbox: Inbox::default(),
            records: Records::default(),
            keys: crate::keys::Keys::default(),
            supervisor,
            opened: std::sync::atomic::AtomicBool::new(false),
            moves: tokio::sync::Mutex::default(),
        }
    }
}
