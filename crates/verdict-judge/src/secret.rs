//! API keys: read from the environment, sent in a header, shown nowhere else.

use std::collections::HashSet;
use std::fmt;
use std::sync::OnceLock;

/// A secret value. It has no `Display`, no `Serialize`, and its `Debug` prints only a marker, so
/// it cannot reach a log, an error, a receipt or a document by accident.
#[derive(Clone)]
pub struct Secret {
    value: String,
    /// What an encoded echo of the value is searched for by, built once, on first use.
    forms: OnceLock<Forms>,
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.value == other.value
    }
}

impl Eq for Secret {}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

/// What replaces a secret found in text.
pub const REDACTED: &str = "[redacted]";

impl Secret {
    /// Wraps a value.
    #[must_use]
    pub fn new(value: String) -> Self {
        Self {
            value,
            forms: OnceLock::new(),
        }
    }

    /// Reads the environment variable `var`; `None` when unset or empty.
    #[must_use]
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(Self::new)
    }

    /// The value, for the one place that sends it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.value
    }

    /// `text` with the secret replaced by [`REDACTED`]: every occurrence, and every run of at
    /// least [`MIN_RUN`] characters of it (or the whole secret, when shorter). A server may
    /// echo what it was sent, whole or cut (an error page quoting the request headers, a key
    /// shown by its first characters); this keeps such text clean before it is kept anywhere.
    /// Callers redact before they cut text to length: a cut can split an occurrence into runs
    /// no longer than the cut, which is why runs are searched for at all.
    #[must_use]
    pub fn redact(&self, text: &str) -> String {
        let key = self.value.as_bytes();
        if key.len() < 4 {
            // Too short to search for without destroying ordinary text; such a key is refused
            // when the configuration is loaded.
            return text.to_owned();
        }
        let min = key.len().min(MIN_RUN);
        let ranges = shared_runs(text.as_bytes(), key, min);
        let literal = replace_ranges(text, &ranges);
        // Then the key's encodings, read with every separator taken out and case ignored: a
        // server can echo it encoded, reversed, cut into groups by dots, dashes or line breaks,
        // or spread out with filler between its characters.
        let forms = self.forms.get_or_init(|| Forms::of(key));
        let encoded = encoded_runs(&literal, forms);
        replace_ranges(&literal, &encoded)
    }
}

/// The shortest form of a key searched for among the letters and digits of a text. Anything
/// shorter would match ordinary words run together once separators are taken out.
const MIN_FORM: usize = 8;

/// The widest spread searched for: a key's characters with one or two filler characters
/// between each and the next.
const MAX_STRIDE: usize = 3;

const BASE64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/// RFC 4648 base32, its extended-hex alphabet, and Crockford's.
const BASE32: [&[u8]; 3] = [
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
    b"0123456789ABCDEFGHIJKLMNOPQRSTUV",
    b"0123456789ABCDEFGHJKMNPQRSTVWXYZ",
];

/// The forms an echo of a key may take, each reduced to its ASCII letters and digits (what
/// survives when separators are taken out) in lower case (so that hex, base32 and the key
/// itself are found in either case): the key and the key reversed, each as is, in ROT13, in
/// base64 at each of the three alignments it can have inside a longer encoded text (standard
/// and URL-safe base64 differ only in `+/` and `-_`, which are separators here), in base32 of
/// each alphabet at each of its five alignments (padding is a separator too), in hex, as
/// `\xNN`, `&#xNN;` or `\u00NN` escapes and as decimal codes (`&#NNN;`); and each of those
/// reversed.
#[derive(Clone, Default)]
struct Forms {
    /// Every window of [`MIN_RUN`] characters of a form at least that long.
    windows: HashSet<[u8; MIN_RUN]>,
    /// The forms shorter than [`MIN_RUN`], found whole or not at all.
    short: HashSet<Vec<u8>>,
    /// The lengths of the short forms.
    short_lens: Vec<usize>,
}

