//! The parent: spawn a child on the data directory, let it work for a seeded moment,
//! kill it with `SIGKILL`, reopen the directory in this process and check it; again and
//! again.

use std::collections::BTreeMap;
use std::fs::{File, TryLockError};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::child::subject;
use super::log::{Line, Log, Reader, Role};
use super::model::{Checker, Counts};
use super::targets;

/// How long an idle subject keeps its actor in the parent's openings, and in a child
/// that does not passivate at once.
const PASSIVATE: Duration = Duration::from_secs(30);

/// How long the store directory may stay held once the parent's runtime was shut down
/// and dropped.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// What `parkway crash` is told.
#[derive(Debug, Clone)]
pub struct CrashConfig {
    /// How many times a child is killed.
    pub kills: u64,
    /// The seed of the workloads, the waits before each kill and the checker's samples.
    pub seed: u64,
    /// The work directory: the store in `store/`, the log in `log.jsonl`. It must not
    /// exist, or be empty.
    pub dir: PathBuf,
    /// How many subjects the workload drives.
    pub subjects: usize,
    /// How many concurrent tasks drive them.
    pub tasks: usize,
    /// The shortest wait, after a child said it is ready, before it is killed.
    pub min_wait: Duration,
    /// The longest.
    pub max_wait: Duration,
    /// How long a child may take to open the store and say it is ready.
    pub ready_timeout: Duration,
    /// The program to run as the child, given `crash-child` and its arguments: the
    /// `parkway` binary.
    pub program: PathBuf,
    /// Leave each child running until someone else kills it with `SIGKILL`
    /// (`kill -9`), at a moment of their choosing, instead of killing it after a wait:
    /// its pid is printed on standard error once it is ready. A child that ends any
    /// other way stops the run with an error. The duration is how long the child
    /// drives its workload before it only waits to be killed.
    pub by_hand: Option<Duration>,
    /// Keep the store in this PostgreSQL database (a schema that holds no store yet)
    /// instead of in `store/` of the work directory.
    pub postgres: Option<String>,
}

/// What a crash run saw.
#[derive(Debug, Clone, Serialize)]
pub struct CrashReport {
    /// The seed.
    pub seed: u64,
    /// Children killed.
    pub kills: u64,
    /// Wall time, in seconds.
    pub seconds: f64,
    /// What the checker counted.
    pub counts: Counts,
    /// What was found wrong, if anything; the run stops at the first kill that shows any.
    pub violations: Vec<String>,
    /// The kill after which the violations were found.
    pub failed_at: Option<u64>,
    /// Reopenings after which the directory was still held for a moment once
    /// `Runtime::shutdown` had returned and the runtime was dropped (the parent waits for
    /// the lock before it spawns the next child).
    pub held_after_shutdown: u64,
}

impl CrashReport {
    /// Whether nothing was found wrong.
    pub fn clean(&self) -> bool {
        self.violations.is_empty()
    }
}

impl std::fmt::Display for CrashReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.counts;
        let acked: u64 = c.acked.values().sum();
        writeln!(
            f,
            "parkway crash: {} kills in {:.1}s (seed {})",
            self.kills, self.seconds, self.seed
        )?;
        writeln!(
            f,
            "  acknowledged: {acked} operations ({})",
            c.acked
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        writeln!(
            f,
            "  in flight at a kill: {} durable, {} not (inline resumes left waiting: {})",
            c.in_flight_happened, c.in_flight_lost, c.outcomes_left_waiting
        )?;
        writeln!(
            f,
            "  delivered inline just before a kill and left waiting as well: {}",
            c.delivered_and_left_waiting
        )?;
        writeln!(
            f,
            "  runs: {}; steps run: {} ({} again after a kill); records checked: {}; torn log tails: {}",
            c.runs, c.steps, c.steps_again, c.records_checked, c.torn_tails
        )?;
        if self.held_after_shutdown > 0 {
            writeln!(
                f,
                "  the directory was still held after the checking runtime's shutdown returned: {} times",
                self.held_after_shutdown
            )?;
        }
        if self.clean() {
            writeln!(f, "  ok: every acknowledged operation held")
        } else {
            writeln!(
                f,
                "  FAILED after kill {}: {} violations",
                self.failed_at.unwrap_or(0),
                self.violations.len()
            )?;
            for v in self.violations.iter().take(20) {
                writeln!(f, "  - {v}")?;
            }
            Ok(())
        }
    }
}

/// Why a crash run could not be carried out (as opposed to finding a violation).
#[derive(Debug, thiserror::Error)]
pub enum CrashError {
    /// The work directory is not usable.
    #[error("the work directory {dir}: {reason}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        reason: String,
    },
    /// A child could not be run, or misbehaved.
    #[error("the child of generation {generation}: {reason}")]
    Child {
        /// Its generation.
        generation: u64,
        /// What went wrong, with what it wrote to stderr.
        reason: String,
    },
    /// The log could not be read.
    #[error("{0}")]
    Log(String),
    /// The async runtime of the checks could not start.
    #[error("the async runtime could not start: {0}")]
    Async(String),
}

