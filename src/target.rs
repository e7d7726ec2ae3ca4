//! Targets: registered tools and agents, by name.
//!
//! A target is an async function `(ctx, kwargs, extras) -> Result<Value, RunError>` that
//! declares at registration which `extras` keys it reads (`?` converts any error into a
//! [`RunError`]: see its docs for targets written against `anyhow`). The registry is a
//! concurrent map, so targets can be registered while the runtime runs.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;

use dashmap::DashMap;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::error::RunError;
use crate::run::Ctx;

/// The boxed form every target takes.
pub(crate) type Body =
    Arc<dyn Fn(Ctx, Value, Value) -> BoxFuture<'static, Result<Value, RunError>> + Send + Sync>;

/// One registered target.
pub(crate) struct Target {
    pub(crate) name: Arc<str>,
    /// The extras keys it reads; any other key refuses a start.
    pub(crate) extras: BTreeSet<String>,
    /// The function.
    pub(crate) run: Body,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("name", &self.name)
            .field("extras", &self.extras)
            .finish_non_exhaustive()
    }
}

/// Every registered target.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    /// By name.
    by_name: DashMap<String, Arc<Target>>,
}

impl Targets {
    /// Register (or replace) `name`.
    pub(crate) fn register<F, Fut>(&self, name: &str, extras: &[&str], f: F)
    where
        F: Fn(Ctx, Value, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, RunError>> + Send + 'static,
    {
        let run: Body = Arc::new(move |ctx, kwargs, extras| Box::pin(f(ctx, kwargs, extras)));
        self.by_name.insert(
            name.to_owned(),
            Arc::new(Target {
                name: Arc::from(name),
                extras: extras.iter().map(|k| (*k).to_owned()).collect(),
                run,
            }),
        );
    }

    /// The target called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<Target>> {
        self.by_name.get(name).map(|t| Arc::clone(t.value()))
    }
}
