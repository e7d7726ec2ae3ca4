//! The PostgreSQL engine (feature `postgres`): every space in one table of a database,
//! a group commit in one statement, reads served by a pool of connections.
//!
//! The schema (`docs/postgres.md`), made by the migrations in [`MIGRATIONS`] in the
//! connection's schema (its `search_path`), is one table, `parkway_kv`: `space`, `slot`,
//! `key`, `value`, keyed by the first three in that order. `space` is [`Space::index`],
//! one table's worth of rows as a data directory's keyspace is; within it, rows are keyed
//! by slot first: `slot` is the key's slot for a space whose keys start with one
//! ([`Space::is_slotted`]), the node's own negative number for its log and its ids'
//! counters, `-1` for what every node shares (the format version, the doors), so one
//! slot's rows of a space are one range of the primary key, and a space reads in key
//! order from it. [`Space::Meta`] holds the format version as in any engine. The
//! applied migrations are rows of `parkway_migrations`.
//!
//! **Nodes share the database by the slots' leases** (`leases`): a process opens it as
//! a node (`default` unless named), one process per node, and owns the slots it holds
//! under leases. Every group commit checks, in the statement that writes, that the
//! node's epoch is still this process's and that it owns each slot written at the epoch
//! it took it, its lease not ended: a group that fails the slots' check is refused for
//! those slots (the writer writes it again without them, and the runtime gives them up),
//! one that fails the node's stops the store with an error that says so.
//!
//! A group is sent at [`Engine::write`]: each key's last mutation as one statement (a
//! delete and an upsert of arrays, in one implicit transaction), so a group commit is one
//! round trip, durable whole or not at all, and [`Engine::sync`] has nothing left to do.
//! Plain SQL throughout (no advisory lock, no `LISTEN`), so a database that speaks
//! PostgreSQL's protocol and SQL can stand in.
//!
//! The connections live on the engine's own Tokio runtime (two threads): the writer's
//! thread and the runtime's tasks, which call the [`Engine`] methods synchronously, wait
//! for them there, as they wait for a disk, and a runtime of one thread is not blocked
//! out of its own store.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use super::batch::last_per_key;
use super::engine::{Engine, LogChunk, ReadFailure, WriteFailure};
use super::layout::chunk_of;
use super::owners::Owners;
use super::{Batch, Entries, FORMAT_VERSION, Op, OpenError, Space, VERSION_KEY};
use crate::slot::Slot;
use crate::sync::lock;

mod leases;

use super::owners::Leasing;
use leases::Leases;

/// The schema's migrations, in order: the `n`th (from 1) is applied once, in a
/// transaction, to a database whose `parkway_migrations` lacks `n`.
const MIGRATIONS: &[&str] = &[
    "CREATE TABLE parkway_kv (
        slot int4 NOT NULL,
        space int2 NOT NULL,
        key bytea NOT NULL,
        value bytea NOT NULL,
        PRIMARY KEY (space, slot, key)
    );
    CREATE TABLE parkway_holder (id int4 PRIMARY KEY);
    INSERT INTO parkway_holder VALUES (1);
    CREATE TABLE parkway_fence (
        id int4 PRIMARY KEY,
        epoch int8 NOT NULL,
        taken_at timestamptz
    );
    INSERT INTO parkway_fence VALUES (1, 0, NULL);",
    // Nodes and the slots' leases replace the whole database's hold and fence; the log
    // and the ids' counters become node 1's (`default`), whose they were.
    "CREATE TABLE parkway_nodes (
        node int4 PRIMARY KEY,
        name text NOT NULL UNIQUE
    );
    CREATE TABLE parkway_holds (
        node int4 PRIMARY KEY REFERENCES parkway_nodes (node),
        epoch int8 NOT NULL,
        seen_at timestamptz,
        address text
    );
    CREATE TABLE parkway_slots (
        slot int4 PRIMARY KEY,
        owner int4 REFERENCES parkway_nodes (node),
        epoch int8 NOT NULL DEFAULT 0,
        lease_end timestamptz
    );
    INSERT INTO parkway_slots (slot) SELECT generate_series(0, 1023);
    INSERT INTO parkway_nodes VALUES (1, 'default');
    INSERT INTO parkway_holds VALUES (1, 0, NULL, NULL);
    UPDATE parkway_kv SET slot = -2 WHERE slot = -1 AND space IN (4, 5);
    DROP TABLE parkway_holder;
    DROP TABLE parkway_fence;",
    // The write audit (`Leasing::audit`): a row per slot of each group commit sent, in
    // the order the statements took their locks; and what each node holds under the
    // ceilings, published at each round.
    "CREATE TABLE parkway_audit (
        seq bigserial PRIMARY KEY,
        slot int4 NOT NULL,
        epoch int8 NOT NULL,
        node int4 NOT NULL,
        node_epoch int8 NOT NULL,
        applied bool NOT NULL,
        at timestamptz NOT NULL DEFAULT now()
    );
    ALTER TABLE parkway_holds
        ADD COLUMN caller int8 NOT NULL DEFAULT 0,
        ADD COLUMN user_asks int8 NOT NULL DEFAULT 0;",
    // One event log for every node, numbered in commit order from one counter row
    // (`docs/durability.md`): the nodes' own logs move into it, node 1's (`default`)
    // first and keeping its numbers, each other node's after it, numbered on. Each
    // node's row keeps the token of its last group commit and where that put its log,
    // so a group commit sent again after its connection failed is known as made.
    "CREATE TABLE parkway_log (
        seq int8 PRIMARY KEY,
        n int4 NOT NULL,
        chunk bytea NOT NULL
    );
    WITH old AS (
        SELECT slot, value,
            ('x' || encode(substring(key from 1 for 8), 'hex'))::bit(64)::int8 AS seq,
            ('x' || encode(substring(key from 9 for 4), 'hex'))::bit(32)::int4 AS n
        FROM parkway_kv WHERE space = 4 AND length(key) = 12
    ), base AS (
        SELECT coalesce((SELECT min(seq) FROM old WHERE slot = -2), 1) AS first
    )
    INSERT INTO parkway_log (seq, n, chunk)
    SELECT (SELECT first FROM base)
            + coalesce(sum(n) OVER (ORDER BY slot DESC, seq
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0),
        n, value
    FROM old;
    DELETE FROM parkway_kv WHERE space = 4;
    CREATE TABLE parkway_log_head (id int4 PRIMARY KEY, next int8 NOT NULL);
    INSERT INTO parkway_log_head SELECT 1, coalesce(max(seq + n), 1) FROM parkway_log;
    ALTER TABLE parkway_holds
        ADD COLUMN last_group int8,
        ADD COLUMN last_seq int8;",
    // A group commit stages its log chunk; one short transaction at a time numbers what
    // is staged (`NUMBER`), off the commit path.
    "CREATE TABLE parkway_log_staged (
        id bigserial PRIMARY KEY,
        n int4 NOT NULL,
        chunk bytea NOT NULL
    );",
];

