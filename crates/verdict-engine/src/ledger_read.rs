//! The ledger's observations, read from the store: one per execution generation, classified by
//! the decision `history` says applies to it. The counting itself is in `ledger.rs`.

use crate::applicability::{DecisionView, NotApplicable};
use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result};
use crate::ledger::{AttemptClass, CohortKey, Ledger, Observation, VerifierRevision, Window};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use verdict_core::contracts::{Outcome, ReasonCode, Role, Subject, Timestamp, VerificationResult};
use verdict_core::digest::Digest;
use verdict_store::{About, ActorRole, DocKind, EvaluationRecord, ExecutionHead, PointerKind};

/// The part of a run-context note the ledger reads: which construction rules built the prompt.
#[derive(Debug, Deserialize)]
struct ManifestHead {
    construction: Construction,
}

#[derive(Debug, Deserialize)]
struct Construction {
    revision: String,
}

/// The part of a verification request the ledger reads: the capability it names, if any.
#[derive(Debug, Deserialize)]
struct NamedCapability {
    schema: String,
    #[serde(default)]
    capability: Option<String>,
}

/// Whether a reason that makes `view` not apply still lets it stand for its attempt. For an
/// attempt that has closed (a later generation started), the world moving on afterwards — the
/// next generation, a new policy revision, which starts a cohort of its own — does not undo what
/// was decided about it. Anything else (a newer subject in the same attempt, an expired pass,
/// ...) means the decision no longer stands.
fn excused(why: NotApplicable, closed: bool) -> bool {
    closed
        && matches!(
            why,
            NotApplicable::GenerationMoved | NotApplicable::PolicyRevisionMoved
        )
}

/// Whether a class records that the attempt's work was judged and found wanting.
const fn failed(class: AttemptClass) -> bool {
    matches!(
        class,
        AttemptClass::Rework
            | AttemptClass::HumanRequired
            | AttemptClass::Blocked
            | AttemptClass::Tampered
    )
}

/// How one attempt is observed: its class, the decision's evaluation key, the policy's label,
/// the verifiers counted and when.
struct Seen {
    class: AttemptClass,
    key: Option<Digest>,
    policy: String,
    verifiers: Vec<VerifierRevision>,
    at: Timestamp,
}

/// What a decision that stands makes of its attempt.
fn classify(view: &DecisionView) -> AttemptClass {
    let d = &view.decision;
    if d.reasons
        .iter()
        .any(|r| r.code == ReasonCode::EvidenceTampered)
    {
        return AttemptClass::Tampered;
    }
    match d.outcome {
        Outcome::Pass => AttemptClass::Pass,
        Outcome::Rework => AttemptClass::Rework,
        Outcome::HumanRequired => AttemptClass::HumanRequired,
        Outcome::Blocked => {
            let blocking = d.reasons.iter().filter(|r| r.outcome == Outcome::Blocked);
            let mut any = false;
            let mut all_unavailable = true;
            for r in blocking {
                any = true;
                all_unavailable &= r.code == ReasonCode::VerifierUnavailable;
            }
            if any && all_unavailable {
                AttemptClass::CoverageGap
            } else {
                AttemptClass::Blocked
            }
        }
    }
}

/// The capability key of a subject: its mission and its work item kinds.
fn capability(subject: &Subject) -> String {
    let kinds: BTreeSet<&str> = subject.work_items.iter().map(|w| w.kind.as_str()).collect();
    let kinds: Vec<&str> = kinds.into_iter().collect();
    format!(
        "{}:{}",
        subject.mission.as_ref().map_or("-", |m| m.as_str()),
        if kinds.is_empty() {
            "-".to_owned()
        } else {
            kinds.join("+")
        }
    )
}

impl Engine {
    /// Every execution the store holds a head for.
    pub(crate) async fn executions(&self) -> Result<BTreeSet<String>> {
        Ok(self
            .store
            .pointers(PointerKind::Execution)
            .await?
            .into_iter()
            .map(|p| p.name)
            .collect())
    }

