//! Producers put subjects (moving the execution forward by compare-and-set); runners, and
//! producers where policy lets them, append check evidence; people decide.

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use crate::precondition::{Precondition, execution_version};
use serde_json::{Value, json};
use verdict_core::contracts::{
    CheckEvidence, ClearedReason, HumanDecision, HumanRole, HumanVerdict, Outcome, Role, Subject,
};
use verdict_core::digest::{Digest, DigestKind};
use verdict_store::DocKind;

/// The subject and policy a person reviewed, by digest: what a human decision binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reviewed {
    /// The subject reviewed (the execution's current subject, as `status` shows it).
    pub subject_digest: Digest,
    /// The policy reviewed under (the gate's current policy, as `status` shows it).
    pub policy_digest: Digest,
    /// The evaluation key of the gate decision the person looked at (as `status` and
    /// `gate run` show it), when given: the decision is then refused unless the current
    /// evaluation is that one, so an approval never clears reasons the person did not see.
    pub decision_key: Option<Digest>,
}

impl Engine {
    /// A producer (or operator) puts a subject for its execution; the execution's current
    /// subject moves to it by compare-and-set from the head the caller saw. A new commit, a
    /// replan or a criteria or risk revision is a new subject; a retry a new generation.
    pub async fn put_subject(&self, caller: &Principal, doc: &Value) -> Result<Digest> {
        self.put_subject_if(caller, doc, None).await
    }

