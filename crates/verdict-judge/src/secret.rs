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
        if ranges.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (start, end) in ranges {
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

    /// Whether `out` shows any `min` consecutive characters of `key`.
    fn leaks(out: &str, key: &str, min: usize) -> bool {
        (0..=key.len() - min).any(|i| out.contains(&key[i..i + min]))
    }
}
