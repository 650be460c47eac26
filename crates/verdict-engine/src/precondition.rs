//! Preconditions on the writes that move a pointer (HTTP's `If-Match`): the version of the
//! pointer the caller last read, compared by the use case against the state it then moves the
//! pointer from. The store's compare-and-set moves the pointer only from that same state, so
//! the comparison and the move cannot be told apart by a writer racing in between: of two
//! writers naming the same version, one moves the pointer and the other is refused.
//!
//! A version names the pointer's whole state (digest and generation, or digest and revision),
//! so setting a policy back to an earlier one still changes it. Versions are written as strong
//! entity tags (RFC 9110 section 8.8.3) and compared strongly.

use verdict_core::quote::{MAX_QUOTED_CHARS, quoted};
use verdict_store::{ExecutionHead, GateHead};

/// The version (entity tag) of an execution's head.
#[must_use]
pub fn execution_version(head: &ExecutionHead) -> String {
    format!("\"{}#{}\"", head.subject_digest.as_str(), head.generation)
}

/// The version (entity tag) of a gate's head.
#[must_use]
pub fn gate_version(head: &GateHead) -> String {
    format!("\"{}#{}\"", head.policy_digest.as_str(), head.revision)
}

/// The most tags of an `If-Match` a refusal repeats.
pub const SHOWN_TAGS: usize = 4;

/// What the caller expects the pointer to be before the write moves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// Any current state (`*`), but not a pointer that does not exist yet.
    Exists,
    /// One of these versions (strong tags: a weak tag never matches).
    OneOf(Vec<String>),
}

impl Precondition {
    /// Reads the items of `If-Match` header values: `*`, or strong tags separated by commas.
    #[must_use]
    pub fn from_if_match<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut tags = Vec::new();
        for v in values {
            for t in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                if t == "*" {
                    return Self::Exists;
                }
                tags.push(t.to_owned());
            }
        }
        Self::OneOf(tags)
    }

    /// Whether the current version (`None`: no pointer yet) satisfies it.
    #[must_use]
    pub fn matches(&self, current: Option<&str>) -> bool {
        match (self, current) {
            (_, None) => false,
            (Self::Exists, Some(_)) => true,
            (Self::OneOf(tags), Some(cur)) => tags.iter().any(|t| t == cur),
        }
    }

    /// The precondition as `If-Match` writes it, for a refusal to repeat: "an empty If-Match"
    /// when it names no tag, and bounded, since the caller chose its length. At most
    /// [`SHOWN_TAGS`] tags are shown, then how many more there were; a tag longer than a
    /// quoted value may be is shown quoted and cut.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Exists => "*".to_owned(),
            Self::OneOf(tags) if tags.is_empty() => "an empty If-Match".to_owned(),
            Self::OneOf(tags) => {
                let mut shown: Vec<String> = tags
                    .iter()
                    .take(SHOWN_TAGS)
                    .map(|t| {
                        if t.chars().count() > MAX_QUOTED_CHARS {
                            quoted(t)
                        } else {
                            t.clone()
                        }
                    })
                    .collect();
                if tags.len() > SHOWN_TAGS {
                    shown.push(format!("and {} more", tags.len() - SHOWN_TAGS));
                }
                shown.join(", ")
            }
        }
    }

    /// The refusal when `current` does not satisfy it.
    pub(crate) fn refusal(&self, what: &str, current: Option<&str>) -> crate::EngineError {
        let current = current.unwrap_or("none yet");
        crate::EngineError::PreconditionFailed(match self {
            Self::OneOf(tags) if tags.is_empty() => format!(
                "{} names no version; {what} is at {current}; read it again",
                self.describe()
            ),
            _ => format!(
                "{what} is not at {} but at {current}; read it again",
                self.describe()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_compared_strongly() {
        let cur = Some("\"a#1\"");
        let p = |v: &str| Precondition::from_if_match([v]);
        assert!(p("\"a#1\"").matches(cur));
        assert!(p("\"b#2\", \"a#1\"").matches(cur));
        assert!(p("*").matches(cur));
        for bad in ["\"a#2\"", "W/\"a#1\"", "a#1", ""] {
            assert!(!p(bad).matches(cur), "{bad}");
        }
        // Nothing current: even `*` fails.
        assert!(!p("*").matches(None));
    }

    #[test]
    fn a_refusal_says_an_empty_if_match_and_bounds_what_it_repeats() {
        let empty = Precondition::from_if_match(["", " , "]).refusal("the head", Some("\"a#1\""));
        assert_eq!(
            empty.to_string(),
            "precondition failed: an empty If-Match names no version; the head is at \"a#1\"; read it again"
        );
        let many = vec!["\"x#1\""; 10_000].join(", ");
        let long = format!("\"{}\"", "y".repeat(5000));
        let p = Precondition::from_if_match([long.as_str(), many.as_str()]);
        let shown = p.describe();
        assert!(
            shown.ends_with(&format!("and {} more", 10_001 - SHOWN_TAGS)),
            "{shown}"
        );
        assert!(shown.contains("(5002 bytes in all, cut)"), "{shown}");
        assert!(shown.chars().count() < 1024, "{}", shown.len());
        // A few tags are shown whole.
        let few = Precondition::from_if_match(["\"a#1\", \"b#2\""]);
        assert_eq!(few.describe(), "\"a#1\", \"b#2\"");
    }
}
