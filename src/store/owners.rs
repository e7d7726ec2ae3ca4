//! Slots with owners: what an engine whose slots are owned under leases (PostgreSQL's,
//! shared by several nodes) tells the runtime as the slots this process owns change.
//!
//! Every other engine owns every slot for as long as it is open and tells nothing.

use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::slot::Slot;

/// Where a node's number starts in the sequence numbers of its timer keys: the low 44
/// bits are the node's own counter.
pub(crate) const NODE_SHIFT: u32 = 44;

/// A change of the slots this process owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Taken, each under a new epoch: read back and served from now on.
    Gained(Vec<Slot>),
    /// No longer this process's (a lease that ran out, a write the database refused):
    /// served no more from now on, and unloaded.
    Lost(Vec<Slot>),
    /// To be handed over (another node joined): served no more, unloaded, and then
    /// given back with [`crate::store::Store::release`].
    Drain(Vec<Slot>),
}

/// The slots a process owns as it opens, and the changes from then on, in order.
#[derive(Debug)]
pub(crate) struct Owners {
    /// The node's number, unique among the nodes sharing the store (below 2^20): the
    /// high bits of the sequence numbers of the timer keys it makes, so no two nodes
    /// make the same key (`docs/durability.md`, "Slots and several processes").
    pub(crate) node: u32,
    /// The slots owned at the open, in order.
    pub(crate) owned: Vec<Slot>,
    /// Every change since, in the order they were made.
    pub(crate) changes: UnboundedReceiver<Change>,
}

/// How a node holds its slots: its name and the length of a lease.
#[derive(Debug, Clone)]
pub(crate) struct Leasing {
    /// The node's name, unique among the nodes sharing the database.
    pub(crate) node: String,
    /// How long a lease lasts once taken or renewed.
    pub(crate) lease: Duration,
    /// Where the other nodes send the requests for this node's subjects
    /// (`http://host:port`), if it takes any.
    pub(crate) address: Option<String>,
    /// Whether every group commit adds a row per slot it writes to `parkway_audit`: the
    /// epoch it claimed, the node and whether it was applied (`parkway cluster` reads
    /// them to check that no slot was written under two owners at once).
    pub(crate) audit: bool,
}

impl Leasing {
    /// The default node name: one process per database unless nodes are named.
    pub(crate) const DEFAULT_NODE: &'static str = "default";

    /// The default lease.
    pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(15);

    /// The shortest lease: renewals every third of it must fit a round trip and a pause.
    pub(crate) const MIN_LEASE: Duration = Duration::from_secs(1);

    /// What is wrong with these settings, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        let name = &self.node;
        if name.is_empty()
            || name.len() > 64
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Some(format!(
                "node name {name:?} is not 1 to 64 letters, digits, '-', '_' or '.'"
            ));
        }
        if let Some(address) = &self.address
            && (address.len() > 200
                || !address.starts_with("http://")
                || address.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Some(format!(
                "node address {address:?} is not an http:// URL of at most 200 characters (requests are sent on to nodes over plain HTTP: a network of their own)"
            ));
        }
        if self.lease < Leasing::MIN_LEASE || self.lease > Duration::from_secs(3600) {
            return Some(format!(
                "a lease of {} ms is outside 1 s to 1 h",
                self.lease.as_millis()
            ));
        }
        None
    }
}

impl Default for Leasing {
    fn default() -> Leasing {
        Leasing {
            node: Leasing::DEFAULT_NODE.to_string(),
            lease: Leasing::DEFAULT_LEASE,
            address: None,
            audit: false,
        }
    }
}