    /// [`Engine::put_subject`], only while the execution's head is at the version `expected`
    /// names (`If-Match`): compared with the head the compare-and-set then moves from, so a
    /// writer that moved it meanwhile makes this one fail too. A mismatch is
    /// [`EngineError::PreconditionFailed`]; found before the write, it writes nothing, and
    /// lost in the compare-and-set, the subject is stored but the head does not move.
    pub async fn put_subject_if(
        &self,
        caller: &Principal,
        doc: &Value,
        expected: Option<&Precondition>,
    ) -> Result<Digest> {
        let now = &self.now().await?;
        self.require_role(caller, &[Role::Producer, Role::Operator], "put subjects")
            .await?;
        let (subject, digest) =
            verdict_core::contracts::decode::<Subject>(DigestKind::Subject, doc)
                .map_err(|e| invalid("subject")(e.to_string()))?;
        if caller.role == Role::Producer && subject.producer.principal != caller.name {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: "put a subject".into(),
                why: format!(
                    "the subject names producer {:?}",
                    subject.producer.principal.as_str()
                ),
            };
            return Err(self.deny(caller, err).await);
        }
        self.require_grant(caller, &subject, true, "put a subject", now)
            .await?;
        let execution = subject.execution.id.as_str();
        // A cancelled execution stays ended; a retry is a new execution.
        self.require_live(execution, "take a new subject").await?;
        let head = self.execution_head_unscoped(execution).await?;
        if let Some(h) = &head
            && subject.execution.generation < h.generation
        {
            return Err(EngineError::Conflict(format!(
                "execution {execution:?} is at generation {}; a subject for generation {} would go back",
                h.generation, subject.execution.generation
            )));
        }
        if let Some(h) = &head {
            self.require_execution_as_stored(caller, &subject, &digest, h, now)
                .await?;
        }
        self.require_mission_grant(caller, &subject, now).await?;
        self.require_named_blobs_readable(caller, &subject).await?;
        let what = || format!("execution {execution:?}");
        if let Some(p) = expected {
            let current = head.as_ref().map(execution_version);
            if !p.matches(current.as_deref()) {
                return Err(p.refusal(&what(), current.as_deref()));
            }
        }
        self.store
            .put(&caller.actor(), DocKind::Subject, doc)
            .await?;
        // Moved by the caller itself, in its own role: the store (and on PostgreSQL the
        // database) lets a producer move only the execution of a subject it produced, under a
        // write grant in force, so no producer needs the operator's role for it.
        self.store
            .set_current_subject(&caller.actor(), execution, head.as_ref(), &digest)
            .await
            .map_err(|e| lost_race(e, expected, &what()))?;
        Ok(digest)
    }

    /// Refuses subject `subject` (digest `digest`) for an execution whose current head is
    /// `head`, unless it is written to the execution as stored: a producer's write grant must
    /// cover the current subject (its execution, or the mission it has), and a producer other
    /// than the current subject's takes the execution over only under a write grant on the
    /// execution itself, by its id (a grant by mission lets producers work their own
    /// executions in it, not each other's). Whoever writes, the subject keeps the execution's
    /// mission, and the execution never returns to a subject it has left: its evidence would
    /// count again.
    async fn require_execution_as_stored(
        &self,
        caller: &Principal,
        subject: &Subject,
        digest: &Digest,
        head: &verdict_store::ExecutionHead,
        now: &verdict_core::contracts::Timestamp,
    ) -> Result<()> {
        let execution = subject.execution.id.as_str();
        let current = self.subject(&head.subject_digest).await?;
        if caller.role == Role::Producer {
            self.require_grant(caller, &current, true, "put a subject", now)
                .await?;
            if current.producer.principal != caller.name {
                let by_id = self
                    .store
                    .grants_for(caller.name.as_str())
                    .await?
                    .iter()
                    .any(|g| {
                        g.record.scope.kind == verdict_store::ScopeKind::Execution
                            && g.record.scope.id.as_str() == execution
                            && g.record.access == verdict_store::Access::Write
                            && g.is_active(now)
                    });
                if !by_id {
                    let err = EngineError::PermissionDenied {
                        principal: caller.name.to_string(),
                        role: caller.role.as_str(),
                        action: "put a subject".into(),
                        why: format!(
                            "execution {execution:?} is producer {:?}'s; taking it over needs a write grant in force on the execution itself",
                            current.producer.principal.as_str()
                        ),
                    };
                    return Err(self.deny(caller, err).await);
                }
            }
        }
        let mission = |s: &Subject| s.mission.as_ref().map_or("none", |m| m.as_str()).to_owned();
        if current.mission != subject.mission {
            return Err(EngineError::Conflict(format!(
                "execution {execution:?}'s current subject {} is of mission {}, but subject {digest} names mission {}; a subject does not change its execution's mission",
                head.subject_digest,
                mission(&current),
                mission(subject)
            )));
        }
        if *digest != head.subject_digest && self.store.execution_was_at(execution, digest).await? {
            return Err(EngineError::Conflict(format!(
                "execution {execution:?} was at subject {digest} before; an execution only moves forward, so put a new subject"
            )));
        }
        Ok(())
    }

    /// Refuses a producer's subject that names a mission unless the producer holds a write
    /// grant in force at `now` on that mission itself. Every grant on a mission covers the
    /// executions whose subjects name it, so a producer granted only its execution would
    /// otherwise choose, by naming a mission, whose verifiers and people check and approve its
    /// work. A grant on the execution alone does not put it in a mission: that is refused too,
    /// naming the mission and the grant missing. Every subject is held to it, the first of an
    /// execution included; an operator may name any mission.
    async fn require_mission_grant(
        &self,
        caller: &Principal,
        subject: &Subject,
        now: &verdict_core::contracts::Timestamp,
    ) -> Result<()> {
        let Some(mission) = subject.mission.as_ref().map(|m| m.as_str()) else {
            return Ok(());
        };
        if caller.role != Role::Producer {
            return Ok(());
        }
        let granted = self
            .store
            .grants_for(caller.name.as_str())
            .await?
            .iter()
            .any(|g| {
                g.record.scope.kind == verdict_store::ScopeKind::Mission
                    && g.record.scope.id.as_str() == mission
                    && g.record.access == verdict_store::Access::Write
                    && g.is_active(now)
            });
        if granted {
            return Ok(());
        }
        let err = EngineError::PermissionDenied {
            principal: caller.name.to_string(),
            role: caller.role.as_str(),
            action: "put a subject".into(),
            why: format!(
                "the subject names mission {mission:?}, and producer {:?} holds no write grant in force on mission {mission:?}; a grant on the execution alone does not put it in a mission",
                caller.name.as_str()
            ),
        };
        Err(self.deny(caller, err).await)
    }

    /// Appends check evidence documents (each may carry its digest). Runners need a write grant
    /// on the subject's execution; a producer may add evidence about its own work, under a
    /// write grant on its execution like everyone else, kept but counted only where the
    /// policy's `check_evidence_from` lists `producer`. Returns the evidence digests, in
    /// order.
    ///
    /// Where the store's own write refuses a runner's evidence without a write grant in force
    /// on a stored subject ([`verdict_store::Store::binds_evidence_grants`]: both backends, on
    /// the system clock), a runner's single document is written without reading the subject
    /// and the grants first, so the write is its one round trip. Anything but a fresh append (a
    /// refusal, any error, or a document already stored, which the write returns without
    /// looking at grants) is then done again the checked way, which reads them first, so the
    /// caller gets exactly the answer, and the denial on record, that checking first gives;
    /// the write that was refused or found its document stored wrote nothing. A batch always
    /// takes the checked way: one of its documents already stored would not be held to a
    /// grant while the others were written.
    pub async fn add_evidence(&self, caller: &Principal, docs: &[Value]) -> Result<Vec<Digest>> {
        self.add_evidence_claimed(caller, docs, None).await
    }

    /// [`Engine::add_evidence`], made under a job's claim when one is given (a runner worker
    /// filing its checks' evidence): refused as stale, writing nothing, once the claim was
    /// taken over, and ending the job with the evidence when the claim completes it. Checked
    /// in code first, as every claimed write is, so the one write is the claimed one.
    pub(crate) async fn add_evidence_claimed(
        &self,
        caller: &Principal,
        docs: &[Value],
        claim: Option<&verdict_store::JobClaim>,
    ) -> Result<Vec<Digest>> {
        if claim.is_none()
            && let [doc] = docs
            && caller.role == Role::Runner
            && verdict_core::contracts::decode::<CheckEvidence>(DigestKind::Evidence, doc).is_ok()
            && self.store.binds_evidence_grants(&caller.actor()).await?
            && let Ok(stored) = self
                .store
                .put(&caller.actor(), DocKind::Evidence, doc)
                .await
            && stored.inserted
        {
            return Ok(vec![stored.digest]);
        }
        self.add_evidence_checked(caller, docs, claim).await
    }

    /// [`Engine::add_evidence_claimed`] with every check made in code before the write.
    async fn add_evidence_checked(
        &self,
        caller: &Principal,
        docs: &[Value],
        claim: Option<&verdict_store::JobClaim>,
    ) -> Result<Vec<Digest>> {
        let now = &self.now().await?;
        self.require_role(
            caller,
            &[Role::Runner, Role::Producer],
            "append check evidence",
        )
        .await?;
        let mut batch = Vec::with_capacity(docs.len());
        // The subject last read and checked: a batch about one subject reads it and the
        // caller's grants once.
        let mut checked: Option<Digest> = None;
        for (i, doc) in docs.iter().enumerate() {
            let (ev, _) =
                verdict_core::contracts::decode::<CheckEvidence>(DigestKind::Evidence, doc)
                    .map_err(|e| invalid("check evidence")(format!("item {i}: {e}")))?;
            // Evidence names who produced it; naming anyone but the caller is acting as them.
            if ev.produced_by.principal != caller.name || ev.produced_by.role != caller.role {
                let err = EngineError::PermissionDenied {
                    principal: caller.name.to_string(),
                    role: caller.role.as_str(),
                    action: "append check evidence".into(),
                    why: format!(
                        "evidence {} says it was produced by {:?} as {}",
                        ev.id,
                        ev.produced_by.principal.as_str(),
                        ev.produced_by.role.as_str()
                    ),
                };
                return Err(self.deny(caller, err).await);
            }
            if checked.as_ref() != Some(&ev.subject_digest) {
                // The subject and the caller's grants in one read.
                let (subject, grants) = self
                    .store
                    .subject_and_grants(&ev.subject_digest, caller.name.as_str())
                    .await?;
                // A subject not stored, and one no grant in force lets the caller see, are
                // refused in the same words (runners and producers are never operators), so
                // the refusal tells neither which subjects exist nor whose they are.
                let unseen =
                    || format!("append check evidence about subject {}", ev.subject_digest);
                let Some(subject) = subject else {
                    return Err(self.deny_out_of_scope(caller, unseen()).await);
                };
                let subject: Subject = subject.decode()?;
                if !grants
                    .iter()
                    .any(|g| g.covers(&subject) && g.is_active(now))
                {
                    return Err(self.deny_out_of_scope(caller, unseen()).await);
                }
                if caller.role == Role::Producer && subject.producer.principal != caller.name {
                    let err = EngineError::PermissionDenied {
                        principal: caller.name.to_string(),
                        role: caller.role.as_str(),
                        action: "append check evidence".into(),
                        why: format!("evidence {} is about another producer's subject", ev.id),
                    };
                    return Err(self.deny(caller, err).await);
                }
                // A producer's evidence is about its own work, under its write grant, as the
                // database also requires of it.
                self.require_grant_in(
                    caller,
                    &subject,
                    &grants,
                    true,
                    "append check evidence",
                    now,
                )
                .await?;
                checked = Some(ev.subject_digest.clone());
            }
            batch.push((DocKind::Evidence, doc.clone()));
        }
        let stored = self
            .store
            .put_batch_claimed(&caller.actor(), claim, &batch)
            .await?;
        Ok(stored.into_iter().map(|s| s.digest).collect())
    }

    /// A person approves or rejects the subject and policy it reviewed, named by digest in
    /// `reviewed` (as `status` shows them). Both must still be the execution's current subject
    /// and the gate's current policy when the decision is recorded; if either moved, the
    /// decision is refused, never bound to whatever is current instead. Refused to the
    /// subject's producer and to every role but `human`.
    pub async fn decide(
        &self,
        caller: &Principal,
        execution: &str,
        verdict: HumanVerdict,
        reason: &str,
        reviewed: &Reviewed,
    ) -> Result<Digest> {
        self.decide_bound(caller, execution, verdict, reason, reviewed, false)
            .await
    }

    /// [`Engine::decide`]; with `bound`, a decision that names no reviewed decision
    /// (`reviewed.decision_key`) is refused as `invalid_input` once the caller is known to be
    /// one who may decide: what a review page posts always names the decision it showed.
    pub(crate) async fn decide_bound(
        &self,
        caller: &Principal,
        execution: &str,
        verdict: HumanVerdict,
        reason: &str,
        reviewed: &Reviewed,
        bound: bool,
    ) -> Result<Digest> {
        let now = &self.now().await?;
        // Scope first: whether the execution exists, who produced it and what state it is in
        // are told only to a caller who may see it.
        self.require_in_scope(
            caller,
            execution,
            format!("decide on execution {execution:?}"),
        )
        .await?;
        let head = self.existing_execution_head(execution).await?;
        let subject = self.subject(&head.subject_digest).await?;
        if subject.producer.principal == caller.name {
            let err = EngineError::SelfVerificationDenied {
                principal: caller.name.to_string(),
                action: "decide on its own work".into(),
                why: format!("it produced subject {}", head.subject_digest),
            };
            return Err(self.deny(caller, err).await);
        }
        self.require_role(caller, &[Role::Human], "record human decisions")
            .await?;
        self.require_grant(caller, &subject, true, "decide", now)
            .await?;
        self.require_live(execution, "take a human decision")
            .await?;
        if bound && reviewed.decision_key.is_none() {
            return Err(invalid("human decision")(
                "the review names no decision it showed; reload the page, review the decision that applies and decide again".into(),
            ));
        }
        let gate = self
            .gate_head()
            .await?
            .ok_or_else(|| EngineError::NoSuchGate(self.gate.clone()))?;
        if reviewed.subject_digest != head.subject_digest {
            return Err(EngineError::Conflict(format!(
                "the decision names subject {}, but execution {execution:?}'s current subject is {}; \
                 review the current subject and decide again",
                reviewed.subject_digest, head.subject_digest
            )));
        }
        if reviewed.policy_digest != gate.policy_digest {
            return Err(EngineError::Conflict(format!(
                "the decision names policy {}, but gate {:?}'s current policy is {}; \
                 review under the current policy and decide again",
                reviewed.policy_digest, self.gate, gate.policy_digest
            )));
        }
        if reason.trim().is_empty() {
            return Err(invalid("human decision")("a reason is required".into()));
        }
        // An approval names what it clears, from the evaluation current now; a rejection
        // clears nothing, and is checked against the decision it names only when it names one.
        let clears = if verdict == HumanVerdict::Approve || reviewed.decision_key.is_some() {
            let current = self
                .current_human_required(execution, head, gate.policy_digest, reviewed, now)
                .await?;
            match verdict {
                HumanVerdict::Approve => Some(current?),
                HumanVerdict::Reject => None,
            }
        } else {
            None
        };
        // Everything the decision says is in its id's seed: two decisions of one person at one
        // instant (a manual clock) that say different things must not share an id, which the
        // Gate would refuse as naming two documents.
        let seed = json!([
            caller.name.as_str(),
            reviewed.subject_digest.as_str(),
            reviewed.policy_digest.as_str(),
            now.as_str(),
            verdict,
            reason,
            clears
        ]);
        let doc = HumanDecision {
            id: short_id("hd", &seed)
                .parse()
                .map_err(|e| invalid("human decision id")(format!("{e}")))?,
            principal: caller.name.clone(),
            role: HumanRole::Human,
            subject_digest: reviewed.subject_digest.clone(),
            policy_digest: reviewed.policy_digest.clone(),
            decision: verdict,
            reason: reason.to_owned(),
            decided_at: now.clone(),
            clears,
        };
        let doc =
            serde_json::to_value(&doc).map_err(|e| invalid("human decision")(e.to_string()))?;
        Ok(self
            .store
            .put(&caller.actor(), DocKind::HumanDecision, &doc)
            .await?
            .digest)
    }

    /// The `human_required` reasons of the current evaluation, which an approval recorded now
    /// names as what it clears: the bundle `gate run` would build now, evaluated (nothing is
    /// stored). Refused (`conflict`) when the person reviewed another evaluation than the
    /// current one; the inner result is the `conflict` of an evaluation in which nothing needs
    /// a person's approval, which refuses an approval only.
    async fn current_human_required(
        &self,
        execution: &str,
        head: verdict_store::ExecutionHead,
        policy_digest: Digest,
        reviewed: &Reviewed,
        now: &verdict_core::contracts::Timestamp,
    ) -> Result<Result<Vec<ClearedReason>>> {
        let collected = self.collect_for(execution, head, policy_digest).await?;
        let decision = verdict_core::gate::evaluate_value(&collected.bundle(now)?);
        let Some(key) = decision.evaluation_key else {
            return Err(EngineError::Invalid {
                what: "gate bundle",
                message: format!(
                    "the gate could not read the bundle it was given: {:?}",
                    decision.reasons
                ),
            });
        };
        if let Some(seen) = &reviewed.decision_key {
            if *seen != key {
                return Err(EngineError::Conflict(format!(
                    "the approval names decision {seen}, but execution {execution:?}'s current \
                     evaluation is {key}; run the gate, review its decision and decide again"
                )));
            }
            // What a person reviews is a decision the Gate recorded (status and the review
            // pages show nothing else), never an evaluation of now that nobody was shown.
            if self.store.decision_by_key(&key).await?.is_none() {
                return Err(EngineError::Conflict(format!(
                    "the approval names evaluation {key} of execution {execution:?}, which the \
                     gate has not recorded as a decision; run the gate, review its decision and \
                     decide again"
                )));
            }
        }
        let mut clears: Vec<ClearedReason> = decision
            .reasons
            .iter()
            .filter(|r| r.outcome == Outcome::HumanRequired)
            .map(ClearedReason::of)
            .collect();
        clears.sort();
        clears.dedup();
        if clears.is_empty() {
            return Ok(Err(EngineError::Conflict(format!(
                "nothing needs a person's approval now: evaluation {key} of execution \
                 {execution:?} has no human_required reason (its outcome is {})",
                decision.outcome.as_str()
            ))));
        }
        Ok(Ok(clears))
    }

    /// Refuses a document kind that clients never write directly: findings travel inside
    /// verification results and gate decisions are only ever computed by the engine.
    pub async fn refuse_direct(&self, caller: &Principal, kind: DocKind) -> EngineError {
        let err = match (kind, caller.role) {
            (DocKind::Finding, Role::Producer) => EngineError::SelfVerificationDenied {
                principal: caller.name.to_string(),
                action: "write a finding".into(),
                why: "producers never write findings".into(),
            },
            (DocKind::Finding, _) => EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: "write a finding".into(),
                why: "findings are accepted only inside a verification result for an admitted run"
                    .into(),
            },
            _ => EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: "write a gate decision".into(),
                why: "decisions are computed by the gate, never accepted from a client".into(),
            },
        };
        self.deny(caller, err).await
    }
}

/// `PREFIX-` and 24 hex digits of the SHA-256 of the canonical JSON of `seed`.
pub(crate) fn short_id(prefix: &str, seed: &Value) -> String {
    let d = verdict_core::digest::raw(&verdict_core::canonical::to_vec(seed));
    let hex = d.as_str().trim_start_matches("sha256:");
    format!("{prefix}-{}", hex.get(..24).unwrap_or(hex))
}

/// A compare-and-set lost to another writer, under a precondition: the version the caller
/// named is no longer current, which is what `If-Match` refuses. Anything else as it is.
pub(crate) fn lost_race(
    e: verdict_store::StoreError,
    expected: Option<&Precondition>,
    what: &str,
) -> EngineError {
    match (e, expected) {
        (verdict_store::StoreError::CasFailed { found, .. }, Some(p)) => {
            EngineError::PreconditionFailed(format!(
                "{what} moved to {found} while this write ran; it is no longer at {}; read it again",
                p.describe()
            ))
        }
        (e, _) => e.into(),
    }
}
