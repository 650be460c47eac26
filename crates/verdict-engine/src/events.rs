//! Decisions as they happen: the audit log read forward from a sequence number and projected to
//! typed lifecycle events, each carrying the `seq` of the audit event it comes from as its id.
//! Nothing here is stored: an event is only ever a reading of a row the chain names, so a
//! client that resumes from a seq sees exactly what the log holds after it, and a push (a
//! stream, a webhook) is a projection anyone can redo from the store.
//!
//! Events are filtered by the same rule as `status`: an operator sees all, anyone else the
//! events of an execution while it holds a grant in force on it or its mission. An event the
//! caller may not read is left out silently, as a listing leaves out what it does not cover,
//! so polling writes no denial.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result};
use crate::notes::{CANCELLATION_SCHEMA, Cancellation, Cancelled};
use serde::Serialize;
use std::collections::HashMap;
use verdict_core::contracts::{GateDecision, HumanDecision, HumanVerdict, Role, Timestamp};
use verdict_core::digest::Digest;
use verdict_store::{
    ActorRole, AuditEvent, ExecutionHead, Grant, PointerKind, RunEvent, ScopeKind, StoreError,
    Stored, Table,
};

/// The most audit events one call reads.
pub const MAX_EVENTS_PAGE: u32 = 1000;

/// What happened, with what it is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// The Gate stored a decision.
    GateDecision {
        /// The subject decided on.
        subject_digest: Digest,
        /// The policy it was decided under.
        policy_digest: Option<Digest>,
        /// The decision's evaluation key.
        evaluation_key: Option<Digest>,
        /// The digest of the stored decision.
        decision_digest: Digest,
        /// `pass`, `rework`, `blocked`, ...
        outcome: String,
        /// Its reason codes, in the decision's order.
        reasons: Vec<String>,
    },
    /// A person approved or rejected a subject under a policy.
    HumanDecision {
        /// The subject reviewed.
        subject_digest: Digest,
        /// The policy reviewed under.
        policy_digest: Digest,
        /// The decision's digest.
        digest: Digest,
        /// Who decided.
        principal: String,
        /// `approve` or `reject`.
        decision: String,
    },
    /// A verifier run reached a terminal status.
    RunEnded {
        /// The run.
        run_id: String,
        /// Its verifier.
        verifier: String,
        /// Its class.
        class: String,
        /// The subject it verified.
        subject_digest: Digest,
        /// `completed`, `unavailable` or `cancelled`.
        status: String,
        /// Why unavailable.
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The execution was cancelled.
    ExecutionCancelled {
        /// The subject current when it was cancelled.
        subject_digest: Digest,
        /// Who asked.
        by: String,
        /// Why.
        reason: String,
    },
    /// The execution's current subject moved.
    SubjectMoved {
        /// The new current subject.
        subject_digest: Digest,
        /// Its generation.
        generation: u64,
        /// The subject it replaced, if any.
        previous: Option<Digest>,
    },
    /// A stored record of a kind that makes events does not decode as what its table holds.
    /// It is named rather than skipped or allowed to end the stream: the events around it
    /// still flow, and whoever reads it knows which record to look at (`audit verify`).
    UndecodableRecord {
        /// Its table.
        table: String,
        /// Its key.
        key: String,
        /// Its digest, as the audit chain records it: named when the record is the one the
        /// audit event appended, not when it is one that record led to.
        #[serde(skip_serializing_if = "Option::is_none")]
        digest: Option<String>,
        /// Why it does not decode.
        error: String,
    },
}

impl EventKind {
    /// The event's type name (`gate_decision`, `human_decision`, `run_ended`,
    /// `execution_cancelled`, `subject_moved`, `undecodable_record`).
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::GateDecision { .. } => "gate_decision",
            Self::HumanDecision { .. } => "human_decision",
            Self::RunEnded { .. } => "run_ended",
            Self::ExecutionCancelled { .. } => "execution_cancelled",
            Self::SubjectMoved { .. } => "subject_moved",
            Self::UndecodableRecord { .. } => "undecodable_record",
        }
    }

    /// Every type name.
    pub const NAMES: [&'static str; 6] = [
        "gate_decision",
        "human_decision",
        "run_ended",
        "execution_cancelled",
        "subject_moved",
        "undecodable_record",
    ];
}

/// One lifecycle event: the audit event it projects and what it says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The audit `seq` of the row: the event's id, increasing, never reused.
    pub seq: u64,
    /// The execution it is about: always named, except for an undecodable record whose
    /// subject cannot be told (only operators see such an event).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    /// The execution's mission, if its subject names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mission: Option<String>,
    /// When the store recorded the row (informative).
    pub recorded_at: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What one call read: the events the caller may see, and how far the log was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventPage {
    /// The events, in seq order.
    pub events: Vec<Event>,
    /// The seq of the last audit event read (`after` when none was): the cursor of the next
    /// call, past events that were filtered out.
    pub read_to: u64,
}

