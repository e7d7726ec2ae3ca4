//! The sequential reference model the random simulation checks the runtime against.
//!
//! The model follows the runtime's platform events one by one and holds what SPEC says
//! must then be true: which asks are open and when each lapses, which were resolved and
//! how, which outcomes wait and since when. Every event is checked as it is applied (an
//! ask resolved twice, an expiry that fired early, a drop before the retention horizon
//! are violations on the spot); after every step the model is compared with what the
//! runtime shows: parked sets, counters, the inbox and its frames.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Duration as Span, Utc};
use serde_json::Value;

use crate::entry::{Entry, EntryStatus, To};
use crate::event::{Event, Resolution};
use crate::inbox::Frame;

/// A break deliberately put in the model, to prove the checks can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelFault {
    /// The model forgets that waiting outcomes count against the caller ceiling.
    UncountedWaiting,
    /// The model believes asks lapse five minutes later than they do.
    LateExpiry,
}

impl std::str::FromStr for ModelFault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uncounted-waiting" => Ok(ModelFault::UncountedWaiting),
            "late-expiry" => Ok(ModelFault::LateExpiry),
            other => Err(format!(
                "unknown model fault {other:?}; expected uncounted-waiting or late-expiry"
            )),
        }
    }
}

/// What the model knows of one ask.
#[derive(Debug, Clone)]
pub(crate) struct AskInfo {
    pub(crate) subject: String,
    /// The asking run.
    pub(crate) run: String,
    /// A user ask (else a caller ask).
    pub(crate) user: bool,
    /// When it lapses.
    pub(crate) expiry: DateTime<Utc>,
    /// How it was resolved, once it was.
    pub(crate) resolved: Option<Resolution>,
}

/// What the model knows of one waiting outcome.
#[derive(Debug, Clone)]
pub(crate) struct WaitInfo {
    pub(crate) subject: String,
    /// When it was stored.
    pub(crate) stored_at: DateTime<Utc>,
    /// `failed` (else `finished`).
    pub(crate) failed: bool,
}

/// What the model knows of one run.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunInfo {
    pub(crate) target: String,
    /// How long its asks wait.
    pub(crate) ttl: Span,
    /// Whether it was told to fail once answered.
    pub(crate) will_fail: bool,
    /// How many asks its group should hold. When the ceiling refuses some, the run fails
    /// and the asks it did park are withdrawn: a group is never left parked short.
    pub(crate) wanted: usize,
    /// Whether it raised its last activation (else returned).
    pub(crate) failed: bool,
    /// Its asks, in order.
    pub(crate) asks: Vec<String>,
    /// When it ended for good, if it has: its record is kept for the retention horizon.
    pub(crate) ended: Option<DateTime<Utc>>,
}

/// Counts of what happened, for the account printed at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Tally {
    /// Asks raised (caller and user).
    pub asks: u64,
    /// Resolved by a resume.
    pub resumed: u64,
    /// Resolved by a cancel.
    pub cancelled: u64,
    /// Resolved by their deadline.
    pub expired: u64,
    /// Waiting outcomes stored.
    pub stored: u64,
    /// Taken.
    pub taken: u64,
    /// Dropped (retention or cancel).
    pub dropped: u64,
    /// Asks refused at a ceiling.
    pub cap_refused: u64,
    /// Ended runs' records dropped at their retention horizon.
    pub records_dropped: u64,
    /// Visits refused.
    pub visits_refused: u64,
    /// Subject passivations seen in the runtime's counters.
    pub passivations: u64,
}

/// The reference model.
#[derive(Debug)]
pub(crate) struct Model {
    /// Every ask ever parked, by id.
    pub(crate) asks: BTreeMap<String, AskInfo>,
    /// Waiting outcomes, by id.
    pub(crate) waiting: BTreeMap<String, WaitInfo>,
    /// Entries observed `running` (buffered in a group), by id.
    pub(crate) running: BTreeSet<String>,
    /// Runs, by id.
    pub(crate) runs: BTreeMap<String, RunInfo>,
    /// The caller ceiling.
    pub(crate) cap: usize,
    /// The user ceiling.
    pub(crate) user_cap: usize,
    /// The retention horizon.
    pub(crate) retention: Span,
    /// The break, if any.
    pub(crate) fault: Option<ModelFault>,
    /// The account.
    pub(crate) tally: Tally,
    /// The slots the runtime gave up: their subjects' asks and outcomes are neither
    /// counted nor due until the slot is taken back.
    pub(crate) away: BTreeSet<u16>,
    /// Set while the asks counted against the caller ceiling are more than it allows
    /// because a slot taken back brought its own (admitted while it was away).
    pub(crate) over: bool,
}

