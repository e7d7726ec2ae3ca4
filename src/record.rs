//! A run record: what a receiver is handed when a run's activation ends, and the
//! runtime's store of them ([`Records`]), which keeps every run's latest record while the
//! run lives and for the retention horizon after it ends.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::entry::Entry;
use thiserror::Error;

/// Where a run stands.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStatus {
    /// An activation is executing.
    Running,
    /// The run returned a result.
    Succeeded,
    /// The run raised.
    Failed,
    /// The run was torn down by a cancel or a `kill` expiry.
    Cancelled,
    /// The run asked its caller: `asks` holds the open entries.
    Parked,
    /// Only user asks are open.
    Suspended,
}

impl RunStatus {
    /// The status as the record serialises it: `parked`, `failed`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Parked => "parked",
            RunStatus::Suspended => "suspended",
        }
    }

    /// Whether the run will never run again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run's record, as a receiver sees it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id, `r-…`.
    pub run_id: String,
    /// The target it runs.
    pub target: String,
    /// The principal it runs as (read as empty from a record written without one).
    #[serde(default)]
    pub identity: String,
    /// Where it stands.
    pub status: RunStatus,
    /// When the run was started.
    pub started_at: DateTime<Utc>,
    /// When it ended for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Its result, when it succeeded (a `null` result is `Some(Value::Null)`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::run::journal::present"
    )]
    pub result: Option<Value>,
    /// Why it failed or was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The caller asks it has open, when parked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asks: Option<Vec<Entry>>,
    /// The suspension sentinel, when user asks are open: their interaction ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<Suspended>,
    /// The interactions this run resolved on its way.
    #[serde(default)]
    pub resumed_interactions: Vec<String>,
}

impl RunRecord {
    /// The run's result, or why there is none: a failed run is an `Ok` record with
    /// status `failed`, and this turns it into an error that implements
    /// `std::error::Error`, for `?` in a function returning `anyhow::Result` or
    /// `Result<_, Box<dyn Error>>`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use parkway::{Ids, NoResult, Runtime, RunError, Start};
    ///
    /// let rt = Runtime::builder().without_env().ids(Ids::sequential()).build().await.unwrap();
    /// rt.register("broken", &[], |_, _, _| async { Err(RunError::fail("disk full")) });
    /// let record = rt.run(Start::new("s", "broken")).await.unwrap();
    /// let error = record.into_result().unwrap_err();
    /// assert!(matches!(error, NoResult::Failed { .. }));
    /// assert_eq!(error.to_string(), "run r-1 of target broken failed: disk full");
    /// # }
    /// ```
    pub fn into_result(self) -> Result<Value, NoResult> {
        let RunRecord {
            run_id,
            target,
            status,
            result,
            error,
            ..
        } = self;
        match status {
            RunStatus::Succeeded => Ok(result.unwrap_or(Value::Null)),
            RunStatus::Failed => Err(NoResult::Failed {
                run_id,
                target,
                error: error.unwrap_or_else(|| "no error recorded".to_owned()),
            }),
            RunStatus::Cancelled => Err(NoResult::Cancelled {
                run_id,
                target,
                reason: error.unwrap_or_else(|| "no reason recorded".to_owned()),
            }),
            RunStatus::Running | RunStatus::Parked | RunStatus::Suspended => {
                Err(NoResult::NotEnded {
                    run_id,
                    target,
                    status,
                })
            }
        }
    }
}

impl RunRecord {
    /// The caller asks this record raises to its caller, oldest first: empty unless the
    /// run is parked.
    pub fn asks(&self) -> &[Entry] {
        self.asks.as_deref().unwrap_or_default()
    }

    /// The first caller ask this record raises, or why there is none: the record of a
    /// run that ended, is running, or waits only on a person is
    /// [`NoResult::NotParked`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use parkway::{Ask, Runtime, Start};
    /// use serde_json::json;
    ///
    /// let rt = Runtime::builder().without_env().build().await?;
    /// rt.register("deploy", &[], |ctx, _, _| async move {
    ///     let go = ctx.ask(Ask::caller("proceed?").answer_format("confirm").expiry_at("10m")).await?;
    ///     Ok(json!({"deployed": go["answer"] == "yes"}))
    /// });
    /// let record = rt.run(Start::new("thread-1", "deploy")).await?;
    /// let ask = record.first_ask()?;
    /// assert_eq!(ask.question.as_deref(), Some("proceed?"));
    /// let done = rt.resume("thread-1", &ask.id, json!({"answer": "yes"})).await?;
    /// assert_eq!(done.into_result()?, json!({"deployed": true}));
    /// # Ok(()) }
    /// ```
    pub fn first_ask(&self) -> Result<&Entry, NoResult> {
        self.asks().first().ok_or_else(|| NoResult::NotParked {
            run_id: self.run_id.clone(),
            target: self.target.clone(),
            status: self.status,
            error: self.error.clone(),
        })
    }

