//! Combining k-of-n samples without voting.
//!
//! A criterion on which every valid sample agrees keeps that status (and the union of the refs
//! cited). Any disagreement makes it `inconclusive`: a majority is not evidence. Findings are
//! the union of all samples' findings (a problem one sample saw is worth a look; identical
//! findings share an id and appear once). A prior blocker on whose disposition the samples
//! disagree is `human_required`.

use crate::reply::ValidReply;
use verdict_core::contracts::{
    CriterionRow, CriterionStatus, Disposition, DispositionKind, Finding,
};

/// The combined result of the valid samples.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Combined {
    pub rows: Vec<CriterionRow>,
    pub findings: Vec<Finding>,
    pub dispositions: Vec<Disposition>,
    /// One line per disagreement, for the run record.
    pub disagreements: Vec<String>,
}

fn union(into: &mut Vec<String>, refs: &[String]) {
    for r in refs {
        if !into.contains(r) {
            into.push(r.clone());
        }
    }
}

/// Combines samples that all answered the same manifest (same rows and priors, same order).
pub(crate) fn combine(samples: &[ValidReply]) -> Combined {
    let Some((first, rest)) = samples.split_first() else {
        return Combined {
            rows: Vec::new(),
            findings: Vec::new(),
            dispositions: Vec::new(),
            disagreements: Vec::new(),
        };
    };
    let mut disagreements = Vec::new();
    // Every valid reply has its rows in the asked order and its dispositions in the manifest's
    // order, so samples line up index by index.
    let mut rows = first.rows.clone();
    for (i, row) in rows.iter_mut().enumerate() {
        let others: Vec<&CriterionRow> = rest.iter().filter_map(|s| s.rows.get(i)).collect();
        if others.iter().any(|o| o.status != row.status) {
            disagreements.push(format!("criterion {:?}: samples disagree", row.id.as_str()));
            row.status = CriterionStatus::Inconclusive;
        }
        for o in others {
            union(&mut row.evidence_refs, &o.evidence_refs);
        }
    }
    let mut findings: Vec<Finding> = Vec::new();
    for f in samples.iter().flat_map(|s| &s.findings) {
        if !findings.iter().any(|x| x.id == f.id) {
            findings.push(f.clone());
        }
    }
    let mut dispositions = first.dispositions.clone();
    for (i, d) in dispositions.iter_mut().enumerate() {
        let others: Vec<&Disposition> = rest.iter().filter_map(|s| s.dispositions.get(i)).collect();
        if others.iter().any(|o| o.disposition != d.disposition) {
            disagreements.push(format!(
                "prior finding {:?}: samples disagree",
                d.finding.as_str()
            ));
            d.disposition = DispositionKind::HumanRequired;
            d.reason = Some("verifier samples disagree on this finding".into());
        }
        for o in others {
            union(&mut d.evidence_refs, &o.evidence_refs);
        }
    }
    Combined {
        rows,
        findings,
        dispositions,
        disagreements,
    }
}
