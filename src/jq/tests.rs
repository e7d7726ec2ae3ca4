//! Tests of the module as its callers use it: compile, then run.

use std::time::{Duration, Instant};

use tokio::time::timeout;

use serde_json::{Value, json};

use super::pool::Pool;
use super::program::{IN_PLACE_BUDGET, MAX_SOURCE_BYTES};
use super::{CompileError, CompileErrors, EvalError, Input, Limits, Outputs, Program};

const EXPR: &str = "resume_expr";

/// How long a test waits for an evaluation that must end before it fails instead of
/// hanging: far above every deadline here, so that a loaded machine does not fail it.
const WITHIN: Duration = Duration::from_secs(20);

/// An in-place budget that is over before the first step: the batch goes to the pool.
const NEVER_IN_PLACE: Duration = Duration::ZERO;

/// An in-place budget as long as the roomy deadline, for tests of what an in-place
/// evaluation yields: with the real one, a test thread paused by a loaded machine would
/// send the batch to the pool.
fn whole_deadline() -> Duration {
    roomy().deadline
}

/// A deadline no test evaluation comes near, so that tests running in parallel on a loaded
/// machine do not fail for want of time.
fn roomy() -> Limits {
    Limits {
        deadline: Duration::from_secs(10),
        ..Limits::default()
    }
}

fn parked() -> Value {
    json!([{
        "id": "i-42",
        "status": "asking",
        "to": "caller",
        "asked_by": ["main"],
        "question": "proceed?",
        "answer_format": "confirm",
        "group_id": "g-1"
    }])
}

/// The door variables: `$parked`, `$subject`, `$door`, `$now`.
fn door_vars() -> Vec<Input> {
    [
        parked(),
        json!({"id": "s-1"}),
        json!({"name": "approve"}),
        json!("2024-05-01T12:00:00Z"),
    ]
    .iter()
    .map(Input::from_json)
    .collect()
}

fn compile(source: &str) -> Program {
    match Program::compile(EXPR, source) {
        Ok(program) => program,
        Err(errors) => panic!("{source:?} should compile: {errors}"),
    }
}

fn errors(source: &str) -> Vec<String> {
    match Program::compile(EXPR, source) {
        Ok(_) => panic!("{source:?} should not compile"),
        Err(CompileErrors(errors)) => errors.iter().map(ToString::to_string).collect(),
    }
}

/// The result of a batch of one.
fn only(results: Vec<Result<Outputs, EvalError>>) -> Result<Outputs, EvalError> {
    assert_eq!(results.len(), 1, "a batch of one has one result");
    results
        .into_iter()
        .next()
        .unwrap_or(Err(EvalError::Internal("no result".to_owned())))
}

/// Evaluate one program, as a batch of one.
async fn eval(
    program: &Program,
    input: &Input,
    vars: &[Input],
    limits: &Limits,
) -> Result<Outputs, EvalError> {
    only(Program::run_batch(&[program], input, vars, limits).await)
}

/// Evaluate one program on `pool`, never in place.
async fn eval_pooled(
    pool: &Pool,
    program: &Program,
    input: &Input,
    limits: &Limits,
) -> Result<Outputs, EvalError> {
    let batch = [program];
    only(Program::run_batch_on(pool, &batch, input, &door_vars(), limits, NEVER_IN_PLACE).await)
}

async fn run_with(source: &str, input: Value, limits: &Limits) -> Result<Outputs, EvalError> {
    eval(
        &compile(source),
        &Input::from_json(&input),
        &door_vars(),
        limits,
    )
    .await
}

async fn run(source: &str, input: Value) -> Result<Outputs, EvalError> {
    run_with(source, input, &roomy()).await
}

async fn one(source: &str, input: Value) -> Value {
    match run(source, input).await {
        Ok(Outputs {
            first: Some(v),
            more: false,
        }) => v,
        other => panic!("{source:?} should yield one output, got {other:?}"),
    }
}

