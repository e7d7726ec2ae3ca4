//! Races on one id between resume, cancel and expiry, on a manual clock: each ask is
//! resolved exactly once, by whichever the subject actor handles first, every time.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use parkway::{
    CancelError, EntryStatus, Event, IdProblem, ManualClock, Resolution, ResumeError, Resumed,
    RunStatus, Runtime, Start,
};
use serde_json::json;
use tokio::sync::broadcast;
use tokio::time::timeout;

/// Past the 10m deadline `asker` sets.
const PAST_DEADLINE: Duration = Duration::from_secs(10 * 60 + 1);

/// Hang guard only: a lost message shows as a timeout, never as a slow pass.
const GUARD: Duration = Duration::from_secs(60);

/// One of the three ways to resolve an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Op {
    Resume,
    Cancel,
    Expire,
}

/// Park one `asker` run on `subject`; returns its run id and interaction id.
async fn park(rt: &Runtime, subject: &str) -> (String, String) {
    let record = rt.run(Start::new(subject, "asker")).await.unwrap();
    assert_eq!(record.status, RunStatus::Parked, "{record:?}");
    let asks = record.asks.expect("a parked record carries its asks");
    assert_eq!(asks.len(), 1);
    (record.run_id, asks[0].id.clone())
}

/// Apply `op` to `id`; returns whether the operation itself reports a win. An expiry
/// reports nothing (its win is read from the events); a refusal must be one of the
/// refusals a loser gets.
async fn apply(rt: Runtime, clock: ManualClock, subject: String, id: String, op: Op) -> bool {
    match op {
        Op::Resume => match rt.resume(&subject, &id, json!("yes")).await {
            Ok(Resumed::Outcome(record)) => {
                assert_eq!(record.status, RunStatus::Succeeded, "{record:?}");
                assert_eq!(record.result, Some(json!({"answer": "yes"})));
                true
            }
            // The winner removed the entry: the subject remembers it was resolved.
            Err(ResumeError::Refused(IdProblem::AlreadyResolved { id: refused, .. })) => {
                assert_eq!(refused, id);
                false
            }
            Err(ResumeError::Refused(IdProblem::WrongStatus { status, .. })) => {
                assert_eq!(status, EntryStatus::Running);
                false
            }
            other => panic!("resume of {id}: unexpected {other:?}"),
        },
        Op::Cancel => match rt.cancel(&subject, &[&id]).await {
            Ok(()) => true,
            Err(CancelError::Refused(problems)) => {
                assert_eq!(problems.0.len(), 1, "{problems}");
                match &problems.0[0] {
                    IdProblem::AlreadyResolved { id: refused, .. } => assert_eq!(refused, &id),
                    IdProblem::WrongStatus { status, .. } => {
                        assert_eq!(*status, EntryStatus::Running);
                        let message = problems.to_string();
                        assert!(
                            message.contains("not asking or a waiting outcome (status: running)"),
                            "{message}"
                        );
                    }
                    other => panic!("cancel of {id}: unexpected problem {other:?}"),
                }
                false
            }
            Err(other) => panic!("cancel of {id}: unexpected {other:?}"),
        },
        Op::Expire => {
            clock.advance(PAST_DEADLINE);
            rt.settle().await;
            false
        }
    }
}

/// What the events say about one interaction and its run.
#[derive(Debug, Default)]
struct Seen {
    expiries: usize,
    resolutions: Vec<Resolution>,
    run_ends: usize,
}

fn seen(events: &[Event], run: &str, interaction: &str) -> Seen {
    let mut out = Seen::default();
    for e in events {
        match e {
            Event::ExpiryFired { interaction: i, .. } if i == interaction => out.expiries += 1,
            Event::AskResolved {
                interaction: i,
                how,
                ..
            } if i == interaction => out.resolutions.push(*how),
            Event::RunFinished { run: r, .. }
            | Event::RunFailed { run: r, .. }
            | Event::RunCancelled { run: r, .. }
                if r == run =>
            {
                out.run_ends += 1
            }
            _ => {}
        }
    }
    out
}

