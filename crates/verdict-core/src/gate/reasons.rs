//! Collecting reasons: each condition found adds one; the set is sorted and deduplicated, so the
//! order in which conditions were found never shows in the decision.

use crate::contracts::{ClearedReason, Id, Outcome, Reason, ReasonCode};
use std::collections::BTreeSet;

/// A reason about to be added; built with the setters below.
pub(crate) struct Pending {
    code: ReasonCode,
    outcome: Outcome,
    criterion: Option<Id>,
    check: Option<Id>,
    finding: Option<Id>,
}

impl Pending {
    pub(crate) fn criterion(mut self, id: &Id) -> Self {
        self.criterion = Some(id.clone());
        self
    }
    pub(crate) fn check(mut self, id: &Id) -> Self {
        self.check = Some(id.clone());
        self
    }
    pub(crate) fn finding(mut self, id: &Id) -> Self {
        self.finding = Some(id.clone());
        self
    }
}

/// The set of reasons found so far.
#[derive(Default, Clone)]
pub(crate) struct Reasons {
    set: BTreeSet<Reason>,
}

/// Starts a reason whose outcome is fixed by its code (or, for the policy-dependent codes, given).
pub(crate) fn reason(code: ReasonCode, policy_outcome: Outcome) -> Pending {
    Pending {
        code,
        outcome: code.fixed_outcome().unwrap_or(policy_outcome),
        criterion: None,
        check: None,
        finding: None,
    }
}

/// Starts a reason with a fixed outcome (every code but the policy-dependent ones).
pub(crate) fn fixed(code: ReasonCode) -> Pending {
    reason(code, Outcome::Blocked)
}

impl Reasons {
    pub(crate) fn add(&mut self, p: Pending, detail: impl Into<String>) {
        self.set.insert(Reason {
            code: p.code,
            outcome: p.outcome,
            criterion: p.criterion,
            check: p.check,
            finding: p.finding,
            detail: detail.into(),
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &Reason> {
        self.set.iter()
    }

    /// The strongest outcome of any reason; `pass` when there is none.
    pub(crate) fn outcome(&self) -> Outcome {
        self.set
            .iter()
            .map(|r| r.outcome)
            .max()
            .unwrap_or(Outcome::Pass)
    }

    /// Drops every reason whose outcome is `human_required` (what a human approval clears).
    pub(crate) fn clear_human_required(&mut self) {
        self.set.retain(|r| r.outcome != Outcome::HumanRequired);
    }

    /// Drops the `human_required` reasons an entry of `clears` names; every other
    /// `human_required` reason stands, its detail saying that no approval covers it, so a
    /// reader sees why an approval given did not clear it.
    pub(crate) fn clear_named(&mut self, clears: &BTreeSet<ClearedReason>) {
        let set = std::mem::take(&mut self.set);
        self.set = set
            .into_iter()
            .filter(|r| r.outcome != Outcome::HumanRequired || !clears.iter().any(|c| c.names(r)))
            .map(|mut r| {
                if r.outcome == Outcome::HumanRequired {
                    r.detail
                        .push_str("; no counted human approval names this reason");
                }
                r
            })
            .collect();
    }

    /// The reasons, strongest outcome first, then by code, subject and detail.
    pub(crate) fn into_sorted(self) -> Vec<Reason> {
        let mut v: Vec<Reason> = self.set.into_iter().collect();
        v.sort_by(|a, b| b.outcome.cmp(&a.outcome).then_with(|| a.cmp(b)));
        v
    }
}
