//! Compiled door expressions.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::{Duration, Instant};

use jaq_core::load::parse::Def;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Filter, Vars};
use jaq_json::Val;

use super::budget::{HALT_CODE, LIMIT_CODE};
use super::check::Check;
use super::deadline::{Deadline, Door, Env, deadline_after};
use super::error::{CompileError, CompileErrors, EvalError};
use super::input::Input;
use super::library::{self, Library};
use super::limits::Limits;
use super::outputs::{self, Outputs, Unconvertible};
use super::pool::{self, Failure, Pool};
use super::rewrite;
use super::shallow;

/// How long a batch of shallow programs may run in place before it is handed to the pool
/// instead (see [`Program::run_batch`]).
pub(super) const IN_PLACE_BUDGET: Duration = Duration::from_millis(1);

/// The longest error message kept from an evaluation: the value an error names is printed
/// only this far, however large it is.
const MAX_ERROR_BYTES: usize = 1 << 10;

/// The variables of a door's expressions, in the order their values are passed to
/// [`Program::run_batch`].
pub(super) const DOOR_VARS: &[&str] = &["parked", "subject", "door", "now"];

/// The longest source a door expression may have. Parsing and compiling recurse on nesting,
/// so this also bounds the stack they need.
pub(super) const MAX_SOURCE_BYTES: usize = 8 << 10;

/// The name under which the expression is handed to jaq: the last definition of the prelude.
/// A door expression cannot call it: the checks resolve names without it.
const ENTRY: &str = "door_expression";

/// A compiled door expression.
///
/// Cheap to clone (the compiled program is shared) and safe to use from many threads at once.
#[derive(Clone)]
pub(crate) struct Program {
    compiled: Arc<Compiled>,
}

struct Compiled {
    name: String,
    filter: Filter<Door>,
    /// How many variables the expression was compiled with.
    vars: usize,
    /// Whether the program is shallow, so its ticks alone bound it (see `shallow`).
    shallow: bool,
}

impl Program {
    /// Compile `source` (the expression called `name`, e.g. "resume_expr") with the door
    /// variables `$parked`, `$subject`, `$door`, `$now` declared, in that order.
    ///
    /// Reports every problem found, not only the first.
    pub(crate) fn compile(name: &str, source: &str) -> Result<Program, CompileErrors> {
        Program::compile_with(name, source, DOOR_VARS)
    }

    /// Like [`Program::compile`], but with the given variable names (without `$`) declared
    /// instead of the door's four; used for a hook's `condition` and `subject_expr`.
    pub(crate) fn compile_with(
        name: &str,
        source: &str,
        vars: &[&str],
    ) -> Result<Program, CompileErrors> {
        if source.len() > MAX_SOURCE_BYTES {
            let (expr, len, max) = (name.to_owned(), source.len(), MAX_SOURCE_BYTES);
            return Err(CompileErrors(vec![CompileError::TooLong {
                expr,
                len,
                max,
            }]));
        }
        // Parsing, checking and compiling recurse on the program's nesting; a thread with a
        // large stack keeps a deeply nested source from overflowing the caller's.
        let job = || compile(name, source, vars);
        let result = thread::scope(|scope| {
            let spawned = thread::Builder::new()
                .name("door-expr-compile".to_owned())
                .stack_size(pool::STACK_BYTES)
                .spawn_scoped(scope, job);
            match spawned {
                // A panic in jaq's parser or compiler becomes an error.
                Ok(handle) => handle.join().ok(),
                // No thread to be had: compile here; the limit on the source still applies.
                Err(_) => Some(job()),
            }
        });
        let compiled = result.unwrap_or_else(|| {
            let message = "the compiler failed".to_owned();
            Err(vec![CompileError::Internal {
                expr: name.to_owned(),
                message,
            }])
        });
        match compiled {
            Ok(compiled) => Ok(Program {
                compiled: Arc::new(compiled),
            }),
            Err(errors) => Err(CompileErrors(errors)),
        }
    }

