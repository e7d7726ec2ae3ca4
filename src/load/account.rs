//! The runtime's side of the account: its events, counted as they arrive, and what is
//! left on the subjects when the visits are over.

use std::sync::Arc;

use tokio::sync::Notify;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use super::workload;
use crate::jq::Input;
use crate::{Event, Resolution, Runtime, Status};

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

/// A task counting every event from before the first visit.
///
/// It reads unconstrained by Tokio's cooperative budget: a task among the visitors and
/// subject actors is polled once a scheduler round, and with the budget it read at most
/// 128 events a poll, fewer than a round of a fast prefill publishes, so it fell behind
/// the event channel's capacity (250k events unread at 1M prefilled asks). Unconstrained,
/// each poll reads everything published since the last.
pub(crate) struct Observer {
    done: Arc<Notify>,
    task: tokio::task::JoinHandle<Observed>,
}

impl Observer {
    /// Subscribe to `rt`'s events and count them in a task of their own.
    pub(crate) fn start(rt: &Runtime) -> Self {
        let mut events = rt.events();
        let done = Arc::new(Notify::new());
        let stop = Arc::clone(&done);
        let task = tokio::spawn(tokio::task::coop::unconstrained(async move {
            let mut seen = Observed::default();
            loop {
                tokio::select! {
                    biased;
                    () = stop.notified() => break,
                    event = events.recv() => match event {
                        Ok(event) => seen.count(&event),
                        Err(RecvError::Lagged(n)) => seen.lagged += n,
                        Err(RecvError::Closed) => return seen,
                    },
                }
            }
            drain(&mut events, &mut seen);
            seen
        }));
        Self { done, task }
    }

    /// Every event published so far, counted. Call once the runtime is quiet.
    pub(crate) async fn finish(self) -> Observed {
        self.done.notify_one();
        self.task.await.unwrap_or_else(|e| {
            if e.is_panic() {
                std::panic::resume_unwind(e.into_panic())
            }
            Observed::default()
        })
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
    pub(crate) parked: Vec<Input>,
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
                    Status::Asking | Status::Running => left.open += 1,
                    Status::Finished | Status::Failed => left.waiting += 1,
                }
            }
            if convert {
                let converted: Vec<Input> = entries.iter().map(Input::from_entry).collect();
                left.parked.push(Input::array(&converted));
            }
        }
        left
    }
}
