//! What a person reviewing work needs, read as the caller: the queue of executions waiting for
//! a person, the board of every execution the caller may read, one execution's whole review
//! (subject, policy, decision, criterion matrix, findings, evidence, receipts, history), the
//! lineage of its findings, the reliability series of the ledger, and the human decision with
//! the gate run that follows it. The review pages of the server render these and nothing else.
//!
//! Every text a producer, verifier or any principal wrote reaches a page only as [`Shown`]:
//! escaped as a resource's bytes are, with look-alikes flagged. The model holds no such text as
//! a plain string, so a page cannot draw it as written.

use crate::applicability::{DecisionView, History};
use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use crate::ledger::{CohortStatus, Window};
use crate::subjects::Reviewed;
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;
use verdict_core::contracts::{
    CheckEvidence, CriterionStatus, DispositionKind, FindingRef, GateDecision, HumanVerdict,
    Outcome, Policy, Reason, Role, Scope, Severity, SourceKind, Subject, Timestamp,
    VerificationResult,
};
use verdict_core::digest::Digest;
use verdict_judge::receipt::Receipt;
use verdict_store::{About, DocKind, EvaluationRecord, PointerKind, StoreClock};

mod contents;
mod shown;
pub use contents::{Contents, DiffLine, Escape, Piece, SHOWN_BYTES, SHOWN_LINES, contents, pieces};
pub use shown::{Shown, flagged, script};

/// The window the review pages rate reliability over (the ledger command's defaults).
pub const REVIEW_WINDOW: Window = Window {
    attempts: 100,
    days: 30,
    min_sample: 10,
};

/// The wire name of a serialised enum value (`snake_case`), for display.
fn wire<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// The class `policy` treats `subject` as: its stated class, raised to the policy's
/// `risk_floor` when that is higher. A reviewer is shown this beside the stated class, so work
/// a producer called `low` is not read as low when the policy asks more of it.
#[must_use]
pub fn effective_risk_class(subject: &Subject, policy: &Policy) -> Shown {
    Shown::name(policy.effective_risk_class(subject.risk.class).as_str())
}

/// One execution waiting for a person.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct QueueEntry {
    /// Execution id.
    pub execution: Shown,
    /// The subject the decision is about (the execution's current one).
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
    /// The subject's risk class, as its producer stated it.
    pub risk_class: Shown,
    /// The class the gate's policy treats the subject as: the stated class raised to the
    /// policy's `risk_floor` ([`effective_risk_class`]).
    pub effective_risk_class: Option<Shown>,
    /// The applicable decision's reasons, codes and text.
    pub reasons: Vec<ReasonView>,
    /// When the Gate made the decision (its evaluation's `now`).
    pub decided_at: Timestamp,
    /// Seconds from `decided_at` to the store's time.
    pub waited_seconds: u64,
}

/// One reason of a decision.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReasonView {
    /// Its code (wire name).
    pub code: String,
    /// The outcome it asks for.
    pub outcome: Outcome,
    /// Its text, which may quote what a producer or verifier wrote.
    pub detail: Shown,
}

impl From<&Reason> for ReasonView {
    fn from(r: &Reason) -> Self {
        Self {
            code: wire(&r.code),
            outcome: r.outcome,
            detail: Shown::text(&r.detail),
        }
    }
}

/// `review_queue`: what waits for a person, oldest first, one page of it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewQueue {
    /// The store's time the queue was read at.
    pub now: Timestamp,
    /// Entries, oldest decision first.
    pub entries: Vec<QueueEntry>,
    /// Where the next page starts (give it as [`ReviewPage::after`]); `None` on the last page.
    pub next: Option<String>,
}

/// Which page of the queue or the board to read: the entries after cursor `after` (the `next`
/// of the page before; `None` for the first page), at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewPage {
    /// The cursor the previous page returned as `next`.
    pub after: Option<String>,
    /// The most entries a page holds, 1 to [`ReviewPage::MAX_LIMIT`].
    pub limit: usize,
}

impl ReviewPage {
    /// The most entries a page may hold.
    pub const MAX_LIMIT: usize = 500;
    /// The entries a page holds when the caller does not say.
    pub const DEFAULT_LIMIT: usize = 50;

    /// The first page, of the default length.
    #[must_use]
    pub fn first() -> Self {
        Self {
            after: None,
            limit: Self::DEFAULT_LIMIT,
        }
    }

    fn checked_limit(&self) -> Result<usize> {
        if (1..=Self::MAX_LIMIT).contains(&self.limit) {
            Ok(self.limit)
        } else {
            Err(invalid("page limit")(format!(
                "{} is not 1 to {}",
                self.limit,
                Self::MAX_LIMIT
            )))
        }
    }
}

/// The queue's cursor: the last entry's decision time (Unix nanoseconds) and execution id,
/// which order the queue, so a page never repeats or skips an entry that stays waiting.
fn queue_cursor(entry: &QueueEntry) -> String {
    format!(
        "{}.{}",
        entry.decided_at.unix_nanos(),
        entry.execution.written()
    )
}