/// What the caller may read, worked out once per call.
struct Scope {
    operator: bool,
    grants: Vec<Grant>,
    now: Timestamp,
    readable: HashMap<String, bool>,
}

impl Engine {
    /// The lifecycle events after audit seq `after`, reading at most `limit` audit events
    /// (1 to [`MAX_EVENTS_PAGE`]), filtered to what `caller` may read: every event for an
    /// operator, for anyone else those of executions it holds a grant in force on (the rule
    /// of [`Engine::status`]), at the store's time.
    pub async fn events_after(
        &self,
        caller: &Principal,
        after: u64,
        limit: u32,
    ) -> Result<EventPage> {
        let limit = limit.clamp(1, MAX_EVENTS_PAGE);
        let audit = self.store.audit_events(after, limit).await?;
        let read_to = audit.last().map_or(after, |e| e.seq);
        let operator = caller.role == Role::Operator;
        let mut scope = Scope {
            operator,
            grants: if operator {
                Vec::new()
            } else {
                self.store.grants_for(caller.name.as_str()).await?
            },
            now: self.now().await?,
            readable: HashMap::new(),
        };
        let mut events = Vec::new();
        for e in &audit {
            let event = match self.project(e).await {
                Ok(Some(event)) => event,
                Ok(None) => continue,
                // One record that does not decode fails that record, not the page: it is
                // reported as itself, and the records after it are still read.
                Err(EngineError::Store(StoreError::Corrupt {
                    table,
                    key,
                    message,
                })) => self.undecodable(e, table, key, message).await?,
                Err(other) => return Err(other),
            };
            let readable = match &event.execution {
                Some(execution) => self.in_scope(&mut scope, execution).await?,
                None => scope.operator,
            };
            if readable {
                events.push(event);
            }
        }
        Ok(EventPage { events, read_to })
    }

    /// The lifecycle event one audit event records, if it records one.
    async fn project(&self, e: &AuditEvent) -> Result<Option<Event>> {
        let Some(table) = Table::from_name(&e.table) else {
            return Ok(None);
        };
        let kind = match table {
            Table::GateDecisions
            | Table::HumanDecisions
            | Table::RunEvents
            | Table::PointerChanges => table,
            // Among the requests, only cancellation records by a rightful canceller (an
            // operator, the engine, or the execution's producer: checked below).
            Table::VerificationRequests
                if e.role == ActorRole::Operator.as_str()
                    || e.role == ActorRole::Producer.as_str() =>
            {
                table
            }
            _ => return Ok(None),
        };
        let Some(row) = self.row_of(kind, e).await? else {
            return Ok(None);
        };
        let (subject_digest, what) = match kind {
            Table::GateDecisions => {
                let d: GateDecision = row.decode()?;
                let Some(subject) = d.subject_digest.clone() else {
                    return Ok(None);
                };
                let what = EventKind::GateDecision {
                    subject_digest: subject.clone(),
                    policy_digest: d.policy_digest.clone(),
                    evaluation_key: d.evaluation_key.clone(),
                    decision_digest: row.digest.clone(),
                    outcome: d.outcome.as_str().to_owned(),
                    reasons: d
                        .reasons
                        .iter()
                        .map(|r| r.code.as_str().to_owned())
                        .collect(),
                };
                (subject, what)
            }
            Table::HumanDecisions => {
                let d: HumanDecision = row.decode()?;
                let what = EventKind::HumanDecision {
                    subject_digest: d.subject_digest.clone(),
                    policy_digest: d.policy_digest.clone(),
                    digest: row.digest.clone(),
                    principal: d.principal.to_string(),
                    decision: match d.decision {
                        HumanVerdict::Approve => "approve",
                        HumanVerdict::Reject => "reject",
                    }
                    .to_owned(),
                };
                (d.subject_digest, what)
            }
            Table::RunEvents => {
                let re: RunEvent = row.decode()?;
                if !re.status.is_terminal() {
                    return Ok(None);
                }
                let Some(run) = self.store.run(re.run_id.as_str()).await? else {
                    return Ok(None);
                };
                let a = run.admission;
                let what = EventKind::RunEnded {
                    run_id: a.run_id.to_string(),
                    verifier: a.verifier.to_string(),
                    class: a.class.to_string(),
                    subject_digest: a.subject_digest.clone(),
                    status: re.status.as_str().to_owned(),
                    reason: re.reason.map(|r| r.as_str().to_owned()),
                };
                (a.subject_digest, what)
            }
            Table::PointerChanges => {
                // A pointer change's body: `pointer`, `name`, `revision`, `old`, `new`.
                let c = row.value()?;
                if c.get("pointer").and_then(serde_json::Value::as_str)
                    != Some(PointerKind::Execution.as_str())
                {
                    return Ok(None);
                }
                let head = |v: Option<&serde_json::Value>| {
                    v.filter(|v| !v.is_null()).and_then(|v| {
                        verdict_core::contracts::decode_plain::<ExecutionHead>(v).ok()
                    })
                };
                let Some(new) = head(c.get("new")) else {
                    return Ok(None);
                };
                let what = EventKind::SubjectMoved {
                    subject_digest: new.subject_digest.clone(),
                    generation: new.generation,
                    previous: head(c.get("old")).map(|h| h.subject_digest),
                };
                (new.subject_digest, what)
            }
            Table::VerificationRequests => {
                let value = row.value()?;
                if value.get("schema").and_then(serde_json::Value::as_str)
                    != Some(CANCELLATION_SCHEMA)
                {
                    return Ok(None);
                }
                if !self.cancellation_rightful(&row, &value).await? {
                    return Ok(None);
                }
                let Ok(c) = verdict_core::contracts::decode_plain::<Cancellation>(&value) else {
                    return Ok(None);
                };
                if !matches!(c.cancelled, Cancelled::Execution { .. }) {
                    // A run's cancellation shows as its run ending `cancelled`.
                    return Ok(None);
                }
                let what = EventKind::ExecutionCancelled {
                    subject_digest: c.subject_digest.clone(),
                    by: c.by.principal.to_string(),
                    reason: c.reason,
                };
                (c.subject_digest, what)
            }
            _ => return Ok(None),
        };
        let subject = self.subject(&subject_digest).await?;
        Ok(Some(Event {
            seq: e.seq,
            execution: Some(subject.execution.id.to_string()),
            mission: subject.mission.as_ref().map(ToString::to_string),
            recorded_at: e.recorded_at.clone(),
            kind: what,
        }))
    }

