//! The checker: a model of every subject built from the crash log, held against what a
//! reopened store shows.
//!
//! The model holds, for each subject, its entries (an ask `asking`, an answer buffered
//! while a sibling of its group still asks, a waiting outcome) and its runs (parked, or
//! how they ended). It moves only on what the log proves:
//!
//! - an **acknowledged** operation ([`Line::Ack`]) happened, and what it returned must be
//!   what the model says it returns (a start's record with fresh ids and the asks its
//!   target raises, a buffered count, a run's result carrying every answer it was given,
//!   a take's value, a refusal only where the model refuses too);
//! - an operation **begun and not acknowledged** when its child was killed may or may not
//!   have happened. One subject has at most one (its task waits for each call), and the
//!   reopened store decides it: [`Checker::observe`] picks, among "did not happen" and
//!   the ways it could have happened (a resume whose caller was lost leaves its outcome
//!   waiting under the ask's id; a start that became durable shows its asks), the one
//!   that matches what is listed. If none matches, something acknowledged was lost or
//!   something was made up: a violation.
//!
//! Every subject's listing must then equal the model's entries (ids, statuses, payloads,
//! groups), and every run's record its status (and result). Steps are counted from the
//! [`Line::Step`] lines: at most one per run and generation, at most one more than the
//! kills the run lived through, none after the run was known durable with its step
//! journaled, and never under another run's id.

use std::collections::{BTreeMap, HashMap, HashSet};

use parkway::{Entry, EntryStatus, RunRecord, RunStatus};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde_json::{Value, json};

use super::log::{Acked, Call, Line, Target};

/// How many runs that ended and were checked once are checked again at each observation,
/// drawn at random: a record must stay.
const RETIRED_SAMPLE: usize = 64;

/// One entry of the model.
#[derive(Debug, Clone, PartialEq)]
struct ModelEntry {
    id: String,
    run: String,
    /// The ask's number in its run (0 or 1).
    k: usize,
    group: Option<String>,
    state: State,
}

/// What an entry holds.
#[derive(Debug, Clone, PartialEq)]
enum State {
    /// The ask stands.
    Asking,
    /// Answered while a sibling of its group still asks.
    Buffered,
    /// The run's outcome, waiting to be taken.
    Waiting(Value),
}

/// One run of the model.
#[derive(Debug, Clone, PartialEq)]
struct ModelRun {
    nonce: String,
    target: Target,
    status: RunStatus,
    /// Each ask's answer once given.
    answers: Vec<Option<Value>>,
    /// The generation its journaled step ran in (stepped runs).
    prep: Option<u64>,
}

impl ModelRun {
    /// The result the run ends with once every ask is answered.
    fn result(&self) -> Value {
        let answers: Vec<Value> = self
            .answers
            .iter()
            .map(|a| a.clone().unwrap_or(Value::Null))
            .collect();
        let mut result = json!({"nonce": self.nonce, "answers": answers});
        if let Some(prep) = self.prep {
            result["prep"] = json!(prep);
        }
        result
    }
}

/// One subject of the model.
#[derive(Debug, Clone, Default, PartialEq)]
struct Subject {
    entries: Vec<ModelEntry>,
    /// Runs that are parked, and runs that ended since the last observation.
    runs: BTreeMap<String, ModelRun>,
}

/// Who receives a resumed run's outcome.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Receiver {
    /// The resumer, inline.
    Inline,
    /// Nobody: a detached resume, or an inline resumer lost in a crash. The outcome
    /// waits under the ask's id.
    Nobody,
}

/// What a resume did.
#[derive(Debug, Clone, PartialEq)]
enum Resumed {
    /// The answer was buffered; this many asks of the group still ask.
    Buffered(usize),
    /// The run ended with this result, handed to the inline resumer.
    Outcome { run: String, result: Value },
    /// The run ended; its outcome waits.
    Waiting,
}

impl Subject {
    fn position(&self, id: &str) -> Result<usize, String> {
        self.entries
            .iter()
            .position(|e| e.id == id)
            .ok_or_else(|| format!("the model holds no entry {id}"))
    }

    fn resume(&mut self, id: &str, payload: &str, receiver: Receiver) -> Result<Resumed, String> {
        let at = self.position(id)?;
        let entry = self.entries[at].clone();
        if entry.state != State::Asking {
            return Err(format!("the model holds {id} as {:?}", entry.state));
        }
        let run = self
            .runs
            .get_mut(&entry.run)
            .ok_or_else(|| format!("the model has no run {} for {id}", entry.run))?;
        if let Some(slot) = run.answers.get_mut(entry.k) {
            *slot = Some(json!(payload));
        }
        let remaining = self
            .entries
            .iter()
            .filter(|e| e.run == entry.run && e.id != id && e.state == State::Asking)
            .count();
        if remaining > 0 {
            self.entries[at].state = State::Buffered;
            return Ok(Resumed::Buffered(remaining));
        }
        run.status = RunStatus::Succeeded;
        let result = run.result();
        self.entries.retain(|e| e.run != entry.run);
        Ok(match receiver {
            Receiver::Inline => Resumed::Outcome {
                run: entry.run,
                result,
            },
            Receiver::Nobody => {
                // Stored anew when the run ends: after every entry still there.
                self.entries.push(ModelEntry {
                    state: State::Waiting(result),
                    group: None,
                    ..entry
                });
                Resumed::Waiting
            }
        })
    }

