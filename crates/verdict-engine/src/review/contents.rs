//! A resource's stored bytes as the review page draws them. Whoever wrote the bytes may want the
//! page to show something else than they are: characters that reorder the text around them
//! (Trojan Source), that are invisible, or that move the cursor back over what came before
//! (`\r`); or a diff whose hunk holds lines that look like the next file's headers. So every such
//! character becomes an [`Escape`], a word whose letters mix scripts is followed by a flag
//! ([`super::Shown`]), and a diff is read hunk by hunk by the line counts of each `@@` header, as
//! `git apply` reads it, never by how a line looks.

use super::shown::flagged;
use schemars::JsonSchema;
use serde::Serialize;

/// At most this many bytes of a resource are shown.
pub const SHOWN_BYTES: usize = 256 * 1024;
/// At most this many lines of a resource are shown.
pub const SHOWN_LINES: usize = 2000;

/// What one line of a unified diff is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DiffLine {
    /// A line a hunk adds (`+`).
    Added,
    /// A line a hunk removes (`-`).
    Removed,
    /// A hunk header (`@@`) or, outside any hunk, a file header (`diff`, `---`, `+++`,
    /// `index`, git's mode, rename, copy and similarity lines).
    Header,
    /// A line a hunk keeps (` `, or an empty line).
    Context,
    /// A line that changes nothing: text outside every hunk that is no header (a commit
    /// message, a trailer, a line past a hunk's counts) or the `\ No newline at end of file`
    /// marker.
    Other,
}

/// One character drawn as its code point, because drawn as itself it would change how the
/// text around it reads or would not be seen at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Escape {
    /// The code point, as `U+202E`.
    pub code_point: String,
    /// What the character is, in words.
    pub name: String,
}

/// A run of a shown line: text as it is, or one escaped character.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Piece {
    /// Characters drawn as themselves.
    Text(String),
    /// A character drawn as its code point.
    Escape(Escape),
    /// A note drawn after what it is about, saying why it may not be what it looks like
    /// (letters of mixed scripts, a name outside printable ASCII); see [`super::Shown`].
    Flag(String),
}

/// A resource's bytes as the page shows them.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(tag = "shown", rename_all = "snake_case")]
pub enum Contents {
    /// No bytes are stored under the digest (or the caller may not read them).
    NotStored,
    /// Bytes that are not UTF-8 text: only their size.
    Binary {
        /// Their length in bytes.
        size: u64,
    },
    /// Text, line by line (numbered from 1 by position).
    Text {
        /// The lines shown.
        lines: Vec<Vec<Piece>>,
        /// Whether more bytes or lines were stored than are shown.
        truncated: bool,
    },
    /// A unified diff, each line with what it is.
    Diff {
        /// The lines shown.
        lines: Vec<(DiffLine, Vec<Piece>)>,
        /// Whether more bytes or lines were stored than are shown.
        truncated: bool,
    },
}

/// How `bytes` of a resource of `kind` are shown: a diff, text, or binary (size only), at most
/// [`SHOWN_BYTES`] and [`SHOWN_LINES`].
#[must_use]
pub fn contents(kind: &str, media_type: Option<&str>, bytes: &[u8]) -> Contents {
    let size = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    let cut = bytes.get(..SHOWN_BYTES).unwrap_or(bytes);
    // A cut may split a character: keep the valid prefix.
    let text = match std::str::from_utf8(cut) {
        Ok(t) => t,
        Err(e) if cut.len() < bytes.len() && e.error_len().is_none() => {
            std::str::from_utf8(cut.get(..e.valid_up_to()).unwrap_or_default()).unwrap_or_default()
        }
        Err(_) => return Contents::Binary { size },
    };
    if text.contains('\0') {
        return Contents::Binary { size };
    }
    // Lines end at `\n` only: a `\r`, before a `\n` or not, is part of its line and drawn.
    let all: Vec<&str> = text.split_terminator('\n').collect();
    let truncated = cut.len() < bytes.len() || all.len() > SHOWN_LINES;
    let shown = all.iter().copied().take(SHOWN_LINES);
    let diff = kind.contains("diff")
        || kind.contains("patch")
        || media_type.is_some_and(|m| m.contains("diff") || m.contains("patch"))
        || text.starts_with("diff --git")
        || text.starts_with("--- ");
    if diff {
        Contents::Diff {
            lines: diff_lines(shown)
                .into_iter()
                .map(|(what, l)| (what, flagged(l)))
                .collect(),
            truncated,
        }
    } else {
        Contents::Text {
            lines: shown.map(flagged).collect(),
            truncated,
        }
    }
}

