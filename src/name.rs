//! Names that enter from outside: subjects, door, target and schedule names, topics, and
//! the interaction and run ids clients pass back. Each is bounded in length and holds no
//! control character (a NUL, a newline, an escape, …), which would corrupt a log line
//! or a terminal, or hide one name behind another that prints the same.
//!
//! This module only says what is wrong with a name; each operation refuses it in its own
//! error type, before anything is read, stored or published.

/// The longest subject, name or topic taken, in bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 256;

/// How much of a refused name a message shows, in characters.
const SHOWN: usize = 40;

/// What is wrong with `text` as the `what` (`subject`, `door name`, …), if anything: a
/// message naming it, such as `subject "a\u{0}b" holds a control character (U+0000) at
/// byte 1`. The empty string is each operation's own concern (most refuse it too).
pub(crate) fn problem(what: &str, text: &str) -> Option<String> {
    if text.len() > MAX_NAME_BYTES {
        return Some(format!(
            "{what} {} is {} bytes long, more than {MAX_NAME_BYTES}",
            shown(text),
            text.len()
        ));
    }
    let (at, c) = text.char_indices().find(|(_, c)| c.is_control())?;
    Some(format!(
        "{what} {} holds a control character (U+{:04X}) at byte {at}",
        shown(text),
        u32::from(c)
    ))
}

/// Whether `id` (an interaction or run id a client passed back) can be one the runtime
/// issued: no id longer than [`MAX_NAME_BYTES`] or holding a control character ever is,
/// so such an id is unknown without being looked up.
pub(crate) fn plausible_id(id: &str) -> bool {
    problem("id", id).is_none()
}

/// `text` quoted with its control characters escaped, cut after [`SHOWN`] characters.
fn shown(text: &str) -> String {
    let mut cut: String = text.chars().take(SHOWN).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_named_with_the_character_and_its_place() {
        let long = "x".repeat(MAX_NAME_BYTES + 1);
        let table: [(&str, Option<String>); 7] = [
            ("thread-42", None),
            ("ünïcødé ok", None),
            (&long[..MAX_NAME_BYTES], None),
            (
                "a\u{0}b",
                Some(r#"subject "a\0b" holds a control character (U+0000) at byte 1"#.into()),
            ),
            (
                "é\n",
                Some(r#"subject "é\n" holds a control character (U+000A) at byte 2"#.into()),
            ),
            (
                "\u{1b}[2J",
                Some(r#"subject "\u{1b}[2J" holds a control character (U+001B) at byte 0"#.into()),
            ),
            (
                &long,
                Some(format!(
                    "subject \"{}…\" is 257 bytes long, more than 256",
                    "x".repeat(SHOWN)
                )),
            ),
        ];
        for (text, expected) in table {
            assert_eq!(problem("subject", text), expected, "{text:?}");
        }
        assert!(plausible_id("i-42"));
        assert!(!plausible_id("i-4\u{0}2"));
        assert!(!plausible_id(&long));
    }
}