    /// The event naming a record that does not decode (`table`, `key`: the record the reader
    /// met, which may be the one `e` appended or one it leads to). Its execution is the one
    /// of the stored subject its body names, when its body is JSON naming one that decodes;
    /// otherwise it has none, and only operators see it.
    async fn undecodable(
        &self,
        e: &AuditEvent,
        table: &'static str,
        key: String,
        error: String,
    ) -> Result<Event> {
        let digest = (table == e.table && key == e.key).then(|| e.payload_digest.clone());
        let named = match Table::from_name(table) {
            Some(t) if t.has_subject() => self
                .store
                .rows(t, e.seq.saturating_sub(1), 1)
                .await?
                .into_iter()
                .next()
                .filter(|r| r.key == key)
                .and_then(|r| r.value().ok())
                .and_then(|v| {
                    v.get("subject_digest")
                        .and_then(serde_json::Value::as_str)
                        .and_then(|s| s.parse::<Digest>().ok())
                }),
            _ => None,
        };
        let subject = match named {
            Some(d) => match self.subject(&d).await {
                Ok(s) => Some(s),
                Err(EngineError::Store(
                    StoreError::Corrupt { .. } | StoreError::NotFound { .. },
                ))
                | Err(EngineError::NotFound { .. }) => None,
                Err(other) => return Err(other),
            },
            None => None,
        };
        Ok(Event {
            seq: e.seq,
            execution: subject.as_ref().map(|s| s.execution.id.to_string()),
            mission: subject
                .as_ref()
                .and_then(|s| s.mission.as_ref().map(ToString::to_string)),
            recorded_at: e.recorded_at.clone(),
            kind: EventKind::UndecodableRecord {
                table: table.to_owned(),
                key,
                digest,
                error,
            },
        })
    }

    /// The row an audit event appended: the first row of its table at or after its seq, which
    /// must be its seq, key and digest, or the event names no row this store can show.
    async fn row_of(&self, table: Table, e: &AuditEvent) -> Result<Option<Stored>> {
        let row = self
            .store
            .rows(table, e.seq.saturating_sub(1), 1)
            .await?
            .into_iter()
            .next();
        Ok(row
            .filter(|r| r.seq == e.seq && r.key == e.key && r.digest.as_str() == e.payload_digest))
    }

    /// Whether the caller of `scope` may read `execution`'s events: the rule of
    /// `require_read`, without a denial.
    async fn in_scope(&self, scope: &mut Scope, execution: &str) -> Result<bool> {
        if scope.operator {
            return Ok(true);
        }
        if let Some(known) = scope.readable.get(execution) {
            return Ok(*known);
        }
        let now = &scope.now;
        let readable = match self.execution_head_unscoped(execution).await? {
            Some(head) => {
                let subject = self.subject(&head.subject_digest).await?;
                scope
                    .grants
                    .iter()
                    .any(|g| g.is_active(now) && g.covers(&subject))
            }
            None => scope.grants.iter().any(|g| {
                g.is_active(now)
                    && g.record.scope.kind == ScopeKind::Execution
                    && g.record.scope.id.as_str() == execution
            }),
        };
        scope.readable.insert(execution.to_owned(), readable);
        Ok(readable)
    }
}