    fn cancel(&mut self, id: &str) -> Result<(), String> {
        let at = self.position(id)?;
        let entry = self.entries[at].clone();
        match entry.state {
            State::Asking => {
                // A whole-chain kill: every run here is a chain of one.
                if let Some(run) = self.runs.get_mut(&entry.run) {
                    run.status = RunStatus::Cancelled;
                }
                self.entries.retain(|e| e.run != entry.run);
                Ok(())
            }
            State::Waiting(_) => {
                self.entries.remove(at);
                Ok(())
            }
            State::Buffered => Err(format!("the model holds {id} as buffered")),
        }
    }

    fn take(&mut self, id: &str) -> Result<Value, String> {
        let at = self.position(id)?;
        match &self.entries[at].state {
            State::Waiting(value) => {
                let value = value.clone();
                self.entries.remove(at);
                Ok(value)
            }
            other => Err(format!("the model holds {id} as {other:?}")),
        }
    }

    /// The model's entries as a listing shows them, by id.
    fn expected(&self) -> BTreeMap<String, Shown> {
        self.entries
            .iter()
            .map(|e| {
                let nonce = self.runs.get(&e.run).map(|r| r.nonce.clone());
                let shown = match &e.state {
                    State::Waiting(_) => Shown {
                        status: EntryStatus::Finished,
                        question: None,
                        payload: None,
                        group: None,
                    },
                    state => Shown {
                        status: if *state == State::Asking {
                            EntryStatus::Asking
                        } else {
                            EntryStatus::Running
                        },
                        question: Some(question(e.k)),
                        payload: Some(json!({"nonce": nonce, "run": e.run, "k": e.k})),
                        group: e.group.clone(),
                    },
                };
                (e.id.clone(), shown)
            })
            .collect()
    }
}

/// The question of ask `k`, as the targets ask it.
fn question(k: usize) -> String {
    format!("answer {k}?")
}

/// What a listing shows of an entry, for comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Shown {
    status: EntryStatus,
    question: Option<String>,
    payload: Option<Value>,
    group: Option<String>,
}

impl Shown {
    fn of(entry: &Entry) -> Shown {
        Shown {
            status: entry.status,
            question: entry.question.clone(),
            payload: entry.payload.clone(),
            group: entry.group_id.clone(),
        }
    }
}

/// What the log says of one start's nonce.
#[derive(Debug, Clone)]
struct Nonce {
    subject: String,
    /// Kills before the start began.
    kills_at_begin: u64,
    /// The run it started, once known.
    run: Option<String>,
    /// The generation and log position of each step run for real.
    steps: Vec<(u64, u64)>,
    /// The line (counted from 1) after which the run is known durable with its step
    /// journaled: its start's acknowledgement, or the last line before the check that
    /// found it.
    durable_from: Option<u64>,
}

/// An operation begun.
#[derive(Debug, Clone)]
struct Begun {
    generation: u64,
    seq: u64,
    line: u64,
    subject: String,
    call: Call,
}

/// One way a begun operation may have turned out.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Way {
    /// It did not happen.
    Not,
    /// It happened (a resume: its outcome went to its inline resumer, or waits).
    Happened(Receiver),
}

/// A run whose record is to be read back, and what it must say.
#[derive(Debug, Clone)]
pub struct Wanted {
    run: String,
    status: RunStatus,
    /// The result, for a run that succeeded.
    result: Option<Value>,
}

impl Wanted {
    /// The run.
    pub fn run(&self) -> &str {
        &self.run
    }
}

/// Counts of what the checker saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Operations acknowledged, by kind.
    pub acked: BTreeMap<String, u64>,
    /// Operations acknowledged as refused.
    pub refused: u64,
    /// Operations in flight at a kill that had happened (their change was durable).
    pub in_flight_happened: u64,
    /// Operations in flight at a kill that had not.
    pub in_flight_lost: u64,
    /// Inline resumes in flight at a kill whose outcome was left waiting on the subject.
    pub outcomes_left_waiting: u64,
    /// Inline resumes acknowledged just before a kill whose outcome was also left
    /// waiting: the note that their receiver took it was not yet durable.
    pub delivered_and_left_waiting: u64,
    /// Steps run for real.
    pub steps: u64,
    /// Steps run again after a kill (their first run was not durable).
    pub steps_again: u64,
    /// Runs started and acknowledged or found durable.
    pub runs: u64,
    /// Records read back and checked.
    pub records_checked: u64,
    /// Torn log tails cut.
    pub torn_tails: u64,
    /// Observations made (one per kill, and the last).
    pub observations: u64,
}