fn parse_queue_cursor(cursor: &str) -> Result<(i128, &str)> {
    let bad = || {
        invalid("queue cursor")(format!(
            "{cursor:?} is not a cursor this queue returned (<nanoseconds>.<execution>)"
        ))
    };
    let (nanos, execution) = cursor.split_once('.').ok_or_else(bad)?;
    let nanos: i128 = nanos.parse().map_err(|_| bad())?;
    if execution.is_empty() {
        return Err(bad());
    }
    Ok((nanos, execution))
}

/// One execution on the board.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BoardEntry {
    /// Execution id.
    pub execution: Shown,
    /// Current subject.
    pub subject_digest: Digest,
    /// Its generation.
    pub generation: u64,
    /// The subject's producer.
    pub producer: Shown,
    /// The subject's risk class, as its producer stated it.
    pub risk_class: Shown,
    /// The class the gate's policy treats the subject as ([`effective_risk_class`]); `None`
    /// when no policy is set.
    pub effective_risk_class: Option<Shown>,
    /// The current applicable outcome; `None` when no decision applies.
    pub outcome: Option<Outcome>,
    /// When no decision applies: why the latest one does not (empty when there is none).
    pub not_applicable: Vec<String>,
}

/// `board`: every execution the caller may read with its current outcome.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Board {
    /// The store's time the board was read at.
    pub now: Timestamp,
    /// Entries, by execution id.
    pub entries: Vec<BoardEntry>,
    /// Where the next page starts (the last entry's execution id); `None` on the last page.
    pub next: Option<String>,
}

/// One source of a criterion's status in the matrix.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MatrixCell {
    /// `check` or `verification`.
    pub kind: SourceKind,
    /// The evidence or result id the decision cites.
    pub reference: Shown,
    /// The check id (for evidence) or the verifier class (for a result), when known.
    pub label: Shown,
    /// What the source said of the criterion.
    pub status: CriterionStatus,
}

/// One criterion of the matrix: its status and each source's.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MatrixRow {
    /// Criterion id.
    pub criterion: Shown,
    /// Its text, from the subject.
    pub text: Shown,
    /// Whether the policy requires it.
    pub required: bool,
    /// The decision's status of it.
    pub status: CriterionStatus,
    /// Every source, as the decision lists them.
    pub sources: Vec<MatrixCell>,
}

/// A finding reported on the current subject, with the result that reported it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindingView {
    /// Finding id.
    pub id: Shown,
    /// Version.
    pub version: u64,
    /// Criterion.
    pub criterion: Shown,
    /// Kind.
    pub kind: Shown,
    /// Severity.
    pub severity: Severity,
    /// Scope.
    pub scope: Scope,
    /// Where, as `resource[:path[:line]]`, when given.
    pub location: Option<Shown>,
    /// Suggested remediation.
    pub remediation: Option<Shown>,
    /// The result that reported it.
    pub result: Shown,
    /// The verifier class of that result.
    pub verifier_class: Shown,
}

/// One check evidence about the current subject.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EvidenceView {
    /// Its digest.
    pub digest: Digest,
    /// Evidence id.
    pub id: Shown,
    /// Check id.
    pub check: Shown,
    /// Check outcome.
    pub outcome: String,
    /// Who produced it, as `principal (role)`.
    pub produced_by: Shown,
    /// When it was observed.
    pub observed_at: Timestamp,
}

/// One counted verification result about the current subject.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResultView {
    /// Its digest.
    pub digest: Digest,
    /// Result id.
    pub id: Shown,
    /// Verifier principal.
    pub verifier: Shown,
    /// Verifier class.
    pub class: Shown,
    /// Run id.
    pub run: Shown,
    /// `completed` or `unavailable`.
    pub status: String,
    /// `provider/model@snapshot`, when the result named a runtime.
    pub runtime: Option<Shown>,
    /// The digest of the context the verifier was shown, when named.
    pub context_digest: Option<Digest>,
}

/// A verifier run's model receipts.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunReceipts {
    /// Run id.
    pub run_id: Shown,
    /// Verifier class.
    pub class: Shown,
    /// Verifier principal.
    pub verifier: Shown,
    /// The subject it verified.
    pub subject_digest: String,
    /// Its latest status.
    pub status: Shown,
    /// The digest of the context its model was shown, when recorded.
    pub context_digest: Option<Digest>,
    /// One receipt per provider call.
    pub receipts: Vec<ReceiptView>,
}

/// One model call of a run, as its receipt records it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReceiptView {
    /// The provider.
    pub provider: Shown,
    /// The model.
    pub model: Shown,
    /// The model's snapshot, when named.
    pub snapshot: Option<Shown>,
    /// How the call ended.
    pub outcome: Shown,
    /// Its latency.
    pub latency_ms: u64,
    /// Tokens in, when known.
    pub tokens_in: Option<u64>,
    /// Tokens out, when known.
    pub tokens_out: Option<u64>,
    /// Whether the token counts are estimated.
    pub tokens_estimated: bool,
    /// The cost estimate, when priced.
    pub cost_estimate: Option<f64>,
    /// The redacted detail, which may quote what the provider answered.
    pub detail: Option<Shown>,
}

