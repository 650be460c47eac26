//! API keys: read from the environment, sent in a header, shown nowhere else.

use std::fmt;

/// A secret value. It has no `Display`, no `Serialize`, and its `Debug` prints only a marker, so
/// it cannot reach a log, an error, a receipt or a document by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

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
        Self(value)
    }

    /// Reads the environment variable `var`; `None` when unset or empty.
    #[must_use]
    pub fn from_env(var: &str) -> Option<Self> {
        std::env::var(var).ok().filter(|v| !v.is_empty()).map(Self)
    }

    /// The value, for the one place that sends it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with the secret replaced by [`REDACTED`]: every occurrence, and every run of at
    /// least [`MIN_RUN`] characters of it (or the whole secret, when shorter). A server may
    /// echo what it was sent, whole or cut (an error page quoting the request headers, a key
    /// shown by its first characters); this keeps such text clean before it is kept anywhere.
    /// Callers redact before they cut text to length: a cut can split an occurrence into runs
    /// no longer than the cut, which is why runs are searched for at all.
    #[must_use]
    pub fn redact(&self, text: &str) -> String {
        let key = self.0.as_bytes();
        if key.len() < 4 {
            // Too short to search for without destroying ordinary text; such a key is refused
            // when the configuration is loaded.
            return text.to_owned();
        }
        let min = key.len().min(MIN_RUN);
        let ranges = shared_runs(text.as_bytes(), key, min);
        let literal = replace_ranges(text, &ranges);
        // Then the key's encodings, read with every separator taken out: a server can echo it
        // base64-encoded, as hex or reversed, cut into groups by dots, dashes or line breaks.
        let encoded = encoded_runs(&literal, &self.forms());
        replace_ranges(&literal, &encoded)
    }

    /// The forms an echo of the key may take, each reduced to its ASCII letters and digits (what
    /// survives when separators are taken out): the key itself, its base64 at each of the three
    /// alignments it can have inside a longer encoded text (standard and URL-safe base64 differ
    /// only in `+/` and `-_`, which are separators here), its hex in either case; all of them
    /// for the key reversed too, and each reversed.
    fn forms(&self) -> Vec<Vec<u8>> {
        let key = self.0.as_bytes();
        let reversed: Vec<u8> = key.iter().rev().copied().collect();
        let mut out = Vec::new();
        for source in [key, reversed.as_slice()] {
            out.push(source.to_vec());
            for shift in 0..3 {
                out.push(base64_aligned(source, shift));
            }
            let hex = hex_lower(source);
            out.push(hex.to_ascii_uppercase());
            out.push(hex);
        }
        let mut forms: Vec<Vec<u8>> = out
            .into_iter()
            .map(|f| f.into_iter().filter(u8::is_ascii_alphanumeric).collect())
            .collect();
        let backwards: Vec<Vec<u8>> = forms
            .iter()
            .map(|f| f.iter().rev().copied().collect())
            .collect();
        forms.extend(backwards);
        forms.retain(|f| f.len() >= MIN_FORM);
        forms
    }
}

/// The shortest form of a key searched for among the letters and digits of a text. Anything
/// shorter would match ordinary words run together once separators are taken out.
const MIN_FORM: usize = 8;

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The base64 characters that depend only on `bytes` when they are encoded after `shift`
/// (0, 1 or 2) other bytes: the characters shared by every text that holds `bytes` at that
/// offset, whatever surrounds them.
fn base64_aligned(bytes: &[u8], shift: usize) -> Vec<u8> {
    let bits = |i: usize| -> u8 {
        // Bit `i` (from the top) of the padded stream; the padding's bits are never read.
        let byte = (i / 8)
            .checked_sub(shift)
            .and_then(|j| bytes.get(j))
            .copied()
            .unwrap_or(0);
        (byte >> (7 - i % 8)) & 1
    };
    let (start_bit, end_bit) = (shift * 8, (shift + bytes.len()) * 8);
    let first = start_bit.div_ceil(6);
    let last = end_bit / 6;
    (first..last)
        .map(|c| {
            let v = (0..6).fold(0u8, |acc, b| (acc << 1) | bits(c * 6 + b));
            BASE64.get(usize::from(v)).copied().unwrap_or(b'A')
        })
        .collect()
}

fn hex_lower(bytes: &[u8]) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    bytes
        .iter()
        .flat_map(|b| {
            [
                HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0'),
                HEX.get(usize::from(b & 15)).copied().unwrap_or(b'0'),
            ]
        })
        .collect()
}

/// The byte ranges of `text` that, with everything but ASCII letters and digits taken out,
/// hold a run of at least [`MIN_RUN`] characters of one of `forms` (or a whole form, when it is
/// shorter). Every run that long is made of windows of exactly [`MIN_RUN`], so looking the
/// windows up in a set finds them all in time linear in the text.
fn encoded_runs(text: &str, forms: &[Vec<u8>]) -> Vec<(usize, usize)> {
    let view: Vec<(u8, usize)> = text
        .bytes()
        .enumerate()
        .filter(|(_, b)| b.is_ascii_alphanumeric())
        .map(|(i, b)| (b, i))
        .collect();
    let letters: Vec<u8> = view.iter().map(|(b, _)| *b).collect();
    let mut covered = vec![false; letters.len()];
    let mut windows: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for f in forms {
        if f.len() >= MIN_RUN {
            windows.extend(f.windows(MIN_RUN));
        } else {
            // A short form is found whole or not at all.
            for (at, w) in letters.windows(f.len()).enumerate() {
                if w == f.as_slice() {
                    covered
                        .iter_mut()
                        .skip(at)
                        .take(f.len())
                        .for_each(|c| *c = true);
                }
            }
        }
    }
    for (at, w) in letters.windows(MIN_RUN).enumerate() {
        if windows.contains(w) {
            covered
                .iter_mut()
                .skip(at)
                .take(MIN_RUN)
                .for_each(|c| *c = true);
        }
    }
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    let mut prev: Option<usize> = None;
    for (i, (flag, (_, at))) in covered.iter().zip(&view).enumerate() {
        if !flag {
            continue;
        }
        match (ranges.last_mut(), prev) {
            // Consecutive letters of one run: the separators between them go with it.
            (Some(last), Some(p)) if p + 1 == i => last.1 = at + 1,
            _ => ranges.push((*at, at + 1)),
        }
        prev = Some(i);
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
        out
    }

    /// Whether `out`, with all but letters and digits taken out, holds 12 characters in a row
    /// of `echo` reduced the same way (the whole of it when shorter).
    fn shows(out: &str, echo: &str) -> bool {
        let norm = |t: &str| -> String { t.chars().filter(char::is_ascii_alphanumeric).collect() };
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
    }

    /// Whether `out` shows any `min` consecutive characters of `key`.
    fn leaks(out: &str, key: &str, min: usize) -> bool {
        (0..=key.len() - min).any(|i| out.contains(&key[i..i + min]))
    }
}