/// A run about to start in the current step: what its asks will carry.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    /// How long the asks of an `asker` (or `user_asker`) run wait.
    pub(crate) ttl: Span,
    /// How long the ask of a `chain` run waits.
    pub(crate) parent_ttl: Span,
    /// Whether the `asker` started fails once answered.
    pub(crate) fail: bool,
    /// How many asks the `asker` started raises in its group.
    pub(crate) n: usize,
}

impl Model {
    /// An empty model.
    pub(crate) fn new(
        cap: usize,
        user_cap: usize,
        retention: Span,
        fault: Option<ModelFault>,
    ) -> Self {
        Self {
            asks: BTreeMap::new(),
            waiting: BTreeMap::new(),
            running: BTreeSet::new(),
            runs: BTreeMap::new(),
            cap,
            user_cap,
            retention,
            fault,
            tally: Tally::default(),
            away: BTreeSet::new(),
            over: false,
        }
    }

    /// Whether `subject`'s slot is given up.
    pub(crate) fn is_away(&self, subject: &str) -> bool {
        !self.away.is_empty() && self.away.contains(&crate::Runtime::slot_of(subject))
    }

    /// Open caller asks (asking, not yet resolved) of the slots owned.
    pub(crate) fn open_caller(&self) -> usize {
        self.asks
            .values()
            .filter(|a| !a.user && a.resolved.is_none() && !self.is_away(&a.subject))
            .count()
    }

    /// Open user asks of the slots owned.
    pub(crate) fn open_user(&self) -> BTreeSet<&str> {
        self.asks
            .iter()
            .filter(|(_, a)| a.user && a.resolved.is_none() && !self.is_away(&a.subject))
            .map(|(id, _)| id.as_str())
            .collect()
    }

    /// Entries observed `running` of the slots owned.
    fn running_owned(&self) -> usize {
        self.running
            .iter()
            .filter(|id| self.asks.get(*id).is_none_or(|a| !self.is_away(&a.subject)))
            .count()
    }

    /// What the caller ceiling counts now: the slots owned.
    pub(crate) fn caller_count(&self) -> usize {
        let waiting = if self.fault == Some(ModelFault::UncountedWaiting) {
            0
        } else {
            self.waiting
                .values()
                .filter(|w| !self.is_away(&w.subject))
                .count()
        };
        self.open_caller() + self.running_owned() + waiting
    }

    /// Whether `id` is an open ask.
    pub(crate) fn is_open(&self, id: &str) -> bool {
        self.asks.get(id).is_some_and(|a| a.resolved.is_none())
    }

    /// The open asks of `run` other than `id`.
    pub(crate) fn open_siblings(&self, id: &str) -> usize {
        let Some(run) = self.asks.get(id).map(|a| a.run.clone()) else {
            return 0;
        };
        self.runs.get(&run).map_or(0, |r| {
            r.asks
                .iter()
                .filter(|a| *a != id && self.is_open(a))
                .count()
        })
    }

