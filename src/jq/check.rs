//! Save-time checks: parse a door expression and refuse what it must not do.
//!
//! The checks run on jaq's syntax tree, resolving every name the way jaq's compiler does
//! (innermost definition first, then the library), so `"while"`, `.while` or `{while: 1}` are
//! fine, and so is calling a `def range: 1;` of one's own. They refuse:
//!
//! * variables that are not bound in the expression or declared for it, and `$ENV`/`$__loc__`;
//! * functions that are not defined in it or in the library, and the impure builtins
//!   (see [`UNAVAILABLE_FUNCTIONS`]);
//! * module directives;
//! * constructs that can loop without bound: a definition that calls itself (directly or from
//!   an inner definition), `repeat`, `while`, `until`, `recurse(f)`, `recurse(f; cond)`,
//!   `range` unless every argument is a number literal and it yields at most
//!   [`MAX_RANGE`] values, and `limit` unless its count is a number literal.
//!
//! Every problem is reported, not only the first. Whatever passes can still take long (nested
//! generators multiply); the deadline guard bounds that at run time.

use jaq_core::load::lex::{StrPart, Tok, Token};
use jaq_core::load::parse::{BinaryOp, Def, Pattern, Term};
use jaq_core::load::{Lexer, Parser};
use jaq_core::path::Part;

use super::error::CompileError;
use super::library::{Library, UNAVAILABLE_FUNCTIONS, UNAVAILABLE_VARIABLES};

/// The most values a `range` may yield.
pub(super) const MAX_RANGE: f64 = 100_000.0;

/// Module directives, which jaq parses only at the start of a program.
const DIRECTIVES: &[&str] = &["import", "include", "module"];

/// How much of an offending token a parse error quotes.
const QUOTE_CHARS: usize = 24;

/// What a function name resolves to inside the expression.
#[derive(Clone, Copy)]
enum Bound {
    /// A definition whose body is being checked: calling it is recursion.
    Open(usize),
    /// A definition whose body has been checked.
    Closed,
    /// A filter argument of an enclosing definition.
    Arg,
}

/// The checker for one expression: the scopes in force and the problems found so far.
pub(super) struct Check<'s, 'c> {
    /// Name of the expression, for the messages.
    expr: &'c str,
    library: &'c Library,
    /// The declared variables, with their `$`.
    globals: &'c [String],
    /// Functions in scope, innermost last: name, arity, binding.
    funs: Vec<(&'s str, usize, Bound)>,
    /// Variables in scope, with their `$`.
    vars: Vec<&'s str>,
    /// Labels in scope, with their `$`.
    labels: Vec<&'s str>,
    /// Counter naming each definition, to report a recursive one once.
    defs: usize,
    /// Definitions already reported as recursive.
    recursive: Vec<usize>,
    errors: Vec<CompileError>,
}

impl<'s, 'c> Check<'s, 'c> {
    /// Parse and check `source`, the expression called `expr` with the variables `globals`
    /// (with their `$`). Returns the syntax tree, or every problem found.
    pub(super) fn source(
        expr: &'c str,
        source: &'s str,
        globals: &'c [String],
        library: &'c Library,
    ) -> Result<Term<&'s str>, Vec<CompileError>> {
        let mut check = Check {
            expr,
            library,
            globals,
            funs: Vec::new(),
            vars: Vec::new(),
            labels: Vec::new(),
            defs: 0,
            recursive: Vec::new(),
            errors: Vec::new(),
        };
        match check.parse(source) {
            Some(term) => {
                check.term(&term);
                if check.errors.is_empty() {
                    Ok(term)
                } else {
                    Err(check.errors)
                }
            }
            None => Err(check.errors),
        }
    }

    fn error(&mut self, error: CompileError) {
        // The same mistake made twice (`$x + $x`) is one problem.
        if !self.errors.contains(&error) {
            self.errors.push(error);
        }
    }

