//! The open blocking findings of an execution's earlier subjects (the bundle's
//! `prior_findings`, docs/spec/bundle.md), derived from everything stored about the lineage rather
//! than only from decisions: a blocker a verifier reported on a subject that was never gated
//! still binds the next subject.

use crate::engine::{Engine, Principal};
use crate::error::Result;
use std::collections::{BTreeMap, BTreeSet};
use verdict_core::contracts::{
    Disposition, DispositionKind, Finding, GateDecision, Id, Scope, Severity, Subject,
    VerificationResult,
};
use verdict_core::digest::Digest;
use verdict_store::{About, DocKind};

/// A finding pinned by id and version.
pub(crate) type FindingRef = (Id, u64);

/// What closes a prior blocker: the dispositions of the latest earlier subject that disposed
/// of it. Several dispositions on that subject: the strictest stands (docs/spec/evidence.md), so one
/// `still_present` or `human_required` keeps it open.
fn closes(dispositions: &[&Disposition]) -> bool {
    !dispositions.is_empty()
        && dispositions.iter().all(|d| match d.disposition {
            // Without refs a `resolved` does not count (docs/spec/evidence.md).
            DispositionKind::Resolved => !d.evidence_refs.is_empty(),
            DispositionKind::SupersededBySubjectChange => {
                d.reason.as_deref().is_some_and(|r| !r.trim().is_empty())
            }
            DispositionKind::StillPresent | DispositionKind::HumanRequired => false,
        })
}

impl Engine {
    /// The open blocking findings of the execution's subjects other than `current`, by id and
    /// version, sorted. A candidate is a change-scoped blocker on a required criterion in a
    /// counted result about an earlier subject, or a finding an earlier decision sent to rework
    /// or left unresolved. A candidate stays open unless the latest earlier subject after its
    /// own that disposed of it, in counted results, resolved it (with refs) or superseded it
    /// (with a reason). A candidate whose own subject is not in the lineage stays open.
    ///
    /// Read by an operator, or by a principal holding a grant in force on the execution or its
    /// mission.
    pub async fn prior_blockers(
        &self,
        caller: &Principal,
        execution: &str,
        current: &Digest,
    ) -> Result<Vec<FindingRef>> {
        self.require_read(caller, execution, "the prior blockers")
            .await?;
        self.prior_blockers_unscoped(execution, current).await
    }

    /// [`Engine::prior_blockers`] for the engine's own use, for no caller.
    pub(crate) async fn prior_blockers_unscoped(
        &self,
        execution: &str,
        current: &Digest,
    ) -> Result<Vec<FindingRef>> {
        let lineage = About::Execution(execution.to_owned());
        let mut position: BTreeMap<Digest, usize> = BTreeMap::new();
        let mut candidates: BTreeSet<FindingRef> = BTreeSet::new();
        // (subject position, disposition) for every counted disposition.
        let mut disposed: Vec<(usize, Disposition)> = Vec::new();
        for row in self.store.list(DocKind::Subject, &lineage).await? {
            if &row.digest == current || position.contains_key(&row.digest) {
                continue;
            }
            let at = position.len();
            position.insert(row.digest.clone(), at);
            let subject: Subject = row.decode()?;
            let required = required_criteria(&subject);
            let about = About::Subject(row.digest.clone());
            let results = self.store.list(DocKind::Verification, &about).await?;
            for result in self.counted_among(results, &row.digest, &subject).await? {
                let r: VerificationResult = result.decode()?;
                candidates.extend(
                    r.findings
                        .iter()
                        .filter(|f| carried_blocker(f, &required))
                        .map(|f| (f.id.clone(), f.version)),
                );
                disposed.extend(r.dispositions.into_iter().map(|d| (at, d)));
            }
        }
        for row in self.store.list(DocKind::Decision, &lineage).await? {
            let d: GateDecision = row.decode()?;
            if d.subject_digest.as_ref() == Some(current) {
                continue;
            }
            candidates.extend(
                d.rework
                    .iter()
                    .chain(&d.unresolved_prior_blockers)
                    .map(|f| (f.id.clone(), f.version)),
            );
        }
        let mut open = Vec::new();
        for (id, version) in candidates {
            let origin = match self.store.finding(&id, version).await? {
                Some(f) => position
                    .get(&f.decode::<Finding>()?.subject_digest)
                    .copied(),
                None => None,
            };
            let closed = origin.is_some_and(|origin| {
                let later: Vec<(usize, &Disposition)> = disposed
                    .iter()
                    .filter(|(at, d)| *at > origin && d.finding == id && d.version == version)
                    .map(|(at, d)| (*at, d))
                    .collect();
                let latest = later.iter().map(|(at, _)| *at).max();
                let on_latest: Vec<&Disposition> = later
                    .iter()
                    .filter(|(at, _)| Some(*at) == latest)
                    .map(|(_, d)| *d)
                    .collect();
                closes(&on_latest)
            });
            if !closed {
                open.push((id, version));
            }
        }
        Ok(open)
    }
}

/// The ids of `subject`'s required criteria.
pub(crate) fn required_criteria(subject: &Subject) -> BTreeSet<&str> {
    subject
        .criteria
        .items
        .iter()
        .filter(|c| c.required)
        .map(|c| c.id.as_str())
        .collect()
}

/// Whether `f` is a blocker the Gate is handed again until a counted result disposes of it: a
/// change-scoped blocker on one of the `required` criteria.
pub(crate) fn carried_blocker(f: &Finding, required: &BTreeSet<&str>) -> bool {
    f.severity == Severity::Blocker
        && f.scope == Scope::Change
        && required.contains(f.criterion.as_str())
}
