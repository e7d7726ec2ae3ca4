//! A door visit at the subject: evaluate the contract over one snapshot of `$parked`,
//! check every shape and every named id against the parked set, and only then apply —
//! cancels first, then the resolutions, else the start — all within one message.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::SecondsFormat;
use serde_json::Value;
use tokio::sync::oneshot;

use super::SubjectState;
use crate::door::plan::{Item, Plan, VisitProblem};
use crate::door::saved::Saved;
use crate::error::IdProblem;
use crate::jq::{Input, Limits};
use crate::record::RunRecord;
use crate::run::ctx::EXPIRY_MARKER_KEY;
use crate::shared::{Parent, Shared};
use crate::subject::Ack;
use crate::supervisor::SupervisorMsg;

/// One resolution as applied; the visitor awaits its receiver, if any.
#[derive(Debug)]
pub(crate) enum AppliedItem {
    /// A resume.
    Resumed {
        /// The interaction.
        id: String,
        /// Started or buffered.
        ack: Ack,
        /// The run's next outcome, when the visit has a receiver and the run resumes.
        outcome: Option<oneshot::Receiver<RunRecord>>,
    },
    /// A take.
    Taken {
        /// The interaction.
        id: String,
        /// The result or the raised error.
        result: Result<Value, String>,
    },
}

/// What a visit applied.
#[derive(Debug, Default)]
pub(crate) struct Applied {
    /// Cancelled interactions.
    pub(crate) cancelled: Vec<String>,
    /// The resolutions, when `resume_expr` yielded non-null.
    pub(crate) resolved: Option<Vec<AppliedItem>>,
    /// The started run and, with a receiver, its first record.
    pub(crate) started: Option<(Arc<str>, Option<oneshot::Receiver<RunRecord>>)>,
}

impl SubjectState {
    /// `$parked`, converted once and kept until the set changes.
    fn parked_input(&mut self) -> Input {
        if let Some(p) = &self.parked {
            return p.clone();
        }
        // Each entry is converted once and kept until it changes; the array is rebuilt
        // from the kept conversions, which shares them.
        for parked in self.entries.values_mut() {
            if parked.input.is_none() {
                parked.input = Some(Input::from_entry(&parked.entry));
            }
        }
        let input = Input::array(self.entries.values().filter_map(|p| p.input.as_ref()));
        self.parked = Some(input.clone());
        input
    }

    /// Visit `door` with `input`.
    pub(crate) async fn visit(
        &mut self,
        shared: &Arc<Shared>,
        door: &Saved,
        input: Value,
    ) -> Result<Applied, Vec<VisitProblem>> {
        let now = shared.clock.now();
        let vars = [
            self.parked_input(),
            Input::string(&self.name),
            Input::string(door.name()),
            Input::string(&now.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
        ];
        let limits = Limits {
            deadline: shared.settings.jq_deadline,
            max_input_bytes: shared.settings.max_input_bytes,
        };
        let input = Input::from_json(&input);
        let evaluated = door
            .contract
            .evaluate(&input, &vars, &limits, &door.spec.kwargs)
            .await;
        if evaluated.deadline_hit {
            door.break_door();
        }
        let plan = evaluated.plan?;
        self.check(shared, door, &plan).await?;
        Ok(self.apply(shared, door, plan).await)
    }

    /// Check every id the plan names against the parked set, and the start's target.
    async fn check(
        &self,
        shared: &Arc<Shared>,
        door: &Saved,
        plan: &Plan,
    ) -> Result<(), Vec<VisitProblem>> {
        let mut problems: Vec<VisitProblem> = Vec::new();
        if let Err(ps) = self.check_cancel(shared, &plan.cancels) {
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
                            self.check_asking(shared, id).err().or_else(|| {
                                payload
                                    .get(EXPIRY_MARKER_KEY)
                                    .map(|_| IdProblem::ReservedKey {
                                        id: id.to_owned(),
                                        key: EXPIRY_MARKER_KEY.into(),
                                    })
                            })
                        }
                        Item::Take { .. } => self.check_waiting(shared, id).err(),
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
            if problems.is_empty() && !plan.cancels.is_empty() {
                problems.extend(self.torn_by_cancels(shared, plan, items).await);
            }
        }
        if plan.start.is_some() {
            match shared.targets.get(&door.spec.target) {
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
    async fn torn_by_cancels(
        &self,
        shared: &Arc<Shared>,
        plan: &Plan,
        items: &[Item],
    ) -> Vec<VisitProblem> {
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
            let runs: HashSet<Arc<str>> = if self.is_linked(&owner) {
                let (reply, rx) = oneshot::channel();
                let _ = shared
                    .supervisor
                    .cast(SupervisorMsg::Chain { run: owner, reply });
                rx.await.unwrap_or_default().into_iter().collect()
            } else {
                HashSet::from([owner])
            };
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
    async fn apply(&mut self, shared: &Arc<Shared>, door: &Saved, plan: Plan) -> Applied {
        let mut applied = Applied {
            cancelled: plan.cancels.clone(),
            ..Applied::default()
        };
        if !plan.cancels.is_empty() {
            self.cancel(shared, plan.cancels, None).await;
        }
        let receiver = door.has_receiver();
        if let Some(items) = plan.resolve {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Item::Resume { id, payload } => {
                        let (tx, rx) = receiver.then(oneshot::channel).unzip();
                        match self.resume(shared, &id, payload, tx, None) {
                            Ok((ack, run)) => {
                                self.activate_prepared(shared, run);
                                let outcome = rx.filter(|_| ack == Ack::Started);
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
                            .take(shared, &id, None)
                            .unwrap_or_else(|problem| Err(problem.to_string()));
                        out.push(AppliedItem::Taken { id, result });
                    }
                }
            }
            applied.resolved = Some(out);
        } else if let (Some(kwargs), Some(target)) =
            (plan.start, shared.targets.get(&door.spec.target))
        {
            let (tx, rx) = receiver.then(oneshot::channel).unzip();
            let extras = plan
                .extras
                .unwrap_or_else(|| Value::Object(Default::default()));
            let run = self.start(
                shared,
                target,
                kwargs,
                extras,
                Arc::from(format!("door:{}", door.name())),
                Parent::Top,
                tx,
            );
            applied.started = Some((run, rx));
        }
        applied
    }
}
