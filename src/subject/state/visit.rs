//! A door visit at the subject, once its contract was evaluated over the subject's
//! parked set (`crate::door::contract::Contract::evaluate`): check every shape and every named
//! id against the parked set, and only then apply — cancels first, then the resolutions,
//! else the start — all within one message, so nothing changes between check and apply.
//! The visitor then turns what was applied into the visit's outcome
//! ([`Applied::outcome`]), awaiting the receivers it holds.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;

use super::{Chains, Deferred, State};
use crate::ask::EXPIRY_MARKER_KEY;
use crate::door::outcome::{ItemOutcome, Visit, VisitError, VisitOutcome};
use crate::door::plan::{Item, Plan, VisitProblem};
use crate::door::saved::Saved;
use crate::error::{IdProblem, Problems};
use crate::event::Event;
use crate::ids::ReplyId;
use crate::jq::Input;
use crate::record::{Buffered, Resumed};
use crate::run::port::Parent;
use crate::subject::Ack;
use crate::subject::effect::Step;
use crate::subject::reply::{Answer, Applied, AppliedItem, Outcome};
use crate::target::Target;

/// A visit whose contract was evaluated: what the subject checks and applies.
#[derive(Debug)]
pub(crate) struct Planned {
    /// The door, as the visit found it.
    pub(crate) door: Arc<Saved>,
    /// The plan, or every problem the evaluation found.
    pub(crate) plan: Result<Plan, Vec<VisitProblem>>,
    /// The door's target as registered when the visit began, for a start.
    pub(crate) target: Option<Arc<Target>>,
    /// Where the result goes; `None` for a schedule's fire, whose refusal is an event.
    pub(crate) reply: Option<ReplyId>,
}

impl State {
    /// `$parked`, converted once and kept until the set changes.
    pub(crate) fn parked_input(&mut self) -> Input {
        if let Some(p) = &self.parked {
            return p.clone();
        }
        // Each entry is converted once and kept until it changes; the array is rebuilt
        // from the kept conversions, which shares them.
        self.entries.for_each_unkept(|_, parked| {
            if parked.input.is_none() {
                parked.input = Some(Input::from_entry(&parked.entry));
            }
        });
        let input = Input::array(self.entries.values().filter_map(|p| p.input.as_ref()));
        self.parked = Some(input.clone());
        input
    }

    /// Check and apply a planned visit. A plan that cancels an ask of a linked run is
    /// checked as far as the subject alone can, then waits for the supervisor's walk of
    /// those chains, claiming every id it names ([`State::visit_walked`] applies it).
    pub(crate) fn visit(&mut self, planned: Planned, step: &mut Step<'_>) {
        self.visit_with(planned, None, step);
    }

    /// Check and apply a visit that waited for the supervisor's walk, with its chains.
    pub(crate) fn visit_walked(&mut self, planned: Planned, chains: &Chains, step: &mut Step<'_>) {
        self.visit_with(planned, Some(chains), step);
    }

    /// A planned visit, handled for the first time (`chains` is `None`) or with the walk.
    fn visit_with(&mut self, planned: Planned, chains: Option<&Chains>, step: &mut Step<'_>) {
        let Planned {
            door,
            plan,
            target,
            reply,
        } = planned;
        let plan = match plan {
            Ok(plan) => plan,
            Err(problems) => return self.refuse(&door, reply, problems, step),
        };
        let runs = match chains {
            Some(_) => Vec::new(),
            None => self.linked_owners(plan.cancels.iter().map(String::as_str)),
        };
        if runs.is_empty() {
            let none = Chains::new();
            return self.settle(door, plan, target, reply, chains.unwrap_or(&none), step);
        }
        if let Err(problems) = self.check(step, &door, &plan, target.as_deref(), None) {
            return self.refuse(&door, reply, problems, step);
        }
        let claimed = plan
            .cancels
            .iter()
            .cloned()
            .chain(
                plan.resolve
                    .iter()
                    .flatten()
                    .map(|item| item.id().to_owned()),
            )
            .collect();
        let planned = Planned {
            door,
            plan: Ok(plan),
            target,
            reply,
        };
        self.defer(step, Deferred::Visit(planned), claimed, runs, None);
    }

