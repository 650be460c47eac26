//! `gate run` and `gate replay`: the bundle built from the store (counted items only), the pure
//! Gate, the decision stored by its evaluation key, and a record of exactly which items were in
//! the bundle so any stored decision can be rebuilt and replayed byte for byte.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result};
use crate::runs::answers_each_criterion_once;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use verdict_core::contracts::{
    CheckEvidence, Finding, GateDecision, HumanDecision, Policy, Role, Subject, Timestamp,
    UnavailableReason, VerificationResult, VerificationStatus,
};
use verdict_core::digest::Digest;
use verdict_store::{
    About, Actor, AuditReport, ChainHead, DocKind, EvaluationRecord, ExecutionHead, FindingRef,
    JobClaim, Problem, ProblemKind, RunStatus, Stored, Table,
};

/// What a gate job records as its outcome for the decision its run came to.
pub(crate) type JobOutcome<'a> = dyn Fn(&GateDecision) -> String + Sync + 'a;

/// Schema of the record naming the items of one evaluated bundle (stored in
/// `gate_evaluations`).
pub const EVALUATION_RECORD_SCHEMA: &str = verdict_store::EVALUATION_SCHEMA;

/// The items the engine counts for an execution's current subject, read from the store.
#[derive(Debug, Clone)]
pub struct Collected {
    /// The execution's head when read.
    pub head: ExecutionHead,
    /// The gate's current policy digest.
    pub policy_digest: Digest,
    /// The subject document.
    pub subject: Stored,
    /// The policy document.
    pub policy: Stored,
    /// Every check evidence about the subject.
    pub evidence: Vec<Stored>,
    /// Every counted verification result about the subject.
    pub verifications: Vec<Stored>,
    /// Human decisions bound to the subject.
    pub human_decisions: Vec<Stored>,
    /// Open blocking findings of the execution's earlier subjects, and blocking findings about
    /// this subject stored on their own (outside any result).
    pub prior_findings: Vec<Stored>,
}

