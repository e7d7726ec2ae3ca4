//! Every run's latest record, as the subjects' effects write it: a run's record is
//! kept while the run lives and for the retention horizon after it ends, when a timer
//! drops it (`docs/semantics.md`, "Run records").

use dashmap::DashMap;

use crate::record::{RunRecord, RunStatus};

/// Every run's latest record, by run id: written by the run's subject when the run
/// starts, at each activation's start and end, and when it is torn down. A run that has
/// ended for good keeps its record for the retention horizon; the supervisor's timer
/// then drops it (`docs/semantics.md`, "Run records"), so the store stays bounded by the
/// live runs plus those that ended within the horizon.
#[derive(Debug, Default)]
pub(crate) struct Records {
    /// The records.
    map: DashMap<String, RunRecord>,
}

impl Records {
    /// Write `record` over the run's last one.
    pub(crate) fn put(&self, record: RunRecord) {
        self.map.insert(record.run_id.clone(), record);
    }

    /// A new activation of `run` is executing: its record says `running` again.
    pub(crate) fn running(&self, run: &str) {
        if let Some(mut record) = self.map.get_mut(run) {
            record.status = RunStatus::Running;
            record.asks = None;
            record.suspension = None;
        }
    }

    /// The record of `run`, if it is kept.
    pub(crate) fn get(&self, run: &str) -> Option<RunRecord> {
        self.map.get(run).map(|r| r.value().clone())
    }

    /// Drop the record of `run` once its retention horizon has passed; whether it was
    /// kept. A run that has not ended keeps its record.
    pub(crate) fn retire(&self, run: &str) -> bool {
        self.map
            .remove_if(run, |_, record| record.status.is_terminal())
            .is_some()
    }

    /// How many records are kept.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}