    /// Apply one event; a violation is returned as its message.
    pub(crate) fn apply(
        &mut self,
        event: &Event,
        now: DateTime<Utc>,
        launch: Option<&Launch>,
        user_targets: &[&str],
    ) -> Result<(), String> {
        match event {
            Event::RunStarted { run, target, .. } => {
                let ttl = launch.map_or(Span::zero(), |l| {
                    if target == "chain" {
                        l.parent_ttl
                    } else {
                        l.ttl
                    }
                });
                self.runs.insert(
                    run.clone(),
                    RunInfo {
                        target: target.clone(),
                        ttl,
                        will_fail: launch.is_some_and(|l| l.fail),
                        wanted: match launch {
                            Some(l) if target == "asker" => l.n,
                            _ => 1,
                        },
                        failed: false,
                        asks: Vec::new(),
                        ended: None,
                    },
                );
            }
            Event::RunFinished { run, .. } => {
                if let Some(r) = self.runs.get_mut(run) {
                    r.failed = false;
                    r.ended = Some(now);
                }
            }
            Event::RunFailed { run, .. } => {
                if let Some(r) = self.runs.get_mut(run) {
                    r.failed = true;
                    r.ended = Some(now);
                }
            }
            Event::RunCancelled { run, .. } => {
                if let Some(r) = self.runs.get_mut(run) {
                    r.ended = Some(now);
                }
            }
            Event::RecordDropped { run, .. } => {
                let ended = self.runs.get(run).and_then(|r| r.ended);
                match ended {
                    None => {
                        return Err(format!(
                            "the record of {run} was dropped, but it never ended"
                        ));
                    }
                    Some(at) if now < at + self.retention => {
                        return Err(format!(
                            "the record of {run} was dropped at {now}, before {}",
                            at + self.retention
                        ));
                    }
                    Some(_) => self.tally.records_dropped += 1,
                }
            }
            Event::AskParked {
                subject,
                interaction,
                run,
                ..
            } => {
                if self.asks.contains_key(interaction) {
                    return Err(format!("interaction {interaction} was parked twice"));
                }
                let info = self.runs.get_mut(run).ok_or_else(|| {
                    format!(
                        "interaction {interaction} was parked by run {run}, which never started"
                    )
                })?;
                info.asks.push(interaction.clone());
                let mut ttl = info.ttl;
                if self.fault == Some(ModelFault::LateExpiry) {
                    ttl += Span::minutes(5);
                }
                let user = user_targets.contains(&info.target.as_str());
                self.asks.insert(
                    interaction.clone(),
                    AskInfo {
                        subject: subject.clone(),
                        run: run.clone(),
                        user,
                        expiry: now + ttl,
                        resolved: None,
                    },
                );
                self.tally.asks += 1;
            }
            Event::AskResolved {
                interaction, how, ..
            } => {
                let Some(ask) = self.asks.get_mut(interaction) else {
                    return Err(format!(
                        "interaction {interaction} was resolved but never parked"
                    ));
                };
                if let Some(before) = ask.resolved {
                    return Err(format!(
                        "interaction {interaction} was resolved twice: {before:?}, then {how:?}"
                    ));
                }
                if *how == Resolution::Expired && now < ask.expiry {
                    return Err(format!(
                        "interaction {interaction} expired at {now}, before its deadline {}",
                        ask.expiry
                    ));
                }
                ask.resolved = Some(*how);
                match how {
                    Resolution::Resumed => self.tally.resumed += 1,
                    Resolution::Cancelled => self.tally.cancelled += 1,
                    Resolution::Expired => self.tally.expired += 1,
                }
            }
            Event::ExpiryFired { .. } | Event::RunProgress { .. } => {}
            Event::CapRefused { .. } => self.tally.cap_refused += 1,
            Event::WaitingOutcomeStored {
                subject,
                interaction,
            } => {
                let resolved = self.asks.get(interaction).and_then(|a| a.resolved);
                if !matches!(resolved, Some(Resolution::Resumed | Resolution::Expired)) {
                    return Err(format!(
                        "an outcome waits under {interaction}, which was not resumed (it is {resolved:?})"
                    ));
                }
                if self.waiting.contains_key(interaction) {
                    return Err(format!("an outcome was stored twice under {interaction}"));
                }
                let failed = self
                    .asks
                    .get(interaction)
                    .and_then(|a| self.runs.get(&a.run))
                    .is_some_and(|r| r.failed);
                self.running.remove(interaction);
                self.waiting.insert(
                    interaction.clone(),
                    WaitInfo {
                        subject: subject.clone(),
                        stored_at: now,
                        failed,
                    },
                );
                self.tally.stored += 1;
            }
            Event::WaitingOutcomeTaken { interaction, .. } => {
                if self.waiting.remove(interaction).is_none() {
                    return Err(format!(
                        "{interaction} was taken but no outcome waited under it"
                    ));
                }
                self.tally.taken += 1;
            }
            Event::WaitingOutcomeDropped {
                interaction,
                reason,
                ..
            } => {
                let Some(w) = self.waiting.remove(interaction) else {
                    return Err(format!(
                        "{interaction} was dropped but no outcome waited under it"
                    ));
                };
                if reason == "retention" && now < w.stored_at + self.retention {
                    return Err(format!(
                        "{interaction} was dropped for retention at {now}, before {}",
                        w.stored_at + self.retention
                    ));
                }
                self.tally.dropped += 1;
            }
            Event::VisitRefused { .. } => self.tally.visits_refused += 1,
        }
        Ok(())
    }

