//! Applicability (docs/spec/applicability.md): whether a stored decision is current is derived on every
//! read from the execution's head, the gate's policy, the items the Gate would read now, the
//! execution's cancellation and the store's time; nothing is ever written over.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result};
use crate::gate_run::Collected;
use crate::notes::{
    CANCELLATION_SCHEMA, Cancellation, Cancelled, RESULT_REFUSAL_SCHEMA, RUN_TAKEOVER_SCHEMA,
    ResultRefusal, RunTakeover,
};
use serde::{Deserialize, Serialize};
use verdict_core::contracts::{GateDecision, Outcome, Timestamp};
use verdict_core::digest::Digest;
use verdict_judge::receipt::Receipt;
use verdict_store::{
    About, DocKind, EvaluationRecord, ExecutionHead, GateHead, StoreClock, Stored,
};

/// Why a decision does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotApplicable {
    /// The execution moved to another generation.
    GenerationMoved,
    /// The execution moved to another subject.
    SubjectMoved,
    /// The gate's policy revision moved.
    PolicyRevisionMoved,
    /// A pass whose time-sensitive evidence went stale.
    Expired,
    /// Something about the subject was recorded after the evaluation the decision came from:
    /// the items the Gate would read now are not the ones it read, or a later evaluation of
    /// the same subject and policy superseded it.
    EvidenceSetMoved,
    /// The execution was cancelled.
    ExecutionCancelled,
    /// Nothing else keeps it from applying, but the Gate, run on the items it reads now at the
    /// time of the decision's evaluation record, does not give it back: the Gate did not make
    /// it (a write of the gate's identity around the engine), so it never applies, and
    /// `audit verify` reports it.
    NotReproduced,
}

impl NotApplicable {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::GenerationMoved => "generation_moved",
            Self::SubjectMoved => "subject_moved",
            Self::PolicyRevisionMoved => "policy_revision_moved",
            Self::Expired => "expired",
            Self::EvidenceSetMoved => "evidence_set_moved",
            Self::ExecutionCancelled => "execution_cancelled",
            Self::NotReproduced => "not_reproduced",
        }
    }
}

/// One stored decision with its applicability at `now`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DecisionView {
    /// Audit seq of the decision.
    pub seq: u64,
    /// The decision.
    pub decision: GateDecision,
    /// The generation of its subject.
    pub generation: u64,
    /// Why it does not apply; empty when it applies.
    pub not_applicable: Vec<NotApplicable>,
}

impl DecisionView {
    /// Whether it applies.
    #[must_use]
    pub fn applies(&self) -> bool {
        self.not_applicable.is_empty()
    }
}

/// `status`: the current applicable decision, or the latest one and why it does not apply.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Status {
    /// Execution id.
    pub execution: String,
    /// The clock of the store, so a manual (simulated) time is never taken for a real one.
    pub clock: StoreClock,
    /// The store's time applicability was derived at.
    pub now: Timestamp,
    /// Its head (`None` only for the engine's own reads: [`Engine::status`] of an execution
    /// no subject was put for is `not_found`).
    pub head: Option<ExecutionHead>,
    /// The gate's head.
    pub gate: Option<GateHead>,
    /// The execution's cancellation, if it was cancelled (then no decision applies).
    pub cancelled: Option<Cancellation>,
    /// The latest decision that applies.
    pub applicable: Option<DecisionView>,
    /// When none applies: the latest decision, with why not.
    pub latest: Option<DecisionView>,
}

