//! Text a caller sent, shown back in an error message. A refusal names the value it refuses,
//! but a value can be megabytes long or hold terminal control sequences: repeated whole, one
//! request would make every error answer, log line and terminal that shows it as large as the
//! input, and could rewrite what a terminal displays. So a quoted value is shown escaped and, past
//! [`MAX_QUOTED_CHARS`] characters, cut on a character boundary and marked with its full length.

use std::fmt::Write as _;

/// The most characters of one quoted value an error message shows.
pub const MAX_QUOTED_CHARS: usize = 200;

/// The most characters of a whole message [`bound_message`] returns: a message that names
/// many values (every problem of a document at once) stays readable, yet bounded.
pub const MAX_MESSAGE_CHARS: usize = 8192;

/// What follows a cut value: its full length in bytes.
fn cut_note(out: &mut String, bytes: usize) {
    // Writing to a String cannot fail.
    let _ = write!(out, " ({bytes} bytes in all, cut)");
}

/// `value` in double quotes, its quotes, backslashes and control characters escaped as Rust's
/// `{:?}` escapes them; longer than [`MAX_QUOTED_CHARS`] characters, only that many are shown,
/// then `…` and the value's full length in bytes.
#[must_use]
pub fn quoted(value: &str) -> String {
    let mut out = String::with_capacity(value.len().min(MAX_QUOTED_CHARS * 2) + 40);
    out.push('"');
    for (shown, c) in value.chars().enumerate() {
        if shown == MAX_QUOTED_CHARS {
            out.push('…');
            out.push('"');
            cut_note(&mut out, value.len());
            return out;
        }
        out.extend(c.escape_debug());
    }
    out.push('"');
    out
}

/// One character of a double-quoted run as `{:?}` wrote it: the text shown and how many bytes
/// the character it stands for has.
fn escaped_unit(rest: &str) -> Option<(usize, usize)> {
    let mut chars = rest.char_indices();
    let (_, first) = chars.next()?;
    if first != '\\' {
        return Some((first.len_utf8(), first.len_utf8()));
    }
    match chars.next() {
        Some((_, 'u')) => {
            // `\u{XXXX}`: up to the closing brace.
            let end = rest.find('}').map_or(rest.len(), |i| i + 1);
            let bytes = rest
                .get(3..end.saturating_sub(1))
                .and_then(|hex| u32::from_str_radix(hex, 16).ok())
                .and_then(char::from_u32)
                .map_or(1, char::len_utf8);
            Some((end, bytes))
        }
        Some((i, c)) => Some((i + c.len_utf8(), 1)),
        None => Some((1, 1)),
    }
}

