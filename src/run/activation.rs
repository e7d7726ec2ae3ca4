//! The run actor: executes one activation of a run.
//!
//! Started by the subject for each activation, it calls the target, catches a panic as
//! a failure (a run never hangs because its target panicked), sends the `Ended` message
//! to its subject, and ends. Along the way the target's `ask`, `call` and parked-set
//! operations are messages to the subject too. A teardown aborts it from the subject,
//! which drops the target's future wherever it stands.
//!
//! It is polled once in place by the subject, and spawned as a plain task only if it
//! does not finish then (`docs/semantics.md`, "One message at a time per subject"). Not
//! a ractor actor, on purpose: an activation only sends, it never receives a message, so
//! a mailbox would be pure cost, and a ractor actor's cell (four channels, a supervision
//! port, a task to start it) was the largest share of what an activation cost the
//! subject that spawned it. The subject holds its [`Handle`] until the `Ended` message
//! arrives, which is all a teardown needs; at shutdown the subject aborts it and waits
//! for its task to end (`docs/semantics.md`, "Shutdown").

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use futures::FutureExt;
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::error::RunError;
use crate::run::ctx::Ctx;
use crate::run::port::Ending;
use crate::run::stored::Stored;
use crate::target::Target;

/// What one activation runs.
pub(crate) struct Activation {
    /// The run's context for this activation; it names the target.
    pub(crate) ctx: Ctx,
    pub(crate) kwargs: Stored,
    pub(crate) extras: Stored,
}

/// An activation as its subject holds it until the `Ended` message arrives.
#[derive(Debug)]
pub(crate) enum Handle {
    /// Executing as a task: a teardown aborts it, and a shutdown aborts it and waits
    /// for it to end.
    Task(JoinHandle<()>),
    /// Finished when first polled: its `Ended` message is on its way, and there is
    /// nothing left to abort.
    Done,
}

impl Handle {
    /// Stop the activation wherever it stands; nothing to do if it has finished.
    pub(crate) fn abort(&self) {
        if let Handle::Task(handle) = self {
            handle.abort();
        }
    }

    /// Abort the activation and wait until its task has ended (a shutdown).
    pub(crate) async fn stopped(self) {
        if let Handle::Task(handle) = self {
            handle.abort();
            // Cancelled, or it finished first: either way it has ended.
            let _ = handle.await;
        }
    }
}

/// Start `activation`: polled once in place, and spawned as a task only if it does not
/// finish then. Most activations finish at once (a run that asks its caller parks and
/// ends, a replay runs to its next ask or its result), which saves a task's spawn,
/// scheduling and teardown each; one that awaits a reply from its subject (which is
/// busy polling it) or anything else goes on as a task, whose first poll registers its
/// real waker.
pub(crate) fn spawn(activation: Activation) -> Handle {
    let mut future = Box::pin(run(activation));
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(()) => Handle::Done,
        Poll::Pending => Handle::Task(tokio::spawn(future)),
    }
}

async fn run(activation: Activation) {
    let Activation {
        ctx,
        kwargs,
        extras,
    } = activation;
    // Looked up at each activation: a parked run resumes with the target registered
    // under its name now, whether its subject stayed live or was packed meanwhile.
    let port = Arc::clone(ctx.port());
    let target = port.services().targets.get(ctx.target());
    let result = match (target, kwargs.read(), extras.read()) {
        (Some(target), Ok(kwargs), Ok(extras)) => {
            call(&ctx, &target, kwargs, extras).await.and_then(|value| {
                crate::depth::check(value, || {
                    RunError::Failed(format!(
                        "target {} returned a value nested deeper than {} levels",
                        target.name,
                        crate::MAX_VALUE_DEPTH
                    ))
                })
            })
        }
        (None, ..) => Err(RunError::Failed(format!(
            "target {:?} of run {} is not registered",
            ctx.target(),
            ctx.run_id()
        ))),
        (_, Err(e), _) | (_, _, Err(e)) => Err(RunError::Failed(format!(
            "the kwargs or extras of run {} could not be read back: {e}",
            ctx.run_id()
        ))),
    };
    let replay = ctx.finish();
    let subject = Arc::clone(ctx.subject_name());
    let ending = Ending {
        run: Arc::from(ctx.run_id()),
        epoch: ctx.epoch(),
        result,
        replay,
    };
    // A stopping runtime has nobody left to tell.
    port.ended(subject, ending).await;
}

/// Call the target; a panic becomes a failure.
async fn call(ctx: &Ctx, target: &Target, kwargs: Value, extras: Value) -> Result<Value, RunError> {
    let future = (target.run)(ctx.clone(), kwargs, extras);
    AssertUnwindSafe(future)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic".to_owned());
            Err(RunError::Failed(format!(
                "target {} panicked: {what}",
                target.name
            )))
        })
}
