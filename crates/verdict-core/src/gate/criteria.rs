//! Criterion status (CONTRACTS.md §6.3): every counted source of a criterion, combined without
//! voting. A failure from any source stands; a pass needs every source to agree or be silent.

use super::count::CountedEvidence;
use super::load::Loaded;
use super::reasons::{Reasons, fixed, reason};
use super::tables::Tables;
use crate::contracts::{
    CheckOutcome, CriterionDecision, CriterionStatus, Id, ReasonCode, Source, SourceKind,
    VerificationResult,
};

/// Everything the criterion rules read.
pub(crate) struct Inputs<'a> {
    pub loaded: &'a Loaded,
    pub tables: &'a Tables,
    pub evidence: &'a CountedEvidence<'a>,
    /// Per criterion position: whether it is required under this policy.
    pub required: &'a [bool],
    /// Counted results of a required verifier class, with their positions in the bundle.
    pub required_results: &'a [(usize, &'a VerificationResult)],
    /// Per verification position: the result, if it counts.
    pub counted: &'a [Option<&'a VerificationResult>],
    /// Per verification position: whether it is one of `required_results`.
    pub required_flags: &'a [bool],
    /// Per verification position: whether its context left something out.
    pub incomplete_context: &'a [bool],
}

/// Derives each criterion's status, in the subject's order, adding the criterion reasons.
///
/// Sources come out sorted without comparing strings: check sources sort before verification
/// sources, and within a kind by the item's id rank (ids are unique per kind: validated).
pub(crate) fn criteria(i: &Inputs<'_>, reasons: &mut Reasons) -> Vec<CriterionDecision> {
    let l = i.loaded;
    let t = i.tables;
    let p = &l.policy;
    let mut checks: Vec<(usize, CriterionStatus, &Id)> = Vec::new();
    let mut out = Vec::with_capacity(l.subject.criteria.items.len());
    for (k, c) in l.subject.criteria.items.iter().enumerate() {
        let required = i.required.get(k).copied().unwrap_or(false);
        checks.clear();
        for pin in t.pins_of.get(k).into_iter().flatten() {
            for (at, e) in i.evidence.get(*pin).into_iter().flatten() {
                let status = match e.outcome {
                    CheckOutcome::Pass => CriterionStatus::Passed,
                    CheckOutcome::Fail => CriterionStatus::Failed,
                    CheckOutcome::Error => continue, // proves nothing
                };
                let rank = t.evidence_rank.get(*at).copied().unwrap_or(usize::MAX);
                checks.push((rank, status, &e.id));
            }
        }
        if checks.len() > 1 {
            checks.sort_unstable_by_key(|(rank, status, _)| (*rank, *status));
            checks.dedup_by_key(|(rank, status, _)| (*rank, *status));
        }
        let mut sources = Vec::with_capacity(checks.len() + t.rows_of(k).len());
        sources.extend(checks.iter().map(|(_, status, id)| Source {
            kind: SourceKind::Check,
            reference: (*id).clone(),
            status: *status,
        }));
        let mut required_rows = 0;
        for rr in t.rows_of(k) {
            let (Some(Some(r)), Some(incomplete)) = (
                i.counted.get(rr.at).copied(),
                i.incomplete_context.get(rr.at).copied(),
            ) else {
                continue; // a result that does not count
            };
            if i.required_flags.get(rr.at).copied().unwrap_or(false) {
                required_rows += 1;
            }
            {
                let mut status = rr.status;
                if status == CriterionStatus::NotTested {
                    continue;
                }
                if status == CriterionStatus::Passed {
                    if incomplete {
                        // A pass on a context that left something out is not a pass.
                        status = CriterionStatus::Inconclusive;
                    } else if p.require_evidence_refs && !rr.cites_ok {
                        status = CriterionStatus::Inconclusive;
                        if required {
                            let Some(row) = r.criteria.get(rr.row) else {
                                continue;
                            };
                            let foreign: Vec<&str> = row
                                .evidence_refs
                                .iter()
                                .map(String::as_str)
                                .filter(|x| !t.refs.contains(*x))
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
            // Every required result with a row for this criterion was seen above.
            let all_have_rows = required_rows == i.required_results.len();
            for (at, r) in i.required_results.iter().filter(|_| !all_have_rows) {
                let has = t
                    .row_of
                    .get(*at)
                    .and_then(|rows| rows.get(k))
                    .is_some_and(Option::is_some);
                if !has {
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
