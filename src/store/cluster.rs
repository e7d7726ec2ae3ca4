//! Several runtimes on one memory engine, their slots owned under leases kept on a
//! manual clock: the PostgreSQL engine's ownership (`super::postgres::leases`) in
//! miniature, for the random simulation's node operations (`docs/simulation.md`,
//! "Nodes").
//!
//! A [`Cluster`] is the database: the spaces, the log every node writes (numbered in
//! commit order), the nodes with their epochs, and each slot's owner, epoch and lease
//! end, all under one lock and timed by the cluster's clock. A node joins it with
//! [`Cluster::join`] and gets a store of its own over a [`Node`], an engine that:
//!
//! - **commits each group as it is written**, all or nothing, after checking in the
//!   same turn of the lock that the node's epoch is still this process's and that this
//!   node owns every slot the group writes, at the epoch it took it, its lease not
//!   ended (by the cluster's clock): a node frozen or cut off past its lease commits
//!   nothing and learns it has lost the slot;
//! - **serves a slot until two thirds of a lease** after the round that last took or
//!   renewed it, by the node's own clock (which stands still while the node is frozen);
//! - **keeps its leases in rounds** the simulation runs ([`Node::round`]), as the
//!   PostgreSQL engine's task does every third of a lease: the node seen, its leases
//!   renewed, then its share of the slots taken or its excess handed over a few at a
//!   time;
//! - **dies** ([`Node::kill`]) as a process killed does: nothing more is written or
//!   read, and its slots stay its own until their leases end.
//!
//! Every commit is audited: no slot may be written under an epoch older than one already
//! written, or under one epoch by two nodes ([`Cluster::audit`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::engine::{Engine, LogChunk, ReadFailure, WriteFailure};
use super::layout::chunk_of;
use super::memory::Spaces;
use super::owners::{Change, Counted, Owners, forget, mark_drain};
use super::{Batch, Entries, Op, Space};
use crate::clock::{Clock, ManualClock};
use crate::slot::Slot;
use crate::sync::lock;

/// The database several nodes share, on the cluster's clock.
#[derive(Clone)]
pub(crate) struct Cluster {
    /// Everything the database holds.
    table: Arc<Mutex<Table>>,
    /// The database's clock: leases end by it.
    clock: ManualClock,
    /// How long a lease lasts once taken or renewed.
    lease: Duration,
}

/// What a [`Cluster`] holds.
struct Table {
    /// The keys and values written.
    spaces: Spaces,
    /// The log's chunks by their first entry's number: each its count and its value.
    log: BTreeMap<u64, (u32, Vec<u8>)>,
    /// The number of the log's next entry.
    next: u64,
    /// How many entries the log keeps.
    kept: u64,
    /// Each slot's owner, epoch and lease end, by number.
    slots: Vec<Lease>,
    /// The nodes by name.
    nodes: BTreeMap<String, NodeRow>,
    /// For each slot written, the last epoch it was written under and by which node.
    written: BTreeMap<u16, (u64, u32)>,
    /// What the audit found wrong, in commit order.
    violations: Vec<String>,
    /// How many times a node took a slot.
    takes: u64,
    /// Whether a write's slots are checked against their owner, epoch and lease
    /// (always, but in a test that shows the checks above the engine catch a write
    /// that should have been refused).
    fenced: bool,
}

/// A slot's row.
#[derive(Debug, Clone, Copy, Default)]
struct Lease {
    /// The node that owns it, if any.
    owner: Option<u32>,
    /// Moved on each time it is taken.
    epoch: u64,
    /// When its lease ends, by the cluster's clock.
    end: Option<DateTime<Utc>>,
}

/// A node's row.
#[derive(Debug, Clone, Copy)]
struct NodeRow {
    /// Its number.
    number: u32,
    /// Moved on by each process that holds the node.
    epoch: u64,
    /// When it was last seen, by the cluster's clock; `None` once it left.
    seen: Option<DateTime<Utc>>,
    /// Its caller asks and open user asks, as it last published them.
    counts: (i64, i64),
}

/// A slot this node holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The slot's epoch when it was taken.
    epoch: u64,
    /// Until when (the node's clock) it is served.
    until: DateTime<Utc>,
    /// Being handed over: not served, renewed until it is given back.
    draining: bool,
}