/// Connections kept open for reads and the writer.
const POOL_SIZE: usize = 8;

/// Connections of the leases' own: a renewal never waits behind reads and group commits
/// for a connection (a storm of expiries on 1M parks kept all eight busy, and the
/// renewals missed their third of a lease, so the nodes gave their slots up and took
/// them again without end).
const LEASE_POOL_SIZE: usize = 2;

/// How long a connection may take to open when the URL does not say
/// (`connect_timeout`): a database that does not answer is refused, not waited on.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a caller waits for a connection of the pool before its read or sync fails.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// How long a statement may run (`statement_timeout`) unless the URL's `options` say.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a statement is sent again while its connection fails.
const RETRY_FOR: Duration = Duration::from_secs(30);

/// How long a caller waits for the database at most: past the statement timeout, a
/// server that no longer answers at all (a network cut, which TCP may take hours to
/// notice) fails the read or the group commit rather than holding its caller.
const CLIENT_WAIT: Duration = Duration::from_secs(40);

/// How long a close waits for the server to release the database's hold.
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// The slot of a row of the spaces every node shares (the format version, the doors).
const SHARED: i32 = -1;

/// A group commit: the mutations of a group, each key's last (no key is both deleted
/// and put), written only if the node's epoch is still this process's (`$10`, `$11`)
/// and this node owns each slot the group writes (`$8`) at the epoch it took it (`$9`),
/// its lease not ended; it returns the node's epoch it found and the slots it did not
/// own. The node's and the slots' rows are read `FOR SHARE`, so a node that takes one
/// of them (moving its epoch on) waits for a group commit under way, and every later
/// one sees the new epoch and writes nothing. Every statement that locks rows of
/// `parkway_slots` locks them in slot order, so none waits on another in a circle.
/// With `$12` (the write audit), each slot written adds a row to `parkway_audit`, with
/// the epoch the group claimed and whether it was applied, numbered once the locks
/// are taken.
///
/// The group's log (`$14`, a chunk of `$13` entries; none if `$13` is 0) is staged, to
/// be numbered by [`NUMBER`] after the commit: a group commit of one node never waits
/// for another's.
///
/// `$15` is the group commit's token, new for each statement the node sends: a
/// statement sent again after its connection failed, which the server had made,
/// finds its token in the node's row and answers as it did, writing nothing again.
const WRITE: &str = "WITH node AS (
        SELECT epoch, last_group FROM parkway_holds WHERE node = $10
        FOR NO KEY UPDATE
    ), made AS (
        SELECT coalesce((SELECT epoch FROM node) = $11
            AND (SELECT last_group FROM node) = $15, false) AS made
    ), owned AS (
        SELECT s.slot FROM parkway_slots AS s
        JOIN unnest($8::int4[], $9::int8[]) AS w(slot, epoch)
          ON s.slot = w.slot AND s.epoch = w.epoch
        WHERE s.owner = $10 AND s.lease_end > now()
        ORDER BY s.slot
        FOR SHARE OF s
    ), ok AS (
        SELECT NOT (SELECT made FROM made)
           AND (SELECT epoch FROM node) = $11
           AND (SELECT count(*) FROM owned) = cardinality($8::int4[]) AS ok
    ), gone AS (
        DELETE FROM parkway_kv AS kv
        USING unnest($1::int4[], $2::int2[], $3::bytea[]) AS d(slot, space, key)
        WHERE kv.slot = d.slot AND kv.space = d.space AND kv.key = d.key
          AND (SELECT ok FROM ok)
    ), put AS (
        INSERT INTO parkway_kv (slot, space, key, value)
        SELECT * FROM unnest($4::int4[], $5::int2[], $6::bytea[], $7::bytea[])
        WHERE (SELECT ok FROM ok)
        ON CONFLICT (space, slot, key) DO UPDATE SET value = excluded.value
    ), audit AS (
        INSERT INTO parkway_audit (slot, epoch, node, node_epoch, applied)
        SELECT w.slot, w.epoch, $10, $11, (SELECT ok FROM ok)
        FROM unnest($8::int4[], $9::int8[]) AS w(slot, epoch)
        WHERE $12 AND NOT (SELECT made FROM made)
    ), staged AS (
        INSERT INTO parkway_log_staged (n, chunk)
        SELECT $13, $14 WHERE $13 > 0 AND (SELECT ok FROM ok)
    ), marked AS (
        UPDATE parkway_holds SET last_group = $15
        WHERE node = $10 AND (SELECT ok FROM ok)
    )
    SELECT (SELECT epoch FROM node),
        CASE WHEN (SELECT made FROM made) THEN '{}'::int4[] ELSE
            array(SELECT w.slot FROM unnest($8::int4[]) AS w(slot)
                  WHERE w.slot NOT IN (SELECT slot FROM owned)) END";