/// One race of `ops` on a fresh ask on `subject`. The ops are spawned in an order and
/// with a head start picked by `variant`, so iterations cover different interleavings.
/// Asserts exactly one winner and returns it.
async fn race(
    rt: &Runtime,
    clock: &ManualClock,
    events: &mut broadcast::Receiver<Event>,
    subject: &str,
    ops: &[Op],
    variant: usize,
) -> Op {
    let (run, id) = park(rt, subject).await;
    let mut order: Vec<Op> = ops.to_vec();
    order.rotate_left(variant % ops.len());
    if (variant / ops.len()) % 2 == 1 {
        order.reverse();
    }
    let mut tasks = Vec::new();
    for (k, op) in order.iter().copied().enumerate() {
        let (rt, clock, subject, id) = (rt.clone(), clock.clone(), subject.to_owned(), id.clone());
        let head_start = (variant / 7 + k) % 3;
        tasks.push((
            op,
            tokio::spawn(async move {
                for _ in 0..head_start {
                    tokio::task::yield_now().await;
                }
                apply(rt, clock, subject, id, op).await
            }),
        ));
    }
    let mut winners = Vec::new();
    for (op, task) in tasks {
        if timeout(GUARD, task).await.expect("hang guard").unwrap() {
            winners.push(op);
        }
    }
    rt.settle().await;
    let seen = seen(&common::drain(events), &run, &id);
    assert!(
        seen.expiries <= 1,
        "{id}: expiry fired {} times",
        seen.expiries
    );
    if seen.expiries == 1 {
        winners.push(Op::Expire);
    }
    assert_eq!(
        winners.len(),
        1,
        "{subject} {id}: exactly one of {order:?} must win, got {winners:?}"
    );
    let winner = winners[0];
    let how = match winner {
        Op::Resume => Resolution::Resumed,
        Op::Cancel => Resolution::Cancelled,
        Op::Expire => Resolution::Expired,
    };
    assert_eq!(
        seen.resolutions,
        [how],
        "{id}: resolved once, by the winner"
    );
    assert_eq!(seen.run_ends, 1, "{run}: ended exactly once");
    assert!(
        rt.list(subject).await.unwrap().is_empty(),
        "{subject}: nothing left parked"
    );
    winner
}

/// Resume, cancel and expiry racing on one id: exactly one wins every iteration, each
/// run ends exactly once, and nothing is left counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_cancel_and_expiry_race_and_exactly_one_wins() {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    let mut tally: HashMap<Op, usize> = HashMap::new();
    for i in 0..200 {
        let subject = format!("race-{i}");
        let ops = [Op::Resume, Op::Cancel, Op::Expire];
        let winner = race(&rt, &clock, &mut events, &subject, &ops, i).await;
        *tally.entry(winner).or_default() += 1;
    }
    println!("winners over 200 races: {tally:?}");
    rt.settle().await;
    let stats = rt.stats().await;
    assert_eq!(stats.caller_open, 0, "{stats:?}");
    assert_eq!(stats.runs, 0, "{stats:?}");
}

/// The same three-way race with `passivate_after` zero, so every resolution also races
/// the subject passivating and waking: still exactly one winner, nothing leaked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_three_way_race_holds_across_passivation() {
    let (rt, clock) = common::runtime_with(|b| b.passivate_after(Duration::ZERO)).await;
    let mut events = rt.events();
    for i in 0..200 {
        let subject = format!("passive-race-{i}");
        let ops = [Op::Resume, Op::Cancel, Op::Expire];
        race(&rt, &clock, &mut events, &subject, &ops, i).await;
    }
    rt.settle().await;
    let stats = rt.stats().await;
    assert_eq!(stats.caller_open, 0, "{stats:?}");
    assert_eq!(stats.runs, 0, "{stats:?}");
    assert!(
        stats.passivations > 0,
        "the race must meet passivations: {stats:?}"
    );
}

/// Run `iterations` concurrent races of `pair`, then the two orders one after the other
/// (where the first always wins), so both winners and both refusals are exercised.
async fn pairwise(pair: [Op; 2], iterations: usize) {
    let (rt, clock) = common::runtime().await;
    let mut events = rt.events();
    let mut tally: HashMap<Op, usize> = HashMap::new();
    for i in 0..iterations {
        let subject = format!("pair-{i}");
        let winner = race(&rt, &clock, &mut events, &subject, &pair, i).await;
        *tally.entry(winner).or_default() += 1;
    }
    println!("{pair:?} winners over {iterations} races: {tally:?}");
    for (n, (first, second)) in [(pair[0], pair[1]), (pair[1], pair[0])]
        .into_iter()
        .enumerate()
    {
        let subject = format!("ordered-{n}");
        let (run, id) = park(&rt, &subject).await;
        let first_won = apply(
            rt.clone(),
            clock.clone(),
            subject.clone(),
            id.clone(),
            first,
        )
        .await;
        rt.settle().await;
        let second_won = apply(
            rt.clone(),
            clock.clone(),
            subject.clone(),
            id.clone(),
            second,
        )
        .await;
        rt.settle().await;
        let seen = seen(&common::drain(&mut events), &run, &id);
        let expired = seen.expiries == 1;
        assert!(seen.expiries <= 1);
        assert!(!second_won, "{second:?} after {first:?} must be refused");
        if first == Op::Expire {
            assert!(expired, "{id}: the expiry applied first must fire");
        } else {
            assert!(first_won, "{first:?} applied first must win");
            assert!(!expired, "{id}: an expiry after {first:?} must do nothing");
        }
        assert_eq!(seen.resolutions.len(), 1, "{id}: {:?}", seen.resolutions);
        assert_eq!(seen.run_ends, 1, "{run}: ended exactly once");
    }
    rt.settle().await;
    let stats = rt.stats().await;
    assert_eq!(stats.caller_open, 0, "{stats:?}");
    assert_eq!(stats.runs, 0, "{stats:?}");
}

