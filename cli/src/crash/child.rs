//! The child: opens the store, says it is ready, and drives the workload until it is
//! killed.
//!
//! Each of `tasks` tasks owns the subjects whose number is its own modulo `tasks`, so one
//! subject's operations are sequential (one at most in flight when the kill lands) while
//! the tasks' changes share the store's syncs. A task picks one of its subjects, lists
//! it, and picks an operation that fits what it lists: start a run (while the subject
//! holds fewer than [`MAX_ENTRIES`] entries), resume an ask inline or detached, cancel an
//! ask or a waiting outcome, take a waiting outcome. Before each call it writes a
//! [`Line::Begin`]; after the call returns, a [`Line::Ack`] with what it returned.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parkway::{Entry, EntryStatus, Resumed, Runtime, Start, TakeError};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::log::{Acked, Call, Line, Log, Role, Target};
use super::targets;

/// A subject holding this many entries gets no new run.
pub const MAX_ENTRIES: usize = 6;

/// What a child is told.
#[derive(Debug, Clone)]
pub struct ChildConfig {
    /// The store directory.
    pub store: PathBuf,
    /// The PostgreSQL database that keeps the store instead, if one does.
    pub postgres: Option<String>,
    /// The crash log.
    pub log: PathBuf,
    /// This child's generation.
    pub generation: u64,
    /// The workload's seed.
    pub seed: u64,
    /// Subjects `s-0` … `s-<subjects - 1>`.
    pub subjects: usize,
    /// Concurrent tasks.
    pub tasks: usize,
    /// How long an idle subject keeps its actor.
    pub passivate: Duration,
    /// Stop starting operations this long after being ready, and wait to be killed
    /// (for a kill by hand, whose moment may be late: what the workload keeps grows by
    /// about 10 MB a second at 8 tasks). `None`: drive until killed.
    pub drive_for: Option<Duration>,
}

/// The name of subject number `i`.
pub fn subject(i: usize) -> String {
    format!("s-{i}")
}

/// Open the store and drive the workload for ever; returns only if it cannot go on (the
/// runtime could not be built, or stopped), with why.
pub async fn drive(config: ChildConfig) -> String {
    let log = match Log::open(&config.log) {
        Ok(log) => Arc::new(log),
        Err(e) => return format!("cannot open the log {}: {e}", config.log.display()),
    };
    let built = targets::builder(
        &config.store,
        config.postgres.as_deref(),
        &log,
        config.generation,
        config.passivate,
    )
    .build()
    .await;
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => return format!("the store could not be opened: {e}"),
    };
    log.write(&Line::Open {
        generation: config.generation,
        role: Role::Child,
    });
    // The parent waits for this line before it picks its moment to kill.
    let mut out = std::io::stdout();
    if writeln!(out, "ready").and_then(|()| out.flush()).is_err() {
        return "the parent went away".to_owned();
    }
    let seq = Arc::new(AtomicU64::new(0));
    let until = config
        .drive_for
        .and_then(|d| std::time::Instant::now().checked_add(d));
    let tasks: Vec<_> = (0..config.tasks.max(1))
        .map(|k| {
            let owned: Vec<String> = (0..config.subjects)
                .filter(|i| i % config.tasks.max(1) == k)
                .map(subject)
                .collect();
            let mut task = Task {
                rt: rt.clone(),
                log: Arc::clone(&log),
                generation: config.generation,
                seq: Arc::clone(&seq),
                rng: SmallRng::seed_from_u64(
                    config.seed ^ (k as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                ),
                owned,
                until,
            };
            tokio::spawn(async move { task.run().await })
        })
        .collect();
    let mut why = String::from("every task ended");
    for task in tasks {
        match task.await {
            Ok(reason) => why = reason,
            Err(e) => why = format!("a task failed: {e}"),
        }
    }
    why
}

/// What a task does next; each is picked only when it fits the listed entries.
#[derive(Debug, Clone, Copy)]
enum Pick {
    Start,
    Resume,
    Detach,
    CancelAsk,
    Take,
    CancelWaiting,
}

/// One task of the workload.
struct Task {
    rt: Runtime,
    log: Arc<Log>,
    generation: u64,
    seq: Arc<AtomicU64>,
    rng: SmallRng,
    owned: Vec<String>,
    /// When to stop starting operations (then wait to be killed).
    until: Option<std::time::Instant>,
}