/// The lines a hunk still holds, by its header's counts.
struct Hunk {
    old: u64,
    new: u64,
}

/// What each line of a unified diff is. Inside a hunk a line is what its first character says
/// only while the header's counts leave room for it, so `+++ b/x` there is an added line; a
/// line the counts have no room for ends the hunk and is read as outside one.
fn diff_lines<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<(DiffLine, &'a str)> {
    let mut out = Vec::new();
    let mut hunk: Option<Hunk> = None;
    for l in lines {
        if let Some(h) = &mut hunk {
            let what = match l.as_bytes().first() {
                Some(b' ') | None if h.old > 0 && h.new > 0 => {
                    h.old -= 1;
                    h.new -= 1;
                    Some(DiffLine::Context)
                }
                Some(b'+') if h.new > 0 => {
                    h.new -= 1;
                    Some(DiffLine::Added)
                }
                Some(b'-') if h.old > 0 => {
                    h.old -= 1;
                    Some(DiffLine::Removed)
                }
                Some(b'\\') => Some(DiffLine::Other),
                _ => None,
            };
            if let Some(what) = what {
                if h.old == 0 && h.new == 0 {
                    hunk = None;
                }
                out.push((what, l));
                continue;
            }
            // Short of its counts: the hunk is cut off, and this line is read as outside it.
            hunk = None;
        }
        let what = if let Some(h) = hunk_header(l) {
            if h.old > 0 || h.new > 0 {
                hunk = Some(h);
            }
            DiffLine::Header
        } else if FILE_HEADERS.iter().any(|p| l.starts_with(p)) {
            DiffLine::Header
        } else {
            DiffLine::Other
        };
        out.push((what, l));
    }
    out
}

/// How the header lines of a file's diff begin (git's extended headers included).
const FILE_HEADERS: &[&str] = &[
    "diff ",
    "index ",
    "--- ",
    "+++ ",
    "old mode ",
    "new mode ",
    "deleted file mode ",
    "new file mode ",
    "copy from ",
    "copy to ",
    "rename from ",
    "rename to ",
    "similarity index ",
    "dissimilarity index ",
    "Binary files ",
    "GIT binary patch",
];

/// The counts of a hunk header `@@ -A[,B] +C[,D] @@[ section]` (a missing count is 1), or
/// `None` when the line is not one.
fn hunk_header(line: &str) -> Option<Hunk> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    Some(Hunk {
        old: range_count(old)?,
        new: range_count(new)?,
    })
}

fn range_count(range: &str) -> Option<u64> {
    let (start, count) = match range.split_once(',') {
        Some((start, count)) => (start, Some(count)),
        None => (range, None),
    };
    number(start)?;
    count.map_or(Some(1), number)
}