/// A resume racing an expiry: exactly one wins, the other is refused or does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_races_expiry() {
    pairwise([Op::Resume, Op::Expire], 100).await;
}

/// A resume racing a cancel: exactly one wins, the other is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_races_cancel() {
    pairwise([Op::Resume, Op::Cancel], 100).await;
}

/// A cancel racing an expiry: exactly one tears the chain down, the other is refused or
/// does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_races_expiry() {
    pairwise([Op::Cancel, Op::Expire], 100).await;
}

/// A second resume of an ask already resumed (and whose run has re-parked) is refused as
/// already resolved (resumed) and changes nothing.
#[tokio::test]
async fn a_second_resume_of_a_resumed_ask_is_refused_and_changes_nothing() {
    let (rt, _clock) = common::runtime().await;
    rt.register("twice", &[], |ctx, _, _| async move {
        let a = ctx
            .ask(parkway::Ask::caller("first?").expiry_at("10m"))
            .await?;
        let b = ctx
            .ask(parkway::Ask::caller("second?").expiry_at("10m"))
            .await?;
        Ok(json!({"a": a, "b": b}))
    });
    let mut events = rt.events();
    let record = rt.run(Start::new("s", "twice")).await.unwrap();
    let first = record.asks.unwrap()[0].id.clone();
    let Resumed::Outcome(record) = rt.resume("s", &first, json!("x")).await.unwrap() else {
        panic!("a lone ask resumes its run");
    };
    assert_eq!(record.status, RunStatus::Parked);
    rt.settle().await;
    let before = rt.list("s").await.unwrap();
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].question.as_deref(), Some("second?"));
    let open_before = rt.stats().await.caller_open;
    let _ = common::drain(&mut events);

    let again = rt.resume("s", &first, json!("y")).await;
    assert!(
        matches!(
            &again,
            Err(ResumeError::Refused(IdProblem::AlreadyResolved {
                id,
                how: parkway::Settled::Resumed,
                ..
            })) if *id == first
        ),
        "{again:?}"
    );
    rt.settle().await;
    assert_eq!(
        rt.list("s").await.unwrap(),
        before,
        "a refused resume changes nothing"
    );
    assert_eq!(rt.stats().await.caller_open, open_before);
    assert!(
        common::drain(&mut events).is_empty(),
        "a refused resume publishes nothing"
    );

    let second = before[0].id.clone();
    let Resumed::Outcome(done) = rt.resume("s", &second, json!("z")).await.unwrap() else {
        panic!("the second ask resumes its run");
    };
    assert_eq!(
        done.result,
        Some(json!({"a": "x", "b": "z"})),
        "the first answer stands"
    );
}

/// A second resume of an ask buffered in its group (status `running`) is refused as not
/// asking and changes nothing; the first answer is the one the run sees.
#[tokio::test]
async fn a_second_resume_of_a_buffered_ask_is_refused_and_changes_nothing() {
    let (rt, _clock) = common::runtime().await;
    rt.register("pair", &[], |ctx, _, _| async move {
        let a = ctx.ask(parkway::Ask::caller("a?").expiry_at("10m")).await;
        let b = ctx.ask(parkway::Ask::caller("b?").expiry_at("10m")).await;
        Ok(json!({"a": a?, "b": b?}))
    });
    let record = rt.run(Start::new("s", "pair")).await.unwrap();
    let asks = record.asks.unwrap();
    assert_eq!(asks.len(), 2);
    let (a, b) = (asks[0].id.clone(), asks[1].id.clone());
    let buffered = rt.resume("s", &a, json!("first")).await.unwrap();
    assert!(
        matches!(buffered, Resumed::Buffered { remaining: 1, .. }),
        "{buffered:?}"
    );
    let before = rt.list("s").await.unwrap();
    assert_eq!(before[0].status, EntryStatus::Running);
    let again = rt.resume("s", &a, json!("second")).await;
    assert!(
        matches!(
            &again,
            Err(ResumeError::Refused(IdProblem::WrongStatus { id, status: EntryStatus::Running, .. }))
                if *id == a
        ),
        "{again:?}"
    );
    assert_eq!(
        rt.list("s").await.unwrap(),
        before,
        "a refused resume changes nothing"
    );
    let Resumed::Outcome(done) = rt.resume("s", &b, json!("bee")).await.unwrap() else {
        panic!("the last ask of the group resumes the run");
    };
    assert_eq!(done.result, Some(json!({"a": "first", "b": "bee"})));
}