/// One verifier run in the history.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunView {
    /// Run id.
    pub run_id: String,
    /// Verifier principal.
    pub verifier: String,
    /// Verifier class.
    pub class: String,
    /// Subject.
    pub subject_digest: String,
    /// Generation admitted for.
    pub generation: u64,
    /// Latest status (`admitted` while none).
    pub status: String,
    /// Preflight outcome, whether the model verifier was skipped, and why.
    pub preflight: crate::runs::Preflight,
    /// Whether its result (if any) counts now.
    pub counted: Option<bool>,
    /// Why it ended as it did, where the engine recorded words for it: who cancelled it and
    /// why, what was wrong with the result refused at submission, or why its model run was
    /// unavailable, in full (secrets redacted).
    pub detail: Option<String>,
    /// The digest of the context its model was shown, when recorded.
    pub context_digest: Option<Digest>,
    /// One receipt per provider call (provider, model, snapshot, tokens, cost, latency,
    /// attempt, outcome, failure detail).
    pub receipts: Vec<Receipt>,
    /// The cache key its result was served from, when it was.
    pub cache_key: Option<String>,
}

/// What [`Engine::decision_views`] reads.
struct Views {
    head: Option<ExecutionHead>,
    gate: Option<GateHead>,
    cancelled: Option<Cancellation>,
    decisions: Vec<DecisionView>,
}

/// `history`: every decision and run of the execution.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct History {
    /// Execution id.
    pub execution: String,
    /// The clock of the store.
    pub clock: StoreClock,
    /// The store's time applicability was derived at.
    pub now: Timestamp,
    /// Decisions, oldest first.
    pub decisions: Vec<DecisionView>,
    /// Runs, in admission order.
    pub runs: Vec<RunView>,
}

/// What the Gate would read now for an execution's current subject under the gate's current
/// policy, and which evaluation of that subject and policy was recorded last.
struct Current {
    /// The evidence set digest of the items the Gate would read now.
    evidence_set: Option<Digest>,
    /// The evaluation key of the latest evaluation record (by store sequence).
    latest_key: Option<Digest>,
    /// Every evaluation record of the subject under the policy, in store order.
    records: Vec<(Stored, EvaluationRecord)>,
    /// The items the Gate would read now, when they are the current subject's under the
    /// current policy.
    collected: Option<Collected>,
}

impl Engine {
    /// The decisions of an execution with their applicability, the execution's head, the
    /// gate's head and the execution's cancellation.
    ///
    /// "Recorded after" (`evidence_set_moved`) is decided by content and by store sequence,
    /// never by a time: a decision on the current subject and policy applies only while the
    /// items the Gate would read now have the decision's evidence set digest, and only if its
    /// evaluation is the one recorded last (highest sequence) for that subject and policy. The
    /// first catches every later check evidence, counted result (with its findings and
    /// dispositions) and human decision, including one appended while the evaluation ran; the
    /// second keeps two decisions from applying at once.
    async fn decision_views(&self, execution: &str, now: &Timestamp) -> Result<Views> {
        let head = self.execution_head_unscoped(execution).await?;
        let gate = self.gate_head().await?;
        // A gate exists once a policy is set for it. Without this, every decision would read
        // as `policy_revision_moved`, which hides a misspelt `--gate`.
        if gate.is_none() {
            return Err(EngineError::NoSuchGate(self.gate.clone()));
        }
        let cancelled = self.execution_cancellation_unscoped(execution).await?;
        let mut current: Option<Current> = None;
        let mut views = Vec::new();
        for row in self
            .store
            .list(DocKind::Decision, &About::Execution(execution.to_owned()))
            .await?
        {
            let decision: GateDecision = row.decode()?;
            let generation = match &decision.subject_digest {
                Some(d) => self.subject(d).await?.execution.generation,
                None => 0,
            };
            let mut why = Vec::new();
            match &head {
                Some(h) if h.generation != generation => why.push(NotApplicable::GenerationMoved),
                Some(h) if decision.subject_digest.as_ref() != Some(&h.subject_digest) => {
                    why.push(NotApplicable::SubjectMoved)
                }
                None => why.push(NotApplicable::SubjectMoved),
                Some(_) => {}
            }
            if gate.as_ref().map(|g| &g.policy_digest) != decision.policy_digest.as_ref() {
                why.push(NotApplicable::PolicyRevisionMoved);
            }
            if why.is_empty()
                && let (Some(h), Some(g)) = (&head, &gate)
            {
                if current.is_none() {
                    current = Some(self.current_evaluation(execution, h, g, now).await?);
                }
                let moved = current.as_ref().is_none_or(|c| {
                    c.evidence_set.is_none()
                        || c.evidence_set != decision.evidence_set_digest
                        || c.latest_key.is_none()
                        || c.latest_key != decision.evaluation_key
                });
                if moved {
                    why.push(NotApplicable::EvidenceSetMoved);
                }
            }
            if decision.outcome == Outcome::Pass
                && let Some(until) = &decision.valid_until
                && now >= until
            {
                why.push(NotApplicable::Expired);
            }
            if cancelled.is_some() {
                why.push(NotApplicable::ExecutionCancelled);
            }
            // The one decision that would apply is evaluated again first: its evidence set and
            // key being current says nothing of whether the Gate made it.
            if why.is_empty()
                && let Some(key) = &decision.evaluation_key
            {
                let made = match &current {
                    Some(Current {
                        collected: Some(collected),
                        records,
                        ..
                    }) => {
                        self.gate_gives(collected, key, &decision, now, records)
                            .await?
                    }
                    _ => false,
                };
                if !made {
                    why.push(NotApplicable::NotReproduced);
                }
            }
            views.push(DecisionView {
                seq: row.seq,
                decision,
                generation,
                not_applicable: why,
            });
        }
        Ok(Views {
            head,
            gate,
            cancelled,
            decisions: views,
        })
    }

