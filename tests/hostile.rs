//! The door sandbox against hostile expressions: each is saved as a route door and visited
//! on one subject; it must end within bounds (refused with an error naming what it hit, or
//! answered), and a cheap visit on another subject and door must answer promptly after it.
//!
//! Memory is asserted on the peak of the bytes allocated and not yet freed (this binary's
//! global allocator counts them): the corpus runs serially in one test in its own binary,
//! so the peak's growth over the baseline is what the worst evaluation (with whatever
//! abandoned ones still ran beside it) held at once. The process's peak resident set
//! (`VmHWM`) is printed beside it: it adds what the allocator kept of what was freed,
//! which varies with how many threads ran the evaluations (and failed the test under
//! load when it was the measure). The margin is documented in `docs/doors.md` (the
//! sandbox section).

mod common;

use std::time::{Duration, Instant};

use parkway::{DoorSpec, Runtime, Start};
use peak_alloc::PeakAlloc;
use serde_json::{Value, json};

/// Counts the bytes allocated and not yet freed, and their peak.
#[global_allocator]
static ALLOCATED: PeakAlloc = PeakAlloc;

/// A value of 2^40 leaves, a few kilobytes in memory: jaq shares the two halves.
const SHARED: &str = "(reduce range(40) as $i (0; [., .]))";

/// The same, built separately: equal, but not the same value.
const SHARED_TOO: &str = "(reduce range(40) as $i (1 - 1; [., .]))";

/// How long any one visit may take, hostile or not: far above the deadline, so that only a
/// hang or a native step running on fails it.
const WITHIN: Duration = Duration::from_secs(10);

/// The growth of the peak of bytes held at once that the whole corpus may cause.
const MEMORY_MARGIN_BYTES: u64 = 512 << 20;

