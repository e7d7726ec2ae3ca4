//! The MCP face over one runtime: what the request handler (`crate::handler`) and the
//! tasks (`crate::tasks`) share.

use std::sync::Arc;

use parkway::Runtime;
use rmcp::ErrorData as McpError;
use rmcp::model::MetaObject;
use serde_json::json;

use crate::Options;
use crate::state::States;

/// The identity runs started through this face run as.
pub(crate) const IDENTITY: &str = "mcp";

/// The `_meta` key of the run a result or round is about.
pub const META_RUN: &str = "io.parkway/run";
/// The `_meta` key of the subject that run parks on.
pub const META_SUBJECT: &str = "io.parkway/subject";

/// The MCP face over one runtime. Clones share everything.
#[derive(Clone)]
pub struct Face {
    pub(crate) runtime: Runtime,
    pub(crate) states: Arc<States>,
    pub(crate) options: Arc<Options>,
}

impl std::fmt::Debug for Face {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Face").finish_non_exhaustive()
    }
}

impl Face {
    /// The face over `runtime`; `Err` when the options' state key is too short.
    pub fn new(runtime: Runtime, options: Options) -> Result<Face, String> {
        let states = States::new(&options.state_key)?;
        Ok(Face {
            runtime,
            states: Arc::new(states),
            options: Arc::new(options),
        })
    }
}

/// An internal error, answered as such.
pub(crate) fn internal(why: impl std::fmt::Display) -> McpError {
    McpError::internal_error(why.to_string(), None)
}

/// The `_meta` naming the run a result or round is about, and its subject.
pub(crate) fn run_meta(subject: &str, run: &str) -> MetaObject {
    let mut meta = serde_json::Map::new();
    meta.insert(META_RUN.to_owned(), json!(run));
    meta.insert(META_SUBJECT.to_owned(), json!(subject));
    MetaObject(meta)
}
