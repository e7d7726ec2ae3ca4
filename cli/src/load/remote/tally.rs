//! The account of a `--url` run, kept by interaction id: what the visitors were
//! answered, and what the subjects' parked sets hold at the end.
//!
//! Outside the server there is no event to count. What the answers name is enough to
//! account for every ask one by one: each start record names the ask its run raised,
//! each resume, take and cancel the ask it resolved, and the parked sets the asks still
//! open and the outcomes still waiting. An ask none of these name was resolved by its
//! expiry, which only a short-lived ask can be (a long one waits an hour, longer than
//! any run); an expired ask that resumed its run left an outcome, which is then taken,
//! still waiting, or dropped past the retention horizon when no one names it either.

use std::collections::{BTreeMap, HashMap};

use super::super::report::Account;
use super::super::workload::Expiry;
use super::http::{EntryReply, Failure, VisitReply};

/// What one visitor was answered, by interaction id where the answers name one.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Visits that applied nothing.
    pub(crate) idle: u64,
    /// Runs started.
    pub(crate) started: u64,
    /// The asks the start records named, each with the expiry its start asked for.
    pub(crate) raised: Vec<(String, Expiry)>,
    /// Start records that came back cancelled (the ask was cancelled, or killed by its
    /// expiry, before the first activation ended), by the expiry the start asked for.
    pub(crate) starts_cancelled: [u64; 3],
    /// Start records that neither parked nor were cancelled.
    pub(crate) starts_other: u64,
    /// Asks resumed whose run handed its final outcome to the visitor.
    pub(crate) delivered: Vec<String>,
    /// Resumes that handed back anything else.
    pub(crate) delivered_other: u64,
    /// Asks resumed (whatever their run did next).
    pub(crate) resumed: u64,
    /// Waiting outcomes taken.
    pub(crate) taken: Vec<String>,
    /// Asks cancelled.
    pub(crate) cancelled: Vec<String>,
    /// Failed requests by kind, with the first message.
    pub(crate) errors: BTreeMap<String, (u64, String)>,
}

impl Tally {
    /// File an error of `kind`.
    pub(crate) fn error(&mut self, kind: String, message: String) {
        self.errors.entry(kind).or_insert((0, message)).0 += 1;
    }

    /// Count one visit's answer; `expiry` is what a start asked for.
    pub(crate) fn count(&mut self, expiry: Expiry, answer: Result<VisitReply, Failure>) {
        let reply = match answer {
            Ok(reply) => reply,
            Err(failure) => return self.error(failure.kind(), failure.message()),
        };
        let resolved_nothing = reply.cancelled.is_empty();
        self.cancelled.extend(reply.cancelled);
        match reply.action.as_str() {
            "nothing" => self.idle += u64::from(resolved_nothing),
            "started" => {
                self.started += 1;
                match reply.record {
                    Some(record) if record.status == "parked" => self
                        .raised
                        .extend(record.asks.into_iter().map(|a| (a.id, expiry))),
                    Some(record) if record.status == "cancelled" => {
                        self.starts_cancelled[expiry.index()] += 1;
                    }
                    Some(record) => {
                        self.starts_other += 1;
                        let why = record.error.unwrap_or_default();
                        self.error(
                            format!("start {}", record.status),
                            format!("a start's record was {}: {why}", record.status),
                        );
                    }
                    None => {
                        self.starts_other += 1;
                        self.error(
                            "start without a record".to_owned(),
                            "a route visit's start came back without its record".to_owned(),
                        );
                    }
                }
            }
            "resolved" => {
                for item in reply.results {
                    self.resumed += u64::from(item.op == "resumed");
                    match item.op.as_str() {
                        "resumed"
                            if item.outcome.as_ref().is_some_and(|o| {
                                o.status == "succeeded" || o.status == "failed"
                            }) =>
                        {
                            self.delivered.push(item.id);
                        }
                        "resumed" => self.delivered_other += 1,
                        "taken" | "take_failed" => self.taken.push(item.id),
                        other => self.error(
                            "unknown item".to_owned(),
                            format!("a resolution item of op {other:?}"),
                        ),
                    }
                }
            }
            other => self.error(
                "unknown action".to_owned(),
                format!("a visit answered with action {other:?}"),
            ),
        }
    }

    /// Add another visitor's tally.
    pub(crate) fn add(&mut self, other: Tally) {
        self.idle += other.idle;
        self.started += other.started;
        self.raised.extend(other.raised);
        for (a, b) in self.starts_cancelled.iter_mut().zip(other.starts_cancelled) {
            *a += b;
        }
        self.starts_other += other.starts_other;
        self.delivered.extend(other.delivered);
        self.delivered_other += other.delivered_other;
        self.resumed += other.resumed;
        self.taken.extend(other.taken);
        self.cancelled.extend(other.cancelled);
        for (kind, (n, message)) in other.errors {
            self.errors.entry(kind).or_insert((0, message)).0 += n;
        }
    }