/// With `on_expiry = resume`, a resume racing the expiry: exactly one answer reaches the
/// run. A winning expiry resumes it with the marker and, having no receiver, leaves its
/// outcome waiting under the same id; the losing resume is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_races_an_expiry_that_resumes_and_exactly_one_answer_lands() {
    let (rt, clock) = common::runtime().await;
    rt.register("patient", &[], |ctx, _, _| async move {
        let ask = parkway::Ask::caller("wait?")
            .expiry_at("10m")
            .on_expiry(parkway::OnExpiry::Resume);
        let answer = ctx.ask(ask).await?;
        Ok(json!({"expired": parkway::is_expiry_marker(&answer), "answer": answer}))
    });
    let mut events = rt.events();
    let mut tally: HashMap<Op, usize> = HashMap::new();
    for i in 0..100 {
        let subject = format!("patient-{i}");
        let record = rt
            .run(Start::new(subject.as_str(), "patient"))
            .await
            .unwrap();
        let (run, id) = (record.run_id, record.asks.unwrap()[0].id.clone());
        let resume = {
            let (rt, subject, id) = (rt.clone(), subject.clone(), id.clone());
            tokio::spawn(async move {
                for _ in 0..i % 3 {
                    tokio::task::yield_now().await;
                }
                rt.resume(&subject, &id, json!("yes")).await
            })
        };
        let expire = {
            let (rt, clock) = (rt.clone(), clock.clone());
            tokio::spawn(async move {
                for _ in 0..(i / 3) % 3 {
                    tokio::task::yield_now().await;
                }
                clock.advance(PAST_DEADLINE);
                rt.settle().await;
            })
        };
        let resumed = timeout(GUARD, resume).await.expect("hang guard").unwrap();
        timeout(GUARD, expire).await.expect("hang guard").unwrap();
        rt.settle().await;
        let seen = seen(&common::drain(&mut events), &run, &id);
        assert_eq!(seen.run_ends, 1, "{run}: ended exactly once");
        assert_eq!(seen.resolutions.len(), 1, "{id}: {:?}", seen.resolutions);
        let listed = rt.list(&subject).await.unwrap();
        let winner = match resumed {
            Ok(Resumed::Outcome(done)) => {
                assert_eq!(done.status, RunStatus::Succeeded, "{done:?}");
                assert_eq!(
                    done.result,
                    Some(json!({"expired": false, "answer": "yes"}))
                );
                assert_eq!(
                    seen.expiries, 0,
                    "{id}: the resume won, the expiry must do nothing"
                );
                assert!(listed.is_empty(), "{listed:?}");
                Op::Resume
            }
            Err(ResumeError::Refused(IdProblem::WrongStatus { status, .. })) => {
                assert!(
                    matches!(status, EntryStatus::Running | EntryStatus::Finished),
                    "{status}"
                );
                assert_eq!(
                    seen.expiries, 1,
                    "{id}: the resume lost, so the expiry fired"
                );
                assert_eq!(seen.resolutions, [Resolution::Expired]);
                assert_eq!(common::ids(&listed), std::slice::from_ref(&id));
                assert_eq!(listed[0].status, EntryStatus::Finished);
                let taken = rt.take(&subject, &id).await.unwrap();
                assert_eq!(
                    taken,
                    json!({"expired": true, "answer": parkway::expiry_marker()})
                );
                Op::Expire
            }
            other => panic!("{id}: unexpected resume result {other:?}"),
        };
        *tally.entry(winner).or_default() += 1;
    }
    println!("resume vs resuming expiry over 100 races: {tally:?}");
    rt.settle().await;
    let stats = rt.stats().await;
    assert_eq!(stats.caller_open, 0, "{stats:?}");
    assert_eq!(stats.runs, 0, "{stats:?}");
}
