//! What the client was told: every start and resume it sent, each with its answer as
//! acknowledged, refused, or unknown (no answer, or one that does not say whether the
//! change was made), and the account that checks the cluster's final state against it.
//!
//! The account is kept by interaction id. A start acknowledged names the ask its run
//! raised; a resume names the ask it resolves and carries a payload of its own, which the
//! run returns as its result, so the final record of a run says which resume it saw. An
//! unknown start may have left an ask no answer names; an unknown resume may have
//! resolved its ask: both loosen the check for that subject or that ask only, and the
//! report counts them.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use serde_json::Value;

/// How the payloads of the resumes sent once the faults are over begin.
pub(crate) const END: &str = "end-";

/// How a request ended, from the client's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A 2xx answer: the change was made.
    Acked,
    /// Refused before anything was made: a 4xx answer, or a connection that could not
    /// be opened.
    Refused(String),
    /// No answer, or a 5xx one: the change may have been made.
    Unknown(String),
}

/// One resume sent for an ask.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    /// The payload it carried, unique to it.
    pub(crate) payload: String,
    /// How it ended.
    pub(crate) answer: Answer,
}

/// An ask whose start was acknowledged.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// The subject's number.
    pub(crate) subject: usize,
    /// The run that raised it.
    pub(crate) run: String,
    /// Every resume sent for it, in order.
    pub(crate) attempts: Vec<Attempt>,
}

impl Ask {
    /// The resume acknowledged first, if any.
    pub(crate) fn acked(&self) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.answer == Answer::Acked)
    }
}

/// Everything the client was told.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    /// Asks by interaction id.
    pub(crate) asks: BTreeMap<String, Ask>,
    /// Per subject, the starts whose answer is unknown.
    pub(crate) unknown_starts: HashMap<usize, u64>,
    /// Requests by kind and how they ended: `start acked`, `resume unknown`, …
    pub(crate) counts: BTreeMap<String, u64>,
    /// The first answer of each way a request was not acknowledged, in full.
    pub(crate) first: BTreeMap<String, String>,
    /// What was found wrong while the load ran (a second acknowledged resume of one ask).
    pub(crate) violations: Vec<String>,
}

impl Ledger {
    /// Count a request of `kind` that ended as `answer`, by how and (when not
    /// acknowledged) why: `start refused (503 not_owner)`, `resume unknown (no answer)`.
    pub(crate) fn count(&mut self, kind: &str, answer: &Answer) {
        let (key, why) = match answer {
            Answer::Acked => (format!("{kind} acked"), None),
            Answer::Refused(why) => (format!("{kind} refused ({})", short(why)), Some(why)),
            Answer::Unknown(why) => (format!("{kind} unknown ({})", short(why)), Some(why)),
        };
        if let Some(why) = why {
            self.first.entry(key.clone()).or_insert_with(|| why.clone());
        }
        *self.counts.entry(key).or_default() += 1;
    }

    /// File a resume of `ask` and how it ended.
    pub(crate) fn resumed(&mut self, ask: &str, attempt: Attempt) {
        self.count("resume", &attempt.answer);
        let Some(entry) = self.asks.get_mut(ask) else {
            return;
        };
        if attempt.answer == Answer::Acked
            && let Some(first) = entry.acked()
        {
            self.violations.push(format!(
                "ask {ask} was resumed twice, both acknowledged: payloads {} and {}",
                first.payload, attempt.payload
            ));
        }
        entry.attempts.push(attempt);
    }
}

/// A reason in a few words: the status and kind of an error answer, or what failed.
fn short(why: &str) -> &str {
    why.split(':').next().unwrap_or(why).trim()
}

/// One entry of a subject's parked set at the end.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    /// Its status: `asking`, `running`, `finished` or `failed`.
    pub(crate) status: String,
}

/// A run's final record, as far as the account reads it.
#[derive(Debug, Clone)]
pub(crate) struct Final {
    /// Its status.
    pub(crate) status: String,
    /// Its result.
    pub(crate) result: Option<Value>,
}

/// What the account found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Account {
    /// Asks whose start was acknowledged.
    pub asks: u64,
    /// Of them, resolved by a resume acknowledged during the load.
    pub resolved_acked: u64,
    /// Resolved by a resume whose answer was unknown (and not resumed again).
    pub resolved_unknown: u64,
    /// Still open at the end, resumed then.
    pub open_at_end: u64,
    /// Outcomes delivered to an acknowledged resume and left waiting as well: the note
    /// that their receiver had them was lost with a node (at least once, as after a
    /// crash).
    pub delivered_and_left_waiting: u64,
    /// Entries no acknowledged start names, on subjects with an unknown start.
    pub unnamed_entries: u64,
    /// What was wrong.
    pub violations: Vec<String>,
}

