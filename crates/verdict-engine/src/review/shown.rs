//! Text a principal wrote, as the review pages draw it. A producer, verifier or any principal
//! may write a criterion, a finding, a reason or a name meant to read as something else: with a
//! bidirectional control that reorders what follows, an invisible character, or a letter of
//! another script that looks like a Latin one (a Cyrillic `о` in `оperator`). [`Shown`] is the
//! only form in which the review model hands such text to a page: it is built only by escaping
//! every character a resource's bytes would have escaped ([`super::pieces`]) and flagging
//! look-alikes, and it has no `Display`, so a template cannot draw the text as written.

use super::contents::{Piece, pieces};
use schemars::JsonSchema;
use serde::Serialize;

/// The most code points one flag lists before it says how many more there are.
const LISTED: usize = 8;

/// Text a principal wrote, split into what the page draws: text, escaped characters and
/// look-alike flags. Built only by [`Shown::text`] and [`Shown::name`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Shown {
    /// The text as written: for links, attributes and comparisons, never drawn.
    written: String,
    /// The text as drawn.
    pieces: Vec<Piece>,
}

impl Shown {
    /// Free text (a criterion, a remediation, a reason, a message): every character
    /// [`super::pieces`] escapes is escaped, and a word whose letters come from more than one
    /// script (Latin with Cyrillic, Greek with Latin ...) is followed by a flag naming the
    /// scripts and the code points of the letters outside its main one.
    #[must_use]
    pub fn text(written: &str) -> Self {
        Self {
            written: written.to_owned(),
            pieces: flagged(written),
        }
    }

    /// An identifier-like value (a principal's name, an id, a class, a kind, a revision): as
    /// [`Shown::text`], and a name holding any character outside printable ASCII that is not
    /// already escaped is followed by one flag listing each such character's code point and
    /// script, so `оperator` cannot be taken for `operator`.
    #[must_use]
    pub fn name(written: &str) -> Self {
        let mut out = pieces(written);
        let foreign: Vec<char> = written
            .chars()
            .filter(|&c| !(' '..='~').contains(&c) && !is_escaped(c))
            .collect();
        if !foreign.is_empty() {
            out.push(Piece::Flag(format!("not ASCII: {}", listed(&foreign))));
        }
        Self {
            written: written.to_owned(),
            pieces: out,
        }
    }

    /// What the page draws.
    #[must_use]
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Whether the text holds a right-to-left character (Hebrew, Arabic and the other scripts
    /// written right to left, their digits included). A browser lays such text out by the
    /// bidirectional algorithm, which moves neighbouring digits and punctuation with the
    /// right-to-left run; a page draws it left to right in the order written instead (HTML's
    /// `bdo dir="ltr"`), as it draws a resource's lines, so what a reviewer reads is what the
    /// bytes say.
    #[must_use]
    pub fn holds_right_to_left(&self) -> bool {
        self.written.chars().any(right_to_left)
    }

    /// The text as written, for a link's path, an attribute a browser does not draw (`data-`,
    /// an element id) or a comparison; never for drawn text.
    #[must_use]
    pub fn written(&self) -> &str {
        &self.written
    }

    /// The drawn form as one plain string, each escape as `<U+202E>` and each flag in square
    /// brackets: for a page's title, which holds no markup.
    #[must_use]
    pub fn plain(&self) -> String {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Escape(e) => {
                    out.push('<');
                    out.push_str(&e.code_point);
                    out.push('>');
                }
                Piece::Flag(why) => {
                    out.push_str(" [");
                    out.push_str(why);
                    out.push(']');
                }
            }
        }
        out
    }
}