impl Task {
    /// Drive operations until the runtime stops.
    async fn run(&mut self) -> String {
        if self.owned.is_empty() {
            return "no subject to drive".to_owned();
        }
        loop {
            if self
                .until
                .is_some_and(|until| std::time::Instant::now() >= until)
            {
                // Idle, alive, until killed.
                std::future::pending::<()>().await;
            }
            let subject = self.owned[self.rng.random_range(0..self.owned.len())].clone();
            let entries = match self.rt.list(&subject).await {
                Ok(entries) => entries,
                Err(e) => return format!("list of {subject} failed: {e}"),
            };
            let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
            let call = self.pick(&entries, seq);
            self.log.write(&Line::Begin {
                generation: self.generation,
                seq,
                subject: subject.clone(),
                call: call.clone(),
            });
            let acked = self.call(&subject, &call).await;
            if let Acked::Refused(why) = &acked
                && why.contains("shut down")
            {
                return format!("the runtime stopped: {why}");
            }
            self.log.write(&Line::Ack {
                generation: self.generation,
                seq,
                acked,
            });
        }
    }

    /// An operation that fits `entries`, with a nonce or answer made of this generation
    /// and the operation's number `seq`: unique across the log.
    fn pick(&mut self, entries: &[Entry], seq: u64) -> Call {
        let asking: Vec<&Entry> = entries
            .iter()
            .filter(|e| e.status == EntryStatus::Asking)
            .collect();
        let waiting: Vec<&Entry> = entries
            .iter()
            .filter(|e| matches!(e.status, EntryStatus::Finished | EntryStatus::Failed))
            .collect();
        let mut choices: Vec<(u32, Pick)> = Vec::new();
        if entries.len() < MAX_ENTRIES {
            choices.push((3, Pick::Start));
        }
        if !asking.is_empty() {
            choices.extend([(3, Pick::Resume), (2, Pick::Detach), (1, Pick::CancelAsk)]);
        }
        if !waiting.is_empty() {
            choices.extend([(3, Pick::Take), (1, Pick::CancelWaiting)]);
        }
        let total: u32 = choices.iter().map(|c| c.0).sum();
        let mut roll = self.rng.random_range(0..total.max(1));
        // Nothing fits only while every entry is running: start one more run.
        let mut choice = Pick::Start;
        for (weight, which) in choices {
            if roll < weight {
                choice = which;
                break;
            }
            roll -= weight;
        }
        let token = format!("{}-{seq}", self.generation);
        let one = |rng: &mut SmallRng, of: &[&Entry]| of[rng.random_range(0..of.len())].id.clone();
        match choice {
            Pick::Resume => Call::Resume {
                interaction: one(&mut self.rng, &asking),
                payload: format!("a{token}"),
            },
            Pick::Detach => Call::ResumeDetached {
                interaction: one(&mut self.rng, &asking),
                payload: format!("d{token}"),
            },
            Pick::CancelAsk => Call::Cancel {
                interaction: one(&mut self.rng, &asking),
            },
            Pick::Take => Call::Take {
                interaction: one(&mut self.rng, &waiting),
            },
            Pick::CancelWaiting => Call::Cancel {
                interaction: one(&mut self.rng, &waiting),
            },
            Pick::Start => Call::Start {
                target: Target::ALL[self.rng.random_range(0..Target::ALL.len())],
                nonce: format!("n{token}"),
            },
        }
    }

    /// Call `call` on `subject` and say what it returned.
    async fn call(&self, subject: &str, call: &Call) -> Acked {
        let rt = &self.rt;
        match call {
            Call::Start { target, nonce } => {
                let start = Start::new(subject, target.name()).kwargs(json!({"nonce": nonce}));
                match rt.run(start).await {
                    Ok(record) => Acked::Started(Box::new(record)),
                    Err(e) => Acked::Refused(e.to_string()),
                }
            }
            Call::Resume {
                interaction,
                payload,
            } => match rt.resume(subject, interaction, json!(payload)).await {
                Ok(Resumed::Outcome(record)) => Acked::Resumed(Box::new(record)),
                Ok(Resumed::Buffered { remaining, .. }) => Acked::Buffered { remaining },
                Err(e) => Acked::Refused(e.to_string()),
            },
            Call::ResumeDetached {
                interaction,
                payload,
            } => match rt
                .resume_detached(subject, interaction, json!(payload))
                .await
            {
                Ok(()) => Acked::Detached,
                Err(e) => Acked::Refused(e.to_string()),
            },
            Call::Cancel { interaction } => match rt.cancel(subject, &[interaction]).await {
                Ok(()) => Acked::Cancelled,
                Err(e) => Acked::Refused(e.to_string()),
            },
            Call::Take { interaction } => match rt.take(subject, interaction).await {
                Ok(value) => Acked::Taken(value),
                Err(TakeError::Failed { error, .. }) => Acked::TakenFailed(error),
                Err(e) => Acked::Refused(e.to_string()),
            },
        }
    }
}
