//! Rewriting a checked syntax tree before jaq compiles it: deadline ticks, and a guard in
//! place of an operation that could otherwise abort the process.
//!
//! **Ticks.** jaq repeats work only where it evaluates a sub-term once per output of another
//! one: the right-hand side of a pipe, of `and`/`or` and of arithmetic and comparisons (which
//! combine the outputs of both sides), the branches of `if`, the values and computed keys of
//! an object and the parts of an interpolated string (also combined), the arguments of a call
//! (variable arguments are combined; filter arguments run each time they are used), the
//! indices of a path (combined too), the path of an assignment, the right-hand side of `|=`,
//! the update and extraction of a fold, and the body of a recursive definition.
//! [`instrument_def`] puts a [`TICK`] in front of each of those, unless the sub-term is
//! trivial: at most one output and nothing repeated inside (`.a`, `1`, `{id: $x.id}`,
//! `$parked | length`), where a tick would cost without ever being needed. The library's own
//! definitions (`map`, `recurse`, `to_entries`, ...) are instrumented the same way.
//!
//! What is left unticked are loops inside one step of jaq: `.[]` enumerating one level of a
//! value, and native functions. `..`, which jaq enumerates natively through every level,
//! becomes a definition whose recursion is ticked. The natives that walk a value are guarded
//! (next paragraph and [`guard`](super::guard)).
//!
//! **Sandbox.** Comparisons and arithmetic whose sides are not literal scalars become
//! calls of the guarded natives of [`OPERATORS`]; the parts of an interpolated string pass
//! through [`SHOW`], computed object keys through [`KEY`], computed indices through
//! [`INDEX`]; a call of one of [`PRECHECKED`] gets its precheck in front, with its
//! arguments bound once so that both see the same values.
//!
//! **Allocations.** `[f]` becomes a call of the native [`COLLECT`], an object built by
//! `{...}` passes through [`OBJECT`], the outputs of `path(f)` and `path_value(f)` through
//! [`PATH`], and the left-hand side of an update gets a tick per path part it names: each
//! charges what the interpreter allocates there (see [`collect`](super::collect)).
//!
//! **Guards.** `s * n` repeats a string `n` times in one allocation, and an allocation that
//! fails aborts the process: `"x" * 100000000000` is one expression away. Multiplication is
//! rewritten to the native [`MULTIPLY`], which refuses results over
//! [`MAX_REPEAT_BYTES`](super::library::MAX_REPEAT_BYTES), and `l *= r` to
//! `r as $x | l |= multiply(.; $x)`, which is how jaq defines it.

use jaq_core::load::lex::StrPart;
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::ops::{Cmp, Math};
use jaq_core::path::{Opt, Part, Path};

use super::names::{
    COLLECT, INDEX, KEY, MULTIPLY, OBJECT, OPERATORS, PATH, PRECHECKED, SHOW, TICK,
};

/// The variable `l *= r` binds `r` to. Like the [`names`](super::names) of the natives, it
/// cannot be lexed.
const FACTOR: &str = "$!factor";

/// The variables a prechecked call binds its arguments to, so that the precheck and the call
/// see the same values.
const ARGS: &[&str] = &["$!arg0", "$!arg1", "$!arg2"];

/// The definition `..` becomes, so that its recursion is ticked like any other.
const RECURSE: &str = "!recurse";

/// Builtins that yield at most one output for each combination of their arguments' outputs
/// (and whose own loops, if any, are ticked inside or are native steps). A call to one of
/// them, with trivial arguments, is as trivial as its arguments.
const SINGLE_OUTPUT: &[(&str, usize)] = &[
    ("empty", 0),
    ("error", 0),
    ("error", 1),
    ("not", 0),
    ("true", 0),
    ("false", 0),
    ("null", 0),
    ("select", 1),
    ("values", 0),
    ("length", 0),
    ("utf8bytelength", 0),
    ("type", 0),
    ("tostring", 0),
    ("tojson", 0),
    ("keys", 0),
    ("keys_unsorted", 0),
    ("has", 1),
    ("contains", 1),
    ("inside", 1),
    ("startswith", 1),
    ("endswith", 1),
    ("ltrimstr", 1),
    ("rtrimstr", 1),
    ("ascii_downcase", 0),
    ("ascii_upcase", 0),
    ("test", 1),
    ("test", 2),
    ("split", 1),
    ("join", 1),
    ("floor", 0),
    ("ceil", 0),
    ("round", 0),
    ("abs", 0),
    ("add", 0),
    ("any", 0),
    ("all", 0),
    ("min", 0),
    ("max", 0),
    ("first", 0),
    ("last", 0),
    ("nth", 1),
    ("reverse", 0),
    ("sort", 0),
    ("unique", 0),
    ("flatten", 0),
    ("to_entries", 0),
    ("from_entries", 0),
    ("getpath", 1),
    ("todate", 0),
    ("fromdate", 0),
    ("map", 1),
    ("map_values", 1),
    ("with_entries", 1),
    ("del", 1),
    ("sort_by", 1),
    ("group_by", 1),
    ("unique_by", 1),
    ("min_by", 1),
    ("max_by", 1),
    ("@text", 0),
    ("@json", 0),
    ("@html", 0),
    ("@uri", 0),
    ("@base64", 0),
    ("@base64d", 0),
];