    /// Evaluate several programs over the same `input` with `vars` (values in the declared
    /// order): in place when every one is shallow and they finish within
    /// [`IN_PLACE_BUDGET`], else in one hand-off to the pool, so a door visit's expressions
    /// cost at most one thread hand-off, not one each. This is the one way in to an
    /// evaluation (a single program is a batch of one); [`Program::run_inline`] only serves
    /// as a baseline.
    ///
    /// Each program yields its first output and whether there was a second; its evaluation
    /// stops after the second. An error raised before then is reported instead, even after
    /// a first output.
    ///
    /// The batch shares one deadline, `limits.deadline` from the call. An in-place attempt
    /// that runs out of its budget is dropped and the batch evaluated again on the pool
    /// (door expressions are pure, so nothing was done twice), with the whole limit counted
    /// from when a pool thread starts it: time spent waiting for a thread on a loaded
    /// machine is not the expressions' fault, and passing the deadline breaks their door.
    /// Each program's result is reported at its place; when the pool gives up on the batch
    /// as a whole, every program is reported as past the deadline. The calling thread is
    /// free while the pool evaluates (see the `pool` module).
    pub(crate) async fn run_batch(
        programs: &[&Program],
        input: &Input,
        vars: &[Input],
        limits: &Limits,
    ) -> Vec<Result<Outputs, EvalError>> {
        let pool = Pool::global();
        Program::run_batch_on(pool, programs, input, vars, limits, IN_PLACE_BUDGET).await
    }

    /// [`Program::run_batch`] on `pool`, with `in_place` as the in-place budget.
    pub(super) async fn run_batch_on(
        pool: &Pool,
        programs: &[&Program],
        input: &Input,
        vars: &[Input],
        limits: &Limits,
        in_place: Duration,
    ) -> Vec<Result<Outputs, EvalError>> {
        let batch = match Batch::new(programs, input, vars, limits) {
            Ok(batch) => batch,
            Err(results) => return results,
        };
        if let Some(results) = batch.in_place(in_place) {
            return results;
        }
        let (count, limit) = (batch.count, batch.limit);
        let result = pool
            .run(limit, move |cancelled, deadline| {
                batch.evaluate(cancelled, deadline)
            })
            .await;
        Batch::results(result, count, limit)
    }

    /// Evaluate on the calling thread, without the pool: what the evaluation alone costs
    /// (the load tool's bare baseline), and the ticks tested on their own. Only the
    /// program's own deadline checks bound it, and it runs on the caller's stack.
    pub(crate) fn run_inline(
        &self,
        input: &Input,
        vars: &[Input],
        limits: &Limits,
    ) -> Result<Outputs, EvalError> {
        let at = deadline_after(Instant::now(), limits.deadline);
        let never = AtomicBool::new(false);
        let vars = vars.iter().map(|v| v.val().clone()).collect();
        let deadline = Deadline::new(at, &never);
        self.compiled
            .evaluate(input.val().clone(), vars, deadline, limits.deadline)
    }

    /// Whether the program is shallow (evaluated in place when its batch is).
    #[cfg(test)]
    pub(super) fn is_shallow(&self) -> bool {
        self.compiled.shallow
    }

    /// The in-place attempt of [`Program::run_batch`] alone, with `budget` in place of
    /// [`IN_PLACE_BUDGET`]: `None` when the batch would go to the pool.
    #[cfg(test)]
    pub(super) fn run_in_place(
        programs: &[&Program],
        input: &Input,
        vars: &[Input],
        limits: &Limits,
        budget: Duration,
    ) -> Option<Vec<Result<Outputs, EvalError>>> {
        Batch::new(programs, input, vars, limits)
            .ok()?
            .in_place(budget)
    }
}

impl fmt::Debug for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Program")
            .field("name", &self.compiled.name)
            .field("vars", &self.compiled.vars)
            .finish_non_exhaustive()
    }
}

