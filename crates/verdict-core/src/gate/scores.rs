//! The advisory score rollup (CONTRACTS.md §6.4). No division can be by zero: a class with no
//! required criteria is `null`, and weights are scaled by the class's largest weight first, so
//! the denominator is at least 1 and no sum can overflow.

use crate::contracts::{CriterionDecision, CriterionRole, CriterionStatus, Scores, Subject};

fn share(items: &[(f64, bool)]) -> Option<f64> {
    let max = items.iter().map(|(w, _)| *w).fold(0.0_f64, f64::max);
    if items.is_empty() || !(max.is_finite() && max > 0.0) {
        return None;
    }
    // fold from +0.0: `sum` starts at -0.0, which would print as "-0" outside JCS.
    let total = items.iter().fold(0.0, |acc, (w, _)| acc + w / max);
    let passed = items
        .iter()
        .filter(|(_, p)| *p)
        .fold(0.0, |acc, (w, _)| acc + w / max);
    Some(passed / total)
}

pub(crate) fn scores(subject: &Subject, decided: &[CriterionDecision]) -> Scores {
    let (mut correctness, mut safety) = (Vec::new(), Vec::new());
    let mut catastrophic = Vec::new();
    for (c, d) in subject.criteria.items.iter().zip(decided) {
        if !d.required {
            continue;
        }
        let passed = d.status == CriterionStatus::Passed;
        match c.role {
            CriterionRole::Correctness => correctness.push((c.weight(), passed)),
            CriterionRole::Safety => safety.push((c.weight(), passed)),
            CriterionRole::Catastrophic => catastrophic.push(d.status),
        }
    }
    let cat_v = if catastrophic.is_empty() {
        None
    } else if catastrophic.contains(&CriterionStatus::Failed) {
        Some(0.0)
    } else if catastrophic.iter().all(|s| *s == CriterionStatus::Passed) {
        Some(1.0)
    } else {
        None
    };
    Scores {
        c: share(&correctness),
        rec_v: share(&safety),
        cat_v,
    }
}
