//! Criterion status (CONTRACTS.md §6.3): every counted source of a criterion, combined without
//! voting. A failure from any source stands; a pass needs every source to agree or be silent.

use super::count::Verifications;
use super::load::Loaded;
use super::reasons::{Reasons, fixed, reason};
use crate::contracts::{
    CheckEvidence, CheckOutcome, CriterionDecision, CriterionRow, CriterionStatus, Id, ReasonCode, Source, SourceKind,
    VerificationResult,
};
use std::collections::{BTreeMap, BTreeSet};

/// Everything the criterion rules read.
pub(crate) struct Inputs<'a> {
    pub loaded: &'a Loaded,
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
    // Index once, so the work is linear in the bundle rather than criteria x rows.
    let mut pins: BTreeMap<&Id, Vec<&Id>> = BTreeMap::new();
    for pin in &l.subject.checks {
        for c in &pin.criteria {
            pins.entry(c).or_default().push(&pin.id);
        }
    }
    let mut rows: BTreeMap<&Id, Vec<(&VerificationResult, &CriterionRow)>> = BTreeMap::new();
    for r in &i.verifications.counted {
        for row in &r.criteria {
            rows.entry(&row.id).or_default().push((r, row));
        }
    }
    let required_results: Vec<(&VerificationResult, BTreeSet<&Id>)> = i
        .verifications
        .counted
        .iter()
        .filter(|r| i.required_classes.contains(&r.verifier.class))
        .map(|r| (*r, r.criteria.iter().map(|row| &row.id).collect()))
        .collect();
    let mut out = Vec::with_capacity(l.subject.criteria.items.len());
    for c in &l.subject.criteria.items {
        let required = i.required.contains(&c.id);
        let mut sources = Vec::new();
        for pin in pins.get(&c.id).into_iter().flatten() {
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
        for (r, row) in rows.get(&c.id).into_iter().flatten() {
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
                        && (row.evidence_refs.is_empty() || row.evidence_refs.iter().any(|x| !i.refs.contains(x.as_str())))
                    {
                        status = CriterionStatus::Inconclusive;
                        if required {
                            let foreign: Vec<&str> =
                                row.evidence_refs.iter().map(String::as_str).filter(|x| !i.refs.contains(x)).collect();
                            let why = if row.evidence_refs.is_empty() {
                                "cites no ref".to_owned()
                            } else {
                                format!("cites refs not in the bundle: {foreign:?}")
                            };
                            reasons.add(
                                reason(ReasonCode::UnsupportedPass, p.on_inconclusive).criterion(&c.id),
                                format!("verification {:?} passed {:?} but {why}", r.id.as_str(), c.id.as_str()),
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
        let (failed, passed, inconclusive) =
            (any(CriterionStatus::Failed), any(CriterionStatus::Passed), any(CriterionStatus::Inconclusive));
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
                let v: Vec<&str> = sources.iter().filter(|x| x.status == want).map(|x| x.reference.as_str()).collect();
                v.join(", ")
            };
            match status {
                CriterionStatus::Failed => {
                    reasons.add(
                        fixed(ReasonCode::CriterionFailed).criterion(&c.id),
                        format!("criterion {id:?} failed ({})", list(CriterionStatus::Failed)),
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
                    format!("criterion {id:?} is inconclusive ({})", list(CriterionStatus::Inconclusive)),
                ),
                CriterionStatus::NotTested => reasons.add(
                    fixed(ReasonCode::CriterionNotTested).criterion(&c.id),
                    format!("no counted source tested criterion {id:?}"),
                ),
                CriterionStatus::Passed => {}
            }
            for (r, has) in &required_results {
                if !has.contains(&c.id) {
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
