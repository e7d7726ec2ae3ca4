//! The messages an activation polled in place sends its own subject, kept for the turn.
//!
//! A subject's actor polls an activation once in place when it starts it
//! (`crate::run::activation::spawn`); most finish then, having sent their subject an
//! `Ask` or an `Ended`. Sent through the mailbox, such a message was handled in a later
//! turn, and on a durable runtime its change was a second batch and, most often, a
//! second sync after the change that started the activation. Captured here instead, it
//! is handled in the same turn, after the message that started the activation (as if it
//! were the next in the mailbox), and its change joins the turn's one batch.
//!
//! The capture is a thread-local set only for the synchronous poll in place, so it sees
//! nothing but that activation's sends: no other code runs on the thread meanwhile.

use std::cell::RefCell;
use std::sync::Arc;

use super::Msg;

thread_local! {
    /// The subject whose activation is being polled in place, and what it sent it.
    static CAPTURE: RefCell<Option<(Arc<str>, Vec<Msg>)>> = const { RefCell::new(None) };
}

/// Run `poll` (an activation's poll in place on `subject`'s actor), keeping the messages
/// it sends `subject`; the poll's result and those messages, in the order sent.
pub(crate) fn capturing<T>(subject: &Arc<str>, poll: impl FnOnce() -> T) -> (T, Vec<Msg>) {
    let outer = CAPTURE.with(|c| c.replace(Some((Arc::clone(subject), Vec::new()))));
    let out = poll();
    let sent = CAPTURE
        .with(|c| c.replace(outer))
        .map(|(_, sent)| sent)
        .unwrap_or_default();
    (out, sent)
}

/// Keep `msg` for the turn if it is sent to the subject whose activation is being
/// polled in place on this thread; otherwise hand it back, to be sent.
pub(crate) fn offer(subject: &str, msg: Msg) -> Option<Msg> {
    CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some((polled, sent)) if &**polled == subject => {
            sent.push(msg);
            None
        }
        _ => Some(msg),
    })
}