impl From<&Receipt> for ReceiptView {
    fn from(r: &Receipt) -> Self {
        Self {
            provider: Shown::name(&r.provider),
            model: Shown::name(&r.model),
            snapshot: r.snapshot.as_deref().map(Shown::name),
            outcome: Shown::name(&r.outcome),
            latency_ms: r.latency_ms,
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            tokens_estimated: r.tokens_estimated,
            cost_estimate: r.cost_estimate,
            detail: r.detail.as_deref().map(Shown::text),
        }
    }
}

/// A resource the subject names, with its stored bytes as shown.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ResourceView {
    /// Its name.
    pub name: Shown,
    /// Its kind.
    pub kind: Shown,
    /// The digest the subject names.
    pub digest: Digest,
    /// Where it is, when the subject says.
    pub uri: Option<Shown>,
    /// Its bytes' length, when stored.
    pub size: Option<u64>,
    /// Its media type, when given.
    pub media_type: Option<Shown>,
    /// Its bytes, bounded by [`SHOWN_BYTES`] and [`SHOWN_LINES`].
    pub contents: Contents,
}

/// One stored decision with its applicability.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DecisionEntry {
    /// Audit seq of the decision.
    pub seq: u64,
    /// Its outcome.
    pub outcome: Outcome,
    /// The subject it is about, when its bundle was read.
    pub subject_digest: Option<Digest>,
    /// The policy it was made under, when its bundle was read.
    pub policy_digest: Option<Digest>,
    /// Its reasons.
    pub reasons: Vec<ReasonView>,
    /// Its rework list, each as `id@version (criterion)`.
    pub rework: Vec<Shown>,
    /// Its follow-up list, each as `id@version (criterion)`.
    pub follow_ups: Vec<Shown>,
    /// The generation of its subject.
    pub generation: u64,
    /// Why it does not apply (wire names); empty when it applies.
    pub not_applicable: Vec<String>,
}

impl From<DecisionView> for DecisionEntry {
    fn from(v: DecisionView) -> Self {
        let d = v.decision;
        Self {
            seq: v.seq,
            outcome: d.outcome,
            subject_digest: d.subject_digest,
            policy_digest: d.policy_digest,
            reasons: d.reasons.iter().map(ReasonView::from).collect(),
            rework: finding_refs(&d.rework),
            follow_ups: finding_refs(&d.follow_ups),
            generation: v.generation,
            not_applicable: v
                .not_applicable
                .iter()
                .map(|n| n.as_str().to_owned())
                .collect(),
        }
    }
}

/// One criterion of the subject.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CriterionView {
    /// Its id.
    pub id: Shown,
    /// Its text.
    pub text: Shown,
    /// Whether the subject marks it required.
    pub required: bool,
}

/// The current subject, every field its producer wrote as [`Shown`].
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SubjectView {
    /// Execution id.
    pub execution: Shown,
    /// Generation.
    pub generation: u64,
    /// Mission, when named.
    pub mission: Option<Shown>,
    /// The producer principal.
    pub producer: Shown,
    /// The producer's run.
    pub producer_run: Shown,
    /// The objective's revision.
    pub objective_revision: Shown,
    /// The objective's digest.
    pub objective_digest: Digest,
    /// Work items, each as `kind id@version`.
    pub work_items: Vec<Shown>,
    /// Risk class, as the producer stated it.
    pub risk_class: Shown,
    /// The class the gate's current policy treats the subject as ([`effective_risk_class`]);
    /// `None` when no policy is set. Filled in by the review, which knows the policy.
    pub effective_risk_class: Option<Shown>,
    /// Risk revision.
    pub risk_revision: Shown,
    /// Workflow revision.
    pub workflow_revision: Shown,
    /// Criteria revision.
    pub criteria_revision: Shown,
    /// The criteria.
    pub criteria: Vec<CriterionView>,
}

impl From<&Subject> for SubjectView {
    fn from(s: &Subject) -> Self {
        Self {
            execution: Shown::name(s.execution.id.as_str()),
            generation: s.execution.generation,
            mission: s.mission.as_ref().map(|m| Shown::name(m.as_str())),
            producer: Shown::name(s.producer.principal.as_str()),
            producer_run: Shown::name(s.producer.run.as_str()),
            objective_revision: Shown::name(s.objective.revision.as_str()),
            objective_digest: s.objective.digest.clone(),
            work_items: s
                .work_items
                .iter()
                .map(|w| Shown::name(&format!("{} {}@{}", w.kind, w.id, w.version)))
                .collect(),
            risk_class: Shown::name(s.risk.class.as_str()),
            effective_risk_class: None,
            risk_revision: Shown::name(s.risk.revision.as_str()),
            workflow_revision: Shown::name(s.workflow_revision.as_str()),
            criteria_revision: Shown::name(s.criteria.revision.as_str()),
            criteria: s
                .criteria
                .items
                .iter()
                .map(|c| CriterionView {
                    id: Shown::name(c.id.as_str()),
                    text: Shown::text(&c.text),
                    required: c.required,
                })
                .collect(),
        }
    }
}

