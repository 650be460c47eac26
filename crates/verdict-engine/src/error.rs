//! The engine's one error type, with the stable codes the CLI prints.

use verdict_store::StoreError;

/// Why an engine action failed. Nothing is half-written: each action either stores what it
/// names or fails before its first write, with two deliberate exceptions that record the
/// refusal itself: a refusal of authority is stored as a denial, and a verification result
/// refused at submission ends its run `unavailable` (`invalid_output`) with the reason.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No principal holds the token given.
    #[error("unauthenticated: no principal holds this token")]
    Unauthenticated,
    /// The action is outside the principal's role or grants.
    #[error("permission_denied: {principal} ({role}) may not {action}: {why}")]
    PermissionDenied {
        /// Who asked.
        principal: String,
        /// Its role.
        role: &'static str,
        /// What it tried.
        action: String,
        /// Why not.
        why: String,
    },
    /// The action would let the producer verify its own work.
    #[error("self_verification_denied: {principal} may not {action}: {why}")]
    SelfVerificationDenied {
        /// Who asked.
        principal: String,
        /// What it tried.
        action: String,
        /// Why not.
        why: String,
    },
    /// A document or argument breaks its contract.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// What was read.
        what: &'static str,
        /// What is wrong and where.
        message: String,
    },
    /// Something the action depends on is not stored.
    #[error("{what} {key:?} not found")]
    NotFound {
        /// What was looked for.
        what: &'static str,
        /// Its key.
        key: String,
    },
    /// No policy was ever set for the gate named, so it does not exist (a misspelt `--gate`,
    /// most likely).
    #[error(
        "gate {0:?} does not exist: no policy has been set for it (a policy list names the gates that do)"
    )]
    NoSuchGate(String),
    /// The state moved under the action (a compare-and-set lost, a subject no longer current).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The pointer a write would move is not at the version the caller named (`If-Match`):
    /// it moved since the caller read it, before or while this write ran. Nothing moved.
    #[error("precondition failed: {0}")]
    PreconditionFailed(String),
    /// Replaying a stored decision did not reproduce its bytes.
    #[error("replay of decision {key} does not reproduce the stored bytes")]
    ReplayMismatch {
        /// The evaluation key.
        key: String,
    },
    /// A refusal of authority stands, but recording it as a denial failed: the store did not
    /// take the audit write, so the refusal is reported as the store's fault rather than as
    /// the refusal alone, which would claim an audit record that does not exist.
    #[error("{refusal} (and recording the denial failed: {cause})")]
    DenialNotRecorded {
        /// The refusal.
        refusal: Box<EngineError>,
        /// Why the denial could not be written.
        cause: String,
    },
    /// The store refused or failed. Its text is the store error's own: with it also as the
    /// source, a prefix here would print it twice in an error chain.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl EngineError {
    /// The stable code of the error.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unauthenticated => "unauthenticated",
            Self::PermissionDenied { .. } => "permission_denied",
            Self::Store(StoreError::Forbidden { .. } | StoreError::Denied(_)) => {
                "permission_denied"
            }
            Self::SelfVerificationDenied { .. } => "self_verification_denied",
            Self::Invalid { .. }
            | Self::Store(StoreError::Invalid { .. } | StoreError::Refused(_)) => "invalid_input",
            Self::NotFound { .. }
            | Self::NoSuchGate(_)
            | Self::Store(StoreError::NotFound { .. }) => "not_found",
            Self::Conflict(_)
            | Self::Store(
                StoreError::CasFailed { .. }
                | StoreError::Conflict { .. }
                | StoreError::Duplicate(_)
                | StoreError::StaleClaim { .. }
                | StoreError::LastOperator(_),
            ) => "conflict",
            Self::ReplayMismatch { .. } => "replay_mismatch",
            Self::PreconditionFailed(_) => "precondition_failed",
            Self::DenialNotRecorded { .. } | Self::Store(_) => "store_error",
        }
    }

    /// Whether the database is away ([`StoreError::is_unavailable`]: unreachable, restarting,
    /// its connection cut, no connection free in time) rather than a refusal, bad input or a
    /// failure the same call would meet again. A worker waits and tries again on this, and
    /// only on this.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Store(e) if e.is_unavailable())
    }

    /// Whether the error is a refusal of authority (and so is audited).
    #[must_use]
    pub fn is_denial(&self) -> bool {
        matches!(
            self.code(),
            "permission_denied" | "self_verification_denied"
        )
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = EngineError> = std::result::Result<T, E>;

pub(crate) fn invalid(what: &'static str) -> impl Fn(String) -> EngineError {
    move |message| EngineError::Invalid { what, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(e: StoreError) -> EngineError {
        EngineError::Store(e)
    }

    #[test]
    fn only_the_database_being_away_is_unavailable() {
        let away = store(StoreError::Unavailable {
            backend: "postgres",
            message: "error communicating with database: Connection refused (os error 111)".into(),
        });
        assert!(away.is_unavailable());
        assert_eq!(away.code(), "store_error");
        let denied = || EngineError::PermissionDenied {
            principal: "rev".into(),
            role: "verifier",
            action: "work gate jobs".into(),
            why: "not an operator".into(),
        };
        for not_away in [
            EngineError::Unauthenticated,
            EngineError::Invalid {
                what: "subject",
                message: "/checks: not an array".into(),
            },
            EngineError::DenialNotRecorded {
                refusal: Box::new(denied()),
                cause: "postgres unavailable: pool timed out".into(),
            },
            denied(),
            store(StoreError::Denied(
                "permission denied for table jobs".into(),
            )),
            store(StoreError::Duplicate("duplicate key value".into())),
            store(StoreError::StaleClaim { job: 1, fencing: 1 }),
            store(StoreError::Backend {
                backend: "postgres",
                message: "the database said: new row violates check constraint (SQLSTATE 23514)"
                    .into(),
            }),
            store(StoreError::Invalid {
                what: "job",
                message: "bad input".into(),
            }),
        ] {
            assert!(!not_away.is_unavailable(), "{not_away}");
        }
    }
}
