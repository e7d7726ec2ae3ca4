//! Tool specs: a target offered as a tool to a protocol face (the MCP face lists and calls
//! them), with the schema its arguments are checked against and the jq expression that
//! names the subject each call runs on.
//!
//! A tool call is the run-tool door: the arguments are checked against the spec's
//! `input_schema` (every problem named, nothing started), the subject is read off
//! `subject_expr` (evaluated under the door expressions' deadline and budget) or is a
//! fresh one, and the target runs with the arguments as its kwargs
//! ([`Runtime::call_tool`](crate::Runtime::call_tool)). What a face makes of the record
//! (a result, an error, a round of questions) is the face's.

use std::sync::Arc;

use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::jq::{CompileError, Input, Limits, Program};
use crate::validator::{AnswerProblem, SchemaError, Validator, joined};

/// The variables a tool's `subject_expr` may use: the tool's name and the clock's now.
const SUBJECT_VARS: &[&str] = &["tool", "now"];

/// The longest tool name (MCP's bound).
pub const MAX_TOOL_NAME: usize = 128;

/// A target offered as a tool.
///
/// In JSON (a targets file's `"tool"`), the fields are named as MCP names them:
/// `name`, `title`, `description`, `inputSchema`, `outputSchema`, `taskSupport`, with
/// `subject_expr` and `result` beside them.
///
/// ```
/// use parkway::ToolSpec;
/// use serde_json::json;
/// let spec = ToolSpec::new("deploy")
///     .description("Deploy a service; asks its caller to confirm")
///     .input_schema(json!({"type": "object", "required": ["service"],
///                          "properties": {"service": {"type": "string"}}}))
///     .subject_expr(r#""deploy:" + .arguments.service"#);
/// # let _ = spec;
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolSpec {
    /// The tool's name: 1 to 128 of `A-Z a-z 0-9 _ - .`.
    pub name: String,
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model that picks it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON schema of its arguments (an object schema); `{"type": "object"}` when
    /// absent.
    #[serde(rename = "inputSchema", alias = "input_schema", default = "any_object")]
    pub input_schema: Value,
    /// The JSON schema of its result, when it declares one: the result is then an
    /// object, sent as structured content.
    #[serde(
        rename = "outputSchema",
        alias = "output_schema",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<Value>,
    /// A jq expression over `{"arguments": …, "_meta": …}` (the call's arguments and
    /// its request metadata) yielding the subject the run parks on, with `$tool` and
    /// `$now` declared. Absent: a fresh subject per call, `tool:<name>:<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_expr: Option<String>,
    /// How the run's result is read: `json` (the default; the result is the tool's
    /// value) or `content` (the result is the protocol's tool result itself, with its
    /// `content` list, and optional `structuredContent` and `isError`).
    #[serde(default, skip_serializing_if = "ResultForm::is_json")]
    pub result: ResultForm,
    /// Whether a call may run as a task of the MCP tasks extension: `forbidden` (the
    /// default: every call answers in the call), `optional` (a call from a client that
    /// declares the extension becomes a task when its run waits) or `required` (as
    /// `optional`, and a client without the extension is refused). MCP lists it as
    /// `execution.taskSupport`.
    #[serde(
        rename = "taskSupport",
        alias = "task_support",
        default,
        skip_serializing_if = "TaskSupport::is_forbidden"
    )]
    pub task_support: TaskSupport,
}

/// Whether a tool's calls may run as tasks (see [`ToolSpec::task_support`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never a task.
    #[default]
    Forbidden,
    /// A task when the client declares the extension and the run waits.
    Optional,
    /// Only for clients that declare the extension.
    Required,
}

impl TaskSupport {
    fn is_forbidden(&self) -> bool {
        *self == TaskSupport::Forbidden
    }

    /// The value as MCP writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// How a tool's run result is read (see [`ToolSpec::result`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResultForm {
    /// The result is the tool's value.
    #[default]
    Json,
    /// The result is the protocol's tool result (`content`, `structuredContent`,
    /// `isError`).
    Content,
}