impl Forms {
    fn of(key: &[u8]) -> Self {
        let reversed: Vec<u8> = key.iter().rev().copied().collect();
        let mut out: Vec<Vec<u8>> = Vec::new();
        for source in [key, reversed.as_slice()] {
            out.push(source.to_vec());
            out.push(source.iter().map(|&b| rot13(b)).collect());
            for shift in 0..3 {
                out.push(aligned(source, shift, 6, BASE64));
            }
            for alphabet in BASE32 {
                for shift in 0..5 {
                    out.push(aligned(source, shift, 5, alphabet));
                }
            }
            out.push(per_byte(source, |b| format!("{b:02x}")));
            out.push(per_byte(source, |b| format!("x{b:02x}")));
            out.push(per_byte(source, |b| format!("u00{b:02x}")));
            out.push(per_byte(source, |b| b.to_string()));
        }
        let mut forms: Vec<Vec<u8>> = out
            .into_iter()
            .map(|f| {
                f.into_iter()
                    .filter(u8::is_ascii_alphanumeric)
                    .map(|b| b.to_ascii_lowercase())
                    .collect()
            })
            .collect();
        let backwards: Vec<Vec<u8>> = forms
            .iter()
            .map(|f| f.iter().rev().copied().collect())
            .collect();
        forms.extend(backwards);
        let mut me = Self::default();
        for f in forms.into_iter().filter(|f| f.len() >= MIN_FORM) {
            if f.len() >= MIN_RUN {
                me.windows.extend(
                    f.windows(MIN_RUN)
                        .filter_map(|w| <[u8; MIN_RUN]>::try_from(w).ok()),
                );
            } else {
                if !me.short_lens.contains(&f.len()) {
                    me.short_lens.push(f.len());
                }
                me.short.insert(f);
            }
        }
        me
    }

    /// Marks in `cover` (a difference array over the text's bytes) every stretch of `view`, a
    /// reading of the text's letters and digits with where each is, that holds a window of a
    /// form or a whole short form.
    fn find(&self, view: &[(u8, usize)], cover: &mut [i32]) {
        let letters: Vec<u8> = view.iter().map(|(b, _)| *b).collect();
        let mut mark = |at: usize, len: usize| {
            let first = view.get(at).map(|(_, i)| *i);
            let last = view.get(at + len - 1).map(|(_, i)| *i + 1);
            if let (Some(s), Some(e)) = (first, last) {
                if let Some(c) = cover.get_mut(s) {
                    *c += 1;
                }
                if let Some(c) = cover.get_mut(e) {
                    *c -= 1;
                }
            }
        };
        for (at, w) in letters.windows(MIN_RUN).enumerate() {
            if <[u8; MIN_RUN]>::try_from(w).is_ok_and(|w| self.windows.contains(&w)) {
                mark(at, MIN_RUN);
            }
        }
        for &len in &self.short_lens {
            for (at, w) in letters.windows(len).enumerate() {
                if self.short.contains(w) {
                    mark(at, len);
                }
            }
        }
    }
}

fn rot13(b: u8) -> u8 {
    match b {
        b'a'..=b'z' => (b - b'a' + 13) % 26 + b'a',
        b'A'..=b'Z' => (b - b'A' + 13) % 26 + b'A',
        _ => b,
    }
}

fn per_byte(bytes: &[u8], f: impl Fn(u8) -> String) -> Vec<u8> {
    bytes.iter().flat_map(|&b| f(b).into_bytes()).collect()
}

/// The characters of an encoding of `bits` bits per character (6 for base64, 5 for base32)
/// that depend only on `bytes` when they are encoded after `shift` other bytes: the characters
/// shared by every text that holds `bytes` at that offset, whatever surrounds them.
fn aligned(bytes: &[u8], shift: usize, bits: usize, alphabet: &[u8]) -> Vec<u8> {
    let bit = |i: usize| -> u8 {
        // Bit `i` (from the top) of the padded stream; the padding's bits are never read.
        let byte = (i / 8)
            .checked_sub(shift)
            .and_then(|j| bytes.get(j))
            .copied()
            .unwrap_or(0);
        (byte >> (7 - i % 8)) & 1
    };
    let (start_bit, end_bit) = (shift * 8, (shift + bytes.len()) * 8);
    let first = start_bit.div_ceil(bits);
    let last = end_bit / bits;
    (first..last)
        .map(|c| {
            let v = (0..bits).fold(0u8, |acc, b| (acc << 1) | bit(c * bits + b));
            alphabet.get(usize::from(v)).copied().unwrap_or(b'A')
        })
        .collect()
}