#[tokio::test]
async fn seed_examples_yield_their_values() {
    let input = json!({"msg": "hi"});
    let cases = [
        ("[$parked[].id]", json!(["i-42"])),
        (
            r#"{id: $parked[0].id, payload: {answer: "yes"}}"#,
            json!({"id": "i-42", "payload": {"answer": "yes"}}),
        ),
        (
            "{payload: .msg, waiting: ($parked | length)}",
            json!({"payload": "hi", "waiting": 1}),
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(one(source, input.clone()).await, expected, "{source}");
    }
}

#[tokio::test]
async fn door_variables_are_bound_in_declared_order() {
    assert_eq!(
        one(
            "[$parked[0].id, $subject.id, $door.name, $now]",
            Value::Null
        )
        .await,
        json!(["i-42", "s-1", "approve", "2024-05-01T12:00:00Z"])
    );
}

#[tokio::test]
async fn hook_variables_are_bound_by_compile_with() {
    let program = Program::compile_with("condition", "$event.kind == $hook", &["event", "hook"]);
    let program = program.unwrap_or_else(|e| panic!("{e}"));
    let vars = [json!({"kind": "parked"}), json!("parked")].map(|v| Input::from_json(&v));
    let outputs = eval(&program, &Input::default(), &vars, &roomy()).await;
    assert_eq!(outputs.map(|o| o.first), Ok(Some(json!(true))));

    // The door variables are not declared there.
    let errors = Program::compile_with("condition", "$parked", &["event"]);
    assert_eq!(
        errors.map(|_| ()).map_err(|e| e.to_string()),
        Err("undeclared variable $parked in condition".to_owned())
    );
}

#[tokio::test]
async fn output_counts_are_reported() {
    let none = Outputs {
        first: None,
        more: false,
    };
    assert_eq!(run("empty", Value::Null).await, Ok(none.clone()));

    let two = run("1, 2", Value::Null).await;
    assert_eq!(
        two,
        Ok(Outputs {
            first: Some(json!(1)),
            more: true
        })
    );

    // Stops after the second output: an endless tail is never reached.
    let many = run(
        "1, 2, ([range(100000) as $a | range(100000)] | length)",
        Value::Null,
    )
    .await;
    assert_eq!(
        many,
        Ok(Outputs {
            first: Some(json!(1)),
            more: true
        })
    );
}

#[tokio::test]
async fn runtime_errors_are_reported() {
    let cases = [
        (r#"error("x")"#, "x"),
        (r#"error({a: 1})"#, r#"{"a":1}"#),
        ("1, error(\"late\")", "late"),
    ];
    for (source, message) in cases {
        assert_eq!(
            run(source, Value::Null).await,
            Err(EvalError::Runtime(message.to_owned())),
            "{source}"
        );
    }
    assert!(matches!(
        run(".a", json!(1)).await,
        Err(EvalError::Runtime(_))
    ));
    // A caught error is no error.
    assert_eq!(
        one(r#"try error("x") catch ."#, Value::Null).await,
        json!("x")
    );
}

#[tokio::test]
async fn text_that_is_not_json_fails_to_parse_once() {
    // jaq's parser repeats its error forever on text it cannot read; the first error ends
    // the sequence, so these finish (and with the deadline off, would otherwise hang).
    let cases = [
        r#""twelve" | tonumber"#,
        r#""twelve" | fromjson"#,
        r#""1 x" | [fromjson]"#,
    ];
    for source in cases {
        let result = run(source, Value::Null).await;
        assert!(
            matches!(&result, Err(EvalError::Runtime(m)) if m.contains("as JSON")),
            "{source}: {result:?}"
        );
    }
    assert_eq!(
        one(r#"[try ("1 2 x" | fromjson) catch "bad"]"#, Value::Null).await,
        json!([1, 2, "bad"])
    );
    assert_eq!(one(r#""12" | tonumber"#, Value::Null).await, json!(12));
}

#[tokio::test]
async fn multiplication_keeps_its_meaning_but_not_its_dangers() {
    let cases = [
        (r#""ab" * 3"#, json!("ababab")),
        (r#"3 * "ab""#, json!("ababab")),
        (r#""ab" * 0"#, Value::Null),
        ("2 * 3", json!(6)),
        ("[1.5 * 2, 2 * 0.25]", json!([3.0, 0.5])),
        ("{a: {b: 1}} * {a: {c: 2}}", json!({"a": {"b": 1, "c": 2}})),
        ("[(1, 2) * (10, 20)]", json!([10, 20, 20, 40])),
        ("{a: 3} | .a *= 2", json!({"a": 6})),
        ("[1, 2] | .[] *= 2", json!([2, 4])),
        ("[{a: 2} | .a *= (2, 3)]", json!([{"a": 4}, {"a": 6}])),
        ("{a: 2} | .a *= .a", json!({"a": 4})),
        (r#"" " * 16777216 | length"#, json!(16_777_216)),
    ];
    for (source, expected) in cases {
        assert_eq!(one(source, Value::Null).await, expected, "{source}");
    }
    // jaq would allocate the result at once, and a failed allocation aborts the process.
    for source in [
        r#""x" * 100000000000"#,
        r#"100000000000 * "x""#,
        r#""x" * 100000000000000000000000"#,
        r#"("x" * 1000000) * 1000000"#,
        r#"{a: "x"} | .a *= 100000000000"#,
    ] {
        assert!(
            matches!(run(source, Value::Null).await, Err(EvalError::Runtime(m)) if m.starts_with("cannot repeat")),
            "{source}"
        );
    }
}

#[tokio::test]
async fn values_convert_both_ways() {
    let input =
        json!({"i": -3, "u": u64::MAX, "f": 1.5, "s": "é", "a": [null, true], "o": {"k": {}}});
    assert_eq!(one(".", input.clone()).await, input);
    let cases = [
        ("1.5", json!(1.5)),
        ("100000000000000000000", json!(1e20)),
        ("nan", Value::Null),
        ("infinite", json!(f64::MAX)),
        ("-infinite", json!(f64::MIN)),
        ("[.i * 2, .i / 2]", json!([-6, -1.5])),
        (r#""\(.a)""#, json!("[null,true]")),
    ];
    for (source, expected) in cases {
        assert_eq!(one(source, input.clone()).await, expected, "{source}");
    }
}

#[test]
fn refusals_name_the_construct() {
    let cases = [
        // Runaway constructs.
        ("def f: f; f", "recursive def f in resume_expr can run away"),
        (
            "def f: 1 + f; 0",
            "recursive def f in resume_expr can run away",
        ),
        (
            "def f(x): x | f(x); f(.)",
            "recursive def f in resume_expr can run away",
        ),
        (
            "def f: def g: f; g; f",
            "recursive def f in resume_expr can run away",
        ),
        (
            "def f: 1; def g: def h: g; h; g",
            "recursive def g in resume_expr can run away",
        ),
        ("repeat(.)", "repeat in resume_expr can run away"),
        (
            "[limit(3; repeat(1))]",
            "repeat in resume_expr can run away",
        ),
        ("while(. < 10; . + 1)", "while in resume_expr can run away"),
        ("until(. > 10; . + 1)", "until in resume_expr can run away"),
        ("recurse(.[])", "recurse(f) in resume_expr can run away"),
        (
            "recurse(.[]; . != null)",
            "recurse(f; cond) in resume_expr can run away",
        ),
        (
            "range(.)",
            "range with a non-literal bound in resume_expr can run away",
        ),
        (
            "range(0; $parked | length)",
            "range with a non-literal bound in resume_expr can run away",
        ),
        (
            "range(infinite)",
            "range with a non-literal bound in resume_expr can run away",
        ),
        (
            "range(0; 10; .)",
            "range with a non-literal step in resume_expr can run away",
        ),
        (
            "range(100001)",
            "range over more than 100000 values in resume_expr can run away",
        ),
        (
            "range(1e6)",
            "range over more than 100000 values in resume_expr can run away",
        ),
        (
            "range(-200000; 0)",
            "range over more than 100000 values in resume_expr can run away",
        ),
        (
            "range(0; 10; 0)",
            "range over more than 100000 values in resume_expr can run away",
        ),
        (
            "range(0; 1; 0.000001)",
            "range over more than 100000 values in resume_expr can run away",
        ),
        (
            "limit(.n; .[])",
            "limit with a non-literal count in resume_expr can run away",
        ),
        // Impure builtins.
        (
            "env",
            "function env is not available to door expressions (used in resume_expr)",
        ),
        (
            "env.HOME",
            "function env is not available to door expressions (used in resume_expr)",
        ),
        (
            "now",
            "function now is not available to door expressions (used in resume_expr)",
        ),
        (
            "input",
            "function input is not available to door expressions (used in resume_expr)",
        ),
        (
            "[inputs]",
            "function inputs is not available to door expressions (used in resume_expr)",
        ),
        (
            "debug",
            "function debug is not available to door expressions (used in resume_expr)",
        ),
        (
            "debug(1)",
            "function debug is not available to door expressions (used in resume_expr)",
        ),
        (
            "stderr",
            "function stderr is not available to door expressions (used in resume_expr)",
        ),
        (
            "halt",
            "function halt is not available to door expressions (used in resume_expr)",
        ),
        (
            "halt_error",
            "function halt_error is not available to door expressions (used in resume_expr)",
        ),
        (
            "halt_error(1)",
            "function halt_error is not available to door expressions (used in resume_expr)",
        ),
        (
            "input_filename",
            "function input_filename is not available to door expressions (used in resume_expr)",
        ),
        (
            "get_search_list",
            "function get_search_list is not available to door expressions (used in resume_expr)",
        ),
        (
            "localtime",
            "function localtime is not available to door expressions (used in resume_expr)",
        ),
        (
            "$ENV.HOME",
            "$ENV is not available to door expressions (used in resume_expr)",
        ),
        (
            "$__loc__",
            "$__loc__ is not available to door expressions (used in resume_expr)",
        ),
        (
            r#"import "a" as a; ."#,
            "import is not available to door expressions (used in resume_expr)",
        ),
        (
            r#"include "a"; ."#,
            "include is not available to door expressions (used in resume_expr)",
        ),
        // Names that resolve to nothing.
        ("$x", "undeclared variable $x in resume_expr"),
        (". as $x | $y", "undeclared variable $y in resume_expr"),
        ("def f($a): $a; $a", "undeclared variable $a in resume_expr"),
        (
            "reduce .[] as $x (0; .) | $x",
            "undeclared variable $x in resume_expr",
        ),
        ("foo", "undefined function foo/0 in resume_expr"),
        ("map(.; .)", "undefined function map/2 in resume_expr"),
        ("@csv", "undefined function @csv/0 in resume_expr"),
        ("m::f", "undefined function m::f/0 in resume_expr"),
        ("def f(g): g; g", "undefined function g/0 in resume_expr"),
        (
            "reduce .[] as $x (0; 1; 2)",
            "undefined function reduce/3 in resume_expr",
        ),
        ("break $out", "undefined label $out in resume_expr"),
        (
            "door_expression",
            "undefined function door_expression/0 in resume_expr",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(errors(source), [expected], "{source}");
    }
}

#[test]
fn parse_errors_carry_jaq_message_and_location() {
    let cases = [
        (
            "",
            "cannot parse resume_expr: expected term, found end of input",
        ),
        (
            "1 +",
            "cannot parse resume_expr: expected term, found end of input",
        ),
        (
            "1 2",
            "cannot parse resume_expr: expected nothing, found `2` at 1:3",
        ),
        ("1 +\n )", "cannot parse resume_expr: expected token at 2:2"),
        (
            r#""abc"#,
            "cannot parse resume_expr: expected closing quote at 1:5",
        ),
        (
            "[1, 2",
            "cannot parse resume_expr: expected closing bracket at 1:6",
        ),
        (
            "if . then 1",
            "cannot parse resume_expr: expected else or end, found end of input",
        ),
    ];
    for (source, expected) in cases {
        assert_eq!(errors(source), [expected], "{source:?}");
    }
}

#[test]
fn harmless_programs_are_accepted() {
    let sources = [
        // The refused words as strings, keys and fields.
        r#""while""#,
        r#""repeat(.) and range(.)""#,
        ".while",
        ".repeat?",
        r#"."until""#,
        "{while: 1, until: 2, repeat: 3, recurse: 4, range: 5, limit: 6, env: 7, now: 8}",
        r#"{"input": 1} | .input"#,
        r#""\(.while)""#,
        ". as {while: $w} | $w",
        // User definitions shadowing builtins.
        "def range: 1; range",
        "def range(n): n; range(.)",
        "def repeat(f): f; repeat(1)",
        "def recurse(f): f; recurse(.)",
        "def while(c; u): u; while(true; 1)",
        "def limit(n; f): f; limit(.; 1)",
        "def env: {}; env",
        "def now: $now; now",
        // Non-recursive definitions, arguments, siblings.
        "def f: 1; def g: f + 1; g",
        "def f(g): g; f(.)",
        "def f($x): $x + 1; f(2)",
        "def f(x): def g: x; g; f(1)",
        "def f: def f: 1; f; f",
        // Finite generators and bounded loops.
        "recurse",
        "[..]",
        "[paths]",
        "walk(.)",
        "range(5)",
        "range(1; 5)",
        "range(0; 100000)",
        "range(10; 0; -1)",
        "range(-3)",
        "range(0; 1; 0.5)",
        "limit(3; .[])",
        "first(.[])",
        "nth(1; .[])",
        "combinations(2)",
        "[.[] | select(. > 1)]",
        "reduce .[] as $x (0; . + $x)",
        "foreach .[] as $x (0; . + $x; [$x, .])",
        "label $out | 1, break $out",
        ". as [$a, {b: $c}] | $a, $c",
        ". as {$a, (\"b\"): $b} | $a + $b",
        // A sample of the library.
        r#"@base64 "x\(.)""#,
        "@json",
        "$parked | length",
        "getpath([\"a\"])",
        "to_entries | from_entries",
        "with_entries(.)",
        r#"test("a")"#,
        r#"[splits("a")]"#,
        r#"gsub("a"; "b")"#,
        "ascii_downcase",
        "todate",
        "gmtime | mktime",
        r#"strftime("%Y")"#,
        "flatten",
        "unique",
        "group_by(.a)",
        "min_by(.a)",
        "add",
        "any, all",
        "tojson | fromjson",
        "indices(1)",
        "inside([1])",
        r#"ltrimstr("a")"#,
        r#"join(",")"#,
        "isempty(.[])",
        r#"error("x")"#,
    ];
    for source in sources {
        compile(source);
    }
}

#[test]
fn every_problem_is_reported_together() {
    let found = errors("$a + $b | repeat(.)");
    assert_eq!(
        found,
        [
            "undeclared variable $a in resume_expr",
            "undeclared variable $b in resume_expr",
            "repeat in resume_expr can run away",
        ]
    );
    let joined = Program::compile(EXPR, "$a + $b | repeat(.)").map(drop);
    assert_eq!(joined.map_err(|e| e.to_string()), Err(found.join("; ")));
    // The same mistake twice is one problem; different kinds in one program all show.
    assert_eq!(
        errors("$a + $a, env, def f: f; f, range(.), foo(1)"),
        [
            "undeclared variable $a in resume_expr",
            "function env is not available to door expressions (used in resume_expr)",
            "recursive def f in resume_expr can run away",
            "range with a non-literal bound in resume_expr can run away",
            "undefined function foo/1 in resume_expr",
        ]
    );
    // Module directives are reported along with the problems after them.
    assert_eq!(
        errors(r#"import "a" as a; include "b"; $x"#),
        [
            "import is not available to door expressions (used in resume_expr)",
            "include is not available to door expressions (used in resume_expr)",
            "undeclared variable $x in resume_expr",
        ]
    );
}

#[test]
fn long_sources_are_refused() {
    let source = format!("1{}", " + 1".repeat(MAX_SOURCE_BYTES / 4));
    let found = Program::compile(EXPR, &source).map(drop);
    assert!(matches!(
        found.map_err(|e| e.0),
        Err(errors) if matches!(errors[..], [CompileError::TooLong { .. }])
    ));
}

#[tokio::test]
async fn deep_nesting_within_the_limit_neither_crashes_compile_nor_run() {
    // Each shape repeated as often as a source within the limit allows: parsing, checking,
    // compiling and running all recurse on the nesting, on threads with large stacks.
    let shapes = [
        ("[", "1", "]"),
        ("{a: ", "1", "}"),
        ("(", "1", ")"),
        ("\"\\(", "1", ")\""),
        ("if . then ", "1", " end"),
        ("try ", "1", ""),
        ("-", "1", ""),
        ("1 + ", "1", ""),
        ("1 | ", "1", ""),
        (". as $x | ", "$x", ""),
        ("def f: ", "1", "; f"),
        ("reduce . as $x (", "0; 1", ")"),
        (".[", "0", "]"),
    ];
    for (open, middle, close) in shapes {
        let n = (MAX_SOURCE_BYTES - middle.len()) / (open.len() + close.len());
        let source = format!("{}{middle}{}", open.repeat(n), close.repeat(n));
        assert!(source.len() <= MAX_SOURCE_BYTES);
        // Refusals and runtime errors are fine; a crash is not.
        if let Ok(program) = Program::compile(EXPR, &source) {
            let _ = eval(&program, &Input::default(), &door_vars(), &roomy()).await;
        }
    }
    let depth = MAX_SOURCE_BYTES / 2 - 1;
    let source = format!("{}1{}", "[".repeat(depth), "]".repeat(depth));
    assert_eq!(
        run(&source, Value::Null).await,
        Err(EvalError::TooDeep {
            max: Outputs::MAX_DEPTH
        })
    );
    let terms = MAX_SOURCE_BYTES / 4 - 1;
    let source = format!("0{}", " + 1".repeat(terms));
    assert_eq!(one(&source, Value::Null).await, json!(terms));
}

#[tokio::test]
async fn deep_values_are_built_on_large_stacks() {
    // Overflows the 2 MiB stack of an async runtime's worker thread (aborting the process) if
    // evaluated there.
    let deep = [
        ("reduce range(100000) as $i (0; [.]) | length", json!(1)),
        (
            "reduce range(9000) as $i (0; [.]) | tojson | length",
            json!(18001),
        ),
        (
            "reduce range(9000) as $i (0; {a: .}) | walk(.) | . == .",
            json!(true),
        ),
        (
            r#"("[" * 10000) + ("]" * 10000) | fromjson | flatten"#,
            json!([]),
        ),
        // jaq's own parser would recurse a million levels deep on this.
        (
            r#"("[" * 1000000) + ("]" * 1000000) | try fromjson catch .[-44:]"#,
            json!("... as JSON: nested deeper than 10000 levels"),
        ),
    ];
    for (source, expected) in deep {
        assert_eq!(one(source, Value::Null).await, expected, "{source}");
    }
    // Deeper than the guarded steps walk: refused, naming the limit.
    for source in [
        "reduce range(20000) as $i (0; [.]) | tojson | length",
        "reduce range(20000) as $i (0; {a: .}) as $x | reduce range(20000) as $i (0; {a: .}) \
         | . == $x",
    ] {
        match run(source, Value::Null).await {
            Err(EvalError::Limit(message)) => {
                assert!(
                    message.contains("nested deeper than the limit of 10000 levels"),
                    "{message}"
                )
            }
            other => panic!("{source}: {other:?}"),
        }
    }
    let limit = Outputs::MAX_DEPTH;
    let at_limit = format!("reduce range({limit}) as $i (0; [.]) | [.] | .[0]");
    assert!(run(&at_limit, Value::Null).await.is_ok());
    let too_deep = format!("reduce range({}) as $i (0; [.])", limit + 1);
    assert_eq!(
        run(&too_deep, Value::Null).await,
        Err(EvalError::TooDeep { max: limit })
    );
}

#[tokio::test]
async fn wrong_number_of_variables_is_an_error() {
    let program = compile("$parked");
    let outputs = eval(&program, &Input::default(), &door_vars()[..3], &roomy()).await;
    assert_eq!(
        outputs,
        Err(EvalError::WrongVariables {
            expected: 4,
            given: 3
        })
    );
}

#[test]
fn programs_and_inputs_are_shareable() {
    fn shareable<T: Send + Sync + Clone + 'static>() {}
    shareable::<Program>();
    shareable::<Input>();

    // One converted `$parked` serves many evaluations, from several threads, in place and
    // on the pool.
    let programs = [
        compile("$parked[0].id"),
        compile("$parked | sort | .[0].id"),
    ];
    let vars = door_vars();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..10 {
                    for program in &programs {
                        let (input, limits) = (Input::default(), roomy());
                        let outputs =
                            futures::executor::block_on(eval(program, &input, &vars, &limits));
                        assert_eq!(outputs.map(|o| o.first), Ok(Some(json!("i-42"))));
                    }
                }
            });
        }
    });
}

/// The heavy program the deadline tests use: accepted at save time, runs for minutes.
const HEAVY: &str = "[range(100000) as $a | range(100000)] | length";

fn deadline_limits() -> Limits {
    Limits {
        deadline: Duration::from_millis(50),
        ..Limits::default()
    }
}

/// The evaluation was stopped: given up at its deadline, not before it, or at a limit of
/// its budget (a program that allocates as it runs may reach one first on a fast machine).
/// How soon after the deadline is not asserted (a loaded machine delays it).
fn assert_stopped(result: Result<Outputs, EvalError>, started: Instant, what: &str) {
    let elapsed = started.elapsed();
    match result {
        Err(EvalError::Deadline { elapsed_ms: 50 }) => assert!(
            elapsed >= Duration::from_millis(50),
            "{what} gave up early: {elapsed:?}"
        ),
        Err(EvalError::Limit(_)) => {}
        other => panic!("{what} should have stopped, got {other:?}"),
    }
}

/// `run` awaited for at most [`WITHIN`]: a hang fails the test instead of stalling it.
async fn within<T>(what: &str, run: impl std::future::Future<Output = T>) -> T {
    match timeout(WITHIN, run).await {
        Ok(result) => result,
        Err(_) => panic!("{what} did not end within {WITHIN:?}"),
    }
}

#[tokio::test]
async fn a_heavy_program_passes_its_deadline() {
    let started = Instant::now();
    let result = within(HEAVY, run_with(HEAVY, Value::Null, &deadline_limits())).await;
    assert_stopped(result, started, HEAVY);
}

/// Programs accepted at save time that would run for minutes, each looping in its own way.
const RUNAWAYS: &[&str] = &[
    HEAVY,
    "try ([range(100000) as $a | range(100000)] | length) catch \"caught\"",
    "[range(100000) as $a | (range(100000) | tostring)?] | length",
    "[label $out | range(100000) as $a | range(100000)] | length",
    "reduce (range(100000) as $a | range(100000)) as $x (0; . + 1)",
    "[foreach (range(100000) as $a | range(100000)) as $x (0; . + 1)] | length",
    // The inner loop has no tick of its own (`select` is single-output), so the stop
    // comes between two of them: kept short, so that a loaded machine stops it promptly.
    "[range(100000) as $a | first(range(1000) | select(. < 0))] | length",
    "def f: [range(100000) as $a | range(100000)]; [f, f] | length",
    "[limit(100000; combinations(100000))] | length",
    "[range(100000) as $a | [range(1000)] | map(. + 1)] | length",
    "[range(100000) as $a | [range(1000)] | to_entries] | length",
    "[range(100000) | [range(1000)] | path(.[])] | length",
    "[range(100000) | [range(1000)] | (.[] |= . + 1)] | length",
    "[range(100000) | [range(1000)] | sort_by(-.)] | length",
    "[range(100000) | \"\\(range(100000))\"] | length",
    // Doubling a shared value: cheap to build, astronomically large as JSON.
    "reduce range(100) as $i ([0]; [., .])",
    // Exponentially many outputs without a single pipe.
    "[(0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1) + (0,1)] | length",
    "[{a: (0,1), b: (0,1), c: (0,1), d: (0,1), e: (0,1), f: (0,1), g: (0,1), h: (0,1), i: (0,1), j: (0,1), k: (0,1), l: (0,1), m: (0,1), n: (0,1), o: (0,1), p: (0,1), q: (0,1), r: (0,1), s: (0,1), t: (0,1), u: (0,1), v: (0,1), w: (0,1), x: (0,1), y: (0,1), z: (0,1), A: (0,1), B: (0,1), C: (0,1), D: (0,1), E: (0,1), F: (0,1), G: (0,1), H: (0,1), I: (0,1), J: (0,1), K: (0,1), L: (0,1), M: (0,1), N: (0,1)}] | length",
    "[\"\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\\(0,1)\"] | length",
    "[null | .[0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0][0,0]] | length",
    "[(true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true) and (true, true)] | length",
    "def f($a; $b; $c; $d; $e; $f; $g; $h; $i; $j; $k; $l; $m; $n; $o; $p; $q; $r; $s; $t; $u; $v; $w; $x; $y; $z; $A; $B; $C; $D; $E; $F; $G; $H; $I; $J; $K; $L; $M; $N): 0; [f(0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1; 0,1)] | length",
    "def f(g): [g, g, g]; f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(f(0)))))))))))))))))))))))))))))) | length",
    "[range(100000)] | sort_by([range(1000)] | length) | length",
];

#[test]
fn the_program_stops_itself_at_its_deadline() {
    // Evaluated on the test's thread, without the pool: only the ticks can stop them, and
    // `try`, `?`, `label` must not swallow the stop. A program the ticks did not stop
    // would run for minutes, and the test would never end.
    for source in RUNAWAYS {
        let program = compile(source);
        let started = Instant::now();
        let result = program.run_inline(&Input::default(), &door_vars(), &deadline_limits());
        assert_stopped(result, started, source);
    }
}

#[tokio::test]
async fn an_abandoned_evaluation_frees_its_worker() {
    // One worker, never replaced: the next evaluation can only start once the abandoned one
    // has stopped itself (its ticks, or the cancellation the watchdog raises).
    let pool = Pool::new(1, 0);
    let quick = compile("$parked[0].id");
    let (input, limits) = (Input::default(), deadline_limits());
    for source in RUNAWAYS {
        let program = compile(source);
        let started = Instant::now();
        let run = eval_pooled(&pool, &program, &input, &limits);
        assert_stopped(within(source, run).await, started, source);

        // Queued behind the abandoned evaluation on the only worker: it is answered only
        // once that one has stopped, and waiting for it is bounded.
        let outputs = within(source, eval_pooled(&pool, &quick, &input, &roomy())).await;
        assert_eq!(
            outputs.map(|o| o.first),
            Ok(Some(json!("i-42"))),
            "after {source}"
        );
    }
    assert_eq!(pool.live(), 1);
}

#[tokio::test]
async fn a_program_stuck_in_one_native_step_does_not_hold_the_caller() {
    // One `contains` over two long arrays: quadratic work inside a single native call, which
    // no tick can interrupt. Its precheck refuses it before it starts: unguarded, it would
    // run for minutes and the watchdog would report the deadline instead. The deadline is
    // roomy so that building the arrays on a loaded machine does not pass it first.
    let stuck = "[range(40000)] | contains([range(40000)])";
    match within(stuck, run(stuck, Value::Null)).await {
        Err(EvalError::Limit(message)) => {
            assert!(message.starts_with("contains exceeds"), "{message}")
        }
        other => panic!("{other:?}"),
    }

    // Evaluations go on, in place and on the pool, each awaited for a bounded time.
    for source in ["[$parked[].id]", "[$parked[].id] | sort"] {
        for _ in 0..4 {
            let outputs = within(source, run(source, Value::Null)).await;
            assert_eq!(outputs.map(|o| o.first), Ok(Some(json!(["i-42"]))));
        }
    }
}

/// Programs the screen lets run in place, each with an input it reads.
const SHALLOW: &[(&str, &str)] = &[
    ("[$parked[].id]", "null"),
    (r#"{id: $parked[0].id, payload: {answer: "yes"}}"#, "null"),
    (
        "{payload: .msg, waiting: ($parked | length)}",
        r#"{"msg": "hi"}"#,
    ),
    (
        r#"(first($parked[] | select(.status == "asking")) | {id: .id, payload: "yes"}) // null"#,
        "null",
    ),
    (
        r#"if .op == "start" and ($parked | length) < 10 then {ttl: .ttl} else null end"#,
        r#"{"op": "start", "ttl": "1h"}"#,
    ),
    ("$parked | map(.id) | length + 1", "null"),
    (
        ". as {a: $x} | [$x, $subject.id, $door.name, $now]",
        r#"{"a": [1, 2]}"#,
    ),
    ("try .a", "[1]"),
    (
        "[.[] | select(type == \"number\") | . % 2] | any",
        "[1, 2, \"x\"]",
    ),
    ("to_entries | map(.key) | first", r#"{"b": 1, "a": 2}"#),
    ("[limit(3; range(10))] | last", "null"),
    (".[1:] | length", "[1, 2, 3]"),
];

/// Programs that must go to the pool: each walks a value deeply, repeats itself, or nests
/// too deep to be sure of the stack.
const NOT_SHALLOW: &[&str] = &[
    ".a == .b",
    ". + .",
    ".a * 2",
    "\"\\(.)\"",
    "@json",
    "tostring",
    "tojson",
    "sort",
    "add",
    "error(\"x\")",
    "contains([1])",
    "reduce .[] as $x (0; . + $x)",
    "[foreach .[] as $x (0; . + 1)]",
    "def f: 1; f",
    "..",
    "try .a catch .",
    ".[.k]",
    ".[.a:]",
    ".a |= 1",
    ".a = 1",
];

#[test]
fn shallow_programs_are_told_apart() {
    for (source, _) in SHALLOW {
        assert!(compile(source).is_shallow(), "{source} should be shallow");
    }
    for source in NOT_SHALLOW {
        assert!(
            !compile(source).is_shallow(),
            "{source} should not be shallow"
        );
    }
    // Nesting: within the limit in place, past it to the pool.
    let nested = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
    assert!(compile(&nested(8)).is_shallow());
    assert!(!compile(&nested(40)).is_shallow());
}

#[tokio::test]
async fn a_shallow_batch_runs_in_place_with_the_pool_s_results() {
    for (source, input) in SHALLOW {
        let input: Value = serde_json::from_str(input).expect("test input is JSON");
        let program = compile(source);
        let in_place = Program::run_in_place(
            &[&program, &program],
            &Input::from_json(&input),
            &door_vars(),
            &roomy(),
            whole_deadline(),
        );
        let input = Input::from_json(&input);
        let pooled = eval_pooled(Pool::global(), &program, &input, &roomy()).await;
        assert!(pooled.is_ok(), "{source}: {pooled:?}");
        assert_eq!(in_place, Some(vec![pooled.clone(), pooled]), "{source}");
    }
    // One program that is not shallow sends the whole batch to the pool.
    let (shallow, deep) = (compile("."), compile("tostring"));
    let batch = [&shallow, &deep];
    let in_place = Program::run_in_place(
        &batch,
        &Input::default(),
        &door_vars(),
        &roomy(),
        whole_deadline(),
    );
    assert_eq!(in_place, None);
}

#[tokio::test]
async fn a_shallow_program_past_its_budget_goes_to_the_pool() {
    // Linear, but in a hundred thousand steps: longer than the in-place budget, far shorter
    // than the deadline.
    let long = compile("[range(100000)] | map(select(. >= 0)) | length");
    assert!(long.is_shallow());
    let vars = door_vars();
    let in_place = Program::run_in_place(
        &[&long],
        &Input::default(),
        &vars,
        &roomy(),
        IN_PLACE_BUDGET,
    );
    assert_eq!(in_place, None);
    let results = Program::run_batch(&[&long], &Input::default(), &vars, &roomy()).await;
    let firsts: Vec<_> = results.into_iter().map(|r| r.map(|o| o.first)).collect();
    assert_eq!(firsts, vec![Ok(Some(json!(100000)))]);

    // The runaways the screen lets through give up their in-place attempt the same way
    // (the ticks stop them at the budget), instead of holding the caller's thread.
    let shallow: Vec<Program> = RUNAWAYS
        .iter()
        .map(|s| compile(s))
        .filter(Program::is_shallow)
        .collect();
    assert!(
        shallow.len() >= 2,
        "only {} shallow runaways",
        shallow.len()
    );
    for program in &shallow {
        let in_place = Program::run_in_place(
            &[program],
            &Input::default(),
            &vars,
            &roomy(),
            IN_PLACE_BUDGET,
        );
        assert_eq!(in_place, None, "{program:?}");
    }
}

#[tokio::test]
async fn an_error_naming_a_huge_shared_value_is_cut_short() {
    // Twenty-five doublings: a value of 2^25 leaves (hundreds of megabytes printed), which
    // the error names.
    let doubled = format!("{}.a", "[., .] | ".repeat(25));
    let program = compile(&doubled);
    assert!(program.is_shallow());
    let in_place = Program::run_in_place(
        &[&program],
        &Input::default(),
        &door_vars(),
        &roomy(),
        whole_deadline(),
    );
    let pooled = eval_pooled(Pool::global(), &program, &Input::default(), &roomy()).await;
    for result in [in_place.and_then(|r| r.into_iter().next()), Some(pooled)] {
        match result {
            Some(Err(EvalError::Runtime(message))) => {
                assert!(message.starts_with("cannot index [[[["), "{message}");
                assert!(message.ends_with('…'), "{message}");
                assert!(message.len() <= 1024 + '…'.len_utf8(), "{}", message.len());
            }
            other => panic!("expected a runtime error, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn guarded_steps_keep_jq_s_answers() {
    let cases = [
        (
            r#"[range(10000) | tostring] | join(",") | length"#,
            json!(48889),
        ),
        (
            "reduce range(10000) as $i ([]; . + [$i]) | length",
            json!(10000),
        ),
        (
            r#"[{a: 2}, {a: 1}, {a: 2}] | group_by(.a) | map(length)"#,
            json!([1, 2]),
        ),
        (
            "[3, 1, 2] | sort, ([[1], [0]] | min), ([1, 2, 3] | bsearch(2))",
            json!([1, 2, 3]),
        ),
        (r#"{a: [1, {b: 2}]} == {a: [1, {b: 2}]}"#, json!(true)),
        (
            r#""abc" | contains("b"), ("a,b" | indices(","))"#,
            json!(true),
        ),
        ("[1, 2, 3] - [2], ({a: 1} + {b: 2})", json!([1, 3])),
        (r#""\([1, "x"])""#, json!("[1,\"x\"]")),
    ];
    for (source, expected) in cases {
        let outputs = run(source, Value::Null)
            .await
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        assert_eq!(outputs.first, Some(expected), "{source}");
    }
}

/// Programs whose memory is the interpreter's own (arrays collected, objects built, paths
/// output, containers an update copies), each with the limit it must reach. Accepted at save
/// time, and bounded by nothing but the deadline before these were charged.
const ALLOCATING: &[(&str, &str)] = &[
    (
        "[range(100000) as $a | range(100000)] | length",
        "[...] would make a value over the limit of 16777216 bytes",
    ),
    (
        "[limit(100000000; range(100000) as $a | range(100000))] | length",
        "[...] would make a value over the limit",
    ),
    (
        "[range(100000) as $a | range(100000) | {a: .}] | length",
        "exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "[range(100000) as $a | range(100) | [range(20)]] | length",
        "exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "reduce (range(100000) as $a | range(100000)) as $x ([]; . + [$x]) | length",
        "exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "[foreach (range(100000) as $a | range(100000)) as $x (0; . + 1; [.])] | length",
        "exceeds the evaluation's limit",
    ),
    (
        "reduce range(100000) as $i (0; {a: .}) | [paths] | length",
        "path(...) exceeds the evaluation's limit",
    ),
    (
        "[range(2000) as $a | range(2000) | {a: 1}] | [path(..)] | length",
        "exceeds the evaluation's limit",
    ),
    // Nesting, which jaq drops by recursion: a level charged per container made.
    (
        "reduce (range(100000) as $a | range(100000)) as $i (0; [.]) | length",
        "[...] exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "reduce (range(100000) as $a | range(100000)) as $i (0; {a: .}) | length",
        "{...} exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "reduce (range(100000) as $a | range(100000)) as $i ([0]; .[0] = .) | length",
        "an update exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "reduce (range(100000) as $a | range(100000)) as $i ([0]; setpath([0]; .)) | length",
        "exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "reduce (range(100000) as $a | range(100000)) as $i ([[[0]]]; .[0][0] |= [.]) | length",
        "exceeds the evaluation's limit of 67108864 bytes allocated",
    ),
    (
        "reduce (range(100000) as $a | range(100000)) as $i ([0]; group_by(.)) | length",
        "exceeds the evaluation's limit",
    ),
];

/// A deadline far past the time the [`ALLOCATING`] programs take to reach their limits,
/// even on a loaded machine in a debug build: they must stop at a limit, not at the
/// deadline.
fn long_limits() -> Limits {
    Limits {
        deadline: Duration::from_secs(120),
        ..Limits::default()
    }
}

/// The interpreter's allocations end an evaluation at the budget's limits, with the limit's
/// error, rather than at its deadline. The nesting ones also drop, on a pool worker, the
/// deepest value the budget lets a program build: this test aborts if that overflows.
#[tokio::test]
async fn the_interpreter_s_own_allocations_reach_the_budget() {
    let limits = long_limits();
    for (source, limit) in ALLOCATING {
        let run = run_with(source, Value::Null, &limits);
        let result = match timeout(limits.deadline * 2, run).await {
            Ok(result) => result,
            Err(_) => panic!("{source} did not end"),
        };
        match result {
            Err(EvalError::Limit(message)) => {
                assert!(message.contains(limit), "{source}: {message}")
            }
            other => panic!("{source} should reach a limit, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn charged_constructs_keep_jq_s_answers() {
    let input = json!({"a": {"b": 1, "c": [1, 2]}, "d": null});
    let cases = [
        ("[.a.c[] | . * 2]", json!([2, 4])),
        ("[]", json!([])),
        ("[empty]", json!([])),
        ("{}", json!({})),
        ("{x: 1, (\"y\"): .a.b}", json!({"x": 1, "y": 1})),
        ("[{x: (1, 2)}]", json!([{"x": 1}, {"x": 2}])),
        (
            "[paths]",
            json!([
                ["a"],
                ["a", "b"],
                ["a", "c"],
                ["a", "c", 0],
                ["a", "c", 1],
                ["d"]
            ]),
        ),
        ("[path(.a.c[])]", json!([["a", "c", 0], ["a", "c", 1]])),
        (
            "[paths(type == \"number\")]",
            json!([["a", "b"], ["a", "c", 0], ["a", "c", 1]]),
        ),
        (".a.b = 5 | .a", json!({"b": 5, "c": [1, 2]})),
        (".a.c[0] |= . + 10 | .a.c", json!([11, 2])),
        (".a.c[] += 1 | .a.c", json!([2, 3])),
        (".a.c[1:] = [9] | .a.c", json!([1, 9])),
        (".d //= 3 | .d", json!(3)),
        (".a.x = {y: 1} | .a.x.y", json!(1)),
        ("setpath([\"a\", \"c\", 1]; 0) | .a.c", json!([1, 0])),
        ("getpath([\"a\", \"c\", 1])", json!(2)),
        ("del(.a.c) | .a", json!({"b": 1})),
        ("delpaths([[\"a\"], [\"d\"]])", json!({})),
        ("to_entries | map(.key)", json!(["a", "d"])),
        ("with_entries(.value = 1)", json!({"a": 1, "d": 1})),
        ("[.a | .. ] | length", json!(5)),
        (
            "(.a | .. | numbers) |= 0 | .a",
            json!({"b": 0, "c": [0, 0]}),
        ),
        ("[.a.c[] as $x | [$x]] | group_by(.[0]) | length", json!(2)),
        ("pick(.a.b)", json!({"a": {"b": 1}})),
    ];
    for (source, expected) in cases {
        assert_eq!(one(source, input.clone()).await, expected, "{source}");
    }
}