/// The checker. Feed it the log's lines in order ([`Checker::line`]), tell it of each
/// kill ([`Checker::killed`]), and hand it what the reopened store lists
/// ([`Checker::observe`]) and the records it asks for ([`Checker::check_records`]).
#[derive(Debug)]
pub struct Checker {
    subjects: BTreeMap<String, Subject>,
    /// Every run id acknowledged or found, with the nonce of its start.
    issued_runs: HashMap<String, String>,
    /// Every interaction id acknowledged or found.
    issued_asks: HashSet<String>,
    nonces: HashMap<String, Nonce>,
    /// Begun in the running generation, not yet acknowledged.
    open: HashMap<(u64, u64), Begun>,
    /// In flight at the last kill, not yet decided.
    pending: Vec<Begun>,
    /// Runs that ended since the last records check: checked at the next.
    ended: Vec<Wanted>,
    /// Outcomes of inline resumes acknowledged since the last observation, by subject:
    /// a kill before the note that they were delivered is durable leaves them waiting
    /// as well (at least once, SPEC "Durability").
    delivered: Vec<(String, ModelEntry)>,
    /// Runs that ended and were checked once: a sample is checked again each time.
    retired: Vec<Wanted>,
    kills: u64,
    /// Log lines fed so far.
    position: u64,
    rng: SmallRng,
    violations: Vec<String>,
    /// Counts of what was seen.
    pub counts: Counts,
}

impl Checker {
    /// A checker of the subjects named `subjects`, sampling old records with `seed`.
    pub fn new(subjects: impl IntoIterator<Item = String>, seed: u64) -> Checker {
        Checker {
            subjects: subjects
                .into_iter()
                .map(|s| (s, Subject::default()))
                .collect(),
            issued_runs: HashMap::new(),
            issued_asks: HashSet::new(),
            nonces: HashMap::new(),
            open: HashMap::new(),
            pending: Vec::new(),
            ended: Vec::new(),
            delivered: Vec::new(),
            retired: Vec::new(),
            kills: 0,
            position: 0,
            rng: SmallRng::seed_from_u64(seed),
            violations: Vec::new(),
            counts: Counts::default(),
        }
    }

