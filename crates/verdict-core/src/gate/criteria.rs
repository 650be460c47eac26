//! Criterion status (CONTRACTS.md §6.3): every counted source of a criterion, combined without
//! voting. A failure from any source stands; a pass needs every source to agree or be silent.

use super::count::Verifications;
use super::index::CriterionIndex;
use super::load::Loaded;
use super::reasons::{Reasons, fixed, reason};
use crate::contracts::{
    CheckEvidence, CheckOutcome, CriterionDecision, CriterionRow, CriterionStatus, Id, ReasonCode,
    Source, SourceKind, VerificationResult,
};
use std::collections::{BTreeMap, BTreeSet};

/// Everything the criterion rules read.
pub(crate) struct Inputs<'a> {
    pub loaded: &'a Loaded,
    pub index: &'a CriterionIndex<'a>,
    pub evidence: &'a BTreeMap<&'a Id, Vec<&'a CheckEvidence>>,
    pub verifications: &'a Verifications<'a>,
    pub required: &'a BTreeSet<&'a Id>,
    pub required_classes: &'a BTreeSet<&'a Id>,
    pub refs: &'a BTreeSet<&'a str>,
}

/// Derives each criterion's status, in the subject's order, adding the criterion reasons.
pub(crate) fn criteria(i: &Inputs<'_>, reasons: &mut Reasons) -> Vec<CriterionDecision> {
    let l = i.loaded;
    let p = &l.policy;
    let n = i.index.len();
    // Tables by criterion position, built in one pass each, so the work is linear in the
    // bundle rather than criteria x rows.
    let mut pins: Vec<Vec<&Id>> = vec![Vec::new(); n];
    for pin in &l.subject.checks {
        for c in &pin.criteria {
            if let Some(slot) = i.index.get(c.as_str()).and_then(|k| pins.get_mut(k)) {
                slot.push(&pin.id);
            }
        }
    }
    let per = i.verifications.counted.len();
    let mut rows: Vec<Vec<(&VerificationResult, &CriterionRow)>> =
        (0..n).map(|_| Vec::with_capacity(per)).collect();
    let mut required_results: Vec<(&VerificationResult, Vec<bool>)> = Vec::new();
    for r in &i.verifications.counted {
        let mut has = vec![false; n];
        for (j, row) in r.criteria.iter().enumerate() {
            if let Some(k) = i.index.get_hinted(row.id.as_str(), j) {
                if let Some(slot) = rows.get_mut(k) {
                    slot.push((r, row));
                }
                if let Some(h) = has.get_mut(k) {
                    *h = true;
                }
            }
        }
        if i.required_classes.contains(&r.verifier.class) {
            required_results.push((r, has));
        }
    }
    let mut out = Vec::with_capacity(l.subject.criteria.items.len());
    for (k, c) in l.subject.criteria.items.iter().enumerate() {
        let required = i.required.contains(&c.id);
        let mut sources = Vec::new();
        for pin in pins.get(k).into_iter().flatten() {
            for e in i.evidence.get(pin).into_iter().flatten() {
                let status = match e.outcome {
                    CheckOutcome::Pass => CriterionStatus::Passed,
                    CheckOutcome::Fail => CriterionStatus::Failed,
                    CheckOutcome::Error => continue, // proves nothing
                };
                sources.push(Source {
                    kind: SourceKind::Check,
                    reference: e.id.clone(),
                    status,
                });
            }
        }
        for (r, row) in rows.get(k).into_iter().flatten() {
            {
                let mut status = row.status;
                if status == CriterionStatus::NotTested {
                    continue;
                }
                if status == CriterionStatus::Passed {
                    if r.context.as_ref().is_some_and(|ctx| !ctx.complete) {
                        // A pass on a context that left something out is not a pass.
                        status = CriterionStatus::Inconclusive;
                    } else if p.require_evidence_refs
                        && (row.evidence_refs.is_empty()
                            || row
                                .evidence_refs
                                .iter()
                                .any(|x| !i.refs.contains(x.as_str())))
                    {
                        status = CriterionStatus::Inconclusive;
                        if required {
                            let foreign: Vec<&str> = row
                                .evidence_refs
                                .iter()
                                .map(String::as_str)
                                .filter(|x| !i.refs.contains(x))
                                .collect();
                            let why = if row.evidence_refs.is_empty() {
                                "cites no ref".to_owned()
                            } else {
                                format!("cites refs not in the bundle: {foreign:?}")
                            };
                            reasons.add(
                                reason(ReasonCode::UnsupportedPass, p.on_inconclusive)
                                    .criterion(&c.id),
                                format!(
                                    "verification {:?} passed {:?} but {why}",
                                    r.id.as_str(),
                                    c.id.as_str()
                                ),
                            );
                        }
                    }
                }
                sources.push(Source {
                    kind: SourceKind::Verification,
                    reference: r.id.clone(),
                    status,
                });
            }
        }
        sources.sort();
        sources.dedup();
        let any = |s: CriterionStatus| sources.iter().any(|x| x.status == s);
        let (failed, passed, inconclusive) = (
            any(CriterionStatus::Failed),
            any(CriterionStatus::Passed),
            any(CriterionStatus::Inconclusive),
        );
        let status = if failed {
            CriterionStatus::Failed
        } else if inconclusive {
            CriterionStatus::Inconclusive
        } else if passed {
            CriterionStatus::Passed
        } else {
            CriterionStatus::NotTested
        };
        if required {
            let id = c.id.as_str();
            let list = |want: CriterionStatus| -> String {
                let v: Vec<&str> = sources
                    .iter()
                    .filter(|x| x.status == want)
                    .map(|x| x.reference.as_str())
                    .collect();
                v.join(", ")
            };
            match status {
                CriterionStatus::Failed => {
                    reasons.add(
                        fixed(ReasonCode::CriterionFailed).criterion(&c.id),
                        format!(
                            "criterion {id:?} failed ({})",
                            list(CriterionStatus::Failed)
                        ),
                    );
                    if passed {
                        reasons.add(
                            reason(ReasonCode::Contradiction, p.on_contradiction).criterion(&c.id),
                            format!(
                                "criterion {id:?}: {} said passed, {} said failed",
                                list(CriterionStatus::Passed),
                                list(CriterionStatus::Failed)
                            ),
                        );
                    }
                }
                CriterionStatus::Inconclusive => reasons.add(
                    reason(ReasonCode::CriterionInconclusive, p.on_inconclusive).criterion(&c.id),
                    format!(
                        "criterion {id:?} is inconclusive ({})",
                        list(CriterionStatus::Inconclusive)
                    ),
                ),
                CriterionStatus::NotTested => reasons.add(
                    fixed(ReasonCode::CriterionNotTested).criterion(&c.id),
                    format!("no counted source tested criterion {id:?}"),
                ),
                CriterionStatus::Passed => {}
            }
            for (r, has) in &required_results {
                if !has.get(k).copied().unwrap_or(false) {
                    reasons.add(
                        fixed(ReasonCode::CriterionRowMissing).criterion(&c.id),
                        format!(
                            "verification {:?} of required class {:?} has no row for criterion {id:?}",
                            r.id.as_str(),
                            r.verifier.class.as_str()
                        ),
                    );
                }
            }
        }
        out.push(CriterionDecision {
            id: c.id.clone(),
            required,
            status,
            sources,
        });
    }
    out
}
