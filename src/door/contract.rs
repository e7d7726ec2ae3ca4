//! [`Contract`]: the four door expressions, compiled once at save and evaluated together
//! over one snapshot at each visit.

use serde_json::Value;

use super::plan::{self, Plan, VisitProblem};
use super::spec::Spec;
use crate::jq::{CompileError, EvalError, Input, Limits, Outputs, Program};

/// The compiled door contract; an absent expression is `None`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Contract {
    cancel: Option<Program>,
    resume: Option<Program>,
    start: Option<Program>,
    extras: Option<Program>,
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
        };
        if errors.is_empty() {
            Ok(contract)
        } else {
            Err(errors)
        }
    }

    /// Evaluate every expression over `input` with the door variables `vars`, and read a
    /// plan off the outputs. `default_kwargs` is what a start runs on without a
    /// `start_expr`. All the expressions go to the evaluation pool in one hand-off, and
    /// the calling thread is free while they are evaluated.
    pub(crate) async fn evaluate(
        &self,
        input: &Input,
        vars: &[Input],
        limits: &Limits,
        default_kwargs: &Value,
    ) -> Evaluated {
        let results = Program::run_batch(&self.present(), input, vars, limits).await;
        self.read(results, limits, default_kwargs)
    }

    /// [`Contract::evaluate`] on the calling thread, without the evaluation pool: what the
    /// expressions alone cost, for the load tool's bare baseline. The program's own
    /// deadline checks still apply; the pool's stack and cut-off do not.
    pub(crate) fn evaluate_inline(
        &self,
        input: &Input,
        vars: &[Input],
        limits: &Limits,
        default_kwargs: &Value,
    ) -> Evaluated {
        let results = self
            .present()
            .iter()
            .map(|p| p.run_inline(input, vars, limits))
            .collect();
        self.read(results, limits, default_kwargs)
    }

    /// The expressions present, in evaluation order.
    fn present(&self) -> Vec<&Program> {
        [&self.cancel, &self.resume, &self.start, &self.extras]
            .into_iter()
            .filter_map(Option::as_ref)
            .collect()
    }

    /// Read a plan off `results`, one per expression present, in evaluation order.
    fn read(
        &self,
        results: Vec<Result<Outputs, EvalError>>,
        limits: &Limits,
        default_kwargs: &Value,
    ) -> Evaluated {
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
                        first: out.first.as_ref().map(plan::shown).unwrap_or_default(),
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
            shape(plan::cancels(v).map(|c| plan.cancels = c));
        }
        if let Some(v) = &resume {
            shape(plan::resolutions(v).map(|r| plan.resolve = r));
        }
        match (&self.start, &start) {
            (None, _) => plan.start = Some(default_kwargs.clone()),
            (Some(_), Some(v)) => shape(plan::object("start_expr", v).map(|s| plan.start = s)),
            (Some(_), None) => {}
        }
        if let Some(v) = &extras {
            shape(plan::object("extras_expr", v).map(|e| plan.extras = e));
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