/// `subject_review`: everything a person reviews about an execution's current subject.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SubjectReview {
    /// Execution id.
    pub execution: Shown,
    /// The store's time it was read at.
    pub now: Timestamp,
    /// The current subject's digest.
    pub subject_digest: Digest,
    /// The current subject.
    pub subject: SubjectView,
    /// The gate's current policy, when set.
    pub policy_digest: Option<Digest>,
    /// The subject's resources, with their stored bytes as shown.
    pub resources: Vec<ResourceView>,
    /// The current applicable decision, if one applies.
    pub applicable: Option<DecisionEntry>,
    /// The current outcome word: the applicable decision's, else `none`.
    pub outcome: String,
    /// Criterion × source, from the applicable decision (else the latest decision about the
    /// current subject); empty when there is none.
    pub matrix: Vec<MatrixRow>,
    /// Findings of the counted results about the current subject.
    pub findings: Vec<FindingView>,
    /// Check evidence about the current subject.
    pub evidence: Vec<EvidenceView>,
    /// Counted verification results about the current subject.
    pub results: Vec<ResultView>,
    /// Every run of the execution with its model receipts.
    pub runs: Vec<RunReceipts>,
    /// Every decision of the execution, oldest first, with its applicability.
    pub history: Vec<DecisionEntry>,
    /// Whether the caller may record a human decision here (a human who did not produce it).
    pub may_decide: bool,
    /// The evaluation key of the decision this review shows, when that decision applies and
    /// is also what the Gate evaluates now (the bundle `gate run` would build now): the
    /// decision form carries it, so an approval is refused once anything it would clear
    /// differs from what the page showed. `None` when no decision applies, or the one shown is
    /// not what the Gate would decide now: then nothing here may be decided on until the Gate
    /// runs again.
    pub evaluation_key: Option<Digest>,
}

/// One version of a finding, as reported.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindingVersion {
    /// Version.
    pub version: u64,
    /// The subject it was reported on.
    pub subject_digest: Digest,
    /// That subject's generation.
    pub generation: u64,
    /// Severity.
    pub severity: Severity,
    /// Scope.
    pub scope: Scope,
    /// Criterion.
    pub criterion: Shown,
    /// Kind.
    pub kind: Shown,
    /// The result that reported it.
    pub result: Shown,
    /// Whether that result counts.
    pub counted: bool,
}

/// One disposition of a finding, as a later result recorded it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindingDisposition {
    /// The version disposed of.
    pub version: u64,
    /// What became of it.
    pub disposition: DispositionKind,
    /// The subject of the result that disposed of it.
    pub subject_digest: Digest,
    /// That subject's generation.
    pub generation: u64,
    /// The result that disposed of it.
    pub result: Shown,
    /// Whether that result counts.
    pub counted: bool,
    /// The evidence it cites.
    pub evidence_refs: Vec<Shown>,
    /// Its reason, when given.
    pub reason: Option<Shown>,
}

/// A finding across the execution's subjects.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindingLine {
    /// Finding id.
    pub id: Shown,
    /// Every version reported, in subject order.
    pub versions: Vec<FindingVersion>,
    /// Every disposition recorded, in subject order.
    pub dispositions: Vec<FindingDisposition>,
}

/// `finding_lineage`: every finding of the execution's subjects.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FindingLineage {
    /// Execution id.
    pub execution: Shown,
    /// The execution's subjects, oldest first.
    pub subjects: Vec<Digest>,
    /// Findings by id.
    pub findings: Vec<FindingLine>,
}

/// One point of a reliability series.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SeriesPoint {
    /// The attempt's time.
    pub at: Timestamp,
    /// Pass rate so far in the window.
    pub rate: Option<f64>,
    /// Its Wilson lower bound at 95 %.
    pub lower_95: Option<f64>,
}

/// One cohort's series.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CapabilitySeries {
    /// The capability.
    pub capability: Shown,
    /// The whole cohort, as one line (capability, verifiers, policy).
    pub cohort: Shown,
    /// Whether it has enough attempts to be rated.
    pub rated: bool,
    /// Attempts in the window.
    pub attempts: u64,
    /// The pass rate over the window.
    pub pass_rate: Option<f64>,
    /// Its lower bound.
    pub pass_rate_lower_95: Option<f64>,
    /// After each attempt, oldest first.
    pub points: Vec<SeriesPoint>,
}

