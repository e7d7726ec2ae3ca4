//! Nodes and the slots they own under leases, in the database: `parkway_nodes` (a
//! node's number and its name), `parkway_holds` (a node's epoch and when it was last
//! seen) and `parkway_slots` (each slot's owner, epoch and lease end).
//!
//! - **A node is one process at a time.** An open registers its node's name (a number
//!   is given to a new name), locks the node's row in a transaction it leaves open on a
//!   connection of its own (a second process with the same name is refused while the
//!   first lives), and moves the node's epoch on: every write checks it, so a process
//!   of the node that lost its hold and was replaced writes nothing more.
//! - **Slots are owned under leases** kept by the database's clock only: a node takes a
//!   slot that is free, whose lease ended, or that an earlier process of the same node
//!   held (the slot's epoch moved on each time), renews the leases it holds every third
//!   of a lease, and gives them back when it closes. Every group commit checks the
//!   owner, the epoch and the lease of each slot it writes, in the statement that
//!   writes (`super::WRITE`), so a node paused or cut off past its lease cannot commit.
//! - **A node stops serving a slot before its lease ends**: a lease renewed by a
//!   statement sent at `t` (the node's monotonic clock) is served until `t` plus two
//!   thirds of the lease. The last third is the margin for a pause between the check
//!   and the use, and for the two clocks' rates; the owner's clock and the database's
//!   are never compared, so a clock set wrong or jumping on a node changes nothing.
//! - **Shares.** Each node aims at an equal share of the slots among the nodes seen
//!   within a lease. A node holding more than its share hands over a few at a time
//!   ([`DRAIN_STEP`](crate::store::owners::DRAIN_STEP) a round): its runtime unloads
//!   each, then it is given back, and a node short of its share takes it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use deadpool_postgres::Pool;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio_postgres::error::SqlState;

use super::{describe, query};
use crate::slot::Slot;
use crate::store::owners::{Change, Counted, Leasing, Owners, forget, mark_drain};
use crate::sync::lock;

/// The highest node number: a node's number fills the high 20 bits of its timer keys'
/// sequence numbers.
pub(crate) const MAX_NODE: i32 = (1 << 20) - 1;

/// Registers a node's name, giving it the next number if it is new.
const REGISTER: &str = "INSERT INTO parkway_nodes (node, name)
    SELECT coalesce(max(node), 0) + 1, $1 FROM parkway_nodes
    ON CONFLICT (name) DO NOTHING";

/// A node's number by its name.
const NUMBER: &str = "SELECT node FROM parkway_nodes WHERE name = $1";

/// Makes the node's hold row if it has none.
const HOLD_ROW: &str =
    "INSERT INTO parkway_holds (node, epoch) VALUES ($1, 0) ON CONFLICT (node) DO NOTHING";

/// Moves the node's epoch on for this process: every write of an earlier process of
/// the node is refused from now on.
const TAKE_NODE: &str = "UPDATE parkway_holds SET epoch = epoch + 1, seen_at = now(), address = $2
    WHERE node = $1 RETURNING epoch";

/// Where the slots other nodes hold, their leases not ended, are served.
const OWNERS: &str = "SELECT s.slot, h.address FROM parkway_slots AS s
    JOIN parkway_holds AS h ON h.node = s.owner
    WHERE s.lease_end > now() AND s.owner <> $1 AND h.address IS NOT NULL";

/// Notes the node as seen now, if its epoch is still this process's.
/// With what it holds under the ceilings (`$3`, `$4`).
const SEEN: &str = "UPDATE parkway_holds SET seen_at = now(), caller = $3, user_asks = $4
    WHERE node = $1 AND epoch = $2";

/// How many nodes were seen within a lease, and what the others (not `$2`) among them
/// hold under the ceilings.
const LIVE: &str = "SELECT count(*),
        coalesce(sum(caller) FILTER (WHERE node <> $2), 0)::int8,
        coalesce(sum(user_asks) FILTER (WHERE node <> $2), 0)::int8
    FROM parkway_holds
    WHERE seen_at > now() - $1::int8 * interval '1 millisecond'";