/// Numbers the staged chunks of the log, at most 1000, in the order they were staged,
/// from the one counter row, which it holds locked until it commits: numbers are given
/// in the order of these statements' commits, so a reader that has read up to a number
/// never meets a smaller one later, and the log has no gap. A chunk is staged by its
/// group commit and numbered once (a statement that waited for another's lock finds
/// the chunks that one numbered gone). A node's chunks are staged in its commit order,
/// and a slot's last commit on one node is staged before the first on the next, so a
/// subject's entries keep their order. It deletes the chunks then wholly further back
/// than `$1` entries from the log's end (and does not keep those it numbers that are),
/// and answers how many chunks it numbered.
const NUMBER: &str = "WITH head AS (
        SELECT next FROM parkway_log_head WHERE id = 1 FOR UPDATE
    ), moved AS (
        DELETE FROM parkway_log_staged
        WHERE id IN (SELECT id FROM parkway_log_staged ORDER BY id LIMIT 1000)
          AND (SELECT next FROM head) > 0
        RETURNING id, n, chunk
    ), numbered AS (
        SELECT (SELECT next FROM head) + coalesce(sum(n) OVER (ORDER BY id
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS seq,
            n, chunk
        FROM moved
    ), ends AS (
        SELECT (SELECT next FROM head) + (SELECT coalesce(sum(n), 0) FROM moved) AS next
    ), logged AS (
        INSERT INTO parkway_log (seq, n, chunk)
        SELECT seq, n, chunk FROM numbered WHERE seq + n > (SELECT next FROM ends) - $1
    ), advanced AS (
        UPDATE parkway_log_head SET next = (SELECT next FROM ends)
        WHERE id = 1 AND EXISTS (SELECT 1 FROM moved)
    ), trimmed AS (
        DELETE FROM parkway_log
        WHERE seq < (SELECT next FROM ends) - $1
          AND seq + n <= (SELECT next FROM ends) - $1
    )
    SELECT count(*) FROM moved";

/// The number the log's next entry gets.
const LOG_NEXT: &str = "SELECT next FROM parkway_log_head WHERE id = 1";

/// The chunks of the log holding entries from `$1` on: the one holding `$1`, if kept,
/// then up to `$2` after it, in order.
const LOG_CHUNKS: &str = "(SELECT seq, n, chunk FROM parkway_log WHERE seq <= $1
        ORDER BY seq DESC LIMIT 1)
    UNION ALL
    (SELECT seq, n, chunk FROM parkway_log WHERE seq > $1 ORDER BY seq LIMIT $2)
    ORDER BY seq";

/// Writes the format version (`$1`, `$2`, `$3`: its space, key and value) into a table
/// that holds no row, and returns how many rows it wrote. Of two opens at once, the
/// second waits for the first's row and writes none.
const VERSION_IF_EMPTY: &str = "WITH written AS (
        INSERT INTO parkway_kv (space, slot, key, value)
        SELECT $1, -1, $2, $3 WHERE NOT EXISTS (SELECT 1 FROM parkway_kv)
        ON CONFLICT (space, slot, key) DO NOTHING
        RETURNING 1
    )
    SELECT count(*) FROM written";

/// How many rows the store holds.
const COUNT: &str = "SELECT count(*) FROM parkway_kv";

/// A space's keys, in key order.
const KEYS: &str = "SELECT key FROM parkway_kv WHERE space = $1 ORDER BY slot, key";

/// The keys of a space of the runtime's own, this node's or shared, in key order.
const KEYS_IN_SLOT: &str = "SELECT key FROM parkway_kv WHERE space = $1 AND slot = $2 ORDER BY key";

/// One key's value.
const GET: &str = "SELECT value FROM parkway_kv WHERE space = $1 AND slot = $2 AND key = $3";

/// A range within one slot of a space (or within a space of the runtime's), bounded
/// above, in key order.
const RANGE_IN_SLOT: &str = "SELECT key, value FROM parkway_kv
    WHERE space = $1 AND slot = $2 AND key >= $3 AND key < $4 ORDER BY key LIMIT $5";

/// A range within one slot of a space (or within a space of the runtime's) to its end.
const RANGE_IN_SLOT_TO_END: &str = "SELECT key, value FROM parkway_kv
    WHERE space = $1 AND slot = $2 AND key >= $3 ORDER BY key LIMIT $4";

/// A range of a space across its slots, bounded above, in key order: `(slot, key)`
/// orders as the key does ([`slot_of`]), so the primary key reads it in order and stops
/// at its end. (A range within one slot names it: the planner, which cannot tell how
/// few rows a row comparison bounds, then reads the key's range, not the space.)
const RANGE: &str = "SELECT key, value FROM parkway_kv
    WHERE space = $1 AND (slot, key) >= ($2, $3) AND (slot, key) < ($4, $5)
    ORDER BY slot, key LIMIT $6";

/// A range of a space to its end, in key order.
const RANGE_TO_END: &str = "SELECT key, value FROM parkway_kv
    WHERE space = $1 AND (slot, key) >= ($2, $3) ORDER BY slot, key LIMIT $4";

/// A database opened as a store.
pub(super) struct Postgres {
    /// The runtime the connections live on; taken when the engine is closed.
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// Where work is sent to it.
    handle: tokio::runtime::Handle,
    /// The connections.
    pool: Pool,
    /// Set by [`Engine::close`]: every later use fails.
    closed: AtomicBool,
    /// The connection whose open transaction holds the node's row locked while the
    /// store is open, so a second process of the same node is refused; dropped (and the
    /// lock released by the server) when the store is closed or the process ends.
    holder: Mutex<Option<Arc<leases::Hold>>>,
    /// The node's hold and the slots it owns.
    leases: Arc<Leases>,
    /// The leases' own connections.
    lease_pool: Pool,
    /// Whether each group commit adds its rows to `parkway_audit` ([`Leasing::audit`]).
    audit: bool,
    /// How many entries the log keeps ([`Engine::keep_log`]).
    log_kept: AtomicU64,
    /// The token of the next group commit: from a random start, so no token of an
    /// earlier process of the node is met again.
    token: AtomicU64,
    /// The next group commit is sent twice, this SQL run between (tests).
    #[cfg(test)]
    twice: Mutex<Option<&'static str>>,
}

