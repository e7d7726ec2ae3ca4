//! [`Spec`]: a door as its author writes it, before it is compiled and saved.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What drives a door's visits, and whether a visit has a receiver.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Kind {
    /// Visited on demand; the visitor receives the outcome inline.
    Route,
    /// Fired by a topic; no receiver.
    Hook {
        /// The topic that fires it.
        topic: String,
        /// An optional jq expression over the fire's input that must yield exactly one
        /// boolean; `false` skips the fire.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        condition: Option<String>,
        /// A fixed subject.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject: Option<String>,
        /// A jq expression over the fire's input yielding the subject (one string).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subject_expr: Option<String>,
    },
    /// Fired by the runtime clock every `interval`; no receiver. Its input document is
    /// `{"schedule": name, "fired_at": RFC 3339}`.
    Schedule {
        /// A humantime interval such as `5m`, at least `1s`.
        interval: String,
        /// The subject it visits.
        subject: String,
    },
}

/// A door definition: a kind, a target with default kwargs, and the four optional jq
/// expressions of the door contract.
///
/// ```
/// use parkway::DoorSpec;
/// let door = DoorSpec::route("confirm", "deploy")
///     .resume_expr(r#"{id: $parked[0].id, payload: {answer: "yes"}}"#);
/// # let _ = door;
/// ```
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Raw")]
pub struct Spec {
    /// The door's name, matching `^[a-z0-9][a-z0-9_-]*$`.
    pub name: String,
    /// Route, hook or schedule.
    #[serde(flatten)]
    pub kind: Kind,
    /// The target a start runs.
    pub target: String,
    /// The kwargs a start runs on when there is no `start_expr` (a JSON object).
    #[serde(default = "empty_object")]
    pub kwargs: Value,
    /// Yields `null`, an id, or a list of ids to cancel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_expr: Option<String>,
    /// Yields `null`, `{id, payload}`, a bare id, or a list of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_expr: Option<String>,
    /// Yields the kwargs of a start (an object), or `null` to start nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_expr: Option<String>,
    /// Yields the extras of a start (an object), or `null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extras_expr: Option<String>,
    /// Fields a builder method set that this kind of door does not take (a `topic` on a
    /// route): reported when the door is saved, never kept.
    #[serde(skip)]
    #[cfg_attr(feature = "schema", schemars(skip))]
    misplaced: Vec<&'static str>,
}

impl Spec {
    fn new(name: &str, kind: Kind, target: &str) -> Self {
        Self {
            name: name.to_owned(),
            kind,
            target: target.to_owned(),
            kwargs: empty_object(),
            cancel_expr: None,
            resume_expr: None,
            start_expr: None,
            extras_expr: None,
            misplaced: Vec::new(),
        }
    }

    /// A route: visited on demand, with a receiver.
    pub fn route(name: &str, target: &str) -> Self {
        Self::new(name, Kind::Route, target)
    }

    /// A hook: fired by a topic, with no receiver. Name its [`topic`](Self::topic) and
    /// its subject ([`subject`](Self::subject) or [`subject_expr`](Self::subject_expr));
    /// a hook without them is refused at save.
    ///
    /// ```
    /// use parkway::DoorSpec;
    /// let door = DoorSpec::hook("release", "deploy")
    ///     .topic("releases")
    ///     .subject("thread-1")
    ///     .resume_expr(r#"$parked | map(select(.status == "asking") | {id, payload: {answer: "yes"}})"#);
    /// # let _ = door;
    /// ```
    pub fn hook(name: &str, target: &str) -> Self {
        Self::new(
            name,
            Kind::Hook {
                topic: String::new(),
                condition: None,
                subject: None,
                subject_expr: None,
            },
            target,
        )
    }

    /// A schedule: fired by the runtime clock, with no receiver. Name its interval
    /// ([`every`](Self::every)) and its [`subject`](Self::subject); a schedule without
    /// them is refused at save.
    ///
    /// ```
    /// use parkway::DoorSpec;
    /// let door = DoorSpec::schedule("nightly", "report").every("24h").subject("reports");
    /// # let _ = door;
    /// ```
    pub fn schedule(name: &str, target: &str) -> Self {
        Self::new(
            name,
            Kind::Schedule {
                interval: String::new(),
                subject: String::new(),
            },
            target,
        )
    }

    /// Set the default kwargs (a JSON object; anything else is refused at save).
    pub fn kwargs(mut self, kwargs: Value) -> Self {
        self.kwargs = kwargs;
        self
    }

    /// Set `cancel_expr`.
    pub fn cancel_expr(mut self, source: &str) -> Self {
        self.cancel_expr = Some(source.to_owned());
        self
    }

    /// Set `resume_expr`.
    pub fn resume_expr(mut self, source: &str) -> Self {
        self.resume_expr = Some(source.to_owned());
        self
    }

    /// Set `start_expr`.
    pub fn start_expr(mut self, source: &str) -> Self {
        self.start_expr = Some(source.to_owned());
        self
    }

    /// Set `extras_expr`.
    pub fn extras_expr(mut self, source: &str) -> Self {
        self.extras_expr = Some(source.to_owned());
        self
    }

    /// For a hook: the topic that fires it.
    pub fn topic(mut self, name: &str) -> Self {
        match &mut self.kind {
            Kind::Hook { topic, .. } => *topic = name.to_owned(),
            _ => self.misplaced.push("topic"),
        }
        self
    }

