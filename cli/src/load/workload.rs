//! The runtime a load run visits: the `asker` target, the `work` and `sweep` doors, and
//! the visit inputs.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use super::config::{LoadConfig, LoadError, Mix};
use parkway::{Ask, DoorSpec, ManualClock, OnExpiry, Runtime};

/// The target every visit starts.
pub(crate) const TARGET: &str = "asker";
/// The door with `resume_expr` + `start_expr`.
pub(crate) const WORK: &str = "work";
/// The door with only a `cancel_expr`.
pub(crate) const SWEEP: &str = "sweep";

/// How long an ask that is not meant to expire during the run waits.
const LONG_TTL: &str = "1h";

/// A kind of visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// Start an asker.
    Start,
    /// Resume the oldest asking entry.
    Resume,
    /// Take the oldest waiting outcome.
    Take,
    /// Cancel the oldest asking entry.
    Cancel,
}

impl Op {
    /// Every kind, in report order.
    pub(crate) const ALL: [Op; 4] = [Op::Start, Op::Resume, Op::Take, Op::Cancel];

    /// The name used in inputs and reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Resume => "resume",
            Op::Take => "take",
            Op::Cancel => "cancel",
        }
    }

    /// The door a visit of this kind goes through.
    pub(crate) fn door(self) -> &'static str {
        match self {
            Op::Cancel => SWEEP,
            _ => WORK,
        }
    }

    /// Index into per-kind counters.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// `resume_expr` of `work`: a resume or a take of the oldest fitting entry, or nothing.
const RESUME_EXPR: &str = r#"if .op == "resume" then
  (first($parked[] | select(.status == "asking")) | {id: .id, payload: "yes"}) // null
elif .op == "take" then
  (first($parked[] | select(.status == "finished" or .status == "failed")) | .id) // null
else null end"#;

/// `cancel_expr` of `sweep`.
const CANCEL_EXPR: &str = r#"(first($parked[] | select(.status == "asking")) | .id) // null"#;

/// `start_expr` of `work`, refusing to start past `max_entries`.
fn start_expr(max_entries: usize) -> String {
    format!(
        r#"if .op == "start" and ($parked | length) < {max_entries} then {{ttl: .ttl, on_expiry: .on_expiry}} else null end"#
    )
}

/// A runtime on `clock` with the target and both doors, caps raised out of the way.
pub(crate) async fn build(config: &LoadConfig, clock: ManualClock) -> Result<Runtime, LoadError> {
    let mut builder = Runtime::builder()
        .without_env()
        .clock(clock)
        .max_concurrent_caller(usize::MAX)
        .max_concurrent(usize::MAX)
        .waiting_retention(config.retention)
        .passivate_after(config.passivate_after)
        .event_capacity(1 << 16);
    if let Some(dir) = &config.data {
        builder = builder.data_dir(dir);
    }
    let rt = builder.build().await?;
    rt.register(TARGET, &[], |ctx, kwargs, _| async move {
        let ttl = kwargs["ttl"].as_str().unwrap_or(LONG_TTL).to_owned();
        let on_expiry = if kwargs["on_expiry"] == "resume" {
            OnExpiry::Resume
        } else {
            OnExpiry::Kill
        };
        let ask = Ask::caller("proceed?").expiry_at(ttl).on_expiry(on_expiry);
        let answer = ctx.ask(ask).await?;
        Ok(json!({ "answer": answer }))
    });
    rt.save_door(
        DoorSpec::route(WORK, TARGET)
            .resume_expr(RESUME_EXPR)
            .start_expr(&start_expr(config.max_entries)),
    )?;
    rt.save_door(
        DoorSpec::route(SWEEP, TARGET)
            .cancel_expr(CANCEL_EXPR)
            .start_expr("null"),
    )?;
    Ok(rt)
}

/// The input of a start that waits an hour: what the prefill starts.
pub(crate) fn long_start() -> Value {
    json!({"op": "start", "ttl": LONG_TTL, "on_expiry": "kill"})
}

/// One visitor's stream of visits: seeded, so the bare baseline can replay it.
pub(crate) struct Visits {
    rng: SmallRng,
    mix: Mix,
    subjects: usize,
    short_share: f64,
    resume_share: f64,
    /// The inputs, built once and cloned per visit.
    inputs: Inputs,
}

/// Every input a visit can carry.
struct Inputs {
    long: Value,
    short_kill: Value,
    short_resume: Value,
    resume: Value,
    take: Value,
    cancel: Value,
}

impl Visits {
    /// Visitor `index`'s stream under `config`.
    pub(crate) fn new(config: &LoadConfig, index: usize) -> Self {
        let ttl = humantime::format_duration(config.short_ttl).to_string();
        let short = |on_expiry: &str| json!({"op": "start", "ttl": ttl, "on_expiry": on_expiry});
        Self {
            rng: SmallRng::seed_from_u64(
                config
                    .seed
                    .wrapping_mul(1_000_003)
                    .wrapping_add(index as u64),
            ),
            mix: config.mix,
            subjects: config.subjects,
            short_share: config.short_share,
            resume_share: config.resume_share,
            inputs: Inputs {
                long: long_start(),
                short_kill: short("kill"),
                short_resume: short("resume"),
                resume: json!({"op": "resume"}),
                take: json!({"op": "take"}),
                cancel: json!({"op": "cancel"}),
            },
        }
    }

    /// The next visit: its kind, the subject's index, and the input.
    pub(crate) fn next_visit(&mut self) -> (Op, usize, Value) {
        let Mix {
            start,
            resume,
            take,
            ..
        } = self.mix;
        let pick = self.rng.random_range(0..self.mix.total());
        let (start, resume, take) = (u64::from(start), u64::from(resume), u64::from(take));
        let op = if pick < start {
            Op::Start
        } else if pick < start + resume {
            Op::Resume
        } else if pick < start + resume + take {
            Op::Take
        } else {
            Op::Cancel
        };
        let subject = self.rng.random_range(0..self.subjects);
        let input = match op {
            Op::Start if self.rng.random_bool(self.short_share) => {
                if self.rng.random_bool(self.resume_share) {
                    self.inputs.short_resume.clone()
                } else {
                    self.inputs.short_kill.clone()
                }
            }
            Op::Start => self.inputs.long.clone(),
            Op::Resume => self.inputs.resume.clone(),
            Op::Take => self.inputs.take.clone(),
            Op::Cancel => self.inputs.cancel.clone(),
        };
        (op, subject, input)
    }
}

/// The name of subject `index`.
pub(crate) fn subject_name(index: usize) -> String {
    format!("s{index}")
}