    /// The capability the first request about the subject names. Only a request its own
    /// producer or an operator appended counts: the capability is theirs to name, no one
    /// else's.
    async fn requested_capability(
        &self,
        subject: &Subject,
        digest: &Digest,
    ) -> Result<Option<String>> {
        let mut named = None;
        for row in self
            .store
            .list(DocKind::Request, &About::Subject(digest.clone()))
            .await?
        {
            let Ok(request) = row.decode::<NamedCapability>() else {
                continue;
            };
            let Some(capability) = request
                .capability
                .filter(|_| request.schema == crate::documents::REQUEST_SCHEMA)
            else {
                continue;
            };
            let events = self
                .store
                .audit_events(row.seq.saturating_sub(1), 1)
                .await?;
            let by_owner = events.iter().any(|e| {
                e.seq == row.seq
                    && e.payload_digest == row.digest.as_str()
                    && (e.role == ActorRole::Operator.as_str()
                        || (e.role == ActorRole::Producer.as_str()
                            && e.principal == subject.producer.principal.as_str()))
            });
            if by_owner {
                // The first one: named before any outcome was known. A later request could
                // file an attempt that failed under another capability.
                named = Some(capability);
                break;
            }
        }
        Ok(named)
    }

    /// The verifiers whose results a decision counted, with their model and prompt revisions.
    async fn decision_verifiers(&self, key: &Digest) -> Result<Vec<VerifierRevision>> {
        let mut results = Vec::new();
        if let Some(row) = self.store.evaluations(key).await?.into_iter().next() {
            let record: EvaluationRecord = row.decode()?;
            for d in &record.verifications {
                if let Some(r) = self.store.get(DocKind::Verification, d).await? {
                    results.push(r.decode::<VerificationResult>()?);
                }
            }
        }
        let mut out = BTreeSet::new();
        for r in results {
            let model = r.verifier.runtime.as_ref().map_or_else(
                || "none".to_owned(),
                |rt| format!("{}/{}@{}", rt.provider, rt.model, rt.snapshot),
            );
            let prompt = self
                .run_contexts_unscoped(r.verifier.run.as_str())
                .await?
                .into_iter()
                .filter_map(|c| serde_json::from_value::<ManifestHead>(c.manifest).ok())
                .map(|m| m.construction.revision)
                .next_back()
                .unwrap_or_else(|| "none".to_owned());
            out.insert(VerifierRevision {
                class: r.verifier.class.to_string(),
                model,
                prompt,
            });
        }
        Ok(out.into_iter().collect())
    }

    async fn policy_label(&self, digest: Option<&Digest>) -> Result<String> {
        let digest = match digest {
            Some(d) => Some(d.clone()),
            None => self.gate_head().await?.map(|g| g.policy_digest),
        };
        Ok(match digest {
            Some(d) => {
                let p = self.policy(&d).await?;
                format!("{}@{}", p.name, p.revision)
            }
            None => "none".to_owned(),
        })
    }

    /// Whether a decision about a closed attempt still stood when the attempt closed. History
    /// judges a superseded generation's decision only by the generation having moved, so this
    /// makes the checks `history` makes for the current subject: the items the Gate reads for
    /// that subject under the decision's policy have its evidence set, and its evaluation is
    /// the last recorded for them. A late hard failure filed before the next generation
    /// started, for instance, leaves the pass it overturned stale here too.
    async fn stood_until_closed(
        &self,
        execution: &str,
        view: &DecisionView,
        now: &Timestamp,
    ) -> Result<bool> {
        let d = &view.decision;
        let (Some(subject), Some(policy), Some(key), Some(set)) = (
            d.subject_digest.as_ref(),
            d.policy_digest.as_ref(),
            d.evaluation_key.as_ref(),
            d.evidence_set_digest.as_ref(),
        ) else {
            return Ok(false);
        };
        let latest = self.evaluations_under(subject, policy).await?.pop();
        let Some((row, record)) = latest.filter(|(_, r)| r.evaluation_key == *key) else {
            return Ok(false);
        };
        // A record dated at a time the store had not reached was not the Gate's (see
        // `Engine::gate_gives`).
        if !self.time_reached(&row, &record.now, now).await? {
            return Ok(false);
        }
        let head = ExecutionHead {
            subject_digest: subject.clone(),
            generation: view.generation,
        };
        let collected = self.collect_for(execution, head, policy.clone()).await?;
        let again = verdict_core::gate::evaluate_value(&collected.bundle(&record.now)?);
        // The whole decision, not only its evidence set: one the Gate does not give back from
        // these items at its record's time was not made by the Gate and never stands.
        Ok(again.evidence_set_digest.as_ref() == Some(set)
            && crate::gate_run::canonical(&again)? == crate::gate_run::canonical(d)?)
    }