/// `line` as [`pieces`] draws it, each word that mixes scripts followed by its flag, and, in a
/// line that holds Latin letters, each word wholly of Cyrillic or Greek letters that all pass
/// for Latin ones (`аррӏе`) followed by a flag spelling the Latin it passes for: how free text
/// and a resource's lines are drawn.
#[must_use]
pub fn flagged(line: &str) -> Vec<Piece> {
    let latin_beside = line.chars().any(|c| script(c) == Some("Latin"));
    let mut out = Vec::new();
    for piece in pieces(line) {
        match piece {
            Piece::Text(t) => flag_words(&t, latin_beside, &mut out),
            other => out.push(other),
        }
    }
    // Said once, after the text: its right-to-left characters are drawn in the order written,
    // which is not the order a reader of those scripts expects.
    let backwards: Vec<char> = line.chars().filter(|&c| right_to_left(c)).collect();
    if !backwards.is_empty() {
        out.push(Piece::Flag(format!(
            "right-to-left, drawn left to right in the order written: {}",
            listed(&backwards)
        )));
    }
    out
}

/// Whether `c` is written right to left, or is a digit of such a script: the blocks of Hebrew,
/// Arabic, Syriac, Thaana, N'Ko, Samaritan, Mandaic and their presentation forms, and the
/// supplementary planes' right-to-left blocks.
#[must_use]
pub fn right_to_left(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFE | 0x10800..=0x10FFF | 0x1E800..=0x1EFFF
    )
}

/// Whether [`pieces`] draws `c` as an escape.
fn is_escaped(c: char) -> bool {
    let mut buf = [0u8; 4];
    matches!(
        pieces(c.encode_utf8(&mut buf)).as_slice(),
        [Piece::Escape(_)]
    )
}

/// Whether `c` belongs to a word: a letter, a digit or a combining mark.
fn in_word(c: char) -> bool {
    c.is_alphanumeric() || is_combining(c)
}

fn is_combining(c: char) -> bool {
    matches!(
        u32::from(c),
        0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F
    )
}

/// `text` into `out`, each word that mixes scripts, or (with `latin_beside`) passes for Latin
/// while written wholly in another script, followed by its flag.
fn flag_words(text: &str, latin_beside: bool, out: &mut Vec<Piece>) {
    let mut plain = String::new();
    let mut word = String::new();
    let end_word = |word: &mut String, plain: &mut String, out: &mut Vec<Piece>| {
        let flag = mixed(word).or_else(|| {
            if latin_beside {
                posing_as_latin(word)
            } else {
                None
            }
        });
        plain.push_str(word);
        word.clear();
        if let Some(why) = flag {
            out.push(Piece::Text(std::mem::take(plain)));
            out.push(Piece::Flag(why));
        }
    };
    for c in text.chars() {
        if in_word(c) {
            word.push(c);
        } else {
            end_word(&mut word, &mut plain, out);
            plain.push(c);
        }
    }
    end_word(&mut word, &mut plain, out);
    if !plain.is_empty() {
        out.push(Piece::Text(plain));
    }
}

