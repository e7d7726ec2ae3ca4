//! The run actor: executes one activation of a run, as a task of its own.
//!
//! Spawned by the subject for each activation, it calls the target, catches a panic as
//! a failure (a run never hangs because its target panicked), sends the `Ended` message
//! to its subject, and ends. Along the way the target's `ask`, `call` and parked-set
//! operations are messages to the subject too. A teardown aborts it from the subject,
//! which drops the target's future wherever it stands.
//!
//! It is a plain task, not a ractor actor, on purpose: an activation only sends, it never
//! receives a message, so a mailbox would be pure cost, and a ractor actor's cell (four
//! channels, a supervision port, a task to start it) was the largest share of what an
//! activation cost the subject that spawned it. The subject holds its abort handle
//! while it runs, which is all a teardown needs.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;
use tokio::task::AbortHandle;

use crate::error::RunError;
use crate::run::ctx::Ctx;
use crate::run::stored::Stored;
use crate::subject::{Ending, SubjectMsg};
use crate::target::Target;

/// What one activation runs.
pub(crate) struct Activation {
    /// The run's context for this activation; it names the target.
    pub(crate) ctx: Ctx,
    /// Its kwargs.
    pub(crate) kwargs: Stored,
    /// Its extras.
    pub(crate) extras: Stored,
}

/// Start `activation` on the current runtime; the handle aborts it.
pub(crate) fn spawn(activation: Activation) -> AbortHandle {
    tokio::spawn(run(activation)).abort_handle()
}

async fn run(activation: Activation) {
    let Activation {
        ctx,
        kwargs,
        extras,
    } = activation;
    // Looked up at each activation: a parked run resumes with the target registered
    // under its name now, whether its subject stayed live or was packed meanwhile.
    let shared = ctx.shared();
    let target = shared.targets.get(ctx.target());
    let result = match (target, kwargs.read(), extras.read()) {
        (Some(target), Ok(kwargs), Ok(extras)) => call(&ctx, &target, kwargs, extras).await,
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
    let _ = shared
        .subjects
        .send(&shared, &subject, SubjectMsg::Ended(Box::new(ending)))
        .await;
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