    /// Asks the start records named, and starts cancelled before their record.
    pub(crate) fn asks(&self) -> u64 {
        self.raised.len() as u64 + self.starts_cancelled.iter().sum::<u64>()
    }
}

/// What the parked sets hold at the end.
#[derive(Debug, Default)]
pub(crate) struct Left {
    /// Each entry's id, and whether it is an ask still open (`asking`, `running`)
    /// rather than a waiting outcome (`finished`, `failed`).
    pub(crate) entries: HashMap<String, bool>,
    /// Entries of a status the account does not know.
    pub(crate) strange: u64,
    /// Subjects whose parked set could not be read, with the first reason.
    pub(crate) unread: u64,
    pub(crate) unread_reason: Option<String>,
}

impl Left {
    /// Add one subject's parked set.
    pub(crate) fn add(&mut self, entries: Vec<EntryReply>) {
        for entry in entries {
            let open = match entry.status.as_str() {
                "asking" | "running" => true,
                "finished" | "failed" => false,
                _ => {
                    self.strange += 1;
                    continue;
                }
            };
            self.entries.insert(entry.id, open);
        }
    }
}

/// How often each kind of visit named one id.
#[derive(Debug, Default, Clone, Copy)]
struct Named {
    resumed: u64,
    cancelled: u64,
    taken: u64,
}

