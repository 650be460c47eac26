//! Why a spec was refused: what, in which criterion, and where in the file.

use std::fmt;

/// One problem in a spec, located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The criterion it is in, when it is in one.
    pub criterion: Option<String>,
    /// JSON pointer into the spec document.
    pub pointer: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.criterion {
            write!(f, "criterion {c:?}: ")?;
        }
        f.write_str(&self.message)?;
        let at = if self.pointer.is_empty() {
            "/"
        } else {
            &self.pointer
        };
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, " (line {l} column {c}, at {at})"),
            _ => write!(f, " (at {at})"),
        }
    }
}

/// A spec that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read spec {path}: {message}")]
    Read {
        /// The path.
        path: String,
        /// Why.
        message: String,
    },
    /// The spec breaks the format.
    #[error("invalid spec: {0}")]
    Invalid(Box<Problem>),
    /// The spec breaks the format in several places, each reported (at least two).
    #[error("invalid spec: {} problems:{}", .0.len(), list(.0))]
    Many(Vec<Problem>),
}

fn list(problems: &[Problem]) -> String {
    problems.iter().map(|p| format!("\n  - {p}")).collect()
}

impl SpecError {
    /// The first located problem, when the spec was read but refused.
    #[must_use]
    pub fn problem(&self) -> Option<&Problem> {
        self.problems().first()
    }

    /// Every located problem, in spec order; empty when the file could not be read.
    #[must_use]
    pub fn problems(&self) -> &[Problem] {
        match self {
            Self::Invalid(p) => std::slice::from_ref(p),
            Self::Many(ps) => ps,
            Self::Read { .. } => &[],
        }
    }

    /// One error for all `problems` (none: `None`).
    #[must_use]
    pub fn of(mut problems: Vec<Problem>) -> Option<Self> {
        match problems.len() {
            0 => None,
            1 => problems.pop().map(|p| Self::Invalid(Box::new(p))),
            _ => Some(Self::Many(problems)),
        }
    }
}
