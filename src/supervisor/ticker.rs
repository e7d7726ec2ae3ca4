//! The ticker: the one task that waits on the clock for the supervisor's timers.
//!
//! Each round it asks the supervisor for what is due at the clock's now and delivers
//! each fired timer to its subject through the registry (waking a passive subject). A
//! fire is only a message: a schedule's next fire is armed here and its visit is
//! evaluated by its subject, so a slow or stuck evaluation never holds up the ticker.
//! Then it waits on the clock until the next deadline, a clock move, a kick (an earlier
//! timer was armed, or many changes wait to be drained: [`arming`](super::arming)), or a request for a round, which [`Runtime::settle`] sends to
//! learn that the clock's present has been handled.
//!
//! [`Runtime::settle`]: crate::Runtime::settle

use std::collections::HashSet;
use std::sync::{Arc, Weak};

use chrono::{DateTime, Utc};

use tokio::sync::{mpsc, oneshot};

use super::actor::Msg;
use super::arming::Wake;
use super::timers::{Fired, Timer};
use crate::event::Event;
use crate::store::{Batch, Space, layout};
use crate::subject::index::Pager;
use crate::subject::{Hub, Msg as SubjectMsg, Op};

/// A request for one full round; answered with how many timers it fired.
pub(crate) type RoundRequest = oneshot::Sender<usize>;

/// Run the ticker until the runtime is dropped.
pub(crate) async fn run(
    hub: Weak<Hub>,
    wake: Arc<Wake>,
    mut requests: mpsc::UnboundedReceiver<RoundRequest>,
) {
    let mut waiting: Vec<RoundRequest> = Vec::new();
    let mut pager = Pager::default();
    loop {
        let Some(strong) = hub.upgrade() else {
            return;
        };
        let now = strong.services.clock.now();
        // What is due on disk within the window is armed before the round fires.
        let page_at = pager.page(&strong, now);
        let (tx, rx) = oneshot::channel();
        if strong
            .supervisor
            .cast(Msg::FireDue { now, reply: tx })
            .is_err()
        {
            return;
        }
        let Ok((fired, next)) = rx.await else {
            return;
        };
        let count = fired.len();
        let mut round = Round::default();
        for timer in fired {
            deliver(&strong, timer, &mut round).await;
        }
        // The records this round dropped are gone from the store before the next round
        // reads the wake index or fires another record's horizon.
        for dropped in round.durable {
            let _ = dropped.await;
        }
        for request in waiting.drain(..) {
            let _ = request.send(count);
        }
        if count > 0 {
            continue;
        }
        let next = match (next, page_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let due = strong.services.clock.wake_at(next);
        drop(strong);
        tokio::select! {
            _ = due => {}
            _ = wake.kick.notified() => {}
            request = requests.recv() => match request {
                Some(request) => waiting.push(request),
                None => return,
            },
        }
    }
}

/// Deliver one fired timer: a message to its subject, or, for a run's record, the
/// record dropped here.
/// What one round of fired timers did that the next must see.
#[derive(Default)]
struct Round {
    /// The records dropped.
    dropped: HashSet<Arc<str>>,
    /// Each completes once its record's drop is durable.
    durable: Vec<oneshot::Receiver<()>>,
}

/// Drop the record of `run` at its horizon `at`, if it is still kept: in memory (a run
/// that ended since the store was opened) or only in the store (the horizon came from the
/// wake index). A record's horizon may fire twice, once from memory and once from the
/// index (a record kept just as the index was read), so it is dropped once: a drop is
/// durable before the next round, and the round remembers its own.
fn drop_record(
    hub: &Arc<Hub>,
    subject: Arc<str>,
    run: Arc<str>,
    at: DateTime<Utc>,
    round: &mut Round,
) {
    let s = &hub.services;
    // A slot given up is not written.
    if round.dropped.contains(&run) || s.away.of(&subject).is_some() {
        return;
    }
    // A record the store cannot read is not dropped: its damage is tallied, and what
    // is there is left for the operator.
    let kept = hub.records.retire(&run)
        || s.store.as_ref().is_some_and(|store| {
            match store.get(Space::Records, &layout::run_key(&run)) {
                Ok(found) => found.is_some(),
                Err(error) => {
                    s.damage.read_failed(&error);
                    false
                }
            }
        });
    if !kept {
        return;
    }
    // Gone from memory already; a restart before the delete is durable drops it again.
    let mut batch = Batch::of_slot(layout::run_slot(&run));
    batch.delete(Space::Records, layout::run_key(&run));
    batch.delete(Space::Wakes, layout::record_wake(at, &run));
    let (tx, rx) = oneshot::channel();
    s.publish_alone_then(
        Event::RecordDropped {
            subject: subject.to_string(),
            run: run.to_string(),
        },
        batch,
        Box::new(move || {
            let _ = tx.send(());
        }),
    );
    round.durable.push(rx);
    round.dropped.insert(run);
}

async fn deliver(hub: &Arc<Hub>, timer: Fired, round: &mut Round) {
    let Fired { key, timer } = timer;
    let (subject, op) = match timer {
        Timer::Expiry {
            subject,
            interaction,
        } => (subject, Op::Expire { interaction, key }),
        Timer::Retention {
            subject,
            interaction,
        } => (subject, Op::Retire { interaction, key }),
        Timer::Idle { subject } => (subject, Op::Idle { key }),
        Timer::Record { subject, run } => {
            drop_record(hub, subject, run, key.at, round);
            return;
        }
        Timer::Wake { subject } => {
            // Read back, its own timers armed; a subject already in memory has them.
            let _ = hub.registry.load_passive(hub, &subject);
            return;
        }
        Timer::Forget { key } => {
            hub.forget_key(&key);
            return;
        }
        // The next fire is armed and the visit is a message to the schedule's subject:
        // the ticker never waits on an evaluation.
        Timer::Schedule { door, generation } => {
            hub.scheduled(&door, generation, key.at).await;
            return;
        }
    };
    // A runtime that is stopping drops its timers; nothing is waiting for them then.
    let _ = hub.send(&subject, SubjectMsg::op(op)).await;
}