impl Postgres {
    /// Connects to the database at `url`, applies the migrations it lacks, holds the
    /// node `leasing` names and takes its share of the slots, and checks (or, in a
    /// database with no row yet, writes) the format version.
    pub(super) fn open(url: &str, leasing: &Leasing) -> Result<Postgres, OpenError> {
        let database = shown(url);
        let refused = |cause: String| OpenError::Database {
            database: database.clone(),
            cause,
        };
        if let Some(problem) = leasing.problem() {
            return Err(refused(problem));
        }
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|err| refused(format!("not a PostgreSQL URL: {}", describe(&err))))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // The server's views (`pg_stat_activity`) name its connections.
        if config.get_application_name().is_none() {
            config.application_name("parkway");
        }
        // A statement that waits past this fails, and the store with it, loudly: a lock
        // taken by hand, a server that stopped answering. Every statement is planned for
        // its parameters and the table as it is now: a plan cached while the table was
        // small scans all of it once it is not (a group commit's delete took 60-100 ms
        // for 100 keys of 230k rows). The URL's own options follow, so its settings win.
        let options = format!(
            "-c statement_timeout={} -c plan_cache_mode=force_custom_plan {}",
            STATEMENT_TIMEOUT.as_millis(),
            config.get_options().unwrap_or("")
        );
        config.options(options.trim_end());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("parkway-postgres")
            .enable_all()
            .build()
            .map_err(|err| refused(format!("cannot start its connections' threads: {err}")))?;
        let pooled = |size: usize| {
            let manager = Manager::from_config(
                config.clone(),
                NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            Pool::builder(manager)
                .max_size(size)
                .runtime(deadpool_postgres::Runtime::Tokio1)
                .wait_timeout(Some(POOL_WAIT))
                .build()
                .map_err(|err| refused(err.to_string()))
        };
        let pool = pooled(POOL_SIZE)?;
        let lease_pool = pooled(LEASE_POOL_SIZE)?;
        let handle = runtime.handle().clone();
        let audit = leasing.audit;
        let (opening, leasing) = (lease_pool.clone(), leasing.clone());
        let opened = wait_on(&handle, async move {
            migrate(&opening).await?;
            Leases::open(&opening, &config, &leasing).await
        })
        .and_then(|done| done);
        let (leases, holder) = match opened {
            Ok(opened) => opened,
            Err(cause) => {
                // Not dropped where it would wait: the caller may be a task.
                runtime.shutdown_background();
                return Err(refused(cause));
            }
        };
        let leases = Arc::new(leases);
        handle.spawn(Arc::clone(&leases).keep(lease_pool.clone()));
        let engine = Postgres {
            handle,
            runtime: Mutex::new(Some(runtime)),
            pool,
            closed: AtomicBool::new(false),
            holder: Mutex::new(Some(holder)),
            leases,
            lease_pool,
            audit,
            log_kept: AtomicU64::new(super::LOG_CAPACITY),
            // Positive in `int8`.
            token: AtomicU64::new(rand::random::<u64>() >> 2),
            #[cfg(test)]
            twice: Mutex::new(None),
        };
        engine.check_version(&database)?;
        Ok(engine)
    }

    /// Checks the format version, writing it into a database that holds no row yet.
    fn check_version(&self, database: &str) -> Result<(), OpenError> {
        let refused = |cause: String| OpenError::Database {
            database: database.to_string(),
            cause,
        };
        match self
            .get(Space::Meta, VERSION_KEY)
            .map_err(|e| refused(e.cause))?
        {
            Some(found) if found == FORMAT_VERSION.to_string().as_bytes() => Ok(()),
            Some(found) => Err(refused(format!(
                "it holds format version {}, this build reads version {FORMAT_VERSION}",
                String::from_utf8_lossy(&found)
            ))),
            None => {
                // Written only into an empty table, and read again: of nodes opening a
                // new database at once, one writes it and the others read it.
                let pool = self.pool.clone();
                let inserted = self
                    .run(async move {
                        let version = FORMAT_VERSION.to_string().into_bytes();
                        let row = query(
                            &pool,
                            VERSION_IF_EMPTY,
                            &[&space_number(Space::Meta), &VERSION_KEY, &version],
                        )
                        .await
                        .map_err(|failure| failure.cause)?;
                        Ok::<i64, String>(row.first().map_or(0, |row| row.get(0)))
                    })
                    .and_then(|done| done)
                    .map_err(refused)?;
                if inserted == 1 {
                    return Ok(());
                }
                if self
                    .get(Space::Meta, VERSION_KEY)
                    .map_err(|e| refused(e.cause))?
                    .is_some()
                {
                    return self.check_version(database);
                }
                let rows = self.one_number(COUNT).map_err(refused)?;
                Err(refused(format!(
                    "its table parkway_kv holds {rows} rows but no format version"
                )))
            }
        }
    }

    /// Runs `work` on the engine's runtime and waits for it on this thread.
    fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, String> {
        if self.closed.load(Ordering::Acquire) {
            return Err("the store is closed".into());
        }
        wait_on(&self.handle, work)
    }

    /// The row's slot of `key` in `space` for this node ([`slot_of`]).
    fn slot_of(&self, space: Space, key: &[u8]) -> i32 {
        slot_of(self.leases.node, space, key)
    }

    /// The number a statement of one row and one `int8` column returns.
    fn one_number(&self, sql: &'static str) -> Result<i64, String> {
        self.read(sql, Params(Vec::new()), |rows| {
            rows.first().map(|row| row.get::<_, i64>(0))
        })
        .map_err(|failure| failure.cause)?
        .ok_or_else(|| format!("the statement returned no row: {sql}"))
    }

    /// Runs a read of rows on a pooled connection.
    fn read<T: Send + 'static>(
        &self,
        sql: &'static str,
        params: Params,
        rows: impl FnOnce(Vec<tokio_postgres::Row>) -> T + Send + 'static,
    ) -> Result<T, ReadFailure> {
        let pool = self.pool.clone();
        self.run(async move {
            let found = query(&pool, sql, &params.refs())
                .await
                .map_err(|failure| ReadFailure {
                    damaged: failure.damaged,
                    cause: failure.cause,
                })?;
            Ok(rows(found))
        })
        .map_err(ReadFailure::from)?
    }
}

impl Postgres {
    /// Stop keeping the leases after a failure that stopped the store: every slot is
    /// given back (if the node's epoch is still this process's) and none taken again.
    fn stop_leasing(&self) {
        if self.leases.is_stopped() {
            return;
        }
        tracing::error!(node = %self.leases.name(), "the store stopped: the node gives its slots back to the other nodes and takes none");
        let (pool, leases) = (self.lease_pool.clone(), Arc::clone(&self.leases));
        self.handle.spawn(async move { leases.leave(&pool).await });
    }
}

