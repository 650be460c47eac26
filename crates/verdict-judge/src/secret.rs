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

    /// `text` with every occurrence of the secret replaced by [`REDACTED`]. A server may echo
    /// what it was sent (an error page quoting the request headers); this keeps such text
    /// clean before it is kept anywhere.
    #[must_use]
    pub fn redact(&self, text: &str) -> String {
        if self.0.len() < 4 {
            // Too short to search for without destroying ordinary text; such a key is refused
            // when the configuration is loaded.
            return text.to_owned();
        }
        text.replace(&self.0, REDACTED)
    }
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
}
