//! The interpreter of scripted targets: each [`Script`] becomes a registered target.
//!
//! An activation runs the script from the top with `kwargs`, `extras` and `run` bound
//! (`run` is `{"id", "subject", "target"}`); a resume replays it, so each answered ask
//! returns its recorded answer and each journaled `step` its recorded value. A fresh
//! execution of a `step` leaves a note in the transcript, which is how a scenario shows
//! that a replay does not repeat side effects.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::scenario::{AskSpec, Op, Script, Scripts};
use super::template::{Bindings, resolve};
use crate::ask::{Ask, Mode, OnExpiry};
use crate::error::{CtxError, RunError, TakeError};
use crate::run::Ctx;
use crate::runtime::Builder;

/// Lines the scripted targets leave for the transcript, in the order they happen; or,
/// outside a simulation, for the log. Clones share their lines.
#[derive(Debug, Clone, Default)]
pub struct Notes {
    lines: Arc<Mutex<Vec<String>>>,
    /// Log each line instead of keeping it.
    logged: bool,
}

impl Notes {
    /// Notes that are logged, not kept.
    pub(crate) fn logged() -> Notes {
        Notes {
            lines: Arc::default(),
            logged: true,
        }
    }

    /// Add a line.
    pub(crate) fn push(&self, line: String) {
        if self.logged {
            tracing::info!(target: "parkway::script", "{line}");
        } else if let Ok(mut lines) = self.lines.lock() {
            lines.push(line);
        }
    }

    /// Every line since the last call.
    pub fn drain(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|mut l| std::mem::take(&mut *l))
            .unwrap_or_default()
    }
}

/// Calls the tools of other MCP servers for the `mcp_call` steps of scripted targets.
/// The MCP face (`parkway_mcp::Remote`) is one; the runtime itself speaks no MCP.
pub trait RemoteTools: Send + Sync + 'static {
    /// Call `tool` of `server` with `arguments` for the run of `ctx`: its result, or the
    /// run's error (a suspension when the server asked a question the run relayed to
    /// its own caller).
    fn call<'a>(
        &'a self,
        ctx: &'a Ctx,
        server: &'a str,
        tool: &'a str,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = Result<Value, RunError>> + Send + 'a>>;
}

/// `builder` with `script` registered as the target `name` (before the build, so runs
/// read back from a data directory find it).
pub(crate) fn register(
    builder: Builder,
    name: &str,
    script: &Script,
    notes: &Notes,
    remote: Option<Arc<dyn RemoteTools>>,
) -> Builder {
    let extras: Vec<&str> = script.extras.iter().map(String::as_str).collect();
    let steps = Arc::new(script.steps.clone());
    let notes = notes.clone();
    builder.register(name, &extras, move |ctx, kwargs, extras| {
        let steps = Arc::clone(&steps);
        let notes = notes.clone();
        let remote = remote.clone();
        async move {
            let env = Env { notes, remote };
            let mut bindings = Bindings::new();
            bindings.insert(
                "run".to_owned(),
                json!({"id": ctx.run_id(), "subject": ctx.subject(), "target": ctx.target()}),
            );
            bindings.insert("kwargs".to_owned(), kwargs);
            bindings.insert("extras".to_owned(), extras);
            match block(&ctx, &steps, &mut bindings, &env).await? {
                Flow::Return(value) => Ok(value),
                Flow::Next => Ok(Value::Null),
            }
        }
    })
}

/// What a script's steps reach beyond the run: where notes go, and the caller of other
/// servers' tools.
struct Env {
    notes: Notes,
    remote: Option<Arc<dyn RemoteTools>>,
}

/// Whether a block returned.
enum Flow {
    Next,
    Return(Value),
}

type BlockFuture<'a> = Pin<Box<dyn Future<Output = Result<Flow, RunError>> + Send + 'a>>;

fn block<'a>(
    ctx: &'a Ctx,
    steps: &'a [Op],
    bindings: &'a mut Bindings,
    env: &'a Env,
) -> BlockFuture<'a> {
    Box::pin(async move {
        for op in steps {
            if let Flow::Return(value) = one(ctx, op, bindings, env).await? {
                return Ok(Flow::Return(value));
            }
        }
        Ok(Flow::Next)
    })
}

fn set(bindings: &mut Bindings, bind: &Option<String>, value: Value) {
    if let Some(name) = bind {
        bindings.insert(name.clone(), value);
    }
}

