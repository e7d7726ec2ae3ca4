//! Slots with owners: what an engine whose slots are owned under leases (PostgreSQL's,
//! shared by several nodes) tells the runtime as the slots this process owns change.
//!
//! Every other engine owns every slot for as long as it is open and tells nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::entry::To;
use crate::slot::Slot;
use crate::sync::lock;

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
    /// What this node and the others hold under the ceilings.
    pub(crate) counted: Arc<Counted>,
}

/// Counts behind the ceilings across nodes (`docs/postgres.md`, "Ceilings across
/// nodes"): this node's, which each round of the leases publishes, and the other live
/// nodes', as the last round read them.
#[derive(Default)]
pub(crate) struct Counted {
    /// Reads this node's caller asks and open user asks (the runtime's totals).
    source: Mutex<Option<Counter>>,
    /// The other live nodes' caller asks and open user asks.
    others: [AtomicUsize; 2],
}

/// What reads a node's caller asks and open user asks.
type Counter = Box<dyn Fn() -> (usize, usize) + Send + Sync>;

impl std::fmt::Debug for Counted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counted")
            .field("others", &self.others)
            .finish_non_exhaustive()
    }
}

impl Counted {
    /// Read this node's counts with `counter` from now on.
    pub(crate) fn count_with(&self, counter: Counter) {
        *lock(&self.source) = Some(counter);
    }

    /// This node's caller asks and open user asks, as published.
    pub(crate) fn mine(&self) -> (i64, i64) {
        let counted = lock(&self.source).as_ref().map_or((0, 0), |count| count());
        let wide = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        (wide(counted.0), wide(counted.1))
    }

    /// The other live nodes' counts, as read.
    pub(crate) fn set_others(&self, caller: i64, user: i64) {
        let narrow = |n: i64| usize::try_from(n).unwrap_or(0);
        self.others[0].store(narrow(caller), Ordering::Release);
        self.others[1].store(narrow(user), Ordering::Release);
    }

    /// What the other live nodes hold of `to`, as last read.
    pub(crate) fn others(&self, to: To) -> usize {
        let i = match to {
            To::Caller => 0,
            To::User => 1,
        };
        self.others[i].load(Ordering::Acquire)
    }
}

/// The part of a ceiling of `limit` a node owning `owned` of the slots admits on its
/// own: that fraction of it, rounded up, so the nodes' parts sum to at most the ceiling
/// plus one less than the nodes.
pub(crate) fn share_of(limit: usize, owned: usize) -> usize {
    let count = u128::from(Slot::COUNT);
    let share = (limit as u128 * owned as u128).div_ceil(count);
    usize::try_from(share).unwrap_or(usize::MAX)
}

/// How many slots a node hands over in one round, at most, when it holds more than its
/// share.
pub(crate) const DRAIN_STEP: usize = 32;

/// Of the slots a node holds (`held`: each slot's number and whether it is being handed
/// over), marks up to [`DRAIN_STEP`] more to hand over, the highest first, toward
/// holding no more than `share` once they are given back; the slots marked, in order.
pub(crate) fn mark_drain<'a>(
    held: impl Iterator<Item = (u16, &'a mut bool)>,
    share: usize,
) -> Vec<Slot> {
    let mut held: Vec<(u16, &mut bool)> = held.collect();
    let draining = held.iter().filter(|(_, draining)| **draining).count();
    let more = held
        .len()
        .saturating_sub(share)
        .saturating_sub(draining)
        .min(DRAIN_STEP);
    let mut marked: Vec<Slot> = held
        .iter_mut()
        .rev()
        .filter(|(_, draining)| !**draining)
        .take(more)
        .filter_map(|(number, draining)| {
            **draining = true;
            Slot::numbered(*number)
        })
        .collect();
    marked.reverse();
    marked
}

/// Forgets those of `slots` that `held` holds (slot number → what is held of it) and
/// tells the runtime they are lost: no longer this process's.
pub(crate) fn forget<H>(
    held: &Mutex<std::collections::BTreeMap<u16, H>>,
    slots: &[Slot],
    changes: &tokio::sync::mpsc::UnboundedSender<Change>,
) {
    let mut held = lock(held);
    let lost: Vec<Slot> = slots
        .iter()
        .filter(|slot| held.remove(&slot.number()).is_some())
        .copied()
        .collect();
    drop(held);
    if !lost.is_empty() {
        let _ = changes.send(Change::Lost(lost));
    }
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

#[cfg(test)]
mod tests {
    use super::share_of;

    /// A node's share of a ceiling is its slots' part of it, rounded up: the nodes'
    /// shares sum to at most the ceiling plus one less than the nodes.
    #[test]
    fn shares_of_a_ceiling_round_up_and_do_not_overflow() {
        assert_eq!(share_of(10, 1024), 10);
        assert_eq!(share_of(10, 512), 5);
        assert_eq!(share_of(10, 342) + share_of(10, 341) * 2, 12);
        assert_eq!(share_of(10, 0), 0);
        assert_eq!(share_of(0, 1024), 0);
        assert_eq!(share_of(usize::MAX, 1024), usize::MAX);
    }
}
