//! How subjects and doors arm and disarm the supervisor's timers: through a queue of
//! their own, not the supervisor's mailbox.
//!
//! Every ask arms an expiry and nearly every resolution disarms one, so timer changes
//! outnumber every other supervisor message. As mailbox messages they were handled at
//! most a scheduler budget (128) per turn of the supervisor's task, so a burst of asks
//! (a prefill of a million) queued the ticker's `FireDue` behind them and idle subjects
//! passivated seconds late. The supervisor now drains the whole queue at once, before it
//! fires what is due or reports its sizes: the timers are still the supervisor's, and
//! changed only by it.
//!
//! Arming no longer tells the supervisor's timers whether the new timer is the earliest,
//! so the arming side compares it with the deadline the ticker waits for, published in
//! [`Wake`], and kicks the ticker when the new one is earlier. While the supervisor
//! drains, the published deadline is "unknown" (`i64::MAX`), and every arm kicks.
//!
//! A queue that no round drains would grow without bound (a workload whose asks expire
//! in an hour and are resumed within a second arms and disarms without end), so every
//! [`DRAIN_AT`] changes kick the ticker for a round, which drains them.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering, fence};

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, mpsc};

use super::timers::{Timer, TimerKey, Timers};
use crate::slot::Slot;

/// How many queued changes kick the ticker for a round that drains them.
pub(crate) const DRAIN_AT: usize = 4096;

/// A change to the timers.
#[derive(Debug)]
pub(crate) enum TimerOp {
    /// Arm a timer.
    Arm(TimerKey, Timer),
    /// Disarm a timer.
    Disarm(TimerKey),
    /// Disarm every timer of a subject of a slot the runtime gave up.
    Leave(Slot),
}

/// The ticker's next deadline, as the arming side reads it, and its kick.
#[derive(Debug)]
pub(crate) struct Wake {
    /// Microseconds since the epoch of the earliest armed timer the ticker knows of;
    /// `i64::MAX` when there is none or the supervisor is draining.
    next: AtomicI64,
    /// Changes queued since the last drain.
    queued: AtomicUsize,
    /// Wakes the ticker for a round.
    pub(crate) kick: Notify,
}

impl Default for Wake {
    fn default() -> Self {
        Self {
            next: AtomicI64::new(i64::MAX),
            queued: AtomicUsize::new(0),
            kick: Notify::new(),
        }
    }
}

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

/// The sending side, kept in [`Services`](crate::services::Services).
#[derive(Debug)]
pub(crate) struct Arming {
    ops: mpsc::UnboundedSender<TimerOp>,
    wake: Arc<Wake>,
}

/// The supervisor's side: the queue and the published deadline.
#[derive(Debug)]
pub(crate) struct Armed {
    ops: mpsc::UnboundedReceiver<TimerOp>,
    wake: Arc<Wake>,
}

/// A queue between the two sides, sharing `wake` with the ticker.
pub(crate) fn queue(wake: Arc<Wake>) -> (Arming, Armed) {
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Arming {
            ops: tx,
            wake: Arc::clone(&wake),
        },
        Armed { ops: rx, wake },
    )
}

impl Arming {
    /// Arm a timer; a key armed twice keeps the later timer.
    pub(crate) fn arm(&self, key: TimerKey, timer: Timer) {
        let at = micros(key.at);
        // A stopped supervisor fires nothing; nothing waits for its timers then.
        self.send(TimerOp::Arm(key, timer));
        // Pairs with the fence in `Armed::drain`: either the drain sees this timer, or
        // this load sees the drain's "unknown" or the deadline it published after.
        fence(Ordering::SeqCst);
        if at < self.wake.next.load(Ordering::SeqCst) {
            self.wake.kick.notify_one();
        }
    }

    /// Disarm a timer; a key that already fired is ignored.
    pub(crate) fn disarm(&self, key: TimerKey) {
        self.send(TimerOp::Disarm(key));
    }

