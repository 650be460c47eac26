//! The engine's own lifecycle records that have no table of their own: cancellations, refused
//! results, runs ended by a takeover and runs' contexts. Each is a typed document stored among
//! the requests and believed only when the audit chain names a writer who may write it: a
//! cancellation, the canceller (an operator or the producer of the execution); a refused
//! result or a run's context, the run's own verifier, and a run's context also a stored
//! operator as itself (or, for records written before schema 15, and an operator's context
//! before schema 19, the engine in the operator role); a takeover, the verifier it names as
//! the claimant that took the job over (or, before schema 15, the engine). The
//! store checks each at the write, a worker's under its job's current claim in the write's own
//! transaction. Producers and verifiers may append to the requests table too, so a note of the
//! right shape written by anyone else is ignored.

use crate::attest::{ATTESTATION_SCHEMA, SIGNING_KEY_SCHEMA};
use crate::engine::{ENGINE_PRINCIPAL, Engine};
use crate::error::{EngineError, Result};
use crate::runs::RUN_CONTEXT_SCHEMA;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use verdict_core::contracts::{Name, Role, Timestamp, UnavailableReason};
use verdict_core::digest::Digest;
use verdict_core::json::MAX_SAFE_INTEGER;
use verdict_store::{About, Actor, ActorRole, DocKind, JobClaim, Stored, Table};

/// Schema of a cancellation record.
pub const CANCELLATION_SCHEMA: &str = "verdict.cancellation/v1";
/// Schema of the record of a verification result refused at submission.
pub const RESULT_REFUSAL_SCHEMA: &str = "verdict.result-refusal/v1";

/// Schema of the record of a worker's run ended because its job was taken over.
pub const RUN_TAKEOVER_SCHEMA: &str = "verdict.run-takeover/v1";

/// The record of a verifier run ended because the worker that ran it lost its job
/// (`verdict.run-takeover/v1`): its lease lapsed and another worker claimed the job. Written by
/// the new claimant, under its claim, before it admits its own run; the run ends
/// `cancelled`, a result it submits later is refused, and it no longer counts against its
/// request's `max_runs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunTakeover {
    /// Always [`RUN_TAKEOVER_SCHEMA`].
    pub schema: String,
    /// The run ended.
    pub run_id: Name,
    /// The run's subject; it files the record under the execution.
    pub subject_digest: Digest,
    /// The job the run was for.
    pub job: i64,
    /// The fencing token of the claim the run was admitted under.
    pub stale_fencing: i64,
    /// The fencing token of the claim that took the job over.
    pub fencing: i64,
    /// The worker principal that took the job over.
    pub taken_by: Requester,
    /// Why, in words.
    pub reason: String,
    /// When (the store's time).
    pub at: Timestamp,
}

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

/// `note` as the document to store, refused if it holds a number the store's reader would
/// refuse on reading it back (beyond ±(2^53 - 1)): stored, such a note would make every read of
/// its execution fail, and one backend would take it while the other refuses it.
fn note_doc<T: Serialize>(note: &T) -> Result<Value> {
    let bad = |message: String| EngineError::Invalid {
        what: "lifecycle record",
        message,
    };
    let doc = serde_json::to_value(note).map_err(|e| bad(e.to_string()))?;
    if let Some((at, n)) = unreadable_number(&doc, String::new()) {
        return Err(bad(format!(
            "number {n} at {at:?} is outside ±(2^53-1), which no reader of the store accepts"
        )));
    }
    Ok(doc)
}

/// The JSON pointer and value of the first number in `v` beyond ±(2^53 - 1).
fn unreadable_number(v: &Value, at: String) -> Option<(String, serde_json::Number)> {
    #[expect(clippy::cast_precision_loss, reason = "2^53 - 1 is exact as a double")]
    let max = MAX_SAFE_INTEGER as f64;
    match v {
        Value::Number(n) => {
            let within = match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), ..) => (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i),
                (None, Some(_), _) => false,
                (None, None, Some(f)) => f.is_finite() && f.abs() <= max,
                (None, None, None) => false,
            };
            (!within).then(|| (at, n.clone()))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, x)| unreadable_number(x, format!("{at}/{i}"))),
        Value::Object(map) => map.iter().find_map(|(k, x)| {
            let key = k.replace('~', "~0").replace('/', "~1");
            unreadable_number(x, format!("{at}/{key}"))
        }),
        Value::Null | Value::Bool(_) | Value::String(_) => None,
    }
}