    /// The violations found so far.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    fn violation(&mut self, text: String) {
        self.violations.push(text);
    }

    /// Feed the log line at `position`.
    pub fn line(&mut self, position: u64, line: Line) {
        self.position = position + 1;
        match line {
            Line::Open { .. } => {}
            Line::Begin {
                generation,
                seq,
                subject,
                call,
            } => {
                if !self.subjects.contains_key(&subject) {
                    self.violation(format!(
                        "line {}: an operation on {subject}, which is not one of the subjects",
                        position + 1
                    ));
                    return;
                }
                if let Call::Start { nonce, .. } = &call {
                    if self.nonces.contains_key(nonce) {
                        self.violation(format!(
                            "line {}: the harness began a second start with nonce {nonce}",
                            position + 1
                        ));
                    }
                    self.nonces.insert(
                        nonce.clone(),
                        Nonce {
                            subject: subject.clone(),
                            kills_at_begin: self.kills,
                            run: None,
                            steps: Vec::new(),
                            durable_from: None,
                        },
                    );
                }
                self.open.insert(
                    (generation, seq),
                    Begun {
                        generation,
                        seq,
                        line: position,
                        subject,
                        call,
                    },
                );
            }
            Line::Ack {
                generation,
                seq,
                acked,
            } => match self.open.remove(&(generation, seq)) {
                Some(begun) => self.acked(&begun, acked),
                None => self.violation(format!(
                    "line {}: an acknowledgement of operation {generation}/{seq}, which was not begun",
                    position + 1
                )),
            },
            Line::Step {
                generation,
                nonce,
                run,
            } => self.step(position, generation, &nonce, &run),
        }
    }

    /// The running child was killed: what it had begun and not acknowledged is in flight.
    pub fn killed(&mut self) {
        self.kills += 1;
        let mut open: Vec<Begun> = self.open.drain().map(|(_, b)| b).collect();
        open.sort_by_key(|b| b.line);
        self.pending.extend(open);
    }

    /// A torn tail of the log was cut.
    pub fn torn_tail(&mut self) {
        self.counts.torn_tails += 1;
    }

    fn step(&mut self, position: u64, generation: u64, nonce: &str, run: &str) {
        self.counts.steps += 1;
        let at = position + 1;
        let Some(n) = self.nonces.get_mut(nonce) else {
            self.violation(format!(
                "line {at}: a step ran for nonce {nonce} (run {run}), which no start began"
            ));
            return;
        };
        let mut problems = Vec::new();
        if let Some(known) = &n.run
            && known != run
        {
            problems.push(format!(
                "line {at}: the step of nonce {nonce} ran as run {run}, but that start's run is {known}"
            ));
        }
        if let Some(from) = n.durable_from {
            problems.push(format!(
                "line {at}: the journaled step of run {run} (nonce {nonce}) ran again in generation {generation}, after its run was known durable with the step journaled (line {from})"
            ));
        }
        if n.steps.iter().any(|(g, _)| *g == generation) {
            problems.push(format!(
                "line {at}: the step of run {run} (nonce {nonce}) ran twice in generation {generation}"
            ));
        }
        n.steps.push((generation, position));
        let allowed = 1 + self.kills - n.kills_at_begin;
        if n.steps.len() as u64 > allowed {
            problems.push(format!(
                "line {at}: the step of run {run} (nonce {nonce}) ran {} times across {} kills",
                n.steps.len(),
                self.kills - n.kills_at_begin
            ));
        }
        if n.steps.len() > 1 {
            self.counts.steps_again += 1;
        }
        if let Some(other) = self.issued_runs.get(run)
            && other != nonce
        {
            problems.push(format!(
                "line {at}: run id {run} ran a step for nonce {nonce}, but it was issued to nonce {other}: an id issued twice"
            ));
        }
        for p in problems {
            self.violation(p);
        }
    }

    /// An acknowledged operation: it happened, and returned `acked`.
    fn acked(&mut self, begun: &Begun, acked: Acked) {
        let at = format!(
            "line {} (generation {}, operation {}, {})",
            self.position,
            begun.generation,
            begun.seq,
            describe(&begun.call)
        );
        let kind = match &acked {
            Acked::Refused(_) => "refused",
            _ => kind(&begun.call),
        };
        *self.counts.acked.entry(kind.to_owned()).or_default() += 1;
        let subject = begun.subject.clone();
        if let Acked::Refused(why) = &acked {
            self.counts.refused += 1;
            // The model must refuse it too: try it on a copy.
            let mut copy = self.subjects.get(&subject).cloned().unwrap_or_default();
            let would = match &begun.call {
                Call::Start { .. } => Ok(()),
                Call::Resume {
                    interaction,
                    payload,
                }
                | Call::ResumeDetached {
                    interaction,
                    payload,
                } => copy
                    .resume(interaction, payload, Receiver::Nobody)
                    .map(|_| ()),
                Call::Cancel { interaction } => copy.cancel(interaction),
                Call::Take { interaction } => copy.take(interaction).map(|_| ()),
            };
            if would.is_ok() {
                self.violation(format!(
                    "{at}: refused ({why}), but the model says it applies"
                ));
            }
            return;
        }
        match (&begun.call, acked) {
            (Call::Start { target, nonce }, Acked::Started(record)) => {
                self.started_acked(&at, &subject, *target, nonce, &record);
            }
            (
                Call::Resume {
                    interaction,
                    payload,
                },
                acked @ (Acked::Buffered { .. } | Acked::Resumed(_)),
            ) => {
                let entry = self
                    .subjects
                    .get(&subject)
                    .and_then(|s| s.entries.iter().find(|e| e.id == *interaction).cloned());
                let done =
                    self.subject_mut(&subject)
                        .resume(interaction, payload, Receiver::Inline);
                match (done, acked) {
                    (Ok(Resumed::Buffered(k)), Acked::Buffered { remaining }) if k == remaining => {
                    }
                    (Ok(Resumed::Outcome { run, result }), Acked::Resumed(record)) => {
                        let fine = record.run_id == run
                            && record.status == RunStatus::Succeeded
                            && record.result.as_ref() == Some(&result);
                        if !fine {
                            self.violation(format!(
                                "{at}: the run's outcome is {}, the model expects run {run} succeeded with {result}",
                                compact(&record)
                            ));
                        }
                        if let Some(entry) = entry {
                            let waiting = ModelEntry {
                                state: State::Waiting(result),
                                group: None,
                                ..entry
                            };
                            self.delivered.push((subject.clone(), waiting));
                        }
                        self.run_ended(&subject, &run);
                    }
                    (done, acked) => self.violation(format!(
                        "{at}: acknowledged as {acked:?}, the model says {done:?}"
                    )),
                }
            }
            (
                Call::ResumeDetached {
                    interaction,
                    payload,
                },
                Acked::Detached,
            ) => {
                let entry_run = self.run_of(&subject, interaction);
                match self
                    .subject_mut(&subject)
                    .resume(interaction, payload, Receiver::Nobody)
                {
                    Ok(Resumed::Waiting) => {
                        if let Some(run) = entry_run {
                            self.run_ended(&subject, &run);
                        }
                    }
                    Ok(_) => {}
                    Err(why) => self.violation(format!("{at}: acknowledged, but {why}")),
                }
            }
            (Call::Cancel { interaction }, Acked::Cancelled) => {
                let entry_run = self.run_of(&subject, interaction);
                let asking = self.is_asking(&subject, interaction);
                match self.subject_mut(&subject).cancel(interaction) {
                    Ok(()) => {
                        if let (true, Some(run)) = (asking, entry_run) {
                            self.run_ended(&subject, &run);
                        }
                    }
                    Err(why) => self.violation(format!("{at}: acknowledged, but {why}")),
                }
            }
            (Call::Take { interaction }, Acked::Taken(value)) => {
                match self.subject_mut(&subject).take(interaction) {
                    Ok(expected) if expected == value => {}
                    Ok(expected) => {
                        self.violation(format!("{at}: took {value}, the model expects {expected}"))
                    }
                    Err(why) => self.violation(format!("{at}: took {value}, but {why}")),
                }
            }
            (call, acked) => self.violation(format!(
                "{at}: {} acknowledged as {acked:?}",
                describe(call)
            )),
        }
    }

    fn subject_mut(&mut self, subject: &str) -> &mut Subject {
        self.subjects.entry(subject.to_owned()).or_default()
    }

    fn run_of(&self, subject: &str, id: &str) -> Option<String> {
        self.subjects
            .get(subject)?
            .entries
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.run.clone())
    }

    fn is_asking(&self, subject: &str, id: &str) -> bool {
        self.subjects.get(subject).is_some_and(|s| {
            s.entries
                .iter()
                .any(|e| e.id == id && e.state == State::Asking)
        })
    }

    /// `run` ended: its record is checked at the next observation, then it leaves the
    /// subject's runs.
    fn run_ended(&mut self, subject: &str, run: &str) {
        let Some(s) = self.subjects.get_mut(subject) else {
            return;
        };
        let Some(r) = s.runs.remove(run) else { return };
        self.ended.push(Wanted {
            run: run.to_owned(),
            status: r.status,
            result: (r.status == RunStatus::Succeeded).then(|| r.result()),
        });
    }

    /// A start acknowledged with `record`.
    fn started_acked(
        &mut self,
        at: &str,
        subject: &str,
        target: Target,
        nonce: &str,
        record: &RunRecord,
    ) {
        let asks = record.asks.clone().unwrap_or_default();
        let mut problems = Vec::new();
        if record.status != RunStatus::Parked || record.target != target.name() {
            problems.push(format!(
                "{at}: the start's record is {}, the model expects target {} parked",
                compact(record),
                target.name()
            ));
        }
        let found: Vec<NewAsk> = asks
            .iter()
            .enumerate()
            .map(|(k, e)| (e.id.clone(), k, e.group_id.clone()))
            .collect();
        for (k, e) in asks.iter().enumerate() {
            let shown = Shown::of(e);
            let expected = Shown {
                status: EntryStatus::Asking,
                question: Some(question(k)),
                payload: Some(json!({"nonce": nonce, "run": record.run_id, "k": k})),
                group: e.group_id.clone(),
            };
            if shown != expected {
                problems.push(format!(
                    "{at}: ask {k} of the start's record is {}, the model expects {}",
                    json!(shown),
                    json!(expected)
                ));
            }
        }
        if asks.len() != target.asks() {
            problems.push(format!(
                "{at}: the start's record has {} asks, target {} raises {}",
                asks.len(),
                target.name(),
                target.asks()
            ));
        }
        if problems.is_empty() {
            self.adopt_run(at, subject, target, nonce, &record.run_id, &found);
        }
        for p in problems {
            self.violation(p);
        }
    }

    /// A run known durable and parked with the asks `asks` (id, number, group): fresh
    /// ids, its step journaled, into the model.
    fn adopt_run(
        &mut self,
        at: &str,
        subject: &str,
        target: Target,
        nonce: &str,
        run: &str,
        asks: &[NewAsk],
    ) {
        self.counts.runs += 1;
        if let Some(other) = self.issued_runs.insert(run.to_owned(), nonce.to_owned()) {
            self.violation(format!(
                "{at}: run id {run} was issued to nonce {nonce} and before to nonce {other}: an id issued twice"
            ));
        }
        for (id, _, _) in asks {
            if !self.issued_asks.insert(id.clone()) {
                self.violation(format!(
                    "{at}: interaction id {id} (run {run}) was issued before: an id issued twice"
                ));
            }
        }
        let groups: HashSet<&Option<String>> = asks.iter().map(|(_, _, g)| g).collect();
        if groups.len() != 1 || groups.contains(&None) {
            self.violation(format!(
                "{at}: the asks of run {run} are not one group: {asks:?}"
            ));
        }
        let position = self.position;
        let mut prep = None;
        let mut problems = Vec::new();
        if let Some(n) = self.nonces.get_mut(nonce) {
            n.run = Some(run.to_owned());
            if target == Target::Stepped {
                n.durable_from = Some(position);
                prep = n.steps.last().map(|(g, _)| *g);
                if prep.is_none() {
                    problems.push(format!(
                        "{at}: stepped run {run} (nonce {nonce}) parked, but its step never ran"
                    ));
                }
            }
        }
        for p in problems {
            self.violation(p);
        }
        let s = self.subject_mut(subject);
        s.runs.insert(
            run.to_owned(),
            ModelRun {
                nonce: nonce.to_owned(),
                target,
                status: RunStatus::Parked,
                answers: vec![None; target.asks()],
                prep,
            },
        );
        for (id, k, group) in asks {
            s.entries.push(ModelEntry {
                id: id.clone(),
                run: run.to_owned(),
                k: *k,
                group: group.clone(),
                state: State::Asking,
            });
        }
    }

    /// Hold every subject's listing `lists` (after a kill and the reopening) against the
    /// model, deciding first each operation that was in flight at the kill.
    pub fn observe(&mut self, lists: &BTreeMap<String, Vec<Entry>>) {
        self.counts.observations += 1;
        let pending = std::mem::take(&mut self.pending);
        let delivered = std::mem::take(&mut self.delivered);
        let names: Vec<String> = self.subjects.keys().cloned().collect();
        for name in names {
            let listed = lists.get(&name).cloned().unwrap_or_default();
            let shown: BTreeMap<String, Shown> = listed
                .iter()
                .map(|e| (e.id.clone(), Shown::of(e)))
                .collect();
            // A delivered outcome shown waiting: its receiver's note was lost.
            for (_, entry) in delivered.iter().filter(|(s, _)| *s == name) {
                let model = self.subject_mut(&name);
                if shown.contains_key(&entry.id) && !model.entries.iter().any(|e| e.id == entry.id)
                {
                    model.entries.push(entry.clone());
                    self.counts.delivered_and_left_waiting += 1;
                }
            }
            let mine: Vec<&Begun> = pending.iter().filter(|b| b.subject == name).collect();
            self.decide(&name, &mine, &listed, &shown);
        }
        for (id, list) in lists {
            if !self.subjects.contains_key(id) && !list.is_empty() {
                self.violation(format!("subject {id} is not one of the subjects: {list:?}"));
            }
        }
        // Steps of starts that never happened: their run was durable (a step runs only
        // once its start is) and is gone.
        let lost: Vec<String> = self
            .nonces
            .iter()
            .filter(|(_, n)| n.run.is_none() && !n.steps.is_empty())
            .filter(|(nonce, _)| !self.open.values().any(|b| is_start_of(b, nonce)))
            .map(|(nonce, n)| {
                format!(
                    "the start of nonce {nonce} on {} ran its step (generations {:?}), but its run is not in the store",
                    n.subject,
                    n.steps.iter().map(|s| s.0).collect::<Vec<_>>()
                )
            })
            .collect();
        for l in lost {
            self.violation(l);
        }
        // Nonces of starts decided as never happened are done with.
        self.nonces
            .retain(|_, n| n.run.is_some() || !n.steps.is_empty());
    }

    /// Decide the operations `begun` in flight on `name` against its listing, and hold
    /// the model's entries against it.
    fn decide(
        &mut self,
        name: &str,
        begun: &[&Begun],
        listed: &[Entry],
        shown: &BTreeMap<String, Shown>,
    ) {
        // Every combination of ways the operations may have turned out, in log order.
        let mut combos: Vec<Vec<Way>> = vec![Vec::new()];
        for b in begun {
            let ways = ways(&b.call);
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    ways.iter().map(move |w| {
                        let mut c = c.clone();
                        c.push(*w);
                        c
                    })
                })
                .collect();
        }
        let mut tried = Vec::new();
        for combo in combos {
            let mut probe = self.probe(name);
            let mut fits = true;
            for (b, way) in begun.iter().zip(&combo) {
                if !probe.apply(b, *way, listed) {
                    fits = false;
                    break;
                }
            }
            if !fits {
                continue;
            }
            let expected = probe.subject.expected();
            if expected == *shown {
                self.commit(name, probe, begun, &combo);
                return;
            }
            tried.push((combo, expected));
        }
        let mut text = format!(
            "subject {name} lists {}",
            serde_json::to_string(shown).unwrap_or_default()
        );
        if begun.is_empty() {
            let expected = self.subjects.get(name).map(Subject::expected);
            text.push_str(&format!(
                ", the model holds {}",
                serde_json::to_string(&expected).unwrap_or_default()
            ));
        } else {
            for b in begun {
                text.push_str(&format!(
                    "; in flight at the kill: {} (generation {}, operation {}, line {})",
                    describe(&b.call),
                    b.generation,
                    b.seq,
                    b.line + 1
                ));
            }
            for (combo, expected) in tried {
                text.push_str(&format!(
                    "; if {combo:?}, the model would hold {}",
                    serde_json::to_string(&expected).unwrap_or_default()
                ));
            }
        }
        self.violation(text);
    }

    fn probe(&self, name: &str) -> Probe {
        Probe {
            subject: self.subjects.get(name).cloned().unwrap_or_default(),
            adopted: Vec::new(),
            ended: Vec::new(),
        }
    }

    /// The ways `combo` of the operations `begun` were found to have turned out.
    fn commit(&mut self, name: &str, probe: Probe, begun: &[&Begun], combo: &[Way]) {
        for (b, way) in begun.iter().zip(combo) {
            match way {
                Way::Not => self.counts.in_flight_lost += 1,
                Way::Happened(receiver) => {
                    self.counts.in_flight_happened += 1;
                    if matches!(b.call, Call::Resume { .. }) && *receiver == Receiver::Nobody {
                        self.counts.outcomes_left_waiting += 1;
                    }
                }
            }
        }
        let Probe {
            mut subject,
            adopted,
            ended,
        } = probe;
        // Found runs enter through `adopt_run`, which checks their ids and their step.
        for FoundRun { run, .. } in &adopted {
            subject.runs.remove(run);
            subject.entries.retain(|e| &e.run != run);
        }
        self.subjects.insert(name.to_owned(), subject);
        for FoundRun {
            target,
            nonce,
            run,
            asks,
        } in adopted
        {
            self.adopt_run(
                &format!("subject {name}, found after the kill"),
                name,
                target,
                &nonce,
                &run,
                &asks,
            );
        }
        for run in ended {
            self.run_ended(name, &run);
        }
    }

    /// The runs whose records [`Checker::check_records`] wants: every run the model holds
    /// parked, those that ended since the last check, and a sample of older ones.
    pub fn records_wanted(&mut self) -> Vec<Wanted> {
        let mut wanted: Vec<Wanted> = self
            .subjects
            .values()
            .flat_map(|s| {
                s.runs.iter().map(|(id, run)| Wanted {
                    run: id.clone(),
                    status: run.status,
                    result: None,
                })
            })
            .collect();
        wanted.append(&mut self.ended);
        let fresh = wanted.len();
        for _ in 0..RETIRED_SAMPLE.min(self.retired.len()) {
            let i = self.rng.random_range(0..self.retired.len());
            wanted.push(self.retired[i].clone());
        }
        // Those that ended are checked again only by sample from now on.
        self.retired.extend(
            wanted[..fresh]
                .iter()
                .filter(|w| w.status.is_terminal())
                .cloned(),
        );
        wanted
    }

    /// Hold the records read back for [`Checker::records_wanted`] against the model.
    pub fn check_records(&mut self, found: &[(Wanted, Option<RunRecord>)]) {
        for (want, record) in found {
            self.counts.records_checked += 1;
            let Wanted {
                run,
                status,
                result,
            } = want;
            let problem = match record {
                None => Some(format!(
                    "run {run} has no record; the model holds it {status}"
                )),
                Some(record)
                    if record.status != *status
                        || (*status == RunStatus::Succeeded && record.result != *result) =>
                {
                    Some(format!(
                        "run {run}'s record is {}, the model holds it {status}{}",
                        compact(record),
                        result
                            .as_ref()
                            .map(|r| format!(" with {r}"))
                            .unwrap_or_default()
                    ))
                }
                Some(_) => None,
            };
            if let Some(problem) = problem {
                self.violation(problem);
            }
        }
    }
}

