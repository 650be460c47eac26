//! The advisory score rollup (CONTRACTS.md §6.4). No division can be by zero: a class with no
//! required criteria is `null`, and weights are scaled by the class's largest weight first, so
//! the denominator is at least 1 and no sum can overflow.

use crate::contracts::{CriterionDecision, CriterionRole, CriterionStatus, Scores, Subject};

/// One class's weighted share of passed criteria, summed in the subject's order.
#[derive(Default)]
struct Share {
    count: usize,
    max: f64,
    total: f64,
    passed: f64,
}

impl Share {
    fn share(&self) -> Option<f64> {
        (self.count > 0 && self.max.is_finite() && self.max > 0.0).then(|| self.passed / self.total)
    }
}

/// Two passes over the required criteria: the largest weight of each class, then the sums
/// (from +0.0: `sum` starts at -0.0, which would print as "-0" outside JCS).
pub(crate) fn scores(subject: &Subject, decided: &[CriterionDecision]) -> Scores {
    let required = || {
        subject
            .criteria
            .items
            .iter()
            .zip(decided)
            .filter(|(_, d)| d.required)
    };
    let (mut correctness, mut safety) = (Share::default(), Share::default());
    let (mut catastrophic, mut failed, mut all_passed) = (false, false, true);
    for (c, d) in required() {
        let class = match c.role {
            CriterionRole::Correctness => &mut correctness,
            CriterionRole::Safety => &mut safety,
            CriterionRole::Catastrophic => {
                catastrophic = true;
                failed |= d.status == CriterionStatus::Failed;
                all_passed &= d.status == CriterionStatus::Passed;
                continue;
            }
        };
        class.count += 1;
        class.max = f64::max(class.max, c.weight());
    }
    for (c, d) in required() {
        let class = match c.role {
            CriterionRole::Correctness => &mut correctness,
            CriterionRole::Safety => &mut safety,
            CriterionRole::Catastrophic => continue,
        };
        let w = c.weight() / class.max;
        class.total += w;
        if d.status == CriterionStatus::Passed {
            class.passed += w;
        }
    }
    let cat_v = if !catastrophic {
        None
    } else if failed {
        Some(0.0)
    } else if all_passed {
        Some(1.0)
    } else {
        None
    };
    Scores {
        c: correctness.share(),
        rec_v: safety.share(),
        cat_v,
    }
}