    /// The evidence set the Gate would read now for `head` under `gate`, and the key of the
    /// latest evaluation recorded for them. When the store moved between the reads, the
    /// evidence set is unknown, and no decision applies until the next read.
    async fn current_evaluation(
        &self,
        execution: &str,
        head: &ExecutionHead,
        gate: &GateHead,
        now: &Timestamp,
    ) -> Result<Current> {
        let collected = self.collect_unscoped(execution).await?;
        let (evidence_set, collected) =
            if collected.head == *head && collected.policy_digest == gate.policy_digest {
                let set =
                    verdict_core::gate::evaluate_value(&collected.bundle(now)?).evidence_set_digest;
                (set, Some(collected))
            } else {
                (None, None)
            };
        let records = self
            .evaluations_under(&head.subject_digest, &gate.policy_digest)
            .await?;
        let latest_key = records.last().map(|(_, r)| r.evaluation_key.clone());
        Ok(Current {
            evidence_set,
            latest_key,
            records,
            collected,
        })
    }

    /// The execution's current applicable decision at `now`, or why none applies. Read by an
    /// operator, or by a principal holding a grant in force on the execution or its mission;
    /// anyone else is refused and the refusal recorded.
    pub async fn status(&self, caller: &Principal, execution: &str) -> Result<Status> {
        self.require_read(caller, execution, "the status").await?;
        // A misspelt id is not an execution with no decision yet. (The exports answer for an
        // execution not started yet, so only this read refuses it.)
        self.existing_execution_head(execution).await?;
        self.status_unscoped(execution).await
    }

    /// [`Engine::status`] for the engine's own use, for no caller.
    pub(crate) async fn status_unscoped(&self, execution: &str) -> Result<Status> {
        let now = &self.now().await?;
        let Views {
            head,
            gate,
            cancelled,
            decisions: mut views,
        } = self.decision_views(execution, now).await?;
        let applicable = views
            .iter()
            .rposition(DecisionView::applies)
            .map(|i| views.swap_remove(i));
        let latest = if applicable.is_some() {
            None
        } else {
            views.pop()
        };
        Ok(Status {
            execution: execution.to_owned(),
            clock: self.store.clock().await?,
            now: now.clone(),
            head,
            gate,
            cancelled,
            applicable,
            latest,
        })
    }

    /// Every decision and run of the execution, each with its applicability at `now`. Read as
    /// [`Engine::status`] is.
    pub async fn history(&self, caller: &Principal, execution: &str) -> Result<History> {
        self.require_read(caller, execution, "the history").await?;
        self.existing_execution_head(execution).await?;
        self.history_unscoped(execution).await
    }