/// Whether `begun` is the start of `nonce`.
fn is_start_of(begun: &Begun, nonce: &str) -> bool {
    matches!(&begun.call, Call::Start { nonce: n, .. } if n == nonce)
}

/// The ways an operation in flight at a kill may have turned out.
fn ways(call: &Call) -> Vec<Way> {
    match call {
        // The inline resumer was lost: its outcome waits, unless the outcome was durable
        // (and handed over) before the kill.
        Call::Resume { .. } => vec![
            Way::Not,
            Way::Happened(Receiver::Inline),
            Way::Happened(Receiver::Nobody),
        ],
        _ => vec![Way::Not, Way::Happened(Receiver::Nobody)],
    }
}

/// An ask of a run just found: its id, its number in the run, its group.
type NewAsk = (String, usize, Option<String>);

/// A start found durable after a kill.
struct FoundRun {
    target: Target,
    nonce: String,
    run: String,
    asks: Vec<NewAsk>,
}

/// A copy of one subject on which the ways of the operations in flight are tried.
struct Probe {
    subject: Subject,
    /// Starts found durable: target, nonce, run, asks.
    adopted: Vec<FoundRun>,
    /// Runs that ended.
    ended: Vec<String>,
}

impl Probe {
    /// Apply `begun` as having turned out `way`; whether it can have.
    fn apply(&mut self, begun: &Begun, way: Way, listed: &[Entry]) -> bool {
        let Way::Happened(receiver) = way else {
            // A start that did not happen shows none of its asks.
            if let Call::Start { nonce, .. } = &begun.call {
                return !listed.iter().any(|e| nonce_of(e) == Some(nonce.as_str()));
            }
            return true;
        };
        let s = &mut self.subject;
        match &begun.call {
            Call::Start { target, nonce } => {
                let mine: Vec<&Entry> = listed
                    .iter()
                    .filter(|e| nonce_of(e) == Some(nonce.as_str()))
                    .collect();
                let Some(run) = mine
                    .first()
                    .and_then(|e| e.payload.as_ref())
                    .and_then(|p| p["run"].as_str())
                    .map(str::to_owned)
                else {
                    return false;
                };
                let asks: Vec<NewAsk> = mine
                    .iter()
                    .map(|e| {
                        let k = e
                            .payload
                            .as_ref()
                            .and_then(|p| p["k"].as_u64())
                            .unwrap_or(u64::MAX) as usize;
                        (e.id.clone(), k, e.group_id.clone())
                    })
                    .collect();
                let mut ks: Vec<usize> = asks.iter().map(|a| a.1).collect();
                ks.sort();
                if ks != (0..target.asks()).collect::<Vec<_>>() {
                    return false;
                }
                s.runs.insert(
                    run.clone(),
                    ModelRun {
                        nonce: nonce.clone(),
                        target: *target,
                        status: RunStatus::Parked,
                        answers: vec![None; target.asks()],
                        prep: None,
                    },
                );
                for (id, k, group) in &asks {
                    s.entries.push(ModelEntry {
                        id: id.clone(),
                        run: run.clone(),
                        k: *k,
                        group: group.clone(),
                        state: State::Asking,
                    });
                }
                self.adopted.push(FoundRun {
                    target: *target,
                    nonce: nonce.clone(),
                    run,
                    asks,
                });
                true
            }
            Call::Resume {
                interaction,
                payload,
            }
            | Call::ResumeDetached {
                interaction,
                payload,
            } => {
                let run = s
                    .entries
                    .iter()
                    .find(|e| &e.id == interaction)
                    .map(|e| e.run.clone());
                match s.resume(interaction, payload, receiver) {
                    Ok(Resumed::Buffered(_)) => true,
                    Ok(_) => {
                        self.ended.extend(run);
                        true
                    }
                    Err(_) => false,
                }
            }
            Call::Cancel { interaction } => {
                let asking = s
                    .entries
                    .iter()
                    .find(|e| &e.id == interaction)
                    .filter(|e| e.state == State::Asking)
                    .map(|e| e.run.clone());
                match s.cancel(interaction) {
                    Ok(()) => {
                        self.ended.extend(asking);
                        true
                    }
                    Err(_) => false,
                }
            }
            Call::Take { interaction } => s.take(interaction).is_ok(),
        }
    }
}

/// The nonce an ask's payload names.
fn nonce_of(entry: &Entry) -> Option<&str> {
    entry.payload.as_ref()?.get("nonce")?.as_str()
}

/// The kind of an operation, for the counts.
fn kind(call: &Call) -> &'static str {
    match call {
        Call::Start { .. } => "start",
        Call::Resume { .. } => "resume",
        Call::ResumeDetached { .. } => "resume_detached",
        Call::Cancel { .. } => "cancel",
        Call::Take { .. } => "take",
    }
}

/// An operation in words.
fn describe(call: &Call) -> String {
    match call {
        Call::Start { target, nonce } => format!("start {} ({nonce})", target.name()),
        Call::Resume {
            interaction,
            payload,
        } => format!("resume {interaction} with {payload:?}"),
        Call::ResumeDetached {
            interaction,
            payload,
        } => format!("resume_detached {interaction} with {payload:?}"),
        Call::Cancel { interaction } => format!("cancel {interaction}"),
        Call::Take { interaction } => format!("take {interaction}"),
    }
}

/// A record on one line.
fn compact(record: &RunRecord) -> String {
    serde_json::to_string(record).unwrap_or_else(|_| format!("{record:?}"))
}