/// `message` fit to show: every value quoted in it (a `"..."` run, as `{:?}` writes one, or a
/// `` `...` `` run, as serde names a field) longer than [`MAX_QUOTED_CHARS`] characters is cut
/// as [`quoted`] cuts one, every control character but a newline or tab is escaped, and a
/// message still longer than [`MAX_MESSAGE_CHARS`] characters is cut, marked the same way.
///
/// This is the last step before a message leaves the process (a problem document, a page, the
/// command line's standard error), so a value some error quoted without bounding it is
/// bounded all the same.
#[must_use]
pub fn bound_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS * 2));
    let mut rest = message;
    while let Some(c) = rest.chars().next() {
        match c {
            '"' => rest = double_quoted(&rest[1..], &mut out),
            '`' => rest = backquoted(&rest[1..], &mut out),
            c => {
                push_plain(&mut out, c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if out.chars().count() <= MAX_MESSAGE_CHARS {
        return out;
    }
    let mut cut: String = out.chars().take(MAX_MESSAGE_CHARS).collect();
    cut.push('…');
    cut_note(&mut cut, message.len());
    cut
}

fn push_plain(out: &mut String, c: char) {
    if c.is_control() && c != '\n' && c != '\t' {
        out.extend(c.escape_debug());
    } else {
        out.push(c);
    }
}

/// Copies a `"..."` run whose opening quote was just read, cut when too long; returns what
/// follows it. A run this function or [`quoted`] already cut (its last shown character `…`)
/// is left as it is, so bounding a message twice changes nothing.
fn double_quoted<'a>(mut rest: &'a str, out: &mut String) -> &'a str {
    out.push('"');
    let mut shown = 0;
    let mut bytes = 0;
    let mut over: Option<&str> = None;
    loop {
        if rest.starts_with('"') {
            rest = &rest[1..];
            break;
        }
        let Some((len, original)) = escaped_unit(rest) else {
            break;
        };
        let (unit, after) = rest.split_at(len.min(rest.len()));
        if shown < MAX_QUOTED_CHARS {
            // A unit is either an escape `{:?}` wrote or one character, escaped here if it is
            // a control character that was written raw.
            for ch in unit.chars() {
                push_plain(out, ch);
            }
        } else if shown == MAX_QUOTED_CHARS {
            over = Some(unit);
        }
        shown += 1;
        bytes += original;
        rest = after;
    }
    match over {
        Some("…") if shown == MAX_QUOTED_CHARS + 1 => out.push_str("…\""),
        Some(_) => {
            out.push_str("…\"");
            cut_note(out, bytes);
        }
        None => out.push('"'),
    }
    rest
}

/// Copies a `` `...` `` run whose opening backquote was just read, its control characters
/// escaped and cut when too long; returns what follows it.
fn backquoted<'a>(rest: &'a str, out: &mut String) -> &'a str {
    let (inner, after) = match rest.find('`') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    out.push('`');
    let already_cut = inner.chars().count() == MAX_QUOTED_CHARS + 1 && inner.ends_with('…');
    for (shown, c) in inner.chars().enumerate() {
        if shown == MAX_QUOTED_CHARS && !already_cut {
            out.push('…');
            out.push('`');
            cut_note(out, inner.len());
            return after;
        }
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out.push('`');
    after
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_value_is_quoted_as_debug_quotes_it() {
        for v in ["run-1", "", "a\"b\\c", "tab\there\u{1b}[2J", "é"] {
            assert_eq!(quoted(v), format!("{v:?}"));
            assert_eq!(
                bound_message(&format!("id {v:?} is bad")),
                format!("id {v:?} is bad")
            );
        }
    }

    #[test]
    fn a_long_value_is_cut_on_a_character_boundary_and_names_its_length() {
        let v = "é".repeat(1000);
        let q = quoted(&v);
        assert_eq!(
            q,
            format!(
                "\"{}…\" (2000 bytes in all, cut)",
                "é".repeat(MAX_QUOTED_CHARS)
            )
        );
        // The same value quoted by `{:?}` inside a message is cut the same way, what follows
        // it kept.
        let m = bound_message(&format!("finding id {v:?}: too long"));
        assert_eq!(m, format!("finding id {q}: too long"));
        let exact = "a".repeat(MAX_QUOTED_CHARS);
        assert_eq!(quoted(&exact), format!("{exact:?}"));
        // A message already bounded (a server's, shown again by the command line) keeps its
        // form.
        assert_eq!(bound_message(&m), m);
        let over = "a".repeat(MAX_QUOTED_CHARS + 1);
        assert!(bound_message(&format!("{over:?}")).ends_with("(201 bytes in all, cut)"));
    }

    #[test]
    fn escapes_count_as_the_characters_they_stand_for() {
        let v = format!("{}{}", "\u{1b}".repeat(150), "\n".repeat(150));
        let m = bound_message(&format!("{v:?} is not a name"));
        assert!(
            m.ends_with("…\" (300 bytes in all, cut) is not a name"),
            "{m}"
        );
        assert_eq!(m.matches("\\u{1b}").count(), 150, "{m}");
        assert_eq!(m.matches("\\n").count(), 50, "{m}");
    }

    #[test]
    fn backquoted_values_and_raw_control_characters_are_bounded_too() {
        let key = format!("{}\u{7}", "k".repeat(300));
        let m = bound_message(&format!("unknown field `{key}`, expected `id`\r"));
        assert_eq!(
            m,
            format!(
                "unknown field `{}…` (301 bytes in all, cut), expected `id`\\r",
                "k".repeat(MAX_QUOTED_CHARS)
            )
        );
        assert_eq!(bound_message("two\nlines\tok"), "two\nlines\tok");
        let unterminated = format!("value \"{}", "x".repeat(500));
        assert!(bound_message(&unterminated).ends_with("(500 bytes in all, cut)"));
    }

    #[test]
    fn a_message_is_bounded_as_a_whole() {
        let many = "plain words ".repeat(10_000);
        let m = bound_message(&many);
        assert_eq!(
            m.chars().count(),
            MAX_MESSAGE_CHARS + 1 + " (120000 bytes in all, cut)".len()
        );
    }
}
