//! The one source of time.
//!
//! Everything in the runtime that needs "now" or needs to wait for an instant goes
//! through a [`Clock`]: expiry deadlines, retention horizons, idle passivation, `$now`.
//! [`SystemClock`] follows the wall clock; [`ManualClock`] only moves when told to, which
//! is what makes tests and simulations exact.
//!
//! This module deliberately does not own timers: the supervisor keeps every armed timer
//! in one structure and asks the clock only for "now" and "wake me at".

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use tokio::sync::watch;

/// A source of the current instant and of wake-ups.
pub trait Clock: Send + Sync + 'static {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;

    /// A future that resolves no earlier than `deadline` (or never, when `None`), and
    /// possibly earlier: when a manual clock moves, every waiter wakes to look again.
    fn wake_at(&self, deadline: Option<DateTime<Utc>>) -> BoxFuture<'static, ()>;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn wake_at(&self, deadline: Option<DateTime<Utc>>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            match deadline {
                Some(at) => {
                    let wait = (at - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                    tokio::time::sleep(wait).await;
                }
                None => std::future::pending::<()>().await,
            }
        })
    }
}

/// A clock that moves only when [`ManualClock::advance`] or [`ManualClock::set`] is called.
///
/// Cloning shares the same clock.
///
/// ```
/// use parkway::{Clock, ManualClock};
/// let clock = ManualClock::at("2026-01-01T00:00:00Z".parse().unwrap());
/// clock.advance(std::time::Duration::from_secs(90));
/// assert_eq!(clock.now().to_rfc3339(), "2026-01-01T00:01:30+00:00");
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    /// The current instant; every change wakes the waiters.
    now: Arc<watch::Sender<DateTime<Utc>>>,
}

impl ManualClock {
    /// A manual clock standing at `start`.
    pub fn at(start: DateTime<Utc>) -> Self {
        Self {
            now: Arc::new(watch::Sender::new(start)),
        }
    }

    /// Move the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        self.now.send_modify(|now| {
            *now = now
                .checked_add_signed(by)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
        });
    }

    /// Set the clock to `to`; a clock never moves backwards, so an earlier instant is ignored.
    pub fn set(&self, to: DateTime<Utc>) {
        self.now.send_if_modified(|now| {
            if to > *now {
                *now = to;
                true
            } else {
                false
            }
        });
    }
}

impl Default for ManualClock {
    /// A manual clock standing at 2026-01-01T00:00:00Z.
    fn default() -> Self {
        Self::at(DateTime::<Utc>::from_timestamp(1_767_225_600, 0).unwrap_or_default())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    fn wake_at(&self, deadline: Option<DateTime<Utc>>) -> BoxFuture<'static, ()> {
        // Subscribing here, not at the first poll, means a move made after this call and
        // before the first poll still wakes the waiter.
        let mut rx = self.now.subscribe();
        Box::pin(async move {
            if deadline.is_some_and(|at| *rx.borrow() >= at) {
                return;
            }
            // Any move wakes the waiter: the caller looks at `now` again.
            let _ = rx.changed().await;
        })
    }
}
