//! The runtime's side of the account: its events, counted as they arrive, and what is
//! left on the subjects when the visits are over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::TryRecvError;

use super::config::LoadError;
use super::workload;
use parkway::bench::Parked;
use parkway::{EntryStatus, Event, Resolution, Runtime};

/// Counts of the runtime's events.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Observed {
    pub(crate) asks: u64,
    pub(crate) resumed: u64,
    pub(crate) cancelled: u64,
    pub(crate) expired: u64,
    pub(crate) finished: u64,
    pub(crate) failed: u64,
    pub(crate) stored: u64,
    pub(crate) taken: u64,
    pub(crate) dropped: u64,
    pub(crate) refused: u64,
    /// Events the subscriber fell too far behind to read.
    pub(crate) lagged: u64,
}

impl Observed {
    fn count(&mut self, event: &Event) {
        match event {
            Event::AskParked { .. } => self.asks += 1,
            Event::AskResolved { how, .. } => match how {
                Resolution::Resumed => self.resumed += 1,
                Resolution::Cancelled => self.cancelled += 1,
                Resolution::Expired => self.expired += 1,
                // A kind this account does not know leaves it unbalanced, which shows.
                _ => {}
            },
            Event::RunFinished { .. } => self.finished += 1,
            Event::RunFailed { .. } => self.failed += 1,
            Event::WaitingOutcomeStored { .. } => self.stored += 1,
            Event::WaitingOutcomeTaken { .. } => self.taken += 1,
            Event::WaitingOutcomeDropped { .. } => self.dropped += 1,
            Event::VisitRefused { .. } => self.refused += 1,
            _ => {}
        }
    }
}

/// A thread of its own counting every event from before the first visit, reading
/// whatever has been published every [`PERIOD`].
///
/// Not a task among the visitors: a task is polled once a scheduler round, and with
/// thousands of visitors a round publishes more events than the channel holds, even
/// reading unconstrained by Tokio's cooperative budget. A thread is scheduled by the
/// operating system beside the runtime's workers, whatever their queues hold. It does
/// not wait on the channel either: a waiting reader is woken by every event, a wake-up
/// for the publisher each time. Both costs are measured in `docs/benchmarks.md`.
pub(crate) struct Observer {
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Observed>,
}

/// How often the observer reads: a millisecond of events is a small part of what the
/// channel holds (65536) at the fastest rates measured.
const PERIOD: Duration = Duration::from_millis(1);

impl Observer {
    /// Subscribe to `rt`'s events and count them on a thread of their own.
    pub(crate) fn start(rt: &Runtime) -> Result<Self, LoadError> {
        let mut events = rt.events();
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&done);
        let thread = std::thread::Builder::new()
            .name("load-events".into())
            .spawn(move || {
                let mut seen = Observed::default();
                // The last read comes after the stop, so it sees everything published.
                loop {
                    let stopping = stop.load(Ordering::Acquire);
                    drain(&mut events, &mut seen);
                    if stopping {
                        return seen;
                    }
                    std::thread::sleep(PERIOD);
                }
            })
            .map_err(|e| LoadError::Setup(format!("the event counter's thread: {e}")))?;
        Ok(Self { done, thread })
    }

    /// Every event published so far, counted. Call once the runtime is quiet.
    pub(crate) async fn finish(self) -> Observed {
        self.done.store(true, Ordering::Release);
        let thread = self.thread;
        match tokio::task::spawn_blocking(move || thread.join()).await {
            Ok(Ok(seen)) => seen,
            // A panic while counting is a bug: it goes on.
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down: nothing was counted, and the account says so.
            Err(_) => Observed::default(),
        }
    }
}

/// Count what is already in the channel.
fn drain(events: &mut Receiver<Event>, seen: &mut Observed) {
    loop {
        match events.try_recv() {
            Ok(event) => seen.count(&event),
            Err(TryRecvError::Lagged(n)) => seen.lagged += n,
            Err(TryRecvError::Empty | TryRecvError::Closed) => return,
        }
    }
}

/// What is left on the subjects.
pub(crate) struct Left {
    /// `asking` and `running` entries.
    pub(crate) open: u64,
    /// `finished` and `failed` entries.
    pub(crate) waiting: u64,
    /// Each subject's `$parked`, as its door visits see it, when asked for (the bare
    /// baseline's inputs); empty otherwise.
    pub(crate) parked: Vec<Parked>,
    /// Subjects that could not be read (the runtime stopped).
    pub(crate) unread: u64,
}

impl Left {
    /// List every subject of the workload, converting each `$parked` when `convert`.
    pub(crate) async fn read(rt: &Runtime, subjects: usize, convert: bool) -> Self {
        let mut left = Left {
            open: 0,
            waiting: 0,
            parked: Vec::with_capacity(if convert { subjects } else { 0 }),
            unread: 0,
        };
        for index in 0..subjects {
            let entries = match rt.list(&workload::subject_name(index)).await {
                Ok(entries) => entries,
                Err(_) => {
                    left.unread += 1;
                    Vec::new()
                }
            };
            for entry in &entries {
                match entry.status {
                    EntryStatus::Asking | EntryStatus::Running => left.open += 1,
                    EntryStatus::Finished | EntryStatus::Failed => left.waiting += 1,
                    // A status this account does not know leaves it unbalanced.
                    _ => {}
                }
            }
            if convert {
                left.parked.push(Parked::new(&entries));
            }
        }
        left
    }
}