/// Instrument a definition: its body, and the body itself if the definition can recurse.
pub(super) fn instrument_def(def: Def<&str>) -> Def<&str> {
    let mut shadowed = Vec::new();
    local_names(&def.body, &mut shadowed);
    shadowed.extend(def.args.iter().filter(|a| !a.starts_with('$')));
    Rewrite { shadowed }.def(def)
}

/// The rewrite of one top-level definition.
struct Rewrite<'s> {
    /// Names defined or bound as filter arguments anywhere inside it: a call to one of them
    /// may not be the builtin of that name.
    shadowed: Vec<&'s str>,
}

impl<'s> Rewrite<'s> {
    fn def(&self, def: Def<&'s str>) -> Def<&'s str> {
        let recursive = mentions(&def.body, def.name, def.args.len());
        let body = self.term(def.body);
        Def {
            name: def.name,
            args: def.args,
            body: if recursive { ticked(body) } else { body },
        }
    }

    /// Rewrite a term: ticks wherever a sub-term is repeated, guarded multiplication.
    fn term(&self, t: Term<&'s str>) -> Term<&'s str> {
        let once = |t: Box<Term<&'s str>>| Box::new(self.term(*t));
        let again = |t: Box<Term<&'s str>>| Box::new(self.repeated(*t));
        match t {
            Term::Id | Term::Num(_) | Term::Var(_) | Term::Break(_) => t,
            // jaq enumerates `..` natively, without passing through the program: a value
            // shared exponentially would be walked whole in one step.
            Term::Recurse => self.term(recurse()),
            Term::Str(format, parts) => {
                // jaq prints a non-string part as JSON: measured first (`guard`).
                let parts = parts.into_iter().map(|part| match part {
                    StrPart::Term(t) => StrPart::Term(then(self.repeated(t), SHOW)),
                    part => part,
                });
                Term::Str(format, parts.collect())
            }
            // Collected, and charged, by a native (`collect`).
            Term::Arr(Some(t)) => Term::Call(COLLECT, vec![self.term(*t)]),
            Term::Arr(None) => Term::Arr(None),
            Term::Obj(entries) if entries.is_empty() => Term::Obj(entries),
            Term::Obj(entries) => {
                let entries = entries.into_iter().map(|(k, v)| {
                    // A computed key is hashed by jaq, whatever it is: scalars only.
                    let k = match (&v, literal(&k)) {
                        (Some(_), false) => then(self.repeated(k), KEY),
                        _ => self.repeated(k),
                    };
                    (k, v.map(|v| self.repeated(v)))
                });
                // Each object built is charged (`collect`).
                then(Term::Obj(entries.collect()), OBJECT)
            }
            Term::Neg(t) => Term::Neg(once(t)),
            Term::BinOp(l, op, r) => self.binop(*l, op, *r),
            Term::Label(label, t) => Term::Label(label, once(t)),
            Term::Fold(name, xs, pattern, args) => {
                // `init` runs once, `update` once per value folded, `extract` after each
                // update.
                let args = args.into_iter().enumerate().map(|(i, arg)| match i {
                    0 => self.term(arg),
                    1 => ticked(self.term(arg)),
                    _ => self.repeated(arg),
                });
                Term::Fold(name, once(xs), self.pattern(pattern), args.collect())
            }
            Term::TryCatch(t, catch) => Term::TryCatch(once(t), catch.map(once)),
            Term::IfThenElse(branches, otherwise) => {
                // `elif` conditions run once per false output of the conditions before them.
                let branches = branches.into_iter().enumerate().map(|(i, (c, t))| {
                    let c = if i == 0 {
                        self.term(c)
                    } else {
                        self.repeated(c)
                    };
                    (c, self.repeated(t))
                });
                Term::IfThenElse(branches.collect(), otherwise.map(again))
            }
            Term::Def(defs, t) => {
                let defs = defs.into_iter().map(|def| self.def(def));
                Term::Def(defs.collect(), once(t))
            }
            Term::Call(name, args) => {
                let args: Vec<_> = args.into_iter().map(|arg| self.repeated(arg)).collect();
                let paths = matches!((name, args.len()), ("path" | "path_value", 1));
                match self.precheck(name, args.len()) {
                    Some(check) => prechecked(name, check, args),
                    // Each path output is charged (`collect`).
                    None if paths && !self.shadowed.contains(&name) => {
                        then(Term::Call(name, args), PATH)
                    }
                    None => Term::Call(name, args),
                }
            }
            Term::Path(t, path) => {
                // An index with one output is kept; any other runs again for every
                // combination of the indices before it, and for every output of `t`.
                let parts = path.0.into_iter().map(|(part, opt)| {
                    let part = match part {
                        Part::Index(i) if literal(&i) => Part::Index(i),
                        // `.[x]` searches an array for an array `x`, and hashes an object
                        // key: checked first (`guard`).
                        Part::Index(i) => Part::Index(then(self.repeated(i), INDEX)),
                        Part::Range(from, upto) => Part::Range(
                            from.map(|f| self.repeated(f)),
                            upto.map(|u| self.repeated(u)),
                        ),
                    };
                    (part, opt)
                });
                Term::Path(once(t), Path(parts.collect()))
            }
        }
    }

    fn binop(&self, l: Term<&'s str>, op: BinaryOp<&'s str>, r: Term<&'s str>) -> Term<&'s str> {
        let bin = |l, op, r| Term::BinOp(Box::new(l), op, Box::new(r));
        match op {
            BinaryOp::Pipe(pattern) => {
                let pattern = pattern.map(|p| self.pattern(p));
                bin(self.term(l), BinaryOp::Pipe(pattern), self.repeated(r))
            }
            BinaryOp::Comma | BinaryOp::Alt => bin(self.term(l), op, self.term(r)),
            BinaryOp::Math(Math::Mul) => Term::Call(MULTIPLY, vec![self.term(l), self.repeated(r)]),
            // With a literal scalar on one side, an operator looks at one string at most:
            // jaq's own is kept. Otherwise the guarded native (`guard`).
            BinaryOp::Math(math) if !number(&l) && !number(&r) => {
                Term::Call(guarded(math.as_str()), vec![self.term(l), self.repeated(r)])
            }
            BinaryOp::Cmp(cmp) if !self.scalar(&l) && !self.scalar(&r) => {
                Term::Call(guarded(cmp_str(cmp)), vec![self.term(l), self.repeated(r)])
            }
            BinaryOp::Or | BinaryOp::And | BinaryOp::Math(_) | BinaryOp::Cmp(_) => {
                bin(self.term(l), op, self.repeated(r))
            }
            // `l |= f` runs `f` once per path of `l`.
            BinaryOp::Update => bin(self.updated(l, false), op, self.repeated(r)),
            // `l op= r` is `r as $x | l |= . op $x`: guarded like `op` (`*` always).
            BinaryOp::UpdateMath(math) if math == Math::Mul || !number(&r) => {
                let name = match math {
                    Math::Mul => MULTIPLY,
                    other => guarded(other.as_str()),
                };
                let apply = Term::Call(name, vec![Term::Id, Term::Var(FACTOR)]);
                let update = bin(self.updated(l, true), BinaryOp::Update, ticked(apply));
                let factor = BinaryOp::Pipe(Some(Pattern::Var(FACTOR)));
                bin(self.term(r), factor, update)
            }
            // The other assignments update `l` once per output of `r`.
            BinaryOp::Assign | BinaryOp::UpdateMath(_) | BinaryOp::UpdateAlt => {
                bin(self.updated(l, true), op, self.term(r))
            }
        }
    }

    /// The left-hand side of an update, `repeated` or not, behind a tick per path part it
    /// names: a tick run by an update charges the container it may copy (`collect`).
    fn updated(&self, l: Term<&'s str>, repeated: bool) -> Term<&'s str> {
        let levels = path_parts(&l).max(1);
        let l = if repeated {
            self.repeated(l)
        } else {
            self.term(l)
        };
        (0..levels).fold(l, |l, _| ticked(l))
    }

    /// A sub-term that jaq may run many times: rewritten, and ticked unless trivial.
    fn repeated(&self, t: Term<&'s str>) -> Term<&'s str> {
        // Judged before rewriting, which adds calls to what was trivial.
        let trivial = self.trivial(&t);
        let t = self.term(t);
        if trivial { t } else { ticked(t) }
    }

    fn pattern(&self, p: Pattern<&'s str>) -> Pattern<&'s str> {
        match p {
            Pattern::Var(x) => Pattern::Var(x),
            Pattern::Arr(ps) => Pattern::Arr(ps.into_iter().map(|p| self.pattern(p)).collect()),
            // Computed keys run once per value destructured.
            Pattern::Obj(entries) => Pattern::Obj(
                entries
                    .into_iter()
                    .map(|(k, p)| (self.repeated(k), self.pattern(p)))
                    .collect(),
            ),
        }
    }

    /// Whether `t` yields at most one output without repeating anything inside that is not
    /// ticked already: literals, variables, paths without iteration, [`SINGLE_OUTPUT`]
    /// builtins, and objects, arrays, operators and conditionals built from those. Running
    /// such a term many times needs no tick of its own.
    fn trivial(&self, t: &Term<&str>) -> bool {
        let trivial = |t: &Term<&str>| self.trivial(t);
        match t {
            Term::Id | Term::Num(_) | Term::Var(_) | Term::Break(_) => true,
            Term::Recurse | Term::Fold(..) | Term::Def(..) => false,
            Term::Call(name, args) => {
                self.single_output(name, args.len()) && args.iter().all(trivial)
            }
            Term::Str(format, parts) => {
                format.is_none_or(|f| self.single_output(f, 0))
                    && parts.iter().all(|part| match part {
                        StrPart::Term(t) => trivial(t),
                        _ => true,
                    })
            }
            Term::Arr(t) => t.as_deref().is_none_or(trivial),
            Term::Obj(entries) => entries
                .iter()
                .all(|(k, v)| trivial(k) && v.as_ref().is_none_or(trivial)),
            Term::Neg(t) | Term::Label(_, t) => trivial(t),
            Term::BinOp(l, op, r) => match op {
                BinaryOp::Comma => false,
                BinaryOp::Pipe(Some(pattern)) => {
                    trivial(l) && trivial(r) && self.trivial_pattern(pattern)
                }
                _ => trivial(l) && trivial(r),
            },
            Term::TryCatch(t, catch) => trivial(t) && catch.as_deref().is_none_or(trivial),
            Term::IfThenElse(branches, otherwise) => {
                branches.iter().all(|(c, t)| trivial(c) && trivial(t))
                    && otherwise.as_deref().is_none_or(trivial)
            }
            Term::Path(t, path) => {
                trivial(t)
                    && path.0.iter().all(|(part, _)| match part {
                        Part::Index(i) => trivial(i),
                        // `.[]` iterates.
                        Part::Range(None, None) => false,
                        Part::Range(from, upto) => from.iter().chain(upto).all(trivial),
                    })
            }
        }
    }

    fn trivial_pattern(&self, p: &Pattern<&str>) -> bool {
        match p {
            Pattern::Var(_) => true,
            Pattern::Arr(ps) => ps.iter().all(|p| self.trivial_pattern(p)),
            Pattern::Obj(entries) => entries
                .iter()
                .all(|(k, p)| self.trivial(k) && self.trivial_pattern(p)),
        }
    }

    /// A literal scalar: a number, a plain string, or the builtin `true`, `false` or `null`.
    fn scalar(&self, t: &Term<&str>) -> bool {
        let constant = |name: &str| {
            matches!(name, "true" | "false" | "null") && !self.shadowed.contains(&name)
        };
        number(t)
            || literal(t)
            || matches!(t, Term::Call(name, args) if args.is_empty() && constant(name))
    }

    /// The precheck of a call of `name/arity`, if it is surely the library native of that
    /// name and has one.
    fn precheck(&self, name: &str, arity: usize) -> Option<&'static str> {
        if self.shadowed.contains(&name) {
            return None;
        }
        let found = PRECHECKED
            .iter()
            .find(|(n, a, _)| *n == name && *a == arity);
        found.map(|(_, _, check)| *check)
    }

    /// Whether a call of `name/arity` is surely the single-output builtin of that name.
    fn single_output(&self, name: &str, arity: usize) -> bool {
        SINGLE_OUTPUT.contains(&(name, arity)) && !self.shadowed.contains(&name)
    }
}

/// How many path parts (`.a`, `.[0]`, `.[]`, `.[1:]`) `t` names where an update can follow
/// them. Paths inside calls (`getpath`) are ticked where they repeat, and not counted.
fn path_parts(t: &Term<&str>) -> usize {
    match t {
        Term::Path(t, path) => path_parts(t) + path.0.len(),
        Term::BinOp(l, BinaryOp::Pipe(_) | BinaryOp::Comma | BinaryOp::Alt, r) => {
            path_parts(l) + path_parts(r)
        }
        Term::Label(_, t) | Term::TryCatch(t, _) => path_parts(t),
        Term::IfThenElse(branches, otherwise) => {
            branches.iter().map(|(_, t)| path_parts(t)).sum::<usize>()
                + otherwise.as_deref().map_or(0, path_parts)
        }
        _ => 0,
    }
}

/// `t | name`.
fn then<'s>(t: Term<&'s str>, name: &'s str) -> Term<&'s str> {
    Term::BinOp(
        Box::new(t),
        BinaryOp::Pipe(None),
        Box::new(Term::Call(name, Vec::new())),
    )
}

/// `a0 as $a0 | ... | check($a0; ...) | name($a0; ...)`: the precheck sees the values the
/// call will (each argument is evaluated once, as before).
fn prechecked<'s>(name: &'s str, check: &'s str, args: Vec<Term<&'s str>>) -> Term<&'s str> {
    let vars: Vec<Term<&'s str>> = ARGS[..args.len()].iter().map(|v| Term::Var(*v)).collect();
    let call = Term::BinOp(
        Box::new(Term::Call(check, vars.clone())),
        BinaryOp::Pipe(None),
        Box::new(Term::Call(name, vars)),
    );
    args.into_iter()
        .zip(ARGS)
        .rev()
        .fold(call, |body, (arg, var)| {
            let bind = BinaryOp::Pipe(Some(Pattern::Var(*var)));
            Term::BinOp(Box::new(arg), bind, Box::new(body))
        })
}

/// `def !recurse: ., (.[]? | !recurse); !recurse`, which is `..`.
fn recurse<'s>() -> Term<&'s str> {
    let children = Term::Path(
        Box::new(Term::Id),
        Path(vec![(Part::Range(None, None), Opt::Optional)]),
    );
    let deeper = Term::BinOp(
        Box::new(children),
        BinaryOp::Pipe(None),
        Box::new(Term::Call(RECURSE, Vec::new())),
    );
    let body = Term::BinOp(Box::new(Term::Id), BinaryOp::Comma, Box::new(deeper));
    let def = Def {
        name: RECURSE,
        args: Vec::new(),
        body,
    };
    Term::Def(vec![def], Box::new(Term::Call(RECURSE, Vec::new())))
}

/// The guarded native of operator `op`.
fn guarded(op: &str) -> &'static str {
    OPERATORS
        .iter()
        .find(|(o, _)| *o == op)
        .map_or(MULTIPLY, |(_, native)| native)
}

fn cmp_str(cmp: Cmp) -> &'static str {
    cmp.as_str()
}

/// A number literal, possibly negated.
fn number(t: &Term<&str>) -> bool {
    match t {
        Term::Num(_) => true,
        Term::Neg(t) => number(t),
        _ => false,
    }
}

/// A number literal or a string literal without interpolation.
fn literal(t: &Term<&str>) -> bool {
    match t {
        Term::Num(_) => true,
        Term::Str(None, parts) => parts.iter().all(|p| !matches!(p, StrPart::Term(_))),
        _ => false,
    }
}

fn ticked(t: Term<&str>) -> Term<&str> {
    let tick = Term::Call(TICK, Vec::new());
    Term::BinOp(Box::new(tick), BinaryOp::Pipe(None), Box::new(t))
}

/// Collect the names of the definitions and filter arguments inside `t`.
fn local_names<'s>(t: &Term<&'s str>, names: &mut Vec<&'s str>) {
    let mut walk = |t: &Term<&'s str>| local_names(t, names);
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => {}
        Term::Str(_, parts) => parts.iter().for_each(|p| {
            if let StrPart::Term(t) = p {
                walk(t)
            }
        }),
        Term::Arr(t) => t.iter().for_each(|t| walk(t)),
        Term::Obj(entries) => entries.iter().for_each(|(k, v)| {
            walk(k);
            v.iter().for_each(&mut walk);
        }),
        Term::Neg(t) | Term::Label(_, t) => walk(t),
        Term::BinOp(l, op, r) => {
            walk(l);
            if let BinaryOp::Pipe(Some(pattern)) = op {
                pattern_names(pattern, names);
            }
            local_names(r, names);
        }
        Term::Fold(_, xs, pattern, args) => {
            walk(xs);
            pattern_names(pattern, names);
            args.iter().for_each(|arg| local_names(arg, names));
        }
        Term::TryCatch(t, catch) => {
            walk(t);
            catch.iter().for_each(|c| walk(c));
        }
        Term::IfThenElse(branches, otherwise) => {
            branches.iter().for_each(|(c, t)| {
                walk(c);
                walk(t);
            });
            otherwise.iter().for_each(|o| walk(o));
        }
        Term::Def(defs, t) => {
            for def in defs {
                names.push(def.name);
                names.extend(def.args.iter().filter(|a| !a.starts_with('$')));
                local_names(&def.body, names);
            }
            local_names(t, names);
        }
        Term::Call(_, args) => args.iter().for_each(walk),
        Term::Path(t, path) => {
            walk(t);
            for (part, _) in &path.0 {
                match part {
                    Part::Index(i) => walk(i),
                    Part::Range(from, upto) => from.iter().chain(upto).for_each(&mut walk),
                }
            }
        }
    }
}