/// A seed for one use, from the run's seed.
fn derive(seed: u64, what: u64, n: u64) -> u64 {
    let mut x =
        seed ^ what.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ n.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 31;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 29)
}

/// Kill `config.kills` children and check the directory after each; `progress` is told
/// after each check. The report says what was found; an error says the run could not be
/// carried out.
pub fn run(
    config: &CrashConfig,
    mut progress: impl FnMut(u64, &Counts),
) -> Result<CrashReport, CrashError> {
    let started = Instant::now();
    let dir_error = |reason: String| CrashError::Dir {
        dir: config.dir.clone(),
        reason,
    };
    std::fs::create_dir_all(&config.dir).map_err(|e| dir_error(e.to_string()))?;
    let empty = std::fs::read_dir(&config.dir)
        .map_err(|e| dir_error(e.to_string()))?
        .next()
        .is_none();
    if !empty {
        return Err(dir_error("is not empty".to_owned()));
    }
    let store = config.dir.join("store");
    let log_path = config.dir.join("log.jsonl");
    let log = Arc::new(Log::open(&log_path).map_err(|e| dir_error(e.to_string()))?);
    let mut reader = Reader::open(&log_path).map_err(|e| dir_error(e.to_string()))?;
    let async_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CrashError::Async(e.to_string()))?;
    let subjects: Vec<String> = (0..config.subjects).map(subject).collect();
    let mut checker = Checker::new(subjects.clone(), derive(config.seed, 3, 0));
    let mut rng = SmallRng::seed_from_u64(derive(config.seed, 1, 0));
    let mut report = CrashReport {
        seed: config.seed,
        kills: 0,
        seconds: 0.0,
        counts: Counts::default(),
        violations: Vec::new(),
        failed_at: None,
        held_after_shutdown: 0,
    };
    for kill in 1..=config.kills {
        let generation = 2 * kill - 1;
        let wait = rng.random_range(config.min_wait..=config.max_wait.max(config.min_wait));
        let passivate = if rng.random_range(0..3) == 0 {
            Duration::ZERO
        } else {
            PASSIVATE
        };
        let child_seed = derive(config.seed, 2, kill);
        run_child(
            config, &store, &log_path, generation, child_seed, passivate, wait,
        )?;
        report.kills = kill;
        if reader
            .cut_torn_tail()
            .map_err(|e| CrashError::Log(e.to_string()))?
        {
            checker.torn_tail();
        }
        for (position, line) in reader.next_lines().map_err(CrashError::Log)? {
            checker.line(position, line);
        }
        checker.killed();
        let check = async_rt.block_on(reopen_and_check(
            &store,
            config.postgres.as_deref(),
            &log,
            &mut reader,
            &mut checker,
            &subjects,
            generation + 1,
        ));
        if let Err(problem) = check {
            report.violations.push(problem);
        }
        // A database is held by a connection, which the checking runtime's shutdown
        // ended; the next child's open waits for the server to see it gone.
        match wait_released(&store, RELEASE_TIMEOUT) {
            _ if config.postgres.is_some() => {}
            Ok(false) => {}
            Ok(true) => report.held_after_shutdown += 1,
            Err(problem) => report.violations.push(problem),
        }
        report
            .violations
            .extend(checker.violations().iter().cloned());
        progress(kill, &checker.counts);
        if !report.violations.is_empty() {
            report.failed_at = Some(kill);
            break;
        }
    }
    report.counts = checker.counts.clone();
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Run one child until it says it is ready, wait `wait`, and kill it.
fn run_child(
    config: &CrashConfig,
    store: &Path,
    log: &Path,
    generation: u64,
    seed: u64,
    passivate: Duration,
    wait: Duration,
) -> Result<(), CrashError> {
    let failed = |reason: String| CrashError::Child { generation, reason };
    let mut child = Command::new(&config.program)
        .arg("crash-child")
        .arg("--store")
        .arg(store)
        .arg("--log")
        .arg(log)
        .args(
            config
                .postgres
                .as_ref()
                .map(|url| ["--postgres", url.as_str()])
                .into_iter()
                .flatten(),
        )
        .args(["--gen", &generation.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--subjects", &config.subjects.to_string()])
        .args(["--tasks", &config.tasks.to_string()])
        .args(["--passivate-ms", &passivate.as_millis().to_string()])
        .args(
            config
                .by_hand
                .map(|d| ["--drive-for-ms".to_owned(), d.as_millis().to_string()])
                .into_iter()
                .flatten(),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            failed(format!(
                "{} could not be run: {e}",
                config.program.display()
            ))
        })?;
    let stderr = child.stderr.take().map(|mut err| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        })
    });
    let (tx, rx) = mpsc::channel();
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let ready = rx.recv_timeout(config.ready_timeout);
    if ready.as_deref() != Ok("ready") {
        let _ = child.kill();
        let _ = child.wait();
        let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        return Err(failed(format!(
            "it did not say it was ready within {:?} ({ready:?}); its stderr: {}",
            config.ready_timeout,
            said.trim()
        )));
    }
    if let Some(drive_for) = config.by_hand {
        return await_kill(child, stderr, store, generation, drive_for);
    }
    // The deliberate wait: the moment of the kill.
    std::thread::sleep(wait);
    if let Ok(Some(status)) = child.try_wait() {
        let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
        return Err(failed(format!(
            "it ended on its own before the kill ({status}); its stderr: {}",
            said.trim()
        )));
    }
    // `Child::kill` sends SIGKILL on Unix: no handler, no flush, no destructor runs.
    child
        .kill()
        .map_err(|e| failed(format!("it could not be killed: {e}")))?;
    child
        .wait()
        .map_err(|e| failed(format!("it could not be waited for: {e}")))?;
    if let Some(t) = stderr {
        let _ = t.join();
    }
    Ok(())
}