/// `reliability_series`: per cohort, the pass rate with its bound over the window.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Reliability {
    /// The store's time.
    pub now: Timestamp,
    /// The store's clock: on a `manual` one every time was chosen by whoever ran the store,
    /// so the rates are no record of real work.
    pub clock: StoreClock,
    /// The window.
    pub window: Window,
    /// Series, sorted by cohort.
    pub series: Vec<CapabilitySeries>,
}

/// `review_decide`: the human decision stored and the gate run after it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ReviewDecided {
    /// The human decision's digest.
    pub human_decision: Digest,
    /// The decision the gate made next.
    pub decision: GateDecision,
    /// Its outcome.
    pub outcome: Outcome,
}

impl Engine {
    /// Executions whose current applicable decision is `human_required`, oldest decision
    /// first, among those the caller may read: the page `page` names. The order is decided
    /// over every readable execution (each one's status is read), then cut at the cursor.
    pub async fn review_queue(&self, caller: &Principal, page: &ReviewPage) -> Result<ReviewQueue> {
        let limit = page.checked_limit()?;
        let after = page.after.as_deref().map(parse_queue_cursor).transpose()?;
        let now = self.now().await?;
        let mut entries = Vec::new();
        if let Some(gate) = self.gate_head().await? {
            // A decision applies only under the gate's current policy.
            let policy = self.policy(&gate.policy_digest).await?;
            for (execution, subject_digest, subject) in self.readable(caller, None, None).await? {
                let status = self.status_unscoped(&execution).await?;
                let Some(applicable) = status.applicable else {
                    continue;
                };
                if applicable.decision.outcome != Outcome::HumanRequired {
                    continue;
                }
                let decided_at = self.decided_at(&applicable.decision).await?;
                let waited = (now.unix_nanos() - decided_at.unix_nanos()).max(0) / 1_000_000_000;
                entries.push(QueueEntry {
                    execution: Shown::name(&execution),
                    subject_digest,
                    generation: subject.execution.generation,
                    risk_class: Shown::name(subject.risk.class.as_str()),
                    effective_risk_class: Some(effective_risk_class(&subject, &policy)),
                    reasons: applicable
                        .decision
                        .reasons
                        .iter()
                        .map(ReasonView::from)
                        .collect(),
                    decided_at,
                    waited_seconds: u64::try_from(waited).unwrap_or(u64::MAX),
                });
            }
        }
        entries.sort_by(|a, b| {
            (a.decided_at.unix_nanos(), a.execution.written())
                .cmp(&(b.decided_at.unix_nanos(), b.execution.written()))
        });
        if let Some((nanos, execution)) = after {
            entries.retain(|e| {
                (e.decided_at.unix_nanos(), e.execution.written()) > (nanos, execution)
            });
        }
        let next = if entries.len() > limit {
            entries.get(limit - 1).map(queue_cursor)
        } else {
            None
        };
        entries.truncate(limit);
        Ok(ReviewQueue { now, entries, next })
    }

    /// Every execution the caller may read, with its current outcome, by execution id: the
    /// page `page` names. Only the page's executions have their status read.
    pub async fn board(&self, caller: &Principal, page: &ReviewPage) -> Result<Board> {
        let limit = page.checked_limit()?;
        let now = self.now().await?;
        let policy = match self.gate_head().await? {
            Some(gate) => Some(self.policy(&gate.policy_digest).await?),
            None => None,
        };
        let gated = policy.is_some();
        let mut entries = Vec::new();
        let mut readable = self
            .readable(caller, page.after.as_deref(), Some(limit + 1))
            .await?;
        let next = if readable.len() > limit {
            readable
                .get(limit - 1)
                .map(|(execution, _, _)| execution.clone())
        } else {
            None
        };
        readable.truncate(limit);
        for (execution, subject_digest, subject) in readable {
            let (outcome, not_applicable) = if gated {
                let status = self.status_unscoped(&execution).await?;
                match (status.applicable, status.latest) {
                    (Some(a), _) => (Some(a.decision.outcome), Vec::new()),
                    (None, Some(l)) => (
                        None,
                        l.not_applicable
                            .iter()
                            .map(|n| n.as_str().to_owned())
                            .collect(),
                    ),
                    (None, None) => (None, Vec::new()),
                }
            } else {
                (None, Vec::new())
            };
            entries.push(BoardEntry {
                execution: Shown::name(&execution),
                subject_digest,
                generation: subject.execution.generation,
                producer: Shown::name(subject.producer.principal.as_str()),
                risk_class: Shown::name(subject.risk.class.as_str()),
                effective_risk_class: policy.as_ref().map(|p| effective_risk_class(&subject, p)),
                outcome,
                not_applicable,
            });
        }
        Ok(Board { now, entries, next })
    }