/// Renews the leases of the slots listed (with the epochs they were taken at) that this
/// process still holds, and returns them. The rows are locked in slot order first, as
/// every statement that locks them does.
const RENEW: &str = "WITH held AS (
        SELECT s.slot FROM parkway_slots AS s
        JOIN unnest($4::int4[], $5::int8[]) AS h(slot, epoch)
          ON s.slot = h.slot AND s.epoch = h.epoch
        WHERE s.owner = $1 AND s.lease_end > now()
          AND (SELECT epoch FROM parkway_holds WHERE node = $1) = $2
        ORDER BY s.slot
        FOR UPDATE OF s
    )
    UPDATE parkway_slots AS s SET lease_end = now() + $3::int8 * interval '1 millisecond'
    FROM held WHERE s.slot = held.slot
    RETURNING s.slot";

/// Takes up to `$5` slots that are free, whose lease ended, or that an earlier process of
/// this node held (not those listed in `$4`, which this process holds), each under its
/// next epoch; returns them with their epochs.
const TAKE: &str = "UPDATE parkway_slots
    SET owner = $1, epoch = epoch + 1, lease_end = now() + $3::int8 * interval '1 millisecond'
    WHERE slot IN (
        SELECT slot FROM parkway_slots
        WHERE (owner IS NULL OR lease_end IS NULL OR lease_end <= now() OR owner = $1)
          AND NOT (slot = ANY($4::int4[]))
        ORDER BY slot LIMIT $5
        FOR UPDATE SKIP LOCKED
    ) AND (SELECT epoch FROM parkway_holds WHERE node = $1) = $2
    RETURNING slot, epoch";

/// Gives back the slots listed, if this process holds them.
const GIVE_BACK: &str = "WITH held AS (
        SELECT slot FROM parkway_slots
        WHERE slot = ANY($3::int4[]) AND owner = $1
          AND (SELECT epoch FROM parkway_holds WHERE node = $1) = $2
        ORDER BY slot
        FOR UPDATE
    )
    UPDATE parkway_slots AS s SET owner = NULL, lease_end = NULL
    FROM held WHERE s.slot = held.slot";

/// Gives back every slot of the node and notes it gone, if its epoch is this process's.
const LEAVE: &str = "WITH held AS (
        SELECT slot FROM parkway_slots
        WHERE owner = $1 AND (SELECT epoch FROM parkway_holds WHERE node = $1) = $2
        ORDER BY slot
        FOR UPDATE
    ), slots AS (
        UPDATE parkway_slots AS s SET owner = NULL, lease_end = NULL
        FROM held WHERE s.slot = held.slot
    )
    UPDATE parkway_holds SET seen_at = NULL WHERE node = $1 AND epoch = $2";

/// A slot this process holds.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The slot's epoch when this process took it.
    epoch: i64,
    /// Until when (the node's monotonic clock) it is served: two thirds of a lease after
    /// the statement that last took or renewed it was sent.
    until: Instant,
    /// Being handed over: not served, still renewed until it is given back.
    draining: bool,
}

/// The node's hold on the database and the slots it holds.
pub(crate) struct Leases {
    /// The node's number.
    pub(crate) node: i32,
    /// The node's name.
    name: String,
    /// The node's epoch this process took: every write checks it.
    pub(crate) epoch: i64,
    /// How long a lease lasts.
    lease: Duration,
    /// The slots held, by number.
    held: Mutex<BTreeMap<u16, Held>>,
    /// Where changes are told.
    changes: UnboundedSender<Change>,
    /// The other end, until the runtime takes it.
    receiver: Mutex<Option<(Vec<Slot>, UnboundedReceiver<Change>)>>,
    /// Where each slot another node holds is served, as the last round read it.
    elsewhere: Mutex<BTreeMap<u16, Arc<str>>>,
    /// Wakes the keeper for a round at once.
    pub(crate) wake: tokio::sync::Notify,
    /// Set at the close: no round takes anything more.
    stopped: AtomicBool,
    /// What this node and the others hold under the ceilings.
    counted: Arc<Counted>,
}