/// What a visit of a hostile door must do.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Fail with an error containing this.
    Fails(&'static str),
    /// Fail at a limit of the budget or at the deadline (which comes first depends on the
    /// machine and the build).
    Stops,
    /// Answer or fail, as long as it ends within bounds.
    Ends,
    /// Be refused when the door is saved, with an error containing this.
    Refused(&'static str),
}

use Expect::{Ends, Fails, Refused, Stops};

/// What the error of a limit says.
const LIMIT: &str = "door expression stopped";

/// What the error of the deadline says.
const DEADLINE: &str = "deadline";

fn corpus() -> Vec<(String, Expect)> {
    let s = SHARED;
    let t = SHARED_TOO;
    let mut cases: Vec<(String, Expect)> = vec![
        // Sharing blow-up against every walking native.
        (format!("{s} as $a | {t} | . == $a"), Stops),
        (format!("{s} as $a | {t} | . != $a"), Stops),
        (format!("{s} as $a | {t} | . < $a"), Stops),
        (format!("{s} as $a | {t} | . >= $a"), Stops),
        (format!("{s} | tojson | length"), Stops),
        (format!("{s} | tostring | length"), Stops),
        (format!("{s} | \"\\(.)\" | length"), Stops),
        (format!("{s} | @html | length"), Stops),
        (format!("{s} | @base64 | length"), Stops),
        (format!("{s} | @sh"), Ends),
        (format!("{s} | [..] | length"), Stops),
        (format!("{s} | [paths] | length"), Stops),
        (format!("{s} | flatten | length"), Stops),
        (format!("{s} | walk(.) | length"), Stops),
        (format!("{s} | [paths(type == \"number\")] | length"), Stops),
        (format!("{s} | tobytes | length"), Stops),
        (format!("{s} as $a | {t} | contains($a)"), Stops),
        (format!("{s} as $a | {t} | inside($a)"), Stops),
        (format!("{s} as $a | [{t}, $a] | sort | length"), Stops),
        (format!("{s} as $a | [{t}, $a] | unique | length"), Stops),
        (
            format!("{s} as $a | [{t}, $a] | group_by(.) | length"),
            Stops,
        ),
        (
            format!("{s} as $a | [{t}, $a] | sort_by(.) | length"),
            Stops,
        ),
        (format!("{s} as $a | [{t}, $a] | min | length"), Stops),
        (format!("{s} as $a | [{t}, $a] | max_by(.) | length"), Stops),
        (format!("{s} as $a | [$a, {t}] | index($a)"), Stops),
        (format!("{s} as $a | [{t}] | bsearch($a)"), Stops),
        (format!("{s} as $a | [{t}] - [$a] | length"), Stops),
        (format!("{{a: {s}}} * {{a: {t}}} | length"), Stops),
        (format!("{s} as $a | {{}} | has($a)"), Stops),
        (
            format!("{s} as $a | {{}} | .[$a]"),
            Fails("cannot index with an array"),
        ),
        (
            format!("{{a: 1}} as $k | {s} as $a | {{}} | .[$k + {{b: $a}}]"),
            Stops,
        ),
        (format!("{s} as $a | {{($a): 1}}"), Fails("object key")),
        (
            format!("[{s}] | .[[{t}]]"),
            Fails("cannot index with an array"),
        ),
        (format!("{s} | error"), Fails("door expression failed")),
        (format!("{s} as $a | try error({t}) catch (. == $a)"), Stops),
        (format!("{s} | [.[] | tojson] | length"), Stops),
        (
            format!("{s} | {{a: .}} | to_entries | .[0].value | tojson"),
            Stops,
        ),
        (format!("{s} | [limit(3; .. | numbers)]"), Ends),
        // The output itself: converted under the budget.
        (s.to_string(), Stops),
        // String growth.
        (r#"reduce range(40) as $i ("x"; . + .)"#.into(), Stops),
        (r#"("x" * 16000000) | . + . | length"#.into(), Stops),
        (
            r#"[range(1000) | "x" * 1000000 + "\(.)"] | length"#.into(),
            Stops,
        ),
        (r#"[range(1000) | "x" * 1000000] | length"#.into(), Stops),
        (
            r#"reduce range(30) as $i ([1]; . + .) | length"#.into(),
            Stops,
        ),
        (
            r#"reduce range(30) as $i ({a: 1}; {a: ., b: .}) | tojson"#.into(),
            Stops,
        ),
        (r#""x" * 10000000 | explode | length"#.into(), Stops),
        (r#""<" * 10000000 | @html | length"#.into(), Stops),
        (
            r#"[range(100000) | tostring] | join(",") | length"#.into(),
            Ends,
        ),
        (
            r#"[range(100000)] | tojson as $j | [range(1000) | $j] | join(",") | length"#.into(),
            Stops,
        ),
        (r#""x" * 1000000 | [splits("")] | length"#.into(), Stops),
        (r#""x" * 10000000 | . / "" | length"#.into(), Stops),
        (r#"[range(100000)] | implode | length"#.into(), Ends),
        (
            r#"reduce range(100000) as $i (""; . + "xxxxxxxxxx") | length"#.into(),
            Ends,
        ),
        // Regular expressions.
        (r#""a" * 100000 | test("(a*)*b")"#.into(), Ends),
        (r#""a" * 1000000 | test("(a{1000}){1000}")"#.into(), Stops),
        (r#"("a" * 100001) as $re | "a" | test($re)"#.into(), Stops),
        (r#""a" * 100000 | [match(""; "g")] | length"#.into(), Ends),
        (r#""a" * 1000000 | [match(""; "g")] | length"#.into(), Stops),
        (r#""ab" * 500000 | gsub("a"; "xyz") | length"#.into(), Stops),
        (r#""x" * 1000000 | test("(x+x+)+y")"#.into(), Ends),
        // Deep nesting built by the expression.
        ("reduce range(100000) as $i (0; [.]) | tojson".into(), Stops),
        (
            "reduce range(100000) as $i (0; [.]) as $a | reduce range(100000) as $i (0; [.]) \
             | . == $a"
                .into(),
            Stops,
        ),
        (
            "reduce range(100000) as $i (0; [.]) | flatten | length".into(),
            Ends,
        ),
        (
            "reduce range(100000) as $i (0; {a: .}) | [paths] | length".into(),
            Ends,
        ),
        (
            "reduce range(100000) as $i (0; [.]) | [..] | length".into(),
            Ends,
        ),
        (
            "reduce range(100000) as $i (0; [.]) | walk(.) | length".into(),
            Ends,
        ),
        (
            "reduce range(100000) as $i (0; [[[[[[[[[[.]]]]]]]]]]) | length".into(),
            Ends,
        ),
        (
            "reduce range(100000) as $i (null; .[0] = .) | length".into(),
            Ends,
        ),
        (
            r#"("[" * 10000) + ("]" * 10000) | fromjson | tojson | length"#.into(),
            Ends,
        ),
        // Ranges at the literal limit, and numbers at the edges.
        ("[range(100000)] | length".into(), Ends),
        (
            "[range(100000) as $a | range(100000)] | length".into(),
            Stops,
        ),
        (
            "[range(0; 1; 0.000001)] | length".into(),
            Refused("can run away"),
        ),
        ("[range(1e16; 10000000000000001)] | length".into(), Ends),
        ("[limit(1000000000; range(100000))] | length".into(), Ends),
        ("[range(100000)] | contains([range(100000)])".into(), Stops),
        ("[range(100000)] | indices([range(50000)])".into(), Stops),
        (
            "[range(100000)] as $a | [range(100000)] | . - $a | length".into(),
            Ends,
        ),
        (
            "[range(100000) | {(tostring): .}] | add | keys | length".into(),
            Ends,
        ),
        ("1e308 * 10".into(), Ends),
        (
            "[-0, 0, nan, infinite, -infinite, 1e1000] | sort | unique | tojson".into(),
            Ends,
        ),
        (
            "100000000000000000000000000000 * 100000000000000000000000000000".into(),
            Ends,
        ),
        (
            "reduce range(64) as $i (100000000000000000000; . * .) | tostring | length".into(),
            Stops,
        ),
        ("pow(2; 1e6), pow(10; 400) | tostring".into(), Ends),
        ("1e308 | todate".into(), Fails("cannot use")),
        ("-1e300 | gmtime".into(), Fails("cannot use")),
        ("jn(2000000000; 1.5)".into(), Fails("Bessel")),
        (
            "9223372036854775807 + 1, (-9223372036854775808) % -1".into(),
            Ends,
        ),
        ("[range(10)] | .[1e300:], .[-1e300:], .[1e300]".into(), Ends),
        (r#""x" | .[1e18:], ltrimstr("x" * 100)"#.into(), Ends),
        (
            "infinite | floor | tostring, (nan | floor), (-infinite | round)".into(),
            Ends,
        ),
        ("[range(3000)] | combinations(2) | length".into(), Ends),
        ("[range(20)] | [combinations] | length".into(), Ends),
    ];
    // Deep nesting in the input.
    cases.push((". | tojson | length".into(), Ends));
    cases.push(("[paths] | length".into(), Ends));
    cases.push((". == (tojson | fromjson)".into(), Ends));
    cases
}

/// Expressions whose memory is the interpreter's own (arrays collected, objects built,
/// paths output, containers an update copies), each with what its error must say. They are
/// visited on a runtime whose deadline is [`FAR`], so that each must stop at a limit of the
/// budget, not at the deadline. The nesting ones also drop the deepest value the budget
/// lets an expression build, on a pool worker.
fn allocating() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "[range(100000) as $a | range(100000)] | length",
            "[...] would make a value over the limit",
        ),
        (
            "[limit(100000000; range(100000) as $a | range(100000))] | length",
            "[...] would make a value over the limit",
        ),
        (
            "[range(100000) as $a | range(100000) | {a: .}] | length",
            "{...} exceeds the evaluation's limit of 67108864 bytes allocated",
        ),
        (
            "reduce (range(100000) as $a | range(100000)) as $x ([]; . + [$x]) | length",
            "exceeds the evaluation's limit of 67108864 bytes allocated",
        ),
        (
            "reduce range(100000) as $i (0; {a: .}) | [paths] | length",
            "path(...) exceeds the evaluation's limit",
        ),
        (
            "reduce (range(100000) as $a | range(100000)) as $i (0; [.]) | length",
            "[...] exceeds the evaluation's limit of 67108864 bytes allocated",
        ),
        (
            "reduce (range(100000) as $a | range(100000)) as $i ([0]; .[0] = .) | length",
            "an update exceeds the evaluation's limit of 67108864 bytes allocated",
        ),
    ]
}

/// The deadline of the runtime the [`allocating`] expressions are visited on: far past the
/// time they take to reach their limits, even in a debug build on a loaded machine.
const FAR: Duration = Duration::from_secs(120);

/// An input nested [`DEPTH`] levels deep (deeper inputs are the caller's: serialising the
/// visit's input to measure it recurses in the caller's thread).
const DEPTH: usize = 1000;

fn deep_input() -> Value {
    let mut v = json!(0);
    for _ in 0..DEPTH {
        v = json!([v]);
    }
    v
}

/// The process's peak resident set, in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map_or(0, |kb| kb * 1024)
}

async fn canaries(rt: &Runtime, after: &str) {
    for door in ["canary", "canary-pool"] {
        let started = Instant::now();
        let visit = rt.visit(door, "c", json!({"n": 1})).await;
        let elapsed = started.elapsed();
        assert!(visit.is_ok(), "{door} after {after}: {visit:?}");
        assert!(elapsed < WITHIN, "{door} after {after} took {elapsed:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_expressions_end_within_bounds_and_leave_the_runtime_answering() {
    let (rt, _clock) = common::runtime().await;
    rt.run(Start::new("s", "asker")).await.unwrap();
    rt.run(Start::new("c", "asker")).await.unwrap();
    // Shallow, evaluated in place; and one that needs the pool.
    rt.save_door(DoorSpec::route("canary", "echo").start_expr("{n: .n, k: ($parked | length)}"))
        .unwrap();
    rt.save_door(
        DoorSpec::route("canary-pool", "echo").start_expr("{ids: ([$parked[].id] | sort)}"),
    )
    .unwrap();
    canaries(&rt, "nothing").await;
    let baseline = peak_rss();
    let held_before = ALLOCATED.current_usage() as u64;
    ALLOCATED.reset_peak_usage();

    // A runtime whose deadline no scheduling delay reaches: an expression that must fail
    // with its own error is evaluated there, so a busy machine cannot turn its failure
    // into the deadline's.
    let (far, _clock) = common::runtime_with(|b| b.jq_deadline(FAR)).await;
    far.run(Start::new("s", "asker")).await.unwrap();

    let deep = deep_input();
    let cases = corpus();
    assert!(cases.len() >= 30);
    for (i, (expr, expect)) in cases.iter().enumerate() {
        let name = format!("h{i}");
        let door = DoorSpec::route(&name, "echo").start_expr(expr);
        let on = if matches!(expect, Fails(_)) {
            &far
        } else {
            &rt
        };
        let saved = on.save_door(door);
        if let Refused(fragment) = expect {
            let error = saved.expect_err(expr).to_string();
            assert!(error.contains(fragment), "{expr}: {error}");
            continue;
        }
        saved.unwrap_or_else(|e| panic!("{expr} not saved: {e}"));
        let input = if expr.starts_with(". ") || expr.starts_with("[paths]") {
            deep.clone()
        } else {
            json!({})
        };
        let started = Instant::now();
        let visit = on.visit(&name, "s", input).await;
        let elapsed = started.elapsed();
        eprintln!(
            "{i}: {elapsed:?} {expr}: {}",
            match &visit {
                Ok(_) => "answered".to_owned(),
                Err(e) => e.to_string().chars().take(150).collect(),
            }
        );
        assert!(elapsed < WITHIN, "{expr} took {elapsed:?}");
        match (expect, &visit) {
            (Fails(fragment), Err(e)) => {
                let text = e.to_string();
                assert!(text.contains(fragment), "{expr}: {text}");
            }
            (Stops, Err(e)) => {
                let text = e.to_string();
                assert!(
                    text.contains(LIMIT) || text.contains(DEADLINE),
                    "{expr}: {text}"
                );
            }
            (Fails(_) | Stops, Ok(v)) => panic!("{expr} should have failed, got {v:?}"),
            _ => {}
        }
        canaries(&rt, expr).await;
    }

    // The interpreter's own allocations, with the deadline out of the way: each visit
    // stops at a limit of the budget.
    for (i, (expr, fragment)) in allocating().into_iter().enumerate() {
        let name = format!("a{i}");
        far.save_door(DoorSpec::route(&name, "echo").start_expr(expr))
            .unwrap_or_else(|e| panic!("{expr} not saved: {e}"));
        let started = Instant::now();
        let visit = far.visit(&name, "s", json!({})).await;
        let elapsed = started.elapsed();
        eprintln!("a{i}: {elapsed:?} {expr}: {visit:?}");
        assert!(elapsed < FAR, "{expr} took {elapsed:?}");
        match visit {
            Err(e) => {
                let text = e.to_string();
                assert!(text.contains(LIMIT), "{expr}: {text}");
                assert!(text.contains(fragment), "{expr}: {text}");
            }
            Ok(v) => panic!("{expr} should have failed, got {v:?}"),
        }
        canaries(&rt, expr).await;
    }

    // Many blow-ups at once, more than the pool has workers and replacements: none holds a
    // worker past its visit, so the pool still answers.
    for i in 0..24 {
        let name = format!("many{i}");
        let expr = format!("{SHARED} as $a | {SHARED_TOO} | [. == $a, tojson]");
        rt.save_door(DoorSpec::route(&name, "echo").start_expr(&expr))
            .unwrap();
    }
    let visits = (0..24).map(|i| {
        let rt = rt.clone();
        tokio::spawn(async move {
            let subject = format!("m{i}");
            rt.visit(&format!("many{i}"), &subject, json!({})).await
        })
    });
    let started = Instant::now();
    for visit in futures::future::join_all(visits).await {
        assert!(visit.unwrap().is_err());
    }
    assert!(started.elapsed() < WITHIN);
    canaries(&rt, "24 blow-ups at once").await;
    let together = (0..16).map(|_| {
        let rt = rt.clone();
        tokio::spawn(async move { rt.visit("canary-pool", "c", json!({"n": 1})).await })
    });
    let started = Instant::now();
    for visit in futures::future::join_all(together).await {
        assert!(visit.unwrap().is_ok());
    }
    assert!(started.elapsed() < WITHIN, "16 pool canaries at once");

    let grown = peak_rss().saturating_sub(baseline);
    let held = (ALLOCATED.peak_usage() as u64).saturating_sub(held_before);
    eprintln!(
        "peak resident set grew by {} MiB; peak held by {} MiB",
        grown >> 20,
        held >> 20
    );
    assert!(
        held < MEMORY_MARGIN_BYTES,
        "the peak held grew by {} MiB",
        held >> 20
    );
}