/// Balance `seen` (every visitor's tally, the prefill's included) against `left`.
pub(crate) fn balance(seen: &Tally, left: &Left) -> Account {
    let mut imbalances = Vec::new();
    let mut lost = left.unread + left.strange;
    let mut flag = |n: u64, what: String| {
        if n > 0 {
            lost += n;
            imbalances.push(format!("{n} {what}"));
        }
    };
    let mut named: HashMap<&str, Named> = HashMap::new();
    for id in &seen.delivered {
        named.entry(id).or_default().resumed += 1;
    }
    for id in &seen.cancelled {
        named.entry(id).or_default().cancelled += 1;
    }
    for id in &seen.taken {
        named.entry(id).or_default().taken += 1;
    }
    let mut raised: HashMap<&str, Expiry> = HashMap::with_capacity(seen.raised.len());
    let mut twice = 0;
    for (id, expiry) in &seen.raised {
        if raised.insert(id, *expiry).is_some() {
            twice += 1;
        }
    }
    flag(twice, "asks named by two start records".into());

    let (mut resumed, mut cancelled, mut expired, mut open) = (0u64, 0u64, 0u64, 0u64);
    let (mut taken, mut dropped, mut waiting) = (0u64, 0u64, 0u64);
    let (mut gone, mut again, mut outcome_of_killed, mut taken_unexpired) = (0, 0, 0, 0);
    for (id, expiry) in &raised {
        let n = named.get(id).copied().unwrap_or_default();
        let listed = left.entries.get(*id).copied();
        let still_open = u64::from(listed == Some(true));
        let still_waiting = u64::from(listed == Some(false));
        resumed += n.resumed;
        cancelled += n.cancelled;
        open += still_open;
        // Resolved by a visitor, or still open: at most one of these.
        let first = n.resumed + n.cancelled + still_open;
        again += first.saturating_sub(1);
        // What expiry left: a killed run nothing, a resumed one an outcome.
        let outcome = n.taken + still_waiting;
        if first > 0 {
            taken_unexpired += outcome;
            continue;
        }
        match expiry {
            Expiry::Long => {
                gone += 1;
                taken_unexpired += outcome;
            }
            Expiry::ShortKill => {
                expired += 1;
                outcome_of_killed += outcome;
            }
            Expiry::ShortResume => {
                expired += 1;
                again += outcome.saturating_sub(1);
                taken += n.taken;
                waiting += still_waiting;
                dropped += u64::from(outcome == 0);
            }
        }
    }
    flag(
        gone,
        "long-lived asks gone though no visitor resolved them (they cannot have expired)".into(),
    );
    flag(again, "asks resolved more than once".into());
    flag(
        outcome_of_killed,
        "outcomes of runs their expiry killed".into(),
    );
    flag(
        taken_unexpired,
        "outcomes taken or waiting of asks that did not resume on expiry".into(),
    );

    // A cancel may name an ask no start record named: its start's record came back
    // cancelled because of that very cancel. The other cancelled starts were killed by
    // their own expiry, which only a short ask that kills can be.
    let unrecorded = seen
        .cancelled
        .iter()
        .filter(|id| !raised.contains_key(id.as_str()))
        .count() as u64;
    let starts_cancelled: u64 = seen.starts_cancelled.iter().sum();
    cancelled += unrecorded;
    flag(
        unrecorded.saturating_sub(starts_cancelled),
        "asks cancelled that no start record named, past the starts that came back cancelled"
            .into(),
    );
    let killed_before_record = starts_cancelled.saturating_sub(unrecorded);
    flag(
        killed_before_record.saturating_sub(seen.starts_cancelled[Expiry::ShortKill.index()]),
        "starts that came back cancelled with no cancel and no expiry that kills".into(),
    );
    expired += killed_before_record;

    let unknown = |ids: &mut dyn Iterator<Item = &str>| {
        ids.filter(|id| !raised.contains_key(id)).count() as u64
    };
    flag(
        unknown(&mut seen.delivered.iter().map(String::as_str))
            + unknown(&mut seen.taken.iter().map(String::as_str)),
        "resumes or takes of asks no start record named".into(),
    );
    flag(
        unknown(&mut left.entries.keys().map(String::as_str)),
        "entries left on the load's subjects that no start record named".into(),
    );
    flag(
        seen.delivered_other,
        "resumes that handed back no final outcome".into(),
    );
    flag(
        seen.started
            .abs_diff(seen.raised.len() as u64 + starts_cancelled + seen.starts_other)
            + seen.starts_other,
        "runs started whose record named no parked ask and was not cancelled".into(),
    );
    if left.unread > 0 {
        imbalances.push(format!(
            "{} subjects could not be listed: {}",
            left.unread,
            left.unread_reason.as_deref().unwrap_or("")
        ));
    }
    if left.strange > 0 {
        imbalances.push(format!("{} entries of an unknown status", left.strange));
    }
    let delivered = seen.delivered.len() as u64;
    Account {
        asks_raised: seen.asks(),
        resumed,
        cancelled,
        expired,
        open,
        outcomes: delivered + taken + dropped + waiting,
        delivered,
        taken,
        dropped,
        waiting,
        stored: taken + dropped + waiting,
        events_lagged: 0,
        imbalances,
        lost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn left(entries: &[(&str, bool)]) -> Left {
        Left {
            entries: entries
                .iter()
                .map(|(id, o)| ((*id).to_owned(), *o))
                .collect(),
            ..Left::default()
        }
    }

    /// Every way an ask ends, each once: the account balances.
    fn every_way() -> Tally {
        Tally {
            started: 8,
            raised: vec![
                ("resumed".into(), Expiry::Long),
                ("cancelled".into(), Expiry::Long),
                ("open".into(), Expiry::Long),
                ("killed".into(), Expiry::ShortKill),
                ("taken".into(), Expiry::ShortResume),
                ("waiting".into(), Expiry::ShortResume),
                ("dropped".into(), Expiry::ShortResume),
            ],
            starts_cancelled: [1, 0, 0],
            delivered: ids(&["resumed"]),
            taken: ids(&["taken"]),
            cancelled: ids(&["cancelled", "unrecorded"]),
            ..Tally::default()
        }
    }

    #[test]
    fn every_way_an_ask_ends_balances() {
        let a = balance(&every_way(), &left(&[("open", true), ("waiting", false)]));
        assert_eq!(a.lost, 0, "{:?}", a.imbalances);
        assert_eq!(a.asks_raised, 8);
        assert_eq!(
            (a.resumed, a.cancelled, a.expired, a.open),
            (1, 2, 4, 1),
            "{a:?}"
        );
        assert_eq!(a.asks_raised, a.resumed + a.cancelled + a.expired + a.open);
        assert_eq!(
            (a.delivered, a.taken, a.dropped, a.waiting),
            (1, 1, 1, 1),
            "{a:?}"
        );
        assert_eq!(a.outcomes, a.delivered + a.taken + a.dropped + a.waiting);
    }

    #[test]
    fn a_long_ask_gone_is_lost() {
        let a = balance(&every_way(), &left(&[("waiting", false)]));
        assert_eq!(a.lost, 1, "{:?}", a.imbalances);
        assert!(a.imbalances[0].contains("long-lived"), "{:?}", a.imbalances);
    }

    #[test]
    fn a_second_resolution_an_unknown_entry_and_a_killed_run_s_outcome_show() {
        let mut seen = every_way();
        seen.cancelled.push("resumed".into());
        let a = balance(
            &seen,
            &left(&[
                ("open", true),
                ("waiting", false),
                ("killed", false),
                ("stranger", true),
            ]),
        );
        assert_eq!(a.lost, 3, "{:?}", a.imbalances);
        let all = a.imbalances.join("; ");
        for what in ["more than once", "killed", "no start record named"] {
            assert!(all.contains(what), "{what}: {all}");
        }
    }

    #[test]
    fn an_unread_subject_is_counted() {
        let mut l = left(&[("open", true), ("waiting", false)]);
        l.unread = 2;
        l.unread_reason = Some("503".into());
        let a = balance(&every_way(), &l);
        assert_eq!(a.lost, 2, "{:?}", a.imbalances);
    }
}