impl Engine {
    /// Stores a lifecycle record as `actor`: a cancellation, a webhook registration or an
    /// operator's run context is its writer's own act; a webhook delivery record is the
    /// engine's, in the system role.
    pub(crate) async fn put_note_as<T: Serialize>(
        &self,
        actor: &Actor,
        note: &T,
    ) -> Result<Stored> {
        let doc = note_doc(note)?;
        Ok(self.store.put(actor, DocKind::Request, &doc).await?)
    }

    /// Stores a lifecycle record as `actor`, under a worker's `claim` when one is given: then
    /// only while the claim is its job's current one, checked by the store in the append's
    /// own transaction.
    pub(crate) async fn put_note_claimed<T: Serialize>(
        &self,
        actor: &Actor,
        claim: Option<&JobClaim>,
        note: &T,
    ) -> Result<Stored> {
        let Some(c) = claim else {
            return self.put_note_as(actor, note).await;
        };
        let doc = note_doc(note)?;
        Ok(self
            .store
            .put_claimed(actor, c, DocKind::Request, &doc)
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
            let rightful = match schema {
                CANCELLATION_SCHEMA => self.cancellation_rightful(&row, &value).await?,
                ATTESTATION_SCHEMA | SIGNING_KEY_SCHEMA => {
                    self.written_by_an_operator(&row).await?
                }
                RUN_TAKEOVER_SCHEMA | RESULT_REFUSAL_SCHEMA | RUN_CONTEXT_SCHEMA => {
                    self.run_note_rightful(&row, &value, schema).await?
                }
                _ => self.written_by_engine(&row).await?,
            };
            if !rightful {
                continue;
            }
            if let Ok(note) = verdict_core::contracts::decode_plain::<T>(&value) {
                out.push(note);
            }
        }
        Ok(out)
    }

    /// The principal and role the audit chain names as the writer of `row` (a row of the
    /// requests table), if the event that appended it is found.
    pub(crate) async fn writer_of(&self, row: &Stored) -> Result<Option<(String, String)>> {
        let events = self
            .store
            .audit_events(row.seq.saturating_sub(1), 1)
            .await?;
        Ok(events
            .into_iter()
            .find(|e| {
                e.seq == row.seq
                    && e.table == Table::VerificationRequests.name()
                    && e.key == row.key
                    && e.payload_digest == row.digest.as_str()
            })
            .map(|e| (e.principal, e.role)))
    }

    /// Whether a record about a run was written by one who may write it: the engine in the
    /// operator role (every such record before schema 15, and an operator's run context before
    /// schema 19: since then the database refuses that identity, so such a record is older);
    /// for a run's context, a stored operator as itself; for a refused result or a run's
    /// context, the verifier the run was admitted to; for a takeover, the verifier it names as
    /// the claimant, about the earlier claim's run of the job it names
    /// (`job-<job>-<stale_fencing>`, an earlier token than the claimant's). The store refused
    /// any such record not written under the job's current claim.
    async fn run_note_rightful(&self, row: &Stored, value: &Value, schema: &str) -> Result<bool> {
        let Some((principal, role)) = self.writer_of(row).await? else {
            return Ok(false);
        };
        if principal == ENGINE_PRINCIPAL {
            return Ok(role == ActorRole::Operator.as_str());
        }
        if schema == RUN_CONTEXT_SCHEMA && role == ActorRole::Operator.as_str() {
            return self.stored_operator(&principal).await;
        }
        if role != ActorRole::Verifier.as_str() {
            return Ok(false);
        }
        if schema == RUN_TAKEOVER_SCHEMA {
            let Ok(t) = verdict_core::contracts::decode_plain::<RunTakeover>(value) else {
                return Ok(false);
            };
            return Ok(t.taken_by.principal.as_str() == principal
                && t.taken_by.role == Role::Verifier
                && t.stale_fencing < t.fencing
                && t.run_id.as_str() == format!("job-{}-{}", t.job, t.stale_fencing));
        }
        let Some(run_id) = value.get("run_id").and_then(Value::as_str) else {
            return Ok(false);
        };
        Ok(self
            .store
            .run(run_id)
            .await?
            .is_some_and(|r| r.admission.verifier.as_str() == principal))
    }