    /// Everything about the execution's current subject a person reviews. Read as
    /// [`Engine::status`] is.
    pub async fn subject_review(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<SubjectReview> {
        self.require_read(caller, execution, "the review").await?;
        let head = self.existing_execution_head(execution).await?;
        let subject = self.subject(&head.subject_digest).await?;
        let now = self.now().await?;
        let gate = self.gate_head().await?;
        let mut subject_view = SubjectView::from(&subject);
        if let Some(g) = &gate {
            subject_view.effective_risk_class = Some(effective_risk_class(
                &subject,
                &self.policy(&g.policy_digest).await?,
            ));
        }
        let (applicable, history, evidence_rows, result_rows, evaluation_key) = if gate.is_some() {
            let status = self.status_unscoped(execution).await?;
            let history = self.history_unscoped(execution).await?;
            let collected = self.collect_unscoped(execution).await?;
            let evaluation_key =
                verdict_core::gate::evaluate_value(&collected.bundle(&now)?).evaluation_key;
            (
                status.applicable,
                history,
                collected.evidence,
                collected.verifications,
                evaluation_key,
            )
        } else {
            (
                None,
                History {
                    execution: execution.to_owned(),
                    clock: self.store.clock().await?,
                    now: now.clone(),
                    decisions: Vec::new(),
                    runs: Vec::new(),
                },
                Vec::new(),
                Vec::new(),
                None,
            )
        };
        let mut evidence = Vec::new();
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        for row in &evidence_rows {
            let ev: CheckEvidence = row.decode()?;
            labels.insert(ev.id.to_string(), ev.check.to_string());
            evidence.push(EvidenceView {
                digest: row.digest.clone(),
                id: Shown::name(ev.id.as_str()),
                check: Shown::name(ev.check.as_str()),
                outcome: ev.outcome.as_str().to_owned(),
                produced_by: Shown::name(&format!(
                    "{} ({})",
                    ev.produced_by.principal,
                    ev.produced_by.role.as_str()
                )),
                observed_at: ev.observed_at,
            });
        }
        let mut results = Vec::new();
        let mut findings = Vec::new();
        for row in &result_rows {
            let r: VerificationResult = row.decode()?;
            labels.insert(r.id.to_string(), r.verifier.class.to_string());
            for f in &r.findings {
                findings.push(FindingView {
                    id: Shown::name(f.id.as_str()),
                    version: f.version,
                    criterion: Shown::name(f.criterion.as_str()),
                    kind: Shown::name(&f.kind),
                    severity: f.severity,
                    scope: f.scope,
                    location: f.location.as_ref().map(|l| {
                        let mut at = l.resource.clone();
                        if let Some(p) = &l.path {
                            at.push(':');
                            at.push_str(p);
                        }
                        if let Some(n) = l.line {
                            at.push(':');
                            at.push_str(&n.to_string());
                        }
                        Shown::name(&at)
                    }),
                    remediation: f.remediation.as_deref().map(Shown::text),
                    result: Shown::name(r.id.as_str()),
                    verifier_class: Shown::name(r.verifier.class.as_str()),
                });
            }
            results.push(ResultView {
                digest: row.digest.clone(),
                id: Shown::name(r.id.as_str()),
                verifier: Shown::name(r.verifier.principal.as_str()),
                class: Shown::name(r.verifier.class.as_str()),
                run: Shown::name(r.verifier.run.as_str()),
                status: wire(&r.status),
                runtime: r.verifier.runtime.as_ref().map(|rt| {
                    Shown::name(&format!("{}/{}@{}", rt.provider, rt.model, rt.snapshot))
                }),
                context_digest: r.context.as_ref().map(|c| c.digest.clone()),
            });
        }
        // The matrix comes from the applicable decision, else the latest decision about this
        // very subject (which then says why it does not apply in the history).
        let matrix_source = applicable.as_ref().map(|a| &a.decision).or_else(|| {
            history
                .decisions
                .iter()
                .rev()
                .find(|d| d.decision.subject_digest.as_ref() == Some(&head.subject_digest))
                .map(|d| &d.decision)
        });
        let matrix = matrix_source
            .map(|d| {
                d.criteria
                    .iter()
                    .map(|c| MatrixRow {
                        criterion: Shown::name(c.id.as_str()),
                        text: Shown::text(
                            subject
                                .criteria
                                .items
                                .iter()
                                .find(|i| i.id == c.id)
                                .map_or("", |i| i.text.as_str()),
                        ),
                        required: c.required,
                        status: c.status,
                        sources: c
                            .sources
                            .as_slice()
                            .iter()
                            .map(|s| MatrixCell {
                                kind: s.kind,
                                reference: Shown::name(s.reference.as_str()),
                                label: Shown::name(
                                    labels
                                        .get(s.reference.as_str())
                                        .map_or(s.reference.as_str(), String::as_str),
                                ),
                                status: s.status,
                            })
                            .collect(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let runs = history
            .runs
            .iter()
            .map(|r| RunReceipts {
                run_id: Shown::name(&r.run_id),
                class: Shown::name(&r.class),
                verifier: Shown::name(&r.verifier),
                subject_digest: r.subject_digest.clone(),
                status: Shown::name(&r.status),
                context_digest: r.context_digest.clone(),
                receipts: r.receipts.iter().map(ReceiptView::from).collect(),
            })
            .collect();
        let mut resources = Vec::new();
        for res in &subject.resources {
            // The caller may read the subject, so the bytes it names are readable; bytes that
            // are not stored are shown as such.
            let (size, media_type, shown) = match self.blob(caller, res.digest.as_str()).await {
                Ok(b) => (
                    Some(b.info.size),
                    b.info.media_type.clone(),
                    contents(res.kind.as_str(), b.info.media_type.as_deref(), &b.bytes),
                ),
                Err(EngineError::NotFound { .. }) => (None, None, Contents::NotStored),
                Err(e) => return Err(e),
            };
            resources.push(ResourceView {
                name: Shown::name(res.name.as_str()),
                kind: Shown::name(res.kind.as_str()),
                digest: res.digest.clone(),
                uri: res.uri.as_deref().map(Shown::name),
                size,
                media_type: media_type.as_deref().map(Shown::name),
                contents: shown,
            });
        }
        let outcome = applicable.as_ref().map_or_else(
            || "none".to_owned(),
            |a| a.decision.outcome.as_str().to_owned(),
        );
        // A person decides on what the page shows: the applicable decision, and only while it
        // is also what the Gate evaluates now. Where none applies (something was recorded
        // after the Gate last ran) the evaluation of now is shown nowhere, so no form is bound
        // to it; the Gate has to run first.
        let evaluation_key = applicable
            .as_ref()
            .and_then(|a| a.decision.evaluation_key.clone())
            .filter(|shown| evaluation_key.as_ref() == Some(shown));
        // Offered only where `decide` could succeed: a human, not the producer, holding a write
        // grant in force (the engine refuses anyone else anyway).
        let may_decide = caller.role == Role::Human
            && subject.producer.principal != caller.name
            && self
                .has_grant(caller.name.as_str(), &subject, true, &now)
                .await?;
        Ok(SubjectReview {
            execution: Shown::name(execution),
            now,
            subject_digest: head.subject_digest,
            subject: subject_view,
            policy_digest: gate.map(|g| g.policy_digest),
            resources,
            applicable: applicable.map(DecisionEntry::from),
            outcome,
            matrix,
            findings,
            evidence,
            results,
            runs,
            history: history
                .decisions
                .into_iter()
                .map(DecisionEntry::from)
                .collect(),
            may_decide,
            evaluation_key,
        })
    }

    /// Every finding reported on any of the execution's subjects: each version, and each
    /// disposition later results recorded, with the evidence they cite. Read as
    /// [`Engine::status`] is.
    pub async fn finding_lineage(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<FindingLineage> {
        self.require_read(caller, execution, "the finding lineage")
            .await?;
        self.existing_execution_head(execution).await?;
        let mut subjects: Vec<Digest> = Vec::new();
        let mut lines: BTreeMap<String, FindingLine> = BTreeMap::new();
        for row in self
            .store
            .list(DocKind::Subject, &About::Execution(execution.to_owned()))
            .await?
        {
            if subjects.contains(&row.digest) {
                continue;
            }
            subjects.push(row.digest.clone());
            let subject: Subject = row.decode()?;
            let generation = subject.execution.generation;
            for result in self
                .store
                .list(DocKind::Verification, &About::Subject(row.digest.clone()))
                .await?
            {
                let counted = self.counts_unscoped(&result).await?;
                let r: VerificationResult = result.decode()?;
                for f in &r.findings {
                    let line = lines
                        .entry(f.id.to_string())
                        .or_insert_with(|| FindingLine {
                            id: Shown::name(f.id.as_str()),
                            versions: Vec::new(),
                            dispositions: Vec::new(),
                        });
                    line.versions.push(FindingVersion {
                        version: f.version,
                        subject_digest: row.digest.clone(),
                        generation,
                        severity: f.severity,
                        scope: f.scope,
                        criterion: Shown::name(f.criterion.as_str()),
                        kind: Shown::name(&f.kind),
                        result: Shown::name(r.id.as_str()),
                        counted,
                    });
                }
                for d in &r.dispositions {
                    let line = lines
                        .entry(d.finding.to_string())
                        .or_insert_with(|| FindingLine {
                            id: Shown::name(d.finding.as_str()),
                            versions: Vec::new(),
                            dispositions: Vec::new(),
                        });
                    line.dispositions.push(FindingDisposition {
                        version: d.version,
                        disposition: d.disposition,
                        subject_digest: row.digest.clone(),
                        generation,
                        result: Shown::name(r.id.as_str()),
                        counted,
                        evidence_refs: d.evidence_refs.iter().map(|e| Shown::name(e)).collect(),
                        reason: d.reason.as_deref().map(Shown::text),
                    });
                }
            }
        }
        Ok(FindingLineage {
            execution: Shown::name(execution),
            subjects,
            findings: lines.into_values().collect(),
        })
    }

    /// The pass rate and its confidence bound over [`REVIEW_WINDOW`], per cohort, of every
    /// execution. Empty when the ledger has nothing. An operator's only, as the ledger is: the
    /// same cohorts counted over the executions one caller's grants cover would carry the
    /// platform's labels with other values (docs/spec/authority.md). Anyone else is refused
    /// and the refusal recorded.
    pub async fn reliability_series(&self, caller: &Principal) -> Result<Reliability> {
        self.require_role(caller, &[Role::Operator], "read the platform's ledger")
            .await?;
        let now = self.now().await?;
        let mut observations = Vec::new();
        for execution in self.executions().await? {
            observations.extend(self.ledger_attempts_unscoped(&execution, &now).await?);
        }
        let clock = self.clock().await?;
        let ledger = crate::ledger::compute(&observations, REVIEW_WINDOW, &now, clock);
        Ok(Reliability {
            now,
            clock,
            window: REVIEW_WINDOW,
            series: ledger
                .cohorts
                .into_iter()
                .map(|c| CapabilitySeries {
                    capability: Shown::name(&c.key.capability),
                    cohort: Shown::text(&c.key.label()),
                    rated: c.status == CohortStatus::Rated,
                    attempts: c.attempts,
                    pass_rate: c.pass_rate,
                    pass_rate_lower_95: c.pass_rate_lower_95,
                    points: c
                        .series
                        .into_iter()
                        .map(|p| SeriesPoint {
                            at: p.at,
                            rate: p.rate,
                            lower_95: p.lower_95,
                        })
                        .collect(),
                })
                .collect(),
        })
    }

    /// A person's decision from a review page ([`Engine::decide`], with every refusal it
    /// makes, and one more: it must name the decision the page showed, `reviewed.decision_key`),
    /// then a gate run so the new outcome is known at once.
    pub async fn review_decide(
        &self,
        caller: &Principal,
        execution: &str,
        verdict: HumanVerdict,
        reason: &str,
        reviewed: &Reviewed,
    ) -> Result<ReviewDecided> {
        let human_decision = self
            .decide_bound(caller, execution, verdict, reason, reviewed, true)
            .await?;
        let run = self.gate_run(caller, execution).await?;
        Ok(ReviewDecided {
            human_decision,
            outcome: run.decision.outcome,
            decision: run.decision,
        })
    }

    /// Whether `digest` names a human decision that `caller` itself recorded about
    /// `execution`'s current subject: what a page may say was recorded, read from the store
    /// rather than from a link. Read as the execution is.
    pub async fn recorded_human_decision(
        &self,
        caller: &Principal,
        execution: &str,
        digest: &Digest,
    ) -> Result<bool> {
        self.require_read(caller, execution, "the human decisions")
            .await?;
        let head = self.existing_execution_head(execution).await?;
        let Some(row) = self.store.get(DocKind::HumanDecision, digest).await? else {
            return Ok(false);
        };
        let decision: verdict_core::contracts::HumanDecision = row.decode()?;
        Ok(decision.principal == *caller.name() && decision.subject_digest == head.subject_digest)
    }

    /// The executions `caller` may read, with their current subjects, by execution id.
    /// The executions the caller may read, by id: those after `after`, at most `most` of them.
    async fn readable(
        &self,
        caller: &Principal,
        after: Option<&str>,
        most: Option<usize>,
    ) -> Result<Vec<(String, Digest, Subject)>> {
        let mut out = Vec::new();
        let mut pointers = self.store.pointers(PointerKind::Execution).await?;
        pointers.sort_by(|a, b| a.name.cmp(&b.name));
        for p in pointers {
            if after.is_some_and(|a| p.name.as_str() <= a) {
                continue;
            }
            if most.is_some_and(|m| out.len() >= m) {
                break;
            }
            let Some(head) = p.execution()? else { continue };
            let subject = self.subject(&head.subject_digest).await?;
            if self.may_read(caller, &subject).await? {
                out.push((p.name, head.subject_digest, subject));
            }
        }
        Ok(out)
    }

    /// When the Gate made `decision`: its evaluation record's `now`.
    async fn decided_at(&self, decision: &GateDecision) -> Result<Timestamp> {
        let (Some(subject), Some(key)) = (&decision.subject_digest, &decision.evaluation_key)
        else {
            return Err(EngineError::NotFound {
                what: "evaluation of decision",
                key: "(unread bundle)".to_owned(),
            });
        };
        for row in self
            .store
            .list(DocKind::Evaluation, &About::Subject(subject.clone()))
            .await?
        {
            let record: EvaluationRecord = row.decode()?;
            if &record.evaluation_key == key {
                return Ok(record.now);
            }
        }
        Err(EngineError::NotFound {
            what: "evaluation record",
            key: key.to_string(),
        })
    }
}

/// The rework and follow-up lists of a decision, for display: `id@version (criterion)`.
#[must_use]
pub fn finding_refs(refs: &[FindingRef]) -> Vec<Shown> {
    refs.iter()
        .map(|f| Shown::name(&format!("{}@{} ({})", f.id, f.version, f.criterion)))
        .collect()
}
