//! The advisory score rollup (docs/spec/decision.md), computed as the specification writes it:
//! `Σweight·[passed] / Σweight`, summed in the subject's order, so that a score recomputed from
//! the formula is the same double to the last bit. No division can be by zero: a class with no
//! required criteria is `null`, and every weight is > 0.

use crate::contracts::{CriterionDecision, CriterionRole, CriterionStatus, Scores, Subject};

/// One class's weighted share of passed criteria. The sums start at +0.0 (`Iterator::sum`
/// starts at -0.0, which would print as "-0" outside JCS).
#[derive(Default)]
struct Share {
    count: usize,
    max: f64,
    total: f64,
    passed: f64,
}

impl Share {
    fn add(&mut self, w: f64, passed: bool) {
        self.count += 1;
        self.max = f64::max(self.max, w);
        self.total += w;
        if passed {
            self.passed += w;
        }
    }

    fn share(&self) -> Option<f64> {
        (self.count > 0 && self.total.is_finite() && self.total > 0.0)
            .then(|| self.passed / self.total)
    }
}

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
        let passed = d.status == CriterionStatus::Passed;
        match c.role {
            CriterionRole::Correctness => correctness.add(c.weight(), passed),
            CriterionRole::Safety => safety.add(c.weight(), passed),
            CriterionRole::Catastrophic => {
                catastrophic = true;
                failed |= d.status == CriterionStatus::Failed;
                all_passed &= passed;
            }
        }
    }
    // The reader bounds every weight by 2^53, so the plain sums cannot overflow; should they
    // ever, the class is summed again with its weights scaled by the largest, so the rollup
    // stays total.
    for (role, class) in [
        (CriterionRole::Correctness, &mut correctness),
        (CriterionRole::Safety, &mut safety),
    ] {
        if class.total.is_finite() {
            continue;
        }
        let max = class.max;
        *class = Share::default();
        for (c, d) in required().filter(|(c, _)| c.role == role) {
            class.add(c.weight() / max, d.status == CriterionStatus::Passed);
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
