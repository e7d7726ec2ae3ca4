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
/// With `stages`, the durable path's stages are told to it.
pub(crate) async fn build(
    config: &LoadConfig,
    clock: ManualClock,
    stages: Option<std::sync::Arc<super::stages::Stages>>,
) -> Result<Runtime, LoadError> {
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
    if let Some(url) = &config.postgres {
        refuse_a_used_database(url).await?;
        builder = builder.postgres(url);
    }
    if let Some(n) = config.max_live_subjects {
        builder = builder.max_live_subjects(n);
    }
    if let Some(stages) = stages {
        builder = builder.measure_stages(stages);
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
    for door in doors(config.max_entries) {
        rt.save_door(door)?;
    }
    Ok(rt)
}

/// The two doors, `work` and `sweep`, for `max_entries`: what [`build`] saves, and what
/// `examples/serve/load-targets.json` holds for a server (with 10).
pub(crate) fn doors(max_entries: usize) -> [DoorSpec; 2] {
    [
        DoorSpec::route(WORK, TARGET)
            .resume_expr(RESUME_EXPR)
            .start_expr(&start_expr(max_entries)),
        DoorSpec::route(SWEEP, TARGET)
            .cancel_expr(CANCEL_EXPR)
            .start_expr("null"),
    ]
}

/// How a started ask ends if no visitor resolves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// It waits an hour: longer than any run, so it never expires during one.
    Long,
    /// It expires during the run, killing its run.
    ShortKill,
    /// It expires during the run, resuming its run, whose outcome then waits.
    ShortResume,
}

impl Expiry {
    /// The expiry a start's input asks for (the target reads it as its kwargs).
    pub(crate) fn of(input: &Value) -> Expiry {
        if input["ttl"].as_str().is_none_or(|ttl| ttl == LONG_TTL) {
            Expiry::Long
        } else if input["on_expiry"] == "resume" {
            Expiry::ShortResume
        } else {
            Expiry::ShortKill
        }
    }

    /// Index into per-expiry counters.
    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// The input of a start that waits an hour: what the prefill starts.
pub(crate) fn long_start() -> Value {
    start_input(LONG_TTL, "kill")
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
        let short = |on_expiry: &str| start_input(&ttl, on_expiry);
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

/// The input of a start of an ask that expires after `ttl`, as the visitors send it.
pub(crate) fn start_input(ttl: &str, on_expiry: &str) -> Value {
    json!({"op": "start", "ttl": ttl, "on_expiry": on_expiry})
}

/// Refuses a database whose schema holds a parkway store with anything in it beyond its
/// format version: the load's account starts from nothing.
async fn refuse_a_used_database(url: &str) -> Result<(), LoadError> {
    let unusable = |why: String| LoadError::Invalid(format!("--postgres: {why}"));
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| unusable(format!("cannot connect: {e}")))?;
    let connection = tokio::spawn(connection);
    let has_table: bool = client
        .query_one("SELECT to_regclass('parkway_kv') IS NOT NULL", &[])
        .await
        .map_err(|e| unusable(e.to_string()))?
        .get(0);
    let rows: i64 = if has_table {
        client
            .query_one("SELECT count(*) FROM parkway_kv WHERE space <> 0", &[])
            .await
            .map_err(|e| unusable(e.to_string()))?
            .get(0)
    } else {
        0
    };
    drop(client);
    let _ = connection.await;
    if rows > 0 {
        return Err(unusable(format!(
            "its schema holds a parkway store with {rows} rows already: the load needs an empty one"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The targets file a server serves the load with holds the load's doors (for the
    /// default `--max-entries`, 10), and a target of the same name.
    #[test]
    fn the_serve_targets_file_holds_the_load_s_doors() {
        let text = include_str!("../../../examples/serve/load-targets.json");
        let scripts = parkway::sim::Scripts::from_json(text).expect("the file parses");
        assert_eq!(scripts.doors, doors(LoadConfig::default().max_entries));
        assert!(scripts.targets.contains_key(TARGET));
    }

    /// Every input a visitor sends is one the targets file has a branch for.
    #[test]
    fn the_serve_targets_file_knows_the_default_expiries() {
        let text = include_str!("../../../examples/serve/load-targets.json");
        let config = LoadConfig::default();
        let short = humantime::format_duration(config.short_ttl).to_string();
        for (ttl, on_expiry) in [(LONG_TTL, "kill"), (&short, "kill"), (&short, "resume")] {
            let branch = format!(r#""equals": "{ttl} {on_expiry}""#);
            assert!(text.contains(&branch), "no branch for {ttl} {on_expiry}");
        }
    }

    #[test]
    fn an_input_s_expiry_is_read_as_the_target_reads_it() {
        assert_eq!(Expiry::of(&long_start()), Expiry::Long);
        assert_eq!(Expiry::of(&start_input("1s", "kill")), Expiry::ShortKill);
        assert_eq!(
            Expiry::of(&start_input("1s", "resume")),
            Expiry::ShortResume
        );
        assert_eq!(Expiry::of(&json!({"op": "start"})), Expiry::Long);
    }
}
