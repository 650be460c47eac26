//! The decision's canonical (RFC 8785) bytes, written straight from the typed decision.
//!
//! The bytes are exactly those of `canonical::to_vec(serde_json::to_value(decision))`: members
//! in UTF-16 key order (all keys here are ASCII, so byte order), absent options skipped where the
//! type skips them and `null` elsewhere, numbers as the canonical writer prints them. Writing
//! them directly spares building and dropping a JSON tree as large as the decision.

use crate::canonical::{write_f64, write_str, write_u64};
use crate::contracts::{
    CriterionDecision, FindingRef, GateDecision, Reason, Scores, Source, SourceKind,
};
use crate::digest::Digest;

/// Appends the canonical bytes of `d`.
pub(crate) fn write_decision(d: &GateDecision, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"criteria\":[");
    for (i, c) in d.criteria.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_criterion(c, out);
    }
    out.extend_from_slice(b"],\"evaluation_key\":");
    write_digest(d.evaluation_key.as_ref(), out);
    out.extend_from_slice(b",\"evidence_set_digest\":");
    write_digest(d.evidence_set_digest.as_ref(), out);
    out.extend_from_slice(b",\"follow_ups\":");
    write_findings(&d.follow_ups, out);
    out.extend_from_slice(b",\"outcome\":");
    write_str(d.outcome.as_str(), out);
    out.extend_from_slice(b",\"policy_digest\":");
    write_digest(d.policy_digest.as_ref(), out);
    out.extend_from_slice(b",\"reasons\":[");
    for (i, r) in d.reasons.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_reason(r, out);
    }
    out.extend_from_slice(b"],\"rework\":");
    write_findings(&d.rework, out);
    out.extend_from_slice(b",\"schema\":\"verdict.gate-decision/v1\",\"scores\":");
    write_scores(&d.scores, out);
    out.extend_from_slice(b",\"subject_digest\":");
    write_digest(d.subject_digest.as_ref(), out);
    out.extend_from_slice(b",\"unresolved_prior_blockers\":");
    write_findings(&d.unresolved_prior_blockers, out);
    if let Some(t) = &d.valid_until {
        out.extend_from_slice(b",\"valid_until\":");
        write_str(t.as_str(), out);
    }
    out.push(b'}');
}

fn write_digest(d: Option<&Digest>, out: &mut Vec<u8>) {
    match d {
        Some(d) => write_str(d.as_str(), out),
        None => out.extend_from_slice(b"null"),
    }
}

fn write_criterion(c: &CriterionDecision, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"id\":");
    write_str(c.id.as_str(), out);
    out.extend_from_slice(if c.required {
        b",\"required\":true,\"sources\":["
    } else {
        b",\"required\":false,\"sources\":["
    });
    for (i, s) in c.sources.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_source(s, out);
    }
    out.extend_from_slice(b"],\"status\":");
    write_str(c.status.as_str(), out);
    out.push(b'}');
}

fn write_source(s: &Source, out: &mut Vec<u8>) {
    out.extend_from_slice(match s.kind {
        SourceKind::Check => b"{\"kind\":\"check\",\"ref\":",
        SourceKind::Verification => b"{\"kind\":\"verification\",\"ref\":",
    });
    write_str(s.reference.as_str(), out);
    out.extend_from_slice(b",\"status\":");
    write_str(s.status.as_str(), out);
    out.push(b'}');
}

fn write_reason(r: &Reason, out: &mut Vec<u8>) {
    out.push(b'{');
    if let Some(check) = &r.check {
        out.extend_from_slice(b"\"check\":");
        write_str(check.as_str(), out);
        out.push(b',');
    }
    out.extend_from_slice(b"\"code\":");
    write_str(r.code.as_str(), out);
    if let Some(criterion) = &r.criterion {
        out.extend_from_slice(b",\"criterion\":");
        write_str(criterion.as_str(), out);
    }
    out.extend_from_slice(b",\"detail\":");
    write_str(&r.detail, out);
    if let Some(finding) = &r.finding {
        out.extend_from_slice(b",\"finding\":");
        write_str(finding.as_str(), out);
    }
    out.extend_from_slice(b",\"outcome\":");
    write_str(r.outcome.as_str(), out);
    out.push(b'}');
}