impl Collected {
    /// The gate bundle of these items at `now`.
    pub fn bundle(&self, now: &Timestamp) -> Result<Value> {
        let values = |rows: &[Stored]| {
            rows.iter()
                .map(Stored::value)
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(json!({
            "schema": "verdict.gate-bundle/v1",
            "policy": self.policy.value()?,
            "subject": self.subject.value()?,
            "evidence": values(&self.evidence)?,
            "verifications": values(&self.verifications)?,
            "human_decisions": values(&self.human_decisions)?,
            "prior_findings": values(&self.prior_findings)?,
            "now": now.as_str(),
        }))
    }

    /// The record naming these items (digests, and findings by id and version), as the store's
    /// typed evaluation record: every list sorted and without repeats.
    fn record(&self, evaluation_key: &Digest, now: &Timestamp) -> Result<Value> {
        let digests = |rows: &[Stored]| {
            rows.iter()
                .map(|r| r.digest.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        };
        let mut findings = BTreeSet::new();
        for f in &self.prior_findings {
            let finding: Finding = f.decode()?;
            findings.insert(FindingRef {
                id: finding.id,
                version: finding.version,
            });
        }
        let record = EvaluationRecord {
            schema: EVALUATION_RECORD_SCHEMA.to_owned(),
            evaluation_key: evaluation_key.clone(),
            subject_digest: self.subject.digest.clone(),
            policy_digest: self.policy.digest.clone(),
            now: now.clone(),
            evidence: digests(&self.evidence),
            verifications: digests(&self.verifications),
            human_decisions: digests(&self.human_decisions),
            prior_findings: findings.into_iter().collect(),
        };
        serde_json::to_value(&record).map_err(|e| EngineError::Invalid {
            what: "evaluation record",
            message: e.to_string(),
        })
    }
}

/// What `gate run` did.
#[derive(Debug, Clone)]
pub struct GateRun {
    /// The decision.
    pub decision: GateDecision,
    /// Its stored canonical bytes.
    pub bytes: String,
    /// Whether this run stored it (false: the same evaluation was already stored).
    pub inserted: bool,
}

impl Engine {
    /// Reads everything the engine counts for the execution's current subject, for an operator
    /// or a principal holding a grant in force on the execution or its mission.
    pub async fn collect(&self, caller: &Principal, execution: &str) -> Result<Collected> {
        self.require_read(caller, execution, "the gate's inputs")
            .await?;
        self.collect_unscoped(execution).await
    }

    /// [`Engine::collect`] for the engine's own use, for no caller.
    pub(crate) async fn collect_unscoped(&self, execution: &str) -> Result<Collected> {
        // The two pointers do not depend on each other: read together.
        let (head, gate) = tokio::try_join!(self.existing_execution_head(execution), async {
            self.gate_head()
                .await?
                .ok_or_else(|| EngineError::NoSuchGate(self.gate.clone()))
        })?;
        self.collect_for(execution, head, gate.policy_digest).await
    }

    /// Reads everything the engine counts for one subject of the execution (`head` names it
    /// and its generation, current or not) under one policy. The reads that do not depend on
    /// each other are made together, and the subject's results are listed once.
    pub(crate) async fn collect_for(
        &self,
        execution: &str,
        head: ExecutionHead,
        policy_digest: Digest,
    ) -> Result<Collected> {
        let get = |kind: DocKind, d: Digest, what: &'static str| async move {
            self.store
                .get(kind, &d)
                .await?
                .ok_or(EngineError::NotFound {
                    what,
                    key: d.to_string(),
                })
        };
        let about = About::Subject(head.subject_digest.clone());
        let list = |kind: DocKind| {
            let about = &about;
            async move { Ok::<_, EngineError>(self.store.list(kind, about).await?) }
        };
        let (subject, policy, evidence, results, human_decisions, findings, blockers) = tokio::try_join!(
            get(DocKind::Subject, head.subject_digest.clone(), "subject"),
            get(DocKind::Policy, policy_digest.clone(), "policy"),
            list(DocKind::Evidence),
            list(DocKind::Verification),
            list(DocKind::HumanDecision),
            list(DocKind::Finding),
            self.prior_blockers_unscoped(execution, &head.subject_digest),
        )?;
        let subject_doc: Subject = subject.decode()?;
        // Every item is read as its contract type before the Gate sees it, so a stored record
        // that does not decode stops the run with the store's error naming its table and key,
        // not with a refusal of the bundle as a whole.
        policy.decode::<Policy>()?;
        for row in &evidence {
            row.decode::<CheckEvidence>()?;
        }
        for row in &human_decisions {
            row.decode::<HumanDecision>()?;
        }
        // Every finding some stored result about the subject carries, counted or not.
        let mut in_results: BTreeSet<(String, u64)> = BTreeSet::new();
        for row in &results {
            let r: VerificationResult = row.decode()?;
            in_results.extend(
                r.findings
                    .into_iter()
                    .map(|f| (f.id.to_string(), f.version)),
            );
        }
        let verifications = self
            .counted_among(results, &head.subject_digest, &subject_doc)
            .await?;
        let mut prior_findings = Vec::new();
        for (id, version) in blockers {
            if let Some(f) = self.store.finding(&id, version).await? {
                prior_findings.push(f);
            }
        }
        // A blocking finding about this subject stored on its own, by a verifier admitted on
        // it, is read as a prior blocker: it moves the evidence set (a pass stops applying the
        // moment it is stored) and only a later counted result's disposition addresses it, so
        // a stored blocker never sits beside a current pass.
        let required = crate::lineage::required_criteria(&subject_doc);
        for row in findings {
            let f: Finding = row.decode()?;
            if crate::lineage::carried_blocker(&f, &required)
                && !in_results.contains(&(f.id.to_string(), f.version))
            {
                prior_findings.push(row);
            }
        }
        Ok(Collected {
            head,
            policy_digest,
            subject,
            policy,
            evidence,
            verifications,
            human_decisions,
            prior_findings,
        })
    }

    /// The rows of `results` (every verification result stored about the subject `digest`,
    /// whose document is `subject`, as the store lists them) that count, in their order: what
    /// [`Engine::counts_unscoped`] says of each, with the subject's results listed and decoded
    /// once for all of them instead of once per result.
    pub(crate) async fn counted_among(
        &self,
        results: Vec<Stored>,
        digest: &Digest,
        subject: &Subject,
    ) -> Result<Vec<Stored>> {
        let first = first_result_of_each_run(&results)?;
        let mut counted = Vec::with_capacity(results.len());
        for row in results {
            if row.counted == Some(false) {
                continue;
            }
            let r: VerificationResult = row.decode()?;
            let counts = if r.subject_digest == *digest {
                self.counts_given(&row, &r, &first, subject).await?
            } else {
                // Not a result about this subject (no listing of it returns one): judged alone.
                self.counts_unscoped(&row).await?
            };
            if counts {
                counted.push(row);
            }
        }
        Ok(counted)
    }

    /// Whether a stored verification result counts. The store marks results appended after
    /// their subject or generation moved on as history. Beyond that, a result counts only when
    /// its run's recorded outcome is this result's (a completed run for a completed result, an
    /// unavailable run with the same reason for an unavailable one): a run that was cancelled,
    /// whose grant lapsed, whose result was refused or that recorded no outcome makes any result
    /// stored for it history. And a result counts only when it answers every criterion of its
    /// subject exactly once, however it reached the store.
    ///
    /// Read by an operator, or by a principal holding a grant in force on the result's subject.
    pub async fn counts(&self, caller: &Principal, row: &Stored) -> Result<bool> {
        let r: VerificationResult = row.decode()?;
        let subject = self.subject(&r.subject_digest).await?;
        self.require_read_subject(caller, &subject, "whether a result counts".to_owned())
            .await?;
        self.counts_unscoped(row).await
    }

    /// [`Engine::counts`] for the engine's own use, for no caller.
    pub(crate) async fn counts_unscoped(&self, row: &Stored) -> Result<bool> {
        if row.counted == Some(false) {
            return Ok(false);
        }
        let r: VerificationResult = row.decode()?;
        let siblings = self
            .store
            .list(
                DocKind::Verification,
                &About::Subject(r.subject_digest.clone()),
            )
            .await?;
        let first = first_result_of_each_run(&siblings)?;
        let subject = self.subject(&r.subject_digest).await?;
        self.counts_given(row, &r, &first, &subject).await
    }

    /// Whether `row` (decoded as `r`) counts, given the seq of the first result stored for each
    /// run about its subject (`first`) and that subject's document.
    async fn counts_given(
        &self,
        row: &Stored,
        r: &VerificationResult,
        first: &BTreeMap<String, u64>,
        subject: &Subject,
    ) -> Result<bool> {
        if row.counted == Some(false) {
            return Ok(false);
        }
        let Some(run) = self.store.run(r.verifier.run.as_str()).await? else {
            return Ok(false);
        };
        // A run whose events were written out of order (around the store's checks) ends
        // nothing; else nothing follows its end, the run's outcome.
        if !run.in_order() {
            return Ok(false);
        }
        let Some(end) = run.end() else {
            return Ok(false);
        };
        let agrees = match r.status {
            VerificationStatus::Completed => end.status == RunStatus::Completed,
            VerificationStatus::Unavailable => {
                end.status == RunStatus::Unavailable
                    && end.reason == r.unavailable_reason
                    && end.reason != Some(UnavailableReason::GrantRevoked)
            }
        };
        if !agrees {
            return Ok(false);
        }
        // One run, one result: the run's outcome was recorded for the first result stored for
        // it, so any later one (written around the engine, or racing it) is history.
        if first.get(r.verifier.run.as_str()) != Some(&row.seq) {
            return Ok(false);
        }
        Ok(answers_each_criterion_once(r, subject).is_ok())
    }

    /// Builds the bundle for the execution's current subject, evaluates it with the core,
    /// stores the decision by its evaluation key (with the record of its items) and returns it.
    /// An operator, or a principal holding a grant in force on the execution, may ask; none
    /// can supply the decision.
    ///
    /// A run whose evaluation key already has its decision stored, as the evaluation recorded
    /// last for the subject and policy, appends nothing: it returns that decision
    /// (`inserted: false`), whose own evaluation record, written with it, is what replay reads.
    /// A run may also answer from the engine's gate-run cache, which holds only
    /// such stored decisions and only while they are proven current (`gate_cache.rs`): the
    /// audit chain has not moved since, and the store's `now` is still in the window in which
    /// the evaluation key cannot change with time.
    pub async fn gate_run(&self, caller: &Principal, execution: &str) -> Result<GateRun> {
        Ok(self.gate_run_finishing(caller, execution, None).await?.0)
    }

    /// [`Engine::gate_run`] for a gate job: a decision this run stores is written under the
    /// worker's `claim` and completes its job in the same transaction, with the outcome
    /// `outcome` gives for the decision. Returns whether it did (a run that stores nothing,
    /// answering with a decision already stored, leaves the job to be completed by the worker).
    pub(crate) async fn gate_run_finishing(
        &self,
        caller: &Principal,
        execution: &str,
        finish: Option<(&JobClaim, &JobOutcome<'_>)>,
    ) -> Result<(GateRun, bool)> {
        // A cancelled execution is never gated again; a decision that raced the cancellation
        // is stored but never applies (applicability reads the cancellation too). The chain's
        // head is read before anything the run counts, so an entry computed under it saw every
        // write up to it.
        // A decision is stored under the caller's name: an operator, or a principal holding a
        // grant in force on the execution (on PostgreSQL the database holds the same rule), so
        // the caller's read is checked before any answer, the cache's included, and before
        // anything else, so that a refusal always records its denial.
        self.require_read(caller, execution, "the gate run").await?;
        let (now, head) = self.store.now_and_head().await?;
        // An answer is cached only after a run that found the execution live, under the head
        // it was computed at; a cancellation is an append, which moves the head, so an answer
        // kept under the head read now was computed after every cancellation there is.
        if let Some(run) = self.gate_cache.get(execution, head.as_ref(), &now) {
            return Ok((run, false));
        }
        self.require_live(execution, "be gated").await?;
        let now = &now;
        let collected = self.collect_unscoped(execution).await?;
        let bundle = collected.bundle(now)?;
        let decision = verdict_core::gate::evaluate_value(&bundle);
        let key = decision
            .evaluation_key
            .clone()
            .ok_or_else(|| EngineError::Invalid {
                what: "gate bundle",
                message: format!(
                    "the gate could not read the bundle it was given: {:?}",
                    decision.reasons
                ),
            })?;
        // The same evaluation already stored, and the latest recorded for this subject and
        // policy: its decision converges on it (as the store's append would), its own record
        // already makes it replayable, and it already applies as the latest evaluation, so
        // nothing is appended. An older evaluation coming back (a clock set back) is recorded
        // again below, as it always was, so that it is the latest.
        //
        // Equal keys mean equal decisions, so a stored decision under this key that is not the
        // one just computed was not made by the Gate (a gate identity's own write): it is never
        // returned, cached or taken as this run's answer, and nothing is written beside it.
        let stored = self.store.decision_by_key(&key).await?;
        if let Some(stored) = &stored {
            same_decision(&key, &decision, &stored.body)?;
        }
        if let Some(stored) = stored
            && self
                .latest_evaluation_key(&collected.subject.digest, &collected.policy.digest)
                .await?
                .as_ref()
                == Some(&key)
        {
            let run = GateRun {
                decision: stored.decode()?,
                bytes: stored.body,
                inserted: false,
            };
            // Kept only when nothing was written while the run read: the head is unmoved.
            if self.store.audit_head().await? == head {
                self.gate_cache.put(execution, head, now, &collected, &run);
            }
            return Ok((run, false));
        }
        let record = collected.record(&key, now)?;
        let value = serde_json::to_value(&decision).map_err(|e| EngineError::Invalid {
            what: "gate decision",
            message: e.to_string(),
        })?;
        // The record and the decision in one transaction, both as the Gate: a stored decision is
        // always replayable, and nothing else may write either. Two first runs racing both
        // reach here; the store keeps one decision (the first) with its record. (Decisions
        // with one evaluation key are one decision, so the outcome named for the job is the
        // stored one's either way.)
        let claim = finish.map(|(claim, outcome)| claim.completing(outcome(&decision)));
        let stored = self
            .store
            .put_batch_claimed(
                &Actor::gate(caller.name.as_str()),
                claim.as_ref(),
                &[(DocKind::Evaluation, record), (DocKind::Decision, value)],
            )
            .await?
            .pop()
            .ok_or_else(|| EngineError::NotFound {
                what: "stored gate decision",
                key: key.to_string(),
            })?;
        // An append that converged on a decision already stored under the key returns that
        // one, which must be this run's too: one stored by another writer after the read above
        // is refused here, though this run's record (and its job's end) went in beside it.
        if !stored.inserted {
            same_decision(&key, &decision, &stored.body)?;
        }
        let decision = stored.decode()?;
        let run = GateRun {
            decision,
            bytes: stored.body,
            inserted: stored.inserted,
        };
        Ok((run, claim.is_some()))
    }

    /// Whether `decision`, stored under `key`, is what the Gate makes of `collected` (the items
    /// it reads now, whose evidence set the decision names) at the `now` of an evaluation
    /// record of `key`, a time the store had reached ([`Engine::time_reached`]). One that is
    /// not was not made by the Gate, so it never applies (`not_reproduced`). Equal keys mean
    /// equal decisions, so any record of the key will do (each distinct time is tried once); a
    /// decision with no record in `gate_evaluations` (stored before schema version 2) is
    /// replayed from wherever its record is ([`Engine::replay_unscoped`]). `records` are the
    /// evaluation records of the decision's subject under its policy
    /// ([`Engine::evaluations_under`]), which the caller read already.
    pub(crate) async fn gate_gives(
        &self,
        collected: &Collected,
        key: &Digest,
        decision: &GateDecision,
        now: &Timestamp,
        records: &[(Stored, EvaluationRecord)],
    ) -> Result<bool> {
        let of_key: Vec<_> = records
            .iter()
            .filter(|(_, r)| r.evaluation_key == *key && r.schema == EVALUATION_RECORD_SCHEMA)
            .collect();
        if of_key.is_empty() {
            return self.reproduces(key).await;
        }
        let stored = canonical(decision)?;
        let mut tried = BTreeSet::new();
        for (row, record) in of_key {
            if !tried.insert(record.now.clone())
                || !self.time_reached(row, &record.now, now).await?
            {
                continue;
            }
            let again = verdict_core::gate::evaluate_value(&collected.bundle(&record.now)?);
            if canonical(&again)? == stored {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether `at`, the time an evaluation record `row` names, is one the store had reached:
    /// no later than its time `now`, or than the time it recorded the row's append. The Gate
    /// evaluates at the store's time and the record is stored after, so a later time is the
    /// writer's own (a gate identity's, to let items dated in the future count); the append's
    /// time keeps a record made before a manual clock was set back.
    pub(crate) async fn time_reached(
        &self,
        row: &Stored,
        at: &Timestamp,
        now: &Timestamp,
    ) -> Result<bool> {
        if at <= now {
            return Ok(true);
        }
        let event = self
            .store
            .audit_events(row.seq.saturating_sub(1), 1)
            .await?;
        Ok(event
            .first()
            .filter(|e| e.seq == row.seq)
            .and_then(|e| e.recorded_at.parse::<Timestamp>().ok())
            .is_some_and(|recorded| *at <= recorded))
    }

    /// Whether the stored decision under `key` replays from its evaluation record
    /// ([`Engine::replay_unscoped`]); one with no record or item to replay from does not. The
    /// store being away is an error, never an answer.
    async fn reproduces(&self, key: &Digest) -> Result<bool> {
        match self.replay_unscoped(key).await {
            Ok(_) => Ok(true),
            Err(
                EngineError::ReplayMismatch { .. }
                | EngineError::NotFound { .. }
                | EngineError::Invalid { .. },
            ) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The evaluation key of the evaluation recorded last (highest store sequence) for
    /// `subject` under `policy`, if any: the one evaluation whose decision may apply
    /// (docs/spec/applicability.md, `evidence_set_moved`).
    pub(crate) async fn latest_evaluation_key(
        &self,
        subject: &Digest,
        policy: &Digest,
    ) -> Result<Option<Digest>> {
        Ok(self
            .evaluations_under(subject, policy)
            .await?
            .pop()
            .map(|(_, record)| record.evaluation_key))
    }

    /// The evaluation records of `subject` under `policy`, with their rows, in store order.
    pub(crate) async fn evaluations_under(
        &self,
        subject: &Digest,
        policy: &Digest,
    ) -> Result<Vec<(Stored, EvaluationRecord)>> {
        let mut under = Vec::new();
        for row in self
            .store
            .list(DocKind::Evaluation, &About::Subject(subject.clone()))
            .await?
        {
            let record: EvaluationRecord = row.decode()?;
            if record.policy_digest == *policy {
                under.push((row, record));
            }
        }
        Ok(under)
    }

    /// `audit verify` over the store and then over its decisions: the store's own walk (chain,
    /// rows, derived columns, pointers) and, for every stored gate decision in chain order, a
    /// replay from its evaluation record. A decision the replay does not reproduce byte for
    /// byte is reported as a [`ProblemKind::Replay`] problem: the Gate did not make it, so the
    /// store is not intact, whatever its hashes say.
    pub async fn verify_store(&self, anchor: Option<&ChainHead>) -> Result<AuditReport> {
        const PAGE: u32 = 1000;
        let mut report = self.store.verify_audit(anchor).await?;
        let mut after = 0;
        loop {
            let events = self.store.audit_events(after, PAGE).await?;
            let Some(last) = events.last() else { break };
            after = last.seq;
            for e in events
                .iter()
                .filter(|e| e.table == Table::GateDecisions.name())
            {
                let replayed = match e.key.parse::<Digest>() {
                    Ok(key) => self.replay_unscoped(&key).await.map(|_| ()),
                    Err(err) => Err(EngineError::Invalid {
                        what: "evaluation key",
                        message: err.to_string(),
                    }),
                };
                if let Err(err) = replayed {
                    report.problems.push(Problem {
                        kind: ProblemKind::Replay,
                        seq: Some(e.seq),
                        table: e.table.clone(),
                        key: Some(e.key.clone()),
                        detail: format!("the Gate does not reproduce this decision: {err}"),
                    });
                }
            }
        }
        Ok(report)
    }

    /// [`Engine::verify_store`] as `caller`, who must be an operator: the walk reads every row,
    /// so it is not for a principal whose reads are scoped by grants. A refusal is recorded.
    pub async fn verify_store_as(
        &self,
        caller: &Principal,
        anchor: Option<&ChainHead>,
    ) -> Result<AuditReport> {
        self.require_role(caller, &[Role::Operator], "verify the audit chain")
            .await?;
        self.verify_store(anchor).await
    }

    /// Rebuilds the bundle of a stored decision from its record and evaluates it again; the
    /// bytes must equal the stored ones. `key` is the evaluation key. Read by an operator, or
    /// by a principal holding a grant in force on the decision's subject.
    pub async fn gate_replay(&self, caller: &Principal, key: &Digest) -> Result<GateRun> {
        Ok(self.replay_with_bundle(caller, key).await?.0)
    }

    /// [`Engine::gate_replay`], also returning the rebuilt bundle that reproduced the decision.
    pub async fn replay_with_bundle(
        &self,
        caller: &Principal,
        key: &Digest,
    ) -> Result<(GateRun, Value)> {
        if caller.role != Role::Operator {
            // A decision that is not stored, or names no subject, is refused in the same words
            // as one out of the caller's scope: no grant covers any of them.
            let named = format!("gate decision {key}");
            let subject = match self.store.decision_by_key(key).await? {
                Some(stored) => match stored.decode::<GateDecision>()?.subject_digest {
                    Some(d) => Some(self.subject(&d).await?),
                    None => None,
                },
                None => None,
            };
            match subject {
                Some(subject) => self.require_read_subject(caller, &subject, named).await?,
                None => return Err(self.deny_unseen(caller, named).await),
            }
        }
        self.replay_unscoped(key).await
    }

    /// [`Engine::replay_with_bundle`] for the engine's own use, for no caller.
    pub(crate) async fn replay_unscoped(&self, key: &Digest) -> Result<(GateRun, Value)> {
        let stored =
            self.store
                .decision_by_key(key)
                .await?
                .ok_or_else(|| EngineError::NotFound {
                    what: "gate decision",
                    key: key.to_string(),
                })?;
        let decision: GateDecision = stored.decode()?;
        let subject_digest =
            decision
                .subject_digest
                .clone()
                .ok_or_else(|| EngineError::NotFound {
                    what: "subject of decision",
                    key: key.to_string(),
                })?;
        let mut records = self.store.evaluations(key).await?;
        if records.is_empty() {
            // A decision stored before schema version 2 has its record among the requests. Any
            // record is only a claim: the replayed bytes must still equal the stored ones.
            records = self
                .store
                .list(DocKind::Request, &About::Subject(subject_digest.clone()))
                .await?;
        }
        let mut last_err = EngineError::NotFound {
            what: "evaluation record of decision",
            key: key.to_string(),
        };
        for row in records {
            // Requests of other kinds share the legacy location; only a record of this key is
            // one to replay.
            let Ok(record) = row.decode::<EvaluationRecord>() else {
                continue;
            };
            if record.schema != EVALUATION_RECORD_SCHEMA || record.evaluation_key != *key {
                continue;
            }
            let bundle = self.rebuild(&record).await?;
            let again = verdict_core::gate::evaluate_value(&bundle);
            let bytes = again.canonical_bytes().map_err(|e| EngineError::Invalid {
                what: "gate decision",
                message: e.to_string(),
            })?;
            if bytes == stored.body.as_bytes() {
                return Ok((
                    GateRun {
                        decision: again,
                        bytes: stored.body,
                        inserted: false,
                    },
                    bundle,
                ));
            }
            last_err = EngineError::ReplayMismatch {
                key: key.to_string(),
            };
        }
        Err(last_err)
    }

    async fn rebuild(&self, record: &EvaluationRecord) -> Result<Value> {
        let fetch = |kind: DocKind, d: &Digest| {
            let d = d.clone();
            async move {
                self.store
                    .get(kind, &d)
                    .await?
                    .ok_or(EngineError::NotFound {
                        what: "bundle item",
                        key: d.to_string(),
                    })?
                    .value()
                    .map_err(EngineError::from)
            }
        };
        let mut lists = Vec::new();
        for (digests, kind) in [
            (&record.evidence, DocKind::Evidence),
            (&record.verifications, DocKind::Verification),
            (&record.human_decisions, DocKind::HumanDecision),
        ] {
            let mut items = Vec::with_capacity(digests.len());
            for d in digests {
                items.push(fetch(kind, d).await?);
            }
            lists.push(Value::Array(items));
        }
        let mut prior = Vec::with_capacity(record.prior_findings.len());
        for FindingRef { id, version } in &record.prior_findings {
            let row =
                self.store
                    .finding(id, *version)
                    .await?
                    .ok_or_else(|| EngineError::NotFound {
                        what: "finding",
                        key: format!("{id}@{version}"),
                    })?;
            prior.push(row.value()?);
        }
        let [evidence, verifications, human_decisions] =
            <[Value; 3]>::try_from(lists).map_err(|_| EngineError::Invalid {
                what: "evaluation record",
                message: "item lists missing".into(),
            })?;
        Ok(json!({
            "schema": "verdict.gate-bundle/v1",
            "policy": fetch(DocKind::Policy, &record.policy_digest).await?,
            "subject": fetch(DocKind::Subject, &record.subject_digest).await?,
            "evidence": evidence,
            "verifications": verifications,
            "human_decisions": human_decisions,
            "prior_findings": prior,
            "now": record.now.as_str(),
        }))
    }
}

/// A decision's canonical bytes.
pub(crate) fn canonical(decision: &GateDecision) -> Result<Vec<u8>> {
    decision
        .canonical_bytes()
        .map_err(|e| EngineError::Invalid {
            what: "gate decision",
            message: e.to_string(),
        })
}

/// Refuses a stored decision body under `key` that is not `decision`'s canonical bytes.
fn same_decision(key: &Digest, decision: &GateDecision, stored: &str) -> Result<()> {
    if canonical(decision)? == stored.as_bytes() {
        Ok(())
    } else {
        Err(EngineError::ReplayMismatch {
            key: key.to_string(),
        })
    }
}

/// The seq of the first result stored for each run among `rows` (the results about one
/// subject).
fn first_result_of_each_run(rows: &[Stored]) -> Result<BTreeMap<String, u64>> {
    let mut first: BTreeMap<String, u64> = BTreeMap::new();
    for row in rows {
        let r: VerificationResult = row.decode()?;
        let seq = first
            .entry(r.verifier.run.as_str().to_owned())
            .or_insert(row.seq);
        if row.seq < *seq {
            *seq = row.seq;
        }
    }
    Ok(first)
}
