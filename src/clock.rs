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

use chrono::{DateTime, NaiveDate, Utc};
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
/// Cloning shares the same clock. It never moves past [`ManualClock::last`],
/// 9999-12-31T23:59:59.999999999Z, the last instant RFC 3339 writes: every deadline the
/// runtime computes from its now (an expiry, a retention horizon, an idle check) is then
/// still ahead of it, where at the end of `chrono`'s range a deadline would saturate to
/// the present and fire again at every round. A move past it is refused
/// ([`ManualClock::try_advance`]) and changes nothing.
///
/// ```
/// use parkway::{Clock, ManualClock};
/// let clock = ManualClock::at("2026-01-01T00:00:00Z".parse().unwrap());
/// clock.advance(std::time::Duration::from_secs(90));
/// assert_eq!(clock.now().to_rfc3339(), "2026-01-01T00:01:30+00:00");
/// assert!(clock.try_advance(std::time::Duration::from_secs(u64::MAX)).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    /// The current instant; every change wakes the waiters.
    now: Arc<watch::Sender<DateTime<Utc>>>,
}

/// A move of a [`ManualClock`] past the last instant it can show; the clock did not move.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the clock cannot move forward by {} from {}: that is past {}, the last instant it shows",
    humantime::format_duration(*by),
    rfc3339(now),
    rfc3339(&ManualClock::last())
)]
pub struct ClockError {
    /// Where the clock stands.
    pub now: DateTime<Utc>,
    /// The move refused.
    pub by: Duration,
}

impl ManualClock {
    /// A manual clock standing at `start` (at [`ManualClock::last`] if `start` is later).
    pub fn at(start: DateTime<Utc>) -> Self {
        Self {
            now: Arc::new(watch::Sender::new(start.min(Self::last()))),
        }
    }

    /// The last instant a manual clock shows: 9999-12-31T23:59:59.999999999Z.
    pub fn last() -> DateTime<Utc> {
        NaiveDate::from_ymd_opt(9999, 12, 31)
            .and_then(|d| d.and_hms_nano_opt(23, 59, 59, 999_999_999))
            .map_or(DateTime::<Utc>::MAX_UTC, |t| t.and_utc())
    }

    /// Move the clock forward by `by`, and return where it stands; a move past
    /// [`ManualClock::last`] is refused and the clock stays where it was.
    pub fn try_advance(&self, by: Duration) -> Result<DateTime<Utc>, ClockError> {
        let mut result = Ok(self.now());
        self.now.send_if_modified(|now| {
            let to = chrono::Duration::from_std(by)
                .ok()
                .and_then(|by| now.checked_add_signed(by))
                .filter(|to| *to <= Self::last());
            match to {
                Some(to) => {
                    result = Ok(to);
                    let moved = to != *now;
                    *now = to;
                    moved
                }
                None => {
                    result = Err(ClockError { now: *now, by });
                    false
                }
            }
        });
        result
    }

    /// Move the clock forward by `by`.
    ///
    /// # Panics
    ///
    /// If that is past [`ManualClock::last`], as `Instant + Duration` panics on overflow;
    /// [`ManualClock::try_advance`] refuses such a move instead (use it for a duration
    /// that comes from input).
    #[track_caller]
    pub fn advance(&self, by: Duration) {
        if let Err(e) = self.try_advance(by) {
            panic!("{e}");
        }
    }

    /// Set the clock to `to`; a clock never moves backwards, so an earlier instant is
    /// ignored, and never past [`ManualClock::last`], so a later instant sets it there.
    pub fn set(&self, to: DateTime<Utc>) {
        let to = to.min(Self::last());
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

/// `at` as RFC 3339 text in UTC, as the rest of the runtime writes times.
pub(crate) fn rfc3339(at: &DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}