impl ResultForm {
    fn is_json(&self) -> bool {
        *self == ResultForm::Json
    }
}

fn any_object() -> Value {
    serde_json::json!({"type": "object"})
}

impl ToolSpec {
    /// A tool called `name`, taking any object, on a fresh subject per call.
    pub fn new(name: impl Into<String>) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            title: None,
            description: None,
            input_schema: any_object(),
            output_schema: None,
            subject_expr: None,
            result: ResultForm::Json,
            task_support: TaskSupport::Forbidden,
        }
    }

    /// Set the title.
    pub fn title(mut self, title: impl Into<String>) -> ToolSpec {
        self.title = Some(title.into());
        self
    }

    /// Set the description.
    pub fn description(mut self, description: impl Into<String>) -> ToolSpec {
        self.description = Some(description.into());
        self
    }

    /// Set the arguments' JSON schema.
    pub fn input_schema(mut self, schema: Value) -> ToolSpec {
        self.input_schema = schema;
        self
    }

    /// Set the result's JSON schema.
    pub fn output_schema(mut self, schema: Value) -> ToolSpec {
        self.output_schema = Some(schema);
        self
    }

    /// Set the expression naming the subject of each call.
    pub fn subject_expr(mut self, expr: impl Into<String>) -> ToolSpec {
        self.subject_expr = Some(expr.into());
        self
    }

    /// Set how the run's result is read.
    pub fn result(mut self, form: ResultForm) -> ToolSpec {
        self.result = form;
        self
    }

    /// Set whether calls may run as tasks.
    pub fn task_support(mut self, support: TaskSupport) -> ToolSpec {
        self.task_support = support;
        self
    }
}

/// A tool as the runtime holds it: its spec, the target it runs, and what was compiled.
pub struct Tool {
    /// The target each call runs.
    pub target: String,
    /// The spec as given.
    pub spec: ToolSpec,
    input: Validator,
    subject: Option<Program>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("target", &self.target)
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

/// Why a tool spec was refused; nothing was registered.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("tool {tool:?} of target {target:?} is refused: {}", problems.join("; "))]
#[non_exhaustive]
pub struct ToolSpecError {
    /// The tool's name as given.
    pub tool: String,
    /// The target it was offered for.
    pub target: String,
    /// Every problem found.
    pub problems: Vec<String>,
}

/// Why a tool call started nothing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ToolCallError {
    /// No tool of that name.
    #[error("unknown tool {name:?}")]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The arguments fail the tool's input schema; every problem is named.
    #[error("the arguments of tool {tool} are invalid: {}", joined(problems))]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// Each problem, at its JSON pointer into the arguments.
        problems: Vec<AnswerProblem>,
    },
    /// `subject_expr` failed or yielded no usable subject.
    #[error("the subject of tool {tool} could not be read: {why}")]
    Subject {
        /// The tool.
        tool: String,
        /// What went wrong.
        why: String,
    },
    /// The start was refused.
    #[error(transparent)]
    Start(#[from] crate::StartError),
}

/// Every tool, by name.
#[derive(Debug, Default)]
pub(crate) struct Tools {
    by_name: DashMap<String, Arc<Tool>>,
}

impl Tools {
    /// Compile and register `spec` for `target` (replacing a tool of the same name).
    pub(crate) fn add(&self, target: &str, spec: ToolSpec) -> Result<(), ToolSpecError> {
        let tool = compile(target, spec)?;
        self.by_name.insert(tool.spec.name.clone(), Arc::new(tool));
        Ok(())
    }

    /// The tool called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Tool>> {
        self.by_name.get(name).map(|t| Arc::clone(t.value()))
    }

    /// The title of `target`: that of the first tool by name offered for it with one.
    pub(crate) fn title(&self, target: &str) -> Option<String> {
        self.by_name
            .iter()
            .filter(|t| t.target == target)
            .filter_map(|t| Some((t.spec.name.clone(), t.spec.title.clone()?)))
            .min()
            .map(|(_, title)| title)
    }

    /// Every tool, sorted by name.
    pub(crate) fn all(&self) -> Vec<Arc<Tool>> {
        let mut all: Vec<Arc<Tool>> = self.by_name.iter().map(|t| Arc::clone(t.value())).collect();
        all.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        all
    }
}

