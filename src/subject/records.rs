//! Where every run's record is read: the subject a live run lives on, whose state holds
//! its record as it stands (`State::record_of`), and the records of runs that ended for
//! good, kept for the retention horizon, when a timer drops them (`docs/semantics.md`,
//! "Run records"). A live run costs this store one small entry, not a copy of its record.

use std::sync::Arc;

use dashmap::DashMap;

use crate::record::RunRecord;
use crate::slot::Slot;

/// Where each run's record is found.
#[derive(Debug, Default)]
pub(crate) struct Records {
    /// The subject of each live run.
    live: DashMap<Arc<str>, Arc<str>>,
    /// The records of runs that ended for good, until their horizon, with their subject.
    ended: DashMap<Arc<str>, (Arc<str>, RunRecord)>,
}

/// Where a run's record is.
#[derive(Debug)]
pub(crate) enum Found {
    /// The run lives on this subject, which holds its record.
    Live(Arc<str>),
    /// The run ended for good; this is its record.
    Ended(Box<RunRecord>),
}

impl Records {
    /// `run` began on `subject`.
    pub(crate) fn live(&self, run: Arc<str>, subject: Arc<str>) {
        self.live.insert(run, subject);
    }

    /// `record`'s run, of `subject`, ended for good: its record is kept until its
    /// horizon.
    pub(crate) fn ended(&self, subject: Arc<str>, record: RunRecord) {
        let run: Arc<str> = Arc::from(record.run_id.as_str());
        self.live.remove(&run);
        self.ended.insert(run, (subject, record));
    }

    /// Where the record of `run` is, if the run is known.
    pub(crate) fn find(&self, run: &str) -> Option<Found> {
        if let Some(record) = self.ended.get(run) {
            return Some(Found::Ended(Box::new(record.value().1.clone())));
        }
        self.live
            .get(run)
            .map(|s| Found::Live(Arc::clone(s.value())))
    }

    /// The kept record of `run`, if it ended for good within the horizon.
    pub(crate) fn get_ended(&self, run: &str) -> Option<RunRecord> {
        self.ended.get(run).map(|r| r.value().1.clone())
    }

    /// Whether the record of `run`, which ended for good, is kept in memory.
    pub(crate) fn holds_ended(&self, run: &str) -> bool {
        self.ended.contains_key(run)
    }

    /// Drop the record of `run`, which ended for good, at its horizon; whether it was
    /// kept.
    pub(crate) fn retire(&self, run: &str) -> bool {
        self.ended.remove(run).is_some()
    }

    /// Forget every run of a subject of `slot`, which the runtime gave up: the live
    /// ones, returned (the run tree still links them), and the kept records of ended ones.
    pub(crate) fn leave(&self, slot: Slot) -> Vec<Arc<str>> {
        let mut left = Vec::new();
        self.live.retain(|run, subject| {
            let stays = Slot::of(subject) != slot;
            if !stays {
                left.push(Arc::clone(run));
            }
            stays
        });
        self.ended
            .retain(|_, (subject, _)| Slot::of(subject) != slot);
        left
    }

    /// How many runs are known: live, and ended within the horizon.
    pub(crate) fn len(&self) -> usize {
        self.live.len() + self.ended.len()
    }
}