fn compile(name: &str, source: &str, vars: &[&str]) -> Result<Compiled, Vec<CompileError>> {
    let library = Library::get();
    let globals: Vec<String> = vars.iter().map(|v| format!("${v}")).collect();
    let term = Check::source(name, source, &globals, library)?;
    let shallow = shallow::is_shallow(&term);

    let internal = |message: String| {
        vec![CompileError::Internal {
            expr: name.to_owned(),
            message,
        }]
    };
    let mut prelude = library.defs();
    prelude.push(rewrite::instrument_def(Def {
        name: ENTRY,
        args: Vec::new(),
        body: term,
    }));
    let arena = Arena::default();
    let modules = Loader::new(prelude)
        .load(
            &arena,
            File {
                code: ENTRY,
                path: (),
            },
        )
        .map_err(|errors| internal(format!("jaq could not load it ({} errors)", errors.len())))?;
    let filter = Compiler::default()
        .with_funs(library::natives())
        .with_global_vars(globals.iter().map(String::as_str))
        .compile(modules)
        .map_err(|errors| {
            let undefined = errors.iter().flat_map(|(_, errors)| errors);
            let names: Vec<String> = undefined
                .map(|(name, what)| format!("undefined {} {name}", what.as_str()))
                .collect();
            internal(names.join(", "))
        })?;
    Ok(Compiled {
        name: name.to_owned(),
        filter,
        vars: vars.len(),
        shallow,
    })
}

impl Compiled {
    /// Run the program to at most its second output. Runs on whichever thread calls it.
    fn evaluate(
        &self,
        input: Val,
        vars: Vec<Val>,
        deadline: Deadline<'_>,
        limit: Duration,
    ) -> Result<Outputs, EvalError> {
        // Queued past its deadline: the caller has stopped waiting.
        if deadline.has_passed() {
            return Err(passed(limit));
        }
        let env = Env {
            lut: &self.filter.lut,
            deadline: &deadline,
        };
        let ctx = Ctx::<Door>::new(&env, Vars::new(vars));
        let mut outputs = self.filter.id.run((ctx, input));
        let first = match outputs.next() {
            None => {
                return Ok(Outputs {
                    first: None,
                    more: false,
                });
            }
            Some(first) => first.map_err(|e| exception(e, limit, &deadline))?,
        };
        let more = match outputs.next() {
            None => false,
            Some(second) => second
                .map(drop)
                .map_err(|e| exception(e, limit, &deadline))
                .map(|()| true)?,
        };
        let first = outputs::to_json(&first, &deadline).map_err(|e| match e {
            Unconvertible::TooDeep => EvalError::TooDeep {
                max: Outputs::MAX_DEPTH,
            },
            Unconvertible::Deadline => passed(limit),
            Unconvertible::Limit => limited(&deadline),
        })?;
        Ok(Outputs {
            first: Some(first),
            more,
        })
    }
}

/// What a jaq exception means for the caller.
fn exception(exn: jaq_core::Exn<'_, Val>, limit: Duration, deadline: &Deadline<'_>) -> EvalError {
    match exn.get_err() {
        Ok(error) => EvalError::Runtime(render(&error)),
        Err(exn) => match exn.get_halt() {
            // Door expressions cannot call `halt`, so this is the deadline's tick or a guard.
            Ok(HALT_CODE) => passed(limit),
            Ok(LIMIT_CODE) => limited(deadline),
            Ok(code) => EvalError::Internal(format!("unexpected halt with code {code}")),
            Err(_) => EvalError::Internal("unexpected control flow exception".to_owned()),
        },
    }
}

/// Render a jq error the way jq reports it: an error raised with a string as that string,
/// anything else as text with the values it names printed as JSON, cut at
/// [`MAX_ERROR_BYTES`] (jaq shares values, so the value an error names can be far larger
/// printed than it is in memory).
fn render(error: &jaq_core::Error<Val>) -> String {
    let mut text = Capped::default();
    let cut = fmt::write(&mut text, format_args!("{error}")).is_err();
    if cut {
        text.0.push('…');
        return text.0;
    }
    // An error raised with a string prints as a JSON string.
    serde_json::from_str::<String>(&text.0).unwrap_or(text.0)
}

