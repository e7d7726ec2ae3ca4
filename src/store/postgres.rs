//! The PostgreSQL engine (feature `postgres`): every space in one table of a database,
//! a group commit in one statement, reads served by a pool of connections.
//!
//! The schema (`docs/postgres.md`), made by the migrations in [`MIGRATIONS`] in the
//! connection's schema (its `search_path`), is one table, `parkway_kv`: `space`, `slot`,
//! `key`, `value`, keyed by the first three in that order. `space` is [`Space::index`],
//! one table's worth of rows as a data directory's keyspace is; within it, rows are keyed
//! by slot first: `slot` is the key's slot for a space whose keys start with one
//! ([`Space::is_slotted`]), `-1` for the runtime's own spaces, so one slot's rows of a
//! space are one range of the primary key, and a space reads in key order from it.
//! [`Space::Meta`] holds the format version as in any engine. The applied migrations are
//! rows of `parkway_migrations`.
//!
//! **One process per database**, until nodes share one by its slots' leases. An open
//! locks `parkway_holder`'s row in a transaction it leaves open on a connection of its
//! own, so a second process is refused while the first lives (the server releases the
//! lock when the connection ends, however the process ends); then it moves the epoch of
//! `parkway_fence` on and keeps it. Every group commit reads that row `FOR SHARE` and
//! writes only if the epoch is still its own: a process that lost its hold (the server
//! restarted, its connection was cut) and was taken over by another writes nothing more,
//! and its store stops with an error that says so.
//!
//! A group is kept at [`Engine::write`] and sent at [`Engine::sync`]: every mutation
//! written since the last sync, each key's last, as one statement (a delete and an
//! upsert of arrays, in one implicit transaction), so a sync is one round trip and the
//! groups are durable together or not at all. Plain SQL throughout (no advisory lock, no
//! `LISTEN`), so a database that speaks PostgreSQL's protocol and SQL can stand in.
//!
//! The connections live on the engine's own Tokio runtime (two threads): the writer's
//! thread and the runtime's tasks, which call the [`Engine`] methods synchronously, wait
//! for them there, as they wait for a disk, and a runtime of one thread is not blocked
//! out of its own store.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use super::batch::last_per_key;
use super::engine::{Engine, ReadFailure, WriteFailure};
use super::{Batch, Entries, FORMAT_VERSION, Op, OpenError, Space, VERSION_KEY};
use crate::sync::lock;

/// The schema's migrations, in order: the `n`th (from 1) is applied once, in a
/// transaction, to a database whose `parkway_migrations` lacks `n`.
const MIGRATIONS: &[&str] = &["CREATE TABLE parkway_kv (
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
    INSERT INTO parkway_fence VALUES (1, 0, NULL);"];

/// Connections kept open for reads and the writer.
const POOL_SIZE: usize = 8;

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

/// The slot of a row of the runtime's own spaces.
const NO_SLOT: i32 = -1;

/// A group commit: the mutations of every group written since the last sync, each key's
/// last (no key is both deleted and put), written only if the fence's epoch is still
/// this process's (`$8`); it returns the epoch it found. The fence's row is read `FOR
/// SHARE`, so a process that takes the database over (moving the epoch on) waits for a
/// group commit under way, and every later one sees the new epoch and writes nothing.
const WRITE: &str = "WITH fence AS (
        SELECT epoch FROM parkway_fence WHERE id = 1 FOR SHARE
    ), gone AS (
        DELETE FROM parkway_kv AS kv
        USING unnest($1::int4[], $2::int2[], $3::bytea[]) AS d(slot, space, key)
        WHERE kv.slot = d.slot AND kv.space = d.space AND kv.key = d.key
          AND (SELECT epoch FROM fence) = $8
    ), put AS (
        INSERT INTO parkway_kv (slot, space, key, value)
        SELECT * FROM unnest($4::int4[], $5::int2[], $6::bytea[], $7::bytea[])
        WHERE (SELECT epoch FROM fence) = $8
        ON CONFLICT (space, slot, key) DO UPDATE SET value = excluded.value
    )
    SELECT epoch FROM fence";

/// Takes the database for this process: the fence's next epoch, which its group commits
/// carry from now on. Waits for a group commit of the process before under way.
const TAKE: &str =
    "UPDATE parkway_fence SET epoch = epoch + 1, taken_at = now() WHERE id = 1 RETURNING epoch";

/// How many rows the store holds.
const COUNT: &str = "SELECT count(*) FROM parkway_kv";