    /// For a hook or a schedule: the fixed subject it visits (for a hook, in place of a
    /// `subject_expr`).
    pub fn subject(mut self, name: &str) -> Self {
        match &mut self.kind {
            Kind::Hook {
                subject,
                subject_expr,
                ..
            } => {
                *subject = Some(name.to_owned());
                *subject_expr = None;
            }
            Kind::Schedule { subject, .. } => *subject = name.to_owned(),
            Kind::Route => self.misplaced.push("subject"),
        }
        self
    }

    /// For a schedule: how often it fires (humantime, e.g. `5m`; at least `1s`, or the
    /// save is refused).
    pub fn every(mut self, interval: &str) -> Self {
        match &mut self.kind {
            Kind::Schedule { interval: i, .. } => *i = interval.to_owned(),
            _ => self.misplaced.push("interval"),
        }
        self
    }

    /// For a hook: the condition that must hold for a fire to visit.
    pub fn condition(mut self, source: &str) -> Self {
        match &mut self.kind {
            Kind::Hook { condition, .. } => *condition = Some(source.to_owned()),
            _ => self.misplaced.push("condition"),
        }
        self
    }

    /// For a hook: compute the subject from the fire's input instead of a fixed one.
    pub fn subject_expr(mut self, source: &str) -> Self {
        match &mut self.kind {
            Kind::Hook {
                subject,
                subject_expr,
                ..
            } => {
                *subject = None;
                *subject_expr = Some(source.to_owned());
            }
            _ => self.misplaced.push("subject_expr"),
        }
        self
    }

    /// The fields set by a builder method that this kind of door does not take; each
    /// refuses the save.
    pub(crate) fn misplaced(&self) -> &[&'static str] {
        &self.misplaced
    }
}

/// A door as written in JSON: every field flat, unknown keys refused. (serde's
/// `deny_unknown_fields` does not combine with the flattened [`Kind`], so the kind's
/// fields are read here and checked against the kind.)
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    name: String,
    kind: String,
    target: String,
    #[serde(default = "empty_object")]
    kwargs: Value,
    cancel_expr: Option<String>,
    resume_expr: Option<String>,
    start_expr: Option<String>,
    extras_expr: Option<String>,
    topic: Option<String>,
    condition: Option<String>,
    subject: Option<String>,
    subject_expr: Option<String>,
    interval: Option<String>,
}

impl TryFrom<Raw> for Spec {
    type Error = String;

    fn try_from(raw: Raw) -> Result<Self, String> {
        let misplaced = |fields: &[(&str, bool)], kind: &str| -> Result<(), String> {
            let wrong: Vec<&str> = fields
                .iter()
                .filter(|(_, set)| *set)
                .map(|(n, _)| *n)
                .collect();
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(format!("a {kind} door takes no {}", wrong.join(", ")))
            }
        };
        let kind = match raw.kind.as_str() {
            "route" => {
                misplaced(
                    &[
                        ("topic", raw.topic.is_some()),
                        ("condition", raw.condition.is_some()),
                        ("subject", raw.subject.is_some()),
                        ("subject_expr", raw.subject_expr.is_some()),
                        ("interval", raw.interval.is_some()),
                    ],
                    "route",
                )?;
                Kind::Route
            }
            "hook" => {
                misplaced(&[("interval", raw.interval.is_some())], "hook")?;
                Kind::Hook {
                    topic: raw.topic.ok_or("a hook door needs a topic")?,
                    condition: raw.condition,
                    subject: raw.subject,
                    subject_expr: raw.subject_expr,
                }
            }
            "schedule" => {
                misplaced(
                    &[
                        ("topic", raw.topic.is_some()),
                        ("condition", raw.condition.is_some()),
                        ("subject_expr", raw.subject_expr.is_some()),
                    ],
                    "schedule",
                )?;
                Kind::Schedule {
                    interval: raw.interval.ok_or("a schedule door needs an interval")?,
                    subject: raw.subject.ok_or("a schedule door needs a subject")?,
                }
            }
            other => {
                return Err(format!(
                    "unknown door kind {other:?}; expected route, hook or schedule"
                ));
            }
        };
        Ok(Spec {
            name: raw.name,
            kind,
            target: raw.target,
            kwargs: raw.kwargs,
            cancel_expr: raw.cancel_expr,
            resume_expr: raw.resume_expr,
            start_expr: raw.start_expr,
            extras_expr: raw.extras_expr,
            misplaced: Vec::new(),
        })
    }
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_door_reads_back_from_its_json() {
        let hook = Spec::hook("h", "t")
            .topic("deploys")
            .subject("s")
            .condition(".ok")
            .resume_expr("null");
        let text = serde_json::to_value(&hook).unwrap();
        assert_eq!(serde_json::from_value::<Spec>(text).unwrap(), hook);
        let schedule = Spec::schedule("tick", "t").every("5m").subject("s");
        let text = serde_json::to_value(&schedule).unwrap();
        assert_eq!(serde_json::from_value::<Spec>(text).unwrap(), schedule);
    }

    #[test]
    fn unknown_and_misplaced_keys_are_refused() {
        let typo = json!({"name": "d", "kind": "route", "target": "t", "resume_exp": "null"});
        let err = serde_json::from_value::<Spec>(typo)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `resume_exp`"), "{err}");
        let misplaced = json!({"name": "d", "kind": "route", "target": "t", "topic": "x"});
        let err = serde_json::from_value::<Spec>(misplaced)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a route door takes no topic"), "{err}");
        let kind = json!({"name": "d", "kind": "cron", "target": "t"});
        let err = serde_json::from_value::<Spec>(kind)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown door kind \"cron\""), "{err}");
    }
}