impl Engine for Postgres {
    /// Sends the group as one statement, which commits it (durable at once: the sync
    /// has nothing left to do), or refuses it whole for the slots this node does not
    /// serve now or the database says it does not own.
    fn write(&self, group: &mut Vec<Batch>, _generation: u64) -> Result<(), WriteFailure> {
        if self.closed.load(Ordering::Acquire) {
            return Err(WriteFailure::Failed("the store is closed".into()));
        }
        let mut slots: Vec<Slot> = group.iter().filter_map(Batch::slot).collect();
        slots.sort_unstable();
        slots.dedup();
        let (mut owned, mut epochs, mut away) = (Vec::new(), Vec::new(), Vec::new());
        for slot in slots {
            match self.leases.serving(slot) {
                Some(epoch) => {
                    owned.push(i32::from(slot.number()));
                    epochs.push(epoch);
                }
                None => away.push(slot),
            }
        }
        if !away.is_empty() {
            // Given up here as the runtime gives them up: a slot the runtime no longer
            // serves and the leases still renewed would be this node's in the database
            // and refused by it for good. Forgotten, it is taken again under its next
            // epoch (or by another node once its lease ends).
            self.leases.lost(&away);
            return Err(WriteFailure::NotOwner(away));
        }
        let pool = self.pool.clone();
        let (node, epoch, audit) = (self.leases.node, self.leases.epoch, self.audit);
        let token = i64::try_from(self.token.fetch_add(1, Ordering::Relaxed)).unwrap_or(0);
        #[cfg(test)]
        let twice = lock(&self.twice).take();
        #[cfg(not(test))]
        let twice: Option<&'static str> = None;
        // The batches go to the engine's runtime and come back with the answer (the
        // writer writes them again, without some, if a slot is refused).
        let batches = std::mem::take(group);
        let answer = self.run(async move {
            let sent = async {
                let mut gone = Columns::default();
                let mut put = Columns::default();
                let mut values: Vec<&[u8]> = Vec::new();
                // The group's log, under the key of `(0, n)`: numbered by the
                // statement (`super::log::unnumbered`).
                let (mut logged, mut chunk): (i32, &[u8]) = (0, &[]);
                for op in last_per_key(&batches) {
                    match op {
                        Op::Put {
                            space: Space::Events,
                            key,
                            value,
                        } if matches!(chunk_of(key), Some((0, _))) => {
                            let count = chunk_of(key).map_or(0, |(_, count)| count);
                            logged = i32::try_from(count).unwrap_or(i32::MAX);
                            chunk = value;
                        }
                        Op::Put { space, key, value } => {
                            put.push(node, *space, key);
                            values.push(value);
                        }
                        Op::Delete { space, key } => gone.push(node, *space, key),
                    }
                }
                // Sent again after a failure of the connection: the statement puts each
                // key's last value and deletes what it deletes, so a group commit the
                // server made before the connection failed is made again to the same
                // effect.
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 15] = [
                    &gone.slots,
                    &gone.spaces,
                    &gone.keys,
                    &put.slots,
                    &put.spaces,
                    &put.keys,
                    &values,
                    &owned,
                    &epochs,
                    &node,
                    &epoch,
                    &audit,
                    &logged,
                    &chunk,
                    &token,
                ];
                let mut rows = query(&pool, WRITE, &params)
                    .await
                    .map_err(|failure| failure.cause)?;
                if let Some(between) = twice {
                    let client = pool.get().await.map_err(|e| e.to_string())?;
                    client
                        .batch_execute(between)
                        .await
                        .map_err(|e| e.to_string())?;
                    rows = query(&pool, WRITE, &params)
                        .await
                        .map_err(|failure| failure.cause)?;
                }
                let row = rows.first().ok_or("the group commit returned no row")?;
                Ok::<_, String>((row.get::<_, Option<i64>>(0), row.get::<_, Vec<i32>>(1)))
            }
            .await;
            (batches, sent)
        });
        // A failed group commit stops the store: the node gives its slots back at once,
        // so the other nodes serve them rather than wait for a node that serves none.
        let failed = |cause: String| {
            self.stop_leasing();
            WriteFailure::Failed(cause)
        };
        let (batches, sent) = answer.map_err(failed)?;
        *group = batches;
        let (found, refused) = sent.map_err(failed)?;
        if found != Some(epoch) {
            return Err(failed(format!(
                "another process took node {} over (its epoch is {}, this process's was \
                 {epoch}): nothing more is written from this one",
                self.leases.name(),
                found.map_or("gone".to_string(), |e| e.to_string())
            )));
        }
        if !refused.is_empty() {
            let refused: Vec<Slot> = refused
                .into_iter()
                .filter_map(|n| Slot::numbered(u16::try_from(n).ok()?))
                .collect();
            tracing::warn!(slots = ?refused.iter().map(|s| s.number()).collect::<Vec<_>>(), "the database refused a write to slots this node no longer owns");
            self.leases.lost(&refused);
            return Err(WriteFailure::NotOwner(refused));
        }
        // The log staged is numbered later ([`Engine::number_log`]).
        Ok(())
    }

    /// The log is every node's, numbered in commit order by the statement that commits.
    fn numbers_log(&self) -> bool {
        true
    }

    fn keep_log(&self, entries: u64) {
        self.log_kept.store(entries.max(1), Ordering::Relaxed);
    }

    fn number_log(&self) -> Result<u64, String> {
        let kept = i64::try_from(self.log_kept.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        let pool = self.pool.clone();
        let numbered = self.run(async move {
            let rows = query(&pool, NUMBER, &[&kept])
                .await
                .map_err(|failure| failure.cause)?;
            Ok::<i64, String>(rows.first().map_or(0, |row| row.get(0)))
        })??;
        Ok(u64::try_from(numbered).unwrap_or(0))
    }

    fn log_next(&self) -> Result<u64, ReadFailure> {
        let next = self.read(LOG_NEXT, Params(Vec::new()), |rows| {
            rows.first().map(|row| row.get::<_, i64>(0))
        })?;
        match next.map(u64::try_from) {
            Some(Ok(next)) if next > 0 => Ok(next),
            found => Err(ReadFailure {
                damaged: true,
                cause: format!("the log's counter row holds {found:?}"),
            }),
        }
    }

    fn log_chunks(&self, from: u64, limit: usize) -> Result<Vec<LogChunk>, ReadFailure> {
        let from = i64::try_from(from).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self.read(
            LOG_CHUNKS,
            Params(vec![Param::Big(from), Param::Big(limit)]),
            |rows| rows,
        )?;
        rows.iter()
            .map(|row| {
                let (seq, n) = (row.get::<_, i64>(0), row.get::<_, i32>(1));
                match (u64::try_from(seq), u32::try_from(n)) {
                    (Ok(seq), Ok(n)) if seq > 0 => Ok((seq, n, row.get::<_, Vec<u8>>(2))),
                    _ => Err(ReadFailure {
                        damaged: true,
                        cause: format!("a chunk of the log says it holds {n} entries from {seq}"),
                    }),
                }
            })
            .collect()
    }

    /// Nothing to do: each group was committed as it was written.
    fn sync(&self) -> Result<bool, String> {
        if self.closed.load(Ordering::Acquire) {
            return Err("the store is closed".into());
        }
        Ok(true)
    }

    fn owners(&self) -> Option<Owners> {
        self.leases.owners()
    }

    fn release(&self, slot: Slot) -> Result<(), String> {
        let (pool, leases) = (self.lease_pool.clone(), Arc::clone(&self.leases));
        self.run(async move { leases.release(&pool, slot).await })?
    }

    fn serves(&self, slot: Slot) -> bool {
        if self.leases.serving(slot).is_some() {
            return true;
        }
        self.leases.lost(&[slot]);
        false
    }

    fn owner(&self, slot: Slot) -> Option<Arc<str>> {
        self.leases.owner(slot)
    }

    #[cfg(test)]
    fn lease_round(&self) -> Result<(), String> {
        let (pool, leases) = (self.lease_pool.clone(), Arc::clone(&self.leases));
        self.run(async move {
            leases.round(&pool).await?;
            leases.expire();
            Ok(())
        })?
    }

    #[cfg(test)]
    fn lapse_served(&self, slot: Slot) {
        self.leases.lapse_served(slot);
    }

    #[cfg(test)]
    fn send_next_twice(&self, between: &'static str) {
        *lock(&self.twice) = Some(between);
    }

    /// Closes the connections and stops their runtime (without waiting: it may be
    /// called on a task of another runtime).
    fn close(&self, _flush: bool) {
        let holder = lock(&self.holder).take();
        if let Some(holder) = holder {
            // What this node staged is numbered under its capacity, not left to the
            // next reader's.
            if let Err(cause) = self.number_log() {
                tracing::warn!(%cause, "the log's staged chunks were not numbered at close");
            }
            // The slots first, so other nodes take them at once; then the node.
            let (pool, leases) = (self.lease_pool.clone(), Arc::clone(&self.leases));
            let _ = self.run(async move {
                let _ = tokio::time::timeout(RELEASE_WAIT, leases.leave(&pool)).await;
            });
            // Released at once, so a process that opens the database next finds it free;
            // a server that does not answer releases it when it sees the connection end.
            let _ = self.run(async move { holder.release(RELEASE_WAIT).await });
        }
        self.closed.store(true, Ordering::Release);
        self.pool.close();
        self.lease_pool.close();
        if let Some(runtime) = lock(&self.runtime).take() {
            runtime.shutdown_background();
        }
    }

    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        let params = vec![
            Param::Small(space_number(space)),
            Param::Int(self.slot_of(space, key)),
            Param::Bytes(key.to_vec()),
        ];
        self.read(GET, Params(params), |rows| {
            rows.into_iter().next().map(|row| row.get::<_, Vec<u8>>(0))
        })
    }

    fn range_from(
        &self,
        space: Space,
        from: &[u8],
        within: &[u8],
        limit: usize,
    ) -> Result<Entries, ReadFailure> {
        let start = from.max(within).to_vec();
        let end = successor(within);
        let limit = Param::Big(i64::try_from(limit).unwrap_or(i64::MAX));
        let space_number = Param::Small(space_number(space));
        let slot = self.slot_of(space, &start);
        let in_one_slot = match &end {
            Some(end) => self.slot_of(space, end) == slot || within.len() >= 2,
            None => !space.is_slotted(),
        };
        let (sql, params) = match (in_one_slot, end) {
            (true, Some(end)) => (
                RANGE_IN_SLOT,
                vec![
                    space_number,
                    Param::Int(slot),
                    Param::Bytes(start),
                    Param::Bytes(end),
                    limit,
                ],
            ),
            (true, None) => (
                RANGE_IN_SLOT_TO_END,
                vec![space_number, Param::Int(slot), Param::Bytes(start), limit],
            ),
            (false, Some(end)) => (
                RANGE,
                vec![
                    space_number,
                    Param::Int(slot),
                    Param::Bytes(start),
                    Param::Int(self.slot_of(space, &end)),
                    Param::Bytes(end),
                    limit,
                ],
            ),
            (false, None) => (
                RANGE_TO_END,
                vec![space_number, Param::Int(slot), Param::Bytes(start), limit],
            ),
        };
        self.read(sql, Params(params), |rows| {
            rows.into_iter()
                .map(|row| (row.get::<_, Vec<u8>>(0), row.get::<_, Vec<u8>>(1)))
                .collect()
        })
    }

    fn prefixed(&self, space: Space, prefix: &[u8]) -> Result<Entries, ReadFailure> {
        self.range_from(space, prefix, prefix, usize::MAX)
    }

    fn keys(&self, space: Space) -> Result<Vec<Vec<u8>>, ReadFailure> {
        let (sql, params) = if space.is_slotted() {
            (KEYS, vec![Param::Small(space_number(space))])
        } else {
            let slot = self.slot_of(space, &[]);
            (
                KEYS_IN_SLOT,
                vec![Param::Small(space_number(space)), Param::Int(slot)],
            )
        };
        self.read(sql, Params(params), |rows| {
            rows.iter().map(|row| row.get::<_, Vec<u8>>(0)).collect()
        })
    }

    fn scan(&self, space: Space) -> Result<Entries, ReadFailure> {
        self.range_from(space, &[], &[], usize::MAX)
    }
}