impl Cluster {
    /// An empty database on `clock`, whose leases last `lease`.
    pub(crate) fn new(clock: ManualClock, lease: Duration) -> Cluster {
        let slots = vec![Lease::default(); usize::from(Slot::COUNT)];
        Cluster {
            table: Arc::new(Mutex::new(Table {
                spaces: Spaces::default(),
                log: BTreeMap::new(),
                next: 1,
                kept: u64::MAX,
                slots,
                nodes: BTreeMap::new(),
                written: BTreeMap::new(),
                violations: Vec::new(),
                takes: 0,
                fenced: true,
            })),
            clock,
            lease,
        }
    }

    /// Holds the node `name` for a new process whose clock is `own`, moving the node's
    /// epoch on (an earlier process of the node writes nothing more), and takes its
    /// share of the slots. Refused while another process of the node is up.
    pub(crate) fn join(&self, name: &str, own: ManualClock) -> Result<Arc<Node>, String> {
        let mut table = lock(&self.table);
        let now = self.clock.now();
        let number = u32::try_from(table.nodes.len() + 1).unwrap_or(u32::MAX);
        let row = table.nodes.entry(name.to_string()).or_insert(NodeRow {
            number,
            epoch: 0,
            seen: None,
            counts: (0, 0),
        });
        if row.seen.is_some_and(|seen| seen + self.lease_span() > now) {
            return Err(format!(
                "node {name} is held by a process seen within a lease"
            ));
        }
        row.epoch += 1;
        row.seen = Some(now);
        let (number, epoch) = (row.number, row.epoch);
        drop(table);
        let (changes, receiver) = unbounded_channel();
        let node = Arc::new(Node {
            cluster: self.clone(),
            own,
            name: name.to_string(),
            number,
            epoch,
            held: Mutex::new(BTreeMap::new()),
            changes,
            receiver: Mutex::new(None),
            counted: Arc::default(),
            down: AtomicBool::new(false),
        });
        node.round();
        let owned = node.served();
        let mut receiver = receiver;
        while receiver.try_recv().is_ok() {}
        *lock(&node.receiver) = Some((owned, receiver));
        Ok(node)
    }

    /// The same database, but committing a write without checking its slots' owner,
    /// epoch and lease: deliberately broken, for a test that shows it is caught.
    pub(crate) fn unfenced(self) -> Cluster {
        lock(&self.table).fenced = false;
        self
    }

    /// How many times a node took a slot (each under a new epoch).
    pub(crate) fn takes(&self) -> u64 {
        lock(&self.table).takes
    }

    /// A lease, as a span of the cluster's clock.
    fn lease_span(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.lease).unwrap_or(chrono::Duration::MAX)
    }

    /// The node that owns `slot` now (its lease not ended), by name.
    pub(crate) fn owner(&self, slot: Slot) -> Option<String> {
        let now = self.clock.now();
        let table = lock(&self.table);
        let lease = table.slots[usize::from(slot.number())];
        let owner = lease
            .owner
            .filter(|_| lease.end.is_some_and(|end| end > now))?;
        table
            .nodes
            .iter()
            .find(|(_, row)| row.number == owner)
            .map(|(name, _)| name.clone())
    }

    /// The log's entries from `from` on, in order, each with its number.
    pub(crate) fn log_from(&self, from: u64) -> Result<Vec<(u64, Vec<u8>)>, String> {
        let table = lock(&self.table);
        let mut entries = Vec::new();
        for (&first, (count, value)) in &table.log {
            if first + u64::from(*count) <= from {
                continue;
            }
            let values = super::log::decode(value, *count)
                .map_err(|cause| format!("the chunk of the log from {first}: {cause}"))?;
            entries.extend((first..).zip(values).filter(|(seq, _)| *seq >= from));
        }
        Ok(entries)
    }

    /// Sets one key's value, as a build before may have left it (tests).
    #[cfg(test)]
    pub(crate) fn put(&self, space: Space, key: &[u8], value: &[u8]) {
        lock(&self.table).spaces.apply(Op::Put {
            space,
            key: key.to_vec(),
            value: value.to_vec(),
        });
    }

    /// One key's value, as written (tests).
    #[cfg(test)]
    pub(crate) fn get(&self, space: Space, key: &[u8]) -> Option<Vec<u8>> {
        lock(&self.table).spaces.get(space, key)
    }

    /// What the audit found wrong: a slot written under an epoch older than one already
    /// written, or under one epoch by two nodes.
    pub(crate) fn audit(&self) -> Vec<String> {
        lock(&self.table).violations.clone()
    }
}

