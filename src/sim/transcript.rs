//! [`Transcript`]: what a scenario run did, step by step, as text or JSON lines.
//!
//! Everything in a transcript comes from the runtime on virtual time with sequential
//! ids, so the same scenario gives the same bytes on every run.

use serde::Serialize;
use serde_json::{Value, json};

/// Why a step's operation failed: a stable kind and the error's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Failure {
    /// A stable name for the error, such as `wrong_status`, `refused` or `invalid`.
    pub kind: String,
    /// The error's message.
    pub message: String,
}

impl Failure {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: impl Into<String>, message: impl Into<String>) -> Failure {
        Failure {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

/// One step of a transcript.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Line {
    /// The step's number, from 1 (doors saved before the timeline are steps too).
    pub step: usize,
    /// The step's prose note, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The action's key (`visit`, `advance`, …).
    pub action: String,
    /// What the step did, in words.
    pub summary: String,
    /// The virtual clock after the step.
    pub at: String,
    /// The output, when the operation succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The error, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Failure>,
    /// The platform events the step caused, in order.
    pub events: Vec<Value>,
    /// What scripted targets noted (journaled steps that really ran).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// `None` when the step had no expectation; else whether it held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<Check>,
}

/// The verdict on a step's expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Check {
    /// The output (or error) was as expected.
    Passed,
    /// It was not: what was expected and what came.
    Failed(String),
}

/// A whole run of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Transcript {
    /// The scenario's name.
    pub scenario: String,
    /// What it shows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<String>,
    /// The steps.
    pub lines: Vec<Line>,
}

impl Transcript {
    /// Whether every expectation held.
    pub fn passed(&self) -> bool {
        self.failures().is_empty()
    }

    /// One message per failed expectation: which step, what was expected, what came.
    pub fn failures(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter_map(|line| match &line.check {
                Some(Check::Failed(why)) => Some(format!(
                    "{}: step {} ({}) failed: {why}",
                    self.scenario, line.step, line.summary
                )),
                _ => None,
            })
            .collect()
    }

    /// The readable transcript.
    pub fn text(&self) -> String {
        let mut out = format!("== scenario {}\n", self.scenario);
        if let Some(about) = &self.about {
            for l in about.lines() {
                out.push_str(&format!("   {l}\n"));
            }
        }
        for line in &self.lines {
            out.push('\n');
            if let Some(note) = &line.note {
                for l in note.lines() {
                    out.push_str(&format!("   # {l}\n"));
                }
            }
            out.push_str(&format!(
                "{:>3}. {}   [{}]\n",
                line.step, line.summary, line.at
            ));
            if let Some(output) = &line.output {
                out.push_str(&format!("     -> {output}\n"));
            }
            if let Some(error) = &line.error {
                out.push_str(&format!(
                    "     -> error {}: {}\n",
                    error.kind, error.message
                ));
            }
            for event in &line.events {
                out.push_str(&format!("     event {}\n", event_text(event)));
            }
            for note in &line.notes {
                out.push_str(&format!("     note {note}\n"));
            }
            match &line.check {
                None => {}
                Some(Check::Passed) => out.push_str("     expect: ok\n"),
                Some(Check::Failed(why)) => out.push_str(&format!("     expect: FAILED {why}\n")),
            }
        }
        let failed = self.failures().len();
        out.push_str(&format!(
            "\n== {}: {} step(s), {}\n",
            self.scenario,
            self.lines.len(),
            if failed == 0 {
                "every expectation held".to_owned()
            } else {
                format!("{failed} expectation(s) FAILED")
            }
        ));
        out
    }

    /// The transcript as JSON lines: a header, one line per step, and a summary.
    pub fn json_lines(&self) -> String {
        let mut out = String::new();
        let head = json!({"scenario": self.scenario, "about": self.about});
        out.push_str(&head.to_string());
        out.push('\n');
        for line in &self.lines {
            out.push_str(&serde_json::to_string(line).unwrap_or_default());
            out.push('\n');
        }
        let tail = json!({
            "scenario": self.scenario,
            "steps": self.lines.len(),
            "failed": self.failures().len(),
        });
        out.push_str(&tail.to_string());
        out.push('\n');
        out
    }
}

/// An event as `name key=value …`.
fn event_text(event: &Value) -> String {
    let Value::Object(map) = event else {
        return event.to_string();
    };
    let mut out = map
        .get("event")
        .and_then(Value::as_str)
        .unwrap_or("event")
        .to_owned();
    for (k, v) in map {
        if k == "event" {
            continue;
        }
        match v {
            Value::String(s) => out.push_str(&format!(" {k}={s}")),
            other => out.push_str(&format!(" {k}={other}")),
        }
    }
    out
}
