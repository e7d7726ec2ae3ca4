//! Door expressions: compiling jq source with jaq, refusing what a door expression must not
//! do, and evaluating the result under a deadline.
//!
//! This module owns:
//!
//! * the save-time checks ([`check`]): syntax, declared variables, defined functions, the
//!   impure builtins, and the constructs that can loop without bound, all reported together;
//! * the jq library expressions are compiled against ([`library`]): jaq's core, standard and
//!   JSON libraries, less `env`, `now`, `input`, `debug`, `halt` and the like, with
//!   `fromjson` limited in depth and string repetition (`s * n`) in size, where jaq would
//!   otherwise abort the process;
//! * evaluation: [`Input`] converts a value to jaq's representation once,
//!   [`Program::run_batch`], the one way in, yields each program's first output and whether
//!   there is a second, and converts back to JSON;
//! * the sandbox, in three layers:
//!   - the program checks the deadline (and the caller's cancellation) wherever jaq repeats
//!     a sub-term ([`rewrite`], [`deadline`]), so the interpreter stops soon after it;
//!   - every native step that walks a value (comparisons, sorting, printing, searching,
//!     concatenating, ...) is guarded ([`guard`]): it charges the evaluation's
//!     [`budget`] of work and memory as it goes, reads the clock every few thousand
//!     units, and refuses values nested deeper than the budget allows, so no single step
//!     outlives the deadline or grows memory past the budget, however the value was built
//!     (jaq shares values: `[., .] | [., .] | ...` is small in memory and astronomically
//!     large walked);
//!   - the interpreter's own allocations (arrays collected by `[f]`, objects built, paths
//!     output, containers an update copies) are charged to the same budget
//!     ([`collect`]), which also bounds how deep a value an evaluation builds can nest;
//!   - evaluations run on a small pool of dedicated threads with large stacks ([`pool`]),
//!     and the caller awaits them no longer than the deadline ([`watchdog`]); a worker
//!     still finishing an abandoned evaluation is replaced, so others are not stalled
//!     behind it (and, thanks to the guards, it is not busy for long);
//! * the shortcut past the pool: a door visit's batch of *shallow* programs ([`shallow`]: no
//!   deep walk of a value, no repetition, bounded nesting, so the ticks alone bound them) is
//!   first evaluated in place, on the caller's thread, under a budget of
//!   [`IN_PLACE_BUDGET`](program::IN_PLACE_BUDGET); past the budget it is dropped and the
//!   batch evaluated again on the pool (the expressions are pure). The hand-off to a pool
//!   thread and back is most of what a small expression costs, so the common case pays none.
//!
//! Why bound the work rather than isolate it: a library cannot kill a thread, fork, or
//! impose an allocator on its embedder. jaq-core 3 has no fuel or interrupt hook, but it
//! takes the program as a syntax tree, so operators and calls can be rewritten into guarded
//! natives, and a native can raise an exception nothing catches (the one `halt` uses). The
//! threads of the pool remain for the deadline of an awaited evaluation on a loaded
//! machine, and for the stack: jaq recurses on nested values and programs, and a value an
//! expression builds by nesting (`reduce range(100000) as $i (0; [.])`) can be dropped
//! only on a large stack.
//!
//! What remains: the charges are estimates of what jaq allocates, not a count (see
//! [`collect`]), and each is made when jaq has allocated (an object, a path) or every
//! thousand elements (an array), so one such step can overrun the budget. The guarded
//! steps never
//! recurse past [`MAX_DEPTH`](budget::MAX_DEPTH) levels; jaq's drop of a value does, and
//! the pool's stack is sized for the deepest value the budget lets an evaluation build.
//!
//! **Layers.** Each file depends only on files listed before it, so its imports form no
//! circle:
//!
//! * [`budget`] (the budget, what its charges cost, and the [`Stop`](budget::Stop) that ends
//!   an evaluation), [`names`] (the names of the natives the rewrite puts in), [`error`],
//!   [`input`], [`limits`], [`shallow`] and [`watchdog`] depend on none of the others;
//! * [`deadline`] (the deadline, its tick, and the data natives reach) on [`budget`];
//!   [`rewrite`] on [`names`] alone; [`pool`] on [`watchdog`] and [`deadline`];
//! * the natives that charge the budget, [`collect`] and [`guard`], on [`budget`],
//!   [`deadline`] and [`names`]; [`outputs`] on [`budget`] and [`deadline`];
//! * [`library`] on the natives it gathers ([`deadline`]'s tick, [`collect`], [`guard`]),
//!   [`names`] and [`rewrite`]; [`check`] on [`library`] and [`error`];
//! * [`program`], at the top, on whichever of them it needs.
//!
//! It deliberately does not:
//!
//! * measure or limit input sizes ([`Limits::max_input_bytes`] is for the caller to check);
//! * install an allocator or measure the process's memory: it charges estimates;
//! * decide what outputs mean (none, one or several): [`Outputs`] only reports them;
//! * know about doors, hooks or subjects beyond the names of the variables they declare.

mod budget;
mod check;
mod collect;
mod deadline;
mod error;
mod guard;
mod input;
mod library;
mod limits;
mod names;
mod outputs;
mod pool;
mod program;
mod rewrite;
mod shallow;
mod watchdog;

pub use error::{CompileError, CompileErrors, EvalError};
pub(crate) use input::Input;
pub(crate) use limits::Limits;
pub(crate) use outputs::Outputs;

pub(crate) use program::Program;

#[cfg(test)]
mod tests;
