//! Errors raised while compiling or evaluating a door expression.

use std::fmt;

/// One problem found in a door expression when it is compiled (at save time).
///
/// Every variant names the expression it was found in (`resume_expr`, `condition`, ...), so a
/// list of them can be shown to whoever wrote the door without further context.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The source is not valid jq syntax.
    #[error("cannot parse {expr}: {message}")]
    Parse {
        /// Name of the expression.
        expr: String,
        /// What the parser expected and where, as jaq reports it.
        message: String,
    },
    /// The source is longer than a door expression may be.
    #[error("{expr} is {len} bytes long, more than the {max} allowed")]
    TooLong {
        /// Name of the expression.
        expr: String,
        /// Length of the source in bytes.
        len: usize,
        /// The most bytes allowed.
        max: usize,
    },
    /// A variable that is neither bound in the expression nor one of its declared variables.
    #[error("undeclared variable {var} in {expr}")]
    UndeclaredVariable {
        /// The variable, with its `$`.
        var: String,
        /// Name of the expression.
        expr: String,
    },
    /// A variable that jq provides but door expressions deliberately do not (`$ENV`, `$__loc__`).
    #[error("{var} is not available to door expressions (used in {expr})")]
    VariableNotAvailable {
        /// The variable, with its `$`.
        var: String,
        /// Name of the expression.
        expr: String,
    },
    /// A builtin that reads the environment, the clock or other inputs, or writes to a log or
    /// the process (`env`, `now`, `input`, `debug`, `halt`, ...).
    ///
    /// Door expressions must be pure: the same inputs always give the same outputs. The current
    /// time is passed in as `$now` instead of being read with `now`.
    #[error("function {function} is not available to door expressions (used in {expr})")]
    FunctionNotAvailable {
        /// The function's name.
        function: String,
        /// Name of the expression.
        expr: String,
    },
    /// A module directive (`import`, `include`, `module`): door expressions are self-contained.
    #[error("{directive} is not available to door expressions (used in {expr})")]
    DirectiveNotAvailable {
        /// The directive's keyword.
        directive: String,
        /// Name of the expression.
        expr: String,
    },
    /// A call to a function that is neither defined in the expression nor a builtin.
    #[error("undefined function {function}/{arity} in {expr}")]
    UndefinedFunction {
        /// The function's name.
        function: String,
        /// The number of arguments it was called with.
        arity: usize,
        /// Name of the expression.
        expr: String,
    },
    /// A `break $label` outside any `label $label`.
    #[error("undefined label {label} in {expr}")]
    UndefinedLabel {
        /// The label, with its `$`.
        label: String,
        /// Name of the expression.
        expr: String,
    },
    /// A construct refused because it can loop without bound (`repeat`, a recursive `def`,
    /// `range` with a computed bound, ...).
    #[error("{construct} in {expr} can run away")]
    Runaway {
        /// The construct, e.g. `recursive def f` or `range with a non-literal bound`.
        construct: String,
        /// Name of the expression.
        expr: String,
    },
    /// jaq refused a program that the save-time checks accepted, or failed while compiling it.
    #[error("cannot compile {expr}: {message}")]
    Internal {
        /// Name of the expression.
        expr: String,
        /// What went wrong.
        message: String,
    },
}

/// Every problem found in one door expression, in the order they appear in its source.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompileErrors(pub Vec<CompileError>);

impl fmt::Display for CompileErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CompileErrors {}

/// Why evaluating a compiled door expression gave no outputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The expression raised a jq error (`error("x")`, `.a` on a number, ...); the error value
    /// rendered as text (strings as they are, other values as JSON).
    #[error("door expression failed: {0}")]
    Runtime(String),
    /// The evaluation was given up because it passed its deadline.
    #[error("evaluation passed its deadline of {elapsed_ms} ms")]
    Deadline {
        /// The time that had elapsed when the evaluation was given up, which is its deadline.
        elapsed_ms: u64,
    },
    /// The caller passed a different number of variable values than the expression declares.
    #[error("door expression expects {expected} variable values, got {given}")]
    WrongVariables {
        /// How many variables the expression was compiled with.
        expected: usize,
        /// How many values were passed.
        given: usize,
    },
    /// The evaluation reached one of its limits of work, memory or nesting (see the
    /// sandbox section of the doors documentation); the message names the limit and the
    /// operation that reached it.
    #[error("door expression stopped: {0}")]
    Limit(String),
    /// An output nests arrays and objects deeper than can be handed on safely.
    #[error("output of door expression nests deeper than {max} arrays or objects")]
    TooDeep {
        /// The deepest nesting allowed.
        max: usize,
    },
    /// The evaluator failed in a way that is not the expression's fault.
    #[error("door expression evaluation failed internally: {0}")]
    Internal(String),
}
