//! `/metrics` in the Prometheus text format: visits through this face by door and
//! result, open asks, the caps in use, the store's commits, stream subscribers, and
//! the connections of [`crate::serve`].
//!
//! The format is a handful of text lines, written here; label values are escaped as
//! the format says (`\`, `"` and newlines).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use parkway::{Visit, VisitError, VisitOutcome};

use crate::Face;

/// What this face counts itself.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Door visits by door and result (`started`, `resolved`, `nothing`, `not_fired`,
    /// or the error's kind). Visits of unknown doors are counted under the door `""`,
    /// so a client cannot grow the table with made-up names.
    visits: Mutex<BTreeMap<(String, String), u64>>,
    /// Streams open now.
    subscribers: AtomicI64,
    /// Requests sent on to the node that owns their subject's slot.
    forwarded: std::sync::atomic::AtomicU64,
}

impl Metrics {
    /// Count a visit of `door` that ended in `result`.
    pub(crate) fn visit(&self, door: &str, known: bool, result: &str) {
        let door = if known { door } else { "" };
        if let Ok(mut visits) = self.visits.lock() {
            *visits
                .entry((door.to_owned(), result.to_owned()))
                .or_default() += 1;
        }
    }

    /// Count a visit of `door` by what it did.
    pub(crate) fn count(&self, door: &str, visit: &Result<Visit, VisitError>) {
        match visit {
            Ok(visit) => {
                let action = match &visit.outcome {
                    VisitOutcome::Nothing => "nothing",
                    VisitOutcome::Resolved { .. } => "resolved",
                    VisitOutcome::Started { .. } => "started",
                    _ => "other",
                };
                self.visit(door, true, action);
            }
            Err(error) => {
                let known = !matches!(error, VisitError::UnknownDoor { .. });
                self.visit(door, known, error.kind());
            }
        }
    }

    /// Count a request sent on to another node.
    pub(crate) fn forwarded(&self) {
        self.forwarded.fetch_add(1, Ordering::Relaxed);
    }

    /// A stream opens, if fewer than `max` are open; it is counted until the guard is
    /// dropped.
    pub(crate) fn subscribe(self: &Arc<Self>, max: usize) -> Option<Subscribed> {
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let before = self.subscribers.fetch_add(1, Ordering::Relaxed);
        let guard = Subscribed(Arc::clone(self));
        (before < max).then_some(guard)
    }
}

/// Counts one open stream while it lives.
pub(crate) struct Subscribed(Arc<Metrics>);