/// Wait for `child`, ready and driving `store`, to be killed by someone else with
/// `SIGKILL`; any other end is an error naming it.
fn await_kill(
    mut child: std::process::Child,
    stderr: Option<std::thread::JoinHandle<String>>,
    store: &Path,
    generation: u64,
    drive_for: Duration,
) -> Result<(), CrashError> {
    let failed = |reason: String| CrashError::Child { generation, reason };
    let pid = child.id();
    eprintln!(
        "parkway crash: child {generation} (pid {pid}) is driving {} for {}, then waits: kill it when you choose with: kill -9 {pid}",
        store.display(),
        humantime::format_duration(drive_for)
    );
    let status = child
        .wait()
        .map_err(|e| failed(format!("it could not be waited for: {e}")))?;
    let said = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
    if killed(status) {
        return Ok(());
    }
    Err(failed(format!(
        "it ended without a SIGKILL ({status}); its stderr: {}",
        said.trim()
    )))
}

/// Whether `status` is that of a process ended by `SIGKILL`.
#[cfg(unix)]
fn killed(status: std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGKILL)
}

/// Elsewhere there are no signals: any end is taken for the kill.
#[cfg(not(unix))]
fn killed(_: std::process::ExitStatus) -> bool {
    true
}

/// Wait, at most `within`, until no open store holds the directory `store` (its lock
/// file is free); whether it was still held at first. `Runtime::shutdown` can return
/// while a stopped subject actor's task has yet to drop its share of the runtime, and
/// with it the store: the next child's open would then be refused.
fn wait_released(store: &Path, within: Duration) -> Result<bool, String> {
    let path = store.join("parkway.lock");
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => {
            return Err(format!(
                "the lock file {} cannot be opened: {e}",
                path.display()
            ));
        }
    };
    match file.try_lock() {
        // Released when `file` is dropped.
        Ok(()) => return Ok(false),
        Err(TryLockError::WouldBlock) => {}
        Err(TryLockError::Error(e)) => {
            return Err(format!(
                "the lock file {} cannot be locked: {e}",
                path.display()
            ));
        }
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        // The file comes back locked, to be dropped (unlocked) before the next child runs.
        let _ = tx.send(file.lock().map(|()| file));
    });
    match rx.recv_timeout(within) {
        Ok(Ok(file)) => {
            drop(file);
            Ok(true)
        }
        Ok(Err(e)) => Err(format!(
            "the lock file {} cannot be locked: {e}",
            path.display()
        )),
        Err(_) => Err(format!(
            "the store directory {} was still held {within:?} after the checking runtime was shut down and dropped",
            store.display()
        )),
    }
}

/// Open the store in this process (the runs in flight at the kill are replayed), let it
/// settle, and check every subject and the records the checker wants; an error is a
/// violation (the store could not be opened, say).
async fn reopen_and_check(
    store: &Path,
    postgres: Option<&str>,
    log: &Arc<Log>,
    reader: &mut Reader,
    checker: &mut Checker,
    subjects: &[String],
    generation: u64,
) -> Result<(), String> {
    let rt = targets::builder(store, postgres, log, generation, PASSIVATE)
        .build()
        .await
        .map_err(|e| {
            format!("generation {generation} could not open the store after the kill: {e}")
        })?;
    log.write(&Line::Open {
        generation,
        role: Role::Check,
    });
    rt.settle().await;
    // The steps the replays ran are in the log now.
    for (position, line) in reader.next_lines()? {
        checker.line(position, line);
    }
    let mut lists = BTreeMap::new();
    for s in subjects {
        let listed = rt
            .list(s)
            .await
            .map_err(|e| format!("the list of {s} failed after the kill: {e}"))?;
        lists.insert(s.clone(), listed);
    }
    checker.observe(&lists);
    let wanted = checker.records_wanted();
    let mut found = Vec::with_capacity(wanted.len());
    for w in wanted {
        let record = rt.record(w.run()).await;
        found.push((w, record));
    }
    checker.check_records(&found);
    rt.shutdown().await;
    drop(rt);
    // Only this process wrote since the last read: nothing is left to read.
    for (position, line) in reader.next_lines()? {
        checker.line(position, line);
    }
    Ok(())
}