/// Stops the connections' runtime if the engine was never closed.
impl Drop for Postgres {
    fn drop(&mut self) {
        self.close(false);
    }
}

/// Runs `work` on the runtime of `handle` and waits for it on this thread, for at most
/// [`CLIENT_WAIT`].
fn wait_on<T: Send + 'static>(
    handle: &tokio::runtime::Handle,
    work: impl Future<Output = T> + Send + 'static,
) -> Result<T, String> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(tokio::time::timeout(CLIENT_WAIT, work).await);
    });
    rx.recv()
        .map_err(|_| "the store is closed: its connections' runtime stopped".to_string())?
        .map_err(|_| {
            format!(
                "the database did not answer within {} s",
                CLIENT_WAIT.as_secs()
            )
        })
}

/// A failed statement: in words, whether sending it again may succeed (the connection
/// failed, not the statement), and whether the server says its data is damaged.
struct Failure {
    cause: String,
    transient: bool,
    damaged: bool,
    /// The statement broke a unique constraint (two nodes registering at once).
    unique_violation: bool,
}

impl Failure {
    /// A client's error: transient if the connection closed, failed to read or write,
    /// the server is going away or starting (SQLSTATE classes `08`, `57P01`-`57P03`),
    /// or it rolled the statement back to break a deadlock or a serialization conflict
    /// (`40P01`, `40001`): every statement of the engine has the same effect sent again.
    fn of(err: &tokio_postgres::Error) -> Failure {
        let code = err.code().map(SqlState::code).unwrap_or("");
        let io = std::error::Error::source(err).is_some_and(|cause| cause.is::<std::io::Error>());
        Failure {
            cause: describe(err),
            transient: err.is_closed()
                || io
                || code.starts_with("08")
                || matches!(code, "57P01" | "57P02" | "57P03" | "40P01" | "40001"),
            damaged: matches!(
                err.code(),
                Some(&SqlState::DATA_CORRUPTED | &SqlState::INDEX_CORRUPTED)
            ),
            unique_violation: err.code() == Some(&SqlState::UNIQUE_VIOLATION),
        }
    }

