//! Human decisions (docs/spec/gate.md, "Human decisions"): a decision counts only when it binds this exact
//! subject and policy and was not made by the producer. A rejection is rework; an approval can
//! only clear `human_required` reasons, and, when it names the ones the person reviewed, only
//! those.

use super::count::{FUTURE_TOLERANCE_S, is_from_future};
use super::load::Loaded;
use super::reasons::{Reasons, fixed};
use crate::contracts::{ClearedReason, HumanVerdict, ReasonCode};
use std::collections::BTreeSet;

/// What the counted approvals clear.
#[derive(Debug, Default)]
pub(crate) enum Approval {
    /// No counted approval.
    #[default]
    None,
    /// Exactly the `human_required` reasons these entries name (every counted approval names
    /// what it clears; their entries together).
    Named(BTreeSet<ClearedReason>),
    /// Every `human_required` reason: a counted approval names nothing, as approvals written
    /// before `clears` existed do.
    All,
}

impl Approval {
    fn add(&mut self, clears: Option<&[ClearedReason]>) {
        match (std::mem::take(self), clears) {
            (Self::All, _) | (_, None) => *self = Self::All,
            (Self::None, Some(c)) => *self = Self::Named(c.iter().cloned().collect()),
            (Self::Named(mut named), Some(c)) => {
                named.extend(c.iter().cloned());
                *self = Self::Named(named);
            }
        }
    }
}

/// Adds the human reasons; returns what the counted approvals binding this subject and policy
/// clear.
pub(crate) fn human(l: &Loaded, reasons: &mut Reasons) -> Approval {
    let mut approved = Approval::None;
    for item in &l.human_decisions {
        let h = &item.doc;
        if h.subject_digest != l.subject_digest || h.policy_digest != l.policy_digest {
            continue; // binds another subject or policy
        }
        let id = h.id.as_str();
        if h.principal == l.subject.producer.principal {
            reasons.add(
                fixed(ReasonCode::SelfVerificationDenied),
                format!("human decision {id:?} was made by the producer's principal"),
            );
            continue;
        }
        if is_from_future(&h.decided_at, &l.now) {
            reasons.add(
                fixed(ReasonCode::EvidenceFromFuture),
                format!("human decision {id:?} decided at {} is more than {FUTURE_TOLERANCE_S} s after now", h.decided_at),
            );
            continue;
        }
        match h.decision {
            HumanVerdict::Approve => approved.add(h.clears.as_deref()),
            HumanVerdict::Reject => reasons.add(
                fixed(ReasonCode::HumanRejected),
                format!(
                    "human decision {id:?} by {:?} rejected this subject under this policy",
                    h.principal.as_str()
                ),
            ),
        }
    }
    let stated = l.subject.risk.class;
    let effective = l.policy.effective_risk_class(stated);
    if let Some((class, _)) = l.policy.risk_requirements(stated).find(|(_, r)| r.human) {
        let of = if *class == effective {
            String::new()
        } else {
            format!(" (as class {} does)", class.as_str())
        };
        // Without a floor above the stated class the detail is what it has always been, so
        // stored decisions replay byte for byte.
        let raised = if effective == stated {
            String::new()
        } else {
            format!(
                " raised to {} by the policy's risk_floor",
                effective.as_str()
            )
        };
        reasons.add(
            fixed(ReasonCode::HumanReviewRequired),
            format!(
                "risk class {}{raised}{of} requires a human approval bound to this subject and policy",
                stated.as_str()
            ),
        );
    }
    approved
}