    /// Check the plan with the chains its cancels tear down, then apply it or refuse it
    /// whole.
    fn settle(
        &mut self,
        door: Arc<Saved>,
        plan: Plan,
        target: Option<Arc<Target>>,
        reply: Option<ReplyId>,
        chains: &Chains,
        step: &mut Step<'_>,
    ) {
        match self.check(step, &door, &plan, target.as_deref(), Some(chains)) {
            Err(problems) => self.refuse(&door, reply, problems, step),
            Ok(()) => {
                let applied = self.apply(step, &door, plan, target, chains);
                if let Some(reply) = reply {
                    step.reply(reply, Answer::Visit(Ok(applied)));
                }
            }
        }
    }

    /// Refuse a visit whole: to its visitor, or, for a schedule's fire, as an event.
    fn refuse(
        &self,
        door: &Saved,
        reply: Option<ReplyId>,
        problems: Vec<VisitProblem>,
        step: &mut Step<'_>,
    ) {
        match reply {
            Some(reply) => step.reply(reply, Answer::Visit(Err(problems))),
            None => {
                let error = VisitError::Refused {
                    door: door.name().to_owned(),
                    problems: Problems(problems),
                };
                step.publish(Event::VisitRefused {
                    subject: self.subject(),
                    door: door.name().to_owned(),
                    error: error.to_string(),
                });
            }
        }
    }

    /// Check every id the plan names against the parked set, and the start's target;
    /// with `chains`, also that no resolution names an entry a cancel tears down.
    fn check(
        &self,
        step: &Step<'_>,
        door: &Saved,
        plan: &Plan,
        target: Option<&Target>,
        chains: Option<&Chains>,
    ) -> Result<(), Vec<VisitProblem>> {
        let mut problems: Vec<VisitProblem> = Vec::new();
        if let Err(ps) = self.check_cancel(step, &plan.cancels) {
            problems.extend(ps.into_iter().map(|problem| VisitProblem::Id {
                expr: "cancel_expr".into(),
                problem,
            }));
        }
        let cancelled: HashSet<&str> = plan.cancels.iter().map(String::as_str).collect();
        if let Some(items) = &plan.resolve {
            let mut seen = HashSet::new();
            for item in items {
                let id = item.id();
                let problem = if !seen.insert(id) {
                    Some(IdProblem::Duplicate { id: id.to_owned() })
                } else {
                    match item {
                        Item::Resume { payload, .. } => {
                            self.check_asking(step, id).err().or_else(|| {
                                payload
                                    .get(EXPIRY_MARKER_KEY)
                                    .map(|_| IdProblem::ReservedKey {
                                        id: id.to_owned(),
                                        key: EXPIRY_MARKER_KEY.into(),
                                    })
                            })
                        }
                        Item::Take { .. } => self.check_waiting(step, id).err(),
                    }
                };
                if let Some(problem) = problem {
                    problems.push(VisitProblem::Id {
                        expr: "resume_expr".into(),
                        problem,
                    });
                }
                if cancelled.contains(id) {
                    problems.push(VisitProblem::CancelAndResume { id: id.to_owned() });
                }
                if matches!(item, Item::Take { .. }) && !door.has_receiver() {
                    problems.push(VisitProblem::NoReceiver {
                        door: door.name().to_owned(),
                        id: id.to_owned(),
                    });
                }
            }
            if let Some(chains) = chains.filter(|_| problems.is_empty() && !plan.cancels.is_empty())
            {
                problems.extend(self.torn_by_cancels(plan, items, chains));
            }
        }
        if plan.start.is_some() {
            match target {
                None => problems.push(VisitProblem::UnknownTarget {
                    target: door.spec.target.clone(),
                }),
                Some(target) => {
                    let undeclared: Vec<String> = plan
                        .extras
                        .as_ref()
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.keys()
                                .filter(|k| !target.extras.contains(*k))
                                .cloned()
                                .collect()
                        })
                        .unwrap_or_default();
                    if !undeclared.is_empty() {
                        problems.push(VisitProblem::UndeclaredExtras {
                            target: door.spec.target.clone(),
                            keys: undeclared,
                        });
                    }
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Resolutions that name an entry one of the plan's cancels would tear down.
    fn torn_by_cancels(&self, plan: &Plan, items: &[Item], chains: &Chains) -> Vec<VisitProblem> {
        let mut problems = Vec::new();
        for cancel in &plan.cancels {
            let Some(owner) = self
                .entries
                .get(cancel.as_str())
                .filter(|p| p.outcome.is_none())
                .map(|p| Arc::clone(&p.run))
            else {
                continue;
            };
            let runs: HashSet<Arc<str>> = self.chain_of(&owner, chains).into_iter().collect();
            for item in items {
                let doomed = self
                    .entries
                    .get(item.id())
                    .is_some_and(|p| p.outcome.is_none() && runs.contains(&p.run));
                if doomed {
                    problems.push(VisitProblem::TornDown {
                        id: item.id().to_owned(),
                        by: cancel.clone(),
                    });
                }
            }
        }
        problems
    }

    /// Apply a checked plan.
    fn apply(
        &mut self,
        step: &mut Step<'_>,
        door: &Saved,
        plan: Plan,
        target: Option<Arc<Target>>,
        chains: &Chains,
    ) -> Applied {
        let mut applied = Applied {
            cancelled: plan.cancels.clone(),
            ..Applied::default()
        };
        if !plan.cancels.is_empty() {
            self.cancel(step, plan.cancels, None, chains);
        }
        let receiver = door.has_receiver();
        if let Some(items) = plan.resolve {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Item::Resume { id, payload } => {
                        let outcome = receiver.then(|| step.reply_id());
                        match self.resume(step, &id, payload, outcome, None) {
                            Ok((ack, run)) => {
                                self.activate_prepared(step, run);
                                // A `sync` ask's answer resumes no run: nothing to await.
                                let outcome =
                                    outcome.filter(|id| ack == Ack::Started && step.holds(*id));
                                out.push(AppliedItem::Resumed { id, ack, outcome });
                            }
                            // Checked above; a refusal here would be a bug, reported as
                            // a failed take rather than lost.
                            Err(problem) => out.push(AppliedItem::Taken {
                                id,
                                result: Err(problem.to_string()),
                            }),
                        }
                    }
                    Item::Take { id } => {
                        let result = self
                            .take(step, &id, None)
                            .unwrap_or_else(|problem| Err(problem.to_string()));
                        out.push(AppliedItem::Taken { id, result });
                    }
                }
            }
            applied.resolved = Some(out);
        } else if let (Some(kwargs), Some(target)) = (plan.start, target) {
            let outcome = receiver.then(|| step.reply_id());
            let extras = plan
                .extras
                .unwrap_or_else(|| Value::Object(Default::default()));
            let run = self.start(
                step,
                target,
                kwargs,
                extras,
                Arc::from(format!("door:{}", door.name())),
                Parent::Top,
                outcome,
            );
            applied.started = Some((run, outcome));
        }
        applied
    }
}

