//! Platform events: one subscribable stream, and a `tracing` event for each.
//!
//! The stream is a broadcast channel: a subscriber that falls more than its capacity
//! behind loses the oldest events and is told so by the channel (`Lagged`). Events are
//! facts that already happened; nothing waits for a subscriber.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::entry::To;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, broadcast};

mod tail;

pub(crate) use tail::follow;

/// How an ask was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Resolution {
    /// Answered by a resume.
    Resumed,
    /// Torn down by a cancel, or withdrawn with its activation.
    Cancelled,
    /// Its deadline lapsed, whether it killed the chain (`on_expiry = kill`) or resumed
    /// the run with the expiry marker (`on_expiry = resume`).
    Expired,
}

/// How an interaction left its subject for good, as the subject remembers it: the
/// three resolutions of an ask, and the take of a waiting outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Settled {
    /// Answered by a resume.
    Resumed,
    /// Torn down by a cancel (or a waiting outcome cancelled).
    Cancelled,
    /// Its deadline lapsed.
    Expired,
    /// Its waiting outcome was taken.
    Taken,
}

impl From<Resolution> for Settled {
    fn from(how: Resolution) -> Self {
        match how {
            Resolution::Resumed => Settled::Resumed,
            Resolution::Cancelled => Settled::Cancelled,
            Resolution::Expired => Settled::Expired,
        }
    }
}

impl std::fmt::Display for Settled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Settled::Resumed => "resumed",
            Settled::Cancelled => "cancelled",
            Settled::Expired => "expired",
            Settled::Taken => "taken",
        })
    }
}

/// The addressee of an ask event logged before events named it.
fn caller() -> To {
    To::Caller
}

/// One platform event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A run parked an ask.
    AskParked {
        /// The subject.
        subject: String,
        /// The interaction.
        interaction: String,
        /// The asking run.
        run: String,
        /// Who the ask is addressed to: a user ask is in the inbox.
        #[serde(default = "caller")]
        to: To,
        /// A user ask's inbox item as it entered the inbox (its `asked_by_titles`
        /// empty: each reader fills them from the tools it knows), so a stream served
        /// by any node can show it; absent for a caller ask.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<Box<crate::InboxItem>>,
    },
    /// An ask was resolved, exactly once.
    AskResolved {
        /// The subject.
        subject: String,
        /// The interaction.
        interaction: String,
        /// How.
        how: Resolution,
        /// Who the ask was addressed to: a user ask leaves the inbox.
        #[serde(default = "caller")]
        to: To,
    },
    /// A run was started.
    RunStarted {
        /// The subject.
        subject: String,
        /// The run.
        run: String,
        /// Its target.
        target: String,
    },
    /// A run returned a result.
    RunFinished {
        /// The subject.
        subject: String,
        /// The run.
        run: String,
    },
    /// A run raised.
    RunFailed {
        /// The subject.
        subject: String,
        /// The run.
        run: String,
        /// Its error.
        error: String,
    },
    /// A run was torn down.
    RunCancelled {
        /// The subject.
        subject: String,
        /// The run.
        run: String,
        /// The interaction whose cancel or expiry tore it down.
        interaction: String,
    },
    /// An ask was refused at a concurrency cap.
    CapRefused {
        /// The subject.
        subject: String,
        /// The setting at its limit.
        setting: String,
        /// The limit.
        limit: usize,
    },
    /// An ask's deadline lapsed.
    ExpiryFired {
        /// The subject.
        subject: String,
        /// The interaction.
        interaction: String,
    },
    /// A resolved run's terminal was left waiting on the subject.
    WaitingOutcomeStored {
        /// The subject.
        subject: String,
        /// The interaction it waits under.
        interaction: String,
    },
    /// A waiting outcome was taken.
    WaitingOutcomeTaken {
        /// The subject.
        subject: String,
        /// The interaction.
        interaction: String,
    },
    /// A waiting outcome was dropped: past the retention horizon, or cancelled.
    WaitingOutcomeDropped {
        /// The subject.
        subject: String,
        /// The interaction.
        interaction: String,
        /// `retention` or `cancelled`.
        reason: String,
    },
    /// An ended run's record was dropped: its retention horizon passed.
    RecordDropped {
        /// The run's subject.
        subject: String,
        /// The run.
        run: String,
    },
    /// A run reported how far its work has come ([`Ctx::progress`](crate::Ctx::progress)).
    /// A note, not a change: it is shown at once and never written to the event log,
    /// and a replay of the run does not report it again.
    RunProgress {
        /// The subject.
        subject: String,
        /// The run.
        run: String,
        /// The progress so far.
        progress: f64,
        /// The total, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        /// What the run is doing.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A door visit was refused; nothing was applied.
    VisitRefused {
        /// The subject.
        subject: String,
        /// The door.
        door: String,
        /// Why.
        error: String,
    },
}

