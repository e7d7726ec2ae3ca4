//! [`Contract`]: a door's four expressions, compiled once at save, and their evaluation
//! at each visit, the door's whole side of it: the door variables bound, the four
//! programs run in one batch over one snapshot, and the [`Plan`] read off their outputs.
//!
//! Each expression must emit exactly one value of its column's shape; anything else is a
//! [`VisitProblem`] naming the expression, what it emitted, and why that is wrong. An
//! expression that passes its deadline breaks the door.

use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::plan::{Item, Plan, VisitProblem};
use super::spec::Spec;
use crate::jq::{CompileError, EvalError, Input, Limits, Outputs, Program};

/// The compiled door contract; an absent expression is `None`.
#[derive(Debug, Default)]
pub(crate) struct Contract {
    cancel: Option<Program>,
    resume: Option<Program>,
    start: Option<Program>,
    extras: Option<Program>,
    /// The door's name, bound as `$door`.
    door: String,
    /// What a start runs on without a `start_expr`.
    kwargs: Value,
    /// Set when an expression of the door passed its deadline; cleared only by saving
    /// the door again.
    broken: AtomicBool,
}

/// What evaluating a contract found.
#[derive(Debug)]
pub(crate) struct Evaluated {
    /// The plan, or every problem with the outputs.
    pub(crate) plan: Result<Plan, Vec<VisitProblem>>,
    /// Whether an expression passed its deadline.
    pub(crate) deadline_hit: bool,
}

impl Contract {
    /// Compile every expression of `spec`; every problem of every expression is returned.
    pub(crate) fn compile(spec: &Spec) -> Result<Self, Vec<CompileError>> {
        let mut errors = Vec::new();
        let mut one = |name: &str, source: &Option<String>| match source {
            None => None,
            Some(source) => match Program::compile(name, source) {
                Ok(p) => Some(p),
                Err(e) => {
                    errors.extend(e.0);
                    None
                }
            },
        };
        let contract = Contract {
            cancel: one("cancel_expr", &spec.cancel_expr),
            resume: one("resume_expr", &spec.resume_expr),
            start: one("start_expr", &spec.start_expr),
            extras: one("extras_expr", &spec.extras_expr),
            door: spec.name.clone(),
            kwargs: spec.kwargs.clone(),
            broken: AtomicBool::new(false),
        };
        if errors.is_empty() {
            Ok(contract)
        } else {
            Err(errors)
        }
    }

