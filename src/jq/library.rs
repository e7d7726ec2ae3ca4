//! The jq library door expressions are compiled against, and the data jaq runs them with.

use std::collections::HashSet;
use std::sync::OnceLock;

use jaq_core::Lut;
use jaq_core::data::{DataT, HasLut};
use jaq_core::load::parse::Def;
use jaq_core::native::Fun;
use jaq_json::Val;

use super::deadline::{self, Deadline};

/// Builtin functions that door expressions may not call, whatever their arity.
///
/// They read the environment, the clock, the machine's time zone or further inputs, or write
/// to a log or end the process; a door expression must give the same outputs for the same
/// inputs. `now` is among them: the time is passed in as `$now`.
pub(super) const UNAVAILABLE_FUNCTIONS: &[&str] = &[
    "env",
    "now",
    "localtime",
    "strflocaltime",
    "input",
    "inputs",
    "input_filename",
    "input_line_number",
    "get_search_list",
    "get_prog_origin",
    "get_jq_origin",
    "debug",
    "stderr",
    "debug_empty",
    "stderr_empty",
    "halt",
    "halt_error",
];

/// jq variables that door expressions may not use.
pub(super) const UNAVAILABLE_VARIABLES: &[&str] = &["$ENV", "$__loc__"];

/// Marker for jaq's data types: door expressions process [`Val`]s and their native functions
/// can reach the evaluation's [`Deadline`].
pub(super) struct Door;

/// What native functions can reach while a door expression runs.
pub(super) struct Env<'a> {
    /// The compiled program, which jaq needs to call definitions.
    pub(super) lut: &'a Lut<Door>,
    /// The guard ticked by the instrumented program.
    pub(super) deadline: &'a Deadline<'a>,
}

impl DataT for Door {
    type V<'a> = Val;
    type Data<'a> = &'a Env<'a>;
}

impl<'a> HasLut<'a, Door> for &'a Env<'a> {
    fn lut(&self) -> &'a Lut<Door> {
        self.lut
    }
}

/// The definitions (written in jq) and the names of everything a door expression may call.
pub(super) struct Library {
    /// jaq's core, standard and JSON definitions, less the unavailable ones, instrumented for
    /// the deadline.
    defs: Vec<Def<&'static str>>,
    /// Name and arity of every builtin a door expression may call.
    names: HashSet<(&'static str, usize)>,
}

impl Library {
    /// The library, built on first use: parsing jaq's definitions takes a while.
    pub(super) fn get() -> &'static Library {
        static LIBRARY: OnceLock<Library> = OnceLock::new();
        LIBRARY.get_or_init(Library::build)
    }

    fn build() -> Library {
        let defs: Vec<_> = jaq_core::defs()
            .chain(jaq_std::defs())
            .chain(jaq_json::defs())
            .filter(|def| !UNAVAILABLE_FUNCTIONS.contains(&def.name))
            .map(deadline::instrument_def)
            .collect();
        let natives = natives()
            .into_iter()
            .map(|(name, args, _)| (name, args.len()));
        let names = defs
            .iter()
            .map(|def| (def.name, def.args.len()))
            .chain(natives)
            .filter(|(name, _)| *name != deadline::TICK)
            .collect();
        Library { defs, names }
    }

    /// A copy of the definitions, to be handed to a loader (which takes them by value).
    pub(super) fn defs(&self) -> Vec<Def<&'static str>> {
        self.defs.clone()
    }

    /// Whether `name/arity` is a builtin a door expression may call.
    pub(super) fn has(&self, name: &str, arity: usize) -> bool {
        self.names.contains(&(name, arity))
    }
}

/// The native functions (written in Rust) to compile with, less the unavailable ones, plus the
/// deadline's tick.
///
/// Built anew for every compilation because jaq takes them by value and they are not `Clone`;
/// they are only function pointers, so this is cheap.
pub(super) fn natives() -> Vec<Fun<Door>> {
    jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| !UNAVAILABLE_FUNCTIONS.contains(name))
        .chain([deadline::tick()])
        .collect()
}