impl Event {
    /// The subject the event is about: every event names one.
    pub fn subject(&self) -> &str {
        match self {
            Event::AskParked { subject, .. }
            | Event::AskResolved { subject, .. }
            | Event::RunStarted { subject, .. }
            | Event::RunFinished { subject, .. }
            | Event::RunFailed { subject, .. }
            | Event::RunCancelled { subject, .. }
            | Event::CapRefused { subject, .. }
            | Event::ExpiryFired { subject, .. }
            | Event::WaitingOutcomeStored { subject, .. }
            | Event::WaitingOutcomeTaken { subject, .. }
            | Event::WaitingOutcomeDropped { subject, .. }
            | Event::RecordDropped { subject, .. }
            | Event::RunProgress { subject, .. }
            | Event::VisitRefused { subject, .. } => subject,
        }
    }
}

/// An event as the durable event log keeps it: with its sequence number, which orders
/// the log without gaps (`Runtime::event_log`, `Runtime::logged_events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Logged {
    /// Its place in the log, from 1.
    pub seq: u64,
    /// The event.
    pub event: Event,
}

/// The event stream.
#[derive(Debug, Clone)]
pub(crate) struct Events {
    /// The broadcast side; subscribers hold receivers.
    tx: broadcast::Sender<Event>,
    /// The events of the durable log, as they are shown, with their numbers.
    logged: broadcast::Sender<Logged>,
    /// On a log every node sharing the database writes: the logged events are shown by
    /// the task that reads them back in order ([`follow`]), every node's, and a commit
    /// here only wakes it.
    shared: Arc<Shared>,
}

/// Whether the log is shared, and how the task that reads it back is woken.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Set once, before the runtime serves.
    on: AtomicBool,
    /// Notified at each commit of this node's.
    wake: Notify,
}

impl Events {
    /// A stream keeping up to `capacity` events for the slowest subscriber.
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            tx: broadcast::Sender::new(capacity),
            logged: broadcast::Sender::new(capacity),
            shared: Arc::new(Shared::default()),
        }
    }

    /// The logged events are every node's, read back from the log they share: this
    /// node's commits are shown by [`follow`], which they wake, as the others' are.
    pub(crate) fn share_log(&self) -> Arc<Shared> {
        self.shared.on.store(true, Ordering::Release);
        Arc::clone(&self.shared)
    }

    /// Whether anyone follows the logged events.
    pub(crate) fn followed(&self) -> bool {
        self.logged.receiver_count() > 0
    }

    /// Shows `logged`, read back from a shared log, to the subscribers of the logged
    /// events.
    pub(crate) fn show_logged(&self, logged: Logged) {
        if self.followed() {
            let _ = self.logged.send(logged);
        }
    }

    /// A new subscriber to the logged events shown from now on.
    pub(crate) fn subscribe_logged(&self) -> broadcast::Receiver<Logged> {
        self.logged.subscribe()
    }

    /// Publish `event`, number `seq` of the durable log.
    pub(crate) fn publish_logged(&self, seq: u64, event: Event) {
        if self.shared.on.load(Ordering::Acquire) {
            self.shared.wake.notify_one();
        } else if self.logged.receiver_count() > 0 {
            let _ = self.logged.send(Logged {
                seq,
                event: event.clone(),
            });
        }
        self.publish(event);
    }

    /// A new subscriber, seeing every event published from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.tx.subscribe()
    }

    /// Publish `event` to every subscriber and to `tracing`.
    pub(crate) fn publish(&self, event: Event) {
        tracing::info!(target: "parkway::event", ?event);
        // No subscriber is not an error: the tracing event above still records it.
        let _ = self.tx.send(event);
    }
}