/// Check the parked sets at the end (`listed`, per subject: interaction id to entry) and
/// the runs' final records (`finals`, by run id) against the ledger. Asks still open
/// once the faults were over have been resumed since (payloads beginning [`END`]), so
/// every run must have ended, naming its ask once, with the payload of the resume
/// acknowledged for it, or of one whose answer is unknown if none was.
pub(crate) fn account(
    ledger: &Ledger,
    listed: &BTreeMap<usize, HashMap<String, Listed>>,
    finals: &HashMap<String, Final>,
) -> Account {
    let mut out = Account {
        asks: ledger.asks.len() as u64,
        violations: ledger.violations.clone(),
        ..Account::default()
    };
    for (id, ask) in &ledger.asks {
        let entry = listed.get(&ask.subject).and_then(|set| set.get(id));
        let acked = ask.acked();
        // An ask acknowledged resolved is not open, and an ask no resume can have
        // resolved was not resolved.
        match (entry.map(|e| e.status.as_str()), acked) {
            (Some("asking"), Some(a)) => out.violations.push(format!(
                "ask {id} is still asking though its resume (payload {}) was acknowledged",
                a.payload
            )),
            // At least once (`docs/durability.md`, "Outcomes whose receiver a crash
            // loses"): the note that the receiver had it was lost with its node.
            (Some("finished" | "failed"), Some(_)) => out.delivered_and_left_waiting += 1,
            _ => {}
        }
        let Some(record) = finals.get(&ask.run) else {
            out.violations
                .push(format!("run {} (ask {id}) has no final record", ask.run));
            continue;
        };
        if record.status != "succeeded" {
            out.violations.push(format!(
                "run {} (ask {id}) ended {}, not succeeded",
                ask.run, record.status
            ));
            continue;
        }
        let payload = record
            .result
            .as_ref()
            .and_then(|r| r.get("answer"))
            .and_then(Value::as_str);
        let Some(payload) = payload else {
            out.violations.push(format!(
                "run {} (ask {id}) returned {:?}, not the answer it was resumed with",
                ask.run, record.result
            ));
            continue;
        };
        match acked {
            Some(a) if a.payload == payload && payload.starts_with(END) => out.open_at_end += 1,
            Some(a) if a.payload == payload => out.resolved_acked += 1,
            Some(a) => out.violations.push(format!(
                "run {} (ask {id}) returned payload {payload}, but the resume acknowledged carried {}",
                ask.run, a.payload
            )),
            None => {
                let unknown = ask.attempts.iter().any(|t| {
                    t.payload == payload && matches!(t.answer, Answer::Unknown(_))
                });
                if unknown {
                    out.resolved_unknown += 1;
                } else {
                    out.violations.push(format!(
                        "run {} (ask {id}) returned payload {payload}, which no resume sent for it without a refusal carried",
                        ask.run
                    ));
                }
            }
        }
    }
    // Entries no acknowledged start names: at most one per start whose answer is
    // unknown, on that subject.
    for (subject, set) in listed {
        let unnamed = set
            .keys()
            .filter(|id| !ledger.asks.contains_key(*id))
            .count() as u64;
        let allowed = ledger.unknown_starts.get(subject).copied().unwrap_or(0);
        out.unnamed_entries += unnamed.min(allowed);
        if unnamed > allowed {
            out.violations.push(format!(
                "subject {subject} holds {unnamed} entries no acknowledged start names, past its {allowed} starts whose answer is unknown"
            ));
        }
    }
    out
}

/// One row of `parkway_audit`, applied.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Written {
    /// The order the group commits took their locks in.
    pub(crate) seq: i64,
    /// The slot written.
    pub(crate) slot: i32,
    /// The slot's epoch the commit claimed.
    pub(crate) epoch: i64,
    /// The node that wrote.
    pub(crate) node: i32,
    /// The node's process (its epoch).
    pub(crate) node_epoch: i64,
}

/// What the audit found.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Audit {
    /// Group commits' slot rows applied.
    pub rows: u64,
    /// Distinct terms (a slot under one epoch) written.
    pub terms: u64,
    /// Slots written under more than one term: moved between owners (or processes).
    pub slots_moved: u64,
    /// What was wrong.
    pub violations: Vec<String>,
}

/// Check the audit: in the order the commits took their locks, each slot's epoch never
/// goes back, and each term of a slot was written by one process of one node. Either
/// failing means two owners wrote one slot at once.
pub(crate) fn audit(rows: &[Written]) -> Audit {
    let mut out = Audit {
        rows: rows.len() as u64,
        ..Audit::default()
    };
    let mut sorted = rows.to_vec();
    sorted.sort_by_key(|w| (w.slot, w.seq));
    let mut last: HashMap<i32, i64> = HashMap::new();
    let mut writer: HashMap<(i32, i64), (i32, i64)> = HashMap::new();
    let mut terms: HashMap<i32, u64> = HashMap::new();
    for w in &sorted {
        if let Some(&before) = last.get(&w.slot)
            && w.epoch < before
        {
            out.violations.push(format!(
                "slot {} was written under epoch {} (node {}) after epoch {before}",
                w.slot, w.epoch, w.node
            ));
        }
        last.insert(w.slot, w.epoch);
        match writer.get(&(w.slot, w.epoch)) {
            None => {
                writer.insert((w.slot, w.epoch), (w.node, w.node_epoch));
                *terms.entry(w.slot).or_default() += 1;
            }
            Some(&(node, process)) if (node, process) != (w.node, w.node_epoch) => {
                out.violations.push(format!(
                    "slot {} epoch {} was written by node {node} (process {process}) and node {} (process {})",
                    w.slot, w.epoch, w.node, w.node_epoch
                ));
            }
            Some(_) => {}
        }
    }
    out.terms = writer.len() as u64;
    out.slots_moved = terms.values().filter(|n| **n > 1).count() as u64;
    out
}
