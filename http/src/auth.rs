//! Who may do what: bearer tokens, each carrying scopes.
//!
//! Tokens are read from text, one per line: the token, then its scopes separated by
//! commas (`s3cr3t admin,visit`). Blank lines and lines starting with `#` are skipped.
//! The same text comes from the environment (`PARKWAY_TOKENS`, lines or `;`-separated
//! entries) or from a file (`PARKWAY_TOKENS_FILE`). A token is compared in constant time.

use std::fmt;

use sha2::Digest as _;
use subtle::ConstantTimeEq;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Doors (save, list, read, delete), cancels, schedules, the event stream, and
    /// reading a subject's parked set.
    Admin,
    /// Route visits, hook fires, the run-tool and submit doors, run records, and
    /// resume and take on a parked set.
    Visit,
    /// The interactions inbox: its list, its stream and its answer door.
    Answer,
}

impl Scope {
    /// The scope's name as tokens carry it.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Admin => "admin",
            Scope::Visit => "visit",
            Scope::Answer => "answer",
        }
    }

    fn parse(text: &str) -> Option<Scope> {
        match text {
            "admin" => Some(Scope::Admin),
            "visit" => Some(Scope::Visit),
            "answer" => Some(Scope::Answer),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The tokens a server accepts, each with its scopes.
#[derive(Clone, Default)]
pub struct Tokens {
    /// Each token's SHA-256 digest (the tokens themselves are not kept), with its scopes.
    entries: Vec<(Digest, Vec<Scope>)>,
    /// The scopes of a request that sends no `Authorization` header: none unless
    /// granted with [`Tokens::anonymous`].
    anonymous: Vec<Scope>,
}

/// A token's SHA-256 digest: what a presented token is compared with, so the
/// comparison takes the same time whatever the lengths of the two tokens.
type Digest = [u8; 32];

fn digest(token: &[u8]) -> Digest {
    sha2::Sha256::digest(token).into()
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the tokens themselves.
        write!(
            f,
            "Tokens({} token(s), anonymous {:?})",
            self.entries.len(),
            self.anonymous
        )
    }
}

/// Why a token list was refused; every problem is listed, none naming a token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the token list is invalid: {}", .problems.join("; "))]
pub struct TokensError {
    /// One line per problem, naming the entry by its number (from 1).
    pub problems: Vec<String>,
}

/// The fewest characters a token may have.
pub const MIN_TOKEN_LEN: usize = 16;

impl Tokens {
    /// No token: every request but health is refused with 401.
    pub fn none() -> Tokens {
        Tokens::default()
    }

    /// One token with `scopes`.
    pub fn with(mut self, token: &str, scopes: &[Scope]) -> Tokens {
        self.entries
            .push((digest(token.as_bytes()), scopes.to_vec()));
        self
    }

    /// Grant `scopes` to requests that send no `Authorization` header, for local use and
    /// test clients that cannot send one. Never the default: anyone who can reach the
    /// server has these scopes. A request that sends a token is judged by the token
    /// alone (a wrong token is still refused).
    pub fn anonymous(mut self, scopes: &[Scope]) -> Tokens {
        self.anonymous = scopes.to_vec();
        self
    }

    /// The scopes granted without a token.
    pub fn anonymous_scopes(&self) -> &[Scope] {
        &self.anonymous
    }

    /// Parse a list of scope names separated by commas (`visit,answer`).
    pub fn parse_scopes(text: &str) -> Result<Vec<Scope>, TokensError> {
        let mut scopes = Vec::new();
        let mut problems = Vec::new();
        for s in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match Scope::parse(s) {
                Some(scope) => scopes.push(scope),
                None => problems.push(format!(
                    "unknown scope {s:?} (expected admin, visit or answer)"
                )),
            }
        }
        if problems.is_empty() {
            Ok(scopes)
        } else {
            Err(TokensError { problems })
        }
    }

    /// Parse a token list (see the module's docs). Entries are separated by newlines or
    /// `;`. A token shorter than [`MIN_TOKEN_LEN`], an unknown scope, a token with no
    /// scope or a token listed twice is refused.
    pub fn parse(text: &str) -> Result<Tokens, TokensError> {
        let mut tokens = Tokens::default();
        let mut problems = Vec::new();
        let entries = text
            .split(['\n', ';'])
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        for (i, entry) in entries.enumerate() {
            let n = i + 1;
            let mut parts = entry.split_whitespace();
            let (Some(token), Some(scopes), None) = (parts.next(), parts.next(), parts.next())
            else {
                problems.push(format!(
                    "entry {n}: expected a token and its scopes separated by a space"
                ));
                continue;
            };
            if token.len() < MIN_TOKEN_LEN {
                problems.push(format!(
                    "entry {n}: the token is shorter than {MIN_TOKEN_LEN} characters"
                ));
            }
            let mut parsed = Vec::new();
            for s in scopes.split(',').filter(|s| !s.is_empty()) {
                match Scope::parse(s) {
                    Some(scope) => parsed.push(scope),
                    None => problems.push(format!(
                        "entry {n}: unknown scope {s:?} (expected admin, visit or answer)"
                    )),
                }
            }
            if parsed.is_empty() {
                problems.push(format!("entry {n}: no scope"));
            }
            let token = digest(token.as_bytes());
            if tokens.entries.iter().any(|(t, _)| *t == token) {
                problems.push(format!("entry {n}: the token is listed twice"));
            }
            tokens.entries.push((token, parsed));
        }
        if problems.is_empty() {
            Ok(tokens)
        } else {
            Err(TokensError { problems })
        }
    }

    /// How many tokens are accepted.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no token is accepted.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The scopes of `token`, if it is one of the tokens. Its digest is compared with
    /// every token's, each in constant time over digests of one length, so the time
    /// taken tells neither which token matched, nor how much of one did, nor how long
    /// the tokens are.
    pub(crate) fn scopes(&self, token: &[u8]) -> Option<&[Scope]> {
        let token = digest(token);
        let mut found = None;
        for (t, scopes) in &self.entries {
            if bool::from(t.ct_eq(&token)) {
                found = Some(scopes.as_slice());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_parses_and_each_token_carries_its_scopes() {
        let tokens = Tokens::parse(
            "# operators\nadmin-token-0123456789 admin,visit\n\nanswer-token-0123456789 answer;",
        )
        .expect("parses");
        assert_eq!(tokens.len(), 2);
        assert_eq!(
            tokens.scopes(b"admin-token-0123456789"),
            Some(&[Scope::Admin, Scope::Visit][..])
        );
        assert_eq!(
            tokens.scopes(b"answer-token-0123456789"),
            Some(&[Scope::Answer][..])
        );
        assert_eq!(tokens.scopes(b"admin-token-012345678"), None);
        assert_eq!(tokens.scopes(b""), None);
    }

    #[test]
    fn every_problem_of_a_list_is_named_and_no_token_is_shown() {
        let err = Tokens::parse("short admin\nlong-enough-token-1 root,visit\nlonely-token-00000\nlong-enough-token-1 visit")
            .expect_err("refused");
        assert_eq!(
            err.problems,
            vec![
                "entry 1: the token is shorter than 16 characters",
                "entry 2: unknown scope \"root\" (expected admin, visit or answer)",
                "entry 3: expected a token and its scopes separated by a space",
                "entry 4: the token is listed twice",
            ]
        );
        assert!(!err.to_string().contains("long-enough-token-1"));
    }
}