impl Leases {
    /// Registers the node named in `leasing`, holds it for this process on a connection
    /// of its own (returned: the hold lasts until released), moves its epoch on and
    /// takes its share of the slots.
    pub(crate) async fn open(
        pool: &Pool,
        config: &tokio_postgres::Config,
        leasing: &Leasing,
    ) -> Result<(Leases, Arc<Hold>), String> {
        let name = leasing.node.as_str();
        let node = register(pool, name).await?;
        let holder = hold(config, node, name).await?;
        query(pool, HOLD_ROW, &[&node]).await.map_err(|f| f.cause)?;
        let epoch: i64 = query(pool, TAKE_NODE, &[&node, &leasing.address])
            .await
            .map_err(|f| f.cause)?
            .first()
            .ok_or("the node's hold has no row")?
            .get(0);
        let (changes, receiver) = unbounded_channel();
        let leases = Leases {
            node,
            name: name.to_string(),
            epoch,
            lease: leasing.lease,
            held: Mutex::new(BTreeMap::new()),
            elsewhere: Mutex::new(BTreeMap::new()),
            changes,
            receiver: Mutex::new(None),
            wake: tokio::sync::Notify::new(),
            stopped: AtomicBool::new(false),
            counted: Arc::default(),
        };
        leases
            .round(pool)
            .await
            .map_err(|cause| format!("taking its slots failed: {cause}"))?;
        let owned = leases.served();
        // What the first round took is the open's; the runtime reads it as it opens.
        let mut receiver = receiver;
        while receiver.try_recv().is_ok() {}
        *lock(&leases.receiver) = Some((owned, receiver));
        tracing::info!(
            node = name,
            number = node,
            epoch,
            slots = lock(&leases.held).len(),
            "holding the database as this node"
        );
        Ok((leases, holder))
    }

    /// The node's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Where `slot` is served, if another node holds it (as the last round read).
    pub(crate) fn owner(&self, slot: Slot) -> Option<Arc<str>> {
        lock(&self.elsewhere).get(&slot.number()).cloned()
    }

    /// The slots served and the changes to come, once.
    pub(crate) fn owners(&self) -> Option<Owners> {
        let (owned, changes) = lock(&self.receiver).take()?;
        Some(Owners {
            node: self.node.unsigned_abs(),
            owned,
            changes,
            counted: Arc::clone(&self.counted),
        })
    }

    /// The slots served now, in order.
    fn served(&self) -> Vec<Slot> {
        let now = Instant::now();
        lock(&self.held)
            .iter()
            .filter(|(_, held)| !held.draining && held.until > now)
            .filter_map(|(&number, _)| Slot::numbered(number))
            .collect()
    }

    /// The epoch `slot` is held at, if this process may write it now: held, its lease
    /// within its time to be served (one being handed over too, until it is given back:
    /// its subjects' last changes land as they unload).
    pub(crate) fn serving(&self, slot: Slot) -> Option<i64> {
        let held = *lock(&self.held).get(&slot.number())?;
        (held.until > Instant::now()).then_some(held.epoch)
    }

    /// Ends the time `slot` is served here (tests).
    #[cfg(test)]
    pub(crate) fn lapse_served(&self, slot: Slot) {
        if let Some(held) = lock(&self.held).get_mut(&slot.number()) {
            held.until = Instant::now();
        }
    }

    /// `slots` are no longer this process's (the database refused a write to them, or
    /// a write found their time to be served here passed):
    /// forgotten, and the runtime told.
    pub(crate) fn lost(&self, slots: &[Slot]) {
        forget(&self.held, slots, &self.changes);
    }