/// Decimal digits only (`str::parse` would take a sign too).
fn number(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `line` as the page draws it: every character [`escaped`] names becomes an [`Escape`], the
/// rest is text.
#[must_use]
pub fn pieces(line: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    for c in line.chars() {
        if let Some(name) = escaped(c) {
            if !text.is_empty() {
                out.push(Piece::Text(std::mem::take(&mut text)));
            }
            out.push(Piece::Escape(Escape {
                code_point: format!("U+{:04X}", u32::from(c)),
                name: name.to_owned(),
            }));
        } else {
            text.push(c);
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

/// The name of a character the page must not draw as itself, or `None` for one it may: every
/// control character but tab (C0, DEL, C1), every format character (Unicode category Cf: the
/// bidirectional controls, zero-width characters, tags ...), the line and paragraph
/// separators, and the Hangul fillers, which are letters that draw as nothing.
#[must_use]
fn escaped(c: char) -> Option<&'static str> {
    const C0: [&str; 32] = [
        "null",
        "start of heading",
        "start of text",
        "end of text",
        "end of transmission",
        "enquiry",
        "acknowledge",
        "bell",
        "backspace",
        "character tabulation",
        "line feed",
        "line tabulation",
        "form feed",
        "carriage return",
        "shift out",
        "shift in",
        "data link escape",
        "device control one",
        "device control two",
        "device control three",
        "device control four",
        "negative acknowledge",
        "synchronous idle",
        "end of transmission block",
        "cancel",
        "end of medium",
        "substitute",
        "escape",
        "file separator",
        "group separator",
        "record separator",
        "unit separator",
    ];
    let code = u32::from(c);
    let name = match code {
        0x09 => return None,
        0x00..=0x1F => C0.get(usize::try_from(code).ok()?).copied()?,
        0x7F => "delete",
        0x80..=0x9F => "control character",
        0x00AD => "soft hyphen",
        0x061C => "arabic letter mark",
        0x200B => "zero width space",
        0x200C => "zero width non-joiner",
        0x200D => "zero width joiner",
        0x200E => "left-to-right mark",
        0x200F => "right-to-left mark",
        0x2028 => "line separator",
        0x2029 => "paragraph separator",
        0x202A => "left-to-right embedding",
        0x202B => "right-to-left embedding",
        0x202C => "pop directional formatting",
        0x202D => "left-to-right override",
        0x202E => "right-to-left override",
        0x2060 => "word joiner",
        0x2066 => "left-to-right isolate",
        0x2067 => "right-to-left isolate",
        0x2068 => "first strong isolate",
        0x2069 => "pop directional isolate",
        0xFEFF => "zero width no-break space",
        0x115F | 0x1160 | 0x3164 | 0xFFA0 => "hangul filler",
        0xE0001 | 0xE0020..=0xE007F => "tag character",
        0x0600..=0x0605
        | 0x06DD
        | 0x070F
        | 0x0890..=0x0891
        | 0x08E2
        | 0x180E
        | 0x2061..=0x2064
        | 0x206A..=0x206F
        | 0xFFF9..=0xFFFB
        | 0x110BD
        | 0x110CD
        | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A => "format character",
        _ => return None,
    };
    Some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff_kinds(diff: &str) -> Vec<(DiffLine, String)> {
        let Contents::Diff { lines, truncated } = contents("git_diff", None, diff.as_bytes())
        else {
            panic!("not a diff");
        };
        assert!(!truncated);
        lines
            .into_iter()
            .map(|(what, l)| (what, text_of(&l)))
            .collect()
    }

    /// A shown line as plain text, each escape as `<U+XXXX>`.
    fn text_of(pieces: &[Piece]) -> String {
        pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Escape(e) => format!("<{}>", e.code_point),
                Piece::Flag(f) => format!("[{f}]"),
            })
            .collect()
    }

    #[test]
    fn contents_are_a_diff_text_or_binary_and_bounded() {
        let diff = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-old\n+new\n same\n";
        let kinds: Vec<DiffLine> = diff_kinds(diff).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            kinds,
            [
                DiffLine::Header,
                DiffLine::Header,
                DiffLine::Header,
                DiffLine::Header,
                DiffLine::Removed,
                DiffLine::Added,
                DiffLine::Context
            ]
        );
        assert!(matches!(
            contents("blob", None, &[0xff, 0x00, 0x01]),
            Contents::Binary { size: 3 }
        ));
        assert!(matches!(
            contents("log", None, b"a\0b"),
            Contents::Binary { size: 3 }
        ));
        let long = "line\n".repeat(SHOWN_LINES + 5);
        let Contents::Text { lines, truncated } = contents("log", None, long.as_bytes()) else {
            panic!("not text");
        };
        assert_eq!(lines.len(), SHOWN_LINES);
        assert!(truncated);
        // More bytes than shown, cut inside a character: the valid prefix is shown.
        let wide = "é".repeat(SHOWN_BYTES);
        let Contents::Text { lines, truncated } = contents("log", None, wide.as_bytes()) else {
            panic!("not text");
        };
        assert!(truncated);
        assert_eq!(
            lines.iter().map(|l| text_of(l)).collect::<String>().len(),
            SHOWN_BYTES
        );
    }

    #[test]
    fn a_hunk_line_that_looks_like_a_file_header_is_what_the_counts_make_it() {
        let diff = "diff --git a/x b/x\n\
                    --- a/x\n\
                    +++ b/x\n\
                    @@ -1,3 +1,3 @@\n \
                    kept\n\
                    --- a/x\n\
                    +++ b/evil\n\
                    @@ -1 +1 @@\n\
                    \x20last\n";
        assert_eq!(
            diff_kinds(diff),
            [
                (DiffLine::Header, "diff --git a/x b/x".to_owned()),
                (DiffLine::Header, "--- a/x".to_owned()),
                (DiffLine::Header, "+++ b/x".to_owned()),
                (DiffLine::Header, "@@ -1,3 +1,3 @@".to_owned()),
                (DiffLine::Context, " kept".to_owned()),
                (DiffLine::Removed, "--- a/x".to_owned()),
                (DiffLine::Added, "+++ b/evil".to_owned()),
                // Two old and two new lines left: an `@@` line fits no count, so it ends the
                // hunk and is a header of its own.
                (DiffLine::Header, "@@ -1 +1 @@".to_owned()),
                (DiffLine::Context, " last".to_owned()),
            ]
        );
    }

    #[test]
    fn a_hunk_ends_at_its_counts_and_the_next_files_headers_follow() {
        let diff = "--- a/x\n+++ b/x\n@@ -1,2 +1 @@\n-gone\n\n\\ No newline at end of file\n\
                    --- a/y\n+++ b/y\n@@ -0,0 +1 @@\n+new\n+beyond the count\n-beyond too\n";
        assert_eq!(
            diff_kinds(diff),
            [
                (DiffLine::Header, "--- a/x".to_owned()),
                (DiffLine::Header, "+++ b/x".to_owned()),
                (DiffLine::Header, "@@ -1,2 +1 @@".to_owned()),
                (DiffLine::Removed, "-gone".to_owned()),
                // An empty line is context, as GNU diff may write it.
                (DiffLine::Context, String::new()),
                (DiffLine::Other, "\\ No newline at end of file".to_owned()),
                (DiffLine::Header, "--- a/y".to_owned()),
                (DiffLine::Header, "+++ b/y".to_owned()),
                (DiffLine::Header, "@@ -0,0 +1 @@".to_owned()),
                (DiffLine::Added, "+new".to_owned()),
                (DiffLine::Other, "+beyond the count".to_owned()),
                (DiffLine::Other, "-beyond too".to_owned()),
            ]
        );
        // A header that does not parse opens no hunk: its `+` and `-` lines are no change.
        for bad in [
            "@@ -1 +1",
            "@@ -a +1 @@",
            "@@ -1,+2 +1 @@",
            "@@ -1 +1,x @@",
            "@@@ -1 -1 +1 @@@",
        ] {
            let kinds = diff_kinds(&format!("--- a/x\n+++ b/x\n{bad}\n+added\n-removed\n"));
            assert_eq!(
                kinds.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
                [
                    DiffLine::Header,
                    DiffLine::Header,
                    DiffLine::Other,
                    DiffLine::Other,
                    DiffLine::Other
                ],
                "{bad}"
            );
        }
    }

    #[test]
    fn every_bidirectional_control_is_drawn_escaped_with_its_name() {
        let bidi = [
            (0x202A, "left-to-right embedding"),
            (0x202B, "right-to-left embedding"),
            (0x202C, "pop directional formatting"),
            (0x202D, "left-to-right override"),
            (0x202E, "right-to-left override"),
            (0x2066, "left-to-right isolate"),
            (0x2067, "right-to-left isolate"),
            (0x2068, "first strong isolate"),
            (0x2069, "pop directional isolate"),
            (0x200E, "left-to-right mark"),
            (0x200F, "right-to-left mark"),
            (0x061C, "arabic letter mark"),
        ];
        for (code, name) in bidi {
            let c = char::from_u32(code).unwrap();
            let line = format!("+let ok = \"{c}x\";");
            for shown in [
                diff_kinds(&format!("--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n{line}\n"))
                    .into_iter()
                    .map(|(_, l)| l)
                    .collect::<String>(),
                match contents("log", None, line.as_bytes()) {
                    Contents::Text { lines, .. } => lines.iter().map(|l| text_of(l)).collect(),
                    other => panic!("not text: {other:?}"),
                },
            ] {
                assert!(!shown.contains(c), "U+{code:04X} drawn as itself");
                assert!(shown.contains(&format!("\"<U+{code:04X}>x\"")), "{shown}");
            }
            let p = pieces(&line);
            let [Piece::Text(before), Piece::Escape(e), Piece::Text(after)] = p.as_slice() else {
                panic!("{p:?}");
            };
            assert_eq!((before.as_str(), after.as_str()), ("+let ok = \"", "x\";"));
            assert_eq!(
                e,
                &Escape {
                    code_point: format!("U+{code:04X}"),
                    name: name.to_owned()
                }
            );
        }
    }

    #[test]
    fn a_word_of_mixed_scripts_in_a_resource_is_flagged() {
        // `раss` with a Cyrillic `р` and `а` in code: the line is drawn with the word flagged.
        let shown = diff_kinds("--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+if \u{440}\u{430}ss == ok {\n");
        assert_eq!(
            shown.last(),
            Some(&(
                DiffLine::Added,
                "+if \u{440}\u{430}ss[mixes scripts Cyrillic, Latin: U+0440 Cyrillic, U+0430 Cyrillic] == ok {"
                    .to_owned()
            ))
        );
        let Contents::Text { lines, .. } =
            contents("log", None, "user \u{43e}perator\n".as_bytes())
        else {
            panic!("not text");
        };
        assert_eq!(
            lines.iter().map(|l| text_of(l)).collect::<Vec<_>>(),
            ["user \u{43e}perator[mixes scripts Cyrillic, Latin: U+043E Cyrillic]"]
        );
    }

    #[test]
    fn a_carriage_return_and_every_control_but_tab_are_drawn_escaped() {
        // `\r` would draw `evil` over `rm -rf /` in a terminal; here both are seen.
        let shown = diff_kinds("--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+rm -rf /\revil\n");
        assert_eq!(
            shown.last(),
            Some(&(DiffLine::Added, "+rm -rf /<U+000D>evil".to_owned()))
        );
        // A line ending `\r\n` keeps its `\r`, so a change of line endings shows.
        let Contents::Text { lines, .. } = contents("log", None, b"a\r\nb\n") else {
            panic!("not text");
        };
        assert_eq!(
            lines.iter().map(|l| text_of(l)).collect::<Vec<_>>(),
            ["a<U+000D>", "b"]
        );
        for code in (0x01..0x20).chain(0x7F..0xA0) {
            let c = char::from_u32(code).unwrap();
            if c == '\n' {
                continue;
            }
            let p = pieces(&format!("a{c}b"));
            if c == '\t' {
                assert_eq!(p, [Piece::Text("a\tb".to_owned())]);
            } else {
                assert_eq!(p.len(), 3, "U+{code:04X}: {p:?}");
                assert!(
                    matches!(&p[1], Piece::Escape(e) if e.code_point == format!("U+{code:04X}"))
                );
            }
        }
        // Invisible characters beyond the controls are drawn too; visible text is left alone.
        for c in [
            '\u{200B}',
            '\u{FEFF}',
            '\u{2028}',
            '\u{3164}',
            '\u{E0041}',
            '\u{AD}',
        ] {
            assert!(
                matches!(pieces(&c.to_string()).as_slice(), [Piece::Escape(_)]),
                "{c:?}"
            );
        }
        assert_eq!(
            pieces("naïve שלום 🙂"),
            [Piece::Text("naïve שלום 🙂".to_owned())]
        );
        assert!(pieces("").is_empty());
    }
}
