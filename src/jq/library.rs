//! The jq library door expressions are compiled against: jaq's definitions, instrumented by
//! the [`rewrite`], and the natives, guarded ones included.

use std::collections::HashSet;
use std::sync::OnceLock;

use jaq_core::box_iter::box_once;
use jaq_core::load::parse::Def;
use jaq_core::native::{Fun, bome, v};
use jaq_core::{Exn, Native};
use jaq_json::{Num, Val};
use jaq_std::ValT as _;

use super::collect;
use super::deadline::{self, Door};
use super::guard;
use super::names::MULTIPLY;
use super::rewrite;

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
            .map(rewrite::instrument_def)
            .collect();
        let natives = natives()
            .into_iter()
            .map(|(name, args, _)| (name, args.len()));
        let names = defs
            .iter()
            .map(|def| (def.name, def.args.len()))
            .chain(natives)
            // The natives of the rewrite and the guards cannot be lexed as names.
            .filter(|(name, _)| !name.starts_with('!'))
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
    // jaq resolves a call to the first native with its name and arity: `fromjson` here
    // shadows jaq-json's.
    [fromjson(), multiply(), deadline::tick()]
        .into_iter()
        .chain(collect::natives())
        .chain(guard::natives())
        .chain(jaq_core::funs())
        .chain(jaq_std::funs())
        .chain(jaq_json::funs())
        .filter(|(name, _, _)| !UNAVAILABLE_FUNCTIONS.contains(name))
        .collect()
}

/// The longest string that `s * n` may build, in bytes.
///
/// jaq allocates the result at once, and a failed allocation aborts the process.
pub(super) const MAX_REPEAT_BYTES: usize = 16 << 20;

/// Multiplication (`l * r`, which the rewrite turns into a call of this), refusing to repeat
/// a string into more than [`MAX_REPEAT_BYTES`].
fn multiply() -> Fun<Door> {
    let native = Native::<Door>::new(|mut cv| {
        let factor = cv.0.pop_var();
        let value = cv.0.pop_var();
        if let Some((len, times)) = repetition(&value, &factor)
            && len.saturating_mul(times) > MAX_REPEAT_BYTES
        {
            let message = format!(
                "cannot repeat a string of {len} bytes {times} times: \
                 the result would exceed {MAX_REPEAT_BYTES} bytes"
            );
            return box_once(Err(Exn::from(jaq_core::Error::str(message))));
        }
        if let Some((len, times)) = repetition(&value, &factor) {
            let bytes = len.saturating_mul(times) as u64;
            if let Err(stop) = cv.0.data().deadline.allocate(bytes, "*") {
                return box_once(Err(stop.exn()));
            }
        }
        if let Err(stop) = guard::multiply_cost(&value, &factor, cv.0.data().deadline) {
            return box_once(Err(stop.exn()));
        }
        bome(value * factor)
    });
    (MULTIPLY, v(2), native)
}

/// The string length and count if `l * r` repeats a string (in either order), as jaq does
/// for a positive integer count.
fn repetition(l: &Val, r: &Val) -> Option<(usize, usize)> {
    let (string, count) = match (l, r) {
        (Val::TStr(s) | Val::BStr(s), Val::Num(n)) | (Val::Num(n), Val::TStr(s) | Val::BStr(s)) => {
            (s, n)
        }
        _ => return None,
    };
    let times = match count {
        Num::Int(i) => usize::try_from(*i).ok()?,
        // jaq saturates big integers to the largest machine integer.
        Num::BigInt(i) => usize::try_from(&**i).unwrap_or(usize::MAX),
        Num::Float(_) | Num::Dec(_) => return None,
    };
    Some((string.len(), times))
}

/// The deepest nesting `fromjson` parses.
///
/// jaq-json's parser recurses once per level without a limit, so a string of a million `[`
/// (one multiplication away in jq) overflows any stack and aborts the process. The limit
/// is jq's own.
pub(super) const MAX_PARSE_DEPTH: usize = 10_000;

/// Bytes of memory charged per byte of text `fromjson` parses.
const PARSED_BYTES_PER_BYTE: u64 = 32;

/// `fromjson` as jaq-json has it, refusing documents nested deeper than [`MAX_PARSE_DEPTH`].
fn fromjson() -> Fun<Door> {
    let native = Native::<Door>::new(|cv| {
        let fail = |message: &dyn std::fmt::Display| {
            // Quote the start of the text only: it may be megabytes long.
            let mut quoted: String = cv.1.to_string().chars().take(40).collect();
            quoted.push_str("...");
            let message = format!("cannot parse {quoted} as JSON: {message}");
            Exn::from(jaq_core::Error::str(message))
        };
        let Some(text) = cv.1.as_utf8_bytes() else {
            return box_once(Err(Exn::from(jaq_core::Error::typ(cv.1.clone(), "string"))));
        };
        // A parsed value takes up to this many times its text (`[[[[...]]]]`: an array per
        // two bytes).
        let bytes = (text.len() as u64).saturating_mul(PARSED_BYTES_PER_BYTE);
        if let Err(stop) = cv.0.data().deadline.allocate(bytes, "fromjson") {
            return box_once(Err(stop.exn()));
        }
        if crate::depth::json_nesting(text) > MAX_PARSE_DEPTH {
            let message = format!("nested deeper than {MAX_PARSE_DEPTH} levels");
            return box_once(Err(fail(&message)));
        }
        // Parsed eagerly: the values would otherwise borrow from the input string. The
        // parser does not move past a token it cannot read, so it would repeat its error
        // forever: the first error ends the sequence.
        let mut values = Vec::new();
        for value in jaq_json::read::parse_many(text) {
            let failed = value.is_err();
            values.push(value.map_err(|e| fail(&e)));
            if failed {
                break;
            }
        }
        Box::new(values.into_iter())
    });
    ("fromjson", Box::new([]), native)
}