    /// The interaction ids of the user asks the run waits on (its suspension), oldest
    /// first: empty unless the run is suspended or parked beside them.
    pub fn user_asks(&self) -> &[String] {
        self.suspension
            .as_ref()
            .map_or(&[], |s| s.interactions.as_slice())
    }
}

/// The suspension sentinel of a run record: the open user asks.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suspended {
    /// Their interaction ids.
    pub interactions: Vec<String>,
}

/// What a resume hands back.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)] // returned once per resume; boxing would only add a hop
pub enum Resumed {
    /// The run resumed; this is its next outcome.
    Outcome(RunRecord),
    /// Other asks of the same group are still open; the answer is kept until they are
    /// resolved. Serialises as `{"status": "buffered", "remaining": k}`.
    Buffered {
        /// Always `"buffered"`.
        status: Buffered,
        /// How many asks of the group are still asking.
        remaining: usize,
    },
}

/// The `"buffered"` marker of [`Resumed::Buffered`].
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Buffered {
    /// The answer was buffered.
    Buffered,
}

impl Resumed {
    /// The run record, when the run resumed.
    pub fn record(&self) -> Option<&RunRecord> {
        match self {
            Resumed::Outcome(record) => Some(record),
            Resumed::Buffered { .. } => None,
        }
    }

    /// The resumed run's record, or [`NoResult::Buffered`] when the answer was kept
    /// until the other asks of its group are resolved.
    pub fn into_record(self) -> Result<RunRecord, NoResult> {
        match self {
            Resumed::Outcome(record) => Ok(record),
            Resumed::Buffered { remaining, .. } => Err(NoResult::Buffered { remaining }),
        }
    }

    /// The resumed run's result ([`RunRecord::into_result`]), or why there is none:
    /// the answer was buffered, or the run failed, was cancelled, or asked again.
    pub fn into_result(self) -> Result<Value, NoResult> {
        self.into_record()?.into_result()
    }
}

/// Why there is no result to hand out: what [`RunRecord::into_result`] gives for a run
/// that did not succeed, and what the helpers of [`Resumed`] and
/// [`Visit`](crate::Visit) give when the resolution they report has no value.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NoResult {
    /// The run failed.
    #[error("run {run_id} of target {target} failed: {error}")]
    Failed {
        /// The run.
        run_id: String,
        /// Its target.
        target: String,
        /// Why it failed.
        error: String,
    },
    /// The run was cancelled.
    #[error("run {run_id} of target {target} was cancelled: {reason}")]
    Cancelled {
        /// The run.
        run_id: String,
        /// Its target.
        target: String,
        /// Why it was cancelled.
        reason: String,
    },
    /// The run has not ended: it is running, parked on its caller's answer, or
    /// suspended on a person's.
    #[error("run {run_id} of target {target} has no result yet (status: {status})")]
    NotEnded {
        /// The run.
        run_id: String,
        /// Its target.
        target: String,
        /// Where it stands.
        status: RunStatus,
    },
    /// The record raises no caller ask: the run is not parked.
    #[error(
        "run {run_id} of target {target} asks its caller nothing (status: {status}{})",
        error.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
    )]
    NotParked {
        /// The run.
        run_id: String,
        /// Its target.
        target: String,
        /// Where it stands.
        status: RunStatus,
        /// Why it failed or was cancelled, when it did.
        error: Option<String>,
    },
    /// The answer was kept: other asks of its group are still open, and the run resumes
    /// once they are resolved.
    #[error("the answer was buffered: {remaining} ask(s) of its group still open")]
    Buffered {
        /// How many asks of the group are still asking.
        remaining: usize,
    },
    /// A taken waiting outcome was a failure: the taker fails as the resolved run did.
    #[error("interaction {id} failed: {error}")]
    TakeFailed {
        /// The interaction.
        id: String,
        /// The resolved run's error.
        error: String,
    },
    /// The interaction was resumed with no receiver: the run's next outcome waits on
    /// the subject (take it with [`Runtime::await_outcome`](crate::Runtime::await_outcome)).
    #[error("interaction {id} was resumed with no receiver: its outcome waits on the subject")]
    NoReceiver {
        /// The interaction.
        id: String,
    },
    /// The resolution took a waiting outcome: it hands back the taken value (or its
    /// failure), and no run record.
    #[error("interaction {id} was a waiting outcome taken: it has a value, not a record")]
    Taken {
        /// The interaction.
        id: String,
    },
    /// The run was started with no receiver (a hook or a schedule started it): its
    /// record is read with [`Runtime::record`](crate::Runtime::record).
    #[error("run {run_id} was started with no receiver: its record is read by its id")]
    Unreceived {
        /// The run.
        run_id: String,
    },
    /// The visit resolved nothing and started nothing.
    #[error("the visit resolved nothing and started nothing")]
    Nothing,
}