/// When the letters of `word` come from more than one script, what the flag says: the scripts,
/// and each letter outside the word's main script. Latin with the CJK scripts is one
/// writing system (as Unicode's "highly restrictive" profile has it) and is not flagged.
fn mixed(word: &str) -> Option<String> {
    let letters: Vec<(char, &'static str)> = word
        .chars()
        .filter_map(|c| script(c).map(|s| (c, s)))
        .collect();
    let mut scripts: Vec<(&'static str, usize)> = Vec::new();
    for (_, s) in &letters {
        match scripts.iter_mut().find(|(k, _)| k == s) {
            Some((_, n)) => *n += 1,
            None => scripts.push((s, 1)),
        }
    }
    if scripts.len() < 2
        || (scripts.len() == 2 && scripts.iter().all(|(s, _)| matches!(*s, "Latin" | "CJK")))
    {
        return None;
    }
    // The most frequent script is the word's main one; on a tie Latin is, so that the letters
    // listed are the ones posing as Latin.
    let main = scripts
        .iter()
        .rev()
        .max_by_key(|(s, n)| (*n, *s == "Latin"))
        .map_or("", |(s, _)| *s);
    let others: Vec<char> = letters
        .iter()
        .filter(|(_, s)| *s != main)
        .map(|(c, _)| *c)
        .collect();
    let names: Vec<&str> = scripts.iter().map(|(s, _)| *s).collect();
    Some(format!(
        "mixes scripts {}: {}",
        names.join(", "),
        listed(&others)
    ))
}

/// When `word` has two letters or more, all of one script other than Latin, and each drawn
/// like a Latin letter, what the flag says: the Latin it reads as and the letters' code points.
/// Only asked of words in a line that also holds Latin letters: there a whole word of
/// look-alikes (`аррӏе` for `apple`) is how a look-alike hides from the mixed-script flag,
/// while in a line wholly in Cyrillic or Greek such words are ordinary ones.
fn posing_as_latin(word: &str) -> Option<String> {
    let letters: Vec<char> = word.chars().filter(|&c| script(c).is_some()).collect();
    if letters.len() < 2 || letters.len() != word.chars().count() {
        return None;
    }
    let first = script(*letters.first()?)?;
    if first == "Latin" || letters.iter().any(|&c| script(c) != Some(first)) {
        return None;
    }
    let reads: String = letters
        .iter()
        .map(|&c| latin_look_alike(c))
        .collect::<Option<String>>()?;
    Some(format!(
        "looks like Latin \"{reads}\": {}",
        listed(&letters)
    ))
}

/// The Latin letter that `c`, a Cyrillic or Greek letter, is drawn like in common fonts; `None`
/// for every other letter. Only close look-alikes are listed, so that an ordinary word of those
/// scripts (`пароль`, `λόγος`) is never taken for Latin.
fn latin_look_alike(c: char) -> Option<char> {
    Some(match c {
        // Cyrillic.
        'а' => 'a',
        'А' => 'A',
        'В' => 'B',
        'е' => 'e',
        'Е' => 'E',
        'К' => 'K',
        'М' => 'M',
        'Н' => 'H',
        'о' => 'o',
        'О' => 'O',
        'р' => 'p',
        'Р' => 'P',
        'с' => 'c',
        'С' => 'C',
        'Т' => 'T',
        'у' | 'ү' => 'y',
        'Ү' => 'Y',
        'х' => 'x',
        'Х' => 'X',
        'ѕ' => 's',
        'Ѕ' => 'S',
        'і' => 'i',
        'І' | 'Ӏ' => 'I',
        'ј' => 'j',
        'Ј' => 'J',
        'ԁ' => 'd',
        'ӏ' => 'l',
        'һ' => 'h',
        'ԛ' => 'q',
        'Ԛ' => 'Q',
        'ԝ' => 'w',
        'Ԝ' => 'W',
        // Greek.
        'Α' => 'A',
        'Β' => 'B',
        'Ε' => 'E',
        'Ζ' => 'Z',
        'Η' => 'H',
        'Ι' => 'I',
        'ι' => 'i',
        'Κ' => 'K',
        'κ' => 'k',
        'Μ' => 'M',
        'Ν' => 'N',
        'ν' => 'v',
        'Ο' => 'O',
        'ο' => 'o',
        'Ρ' => 'P',
        'ρ' => 'p',
        'Τ' => 'T',
        'Υ' => 'Y',
        'υ' => 'u',
        'Χ' => 'X',
        'χ' => 'x',
        _ => return None,
    })
}

/// `U+043E Cyrillic, U+0430 Cyrillic`, at most [`LISTED`] of them.
fn listed(chars: &[char]) -> String {
    let mut parts: Vec<String> = chars
        .iter()
        .take(LISTED)
        .map(|&c| {
            let code = format!("U+{:04X}", u32::from(c));
            match script(c) {
                Some(s) => format!("{code} {s}"),
                None => code,
            }
        })
        .collect();
    if chars.len() > LISTED {
        parts.push(format!("and {} more", chars.len() - LISTED));
    }
    parts.join(", ")
}

/// The script of a letter, by the Unicode block it is in; `None` for anything that is not a
/// letter (digits, marks, punctuation, symbols), which belongs to no script of its own. Only
/// the blocks whose letters can pass for another script's are told apart; a letter of any other
/// block is `another script`.
#[must_use]
pub fn script(c: char) -> Option<&'static str> {
    if !c.is_alphabetic() {
        return None;
    }
    Some(match u32::from(c) {
        0x0041..=0x005A
        | 0x0061..=0x007A
        | 0x00AA
        | 0x00BA
        | 0x00C0..=0x02AF
        | 0x1D00..=0x1DBF
        | 0x1E00..=0x1EFF
        | 0x2C60..=0x2C7F
        | 0xA720..=0xA7FF
        | 0xAB30..=0xAB6F => "Latin",
        0xFF21..=0xFF3A | 0xFF41..=0xFF5A => "Fullwidth Latin",
        0x0370..=0x03FF | 0x1F00..=0x1FFF => "Greek",
        0x0400..=0x052F | 0x1C80..=0x1C8F | 0x2DE0..=0x2DFF | 0xA640..=0xA69F => "Cyrillic",
        0x0530..=0x058F | 0xFB13..=0xFB17 => "Armenian",
        0x0590..=0x05FF | 0xFB1D..=0xFB4F => "Hebrew",
        0x0600..=0x06FF | 0x0750..=0x077F | 0x08A0..=0x08FF | 0xFB50..=0xFDFF | 0xFE70..=0xFEFF => {
            "Arabic"
        }
        0x0900..=0x097F => "Devanagari",
        0x0E00..=0x0E7F => "Thai",
        0x10A0..=0x10FF | 0x2D00..=0x2D2F => "Georgian",
        0x13A0..=0x13FF | 0xAB70..=0xABBF => "Cherokee",
        0x1400..=0x167F => "Canadian Aboriginal",
        0x2100..=0x214F => "Letterlike",
        0x1D400..=0x1D7FF => "Mathematical",
        0x1100..=0x11FF
        | 0x2E80..=0x2FDF
        | 0x3005..=0x3007
        | 0x3040..=0x31FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xAC00..=0xD7AF
        | 0xF900..=0xFAFF
        | 0xFF66..=0xFFDC
        | 0x20000..=0x3FFFF => "CJK",
        _ => "another script",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::Escape;

    fn flags(s: &Shown) -> Vec<&str> {
        s.pieces()
            .iter()
            .filter_map(|p| match p {
                Piece::Flag(f) => Some(f.as_str()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_word_mixing_scripts_is_flagged_with_the_letters_outside_its_main_script() {
        // A Cyrillic `о` (U+043E) and `а` (U+0430) among Latin letters.
        let s = Shown::text("ask the \u{43e}perator to p\u{430}y now");
        assert_eq!(
            s.pieces(),
            [
                Piece::Text("ask the \u{43e}perator".to_owned()),
                Piece::Flag("mixes scripts Cyrillic, Latin: U+043E Cyrillic".to_owned()),
                Piece::Text(" to p\u{430}y".to_owned()),
                Piece::Flag("mixes scripts Latin, Cyrillic: U+0430 Cyrillic".to_owned()),
                Piece::Text(" now".to_owned()),
            ]
        );
        assert_eq!(
            s.plain(),
            "ask the \u{43e}perator [mixes scripts Cyrillic, Latin: U+043E Cyrillic] to p\u{430}y [mixes scripts Latin, Cyrillic: U+0430 Cyrillic] now"
        );
        assert_eq!(s.written(), "ask the \u{43e}perator to p\u{430}y now");
        // Greek omicron in a Latin word; fullwidth letters among plain ones.
        assert_eq!(
            flags(&Shown::text("t\u{3bf}ken")),
            ["mixes scripts Latin, Greek: U+03BF Greek"]
        );
        assert_eq!(
            flags(&Shown::text("ad\u{ff4d}in")),
            ["mixes scripts Latin, Fullwidth Latin: U+FF4D Fullwidth Latin"]
        );
        // One script per word, whatever the script, and Latin beside Japanese, are not flagged;
        // nor are digits and marks beside letters.
        for honest in [
            "naïve café, Ærøskøbing",
            "пароль верный",
            "ελληνικά",
            "iPhone用 の テスト",
            "v2 x86_64 e\u{301}",
            "",
        ] {
            let s = Shown::text(honest);
            assert!(flags(&s).is_empty(), "{honest}: {s:?}");
            assert_eq!(s.plain(), honest);
        }
        // Hebrew mixes no scripts either; it is only said to be drawn in the order written.
        assert_eq!(
            flags(&Shown::text("שלום עולם")),
            [format!(
                "right-to-left, drawn left to right in the order written: {}",
                "U+05E9 Hebrew, U+05DC Hebrew, U+05D5 Hebrew, U+05DD Hebrew, U+05E2 Hebrew, \
                 U+05D5 Hebrew, U+05DC Hebrew, U+05DD Hebrew"
            )]
        );
        // The main script is the most frequent one: here the Latin letter is the odd one out.
        assert_eq!(
            flags(&Shown::text("a\u{430}\u{430}\u{430}")),
            ["mixes scripts Latin, Cyrillic: U+0061 Latin"]
        );
        // Past eight letters the flag says how many more.
        let many = format!("{}{}", "a".repeat(20), "\u{43e}".repeat(10));
        assert_eq!(
            flags(&Shown::text(&many)),
            [format!(
                "mixes scripts Latin, Cyrillic: {}, and 2 more",
                ["U+043E Cyrillic"; 8].join(", ")
            )]
        );
    }

    #[test]
    fn a_word_wholly_of_look_alikes_among_latin_text_is_flagged_with_the_latin_it_reads_as() {
        // `аррӏе`: Cyrillic а, р, р, ӏ, е; no Latin letter in it, so it mixes no scripts.
        let apple = "\u{430}\u{440}\u{440}\u{4cf}\u{435}";
        let s = Shown::text(&format!("pay {apple} now"));
        assert_eq!(
            s.pieces(),
            [
                Piece::Text(format!("pay {apple}")),
                Piece::Flag(
                    "looks like Latin \"apple\": U+0430 Cyrillic, U+0440 Cyrillic, \
                     U+0440 Cyrillic, U+04CF Cyrillic, U+0435 Cyrillic"
                        .to_owned()
                ),
                Piece::Text(" now".to_owned()),
            ]
        );
        // Greek capitals passing for `TOKEN`, in a resource's line as in free text.
        assert_eq!(
            flags(&Shown::text("set \u{3a4}\u{39f}\u{39a}\u{395}\u{39d} here")),
            [
                "looks like Latin \"TOKEN\": U+03A4 Greek, U+039F Greek, U+039A Greek, U+0395 Greek, U+039D Greek"
            ]
        );
        // In text with no Latin letter the same word is an ordinary one, and a word with a
        // letter that has no Latin look-alike (`пароль`), or a single letter, is never flagged.
        for honest in [
            apple.to_owned(),
            "\u{441}\u{435}\u{440}\u{43e} \u{43f}\u{430}\u{440}\u{43e}\u{43b}\u{44c}".to_owned(),
            "use the \u{43f}\u{430}\u{440}\u{43e}\u{43b}\u{44c} field".to_owned(),
            "option \u{430} or b".to_owned(),
            "\u{3bb}\u{3cc}\u{3b3}\u{3bf}\u{3c2} means word".to_owned(),
        ] {
            assert!(flags(&Shown::text(&honest)).is_empty(), "{honest}");
        }
    }

    #[test]
    fn hidden_and_reordering_characters_in_written_text_are_escaped_as_in_a_resource() {
        let s = Shown::text("ok \u{202e}evil\u{202c} done\r");
        assert_eq!(
            s.pieces(),
            [
                Piece::Text("ok ".to_owned()),
                Piece::Escape(Escape {
                    code_point: "U+202E".to_owned(),
                    name: "right-to-left override".to_owned()
                }),
                Piece::Text("evil".to_owned()),
                Piece::Escape(Escape {
                    code_point: "U+202C".to_owned(),
                    name: "pop directional formatting".to_owned()
                }),
                Piece::Text(" done".to_owned()),
                Piece::Escape(Escape {
                    code_point: "U+000D".to_owned(),
                    name: "carriage return".to_owned()
                }),
            ]
        );
        assert_eq!(s.plain(), "ok <U+202E>evil<U+202C> done<U+000D>");
        // A name too, and the escaped character is not listed again in its flag.
        let n = Shown::name("rev\u{202e}\u{43e}");
        assert_eq!(n.plain(), "rev<U+202E>\u{43e} [not ASCII: U+043E Cyrillic]");
        for shown in [&s, &n] {
            for p in shown.pieces() {
                if let Piece::Text(t) = p {
                    assert!(!t.contains('\u{202e}') && !t.contains('\r'), "{t:?}");
                }
            }
        }
    }

    /// Free text holding Hebrew or Arabic is said to be drawn in the order written (the page
    /// draws it so), once, after the text, listing the right-to-left characters; text without
    /// any is not, and only such text asks to be drawn that way.
    #[test]
    fn right_to_left_text_is_flagged_as_drawn_in_the_order_written() {
        // A browser would draw the 10 on the Hebrew side of the line.
        let s = Shown::text("approve 10 \u{5d0}\u{5d1} now");
        assert!(s.holds_right_to_left());
        assert_eq!(
            flags(&s),
            [
                "right-to-left, drawn left to right in the order written: U+05D0 Hebrew, U+05D1 Hebrew"
            ]
        );
        // Arabic-Indic digits are laid out right to left too, though they are no letters.
        let digits = Shown::text("total \u{661}\u{662}");
        assert!(digits.holds_right_to_left());
        assert_eq!(
            flags(&digits),
            ["right-to-left, drawn left to right in the order written: U+0661, U+0662"]
        );
        for plain in [
            "approve 10 now",
            "\u{43f}\u{430}\u{440}\u{43e}\u{43b}\u{44c}",
            "\u{65e5}\u{672c}",
        ] {
            let t = Shown::text(plain);
            assert!(!t.holds_right_to_left(), "{plain}");
            assert!(flags(&t).is_empty(), "{plain}");
        }
        // A name holding one is drawn the same way; its flag already lists every such code point.
        let n = Shown::name("rev-\u{5d0}");
        assert!(n.holds_right_to_left());
        assert_eq!(flags(&n), ["not ASCII: U+05D0 Hebrew"]);
    }

    #[test]
    fn a_name_outside_printable_ascii_is_flagged_with_every_such_code_point() {
        assert_eq!(
            Shown::name("\u{43e}perator").plain(),
            "\u{43e}perator [not ASCII: U+043E Cyrillic]"
        );
        // Wholly Cyrillic, so no word mixes scripts, yet it reads as `operator`.
        let all = "\u{43e}\u{440}\u{435}r\u{430}t\u{43e}r";
        assert_eq!(
            flags(&Shown::name(all)),
            [
                "not ASCII: U+043E Cyrillic, U+0440 Cyrillic, U+0435 Cyrillic, U+0430 Cyrillic, U+043E Cyrillic"
            ]
        );
        assert_eq!(
            flags(&Shown::name("h\u{e9}l\u{e8}ne")),
            ["not ASCII: U+00E9 Latin, U+00E8 Latin"]
        );
        assert_eq!(flags(&Shown::name("no\u{a0}1")), ["not ASCII: U+00A0"]);
        for plain in ["operator", "rev-2", "a.b_c@d+e", "agent coder #1"] {
            let s = Shown::name(plain);
            assert_eq!(s.pieces(), [Piece::Text(plain.to_owned())]);
        }
        assert!(Shown::name("").pieces().is_empty());
        // The same text is equal as shown, so a page can group by it.
        assert_eq!(Shown::name("x"), Shown::name("x"));
        assert_ne!(Shown::name("x"), Shown::text("y"));
    }
}
