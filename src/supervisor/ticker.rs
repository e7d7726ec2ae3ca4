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

use std::sync::{Arc, Weak};

use tokio::sync::{mpsc, oneshot};

use super::actor::Msg;
use super::arming::Wake;
use super::timers::{Fired, Timer};
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
    loop {
        let Some(strong) = hub.upgrade() else {
            return;
        };
        let now = strong.services.clock.now();
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
        for timer in fired {
            deliver(&strong, timer).await;
        }
        for request in waiting.drain(..) {
            let _ = request.send(count);
        }
        if count > 0 {
            continue;
        }
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
async fn deliver(hub: &Arc<Hub>, timer: Fired) {
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
            // The record store is the hub's, not the subject's: no message needed.
            if hub.records.retire(&run) {
                // The record is gone from memory already; a restart before the delete
                // is durable drops it again.
                let mut batch = crate::store::Batch::new();
                batch.delete(crate::store::Space::Records, run.as_bytes());
                hub.services.publish_alone(
                    crate::event::Event::RecordDropped {
                        subject: subject.to_string(),
                        run: run.to_string(),
                    },
                    batch,
                );
            }
            return;
        }
        Timer::Forget { key } => {
            if hub.keys.forget(&key)
                && let Some(store) = &hub.services.store
            {
                // Nothing waits on this; a restart before it is durable forgets it again.
                let mut batch = crate::store::Batch::new();
                batch.delete(crate::store::Space::Keys, key.as_bytes());
                store.submit(batch, Box::new(|_| {}));
            }
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
    let _ = hub.send(&subject, SubjectMsg::Op(op)).await;
}