    /// After a step: nothing past its deadline or its retention horizon remains.
    pub(crate) fn check_time(&self, now: DateTime<Utc>) -> Result<(), String> {
        for (id, ask) in &self.asks {
            if ask.resolved.is_none() && ask.expiry <= now && !self.is_away(&ask.subject) {
                return Err(format!(
                    "interaction {id} is still asking at {now}, past its deadline {}",
                    ask.expiry
                ));
            }
        }
        for (id, w) in &self.waiting {
            if w.stored_at + self.retention <= now && !self.is_away(&w.subject) {
                return Err(format!(
                    "the outcome waiting under {id} since {} was not dropped by {now}",
                    w.stored_at
                ));
            }
        }
        Ok(())
    }

    /// Compare a subject's parked set with the model, and learn which entries are
    /// `running` (buffered in a group whose other asks are still open).
    pub(crate) fn check_subject(&mut self, subject: &str, entries: &[Entry]) -> Result<(), String> {
        let mut listed = BTreeSet::new();
        for entry in entries {
            shape(entry)?;
            listed.insert(entry.id.clone());
            let id = &entry.id;
            match entry.status {
                EntryStatus::Asking => {
                    if !self.is_open(id) {
                        return Err(format!(
                            "{id} is listed asking, but the model has it {}",
                            self.describe(id)
                        ));
                    }
                    let short = self
                        .asks
                        .get(id)
                        .and_then(|a| self.runs.get(&a.run))
                        .filter(|r| r.asks.len() < r.wanted);
                    if let Some(run) = short {
                        return Err(format!(
                            "{id} is listed asking, but its run raised {} of the {} asks of its group: a refused ask left the rest parked",
                            run.asks.len(),
                            run.wanted
                        ));
                    }
                }
                EntryStatus::Running => {
                    let resolved = self.asks.get(id).and_then(|a| a.resolved);
                    if !matches!(resolved, Some(Resolution::Resumed | Resolution::Expired)) {
                        return Err(format!(
                            "{id} is listed running, but the model has it {}",
                            self.describe(id)
                        ));
                    }
                    let sibling = entries.iter().any(|e| {
                        e.status == EntryStatus::Asking
                            && e.group_id.is_some()
                            && e.group_id == entry.group_id
                    });
                    if !sibling {
                        return Err(format!(
                            "{id} is listed running after everything settled, with no open ask left in its group"
                        ));
                    }
                    if entry.to == Some(To::Caller) {
                        self.running.insert(id.clone());
                    }
                }
                EntryStatus::Finished | EntryStatus::Failed => {
                    let Some(w) = self.waiting.get(id) else {
                        return Err(format!(
                            "{id} is listed as a waiting outcome, but the model has it {}",
                            self.describe(id)
                        ));
                    };
                    if w.failed != (entry.status == EntryStatus::Failed) {
                        return Err(format!(
                            "{id} waits as {}, but its run {}",
                            entry.status.as_str(),
                            if w.failed { "failed" } else { "returned" }
                        ));
                    }
                }
            }
        }
        self.running.retain(|id| {
            listed.contains(id) || self.asks.get(id).is_none_or(|a| a.subject != subject)
        });
        for (id, ask) in &self.asks {
            if ask.subject == subject && ask.resolved.is_none() && !ask.user && !listed.contains(id)
            {
                return Err(format!(
                    "open ask {id} is missing from the parked set of {subject}"
                ));
            }
            if ask.subject == subject && ask.user && ask.resolved.is_none() && !listed.contains(id)
            {
                return Err(format!(
                    "open user ask {id} is missing from the parked set of {subject}"
                ));
            }
        }
        for (id, w) in &self.waiting {
            if w.subject == subject && !listed.contains(id) {
                return Err(format!(
                    "the outcome waiting under {id} is missing from {subject}"
                ));
            }
        }
        Ok(())
    }