/// The byte ranges of `text` that hold a run of at least [`MIN_RUN`] characters of one of the
/// `forms` (or a whole form, when it is shorter) in one of the readings of its ASCII letters
/// and digits, folded to lower case: all of them in a row; every second or third of them (a
/// key spread out with filler between its characters); the first, or the last, of each line
/// (a key spread one character per line). Every run that long is made of windows of exactly
/// [`MIN_RUN`], so looking the windows up in a set finds them all, and each reading is one pass:
/// time linear in the text.
fn encoded_runs(text: &str, forms: &Forms) -> Vec<(usize, usize)> {
    let view: Vec<(u8, usize)> = text
        .bytes()
        .enumerate()
        .filter(|(_, b)| b.is_ascii_alphanumeric())
        .map(|(i, b)| (b.to_ascii_lowercase(), i))
        .collect();
    let mut cover = vec![0i32; text.len() + 1];
    forms.find(&view, &mut cover);
    for stride in 2..=MAX_STRIDE {
        for phase in 0..stride {
            let spread: Vec<(u8, usize)> =
                view.iter().skip(phase).step_by(stride).copied().collect();
            forms.find(&spread, &mut cover);
        }
    }
    let (mut firsts, mut lasts) = (Vec::new(), Vec::new());
    let mut line_start = 0;
    for line in text.split('\n') {
        let mut alnum = line
            .bytes()
            .enumerate()
            .filter(|(_, b)| b.is_ascii_alphanumeric())
            .map(|(i, b)| (b.to_ascii_lowercase(), line_start + i));
        if let Some(first) = alnum.next() {
            firsts.push(first);
            lasts.push(alnum.next_back().unwrap_or(first));
        }
        line_start += line.len() + 1;
    }
    forms.find(&firsts, &mut cover);
    forms.find(&lasts, &mut cover);
    // The covered bytes, as ranges: a run's separators and filler go with it.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut depth = 0i32;
    for (i, delta) in cover.iter().enumerate() {
        let was = depth > 0;
        depth += delta;
        match (was, depth > 0) {
            (false, true) => ranges.push((i, i + 1)),
            (true, true) => {
                if let Some(last) = ranges.last_mut() {
                    last.1 = i + 1;
                }
            }
            _ => {}
        }
    }
    ranges
}

