//! The names of the natives that the rewrite puts into a program, shared by the rewrite
//! ([`rewrite`](super::rewrite)) and the natives answering to them ([`deadline`]'s tick,
//! [`collect`], [`guard`], the [`library`]'s multiplication).
//!
//! Every name starts with `!`, so it cannot be lexed as an identifier: no door expression
//! can call or shadow a native of the rewrite. It holds names only, no behaviour, and
//! imports nothing, so that the rewrite need not depend on the natives it calls (nor they
//! on it).
//!
//! [`deadline`]: super::deadline
//! [`collect`]: super::collect
//! [`guard`]: super::guard
//! [`library`]: super::library

/// The deadline's tick, put at every point where jaq repeats a sub-term.
pub(super) const TICK: &str = "!tick";

/// The native `[f]` becomes.
pub(super) const COLLECT: &str = "!collect";

/// The native that charges an object built by `{...}`.
pub(super) const OBJECT: &str = "!object";

/// The native that charges a path output by `path(f)` or `path_value(f)`.
pub(super) const PATH: &str = "!path";

/// The guarded multiplication `l * r` becomes.
pub(super) const MULTIPLY: &str = "!multiply";

/// The natives operators are rewritten to: (jq operator, native name).
pub(super) const OPERATORS: &[(&str, &str)] = &[
    ("==", "!eq"),
    ("!=", "!ne"),
    ("<", "!lt"),
    ("<=", "!le"),
    (">", "!gt"),
    (">=", "!ge"),
    ("+", "!add"),
    ("-", "!sub"),
    ("/", "!div"),
    ("%", "!rem"),
];

/// The native a string part `"\(...)"` goes through before jaq prints it.
pub(super) const SHOW: &str = "!show";

/// The native a computed object key goes through.
pub(super) const KEY: &str = "!key";

/// The native a computed index `.[...]` goes through.
pub(super) const INDEX: &str = "!index";

/// Library natives (name, arity, precheck) whose calls get a precheck in front: a native
/// taking the same arguments and passing its input on.
pub(super) const PRECHECKED: &[(&str, usize, &str)] = &[
    ("tojson", 0, "!tojson"),
    ("tobytes", 0, "!tobytes"),
    ("contains", 1, "!contains"),
    ("indices", 1, "!indices"),
    ("has", 1, "!has"),
    ("explode", 0, "!explode"),
    ("implode", 0, "!implode"),
    ("ascii_downcase", 0, "!ascii_downcase"),
    ("ascii_upcase", 0, "!ascii_upcase"),
    ("escape_html", 0, "!escape_html"),
    ("unescape_html", 0, "!unescape_html"),
    ("encode_uri", 0, "!encode_uri"),
    ("decode_uri", 0, "!decode_uri"),
    ("encode_base64", 0, "!encode_base64"),
    ("decode_base64", 0, "!decode_base64"),
    ("escape_sh", 0, "!escape_sh"),
    ("matches", 2, "!matches"),
    ("split_matches", 2, "!split_matches"),
    ("split_", 2, "!split_"),
    ("todateiso8601", 0, "!todateiso8601"),
    ("gmtime", 0, "!gmtime"),
    ("strftime", 1, "!strftime"),
    ("jn", 2, "!jn"),
    ("yn", 2, "!yn"),
];