/// Text that refuses to grow past [`MAX_ERROR_BYTES`] bytes, which ends the printing.
#[derive(Default)]
struct Capped(String);

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MAX_ERROR_BYTES.saturating_sub(self.0.len());
        if s.len() <= room {
            self.0.push_str(s);
            return Ok(());
        }
        let mut end = room;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.0.push_str(&s[..end]);
        Err(fmt::Error)
    }
}

/// The error for a limit of the budget.
fn limited(deadline: &Deadline<'_>) -> EvalError {
    match deadline.budget.reached() {
        Some(limit) => EvalError::Limit(limit.message()),
        None => {
            EvalError::Internal("a limit stopped the evaluation, but none was reached".to_owned())
        }
    }
}

/// The deadline error: the evaluation is given up when `limit` has elapsed.
fn passed(limit: Duration) -> EvalError {
    let elapsed_ms = u64::try_from(limit.as_millis()).unwrap_or(u64::MAX);
    EvalError::Deadline { elapsed_ms }
}

/// A batch of programs ready to hand to the pool.
struct Batch {
    compiled: Vec<Arc<Compiled>>,
    input: Val,
    vars: Vec<Val>,
    count: usize,
    limit: Duration,
}

impl Batch {
    /// The batch, or every program's result at once when the variables do not fit.
    fn new(
        programs: &[&Program],
        input: &Input,
        vars: &[Input],
        limits: &Limits,
    ) -> Result<Batch, Vec<Result<Outputs, EvalError>>> {
        if let Some(p) = programs.iter().find(|p| p.compiled.vars != vars.len()) {
            let e = EvalError::WrongVariables {
                expected: p.compiled.vars,
                given: vars.len(),
            };
            return Err(programs.iter().map(|_| Err(e.clone())).collect());
        }
        let limit = limits.deadline;
        Ok(Batch {
            compiled: programs.iter().map(|p| Arc::clone(&p.compiled)).collect(),
            input: input.val().clone(),
            vars: vars.iter().map(|v| v.val().clone()).collect(),
            count: programs.len(),
            limit,
        })
    }

    /// Evaluate every program, in order, on the calling thread, when all are shallow and
    /// they finish within `budget`; `None` sends the batch to the pool.
    fn in_place(&self, budget: Duration) -> Option<Vec<Result<Outputs, EvalError>>> {
        if !self.compiled.iter().all(|c| c.shallow) {
            return None;
        }
        let budget = deadline_after(Instant::now(), budget.min(self.limit));
        let never = AtomicBool::new(false);
        let mut results = Vec::with_capacity(self.compiled.len());
        for c in &self.compiled {
            let deadline = Deadline::new(budget, &never);
            let result = c.evaluate(self.input.clone(), self.vars.clone(), deadline, self.limit);
            if matches!(result, Err(EvalError::Deadline { .. })) {
                return None;
            }
            results.push(result);
        }
        Some(results)
    }

    /// Evaluate every program, in order, on the pool's thread, by `deadline` (the limit
    /// counted from when the pool started the batch).
    fn evaluate(
        self,
        cancelled: &AtomicBool,
        deadline: Instant,
    ) -> Vec<Result<Outputs, EvalError>> {
        self.compiled
            .iter()
            .map(|c| {
                c.evaluate(
                    self.input.clone(),
                    self.vars.clone(),
                    Deadline::new(deadline, cancelled),
                    self.limit,
                )
            })
            .collect()
    }

    /// Each program's result from what the pool returned: when the pool gave up on the
    /// batch as a whole, every program is reported as past the deadline.
    fn results(
        result: Result<Vec<Result<Outputs, EvalError>>, Failure>,
        count: usize,
        limit: Duration,
    ) -> Vec<Result<Outputs, EvalError>> {
        match result {
            Ok(results) => results,
            Err(Failure::Deadline) => (0..count).map(|_| Err(passed(limit))).collect(),
            Err(Failure::Panicked(message)) => (0..count)
                .map(|_| Err(EvalError::Internal(message.clone())))
                .collect(),
        }
    }
}