    /// Whether a cancellation record was written by one who may cancel what it names, as
    /// itself: the engine (records written before cancellations were the canceller's own act),
    /// an operator naming itself as the canceller, or the producer of the cancelled execution
    /// naming itself, whose subject was the execution's newest when it wrote the record. Any
    /// other writer's record, however shaped, is ignored.
    pub(crate) async fn cancellation_rightful(&self, row: &Stored, value: &Value) -> Result<bool> {
        let Some((principal, role)) = self.writer_of(row).await? else {
            return Ok(false);
        };
        let operator = ActorRole::Operator.as_str();
        if principal == ENGINE_PRINCIPAL {
            return Ok(role == operator);
        }
        let Ok(c) = verdict_core::contracts::decode_plain::<Cancellation>(value) else {
            return Ok(false);
        };
        if c.by.principal.as_str() != principal || c.by.role.as_str() != role {
            return Ok(false);
        }
        // The writer must be a stored principal of the role it wrote in.
        let Some(record) = self.store.principal(&principal).await? else {
            return Ok(false);
        };
        if record.role != c.by.role {
            return Ok(false);
        }
        match c.by.role {
            Role::Operator => Ok(true),
            Role::Producer => {
                let Cancelled::Execution { id } = &c.cancelled else {
                    return Ok(false);
                };
                let Some(stored) = self.store.get(DocKind::Subject, &c.subject_digest).await?
                else {
                    return Ok(false);
                };
                let subject: verdict_core::contracts::Subject = stored.decode()?;
                if subject.producer.principal.as_str() != principal
                    || subject.execution.id.as_str() != id.as_str()
                {
                    return Ok(false);
                }
                // A producer of an earlier generation, since replaced, cancels nothing.
                let newest = self
                    .store
                    .list(DocKind::Subject, &About::Execution(id.to_string()))
                    .await?
                    .into_iter()
                    .filter(|s| s.seq < row.seq)
                    .filter_map(|s| {
                        s.decode::<verdict_core::contracts::Subject>()
                            .ok()
                            .map(|d| (d.execution.generation, s.key))
                    })
                    .max_by_key(|(generation, _)| *generation);
                Ok(newest.is_some_and(|(_, key)| key == c.subject_digest.as_str()))
            }
            _ => Ok(false),
        }
    }

    /// Whether the audit chain names, as the writer of `row`, a stored operator in the operator
    /// role, or the engine (records written before they were the operator's own act). On
    /// PostgreSQL only an operator's own identity writes in the operator role under its name.
    pub(crate) async fn written_by_an_operator(&self, row: &Stored) -> Result<bool> {
        let Some((principal, role)) = self.writer_of(row).await? else {
            return Ok(false);
        };
        if role != ActorRole::Operator.as_str() {
            return Ok(false);
        }
        if principal == ENGINE_PRINCIPAL {
            return Ok(true);
        }
        self.stored_operator(&principal).await
    }

    /// Whether `principal` is a stored principal in the operator role.
    pub(crate) async fn stored_operator(&self, principal: &str) -> Result<bool> {
        Ok(self
            .store
            .principal(principal)
            .await?
            .is_some_and(|p| p.role == Role::Operator))
    }

    /// Whether the audit event that appended `row` names the engine, in the operator role, as
    /// its writer. On PostgreSQL the role is the database's own check: a producer's connection
    /// cannot append in the operator role; and since schema 19 the engine's identity writes
    /// nothing, so such a record was written before.
    pub(crate) async fn written_by_engine(&self, row: &Stored) -> Result<bool> {
        Ok(self.writer_of(row).await?.is_some_and(|(principal, role)| {
            principal == ENGINE_PRINCIPAL && role == ActorRole::Operator.as_str()
        }))
    }
}