    /// Disarm every timer of a subject of `slot`, which the runtime gave up; in order
    /// with the changes sent before.
    pub(crate) fn leave(&self, slot: Slot) {
        self.send(TimerOp::Leave(slot));
    }

    /// Wake the ticker for a round now.
    pub(crate) fn kick(&self) {
        self.wake.kick.notify_one();
    }

    fn send(&self, op: TimerOp) {
        let _ = self.ops.send(op);
        if self.wake.queued.fetch_add(1, Ordering::Relaxed) + 1 == DRAIN_AT {
            self.wake.kick.notify_one();
        }
    }
}

impl Armed {
    /// Apply every queued change to `timers`, in order.
    pub(crate) fn drain(&mut self, timers: &mut Timers) {
        self.wake.next.store(i64::MAX, Ordering::SeqCst);
        self.wake.queued.store(0, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        while let Ok(op) = self.ops.try_recv() {
            match op {
                TimerOp::Arm(key, timer) => timers.arm(key, timer),
                TimerOp::Disarm(key) => timers.disarm(key),
                TimerOp::Leave(slot) => timers.leave(slot),
            }
        }
    }

    /// Publish the deadline the ticker is about to wait for.
    pub(crate) fn publish(&self, next: Option<DateTime<Utc>>) {
        let next = next.map_or(i64::MAX, micros);
        self.wake.next.store(next, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(secs, 0).unwrap_or_default()
    }

    fn idle() -> Timer {
        Timer::Idle {
            subject: Arc::from("s"),
        }
    }

    #[tokio::test]
    async fn changes_apply_in_order_and_only_earlier_timers_kick() {
        let wake = Arc::new(Wake::default());
        let (arming, mut armed) = queue(Arc::clone(&wake));
        let mut timers = Timers::default();
        let key = |secs, seq| TimerKey { at: at(secs), seq };

        // Nothing published yet: the first arm kicks.
        arming.arm(key(10, 1), idle());
        assert!(
            tokio::time::timeout(std::time::Duration::ZERO, wake.kick.notified())
                .await
                .is_ok()
        );
        armed.drain(&mut timers);
        armed.publish(timers.next());
        assert_eq!(timers.next(), Some(at(10)));

        // Later than the published deadline: no kick. Earlier: a kick.
        arming.arm(key(20, 2), idle());
        assert!(
            tokio::time::timeout(std::time::Duration::ZERO, wake.kick.notified())
                .await
                .is_err()
        );
        arming.arm(key(5, 3), idle());
        assert!(
            tokio::time::timeout(std::time::Duration::ZERO, wake.kick.notified())
                .await
                .is_ok()
        );

        // An arm and its disarm, queued together, leave nothing armed.
        arming.disarm(key(5, 3));
        armed.drain(&mut timers);
        assert_eq!((timers.len(), timers.next()), (2, Some(at(10))));
        armed.publish(timers.next());
    }

    #[tokio::test]
    async fn a_long_queue_kicks_the_ticker_to_drain_it() {
        let wake = Arc::new(Wake::default());
        let (arming, mut armed) = queue(Arc::clone(&wake));
        let mut timers = Timers::default();
        let key = |seq| TimerKey { at: at(100), seq };
        let kicked = || async {
            tokio::time::timeout(std::time::Duration::ZERO, wake.kick.notified())
                .await
                .is_ok()
        };
        arming.arm(key(0), idle());
        assert!(kicked().await);
        armed.drain(&mut timers);
        armed.publish(timers.next());
        // Later timers, armed and disarmed: no kick until the queue holds DRAIN_AT.
        let pairs = DRAIN_AT as u64 / 2;
        for seq in 1..pairs {
            arming.arm(key(seq), idle());
            arming.disarm(key(seq));
        }
        assert!(!kicked().await);
        arming.arm(key(pairs), idle());
        arming.disarm(key(pairs));
        assert!(kicked().await);
        armed.drain(&mut timers);
        assert_eq!(timers.len(), 1);
    }
}