    /// Keeps the leases while the engine is open: a round every third of a lease (or
    /// when woken), each bounded by a third of a lease, and after each the slots whose
    /// time to be served has passed are given up.
    pub(crate) async fn keep(self: Arc<Self>, pool: Pool) {
        let every = self.lease / 3;
        loop {
            tokio::select! {
                () = tokio::time::sleep(every) => {}
                () = self.wake.notified() => {}
            }
            if self.stopped.load(Ordering::Acquire) {
                return;
            }
            match tokio::time::timeout(every, self.round(&pool)).await {
                Ok(Ok(())) => {}
                Ok(Err(cause)) => {
                    tracing::warn!(node = %self.name, %cause, "renewing the node's leases failed");
                }
                Err(_) => {
                    tracing::warn!(node = %self.name, "renewing the node's leases did not finish within a third of a lease");
                }
            }
            self.expire();
        }
    }

    /// Gives up every slot whose time to be served has passed unrenewed.
    pub(crate) fn expire(&self) {
        let now = Instant::now();
        let mut held = lock(&self.held);
        let lapsed: Vec<u16> = held
            .iter()
            .filter(|(_, h)| h.until <= now)
            .map(|(&n, _)| n)
            .collect();
        for n in &lapsed {
            held.remove(n);
        }
        drop(held);
        if !lapsed.is_empty() {
            tracing::error!(node = %self.name, slots = lapsed.len(), "leases were not renewed in time: their slots are served no more");
            let slots = lapsed.into_iter().filter_map(Slot::numbered).collect();
            let _ = self.changes.send(Change::Lost(slots));
        }
    }

    /// One round: the node noted as seen, the leases it holds renewed (those it no
    /// longer holds given up), then its share taken or the excess handed over.
    pub(crate) async fn round(&self, pool: &Pool) -> Result<(), String> {
        let sent = Instant::now();
        let until = sent + self.lease * 2 / 3;
        let lease_ms = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        let cause = |f: super::Failure| f.cause;
        let (caller, user) = self.counted.mine();
        query(pool, SEEN, &[&self.node, &self.epoch, &caller, &user])
            .await
            .map_err(cause)?;
        let (slots, epochs): (Vec<i32>, Vec<i64>) = lock(&self.held)
            .iter()
            .map(|(&n, h)| (i32::from(n), h.epoch))
            .unzip();
        if !slots.is_empty() {
            let renewed = query(
                pool,
                RENEW,
                &[&self.node, &self.epoch, &lease_ms, &slots, &epochs],
            )
            .await
            .map_err(cause)?
            .iter()
            .map(|row| row.get(0))
            .collect::<std::collections::BTreeSet<i32>>();
            let mut held = lock(&self.held);
            let mut lost = Vec::new();
            for slot in &slots {
                let number = *slot as u16;
                if renewed.contains(slot) {
                    if let Some(h) = held.get_mut(&number) {
                        h.until = h.until.max(until);
                    }
                } else if held.remove(&number).is_some() {
                    lost.extend(Slot::numbered(number));
                }
            }
            drop(held);
            if !lost.is_empty() {
                tracing::warn!(node = %self.name, slots = lost.len(), "leases could not be renewed (another node took them, or they had ended): their slots are served no more");
                let _ = self.changes.send(Change::Lost(lost));
            }
        }
        if self.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        let elsewhere: BTreeMap<u16, Arc<str>> = query(pool, OWNERS, &[&self.node])
            .await
            .map_err(cause)?
            .iter()
            .filter_map(|row| {
                let slot = u16::try_from(row.get::<_, i32>(0)).ok()?;
                Some((slot, Arc::from(row.get::<_, String>(1))))
            })
            .collect();
        *lock(&self.elsewhere) = elsewhere;
        let (live, others): (i64, (i64, i64)) = query(pool, LIVE, &[&lease_ms, &self.node])
            .await
            .map_err(cause)?
            .first()
            .map_or((1, (0, 0)), |row| (row.get(0), (row.get(1), row.get(2))));
        self.counted.set_others(others.0, others.1);
        let count = i64::from(Slot::COUNT);
        let share = usize::try_from((count + live.max(1) - 1) / live.max(1)).unwrap_or(usize::MAX);
        let holding = lock(&self.held).len();
        if holding < share {
            let missing = i64::try_from(share - holding).unwrap_or(i64::MAX);
            let holding: Vec<i32> = lock(&self.held).keys().map(|&n| i32::from(n)).collect();
            let taken: Vec<(i32, i64)> = query(
                pool,
                TAKE,
                &[&self.node, &self.epoch, &lease_ms, &holding, &missing],
            )
            .await
            .map_err(cause)?
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect();
            let mut held = lock(&self.held);
            let gained: Vec<Slot> = taken
                .iter()
                .filter_map(|&(slot, epoch)| {
                    let slot = Slot::numbered(u16::try_from(slot).ok()?)?;
                    held.insert(
                        slot.number(),
                        Held {
                            epoch,
                            until,
                            draining: false,
                        },
                    );
                    Some(slot)
                })
                .collect();
            drop(held);
            if !gained.is_empty() {
                let _ = self.changes.send(Change::Gained(gained));
            }
        } else if holding > share {
            let mut held = lock(&self.held);
            let drain = mark_drain(held.iter_mut().map(|(&n, h)| (n, &mut h.draining)), share);
            drop(held);
            if !drain.is_empty() {
                tracing::info!(node = %self.name, slots = drain.len(), nodes = live, "handing slots over to the nodes that joined");
                let _ = self.changes.send(Change::Drain(drain));
            }
        }
        Ok(())
    }