    /// The runtime's counters agree with the model, and no ceiling is passed by asks.
    ///
    /// A slot taken back brings the asks admitted before it was given up: the count may
    /// then be above the ceiling, until enough of them are resolved, and nothing more is
    /// admitted meanwhile (`docs/durability.md`, "Giving a slot up and taking it back").
    pub(crate) fn check_counts(
        &mut self,
        caller_open: usize,
        user_open: usize,
    ) -> Result<(), String> {
        let expected = self.caller_count();
        if caller_open != expected {
            return Err(format!(
                "the caller ceiling counts {caller_open}, the model {expected} \
                 ({} open, {} running, {} waiting, {} slot(s) away)",
                self.open_caller(),
                self.running_owned(),
                self.waiting.len(),
                self.away.len()
            ));
        }
        let users = self.open_user().len();
        if user_open != users {
            return Err(format!(
                "the user ceiling counts {user_open}, the model {users}"
            ));
        }
        let asks = self.open_caller() + self.running_owned();
        if asks <= self.cap && users <= self.user_cap {
            self.over = false;
        }
        if asks > self.cap && !self.over {
            return Err(format!(
                "{asks} caller asks are open, above the ceiling of {}",
                self.cap
            ));
        }
        if users > self.user_cap && !self.over {
            return Err(format!(
                "{users} user asks are open, above the ceiling of {}",
                self.user_cap
            ));
        }
        Ok(())
    }

    /// The inbox lists exactly the open user asks, and no frame names a caller ask.
    pub(crate) fn check_inbox(&self, listed: &[String], frames: &[Frame]) -> Result<(), String> {
        let open = self.open_user();
        for id in listed {
            if !open.contains(id.as_str()) {
                return Err(format!(
                    "the inbox lists {id}, which is {}",
                    self.describe(id)
                ));
            }
        }
        if listed.len() != open.len() {
            return Err(format!(
                "the inbox lists {} asks, the model has {} open",
                listed.len(),
                open.len()
            ));
        }
        for frame in frames {
            let id = match frame {
                Frame::Add { item } => &item.id,
                Frame::Answered { id } | Frame::Removed { id, .. } => id,
            };
            if self.asks.get(id).is_none_or(|a| !a.user) {
                return Err(format!(
                    "an inbox frame names {id}, which is not a user ask"
                ));
            }
        }
        Ok(())
    }

    /// The model's view of `id`, for messages.
    pub(crate) fn describe(&self, id: &str) -> String {
        if self.waiting.contains_key(id) {
            return "a waiting outcome".to_owned();
        }
        match self.asks.get(id) {
            None => "unknown".to_owned(),
            Some(a) => match a.resolved {
                None => "asking".to_owned(),
                Some(how) => format!("resolved ({how:?})").to_lowercase(),
            },
        }
    }
}

/// An entry has the page's shape: a live ask carries its addressing, a waiting outcome
/// only its id and status, and nothing is present as `null`.
fn shape(entry: &Entry) -> Result<(), String> {
    let id = &entry.id;
    if !id.starts_with("i-") {
        return Err(format!("entry id {id:?} does not look like i-…"));
    }
    match entry.status {
        EntryStatus::Asking | EntryStatus::Running => {
            if entry.to != Some(To::Caller) && entry.to != Some(To::User) {
                return Err(format!("live entry {id} has no `to`"));
            }
            if entry.asked_by.as_ref().is_none_or(Vec::is_empty) || entry.group_id.is_none() {
                return Err(format!("live entry {id} lacks asked_by or group_id"));
            }
            if entry.question.is_none() && entry.payload.is_none() {
                return Err(format!("live entry {id} has neither question nor payload"));
            }
        }
        EntryStatus::Finished | EntryStatus::Failed => {
            if entry.to.is_some()
                || entry.asked_by.is_some()
                || entry.question.is_some()
                || entry.group_id.is_some()
            {
                return Err(format!("waiting outcome {id} carries ask fields"));
            }
        }
    }
    let json = serde_json::to_value(entry).map_err(|e| e.to_string())?;
    if let Value::Object(map) = json
        && let Some((key, _)) = map.iter().find(|(_, v)| v.is_null())
    {
        return Err(format!("entry {id} has {key} present as null"));
    }
    Ok(())
}