impl Applied<Outcome> {
    /// The visit's outcome: each resumed run's next outcome and the started run's first
    /// record, awaited from their receivers.
    pub(crate) async fn outcome(self) -> Result<Visit, VisitError> {
        let outcome = if let Some(items) = self.resolved {
            let mut results = Vec::with_capacity(items.len());
            for item in items {
                results.push(match item {
                    AppliedItem::Resumed { id, ack, outcome } => {
                        let outcome = match (ack, outcome) {
                            (Ack::Buffered { remaining }, _) => Some(Resumed::Buffered {
                                status: Buffered::Buffered,
                                remaining,
                            }),
                            (_, Some(rx)) => {
                                Some(Resumed::Outcome(rx.await.map_err(|_| VisitError::Stopped)?))
                            }
                            (_, None) => None,
                        };
                        ItemOutcome::Resumed { id, outcome }
                    }
                    AppliedItem::Taken { id, result } => match result {
                        Ok(result) => ItemOutcome::Taken { id, result },
                        Err(error) => ItemOutcome::TakeFailed { id, error },
                    },
                });
            }
            VisitOutcome::Resolved { results }
        } else if let Some((run, rx)) = self.started {
            let record = match rx {
                Some(rx) => Some(rx.await.map_err(|_| VisitError::Stopped)?),
                None => None,
            };
            VisitOutcome::Started {
                run_id: run.to_string(),
                record,
            }
        } else {
            VisitOutcome::Nothing
        };
        Ok(Visit {
            cancelled: self.cancelled,
            outcome,
        })
    }
}