    /// Gives `slot` back, unloaded after a [`Change::Drain`].
    pub(crate) async fn release(&self, pool: &Pool, slot: Slot) -> Result<(), String> {
        let number = [i32::from(slot.number())];
        query(
            pool,
            GIVE_BACK,
            &[&self.node, &self.epoch, &number.as_slice()],
        )
        .await
        .map_err(|f| f.cause)?;
        lock(&self.held).remove(&slot.number());
        Ok(())
    }

    /// Whether the leases are no longer kept (the store closed or stopped).
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Gives back every slot the node holds, at the close or once the store stopped: no
    /// round takes any again.
    pub(crate) async fn leave(&self, pool: &Pool) {
        self.stopped.store(true, Ordering::Release);
        lock(&self.held).clear();
        if let Err(failure) = query(pool, LEAVE, &[&self.node, &self.epoch]).await {
            tracing::warn!(node = %self.name, cause = %failure.cause, "giving the node's slots back failed: other nodes take them when their leases end");
        }
    }
}

/// The number of the node named `name`, registered if it is new. Two new nodes that
/// register at once may reach for the same number: the second tries again.
async fn register(pool: &Pool, name: &str) -> Result<i32, String> {
    for _ in 0..5 {
        match query(pool, REGISTER, &[&name]).await {
            Ok(_) => {}
            Err(failure) if failure.unique_violation => continue,
            Err(failure) => {
                return Err(format!("registering node {name} failed: {}", failure.cause));
            }
        }
        let node: i32 = query(pool, NUMBER, &[&name])
            .await
            .map_err(|f| f.cause)?
            .first()
            .ok_or_else(|| format!("node {name} has no number"))?
            .get(0);
        if node > MAX_NODE {
            return Err(format!(
                "node {name} would be node number {node}, past the last ({MAX_NODE})"
            ));
        }
        return Ok(node);
    }
    Err(format!(
        "registering node {name} failed: other nodes kept taking its number"
    ))
}

/// The connection that holds the node for this process, held again whenever it ends
/// (a restart of the database ends every connection), until released.
pub(crate) struct Hold {
    client: Mutex<Option<tokio_postgres::Client>>,
    released: AtomicBool,
}

impl Hold {
    /// Release the hold: the node's row is unlocked at once (`ROLLBACK`, within `wait`)
    /// and the hold is not taken again.
    pub(crate) async fn release(&self, wait: Duration) {
        self.released.store(true, Ordering::Release);
        let client = lock(&self.client).take();
        if let Some(client) = client {
            let _ = tokio::time::timeout(wait, client.batch_execute("ROLLBACK")).await;
        }
    }
}