fn write_findings(list: &[FindingRef], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, f) in list.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"criterion\":");
        write_str(f.criterion.as_str(), out);
        out.extend_from_slice(b",\"id\":");
        write_str(f.id.as_str(), out);
        out.extend_from_slice(b",\"version\":");
        write_u64(f.version, out);
        out.push(b'}');
    }
    out.push(b']');
}

fn write_score(s: Option<f64>, out: &mut Vec<u8>) {
    // serde_json turns a double that is not finite into `null`.
    match s.filter(|f| f.is_finite()) {
        Some(f) => write_f64(f, out),
        None => out.extend_from_slice(b"null"),
    }
}

fn write_scores(s: &Scores, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"c\":");
    write_score(s.c, out);
    out.extend_from_slice(b",\"cat_v\":");
    write_score(s.cat_v, out);
    out.extend_from_slice(b",\"rec_v\":");
    write_score(s.rec_v, out);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical;
    use crate::contracts::{CriterionStatus, DecisionSchema, Outcome, ReasonCode, Sources};
    use crate::digest::{DigestKind, raw};

    fn generic(d: &GateDecision) -> Vec<u8> {
        canonical::to_vec(&serde_json::to_value(d).unwrap())
    }

    fn finding(id: &str, version: u64) -> FindingRef {
        FindingRef {
            id: id.parse().unwrap(),
            version,
            criterion: "c-1".parse().unwrap(),
        }
    }

    #[test]
    fn writes_what_the_generic_canonical_form_writes() {
        let full = GateDecision {
            schema: DecisionSchema::V1,
            outcome: Outcome::Rework,
            evaluation_key: Some(raw(b"key")),
            subject_digest: Some(raw(b"subject")),
            policy_digest: Some(raw(b"policy")),
            evidence_set_digest: Some(raw(b"set")),
            criteria: vec![
                CriterionDecision {
                    id: "c-1".parse().unwrap(),
                    required: true,
                    status: CriterionStatus::Failed,
                    sources: vec![
                        Source {
                            kind: SourceKind::Check,
                            reference: "ev-1".parse().unwrap(),
                            status: CriterionStatus::Failed,
                        },
                        Source {
                            kind: SourceKind::Verification,
                            reference: "a-verification-id-longer-than-sixteen-bytes"
                                .parse()
                                .unwrap(),
                            status: CriterionStatus::Inconclusive,
                        },
                    ]
                    .into(),
                },
                CriterionDecision {
                    id: "c-2".parse().unwrap(),
                    required: false,
                    status: CriterionStatus::NotTested,
                    sources: Sources::default(),
                },
            ],
            reasons: vec![
                Reason {
                    code: ReasonCode::CheckFailed,
                    outcome: Outcome::Rework,
                    criterion: Some("c-1".parse().unwrap()),
                    check: Some("unit".parse().unwrap()),
                    finding: Some("f-1".parse().unwrap()),
                    detail: "quote \" backslash \\ newline \n control \u{1} é \u{1f600}".into(),
                },
                Reason {
                    code: ReasonCode::HumanReviewRequired,
                    outcome: Outcome::HumanRequired,
                    criterion: None,
                    check: None,
                    finding: None,
                    detail: String::new(),
                },
            ],
            rework: vec![finding("f-1", 1)],
            follow_ups: vec![finding("f-2", (1 << 53) + 2), finding("f-3", u64::MAX)],
            unresolved_prior_blockers: vec![finding("f-4", 0)],
            scores: Scores {
                c: Some(2.0 / 3.0),
                rec_v: Some(1.0),
                cat_v: Some(-0.0),
            },
            valid_until: Some("2026-11-30T12:15:00.5Z".parse().unwrap()),
        };
        assert_eq!(full.canonical_bytes().unwrap(), generic(&full));

        let bare = GateDecision {
            outcome: Outcome::Blocked,
            evaluation_key: None,
            subject_digest: None,
            policy_digest: None,
            evidence_set_digest: None,
            criteria: Vec::new(),
            reasons: Vec::new(),
            rework: Vec::new(),
            follow_ups: Vec::new(),
            unresolved_prior_blockers: Vec::new(),
            scores: Scores {
                c: None,
                rec_v: Some(f64::NAN),
                cat_v: Some(f64::INFINITY),
            },
            valid_until: None,
            ..full.clone()
        };
        assert_eq!(bare.canonical_bytes().unwrap(), generic(&bare));
        assert_eq!(
            full.digest().unwrap(),
            crate::digest::digest(DigestKind::Decision, &serde_json::to_value(&full).unwrap())
        );
    }
}
