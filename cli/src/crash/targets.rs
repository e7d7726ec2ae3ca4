//! The runtime every generation opens: the same targets, registered on the builder so the
//! runs read back from the directory find them, and sequential ids, so an id issued twice
//! across a restart shows as a repeated number.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parkway::{Ask, Builder, Ctx, Ids, RunError};
use serde_json::{Value, json};

use super::log::{Line, Log, Target};

/// How far in the future every ask expires: far enough that the wall clock never expires
/// one during a test.
pub const EXPIRY: &str = "24h";

/// A builder on the store directory `store`, with the workload's targets registered;
/// every step a target runs for real is written to `log` as generation `generation`.
pub fn builder(
    store: &Path,
    postgres: Option<&str>,
    log: &Arc<Log>,
    generation: u64,
    passivate: Duration,
) -> Builder {
    let builder = Builder::default()
        .without_env()
        .ids(Ids::sequential())
        .passivate_after(passivate)
        // Records and waiting outcomes stay for the whole test.
        .waiting_retention(Duration::from_secs(7 * 24 * 3600));
    let mut builder = match postgres {
        Some(url) => builder.postgres(url),
        None => builder.data_dir(store),
    };
    for target in Target::ALL {
        let log = Arc::clone(log);
        builder = builder.register(target.name(), &[], move |ctx, kwargs, _| {
            run(target, ctx, kwargs, Arc::clone(&log), generation)
        });
    }
    builder
}

/// The ask number `k` of a run: its payload names the start's nonce, the run and `k`, so
/// a listed entry tells whose it is.
fn ask(ctx: &Ctx, nonce: &str, k: usize) -> Ask {
    Ask::caller(format!("answer {k}?"))
        .payload(json!({"nonce": nonce, "run": ctx.run_id(), "k": k}))
        .expiry_at(EXPIRY)
}

/// One activation of `target`: `{"nonce", "answers": [...]}`, and for `stepped` the
/// generation its journaled step ran in, as `prep`.
async fn run(
    target: Target,
    ctx: Ctx,
    kwargs: Value,
    log: Arc<Log>,
    generation: u64,
) -> Result<Value, RunError> {
    let nonce = kwargs["nonce"].as_str().unwrap_or_default().to_owned();
    match target {
        Target::One => {
            let a = ctx.ask(ask(&ctx, &nonce, 0)).await?;
            Ok(json!({"nonce": nonce, "answers": [a]}))
        }
        Target::Pair => {
            // Both asks are raised before either suspension is propagated: one group.
            let a = ctx.ask(ask(&ctx, &nonce, 0)).await;
            let b = ctx.ask(ask(&ctx, &nonce, 1)).await;
            Ok(json!({"nonce": nonce, "answers": [a?, b?]}))
        }
        Target::Stepped => {
            let (run, step_nonce) = (ctx.run_id().to_owned(), nonce.clone());
            let prep: u64 = ctx
                .step("prep", || async move {
                    log.write(&Line::Step {
                        generation,
                        nonce: step_nonce,
                        run,
                    });
                    Ok::<_, String>(generation)
                })
                .await?;
            let a = ctx.ask(ask(&ctx, &nonce, 0)).await?;
            Ok(json!({"nonce": nonce, "answers": [a], "prep": prep}))
        }
    }
}
