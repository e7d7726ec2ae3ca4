//! The interpreter's own allocations, charged to the evaluation's [`budget`](super::budget).
//!
//! The guarded natives ([`guard`](super::guard)) charge what one native step walks or
//! makes. The interpreter allocates on its own too, one output at a time, and a program can
//! repeat that without bound: `[f]` collects every output of `f` into one array, `{...}`
//! builds an object per combination of its keys and values, `path(f)` makes an array of
//! every path's parts, and an update (`l = r`, `l |= f`, `setpath`, ...) copies every
//! shared container along the paths of `l` before it writes (`.[0] = .` nests a copy of
//! its input one level deeper). Each of them is charged here, at the place jaq makes it, so
//! that memory grown by the interpreter ends the evaluation at the budget's limits rather
//! than only at its deadline:
//!
//! * `[f]` becomes a call of the native [`COLLECT`], which collects the outputs of `f`
//!   itself, charging [`CONTAINER_BYTES`] for the array, and a unit of work and
//!   [`VAL_BYTES`] for every element; an array over [`MAX_VALUE_BYTES`] is refused like
//!   any other value;
//! * `{...}` is followed by [`OBJECT`], which charges the object built: a unit of work,
//!   [`OBJECT_BYTES`], and [`ENTRY_BYTES`] per entry;
//! * `path(f)` and `path_value(f)` (hence `paths`, `leaf_paths`, `del`, `to_entries`,
//!   ...) are followed by [`PATH`], which charges each path output: a unit of
//!   work and [`VAL_BYTES`] per part, and [`CONTAINER_BYTES`];
//! * the left-hand side of an update is preceded by one tick per path part it names, and a
//!   tick run by an update (there, or in the library's `getpath`, which `setpath` and
//!   `delpaths` update through) charges [`CONTAINER_BYTES`] and [`VAL_BYTES`] for the
//!   container it may copy at that level (see [`deadline`](super::deadline)).
//!
//! **The nesting bound.** jaq drops a value by recursion, one call per level, so a value
//! nested deeply enough overflows even a pool worker's large stack when it is dropped.
//! Every way the interpreter makes a level of nesting is charged at least
//! [`CONTAINER_BYTES`] plus [`VAL_BYTES`] here, `group_by` (the one native that nests its
//! output a level deeper than its input) charges as much per group, and `fromjson` parses
//! no deeper than [`MAX_PARSE_DEPTH`](super::library::MAX_PARSE_DEPTH). So an evaluation
//! builds at most [`MAX_BYTES`](super::budget::MAX_BYTES) / ([`CONTAINER_BYTES`] +
//! [`VAL_BYTES`]) levels beyond its input's, and a worker's stack is sized to drop them
//! (`docs/doors.md` derives the margin).
//!
//! The costs themselves ([`CONTAINER_BYTES`] and the like) are the budget's, shared with
//! the guarded natives and the ticks of an update.
//!
//! The charges are estimates of what the allocations cost in memory, not an exact count:
//! jaq's arrays grow by doubling, and its maps keep spare capacity. They bound what an
//! evaluation can allocate to a small multiple of the budget; it deliberately does not
//! install an allocator, which is the embedder's to choose.

use jaq_core::box_iter::box_once;
use jaq_core::native::Fun;
use jaq_core::{Bind, Native};
use jaq_json::Val;

use super::budget::{
    CONTAINER_BYTES, ENTRY_BYTES, Limit, MAX_VALUE_BYTES, OBJECT_BYTES, Stop, VAL_BYTES,
};
use super::deadline::{Deadline, Door};
use super::names::{COLLECT, OBJECT, PATH};

/// Elements collected between two charges of the budget.
const BATCH: u64 = 1024;

/// The op an array collected by `[f]` is named by in a limit's message.
const ARRAY_OP: &str = "[...]";

/// Charge `elements` elements of an array being collected, of which `total` so far.
fn charge_elements(deadline: &Deadline<'_>, elements: u64, total: u64) -> Result<(), Stop> {
    deadline.spend(elements, ARRAY_OP)?;
    if total.saturating_mul(VAL_BYTES) > MAX_VALUE_BYTES {
        return Err(deadline.budget.reach(Limit::Value(ARRAY_OP)));
    }
    deadline.allocate(elements.saturating_mul(VAL_BYTES), ARRAY_OP)
}

/// `[f]`: the outputs of `f` collected into an array, as jaq does, charged as they come.
fn collect() -> Fun<Door> {
    let native = Native::<Door>::new(|mut cv| {
        let (f, fc) = cv.0.pop_fun();
        let deadline = cv.0.data().deadline;
        if let Err(stop) = deadline.allocate(CONTAINER_BYTES, ARRAY_OP) {
            return box_once(Err(stop.exn()));
        }
        let mut items = Vec::new();
        let mut pending = 0;
        for y in f.run((fc, cv.1)) {
            match y {
                Ok(y) => items.push(y),
                Err(e) => return box_once(Err(e)),
            }
            pending += 1;
            if pending == BATCH {
                pending = 0;
                if let Err(stop) = charge_elements(deadline, BATCH, items.len() as u64) {
                    return box_once(Err(stop.exn()));
                }
            }
        }
        if let Err(stop) = charge_elements(deadline, pending, items.len() as u64) {
            return box_once(Err(stop.exn()));
        }
        box_once(Ok(items.into_iter().collect()))
    });
    (COLLECT, Box::new([Bind::Fun(())]), native)
}

/// Charge an object built by `{...}`, then pass it on.
fn object() -> Fun<Door> {
    let native = Native::<Door>::new(|cv| {
        let deadline = cv.0.data().deadline;
        let entries = match &cv.1 {
            Val::Obj(map) => map.len() as u64,
            _ => 0,
        };
        let bytes = OBJECT_BYTES.saturating_add(entries.saturating_mul(ENTRY_BYTES));
        let charged = deadline
            .spend(1, "{...}")
            .and_then(|()| deadline.allocate(bytes, "{...}"));
        match charged {
            Ok(()) => box_once(Ok(cv.1)),
            Err(stop) => box_once(Err(stop.exn())),
        }
    });
    (OBJECT, Box::new([]), native)
}

/// Charge a path output by `path(f)` (an array of parts) or `path_value(f)` (the array of
/// parts and the value), then pass it on.
fn path() -> Fun<Door> {
    let native = Native::<Door>::new(|cv| {
        let deadline = cv.0.data().deadline;
        // A path's parts are never arrays: an array in front is `path_value`'s path.
        let parts = match &cv.1 {
            Val::Arr(items) => match items.first() {
                Some(Val::Arr(path)) => path.len() as u64 + 2,
                _ => items.len() as u64,
            },
            _ => 0,
        };
        let bytes = CONTAINER_BYTES.saturating_add(parts.saturating_mul(VAL_BYTES));
        let charged = deadline
            .spend(1 + parts, "path(...)")
            .and_then(|()| deadline.allocate(bytes, "path(...)"));
        match charged {
            Ok(()) => box_once(Ok(cv.1)),
            Err(stop) => box_once(Err(stop.exn())),
        }
    });
    (PATH, Box::new([]), native)
}

/// The natives of this module.
pub(super) fn natives() -> Vec<Fun<Door>> {
    vec![collect(), object(), path()]
}
