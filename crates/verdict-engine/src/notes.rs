//! The engine's own lifecycle records that have no table of their own: cancellations and
//! refused results. Each is a typed document stored among the requests by the engine itself (in
//! the operator role), like admission notes, and is believed only when the audit chain says the
//! engine wrote it: producers may append to the requests table too, so a note of the right
//! shape written by anyone else is ignored.

use crate::engine::{ENGINE_PRINCIPAL, Engine};
use crate::error::{EngineError, Result};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use verdict_core::contracts::{Name, Role, Timestamp, UnavailableReason};
use verdict_core::digest::Digest;
use verdict_store::{About, ActorRole, DocKind, Stored, Table};

/// Schema of a cancellation record.
pub const CANCELLATION_SCHEMA: &str = "verdict.cancellation/v1";
/// Schema of the record of a verification result refused at submission.
pub const RESULT_REFUSAL_SCHEMA: &str = "verdict.result-refusal/v1";

/// What a cancellation ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Cancelled {
    /// A whole execution: no decision of it applies again, and it takes no new subject,
    /// request, run, gate run or human decision.
    Execution {
        /// The execution id.
        id: Name,
    },
    /// One verifier run: a result it submits later is kept as history and never counted.
    Run {
        /// The run id.
        id: Name,
    },
}

/// Who asked for a cancellation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Requester {
    /// The authenticated principal.
    pub principal: Name,
    /// Its role.
    pub role: Role,
}

/// The record of one cancellation (`verdict.cancellation/v1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Cancellation {
    /// Always [`CANCELLATION_SCHEMA`].
    pub schema: String,
    /// The execution or run it ends.
    pub cancelled: Cancelled,
    /// The execution's subject at the time (a run's: the subject it was admitted for); it
    /// files the record under the execution.
    pub subject_digest: Digest,
    /// Who asked.
    pub by: Requester,
    /// Why (never empty).
    pub reason: String,
    /// When.
    pub at: Timestamp,
}

/// The record of a verification result refused at submission (`verdict.result-refusal/v1`):
/// the run it ended, the digest of the document refused (the document itself is not kept) and
/// why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultRefusal {
    /// Always [`RESULT_REFUSAL_SCHEMA`].
    pub schema: String,
    /// The run, which ends `unavailable` with [`ResultRefusal::reason`].
    pub run_id: Name,
    /// The run's subject.
    pub subject_digest: Digest,
    /// `digest("verification", document)` of the refused document.
    pub result_digest: Digest,
    /// The run's unavailable reason (`invalid_output`).
    pub reason: UnavailableReason,
    /// What was wrong, and where.
    pub detail: String,
    /// When.
    pub at: Timestamp,
}

impl Engine {
    /// Stores one of the engine's own lifecycle records, as the engine.
    pub(crate) async fn put_note<T: Serialize>(&self, note: &T) -> Result<Stored> {
        let doc = serde_json::to_value(note).map_err(|e| EngineError::Invalid {
            what: "lifecycle record",
            message: e.to_string(),
        })?;
        Ok(self
            .store
            .put(&Self::system(), DocKind::Request, &doc)
            .await?)
    }

    /// The engine's records of `schema` about `about`, in the order they were stored. A row
    /// that the audit chain does not show as written by the engine in the operator role is
    /// skipped, and so is one of that schema that does not decode (only the engine writes it,
    /// so that is someone else's document).
    pub(crate) async fn notes<T: DeserializeOwned>(
        &self,
        about: &About,
        schema: &str,
    ) -> Result<Vec<T>> {
        let mut out = Vec::new();
        for row in self.store.list(DocKind::Request, about).await? {
            let value = row.value()?;
            if value.get("schema").and_then(serde_json::Value::as_str) != Some(schema) {
                continue;
            }
            if !self.written_by_engine(&row).await? {
                continue;
            }
            if let Ok(note) = verdict_core::contracts::decode_plain::<T>(&value) {
                out.push(note);
            }
        }
        Ok(out)
    }

    /// Whether the audit event that appended `row` names the engine, in the operator role, as
    /// its writer. On PostgreSQL the role is the database's own check: a producer's connection
    /// cannot append in the operator role.
    pub(crate) async fn written_by_engine(&self, row: &Stored) -> Result<bool> {
        let events = self
            .store
            .audit_events(row.seq.saturating_sub(1), 1)
            .await?;
        Ok(events.iter().any(|e| {
            e.seq == row.seq
                && e.table == Table::VerificationRequests.name()
                && e.key == row.key
                && e.payload_digest == row.digest.as_str()
                && e.principal == ENGINE_PRINCIPAL
                && e.role == ActorRole::Operator.as_str()
        }))
    }
}
