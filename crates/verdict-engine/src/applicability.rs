//! Applicability (CONTRACTS.md §7): whether a stored decision is current is derived on every
//! read from the execution's head, the gate's policy and the store's time; nothing is ever
//! written over.

use crate::engine::Engine;
use crate::error::Result;
use serde::Serialize;
use verdict_core::contracts::{GateDecision, Outcome, Timestamp};
use verdict_store::{About, DocKind, ExecutionHead, GateHead, StoreClock};

/// Why a decision does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
        }
    }
}

/// One stored decision with its applicability at `now`.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// Execution id.
    pub execution: String,
    /// The clock of the store, so a manual (simulated) time is never taken for a real one.
    pub clock: StoreClock,
    /// The store's time applicability was derived at.
    pub now: Timestamp,
    /// Its head.
    pub head: Option<ExecutionHead>,
    /// The gate's head.
    pub gate: Option<GateHead>,
    /// The latest decision that applies.
    pub applicable: Option<DecisionView>,
    /// When none applies: the latest decision, with why not.
    pub latest: Option<DecisionView>,
}

/// One verifier run in the history.
#[derive(Debug, Clone, Serialize)]
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
    /// Preflight outcome, and whether the model verifier was skipped.
    pub preflight: serde_json::Value,
    /// Whether its result (if any) counts now.
    pub counted: Option<bool>,
}

/// `history`: every decision and run of the execution.
#[derive(Debug, Clone, Serialize)]
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

impl Engine {
    async fn decision_views(
        &self,
        execution: &str,
        now: &Timestamp,
    ) -> Result<(Option<ExecutionHead>, Option<GateHead>, Vec<DecisionView>)> {
        let head = self.execution_head(execution).await?;
        let gate = self.gate_head().await?;
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
            if decision.outcome == Outcome::Pass
                && let Some(until) = &decision.valid_until
                && now >= until
            {
                why.push(NotApplicable::Expired);
            }
            views.push(DecisionView {
                seq: row.seq,
                decision,
                generation,
                not_applicable: why,
            });
        }
        Ok((head, gate, views))
    }

    /// The execution's current applicable decision at `now`, or why none applies.
    pub async fn status(&self, execution: &str) -> Result<Status> {
        let now = &self.now().await?;
        let (head, gate, mut views) = self.decision_views(execution, now).await?;
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
            applicable,
            latest,
        })
    }

    /// Every decision and run of the execution, each with its applicability at `now`.
    pub async fn history(&self, execution: &str) -> Result<History> {
        let now = &self.now().await?;
        let (_, _, decisions) = self.decision_views(execution, now).await?;
        let mut runs = Vec::new();
        for note in self.admission_notes(execution).await? {
            let run_id = note
                .get("run_id")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let run = self.store.run(&run_id).await?;
            let status = run
                .as_ref()
                .and_then(verdict_store::Run::status)
                .map_or("admitted", verdict_store::RunStatus::as_str)
                .to_owned();
            let mut counted = None;
            if let Some(run) = &run {
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
                        counted = Some(self.counts(&row).await?);
                    }
                }
            }
            let text = |k: &str| {
                note.get(k)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            runs.push(RunView {
                run_id,
                verifier: text("verifier"),
                class: text("class"),
                subject_digest: text("subject_digest"),
                generation: note
                    .get("generation")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or_default(),
                status,
                preflight: note.get("preflight").cloned().unwrap_or_default(),
                counted,
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