/// One process's hold on a [`Cluster`]: the engine of its store.
pub(crate) struct Node {
    /// The database.
    cluster: Cluster,
    /// The node's own clock: it serves a slot until a time on it.
    own: ManualClock,
    /// The node's name.
    name: String,
    /// Its number.
    number: u32,
    /// The node's epoch this process took: every write checks it.
    epoch: u64,
    /// The slots held, by number.
    held: Mutex<BTreeMap<u16, Held>>,
    /// Where changes are told.
    changes: UnboundedSender<Change>,
    /// The other end, until the runtime takes it.
    receiver: Mutex<Option<(Vec<Slot>, UnboundedReceiver<Change>)>>,
    /// What this node and the others hold under the ceilings.
    counted: Arc<Counted>,
    /// Set when the process died or closed its store: nothing more is done.
    down: AtomicBool,
}

impl Node {
    /// The node's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Dies, as a process killed does: nothing more is written, read or renewed, and
    /// the slots it held stay its own until their leases end.
    pub(crate) fn kill(&self) {
        self.down.store(true, Ordering::Release);
    }

    /// Whether the process is down (killed or closed).
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Acquire)
    }

    /// The slots served now (held, not being handed over, their time not passed by the
    /// node's clock), in order.
    pub(crate) fn served(&self) -> Vec<Slot> {
        let now = self.own.now();
        lock(&self.held)
            .iter()
            .filter(|(_, held)| !held.draining && held.until > now)
            .filter_map(|(&number, _)| Slot::numbered(number))
            .collect()
    }

    /// Whether a slot is being handed over: told to the runtime, not yet given back.
    pub(crate) fn draining(&self) -> bool {
        lock(&self.held).values().any(|held| held.draining)
    }

    /// The epoch `slot` is held at, if it may be written now.
    fn serving(&self, slot: Slot) -> Option<u64> {
        let held = *lock(&self.held).get(&slot.number())?;
        (held.until > self.own.now()).then_some(held.epoch)
    }

    /// `slots` are no longer this process's: forgotten, and the runtime told.
    fn lost(&self, slots: &[Slot]) {
        forget(&self.held, slots, &self.changes);
    }

    /// One round of the leases, as the PostgreSQL engine keeps them every third of a
    /// lease: the node noted as seen (with its counts), its leases renewed (those it no
    /// longer holds given up), its share taken or its excess handed over, and then the
    /// slots whose time to be served has passed given up. Nothing for a node down.
    pub(crate) fn round(&self) {
        if self.is_down() {
            return;
        }
        let cluster = &self.cluster;
        let now = cluster.clock.now();
        let end = now + cluster.lease_span();
        let until = self.own.now() + cluster.lease_span() * 2 / 3;
        let mine = self.counted.mine();
        let mut table = lock(&cluster.table);
        if !self.is_ours(&table) {
            drop(table);
            let held: Vec<Slot> = lock(&self.held)
                .keys()
                .filter_map(|&n| Slot::numbered(n))
                .collect();
            self.lost(&held);
            return;
        }
        if let Some(row) = table.nodes.get_mut(&self.name) {
            row.seen = Some(now);
            row.counts = mine;
        }
        // Renewed, or lost.
        let mut held = lock(&self.held);
        let mut lost = Vec::new();
        for (&number, h) in held.iter_mut() {
            let lease = &mut table.slots[usize::from(number)];
            let live = lease.end.is_some_and(|e| e > now);
            if lease.owner == Some(self.number) && lease.epoch == h.epoch && live {
                lease.end = Some(end);
                h.until = h.until.max(until);
            } else {
                lost.extend(Slot::numbered(number));
            }
        }
        for slot in &lost {
            held.remove(&slot.number());
        }
        // The live nodes and what the others hold under the ceilings.
        let span = cluster.lease_span();
        let live: Vec<&NodeRow> = table
            .nodes
            .values()
            .filter(|row| row.seen.is_some_and(|seen| seen + span > now))
            .collect();
        let others = live.iter().filter(|row| row.number != self.number).fold(
            (0, 0),
            |sum: (i64, i64), row| {
                (
                    sum.0.saturating_add(row.counts.0),
                    sum.1.saturating_add(row.counts.1),
                )
            },
        );
        let share = usize::from(Slot::COUNT).div_ceil(live.len().max(1));
        self.counted.set_others(others.0, others.1);
        let mut gained = Vec::new();
        let mut drain = Vec::new();
        let mut takes = 0;
        if held.len() < share {
            let mut missing = share - held.len();
            for (number, lease) in table.slots.iter_mut().enumerate() {
                if missing == 0 {
                    break;
                }
                let free = lease.owner.is_none()
                    || lease.end.is_none_or(|e| e <= now)
                    || lease.owner == Some(self.number);
                let number = u16::try_from(number).unwrap_or(u16::MAX);
                if !free || held.contains_key(&number) {
                    continue;
                }
                lease.owner = Some(self.number);
                lease.epoch += 1;
                lease.end = Some(end);
                held.insert(
                    number,
                    Held {
                        epoch: lease.epoch,
                        until,
                        draining: false,
                    },
                );
                gained.extend(Slot::numbered(number));
                missing -= 1;
                takes += 1;
            }
        } else if held.len() > share {
            drain = mark_drain(held.iter_mut().map(|(&n, h)| (n, &mut h.draining)), share);
        }
        table.takes += takes;
        drop(held);
        drop(table);
        for change in [
            Change::Lost(lost),
            Change::Gained(gained),
            Change::Drain(drain),
        ] {
            if !matches!(&change, Change::Lost(s) | Change::Gained(s) | Change::Drain(s) if s.is_empty())
            {
                let _ = self.changes.send(change);
            }
        }
        self.expire();
    }

    /// Gives up every slot whose time to be served has passed (the node's clock).
    fn expire(&self) {
        let now = self.own.now();
        let lapsed: Vec<Slot> = lock(&self.held)
            .iter()
            .filter(|(_, h)| h.until <= now)
            .filter_map(|(&n, _)| Slot::numbered(n))
            .collect();
        self.lost(&lapsed);
    }

    /// Whether the node's epoch in `table` is still this process's.
    fn is_ours(&self, table: &Table) -> bool {
        table
            .nodes
            .get(&self.name)
            .is_some_and(|row| row.epoch == self.epoch)
    }

    /// The failure of anything tried on a node that is down.
    fn down_failure(&self) -> String {
        format!("node {} is down", self.name)
    }

    /// A read, refused on a node that is down.
    fn read<T>(&self, read: impl FnOnce(&Table) -> T) -> Result<T, ReadFailure> {
        if self.is_down() {
            return Err(ReadFailure {
                damaged: false,
                cause: self.down_failure(),
            });
        }
        Ok(read(&lock(&self.cluster.table)))
    }
}

