//! Compiled text expectations (`equals`, `contains`, `matches`, `not_matches`).

use crate::spec::TextMatch;
use regex::Regex;

/// Regexes are bounded so a hostile pattern cannot eat the machine.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Compiles a regex with a size limit; the message says what is wrong.
pub fn compile_regex(pattern: &str) -> Result<Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            format!(
                "invalid regex {pattern:?}: {}",
                e.to_string()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            )
        })
}

/// A [`TextMatch`] with its regexes compiled.
#[derive(Debug, Clone)]
pub struct TextMatcher {
    equals: Option<String>,
    contains: Option<String>,
    matches: Option<Regex>,
    not_matches: Option<Regex>,
}

impl TextMatcher {
    /// Compiles; a match with no condition at all is refused (it would pass anything).
    pub fn compile(m: &TextMatch) -> Result<Self, String> {
        if m.equals.is_none()
            && m.contains.is_none()
            && m.matches.is_none()
            && m.not_matches.is_none()
        {
            return Err(
                "a text expectation needs at least one of equals, contains, matches, not_matches"
                    .into(),
            );
        }
        Ok(Self {
            equals: m.equals.clone(),
            contains: m.contains.clone(),
            matches: m.matches.as_deref().map(compile_regex).transpose()?,
            not_matches: m.not_matches.as_deref().map(compile_regex).transpose()?,
        })
    }

    /// `Ok(())` when `text` satisfies every condition, else why not (`what` names the text).
    pub fn check(&self, what: &str, text: &str) -> Result<(), String> {
        self.check_quoting(what, text, true)
    }

    /// [`TextMatcher::check`] for text that must not be shown: a `not_matches` failure does
    /// not quote what it found.
    pub fn check_unquoted(&self, what: &str, text: &str) -> Result<(), String> {
        self.check_quoting(what, text, false)
    }

    fn check_quoting(&self, what: &str, text: &str, quote: bool) -> Result<(), String> {
        if let Some(e) = &self.equals
            && text != e
        {
            return Err(format!("{what} does not equal {e:?}"));
        }
        if let Some(c) = &self.contains
            && !text.contains(c.as_str())
        {
            return Err(format!("{what} does not contain {c:?}"));
        }
        if let Some(r) = &self.matches
            && !r.is_match(text)
        {
            return Err(format!("{what} does not match /{}/", r.as_str()));
        }
        if let Some(r) = &self.not_matches
            && let Some(m) = r.find(text)
        {
            if !quote {
                return Err(format!("{what} matches /{}/", r.as_str()));
            }
            let found: String = m.as_str().chars().take(80).collect();
            return Err(format!("{what} matches /{}/ (found {found:?})", r.as_str()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_condition_must_hold() {
        let m = TextMatcher::compile(&TextMatch {
            contains: Some("ok".into()),
            not_matches: Some("(?i)error".into()),
            ..TextMatch::default()
        })
        .unwrap();
        assert!(m.check("body", "all ok").is_ok());
        assert!(
            m.check("body", "all good")
                .unwrap_err()
                .contains("does not contain")
        );
        assert!(
            m.check("body", "ok, Error 5")
                .unwrap_err()
                .contains("found \"Error\"")
        );
    }

    #[test]
    fn empty_and_invalid_expectations_are_refused() {
        assert!(TextMatcher::compile(&TextMatch::default()).is_err());
        let bad = TextMatch {
            matches: Some("(unclosed".into()),
            ..TextMatch::default()
        };
        assert!(
            TextMatcher::compile(&bad)
                .unwrap_err()
                .contains("invalid regex")
        );
    }
}
