//! Criterion status (docs/spec/gate.md): every counted source of a criterion, combined without
//! voting. A failure from any source stands; a pass needs every source to agree or be silent.

use super::count::CountedEvidence;
use super::load::Loaded;
use super::reasons::{Reasons, fixed, reason};
use super::tables::{RowRef, Tables};
use crate::contracts::{
    CheckOutcome, Criterion, CriterionDecision, CriterionStatus, Id, Policy, ReasonCode, Source,
    SourceKind, Sources, VerificationResult,
};
use std::sync::Arc;

/// How the decision uses one verification result.
#[derive(Clone, Copy, Default)]
pub(crate) struct ResultUse {
    /// It counts for this subject.
    pub counts: bool,
    /// It counts and is of a required verifier class.
    pub required: bool,
}

/// Everything the criterion rules read.
pub(crate) struct Inputs<'a> {
    pub loaded: &'a Loaded,
    pub tables: &'a Tables,
    pub evidence: &'a CountedEvidence<'a>,
    /// Per criterion position: whether it is required under this policy.
    pub required: &'a [bool],
    /// Counted results of a required verifier class, with their positions in the bundle.
    pub required_results: &'a [(usize, &'a VerificationResult)],
    /// Per verification position: how it is used.
    pub results: &'a [ResultUse],
}

/// Derives each criterion's status, in the subject's order, adding the criterion reasons.
///
/// Sources come out sorted without comparing strings: check sources sort before verification
/// sources, and within a kind by the item's id rank (ids are unique per kind: validated). All
/// criteria's sources go into one list, which the criteria then share.
pub(crate) fn criteria(i: &Inputs<'_>, reasons: &mut Reasons) -> Vec<CriterionDecision> {
    let l = i.loaded;
    let t = i.tables;
    let p = &l.policy;
    let items = &l.subject.criteria.items;
    // One criterion's check sources: (id rank, status, id).
    let mut checks: Vec<(usize, CriterionStatus, &Id)> = Vec::new();
    // One criterion's verification sources: (id, status).
    let mut verified: Vec<(&Id, CriterionStatus)> = Vec::new();
    // Per verification position, what the row loop below reads of it, in one place.
    let views: Vec<View<'_>> = t
        .verification_ref
        .iter()
        .zip(&t.incomplete_context)
        .enumerate()
        .map(|(at, (reference, incomplete))| {
            let use_ = i.results.get(at).copied().unwrap_or_default();
            View {
                reference,
                counts: use_.counts,
                required: use_.required,
                incomplete: *incomplete,
            }
        })
        .collect();
    let require_refs = p.require_evidence_refs;
    // Every criterion's sources, criterion after criterion; the capacity is enough for all.
    let mut all: Vec<Source> = Vec::with_capacity(t.check_sources_at_most + t.row_count());
    // Per criterion: whether it is required, its status and where its sources end in `all`.
    let mut decided: Vec<(bool, CriterionStatus, usize)> = Vec::with_capacity(items.len());
    for (k, c) in items.iter().enumerate() {
        let required = i.required.get(k).copied().unwrap_or(false);
        let start = all.len();
        checks.clear();
        for pin in t.pins_of.get(k).into_iter().flatten() {
            for (at, e) in i.evidence.of_pin(*pin) {
                let status = match e.outcome {
                    CheckOutcome::Pass => CriterionStatus::Passed,
                    CheckOutcome::Fail => CriterionStatus::Failed,
                    CheckOutcome::Error => continue, // proves nothing
                };
                let (Some(rank), Some(reference)) =
                    (t.evidence_rank.get(at), t.evidence_ref.get(at))
                else {
                    continue;
                };
                checks.push((*rank, status, reference));
            }
        }
        if checks.len() > 1 {
            checks.sort_unstable_by_key(|(rank, status, _)| (*rank, *status));
            checks.dedup_by_key(|(rank, status, _)| (*rank, *status));
        }
        verified.clear();
        let mut required_rows = 0;
        for rr in t.rows_of(k) {
            let Some(v) = views.get(rr.at).filter(|v| v.counts) else {
                continue; // a result that does not count
            };
            required_rows += usize::from(v.required);
            let status = match rr.status {
                CriterionStatus::NotTested => continue,
                // Checked before the context: an incomplete context does not excuse a pass
                // that cites nothing (the specification adds `unsupported_pass` for every such row).
                CriterionStatus::Passed if require_refs && !rr.cites_ok => {
                    if required && !unsupported_pass(l, t, c, rr, reasons) {
                        continue;
                    }
                    CriterionStatus::Inconclusive
                }
                // A pass on a context that left something out is not a pass.
                CriterionStatus::Passed if v.incomplete => CriterionStatus::Inconclusive,
                s => s,
            };
            verified.push((v.reference, status));
        }
        // Written by `extend` over slices, which writes each source straight into place:
        // pushed one by one, each was first assembled on the stack, and reading it back from
        // there stalled on the narrower stores it was assembled from.
        all.extend(checks.iter().map(|(_, status, reference)| Source {
            kind: SourceKind::Check,
            reference: (*reference).clone(),
            status: *status,
        }));
        all.extend(verified.iter().map(|(reference, status)| Source {
            kind: SourceKind::Verification,
            reference: (*reference).clone(),
            status: *status,
        }));
        let sources = all.get(start..).unwrap_or_default();
        let (mut failed, mut passed, mut inconclusive) = (false, false, false);
        for x in sources {
            failed |= x.status == CriterionStatus::Failed;
            passed |= x.status == CriterionStatus::Passed;
            inconclusive |= x.status == CriterionStatus::Inconclusive;
        }
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
            required_reasons(p, c, status, passed, sources, reasons);
            // Every required result with a row for this criterion was seen above.
            if required_rows != i.required_results.len() {
                missing_rows(i, k, c, reasons);
            }
        }
        decided.push((required, status, all.len()));
    }

    let all = Arc::new(all);
    let mut start = 0;
    items
        .iter()
        .zip(decided)
        .enumerate()
        .map(|(k, (c, (required, status, end)))| {
            let sources = Sources::part_of(&all, start..end);
            start = end;
            CriterionDecision {
                id: t
                    .criterion_id
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| c.id.clone()),
                required,
                status,
                sources,
            }
        })
        .collect()
}