    /// How `view`, the latest decision about an attempt's subject, observes the attempt:
    /// classified when it stands (for a closed attempt, until the attempt closed), else stale.
    async fn observed(
        &self,
        execution: &str,
        view: &DecisionView,
        closed: bool,
        now: &Timestamp,
    ) -> Result<Seen> {
        let stands = view.not_applicable.iter().all(|w| excused(*w, closed))
            && (!closed || self.stood_until_closed(execution, view, now).await?);
        let class = if stands {
            classify(view)
        } else {
            AttemptClass::Stale
        };
        let key = view.decision.evaluation_key.clone();
        let (verifiers, at) = match &key {
            Some(k) => {
                let at = match self.store.evaluations(k).await?.into_iter().next() {
                    Some(row) => row.decode::<EvaluationRecord>()?.now,
                    None => now.clone(),
                };
                (self.decision_verifiers(k).await?, at)
            }
            None => (Vec::new(), now.clone()),
        };
        let policy = self
            .policy_label(view.decision.policy_digest.as_ref())
            .await?;
        Ok(Seen {
            class,
            key,
            policy,
            verifiers,
            at,
        })
    }

    /// One observation per attempt (execution generation) of `execution`, as at `now`. Read by
    /// an operator, or by a principal holding a grant in force on the execution or its mission.
    pub async fn ledger_attempts(
        &self,
        caller: &Principal,
        execution: &str,
    ) -> Result<Vec<Observation>> {
        self.require_read(caller, execution, "the attempts").await?;
        let now = self.now().await?;
        self.ledger_attempts_unscoped(execution, &now).await
    }

