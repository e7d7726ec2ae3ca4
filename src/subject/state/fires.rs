//! A schedule's fires on its subject, once per boundary across processes.
//!
//! Every process that serves a schedule's door arms its timer, each from its own start
//! or save, so two processes' boundaries of one schedule differ in phase (and by their
//! clocks). The process that owns the subject's slot applies the fire; when the slot
//! changes hands near a boundary, the old and the new owner could both fire it. The
//! subject keeps its last fire's boundary (with its state, so it moves with the slot),
//! and a fire less than half an interval after it is that boundary again, or an older
//! one: it is not applied (`docs/doors.md`, "Schedules on several nodes").

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::State;

impl State {
    /// Whether the fire of schedule `door` for `boundary`, every `interval`, is to be
    /// applied; kept as the door's last fire when it is.
    pub(crate) fn admit_fire(
        &mut self,
        door: &str,
        boundary: DateTime<Utc>,
        interval: Duration,
    ) -> bool {
        if let Some(last) = self.fired.get(door) {
            let half = chrono::Duration::from_std(interval / 2).unwrap_or(chrono::Duration::MAX);
            let next = last
                .checked_add_signed(half)
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            if boundary < next {
                return false;
            }
        }
        self.fired.insert(Arc::from(door), boundary);
        self.fired_dirty = true;
        true
    }

    /// The boundary of schedule `door`'s last fire applied here.
    #[cfg(test)]
    pub(crate) fn last_fire(&self, door: &str) -> Option<DateTime<Utc>> {
        self.fired.get(door).copied()
    }
}