impl Engine for Node {
    /// Commits the group at once, whole, or refuses it whole for the slots this node
    /// does not serve now or the table says it does not own.
    fn write(&self, group: &mut Vec<Batch>, _generation: u64) -> Result<(), WriteFailure> {
        if self.is_down() {
            return Err(WriteFailure::Failed(self.down_failure()));
        }
        let mut slots: Vec<Slot> = group.iter().filter_map(Batch::slot).collect();
        slots.sort_unstable();
        slots.dedup();
        let mut owned = Vec::new();
        let mut away = Vec::new();
        for slot in slots {
            match self.serving(slot) {
                Some(epoch) => owned.push((slot, epoch)),
                None => away.push(slot),
            }
        }
        let now = self.cluster.clock.now();
        if !away.is_empty() && lock(&self.cluster.table).fenced {
            self.lost(&away);
            return Err(WriteFailure::NotOwner(away));
        }
        let mut table = lock(&self.cluster.table);
        if !self.is_ours(&table) {
            self.kill();
            return Err(WriteFailure::Failed(format!(
                "another process took node {} over: nothing more is written from this one",
                self.name
            )));
        }
        let refused: Vec<Slot> = owned
            .iter()
            .filter(|(slot, epoch)| {
                let lease = table.slots[usize::from(slot.number())];
                lease.owner != Some(self.number)
                    || lease.epoch != *epoch
                    || lease.end.is_none_or(|end| end <= now)
            })
            .map(|(slot, _)| *slot)
            .collect();
        if !refused.is_empty() && table.fenced {
            drop(table);
            self.lost(&refused);
            return Err(WriteFailure::NotOwner(refused));
        }
        for &(slot, epoch) in &owned {
            let number = slot.number();
            match table.written.get(&number) {
                Some(&(last, _)) if last > epoch => {
                    let found = format!(
                        "slot {number} written by node {} under epoch {epoch}, after epoch {last}",
                        self.name
                    );
                    table.violations.push(found);
                }
                Some(&(last, by)) if last == epoch && by != self.number => {
                    let found = format!(
                        "slot {number} written under epoch {epoch} by two nodes ({by} and {})",
                        self.number
                    );
                    table.violations.push(found);
                }
                _ => {}
            }
            table.written.insert(number, (epoch, self.number));
        }
        for batch in std::mem::take(group) {
            for op in batch.into_ops() {
                match op {
                    // The group's log, numbered now: commits are in one order.
                    Op::Put {
                        space: Space::Events,
                        key,
                        value,
                    } if matches!(chunk_of(&key), Some((0, _))) => {
                        let count = chunk_of(&key).map_or(0, |(_, count)| count);
                        let first = table.next;
                        table.next += u64::from(count);
                        table.log.insert(first, (count, value));
                        let keep_from = table.next.saturating_sub(table.kept);
                        while let Some((&oldest, &(n, _))) = table.log.first_key_value() {
                            if oldest + u64::from(n) > keep_from {
                                break;
                            }
                            table.log.remove(&oldest);
                        }
                    }
                    op => table.spaces.apply(op),
                }
            }
        }
        Ok(())
    }