/// How long a node waits before it tries to hold its row again once the connection
/// that held it ended.
const HOLD_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Locks node `node`'s row in a transaction left open on a connection of its own, or
/// refuses if another process holds it after 3 s (a process killed a moment ago is given
/// time to be seen gone). The server releases the lock when the connection ends, however
/// the process ends; when the connection ends and the process lives on, the row is
/// locked again (`hold_again`).
async fn hold(config: &tokio_postgres::Config, node: i32, name: &str) -> Result<Arc<Hold>, String> {
    let hold = Arc::new(Hold {
        client: Mutex::new(None),
        released: AtomicBool::new(false),
    });
    let client = connect_and_lock(config, node, name, &hold).await?;
    *lock(&hold.client) = Some(client);
    Ok(hold)
}

/// One connection locking the node's row, watched: when it ends, the row is held again.
async fn connect_and_lock(
    config: &tokio_postgres::Config,
    node: i32,
    name: &str,
    hold: &Arc<Hold>,
) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| describe(&e))?;
    let (again, config, shown) = (Arc::downgrade(hold), config.clone(), name.to_string());
    // Set once this connection holds the row: one that never did (its lock refused or
    // failed) ends without a second attempt of its own, or every refused attempt would
    // start another.
    let holding = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&holding);
    tokio::spawn(async move {
        let ended = connection.await;
        let Some(hold) = again.upgrade() else { return };
        if hold.released.load(Ordering::Acquire) || !held.load(Ordering::Acquire) {
            return;
        }
        let why = match ended {
            Err(err) => describe(&err),
            Ok(()) => "closed".to_string(),
        };
        tracing::warn!(
            node = %shown,
            "the connection that holds the node for this process ended ({why}): holding it \
             again (until then a second process of the node could open it, and would fence \
             this one's writes with the node's epoch)"
        );
        hold_again(config, node, shown, hold);
    });
    // `node` is a number: nothing of the name enters the statement.
    let statement = format!(
        "SET idle_in_transaction_session_timeout = 0; SET statement_timeout = 0; \
         BEGIN; SET LOCAL lock_timeout = '3s'; \
         SELECT node FROM parkway_nodes WHERE node = {node} FOR NO KEY UPDATE"
    );
    match client.batch_execute(&statement).await {
        Ok(()) => {
            holding.store(true, Ordering::Release);
            Ok(client)
        }
        Err(err) if err.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => Err(format!(
            "node {name} is held by another parkway process: each process sharing a \
             database is a node of its own name (`--node`)"
        )),
        Err(err) => Err(format!("holding node {name} failed: {}", describe(&err))),
    }
}

/// Lock the node's row again, every [`HOLD_AGAIN_AFTER`] until it is locked, the hold is
/// released, or another process holds the node (which then fences this one's writes).
fn hold_again(config: tokio_postgres::Config, node: i32, name: String, hold: Arc<Hold>) {
    let again = Arc::downgrade(&hold);
    drop(hold);
    tokio::spawn(Box::pin(async move {
        loop {
            tokio::time::sleep(HOLD_AGAIN_AFTER).await;
            let Some(hold) = again.upgrade() else { return };
            if hold.released.load(Ordering::Acquire) {
                return;
            }
            match connect_and_lock(&config, node, &name, &hold).await {
                Ok(client) => {
                    if hold.released.load(Ordering::Acquire) {
                        return;
                    }
                    *lock(&hold.client) = Some(client);
                    tracing::info!(node = %name, "holding the node for this process again");
                    return;
                }
                Err(why) if why.contains("held by another parkway process") => {
                    tracing::error!(
                        node = %name,
                        "another process holds the node now: its epoch refuses this one's writes"
                    );
                    return;
                }
                Err(_) => {}
            }
        }
    })
        as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>);
}

#[cfg(test)]
mod tests;