impl Drop for Subscribed {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A label value, escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric's header.
fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(face): State<Arc<Face>>) -> impl IntoResponse {
    let rt = &face.runtime;
    let stats = rt.stats().await;
    let settings = rt.settings();
    let mut out = String::new();

    family(
        &mut out,
        "parkway_visits_total",
        "counter",
        "Door visits through the HTTP face, by door and result (an error's kind).",
    );
    if let Ok(visits) = face.metrics.visits.lock() {
        for ((door, result), n) in visits.iter() {
            let _ = writeln!(
                out,
                "parkway_visits_total{{door=\"{}\",result=\"{}\"}} {n}",
                escape(door),
                escape(result)
            );
        }
    }
    family(
        &mut out,
        "parkway_asks_open",
        "gauge",
        "Open asks by addressee (the caller's count includes waiting outcomes).",
    );
    let _ = writeln!(
        out,
        "parkway_asks_open{{to=\"caller\"}} {}",
        stats.caller_open
    );
    let _ = writeln!(out, "parkway_asks_open{{to=\"user\"}} {}", stats.user_open);
    family(
        &mut out,
        "parkway_cap_in_use",
        "gauge",
        "Units of each ceiling in use.",
    );
    let caps = [
        (
            "INTERACTIONS_MAX_CONCURRENT_CALLER",
            stats.caller_open,
            settings.max_concurrent_caller,
        ),
        (
            "INTERACTIONS_MAX_CONCURRENT",
            stats.user_open,
            settings.max_concurrent,
        ),
    ];
    for (cap, used, _) in caps {
        let _ = writeln!(out, "parkway_cap_in_use{{cap=\"{cap}\"}} {used}");
    }
    family(
        &mut out,
        "parkway_cap_limit",
        "gauge",
        "Each ceiling's limit.",
    );
    for (cap, _, limit) in caps {
        let _ = writeln!(out, "parkway_cap_limit{{cap=\"{cap}\"}} {limit}");
    }
    family(
        &mut out,
        "parkway_runs",
        "gauge",
        "Runs that have not ended.",
    );
    let _ = writeln!(out, "parkway_runs {}", stats.runs);
    family(
        &mut out,
        "parkway_subjects",
        "gauge",
        "Subjects, with an actor (live) or kept as data (passive).",
    );
    let _ = writeln!(
        out,
        "parkway_subjects{{state=\"live\"}} {}",
        stats.live_subjects
    );
    let _ = writeln!(
        out,
        "parkway_subjects{{state=\"passive\"}} {}",
        stats.passive_subjects
    );
    family(&mut out, "parkway_timers", "gauge", "Armed timers.");
    let _ = writeln!(out, "parkway_timers {}", stats.timers);
    family(
        &mut out,
        "parkway_run_records",
        "gauge",
        "Run records kept: every live run's, and those of runs ended within the retention horizon.",
    );
    let _ = writeln!(out, "parkway_run_records {}", stats.records);
    family(
        &mut out,
        "parkway_passivations_total",
        "counter",
        "Subjects whose actor stopped after idling, their state kept as data.",
    );
    let _ = writeln!(out, "parkway_passivations_total {}", stats.passivations);
    if let Some(store) = rt.store_stats() {
        family(
            &mut out,
            "parkway_store_syncs_total",
            "counter",
            "Commits: groups of changes made durable with one sync.",
        );
        let _ = writeln!(out, "parkway_store_syncs_total {}", store.syncs);
        family(
            &mut out,
            "parkway_store_changes_total",
            "counter",
            "Changes made durable (divided by syncs: the mean batch size).",
        );
        let _ = writeln!(out, "parkway_store_changes_total {}", store.batches);
        family(
            &mut out,
            "parkway_store_bytes_total",
            "counter",
            "Bytes of keys and values made durable.",
        );
        let _ = writeln!(out, "parkway_store_bytes_total {}", store.bytes);
        family(
            &mut out,
            "parkway_store_commit_seconds_total",
            "counter",
            "Time spent writing and syncing commits (divided by syncs: the mean commit latency).",
        );
        let _ = writeln!(
            out,
            "parkway_store_commit_seconds_total {}",
            store.commit_time.as_secs_f64()
        );
        family(
            &mut out,
            "parkway_store_largest_batch",
            "gauge",
            "The most changes one commit made durable.",
        );
        let _ = writeln!(out, "parkway_store_largest_batch {}", store.largest_group);
    }
    let health = rt.health();
    family(
        &mut out,
        "parkway_store_damaged_reads_total",
        "counter",
        "Reads that met damage in the data directory (each failed its request as corrupt).",
    );
    let _ = writeln!(
        out,
        "parkway_store_damaged_reads_total {}",
        health.damaged_reads
    );
    family(
        &mut out,
        "parkway_healthy",
        "gauge",
        "1 while no damage was met in the data directory, 0 once some was (/readyz is then 503).",
    );
    let _ = writeln!(out, "parkway_healthy {}", u8::from(health.is_healthy()));
    family(
        &mut out,
        "parkway_stream_subscribers",
        "gauge",
        "Event and inbox streams open now.",
    );
    let _ = writeln!(
        out,
        "parkway_stream_subscribers {}",
        face.metrics.subscribers.load(Ordering::Relaxed)
    );
    family(
        &mut out,
        "parkway_forwarded_total",
        "counter",
        "Requests sent on to the node that owns their subject's slot.",
    );
    let _ = writeln!(
        out,
        "parkway_forwarded_total {}",
        face.metrics.forwarded.load(Ordering::Relaxed)
    );
    connections(&mut out, &face.options);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
}

/// The connections of [`crate::serve`]: open, their cap, shed and timed out.
fn connections(out: &mut String, options: &crate::Options) {
    let counters = &options.connections;
    let read = |counter: &std::sync::atomic::AtomicU64| counter.load(Ordering::Relaxed);
    family(
        out,
        "parkway_connections_open",
        "gauge",
        "Connections open now.",
    );
    let _ = writeln!(out, "parkway_connections_open {}", read(&counters.open));
    family(
        out,
        "parkway_connections_limit",
        "gauge",
        "The most connections kept open.",
    );
    let _ = writeln!(out, "parkway_connections_limit {}", options.max_connections);
    family(
        out,
        "parkway_connections_shed_total",
        "counter",
        "Connections shed at the cap: an open one with no request closed to admit a new one (evicted), or a new one closed at once, every open one busy (refused).",
    );
    let _ = writeln!(
        out,
        "parkway_connections_shed_total{{how=\"evicted\"}} {}",
        read(&counters.evicted)
    );
    let _ = writeln!(
        out,
        "parkway_connections_shed_total{{how=\"refused\"}} {}",
        read(&counters.refused)
    );
    family(
        out,
        "parkway_connections_timed_out_total",
        "counter",
        "Connections closed for a request head not sent whole in time (head), or kept alive with no request past the idle timeout (idle).",
    );
    let _ = writeln!(
        out,
        "parkway_connections_timed_out_total{{phase=\"head\"}} {}",
        read(&counters.head_timeouts)
    );
    let _ = writeln!(
        out,
        "parkway_connections_timed_out_total{{phase=\"idle\"}} {}",
        read(&counters.idle_timeouts)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn unknown_doors_share_one_label() {
        let m = Metrics::default();
        m.visit("chat", true, "started");
        m.visit("made-up-1", false, "unknown_door");
        m.visit("made-up-2", false, "unknown_door");
        let visits = m.visits.lock().expect("lock");
        assert_eq!(visits.len(), 2);
        assert_eq!(visits[&(String::new(), "unknown_door".to_owned())], 2);
    }
}