fn fill(value: &Value, bindings: &Bindings) -> Result<Value, RunError> {
    resolve(value, bindings).map_err(RunError::Failed)
}

fn error_value(message: impl std::fmt::Display) -> Value {
    json!({ "error": message.to_string() })
}

async fn one(ctx: &Ctx, op: &Op, bindings: &mut Bindings, env: &Env) -> Result<Flow, RunError> {
    let notes = &env.notes;
    match op {
        Op::Ask { asks, all, bind } => {
            let mut results = Vec::with_capacity(asks.len());
            for spec in asks {
                let ask = build_ask(spec, bindings)?;
                results.push(ctx.ask(ask).await);
            }
            // Every ask is raised before any outcome is propagated, so they form a group.
            let mut answers = Vec::with_capacity(results.len());
            for result in results {
                answers.push(result?);
            }
            let value = if *all {
                Value::Array(answers)
            } else {
                answers.pop().unwrap_or(Value::Null)
            };
            set(bindings, bind, value);
        }
        Op::Call {
            target,
            kwargs,
            bind,
        } => {
            let kwargs = fill(kwargs, bindings)?;
            let record = ctx.call(target, kwargs).await?;
            set(bindings, bind, serde_json::to_value(record)?);
        }
        Op::McpCall {
            server,
            tool,
            arguments,
            bind,
        } => {
            let arguments = fill(arguments, bindings)?;
            let Some(remote) = &env.remote else {
                return Err(RunError::fail(format!(
                    "mcp_call of {tool} on {server}: this runtime has no MCP client (register the scripts with one)"
                )));
            };
            let value = remote.call(ctx, server, tool, arguments).await?;
            set(bindings, bind, value);
        }
        Op::Step { name, value, bind } => {
            let value = fill(value, bindings)?;
            let line = format!("run {} ran step {name:?}", ctx.run_id());
            let value: Value = ctx
                .step(name, || async move {
                    notes.push(line);
                    Ok::<_, String>(value)
                })
                .await?;
            set(bindings, bind, value);
        }
        Op::Return(value) => return Ok(Flow::Return(fill(value, bindings)?)),
        Op::Fail(message) => {
            let message = match fill(message, bindings)? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            return Err(RunError::Failed(message));
        }
        Op::ListParked { bind } => {
            let entries = ctx.list_parked().await?;
            set(bindings, bind, serde_json::to_value(entries)?);
        }
        Op::ResumeParked { id, payload, bind } => {
            let id = id_text(&fill(id, bindings)?)?;
            let value = match payload {
                Some(payload) => {
                    let payload = fill(payload, bindings)?;
                    match ctx.resume_parked(&id, payload).await {
                        Ok(resumed) => serde_json::to_value(resumed)?,
                        Err(CtxError::Resolution(e)) => error_value(e),
                        Err(e) => return Err(e.into()),
                    }
                }
                None => match ctx.take_parked(&id).await {
                    Ok(result) => result,
                    // Taking a failed outcome raises: the taker fails as the run did.
                    Err(CtxError::Resolution(TakeError::Failed { error, .. })) => {
                        return Err(RunError::Failed(error));
                    }
                    Err(CtxError::Resolution(e)) => error_value(e),
                    Err(e) => return Err(e.into()),
                },
            };
            set(bindings, bind, value);
        }
        Op::CancelParked { ids, bind } => {
            let ids = match fill(ids, bindings)? {
                Value::Array(items) => items.iter().map(id_text).collect::<Result<Vec<_>, _>>()?,
                one => vec![id_text(&one)?],
            };
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            let value = match ctx.cancel_parked(&refs).await {
                Ok(()) => Value::Null,
                Err(CtxError::Resolution(e)) => error_value(e),
                Err(e) => return Err(e.into()),
            };
            set(bindings, bind, value);
        }
        Op::Wait(value) => {
            let d = match fill(value, bindings)? {
                Value::String(text) => {
                    super::scenario::duration(&text).map_err(RunError::Failed)?
                }
                Value::Number(n) => n
                    .as_f64()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .and_then(|s| std::time::Duration::try_from_secs_f64(s).ok())
                    .ok_or_else(|| {
                        RunError::Failed(format!("wait {n}: not a number of seconds"))
                    })?,
                other => {
                    return Err(RunError::Failed(format!(
                        "wait {other}: expected a duration such as \"2s\" or a number of seconds"
                    )));
                }
            };
            ctx.wait(d).await?;
        }
        Op::Progress {
            progress,
            total,
            message,
        } => {
            let number = |what: &str, v: Value| {
                v.as_f64()
                    .ok_or_else(|| RunError::Failed(format!("progress {what} {v}: not a number")))
            };
            let progress = number("progress", fill(progress, bindings)?)?;
            let total = match total {
                Some(t) => Some(number("total", fill(t, bindings)?)?),
                None => None,
            };
            let message = match message {
                Some(m) => match fill(m, bindings)? {
                    Value::String(s) => Some(s),
                    other => Some(other.to_string()),
                },
                None => None,
            };
            ctx.progress(progress, total, message.as_deref());
        }
        Op::If {
            value,
            equals,
            then,
            otherwise,
        } => {
            let value = fill(value, bindings)?;
            let holds = match equals {
                Some(expected) => value == fill(expected, bindings)?,
                None => !matches!(value, Value::Null | Value::Bool(false)),
            };
            let branch = if holds { then } else { otherwise };
            return block(ctx, branch, bindings, env).await;
        }
    }
    Ok(Flow::Next)
}