/// Check every part of `spec`, reporting every problem.
fn compile(target: &str, spec: ToolSpec) -> Result<Tool, ToolSpecError> {
    let mut problems = Vec::new();
    let name_ok = !spec.name.is_empty()
        && spec.name.len() <= MAX_TOOL_NAME
        && spec
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !name_ok {
        problems.push(format!(
            "the name must be 1 to {MAX_TOOL_NAME} of A-Z a-z 0-9 _ - ."
        ));
    }
    if let Some(why) = crate::name::problem("target", target) {
        problems.push(why);
    }
    let schema = |what: &str, schema: &Value, problems: &mut Vec<String>| {
        if crate::depth::exceeds(schema, crate::MAX_SCHEMA_DEPTH) {
            problems.push(format!(
                "{what} is nested deeper than {} levels",
                crate::MAX_SCHEMA_DEPTH
            ));
            return None;
        }
        if schema.get("type") != Some(&Value::String("object".to_owned())) {
            problems.push(format!(
                "{what} must be an object schema (\"type\": \"object\")"
            ));
        }
        match Validator::new(schema) {
            Ok(v) => Some(v),
            Err(SchemaError::Invalid(e)) => {
                problems.push(format!("{what} is not a valid JSON schema: {e}"));
                None
            }
            Err(e @ SchemaError::NoForms) => {
                problems.push(format!("{what}: {e}"));
                None
            }
        }
    };
    let input = schema("inputSchema", &spec.input_schema, &mut problems);
    if let Some(output) = &spec.output_schema {
        schema("outputSchema", output, &mut problems);
    }
    let subject = match &spec.subject_expr {
        None => None,
        Some(source) => match Program::compile_with("subject_expr", source, SUBJECT_VARS) {
            Ok(p) => Some(p),
            Err(errors) => {
                problems.extend(errors.0.iter().map(CompileError::to_string));
                None
            }
        },
    };
    match input {
        Some(input) if problems.is_empty() => Ok(Tool {
            target: target.to_owned(),
            spec,
            input,
            subject,
        }),
        _ => Err(ToolSpecError {
            tool: spec.name,
            target: target.to_owned(),
            problems,
        }),
    }
}

impl Tool {
    /// Every way `arguments` fail the input schema; empty when they pass.
    pub fn argument_problems(&self, arguments: &Value) -> Vec<AnswerProblem> {
        self.input.problems(arguments)
    }