    fn numbers_log(&self) -> bool {
        true
    }

    /// Nothing to number: each group's log was numbered as it was committed.
    fn number_log(&self) -> Result<u64, String> {
        if self.is_down() {
            return Err(self.down_failure());
        }
        Ok(0)
    }

    fn keep_log(&self, entries: u64) {
        lock(&self.cluster.table).kept = entries.max(1);
    }

    fn log_next(&self) -> Result<u64, ReadFailure> {
        self.read(|table| table.next)
    }

    fn log_chunks(&self, from: u64, limit: usize) -> Result<Vec<LogChunk>, ReadFailure> {
        self.read(|table| {
            let holding = table
                .log
                .range(..=from)
                .next_back()
                .filter(|(first, (count, _))| **first + u64::from(*count) > from)
                .map(|(first, _)| *first)
                .unwrap_or(from);
            table
                .log
                .range(holding..)
                .take(limit.saturating_add(1))
                .map(|(&first, (count, value))| (first, *count, value.clone()))
                .collect()
        })
    }

    /// Nothing to do: each group was committed as it was written.
    fn sync(&self) -> Result<bool, String> {
        if self.is_down() {
            return Err(self.down_failure());
        }
        Ok(true)
    }

    /// Gives every slot back and notes the node gone, unless it is down (a process
    /// killed gives nothing back).
    fn close(&self, _flush: bool) {
        if self.down.swap(true, Ordering::AcqRel) {
            return;
        }
        let mut table = lock(&self.cluster.table);
        if !self.is_ours(&table) {
            return;
        }
        for lease in &mut table.slots {
            if lease.owner == Some(self.number) {
                lease.owner = None;
                lease.end = None;
            }
        }
        if let Some(row) = table.nodes.get_mut(&self.name) {
            row.seen = None;
        }
        lock(&self.held).clear();
    }

    fn owners(&self) -> Option<Owners> {
        let (owned, changes) = lock(&self.receiver).take()?;
        Some(Owners {
            node: self.number,
            owned,
            changes,
            counted: Arc::clone(&self.counted),
        })
    }

    fn release(&self, slot: Slot) -> Result<(), String> {
        if self.is_down() {
            return Err(self.down_failure());
        }
        let mut table = lock(&self.cluster.table);
        let Some(held) = lock(&self.held).remove(&slot.number()) else {
            return Ok(());
        };
        let lease = &mut table.slots[usize::from(slot.number())];
        if lease.owner == Some(self.number) && lease.epoch == held.epoch {
            lease.owner = None;
            lease.end = None;
        }
        Ok(())
    }

    fn serves(&self, slot: Slot) -> bool {
        if self.serving(slot).is_some() {
            return true;
        }
        self.lost(&[slot]);
        false
    }

    fn owner(&self, slot: Slot) -> Option<Arc<str>> {
        self.cluster
            .owner(slot)
            .filter(|name| *name != self.name)
            .map(|name| Arc::from(format!("node:{name}")))
    }

    #[cfg(test)]
    fn lease_round(&self) -> Result<(), String> {
        self.round();
        Ok(())
    }

    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        self.read(|table| table.spaces.get(space, key))
    }

    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        self.read(|table| table.spaces.range_from(space, from, within, limit))
    }

    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        self.read(|table| table.spaces.prefixed(space, prefix))
    }

    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        self.read(|table| table.spaces.keys(space))
    }

    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        self.read(|table| table.spaces.scan(space))
    }
}

#[cfg(test)]
mod tests;