    /// [`Engine::history`] for the engine's own use, for no caller.
    pub(crate) async fn history_unscoped(&self, execution: &str) -> Result<History> {
        let now = &self.now().await?;
        let decisions = self.decision_views(execution, now).await?.decisions;
        let about = About::Execution(execution.to_owned());
        let cancellations: Vec<Cancellation> = self.notes(&about, CANCELLATION_SCHEMA).await?;
        let refusals: Vec<ResultRefusal> = self.notes(&about, RESULT_REFUSAL_SCHEMA).await?;
        let takeovers: Vec<RunTakeover> = self.notes(&about, RUN_TAKEOVER_SCHEMA).await?;
        let mut runs = Vec::new();
        for note in self.admission_notes_unscoped(execution).await? {
            let run_id = note.run_id.to_string();
            let run = self.store.run(&run_id).await?;
            let status = run
                .as_ref()
                .and_then(verdict_store::Run::status)
                .map_or("admitted", verdict_store::RunStatus::as_str)
                .to_owned();
            let mut counted = None;
            let mut context = None;
            if let Some(run) = &run {
                context = self
                    .contexts_about(&run.admission.subject_digest, &run_id)
                    .await?
                    .pop();
                for row in self
                    .store
                    .list(
                        DocKind::Verification,
                        &About::Subject(run.admission.subject_digest.clone()),
                    )
                    .await?
                {
                    let r: verdict_core::contracts::VerificationResult = row.decode()?;
                    if r.verifier.run.as_str() == run_id {
                        counted = Some(self.counts_unscoped(&row).await?);
                    }
                }
            }
            let taken_over = takeovers
                .iter()
                .find(|t| t.run_id.as_str() == run_id)
                .map(|t| {
                    format!(
                        "run ended: its job {} was taken over by {} ({}): {}",
                        t.job,
                        t.taken_by.principal.as_str(),
                        t.taken_by.role.as_str(),
                        t.reason
                    )
                });
            let detail = match run.as_ref().and_then(verdict_store::Run::status) {
                Some(verdict_store::RunStatus::Cancelled) if taken_over.is_some() => taken_over,
                Some(verdict_store::RunStatus::Cancelled) => cancellations
                    .iter()
                    .find(|c| match &c.cancelled {
                        Cancelled::Run { id } => id.as_str() == run_id,
                        Cancelled::Execution { .. } => false,
                    })
                    .or_else(|| {
                        cancellations
                            .iter()
                            .find(|c| matches!(c.cancelled, Cancelled::Execution { .. }))
                    })
                    .map(|c| {
                        let what = match c.cancelled {
                            Cancelled::Run { .. } => "run",
                            Cancelled::Execution { .. } => "execution",
                        };
                        format!(
                            "{what} cancelled by {} ({}): {}",
                            c.by.principal.as_str(),
                            c.by.role.as_str(),
                            c.reason
                        )
                    }),
                Some(verdict_store::RunStatus::Unavailable) => refusals
                    .iter()
                    .find(|r| r.run_id.as_str() == run_id)
                    .map(|r| format!("result refused ({}): {}", r.reason.as_str(), r.detail)),
                _ => None,
            };
            runs.push(RunView {
                run_id,
                verifier: note.verifier.to_string(),
                class: note.class.to_string(),
                subject_digest: note.subject_digest.to_string(),
                generation: note.generation,
                status,
                preflight: note.preflight,
                counted,
                detail: detail.or_else(|| context.as_ref().and_then(|c| c.detail.clone())),
                context_digest: context.as_ref().map(|c| c.context_digest.clone()),
                receipts: context
                    .as_ref()
                    .map(|c| c.receipts.clone())
                    .unwrap_or_default(),
                cache_key: context.and_then(|c| c.cache_key),
            });
        }
        Ok(History {
            execution: execution.to_owned(),
            clock: self.store.clock().await?,
            now: now.clone(),
            decisions,
            runs,
        })
    }
}