/// A verification result as the criterion rules read it.
struct View<'t> {
    reference: &'t Id,
    counts: bool,
    required: bool,
    incomplete: bool,
}

/// Adds the `unsupported_pass` reason of a required criterion's pass that cites no ref, or refs
/// not in the bundle; false if the row is not there (never, for a filed row).
#[cold]
fn unsupported_pass(
    l: &Loaded,
    t: &Tables,
    c: &Criterion,
    rr: &RowRef,
    reasons: &mut Reasons,
) -> bool {
    let Some(r) = l.verifications.get(rr.at).map(|v| &v.doc) else {
        return false;
    };
    let Some(row) = r.criteria.get(rr.row) else {
        return false;
    };
    let foreign: Vec<&str> = row
        .evidence_refs
        .iter()
        .map(String::as_str)
        .filter(|x| !t.refs.contains(x))
        .collect();
    let why = if row.evidence_refs.is_empty() {
        "cites no ref".to_owned()
    } else {
        format!("cites refs not in the bundle: {foreign:?}")
    };
    reasons.add(
        reason(ReasonCode::UnsupportedPass, l.policy.on_inconclusive).criterion(&c.id),
        format!(
            "verification {:?} passed {:?} but {why}",
            r.id.as_str(),
            c.id.as_str()
        ),
    );
    true
}

/// The reasons a required criterion's status gives.
fn required_reasons(
    p: &Policy,
    c: &Criterion,
    status: CriterionStatus,
    passed: bool,
    sources: &[Source],
    reasons: &mut Reasons,
) {
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
}

/// Adds `criterion_row_missing` for each required result with no row for criterion `k`.
#[cold]
fn missing_rows(i: &Inputs<'_>, k: usize, c: &Criterion, reasons: &mut Reasons) {
    let id = c.id.as_str();
    for (at, r) in i.required_results {
        let has = i
            .tables
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