fn pattern_names<'s>(p: &Pattern<&'s str>, names: &mut Vec<&'s str>) {
    match p {
        Pattern::Var(_) => {}
        Pattern::Arr(ps) => ps.iter().for_each(|p| pattern_names(p, names)),
        Pattern::Obj(entries) => entries.iter().for_each(|(k, p)| {
            local_names(k, names);
            pattern_names(p, names);
        }),
    }
}

/// Whether `t` calls `name/arity` anywhere, shadowed or not.
///
/// Over-approximating is harmless (an extra tick); it catches direct recursion and recursion
/// through inner definitions (`def f: def g: f; g;`) alike.
fn mentions<S: Copy + PartialEq>(t: &Term<S>, name: S, arity: usize) -> bool {
    let m = |t: &Term<S>| mentions(t, name, arity);
    let pattern = |p: &Pattern<S>| pattern_mentions(p, name, arity);
    match t {
        Term::Id | Term::Recurse | Term::Num(_) | Term::Var(_) | Term::Break(_) => false,
        Term::Str(format, parts) => {
            (arity == 0 && *format == Some(name))
                || parts.iter().any(|p| matches!(p, StrPart::Term(t) if m(t)))
        }
        Term::Arr(t) => t.as_deref().is_some_and(m),
        Term::Obj(entries) => entries
            .iter()
            .any(|(k, v)| m(k) || v.as_ref().is_some_and(m)),
        Term::Neg(t) | Term::Label(_, t) => m(t),
        Term::BinOp(l, op, r) => {
            m(l) || m(r) || matches!(op, BinaryOp::Pipe(Some(p)) if pattern(p))
        }
        Term::Fold(_, xs, p, args) => m(xs) || pattern(p) || args.iter().any(m),
        Term::TryCatch(t, catch) => m(t) || catch.as_deref().is_some_and(m),
        Term::IfThenElse(branches, otherwise) => {
            branches.iter().any(|(c, t)| m(c) || m(t)) || otherwise.as_deref().is_some_and(m)
        }
        Term::Def(defs, t) => defs.iter().any(|d| m(&d.body)) || m(t),
        Term::Call(f, args) => (*f == name && args.len() == arity) || args.iter().any(m),
        Term::Path(t, path) => {
            m(t) || path.0.iter().any(|(part, _)| match part {
                Part::Index(i) => m(i),
                Part::Range(from, upto) => from.iter().chain(upto).any(m),
            })
        }
    }
}

fn pattern_mentions<S: Copy + PartialEq>(p: &Pattern<S>, name: S, arity: usize) -> bool {
    match p {
        Pattern::Var(_) => false,
        Pattern::Arr(ps) => ps.iter().any(|p| pattern_mentions(p, name, arity)),
        Pattern::Obj(entries) => entries
            .iter()
            .any(|(k, p)| mentions(k, name, arity) || pattern_mentions(p, name, arity)),
    }
}
