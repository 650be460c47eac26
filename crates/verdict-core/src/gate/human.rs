//! Human decisions (docs/spec/gate.md, "Human decisions"): a decision counts only when it binds this exact
//! subject and policy and was not made by the producer. A rejection is rework; an approval can
//! only clear `human_required` reasons.

use super::count::{FUTURE_TOLERANCE_S, is_from_future};
use super::load::Loaded;
use super::reasons::{Reasons, fixed};
use crate::contracts::{HumanVerdict, ReasonCode};

/// Adds the human reasons; returns whether a counted approval binds this subject and policy.
pub(crate) fn human(l: &Loaded, reasons: &mut Reasons) -> bool {
    let mut approved = false;
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
            HumanVerdict::Approve => approved = true,
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
