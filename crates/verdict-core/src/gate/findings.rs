//! Findings and re-verification (docs/spec/evidence.md, docs/spec/gate.md): change-scoped blockers on required
//! criteria are rework; every other finding is a follow-up that never changes the outcome;
//! every prior blocker must be addressed by a counted result, and the strictest counted
//! disposition of it stands.

use super::count::Verifications;
use super::load::Loaded;
use super::reasons::{Reasons, fixed};
use super::tables::{Citable, Tables};
use crate::contracts::{
    Disposition, DispositionKind, Finding, FindingRef, Id, ReasonCode, Scope, Severity,
};
use std::collections::{BTreeMap, BTreeSet};

/// The decision's three finding lists.
#[derive(Default)]
pub(crate) struct Lists {
    pub rework: BTreeSet<FindingRef>,
    pub follow_ups: BTreeSet<FindingRef>,
    pub unresolved: BTreeSet<FindingRef>,
}

fn finding_ref(f: &Finding) -> FindingRef {
    FindingRef {
        id: f.id.clone(),
        version: f.version,
        criterion: f.criterion.clone(),
    }
}

/// How strict a disposition is; the strictest counted one stands.
fn strictness(d: DispositionKind) -> u8 {
    match d {
        DispositionKind::StillPresent => 2,
        DispositionKind::HumanRequired => 1,
        DispositionKind::Resolved | DispositionKind::SupersededBySubjectChange => 0,
    }
}

/// Whether a disposition counts: `resolved` needs refs that all exist in the bundle, at least
/// one of them something other than the finding it disposes of (a finding cited as proof that
/// it is gone proves nothing), `superseded_by_subject_change` needs a reason.
fn counts(d: &Disposition, refs: &Citable) -> bool {
    match d.disposition {
        DispositionKind::Resolved => {
            d.evidence_refs
                .iter()
                .any(|r| r.as_str() != d.finding.as_str())
                && d.evidence_refs.iter().all(|r| refs.contains(r.as_str()))
        }
        DispositionKind::SupersededBySubjectChange => {
            d.reason.as_deref().is_some_and(|r| !r.trim().is_empty())
        }
        DispositionKind::StillPresent | DispositionKind::HumanRequired => true,
    }
}

pub(crate) fn findings(
    l: &Loaded,
    t: &Tables,
    v: &Verifications<'_>,
    required: &[bool],
    reasons: &mut Reasons,
) -> Lists {
    let refs = &t.refs;
    let mut lists = Lists::default();
    for (_, r) in &v.counted {
        for f in &r.findings {
            let fr = finding_ref(f);
            if f.scope == Scope::Change
                && f.severity == Severity::Blocker
                && t.index
                    .get(&f.criterion)
                    .and_then(|k| required.get(k))
                    .copied()
                    .unwrap_or(false)
            {
                reasons.add(
                    fixed(ReasonCode::BlockingFinding).criterion(&f.criterion).finding(&f.id),
                    format!(
                        "verification {:?} found change-scoped blocker {:?} version {} on criterion {:?}",
                        r.id.as_str(),
                        f.id.as_str(),
                        f.version,
                        f.criterion.as_str()
                    ),
                );
                lists.rework.insert(fr);
            } else {
                lists.follow_ups.insert(fr);
            }
        }
    }

    let mut standing: BTreeMap<(&Id, u64), DispositionKind> = BTreeMap::new();
    for (_, r) in &v.counted {
        for d in r.dispositions.iter().filter(|d| counts(d, refs)) {
            let e = standing
                .entry((&d.finding, d.version))
                .or_insert(d.disposition);
            if strictness(d.disposition) > strictness(*e) {
                *e = d.disposition;
            }
        }
    }
    for p in &l.prior_findings {
        let f = &p.doc;
        let fr = finding_ref(f);
        let (id, ver) = (f.id.as_str(), f.version);
        match standing.get(&(&f.id, f.version)) {
            None => {
                reasons.add(
                    fixed(ReasonCode::PriorBlockerUnaddressed)
                        .criterion(&f.criterion)
                        .finding(&f.id),
                    format!(
                        "prior blocker {id:?} version {ver} is not addressed by any counted result"
                    ),
                );
                lists.unresolved.insert(fr);
            }
            Some(DispositionKind::StillPresent) => {
                reasons.add(
                    fixed(ReasonCode::PriorBlockerStillPresent)
                        .criterion(&f.criterion)
                        .finding(&f.id),
                    format!("prior blocker {id:?} version {ver} is reported still present"),
                );
                lists.rework.insert(fr.clone());
                lists.unresolved.insert(fr);
            }
            Some(DispositionKind::HumanRequired) => {
                reasons.add(
                    fixed(ReasonCode::HumanReviewRequired)
                        .criterion(&f.criterion)
                        .finding(&f.id),
                    format!("a disposition of prior blocker {id:?} version {ver} requires a human"),
                );
                lists.unresolved.insert(fr);
            }
            Some(DispositionKind::Resolved | DispositionKind::SupersededBySubjectChange) => {}
        }
    }
    lists
}