/// A space's keys, in key order.
const KEYS: &str = "SELECT key FROM parkway_kv WHERE space = $1 ORDER BY slot, key";

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
    /// The groups written since the last sync, in order.
    written: Mutex<Vec<Batch>>,
    /// Set by [`Engine::close`]: every later use fails.
    closed: AtomicBool,
    /// The connection whose open transaction holds `parkway_holder`'s row locked while
    /// the store is open, so a second process is refused the database; dropped (and
    /// the lock released by the server) when the store is closed or the process ends.
    holder: Mutex<Option<tokio_postgres::Client>>,
    /// The fence's epoch this process took the database at: a group commit writes only
    /// while it is the fence's.
    epoch: std::sync::atomic::AtomicI64,
}

impl Postgres {
    /// Connects to the database at `url`, applies the migrations it lacks, and checks
    /// (or, in a database with no row yet, writes) the format version. `name` is the
    /// URL as errors show it ([`shown`]).
    pub(super) fn open(url: &str) -> Result<Postgres, OpenError> {
        let database = shown(url);
        let refused = |cause: String| OpenError::Database {
            database: database.clone(),
            cause,
        };
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
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .build()
            .map_err(|err| refused(err.to_string()))?;
        let engine = Postgres {
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
            pool,
            written: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
            holder: Mutex::new(None),
            epoch: std::sync::atomic::AtomicI64::new(-1),
        };
        let pool = engine.pool.clone();
        engine
            .run(async move { migrate(&pool).await })
            .and_then(|done| done)
            .map_err(refused)?;
        let holder = engine
            .run(async move { hold(&config).await })
            .and_then(|held| held)
            .map_err(refused)?;
        *lock(&engine.holder) = Some(holder);
        let epoch = engine
            .one_number(TAKE)
            .map_err(|cause| refused(format!("taking it for this process failed: {cause}")))?;
        engine.epoch.store(epoch, Ordering::Release);
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
                let rows = self.one_number(COUNT).map_err(refused)?;
                if rows > 0 {
                    return Err(refused(format!(
                        "its table parkway_kv holds {rows} rows but no format version"
                    )));
                }
                let mut batch = Batch::new();
                batch.put(Space::Meta, VERSION_KEY, FORMAT_VERSION.to_string());
                let mut group = vec![batch];
                self.write(&mut group, 0).map_err(|failure| match failure {
                    WriteFailure::Failed(cause) => refused(cause),
                    WriteFailure::NotOwner(_) => refused("a slot is not this node's".into()),
                })?;
                self.sync().map_err(refused)?;
                Ok(())
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
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
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

impl Engine for Postgres {
    /// Keeps the group, taken, for the sync.
    fn write(&self, group: &mut Vec<Batch>, _generation: u64) -> Result<(), WriteFailure> {
        if self.closed.load(Ordering::Acquire) {
            return Err(WriteFailure::Failed("the store is closed".into()));
        }
        lock(&self.written).append(group);
        Ok(())
    }

    /// Sends every mutation written since the last sync as one statement, and returns
    /// once the database has committed it.
    fn sync(&self) -> Result<bool, String> {
        let written = std::mem::take(&mut *lock(&self.written));
        if written.is_empty() {
            return Ok(true);
        }
        let pool = self.pool.clone();
        let epoch = self.epoch.load(Ordering::Acquire);
        self.run(async move {
            let mut gone = Columns::default();
            let mut put = Columns::default();
            let mut values: Vec<&[u8]> = Vec::new();
            for op in last_per_key(&written) {
                match op {
                    Op::Put { space, key, value } => {
                        put.push(*space, key);
                        values.push(value);
                    }
                    Op::Delete { space, key } => gone.push(*space, key),
                }
            }
            // Sent again after a failure of the connection: the statement puts each key's
            // last value and deletes what it deletes, so a group commit the server made
            // before the connection failed is made again to the same effect.
            let rows = query(
                &pool,
                WRITE,
                &[
                    &gone.slots,
                    &gone.spaces,
                    &gone.keys,
                    &put.slots,
                    &put.spaces,
                    &put.keys,
                    &values,
                    &epoch,
                ],
            )
            .await
            .map_err(|failure| failure.cause)?;
            let found: i64 = rows
                .first()
                .ok_or("the group commit returned no row")?
                .get(0);
            if found != epoch {
                return Err(format!(
                    "another process took the database over (its epoch is {found}, this \
                     process's was {epoch}): nothing more is written from this one"
                ));
            }
            Ok(true)
        })?
    }

    /// Closes the connections and stops their runtime (without waiting: it may be
    /// called on a task of another runtime).
    fn close(&self, _flush: bool) {
        let holder = lock(&self.holder).take();
        if let Some(holder) = holder {
            // Released at once, so a process that opens the database next finds it free;
            // a server that does not answer releases it when it sees the connection end.
            let _ = self.run(async move {
                let _ = tokio::time::timeout(RELEASE_WAIT, holder.batch_execute("ROLLBACK")).await;
            });
        }
        self.closed.store(true, Ordering::Release);
        self.pool.close();
        if let Some(runtime) = lock(&self.runtime).take() {
            runtime.shutdown_background();
        }
    }

    fn get(&self, space: Space, key: &[u8]) -> Result<Option<Vec<u8>>, ReadFailure> {
        let params = vec![
            Param::Small(space_number(space)),
            Param::Int(slot_of(space, key)),
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
        let slot = slot_of(space, &start);
        let in_one_slot = match &end {
            Some(end) => slot_of(space, end) == slot || within.len() >= 2,
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
                    Param::Int(slot_of(space, &end)),
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
        let params = Params(vec![Param::Small(space_number(space))]);
        self.read(KEYS, params, |rows| {
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

/// A failed statement: in words, whether sending it again may succeed (the connection
/// failed, not the statement), and whether the server says its data is damaged.
struct Failure {
    cause: String,
    transient: bool,
    damaged: bool,
}

impl Failure {
    /// A client's error: transient if the connection closed, failed to read or write,
    /// or the server is going away or starting (SQLSTATE classes `08`, `57P01`-`57P03`).
    fn of(err: &tokio_postgres::Error) -> Failure {
        let code = err.code().map(SqlState::code).unwrap_or("");
        let io = std::error::Error::source(err).is_some_and(|cause| cause.is::<std::io::Error>());
        Failure {
            cause: describe(err),
            transient: err.is_closed()
                || io
                || code.starts_with("08")
                || matches!(code, "57P01" | "57P02" | "57P03"),
            damaged: matches!(
                err.code(),
                Some(&SqlState::DATA_CORRUPTED | &SqlState::INDEX_CORRUPTED)
            ),
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
            },
            other => Failure {
                cause: format!("no connection to the database: {other}"),
                transient: true,
                damaged: false,
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
    for attempt in 0..3 {
        match migrate_once(&mut client).await {
            Ok(()) => return Ok(()),
            Err(err)
                if attempt < 2
                    && matches!(
                        err.code(),
                        Some(&SqlState::UNIQUE_VIOLATION | &SqlState::DUPLICATE_TABLE)
                    ) => {}
            Err(err) => return Err(format!("migrating its schema failed: {}", describe(&err))),
        }
    }
    Err("migrating its schema failed: another node kept migrating it".into())
}

/// Locks `parkway_holder`'s row in a transaction left open on a connection of its own,
/// or refuses if another process holds it after 3 s (a process that was killed a moment
/// ago is given time to be seen gone): one process per database, until nodes share one
/// by its slots' leases. The server releases the lock when the connection ends, however
/// the process ends.
async fn hold(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = config.connect(NoTls).await.map_err(|e| describe(&e))?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::error!(
                "the connection that holds the database for this process ended: {}; \
                 another process may now open it",
                describe(&err)
            );
        }
    });
    match client
        .batch_execute(
            "SET idle_in_transaction_session_timeout = 0; SET statement_timeout = 0; \
             BEGIN; SET LOCAL lock_timeout = '3s'; SELECT id FROM parkway_holder FOR UPDATE",
        )
        .await
    {
        Ok(()) => Ok(client),
        Err(err) if err.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => Err(
            "it is held by another parkway process: one process keeps its state in a \
             database at a time"
                .into(),
        ),
        Err(err) => Err(format!(
            "holding it for this process failed: {}",
            describe(&err)
        )),
    }
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
    /// Adds a key of `space`.
    fn push(&mut self, space: Space, key: &'a [u8]) {
        self.slots.push(slot_of(space, key));
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

/// The row's slot: for a slotted space, the key's first two bytes as a big-endian number
/// (a shorter key padded with zeros, so `(slot, key)` orders as the key does: a key
/// before another never has a greater slot); [`NO_SLOT`] for the runtime's spaces.
fn slot_of(space: Space, key: &[u8]) -> i32 {
    if !space.is_slotted() {
        return NO_SLOT;
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
        assert_eq!(slot_of(Space::Entries, &[0x01, 0x02, b'x']), 0x0102);
        assert_eq!(slot_of(Space::Entries, &[0x01]), 0x0100);
        assert_eq!(slot_of(Space::Entries, &[]), 0);
        assert_eq!(slot_of(Space::Doors, &[0x01, 0x02]), NO_SLOT);
        // `(slot, key)` orders as the key does.
        let mut keys: Vec<&[u8]> = vec![b"z", b"ab", b"", b"a", b"z\x00", b"\xff", b"a\xff\x01"];
        keys.sort();
        let mut by_slot = keys.clone();
        by_slot.sort_by_key(|key| (slot_of(Space::Entries, key), key.to_vec()));
        assert_eq!(by_slot, keys);
    }

    #[test]
    fn the_database_is_named_without_its_password() {
        let shown = shown("postgres://ann:secret@db.example:6543/parks");
        assert_eq!(shown, "postgres://ann@db.example:6543/parks");
        assert_eq!(super::shown("postgres://ann:secret@[bad"), "PostgreSQL");
    }
}