    /// The subject a call with `arguments` and request metadata `meta` runs on, or why
    /// there is none. `fresh` names a fresh subject when the tool has no `subject_expr`.
    pub(crate) async fn subject(
        &self,
        arguments: &Value,
        meta: &Value,
        now: chrono::DateTime<chrono::Utc>,
        limits: &Limits,
        fresh: impl FnOnce() -> String,
    ) -> Result<String, ToolCallError> {
        let Some(program) = &self.subject else {
            return Ok(format!("tool:{}:{}", self.spec.name, fresh()));
        };
        let why = |why: String| ToolCallError::Subject {
            tool: self.spec.name.clone(),
            why,
        };
        let doc = serde_json::json!({"arguments": arguments, "_meta": meta});
        let vars = [
            Input::string(&self.spec.name),
            Input::string(&now.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)),
        ];
        let result = Program::run_batch(&[program], &Input::from_json(&doc), &vars, limits)
            .await
            .into_iter()
            .next()
            .unwrap_or_else(|| Err(crate::EvalError::Internal("no result".to_owned())));
        let out = result.map_err(|e| why(format!("subject_expr: {e}")))?;
        if out.more {
            return Err(why("subject_expr yielded more than one value".to_owned()));
        }
        match out.first {
            Some(Value::String(s)) if !s.is_empty() => match crate::name::problem("subject", &s) {
                None => Ok(s),
                Some(problem) => Err(why(format!("subject_expr: {problem}"))),
            },
            other => Err(why(format!(
                "subject_expr must yield one non-empty string, not {}",
                other.map_or_else(
                    || "nothing".to_owned(),
                    |v| crate::door::contract::shown(&v)
                )
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[cfg(feature = "forms")]
    use crate::ToolCallError;
    use crate::{BuildError, Ids, Runtime, ToolSpec};

    async fn runtime(spec: ToolSpec) -> Result<Runtime, BuildError> {
        Runtime::builder()
            .without_env()
            .ids(Ids::sequential())
            .register("echo", &[], |ctx, kwargs, _| async move {
                Ok(json!({"subject": ctx.subject(), "kwargs": kwargs}))
            })
            .tool("echo", spec)
            .build()
            .await
    }

    #[cfg(feature = "forms")]
    #[tokio::test]
    async fn a_bad_spec_fails_the_build_naming_every_problem() {
        let spec = ToolSpec::new("bad name!")
            .input_schema(json!({"type": "array"}))
            .output_schema(json!({"type": "object", "minimum": "x"}))
            .subject_expr("$nope");
        let Err(BuildError::Tool(error)) = runtime(spec).await else {
            panic!("the spec must be refused");
        };
        let text = error.to_string();
        for part in [
            "the name must be",
            "inputSchema must be an object schema",
            "outputSchema is not a valid",
            "$nope",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }

    #[cfg(feature = "forms")]
    #[tokio::test]
    async fn arguments_are_checked_and_the_subject_read_before_anything_starts() {
        let schema = json!({"type": "object", "required": ["service"],
            "properties": {"service": {"type": "string", "minLength": 2}, "n": {"type": "integer"}}});
        let rt = runtime(
            ToolSpec::new("echo")
                .input_schema(schema.clone())
                .subject_expr(
                    r#"if .arguments.service == "loop" then [range(100000) as $a | range(100000) | $a] | length | tostring
               else "svc:" + .arguments.service + ":" + (._meta.client // "none") end"#,
                ),
        )
        .await
        .unwrap();
        let Err(ToolCallError::InvalidArguments { problems, .. }) = rt
            .call_tool("echo", json!({"service": "a", "n": "x"}), &json!({}), "t")
            .await
        else {
            panic!("invalid arguments must be refused");
        };
        let mut at: Vec<&str> = problems.iter().map(|p| p.at.as_str()).collect();
        at.sort_unstable();
        assert_eq!(at, ["/n", "/service"]);
        let (subject, record) = rt
            .call_tool(
                "echo",
                json!({"service": "api"}),
                &json!({"client": "c1"}),
                "t",
            )
            .await
            .unwrap();
        assert_eq!(subject, "svc:api:c1");
        assert_eq!(record.result.unwrap()["subject"], "svc:api:c1");
        // A subject expression that would run for ever is stopped at its deadline.
        let Err(ToolCallError::Subject { why, .. }) = rt
            .call_tool("echo", json!({"service": "loop"}), &json!({}), "t")
            .await
        else {
            panic!("a runaway subject_expr must be refused");
        };
        assert!(why.contains("subject_expr"), "{why}");
        assert!(matches!(
            rt.call_tool("nope", json!({}), &json!({}), "t").await,
            Err(ToolCallError::Unknown { .. })
        ));
        assert_eq!(rt.tools().len(), 1);
    }

    #[tokio::test]
    async fn without_subject_expr_each_call_has_a_fresh_subject() {
        let rt = runtime(ToolSpec::new("echo")).await.unwrap();
        let (a, _) = rt
            .call_tool("echo", json!({}), &json!({}), "t")
            .await
            .unwrap();
        let (b, _) = rt
            .call_tool("echo", json!({}), &json!({}), "t")
            .await
            .unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("tool:echo:"), "{a}");
    }
}
