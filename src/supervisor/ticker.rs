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

use super::actor::SupervisorMsg;
use super::arming::Wake;
use super::timers::{Fired, Timer};
use crate::shared::Shared;
use crate::subject::SubjectMsg;

/// A request for one full round; answered with how many timers it fired.
pub(crate) type RoundRequest = oneshot::Sender<usize>;

/// Run the ticker until the runtime is dropped.
pub(crate) async fn run(
    shared: Weak<Shared>,
    wake: Arc<Wake>,
    mut requests: mpsc::UnboundedReceiver<RoundRequest>,
) {
    let mut waiting: Vec<RoundRequest> = Vec::new();
    loop {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let now = strong.clock.now();
        let (tx, rx) = oneshot::channel();
        if strong
            .supervisor
            .cast(SupervisorMsg::FireDue { now, reply: tx })
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
        let due = strong.clock.wake_at(next);
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

async fn deliver(shared: &Arc<Shared>, timer: Fired) {
    let Fired { key, timer } = timer;
    let (subject, msg) = match timer {
        Timer::Expiry {
            subject,
            interaction,
        } => (subject, SubjectMsg::Expire { interaction, key }),
        Timer::Retention {
            subject,
            interaction,
        } => (subject, SubjectMsg::Retire { interaction, key }),
        Timer::Idle { subject } => (subject, SubjectMsg::Idle { key }),
        Timer::Record { subject, run } => {
            // The record store is the runtime's, not the subject's: no message needed.
            if shared.records.retire(&run) {
                shared.events.publish(crate::event::Event::RecordDropped {
                    subject: subject.to_string(),
                    run: run.to_string(),
                });
            }
            return;
        }
        // The next fire is armed here and the visit is a message to the schedule's
        // subject: the ticker never waits on an evaluation.
        Timer::Schedule { door, generation } => {
            match crate::door::registry::schedule_fired(shared, &door, generation, key.at) {
                Some(visit) => visit,
                None => return,
            }
        }
    };
    // A runtime that is stopping drops its timers; nothing is waiting for them then.
    let _ = shared.subjects.send(shared, &subject, msg).await;
}