    /// A pool's failure to give a connection: transient unless the pool is closed.
    fn of_pool(err: &deadpool_postgres::PoolError) -> Failure {
        match err {
            deadpool_postgres::PoolError::Backend(err) => Failure::of(err),
            deadpool_postgres::PoolError::Closed => Failure {
                cause: "the store is closed".into(),
                transient: false,
                damaged: false,
                unique_violation: false,
            },
            other => Failure {
                cause: format!("no connection to the database: {other}"),
                transient: true,
                damaged: false,
                unique_violation: false,
            },
        }
    }
}

/// Runs `sql` on a pooled connection, sent again on another while the failure is
/// transient, for at most [`RETRY_FOR`]: a server that restarts, or a connection the
/// server ended, costs a wait rather than the store.
async fn query(
    pool: &Pool,
    sql: &'static str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>, Failure> {
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    let mut pause = Duration::from_millis(50);
    loop {
        let attempt = async {
            let client = pool.get().await.map_err(|e| Failure::of_pool(&e))?;
            let statement = client
                .prepare_cached(sql)
                .await
                .map_err(|e| Failure::of(&e))?;
            client
                .query(&statement, params)
                .await
                .map_err(|e| Failure::of(&e))
        }
        .await;
        match attempt {
            Err(failure) if failure.transient && tokio::time::Instant::now() + pause < deadline => {
                tracing::warn!(
                    "the database failed a statement ({}); sending it again in {} ms",
                    failure.cause,
                    pause.as_millis()
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            done => return done,
        }
    }
}

/// Applies the migrations the database lacks, each in its own transaction. Two nodes
/// that migrate at once: the second's transaction fails on the first's table or row,
/// and it reads the migrations again.
async fn migrate(pool: &Pool) -> Result<(), String> {
    let mut client = pool.get().await.map_err(|e| Failure::of_pool(&e).cause)?;
    for attempt in 0..10 {
        match migrate_once(&mut client).await {
            Ok(()) => return Ok(()),
            Err(err)
                if attempt < 9
                    && matches!(
                        err.code(),
                        Some(
                            &SqlState::UNIQUE_VIOLATION
                                | &SqlState::DUPLICATE_TABLE
                                | &SqlState::DUPLICATE_OBJECT
                                | &SqlState::T_R_DEADLOCK_DETECTED
                        )
                    ) =>
            {
                // Another node migrates at the same moment: read the migrations again
                // after a pause, different for each node.
                let pause = 20 + rand::random::<u64>() % 100;
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            Err(err) => return Err(format!("migrating its schema failed: {}", describe(&err))),
        }
    }
    Err("migrating its schema failed: another node kept migrating it".into())
}

/// One pass of [`migrate`].
async fn migrate_once(client: &mut tokio_postgres::Client) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS parkway_migrations (
                version int4 PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await?;
    let applied: i32 = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM parkway_migrations",
            &[],
        )
        .await?
        .get(0);
    for (number, migration) in (1i32..).zip(MIGRATIONS).skip(applied.max(0) as usize) {
        let transaction = client.transaction().await?;
        transaction.batch_execute(migration).await?;
        transaction
            .execute(
                "INSERT INTO parkway_migrations (version) VALUES ($1)",
                &[&number],
            )
            .await?;
        transaction.commit().await?;
    }
    Ok(())
}

/// One column each of a group's deletes or puts.
#[derive(Default)]
struct Columns<'a> {
    slots: Vec<i32>,
    spaces: Vec<i16>,
    keys: Vec<&'a [u8]>,
}

impl<'a> Columns<'a> {
    /// Adds a key of `space`, written by node `node`.
    fn push(&mut self, node: i32, space: Space, key: &'a [u8]) {
        self.slots.push(slot_of(node, space, key));
        self.spaces.push(space_number(space));
        self.keys.push(key);
    }
}

/// A parameter of a read.
enum Param {
    Small(i16),
    Int(i32),
    Big(i64),
    Bytes(Vec<u8>),
}

/// A read's parameters, owned, so the read can move to the engine's runtime.
struct Params(Vec<Param>);

impl Params {
    /// The parameters as the client takes them.
    fn refs(&self) -> Vec<&(dyn tokio_postgres::types::ToSql + Sync)> {
        self.0
            .iter()
            .map(|param| -> &(dyn tokio_postgres::types::ToSql + Sync) {
                match param {
                    Param::Small(n) => n,
                    Param::Int(n) => n,
                    Param::Big(n) => n,
                    Param::Bytes(bytes) => bytes,
                }
            })
            .collect()
    }
}

/// The row's slot of `key` in `space`, as node `node` keeps it: for a slotted space, the
/// key's first two bytes as a big-endian number (a shorter key padded with zeros, so
/// `(slot, key)` orders as the key does: a key before another never has a greater
/// slot); for the log and the ids' counters, which are each node's own, `-1 - node`;
/// [`SHARED`] for the rest (the format version, the doors).
fn slot_of(node: i32, space: Space, key: &[u8]) -> i32 {
    if matches!(space, Space::Events | Space::Ids) {
        return -1 - node;
    }
    if !space.is_slotted() {
        return SHARED;
    }
    let high = key.first().copied().unwrap_or(0);
    let low = key.get(1).copied().unwrap_or(0);
    i32::from(u16::from_be_bytes([high, low]))
}

/// The space's number in the table: its index, which the format version fixes.
fn space_number(space: Space) -> i16 {
    // Fifteen spaces: the index fits.
    space.index() as i16
}

/// The least key after every key that starts with `prefix`, or `None` if none is (an
/// empty prefix, or one of `0xff` bytes only).
fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&byte| byte != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

/// The database as errors name it: user, host, port and database from `url`, never its
/// password (a URL that does not parse is named `PostgreSQL`, as its text may hold one).
pub(super) fn shown(url: &str) -> String {
    let Ok(config) = url.parse::<tokio_postgres::Config>() else {
        return "PostgreSQL".into();
    };
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config
        .get_user()
        .map(|u| format!("{u}@"))
        .unwrap_or_default();
    let db = config.get_dbname().unwrap_or("");
    format!("postgres://{user}{host}:{port}/{db}")
}

/// A client error in words: the server's message and code, else the error and its cause.
fn describe(err: &tokio_postgres::Error) -> String {
    if let Some(db) = err.as_db_error() {
        return format!("{} ({})", db.message(), db.code().code());
    }
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

/// Runs `sql` on the database at `url` (a test's own hands on it), and returns the first
/// column of the rows of its last statement, as text.
#[cfg(test)]
pub(crate) fn test_sql(url: &str, sql: &str) -> Vec<String> {
    let (url, sql) = (url.to_string(), sql.to_string());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, NoTls)
                .await
                .expect("the test server answers");
            tokio::spawn(connection);
            client
                .simple_query(&sql)
                .await
                .expect("the statement runs")
                .into_iter()
                .filter_map(|message| match message {
                    tokio_postgres::SimpleQueryMessage::Row(row) => {
                        Some(row.get(0).unwrap_or("NULL").to_string())
                    }
                    _ => None,
                })
                .collect()
        })
    })
    .join()
    .expect("the statement ran")
}

