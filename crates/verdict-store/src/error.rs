//! The store's one error type.

use std::path::PathBuf;

/// Why a store operation failed. Every variant names what was refused and where.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A document or record breaks its contract; nothing was written.
    #[error("invalid {what}: {message}")]
    Invalid {
        /// What was being read (`check evidence`, `grant`, ...).
        what: &'static str,
        /// What is wrong, with the JSON pointer where there is one.
        message: String,
    },
    /// The actor's role may not perform this write (checked by the application on every backend).
    #[error("{role} principal {principal:?} may not write {target}")]
    Forbidden {
        /// Who asked.
        principal: String,
        /// In which role.
        role: &'static str,
        /// The table or pointer it tried to write.
        target: &'static str,
    },
    /// The database itself refused the operation for lack of privilege (PostgreSQL roles).
    #[error("permission denied by the database: {0}")]
    Denied(String),
    /// A write that the store's rules refuse (a run that already ended, a pointer going back,
    /// a verifier writing for a run it was not admitted to, ...).
    #[error("refused: {0}")]
    Refused(String),
    /// A write that would leave the store with no operator able to act: revoking the token
    /// of the last operator that holds one (schema version 35). Nothing was written.
    #[error("refused: {0}")]
    LastOperator(String),
    /// The key is already stored with different content. Records are immutable: a change is a
    /// new record (a new finding version, a new grant id, ...).
    #[error(
        "{table} {key:?} is already stored with digest {existing}; refusing different content with digest {offered}"
    )]
    Conflict {
        /// Table.
        table: &'static str,
        /// The key both records claim.
        key: String,
        /// Digest of the stored record.
        existing: String,
        /// Digest of the refused record.
        offered: String,
    },
    /// A uniqueness rule of the database other than the key was hit (for example a token hash
    /// already held by another principal).
    #[error("duplicate: {0}")]
    Duplicate(String),
    /// A compare-and-set found another value than the one expected; nothing changed.
    #[error(
        "compare-and-set of {pointer} pointer {name:?} failed: expected {expected}, found {found}"
    )]
    CasFailed {
        /// Pointer kind.
        pointer: &'static str,
        /// Pointer name.
        name: String,
        /// The value the caller expected (canonical JSON or `none`).
        expected: String,
        /// The value actually there (canonical JSON or `none`).
        found: String,
    },
    /// A job heartbeat, completion or failure under a fencing token that is no longer the
    /// job's current claim (its lease lapsed and another worker took it, or it is finished).
    #[error("job {job}: fencing token {fencing} is not its current claim; nothing changed")]
    StaleClaim {
        /// The job.
        job: i64,
        /// The token the caller held.
        fencing: i64,
    },
    /// Something the operation depends on is not stored.
    #[error("{what} {key:?} not found")]
    NotFound {
        /// What was looked for.
        what: &'static str,
        /// Its key.
        key: String,
    },
    /// The database holds a schema this binary does not know.
    #[error(
        "store schema version {found} is newer than this verdict supports ({supported}); upgrade verdict before using this store"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Newest version this binary knows.
        supported: i64,
    },
    /// The database needs migrations and opening was asked not to apply them.
    #[error("store schema version {found} is older than {supported}; run `verdict store migrate`")]
    SchemaTooOld {
        /// Version found in the database.
        found: i64,
        /// Version this binary needs.
        supported: i64,
    },
    /// The store location could not be understood or prepared.
    #[error("store location {location:?}: {message}")]
    Location {
        /// The location as given (passwords removed).
        location: String,
        /// What is wrong.
        message: String,
    },
    /// A stored row cannot be read back as what it claims to be.
    #[error("stored {table} row {key:?} is corrupt: {message}")]
    Corrupt {
        /// Table.
        table: &'static str,
        /// Key.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A checkpoint or key file is malformed or does not verify.
    #[error("checkpoint: {0}")]
    Checkpoint(String),
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A principal's denials already reach [`crate::DENIALS_PER_MINUTE`] within the last 60
    /// seconds, so this one is not appended. The refusal it would have recorded still stands.
    #[error("{0}")]
    DenialBound(String),
    /// Any other database failure.
    #[error("{backend}: {message}")]
    Backend {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// The database's message.
        message: String,
    },
    /// The database is away: it could not be reached or dropped the connection (refused,
    /// reset, closed), it is shutting down or starting up, it takes no more connections, or no
    /// connection could be had in time (PostgreSQL); it is held by another writer past the
    /// busy timeout (SQLite). Nothing was refused: the same call may succeed once it is back.
    #[error("{backend} unavailable: {message}")]
    Unavailable {
        /// `sqlite` or `postgres`.
        backend: &'static str,
        /// What the driver or the database said.
        message: String,
    },
}

impl StoreError {
    /// Whether the database is away ([`StoreError::Unavailable`]) rather than refusing the
    /// call or failing on it: the one test of "try again later" a worker or a client uses.
    #[must_use]
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why revoking `operator`'s token is refused ([`StoreError::LastOperator`]); the PostgreSQL
/// routine says the same.
pub(crate) fn last_operator_message(operator: &str) -> String {
    format!(
        "revoking the token of operator {operator:?} would leave no operator holding a token, \
         and nobody could act as an operator again; rotate it instead, or give another operator \
         a token first"
    )
}