fn id_text(value: &Value) -> Result<String, RunError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        other => Err(RunError::Failed(format!(
            "an interaction id must be a string, not {other}"
        ))),
    }
}

fn build_ask(spec: &AskSpec, bindings: &Bindings) -> Result<Ask, RunError> {
    let question = match &spec.question {
        None => None,
        Some(q) => match fill(q, bindings)? {
            Value::String(s) => Some(s),
            Value::Null => None,
            other => Some(other.to_string()),
        },
    };
    let payload = match &spec.payload {
        None => None,
        Some(p) => Some(fill(p, bindings)?),
    };
    let mut ask = match (spec.to.as_str(), question) {
        ("caller", Some(q)) => Ask::caller(q),
        ("caller", None) => Ask::caller_payload(payload.clone().unwrap_or(Value::Null)),
        ("user", q) => Ask::user(q.unwrap_or_default()),
        (other, _) => {
            return Err(RunError::Failed(format!(
                "ask to {other:?}: expected caller or user"
            )));
        }
    };
    if let Some(payload) = payload {
        ask = ask.payload(payload);
    }
    if let Some(format) = &spec.answer_format {
        ask = ask.answer_format(format.clone());
    }
    match spec.mode.as_deref() {
        None | Some("async") => {}
        Some("sync") => ask = ask.mode(Mode::Sync),
        Some(other) => {
            return Err(RunError::Failed(format!(
                "ask mode {other:?}: expected async or sync"
            )));
        }
    }
    if let Some(expiry) = &spec.expiry_at {
        ask = ask.expiry_at(expiry.clone());
    }
    match spec.on_expiry.as_deref() {
        None => {}
        Some("kill") => ask = ask.on_expiry(OnExpiry::Kill),
        Some("resume") => ask = ask.on_expiry(OnExpiry::Resume),
        Some(other) => {
            return Err(RunError::Failed(format!(
                "on_expiry {other:?}: expected kill or resume"
            )));
        }
    }
    if let Some(options) = &spec.options {
        ask = ask.options(options.clone());
    }
    if let Some(schema) = &spec.schema {
        ask = ask.schema(schema.clone());
    }
    if let Some(timeout) = &spec.timeout {
        let d = super::scenario::duration(timeout).map_err(RunError::Failed)?;
        ask = ask.timeout(d);
    }
    Ok(ask)
}

/// Registering a targets file's scripts: the script language's own work, done here so
/// the file format knows nothing of how a script runs.
impl Scripts {
    /// `builder` with every scripted target registered. What a script's steps note is
    /// logged (`tracing`, target `parkway::script`). An `mcp_call` step fails its run:
    /// register with [`Scripts::register_with`] to give it a caller.
    pub fn register(&self, builder: crate::Builder) -> crate::Builder {
        self.register_with(builder, None)
    }

    /// [`Scripts::register`], with `remote` calling the tools of other servers for the
    /// scripts' `mcp_call` steps (the MCP face's `parkway_mcp::Remote`).
    pub fn register_with(
        &self,
        mut builder: crate::Builder,
        remote: Option<std::sync::Arc<dyn RemoteTools>>,
    ) -> crate::Builder {
        let notes = Notes::logged();
        for (name, script) in &self.targets {
            builder = register(builder, name, script, &notes, remote.clone());
            if let Some(tool) = &script.tool {
                builder = builder.tool(name, tool.clone());
            }
        }
        builder
    }
}