    /// [`Engine::ledger_attempts`] for the engine's own use, for no caller, as at `now`. A
    /// ledger passes the one `now` it counts up to: an attempt never decided is observed at
    /// `now`, and one read at a later instant would fall outside the window it is counted in.
    pub(crate) async fn ledger_attempts_unscoped(
        &self,
        execution: &str,
        now: &Timestamp,
    ) -> Result<Vec<Observation>> {
        let Some(head) = self.execution_head_unscoped(execution).await? else {
            return Ok(Vec::new());
        };
        let history = self.history_unscoped(execution).await?;
        // Only this gate's decisions: one made under the policy this gate held when it was made.
        // A decision under another gate's policy (a lenient gate any reader may run), or under
        // a policy this gate held at another time, says nothing of how this gate's work went.
        let spans = self.store.gate_policies(&self.gate).await?;
        let ours = |v: &&DecisionView| {
            v.decision
                .policy_digest
                .as_ref()
                .is_some_and(|p| spans.iter().any(|s| s.held(p, v.seq)))
        };
        // Every subject of each generation, in the order stored; the final one is the head for
        // the current generation, else the last of that generation the store holds.
        let mut generations: BTreeMap<u64, Vec<(Digest, Subject)>> = BTreeMap::new();
        for row in self
            .store
            .list(DocKind::Subject, &About::Execution(execution.to_owned()))
            .await?
        {
            let s: Subject = row.decode()?;
            let g = s.execution.generation;
            if g <= head.generation {
                generations
                    .entry(g)
                    .or_default()
                    .push((row.digest.clone(), s));
            }
        }
        let current = self.subject(&head.subject_digest).await?;
        let now_subjects = generations.entry(head.generation).or_default();
        now_subjects.retain(|(d, _)| *d != head.subject_digest);
        now_subjects.push((head.subject_digest.clone(), current));
        let mut out = Vec::new();
        for (attempt, (generation, subjects)) in generations.into_iter().enumerate() {
            let Some((digest, last)) = subjects.last().cloned() else {
                continue;
            };
            let closed = generation < head.generation;
            let decision = history
                .decisions
                .iter()
                .filter(ours)
                .filter(|v| v.decision.subject_digest.as_ref() == Some(&digest))
                .max_by_key(|v| v.seq);
            let mut seen = match decision {
                Some(view) => self.observed(execution, view, closed, now).await?,
                None => {
                    // Never decided: a coverage gap when every run for it ended unavailable,
                    // else simply unverified.
                    let runs: Vec<_> = history
                        .runs
                        .iter()
                        .filter(|r| r.subject_digest == digest.as_str())
                        .collect();
                    let gap = !runs.is_empty() && runs.iter().all(|r| r.status == "unavailable");
                    Seen {
                        class: if gap {
                            AttemptClass::CoverageGap
                        } else {
                            AttemptClass::Unverified
                        },
                        key: None,
                        policy: self.policy_label(None).await?,
                        verifiers: Vec::new(),
                        at: now.clone(),
                    }
                }
            };
            // An attempt that failed keeps its failure: a later revision of the same attempt
            // left undecided, or made one no verifier can answer, hides nothing.
            if matches!(
                seen.class,
                AttemptClass::Unverified | AttemptClass::CoverageGap
            ) {
                let earlier = history
                    .decisions
                    .iter()
                    .filter(ours)
                    .filter(|v| {
                        v.decision.subject_digest.as_ref() != Some(&digest)
                            && subjects
                                .iter()
                                .any(|(d, _)| v.decision.subject_digest.as_ref() == Some(d))
                    })
                    .max_by_key(|v| v.seq);
                if let Some(view) = earlier
                    && failed(classify(view))
                {
                    seen = self.observed(execution, view, closed, now).await?;
                    seen.class = classify(view);
                }
            }
            // The capability the attempt was first filed under, whichever revision named it.
            let mut named = None;
            for (d, s) in &subjects {
                if let Some(c) = self.requested_capability(s, d).await? {
                    named = Some(c);
                    break;
                }
            }
            let capability = match named {
                Some(named) => named,
                None => capability(&last),
            };
            let Seen {
                class,
                key,
                policy,
                verifiers,
                at,
            } = seen;
            out.push(Observation {
                cohort: CohortKey {
                    capability,
                    verifiers,
                    policy,
                },
                execution: execution.to_owned(),
                generation,
                attempt: u32::try_from(attempt + 1).map_err(|_| EngineError::Invalid {
                    what: "execution",
                    message: format!("{execution:?} has more attempts than can be counted"),
                })?,
                subject_digest: digest,
                evaluation_key: key,
                class,
                at,
            });
        }
        Ok(out)
    }

    /// The reliability ledger of every execution in the store over `window`, as at `now`.
    /// Operators only: its numbers are the platform's, over executions no other principal may
    /// read, and a ledger of only the executions a caller's grants cover would carry the same
    /// labels with other numbers. Anyone else reads the attempts of the executions it may read
    /// ([`Engine::ledger_attempts`]).
    pub async fn ledger(&self, caller: &Principal, window: Window) -> Result<Ledger> {
        self.require_role(caller, &[Role::Operator], "read the platform's ledger")
            .await?;
        let now = &self.now().await?;
        let mut observations = Vec::new();
        for execution in self.executions().await? {
            observations.extend(self.ledger_attempts_unscoped(&execution, now).await?);
        }
        Ok(crate::ledger::compute(
            &observations,
            window,
            now,
            self.clock().await?,
        ))
    }
}