/// `text` with each of `ranges` (byte ranges, in order, not overlapping) replaced by
/// [`REDACTED`], widened to whole characters.
fn replace_ranges(text: &str, ranges: &[(usize, usize)]) -> String {
    if ranges.is_empty() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(start, end) in ranges {
        // A run is bytes of the key; widen it to whole characters of the text.
        let start = floor_boundary(text, start).max(at);
        let end = ceil_boundary(text, end);
        out.push_str(text.get(at..start).unwrap_or_default());
        out.push_str(REDACTED);
        at = end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    out
}

/// The shortest run of a secret's characters that is redacted on its own.
pub const MIN_RUN: usize = 12;

/// The byte ranges of `text` covered by a common substring of `text` and `key` at least `min`
/// bytes long, merged and in order. The longest common suffix of `text[..=j]` and each prefix of
/// `key` is carried from one byte of `text` to the next: time `text × key`, memory `key`.
fn shared_runs(text: &[u8], key: &[u8], min: usize) -> Vec<(usize, usize)> {
    let mut prev = vec![0usize; key.len()];
    let mut cur = vec![0usize; key.len()];
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (j, &b) in text.iter().enumerate() {
        let mut best = 0;
        let before = std::iter::once(&0).chain(prev.iter());
        for ((c, &k), p) in cur.iter_mut().zip(key).zip(before) {
            *c = if b == k { p + 1 } else { 0 };
            best = best.max(*c);
        }
        if best >= min {
            let (start, end) = (j + 1 - best, j + 1);
            match ranges.last_mut() {
                Some(last) if last.1 >= start => last.1 = end,
                _ => ranges.push((start, end)),
            }
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    ranges
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(s: &str, mut i: usize) -> usize {
    while i < s.len() && !s.is_char_boundary(i) {
        i += 1;
    }
    i.min(s.len())
}

/// `text` with `secrets` removed, then cut to at most `max` bytes on a character boundary
/// (`...` marks a cut). Always in this order: cutting first could leave a run of a secret too
/// short to be recognised.
#[must_use]
pub fn redact_then_cut<'a>(
    text: &str,
    secrets: impl IntoIterator<Item = &'a Secret>,
    max: usize,
) -> String {
    let clean = redact_all(text, secrets);
    if clean.len() <= max {
        return clean;
    }
    let end = floor_boundary(&clean, max);
    format!("{}...", clean.get(..end).unwrap_or_default())
}

/// Redacts each of `secrets` from `text`.
#[must_use]
pub fn redact_all<'a>(text: &str, secrets: impl IntoIterator<Item = &'a Secret>) -> String {
    secrets
        .into_iter()
        .fold(text.to_owned(), |t, s| s.redact(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_shown() {
        let s = Secret::new("sk-live-12345".into());
        assert_eq!(format!("{s:?}"), "Secret([redacted])");
        assert_eq!(s.redact("bearer sk-live-12345!"), "bearer [redacted]!");
        assert_eq!(redact_all("a sk-live-12345 b", [&s]), "a [redacted] b");
    }

    #[test]
    fn runs_of_a_long_key_are_redacted_wherever_a_cut_falls() {
        let key: String = (0..96)
            .map(|i| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[i * 7 % 36]))
            .collect();
        let s = Secret::new(key.clone());
        for cut in 0..=key.len() {
            // The key cut anywhere, as a clipped echo leaves it, with text around it.
            let (head, tail) = key.split_at(cut);
            for shown in [head, tail] {
                let text = format!("Authorization: Bearer {shown}\u{e9}!");
                let out = s.redact(&text);
                assert!(
                    !leaks(&out, &key, MIN_RUN),
                    "cut {cut}: {out:?} shows a run of the key"
                );
                if shown.len() >= MIN_RUN {
                    assert!(out.contains(REDACTED), "cut {cut}");
                }
            }
            let text = format!("x{key}y").repeat(2);
            let out = redact_then_cut(&text, [&s], 40 + cut);
            assert!(!leaks(&out, &key, MIN_RUN), "{out:?}");
        }
        // Ordinary text stays as it was, multi-byte characters included.
        assert_eq!(s.redact("caf\u{e9} \u{1f600}"), "caf\u{e9} \u{1f600}");
    }

    /// Every encoding of `key` a hostile echo is tried with here, made by an independent
    /// encoder, as the echo would be sent and with a prefix that shifts its alignment.
    fn echoes(key: &str) -> Vec<(String, String)> {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let rev: String = key.chars().rev().collect();
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let split = |t: &str, n: usize, sep: &str| {
            t.as_bytes()
                .chunks(n)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect::<Vec<_>>()
                .join(sep)
        };
        let mut out = vec![
            ("base64".into(), STANDARD.encode(key)),
            ("base64 url".into(), URL_SAFE_NO_PAD.encode(key)),
            ("hex".into(), hex(key.as_bytes())),
            ("HEX".into(), hex(key.as_bytes()).to_uppercase()),
            ("reversed".into(), rev.clone()),
            ("split by dots".into(), split(key, 6, ".")),
            ("spaced".into(), split(key, 4, " ")),
            (
                "base64 in lines".into(),
                split(&STANDARD.encode(key), 7, "\n"),
            ),
            ("base64 of the reversed key".into(), STANDARD.encode(&rev)),
            (
                "base64 reversed".into(),
                STANDARD.encode(key).chars().rev().collect(),
            ),
            (
                "hex reversed".into(),
                hex(key.as_bytes()).chars().rev().collect(),
            ),
        ];
        for prefix in ["B", "Be", "Bearer "] {
            let b = STANDARD.encode(format!("{prefix}{key}"));
            out.push((format!("base64 after {prefix:?}"), b.clone()));
            out.push((format!("base64 after {prefix:?}, split"), split(&b, 5, "-")));
        }
        out.extend(more_echoes(key));
        out
    }

    /// Base32 of both RFC 4648 alphabets and Crockford's, ROT13, escapes, decimal codes, case
    /// changes and spreads, each made independently of the code under test.
    fn more_echoes(key: &str) -> Vec<(String, String)> {
        use data_encoding::{BASE32, BASE32_NOPAD, BASE32HEX, BASE32HEX_NOPAD, Encoding};
        let crockford: Encoding = {
            let mut spec = data_encoding::Specification::new();
            spec.symbols.push_str("0123456789ABCDEFGHJKMNPQRSTVWXYZ");
            spec.encoding().unwrap()
        };
        let rot13: String = key
            .chars()
            .map(|c| match c {
                'a'..='m' | 'A'..='M' => char::from(c as u8 + 13),
                'n'..='z' | 'N'..='Z' => char::from(c as u8 - 13),
                _ => c,
            })
            .collect();
        let bytes = key.as_bytes();
        let each = |f: &dyn Fn(u8) -> String| bytes.iter().map(|b| f(*b)).collect::<String>();
        let spread = |sep: &str| key.chars().map(String::from).collect::<Vec<_>>().join(sep);
        // Each letter or digit with filler between it and the next: one or two letters.
        let filled = |fill: &str| {
            key.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| format!("{c}{fill}"))
                .collect::<String>()
        };
        let mut out: Vec<(String, String)> = vec![
            ("base32".into(), BASE32.encode(bytes)),
            ("base32 lower".into(), BASE32.encode(bytes).to_lowercase()),
            ("base32 unpadded".into(), BASE32_NOPAD.encode(bytes)),
            ("base32hex".into(), BASE32HEX.encode(bytes)),
            (
                "base32hex lower unpadded".into(),
                BASE32HEX_NOPAD.encode(bytes).to_lowercase(),
            ),
            ("base32 crockford".into(), crockford.encode(bytes)),
            (
                "base32 reversed".into(),
                BASE32.encode(bytes).chars().rev().collect(),
            ),
            ("rot13".into(), rot13),
            ("upper case".into(), key.to_uppercase()),
            ("lower case".into(), key.to_lowercase()),
            ("\\x escapes".into(), each(&|b| format!("\\x{b:02x}"))),
            ("&#x entities".into(), each(&|b| format!("&#x{b:X};"))),
            ("\\u escapes".into(), each(&|b| format!("\\u{b:04x}"))),
            ("&# entities".into(), each(&|b| format!("&#{b};"))),
            ("percent-encoded".into(), each(&|b| format!("%{b:02X}"))),
            ("one per line".into(), spread("\n")),
            ("spaced out".into(), spread(" ")),
            ("tabs and non-breaking spaces".into(), spread("\t\u{a0}")),
            ("a filler letter between".into(), filled("q")),
            ("two filler letters between".into(), filled("zq")),
        ];
        // Each of the other four alignments; a longer prefix's own characters would be a run
        // of 12 that is not the key's.
        for prefix in ["B", "Be", "Bea", "Bear"] {
            let b = BASE32.encode(format!("{prefix}{key}").as_bytes());
            out.push((format!("base32 after {prefix:?}"), b));
        }
        out
    }

    /// The key one character per line, each line a word of filler: none of the encodings
    /// above, so checked on its own (the filler survives, the key's characters do not).
    #[test]
    fn a_key_spread_one_character_per_line_is_redacted() {
        for key in ["sk-live-AbCdEfGhIjKlMnOpQrStUvWx", "0123456789abcdef"] {
            let s = Secret::new(key.into());
            let key_chars: Vec<char> = key.chars().filter(char::is_ascii_alphanumeric).collect();
            let first: String = key_chars.iter().map(|c| format!("{c} is fine\n")).collect();
            let last: String = key_chars.iter().map(|c| format!("fine: {c}\n")).collect();
            for (what, text) in [("first", first), ("last", last)] {
                let out = s.redact(&format!("error\n{text}end"));
                let spelled: String = out
                    .lines()
                    .filter_map(|l| {
                        let mut a = l.chars().filter(char::is_ascii_alphanumeric);
                        if what == "first" {
                            a.next()
                        } else {
                            a.next_back()
                        }
                    })
                    .collect();
                let key_norm: String = key_chars.iter().collect();
                assert!(
                    !spelled.contains(&key_norm[..MIN_RUN]),
                    "{key} {what}: {out:?}"
                );
                assert!(out.contains(REDACTED), "{key} {what}");
                assert!(
                    out.starts_with("error\n") && out.ends_with("end"),
                    "{out:?}"
                );
            }
        }
        // Prose whose lines start with ordinary letters stays as it was.
        let s = Secret::new("sk-live-AbCdEfGhIjKlMnOpQrStUvWx".into());
        let prose = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\n";
        assert_eq!(s.redact(prose), prose);
    }

    /// Whether `out`, with all but letters and digits taken out, holds 12 characters in a row
    /// of `echo` reduced the same way (the whole of it when shorter).
    fn shows(out: &str, echo: &str) -> bool {
        let norm = |t: &str| -> String {
            t.chars()
                .filter(char::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase())
                .collect()
        };
        let (out, echo) = (norm(out), norm(echo));
        let n = MIN_RUN.min(echo.len());
        (0..=echo.len() - n).any(|i| out.contains(&echo[i..i + n]))
    }

    #[test]
    fn encoded_split_and_reversed_echoes_of_a_key_are_redacted() {
        for key in [
            "sk-live-AbCdEfGhIjKlMnOpQrStUvWx",
            "sk-ant-api03-Zx9_Qw-8Lm2Np4Rt6Vy0Bc3Df5Hj7Kp1",
            "0123456789abcdef",
        ] {
            let s = Secret::new(key.into());
            for (what, echo) in echoes(key) {
                let text = format!("{{\"error\": \"bad key: {echo} (rejected)\"}}");
                let out = s.redact(&text);
                assert!(!shows(&out, &echo), "{key} {what}: {out:?}");
                assert!(out.contains(REDACTED), "{key} {what}");
                assert!(out.ends_with(" (rejected)\"}"), "{key} {what}: {out:?}");
                // Cut anywhere after redaction, nothing of it shows either.
                let cut = redact_then_cut(&text, [&s], 30);
                assert!(!shows(&cut, &echo), "{key} {what} cut: {cut:?}");
            }
        }
        // Ordinary text, digests and words run together stay as they were.
        let s = Secret::new("sk-live-AbCdEfGhIjKlMnOpQrStUvWx".into());
        let plain = "the tests pass; sha256:0ac282182c0ff7c3fa537b686f41beda4e5b04340ac0f1f9fd577a4c9b37f0ea ok";
        assert_eq!(s.redact(plain), plain);
        // Nor does a long text of digests, numbers and lines read in every way the search reads
        // it (every second and third character, line by line, case ignored).
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut noisy = String::new();
        for i in 0..400 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            noisy.push_str(&format!(
                "{i}: sha256:{x:016x}{:016X} took {} ms\n",
                x.rotate_left(7),
                x % 100_000
            ));
        }
        assert_eq!(s.redact(&noisy), noisy);
    }

    /// Whether `out` shows any `min` consecutive characters of `key`.
    fn leaks(out: &str, key: &str, min: usize) -> bool {
        (0..=key.len() - min).any(|i| out.contains(&key[i..i + min]))
    }
}