/// A database for a test: the URL of a fresh schema of the server that
/// `PARKWAY_TEST_POSTGRES_URL` names (`.ci/test` starts one and sets it). A test of the
/// PostgreSQL engine fails, saying so, where it is not set.
#[cfg(test)]
pub(crate) fn test_database() -> String {
    use std::sync::atomic::AtomicU64;
    static MADE: AtomicU64 = AtomicU64::new(0);
    let url = std::env::var("PARKWAY_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "PARKWAY_TEST_POSTGRES_URL is not set: the PostgreSQL engine's tests need a server \
             (`bash .ci/test` starts a throwaway one and sets it)"
        )
    });
    let schema = format!(
        "parkway_test_{}_{}_{}",
        std::process::id(),
        MADE.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    );
    test_sql(&url, &format!("CREATE SCHEMA {schema}"));
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_s_successor_bounds_exactly_the_keys_that_start_with_it() {
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(&[1, 0xff, 0xff]), Some(vec![2]));
        assert_eq!(successor(&[0xff, 0xff]), None);
        assert_eq!(successor(b""), None);
    }

    #[test]
    fn rows_of_a_slot_are_keyed_by_it_and_the_runtime_s_by_none() {
        assert_eq!(slot_of(3, Space::Entries, &[0x01, 0x02, b'x']), 0x0102);
        assert_eq!(slot_of(3, Space::Entries, &[0x01]), 0x0100);
        assert_eq!(slot_of(3, Space::Entries, &[]), 0);
        assert_eq!(slot_of(3, Space::Doors, &[0x01, 0x02]), SHARED);
        assert_eq!(slot_of(3, Space::Meta, b"format_version"), SHARED);
        // The log and the ids' counters are each node's own.
        assert_eq!(slot_of(1, Space::Events, &[0x01, 0x02]), -2);
        assert_eq!(slot_of(3, Space::Ids, b"timers"), -4);
        // `(slot, key)` orders as the key does.
        let mut keys: Vec<&[u8]> = vec![b"z", b"ab", b"", b"a", b"z\x00", b"\xff", b"a\xff\x01"];
        keys.sort();
        let mut by_slot = keys.clone();
        by_slot.sort_by_key(|key| (slot_of(1, Space::Entries, key), key.to_vec()));
        assert_eq!(by_slot, keys);
    }

    #[test]
    fn the_database_is_named_without_its_password() {
        let shown = shown("postgres://ann:secret@db.example:6543/parks");
        assert_eq!(shown, "postgres://ann@db.example:6543/parks");
        assert_eq!(super::shown("postgres://ann:secret@[bad"), "PostgreSQL");
    }
}