    fn parse_error(&mut self, message: String) {
        let expr = self.expr.to_owned();
        self.error(CompileError::Parse { expr, message });
    }

    fn runaway(&mut self, construct: impl Into<String>) {
        let (construct, expr) = (construct.into(), self.expr.to_owned());
        self.error(CompileError::Runaway { construct, expr });
    }

    /// Lex and parse, skipping (and reporting) module directives.
    fn parse(&mut self, source: &'s str) -> Option<Term<&'s str>> {
        let tokens = match Lexer::new(source).lex() {
            Ok(tokens) => tokens,
            Err(errors) => {
                for (expected, rest) in errors {
                    // The lexer reports the rest of the input, a suffix of the source.
                    let at = position(source, source.len().saturating_sub(rest.len()));
                    self.parse_error(format!("expected {} at {at}", expected.as_str()));
                }
                return None;
            }
        };

        // jaq would look the modules up; refuse them, then check what follows.
        let mut start = 0;
        while let Some(Token(word, Tok::Word)) = tokens.get(start) {
            if !DIRECTIVES.contains(word) {
                break;
            }
            let (directive, expr) = ((*word).to_owned(), self.expr.to_owned());
            self.error(CompileError::DirectiveNotAvailable { directive, expr });
            let end = tokens[start..]
                .iter()
                .position(|Token(s, tok)| matches!(tok, Tok::Sym) && *s == ";");
            match end {
                Some(end) => start += end + 1,
                None => return None,
            }
        }
        if start > 0 && start == tokens.len() {
            return None;
        }

        match Parser::new(&tokens[start..]).parse(|p| p.term()) {
            Ok(term) => Some(term),
            Err(errors) => {
                for (expected, found) in errors {
                    let found = match found {
                        Some(Token(text, _)) => {
                            let at = offset(source, text).map(|o| position(source, o));
                            format!("`{}` at {}", quote(text), at.unwrap_or_default())
                        }
                        None => "end of input".to_owned(),
                    };
                    self.parse_error(format!("expected {}, found {found}", expected.as_str()));
                }
                None
            }
        }
    }

    fn term(&mut self, t: &Term<&'s str>) {
        match t {
            Term::Id | Term::Recurse | Term::Num(_) => {}
            Term::Str(format, parts) => {
                if let Some(format) = format {
                    self.call(format, &[]);
                }
                for part in parts {
                    if let StrPart::Term(t) = part {
                        self.term(t);
                    }
                }
            }
            Term::Arr(t) => {
                if let Some(t) = t {
                    self.term(t);
                }
            }
            Term::Obj(entries) => {
                for (k, v) in entries {
                    self.term(k);
                    if let Some(v) = v {
                        self.term(v);
                    }
                }
            }
            Term::Neg(t) => self.term(t),
            Term::BinOp(l, BinaryOp::Pipe(Some(pattern)), r) => {
                self.term(l);
                // Like jaq, the pattern's computed keys see only the outer variables.
                self.pattern_keys(pattern);
                let bound = self.bind(pattern);
                self.term(r);
                self.vars.truncate(self.vars.len() - bound);
            }
            Term::BinOp(l, _, r) => {
                self.term(l);
                self.term(r);
            }
            Term::Label(label, t) => {
                self.labels.push(label);
                self.term(t);
                self.labels.pop();
            }
            Term::Break(label) => {
                if !self.labels.contains(label) {
                    let (label, expr) = ((*label).to_owned(), self.expr.to_owned());
                    self.error(CompileError::UndefinedLabel { label, expr });
                }
            }
            Term::Fold(name, xs, pattern, args) => self.fold(name, xs, pattern, args),
            Term::TryCatch(t, catch) => {
                self.term(t);
                if let Some(catch) = catch {
                    self.term(catch);
                }
            }
            Term::IfThenElse(branches, otherwise) => {
                for (condition, then) in branches {
                    self.term(condition);
                    self.term(then);
                }
                if let Some(otherwise) = otherwise {
                    self.term(otherwise);
                }
            }
            Term::Def(defs, t) => {
                // Siblings see the ones before them, the body sees all.
                let outer = self.funs.len();
                for def in defs {
                    self.def(def);
                }
                self.term(t);
                self.funs.truncate(outer);
            }
            Term::Call(name, args) => {
                for arg in args {
                    self.term(arg);
                }
                self.call(name, args);
            }
            Term::Var(var) => self.var(var),
            Term::Path(t, path) => {
                self.term(t);
                for (part, _) in &path.0 {
                    match part {
                        Part::Index(i) => self.term(i),
                        Part::Range(from, upto) => {
                            for bound in from.iter().chain(upto) {
                                self.term(bound);
                            }
                        }
                    }
                }
            }
        }
    }

    /// `reduce xs as $x (init; update)` and `foreach xs as $x (init; update; extract)`.
    fn fold(
        &mut self,
        name: &'s str,
        xs: &Term<&'s str>,
        pattern: &Pattern<&'s str>,
        args: &[Term<&'s str>],
    ) {
        self.term(xs);
        self.pattern_keys(pattern);
        let arity_ok = match name {
            "reduce" => args.len() == 2,
            _ => args.len() == 2 || args.len() == 3,
        };
        if !arity_ok {
            let (function, expr) = (name.to_owned(), self.expr.to_owned());
            let arity = args.len();
            self.error(CompileError::UndefinedFunction {
                function,
                arity,
                expr,
            });
        }
        let mut args = args.iter();
        if let Some(init) = args.next() {
            self.term(init);
        }
        let bound = self.bind(pattern);
        for arg in args {
            self.term(arg);
        }
        self.vars.truncate(self.vars.len() - bound);
    }

    fn def(&mut self, def: &Def<&'s str>) {
        let id = self.defs;
        self.defs += 1;
        let outer = (self.funs.len(), self.vars.len());
        self.funs.push((def.name, def.args.len(), Bound::Open(id)));
        for arg in &def.args {
            if arg.starts_with('$') {
                self.vars.push(arg);
            } else {
                self.funs.push((arg, 0, Bound::Arg));
            }
        }
        self.term(&def.body);
        self.funs.truncate(outer.0);
        self.vars.truncate(outer.1);
        self.funs.push((def.name, def.args.len(), Bound::Closed));
    }

    /// Check the computed keys of an object pattern (`{(f): $x}`).
    fn pattern_keys(&mut self, pattern: &Pattern<&'s str>) {
        match pattern {
            Pattern::Var(_) => {}
            Pattern::Arr(patterns) => patterns.iter().for_each(|p| self.pattern_keys(p)),
            Pattern::Obj(entries) => {
                for (key, pattern) in entries {
                    self.term(key);
                    self.pattern_keys(pattern);
                }
            }
        }
    }

    /// Bring a pattern's variables into scope; returns how many.
    fn bind(&mut self, pattern: &Pattern<&'s str>) -> usize {
        match pattern {
            Pattern::Var(var) => {
                self.vars.push(var);
                1
            }
            Pattern::Arr(patterns) => patterns.iter().map(|p| self.bind(p)).sum(),
            Pattern::Obj(entries) => entries.iter().map(|(_, p)| self.bind(p)).sum(),
        }
    }

    fn var(&mut self, var: &'s str) {
        if self.vars.contains(&var) || self.globals.iter().any(|g| g == var) {
            return;
        }
        let (var, expr) = (var.to_owned(), self.expr.to_owned());
        if UNAVAILABLE_VARIABLES.contains(&var.as_str()) {
            self.error(CompileError::VariableNotAvailable { var, expr });
        } else {
            self.error(CompileError::UndeclaredVariable { var, expr });
        }
    }

    fn call(&mut self, name: &'s str, args: &[Term<&'s str>]) {
        let arity = args.len();
        let local = self
            .funs
            .iter()
            .rev()
            .find(|(n, a, _)| *n == name && *a == arity);
        match local.map(|(_, _, bound)| *bound) {
            Some(Bound::Open(id)) => {
                if !self.recursive.contains(&id) {
                    self.recursive.push(id);
                    self.runaway(format!("recursive def {name}"));
                }
            }
            Some(Bound::Closed | Bound::Arg) => {}
            None if UNAVAILABLE_FUNCTIONS.contains(&name) => {
                let (function, expr) = (name.to_owned(), self.expr.to_owned());
                self.error(CompileError::FunctionNotAvailable { function, expr });
            }
            None if self.library.has(name, arity) => self.builtin(name, args),
            None => {
                let (function, expr) = (name.to_owned(), self.expr.to_owned());
                self.error(CompileError::UndefinedFunction {
                    function,
                    arity,
                    expr,
                });
            }
        }
    }

    /// Refuse the library's generators that can run away.
    fn builtin(&mut self, name: &str, args: &[Term<&'s str>]) {
        match (name, args) {
            ("repeat", [_]) => self.runaway("repeat"),
            ("while", [_, _]) => self.runaway("while"),
            ("until", [_, _]) => self.runaway("until"),
            ("recurse", [_]) => self.runaway("recurse(f)"),
            ("recurse", [_, _]) => self.runaway("recurse(f; cond)"),
            ("range", [upto]) => self.range(Some(0.0), literal(upto), Some(1.0)),
            ("range", [from, upto]) => self.range(literal(from), literal(upto), Some(1.0)),
            ("range", [from, upto, by]) => self.range(literal(from), literal(upto), literal(by)),
            ("limit", [count, _]) if literal(count).is_none() => {
                self.runaway("limit with a non-literal count");
            }
            _ => {}
        }
    }

    fn range(&mut self, from: Option<f64>, upto: Option<f64>, by: Option<f64>) {
        match (from, upto, by) {
            (Some(from), Some(upto), Some(by)) => {
                let len = range_len(from, upto, by);
                if len.is_nan() || len > MAX_RANGE {
                    self.runaway(format!("range over more than {MAX_RANGE} values"));
                }
            }
            (Some(_), Some(_), None) => self.runaway("range with a non-literal step"),
            _ => self.runaway("range with a non-literal bound"),
        }
    }
}

/// The value of a number literal, possibly negated; `None` for anything else.
fn literal(t: &Term<&str>) -> Option<f64> {
    match t {
        Term::Num(n) => n.parse().ok(),
        Term::Neg(t) => literal(t).map(|n| -n),
        _ => None,
    }
}

/// How many values `range(from; upto; by)` yields (possibly infinite or NaN), following
/// jaq's definition: add `by` to `from` while the result has not reached `upto`.
fn range_len(from: f64, upto: f64, by: f64) -> f64 {
    if by > 0.0 {
        if from < upto {
            ((upto - from) / by).ceil()
        } else {
            0.0
        }
    } else if by < 0.0 {
        if from > upto {
            ((from - upto) / -by).ceil()
        } else {
            0.0
        }
    } else if from == upto {
        0.0
    } else {
        // A step of zero (or NaN) never reaches the end.
        f64::INFINITY
    }
}

/// Byte offset of `part` in `whole`, if it lies within it.
fn offset(whole: &str, part: &str) -> Option<usize> {
    let offset = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    (offset <= whole.len()).then_some(offset)
}

/// `line:column` (1-based, columns in characters) of a byte offset.
fn position(source: &str, offset: usize) -> String {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{line}:{column}")
}

fn quote(text: &str) -> String {
    let mut quoted: String = text.chars().take(QUOTE_CHARS).collect();
    if quoted.len() < text.len() {
        quoted.push('…');
    }
    quoted
}