    /// Evaluate the contract for a visit of `subject` at `now` over `input`, with the
    /// subject's parked set `parked` (`$parked`, `$subject`, `$door` and `$now` bound),
    /// and read a plan, or every problem, off the outputs. All the expressions go to the
    /// evaluation pool in one hand-off, and the calling thread is free while they are
    /// evaluated. Pure but for one thing: an expression passing its deadline breaks the
    /// door.
    pub(crate) async fn evaluate(
        &self,
        input: &Value,
        parked: Input,
        subject: &str,
        now: DateTime<Utc>,
        limits: &Limits,
    ) -> Result<Plan, Vec<VisitProblem>> {
        let vars = [
            parked,
            Input::string(subject),
            Input::string(&self.door),
            Input::string(&now.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        ];
        let input = Input::from_json(input);
        let results = Program::run_batch(&self.present(), &input, &vars, limits).await;
        let evaluated = self.read(results, limits);
        if evaluated.deadline_hit {
            self.break_door();
        }
        evaluated.plan
    }

    /// [`Contract::evaluate`] on the calling thread, without the evaluation pool: what the
    /// expressions alone cost, for the load tool's bare baseline. The program's own
    /// deadline checks still apply; the pool's stack and cut-off do not.
    pub(crate) fn evaluate_inline(
        &self,
        input: &Input,
        vars: &[Input],
        limits: &Limits,
    ) -> Evaluated {
        let results = self
            .present()
            .iter()
            .map(|p| p.run_inline(input, vars, limits))
            .collect();
        self.read(results, limits)
    }

    /// Mark the door broken: one of its expressions passed its deadline.
    pub(crate) fn break_door(&self) {
        self.broken.store(true, Ordering::Release);
    }

    /// Whether the door is broken.
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// The expressions present, in evaluation order.
    fn present(&self) -> Vec<&Program> {
        [&self.cancel, &self.resume, &self.start, &self.extras]
            .into_iter()
            .filter_map(Option::as_ref)
            .collect()
    }

    /// Read a plan off `results`, one per expression present, in evaluation order.
    fn read(&self, results: Vec<Result<Outputs, EvalError>>, limits: &Limits) -> Evaluated {
        let mut problems = Vec::new();
        let mut deadline_hit = false;
        let named = [
            ("cancel_expr", &self.cancel),
            ("resume_expr", &self.resume),
            ("start_expr", &self.start),
            ("extras_expr", &self.extras),
        ];
        let mut results = results.into_iter();
        let mut outputs: [Option<Value>; 4] = Default::default();
        for (slot, (name, program)) in outputs.iter_mut().zip(named) {
            if program.is_none() {
                continue;
            }
            let Some(result) = results.next() else {
                break;
            };
            *slot = match result {
                Ok(out) if out.more => {
                    problems.push(VisitProblem::Many {
                        expr: name.to_owned(),
                        first: out.first.as_ref().map(shown).unwrap_or_default(),
                    });
                    None
                }
                Ok(out) => match out.first {
                    Some(v) => Some(v),
                    None => {
                        problems.push(VisitProblem::NoOutput {
                            expr: name.to_owned(),
                        });
                        None
                    }
                },
                Err(EvalError::Deadline { .. }) => {
                    // The batch shares one deadline: blame only the first to pass it.
                    if !deadline_hit {
                        problems.push(VisitProblem::Deadline {
                            expr: name.to_owned(),
                            ms: u64::try_from(limits.deadline.as_millis()).unwrap_or(u64::MAX),
                        });
                    }
                    deadline_hit = true;
                    None
                }
                Err(e) => {
                    problems.push(VisitProblem::Eval {
                        expr: name.to_owned(),
                        error: e.to_string(),
                    });
                    None
                }
            };
        }
        let [cancel, resume, start, extras] = outputs;

        let mut plan = Plan::default();
        let mut shape = |r: Result<(), VisitProblem>| {
            if let Err(p) = r {
                problems.push(p);
            }
        };
        if let Some(v) = &cancel {
            shape(cancels(v).map(|c| plan.cancels = c));
        }
        if let Some(v) = &resume {
            shape(resolutions(v).map(|r| plan.resolve = r));
        }
        match (&self.start, &start) {
            (None, _) => plan.start = Some(self.kwargs.clone()),
            (Some(_), Some(v)) => shape(object("start_expr", v).map(|s| plan.start = s)),
            (Some(_), None) => {}
        }
        if let Some(v) = &extras {
            shape(object("extras_expr", v).map(|e| plan.extras = e));
        }
        if plan.resolve.is_some() {
            // A resolution is the visit's one non-cancel action: nothing starts.
            plan.start = None;
        }
        Evaluated {
            plan: if problems.is_empty() {
                Ok(plan)
            } else {
                Err(problems)
            },
            deadline_hit,
        }
    }
}

/// A value as JSON, shortened for an error message. A value past the depth limit is
/// described, not written: writing it recurses once per level.
pub(crate) fn shown(value: &Value) -> String {
    const MAX: usize = 200;
    if crate::depth::too_deep(value) {
        return format!(
            "a value nested deeper than {} levels",
            crate::depth::MAX_VALUE_DEPTH
        );
    }
    let text = value.to_string();
    if text.len() <= MAX {
        return text;
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Refuse an output nested deeper than the depth limit before anything else reads it:
/// every output of a door is checked here as it leaves the jq evaluator.
fn within_depth(expr: &str, value: &Value) -> Result<(), VisitProblem> {
    if crate::depth::too_deep(value) {
        return Err(VisitProblem::TooDeep {
            expr: expr.to_owned(),
            limit: crate::depth::MAX_VALUE_DEPTH,
        });
    }
    Ok(())
}

fn shape(expr: &str, value: &Value, why: &str) -> VisitProblem {
    VisitProblem::Shape {
        expr: expr.to_owned(),
        emitted: shown(value),
        why: why.to_owned(),
    }
}

/// `cancel_expr`: `null`, an id string, or an array of id strings.
pub(crate) fn cancels(value: &Value) -> Result<Vec<String>, VisitProblem> {
    const WHY: &str = "cancel_expr must yield null, an id string, or an array of id strings";
    within_depth("cancel_expr", value)?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::String(id) => Ok(vec![id.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::String(id) => Ok(id.clone()),
                _ => Err(shape("cancel_expr", value, WHY)),
            })
            .collect(),
        _ => Err(shape("cancel_expr", value, WHY)),
    }
}

/// `resume_expr`: `null`, `{id, payload}`, a bare id, or an array of these.
pub(crate) fn resolutions(value: &Value) -> Result<Option<Vec<Item>>, VisitProblem> {
    within_depth("resume_expr", value)?;
    let item = |v: &Value| -> Result<Item, String> {
        match v {
            Value::String(id) => Ok(Item::Take { id: id.clone() }),
            Value::Object(map) => {
                let extra: Vec<&str> = map
                    .keys()
                    .map(String::as_str)
                    .filter(|k| *k != "id" && *k != "payload")
                    .collect();
                if !extra.is_empty() {
                    return Err(format!(
                        "a resume object has exactly the keys id and payload, not {}",
                        extra.join(", ")
                    ));
                }
                let Some(Value::String(id)) = map.get("id") else {
                    return Err("a resume object needs an id string".to_owned());
                };
                let Some(payload) = map.get("payload") else {
                    return Err(
                        "a resume object needs a payload (a take is a bare id string)".to_owned(),
                    );
                };
                Ok(Item::Resume {
                    id: id.clone(),
                    payload: payload.clone(),
                })
            }
            _ => Err(
                "resume_expr must yield null, {id, payload}, a bare id string, or an array of these"
                    .to_owned(),
            ),
        }
    };
    match value {
        Value::Null => Ok(None),
        Value::Array(items) => items
            .iter()
            .map(|v| item(v).map_err(|why| shape("resume_expr", v, &why)))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        single => item(single)
            .map(|i| Some(vec![i]))
            .map_err(|why| shape("resume_expr", single, &why)),
    }
}

/// `start_expr` and `extras_expr`: an object, or `null`.
pub(crate) fn object(expr: &str, value: &Value) -> Result<Option<Value>, VisitProblem> {
    within_depth(expr, value)?;
    match value {
        Value::Null => Ok(None),
        Value::Object(_) => Ok(Some(value.clone())),
        _ => Err(shape(
            expr,
            value,
            &format!("{expr} must yield an object or null"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cancel_shapes() {
        assert_eq!(cancels(&json!(null)), Ok(vec![]));
        assert_eq!(cancels(&json!("i-1")), Ok(vec!["i-1".to_owned()]));
        assert_eq!(cancels(&json!(["i-1", "i-2"])).map(|v| v.len()), Ok(2));
        for bad in [json!(1), json!({"id": "i-1"}), json!(["i-1", 2])] {
            assert!(cancels(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resume_shapes() {
        assert_eq!(resolutions(&json!(null)), Ok(None));
        assert_eq!(
            resolutions(&json!("i-1")),
            Ok(Some(vec![Item::Take { id: "i-1".into() }]))
        );
        assert_eq!(
            resolutions(&json!([{"id": "i-1", "payload": null}, "i-2"])),
            Ok(Some(vec![
                Item::Resume {
                    id: "i-1".into(),
                    payload: Value::Null
                },
                Item::Take { id: "i-2".into() }
            ]))
        );
        let e = resolutions(&json!({"id": "i-1", "payload": 1, "x": 2})).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"resume_expr emitted {"id":"i-1","payload":1,"x":2}: a resume object has exactly the keys id and payload, not x"#
        );
        assert!(resolutions(&json!({"id": "i-1"})).is_err());
        assert!(resolutions(&json!({"id": 1, "payload": 1})).is_err());
        assert!(resolutions(&json!(true)).is_err());
    }

    #[test]
    fn outputs_past_the_depth_limit_are_refused_naming_the_expression() {
        let deep = crate::depth::nested(crate::depth::MAX_VALUE_DEPTH + 1);
        let payload = json!({"id": "i-1", "payload": deep});
        let expected = |expr: &str| VisitProblem::TooDeep {
            expr: expr.to_owned(),
            limit: crate::depth::MAX_VALUE_DEPTH,
        };
        assert_eq!(resolutions(&payload), Err(expected("resume_expr")));
        assert_eq!(cancels(&deep), Err(expected("cancel_expr")));
        assert_eq!(
            object("start_expr", &json!({ "k": deep })),
            Err(expected("start_expr"))
        );
        assert_eq!(
            shown(&deep),
            format!(
                "a value nested deeper than {} levels",
                crate::depth::MAX_VALUE_DEPTH
            )
        );
        let fits = crate::depth::nested(crate::depth::MAX_VALUE_DEPTH - 2);
        assert!(resolutions(&json!({"id": "i-1", "payload": fits})).is_ok());
    }

    #[test]
    fn long_values_are_shortened() {
        let long = json!("x".repeat(1000));
        assert!(shown(&long).chars().count() <= 201);
    }
}
