//! What counts (docs/spec/gate.md): which check evidence and which verification results may
//! speak about this subject, and the blocked reasons for the ones that may not.

use super::index::CriterionIndex;
use super::load::Loaded;
use super::reasons::{Reasons, fixed};
use super::tables::Tables;
use crate::contracts::{
    CheckEvidence, CheckOutcome, Freshness, Id, ReasonCode, Role, Timestamp, UnavailableReason,
    VerificationResult, VerificationStatus,
};
use std::collections::{BTreeMap, BTreeSet};

/// Evidence may be observed at most this many seconds after `now` (clock skew), and no later.
pub const FUTURE_TOLERANCE_S: u64 = 300;

const NANOS: i128 = 1_000_000_000;

/// 9999-12-31T23:59:59.999999999Z, the last instant RFC 3339 can write (its years have four
/// digits). An expiry beyond it is brought back to it, so `valid_until` is always a timestamp
/// (docs/spec/encoding.md) and staleness agrees with it; the evidence only ever expires earlier, never later.
const LAST_WRITABLE_NANOS: i128 = 253_402_300_799 * NANOS + (NANOS - 1);

/// When a piece of time-sensitive evidence goes stale: `observed_at + max_age_s`. It is stale
/// at any `now` at or after that instant, matching the exclusive `valid_until` of docs/spec/applicability.md.
pub(crate) fn expiry(e: &CheckEvidence) -> Option<Timestamp> {
    match e.freshness {
        Freshness::Content => None,
        Freshness::Time { .. } => Some(Timestamp::from_unix_nanos(expiry_nanos(e))),
    }
}

/// [`expiry`] in nanoseconds since the epoch, without writing a timestamp.
pub(crate) fn expiry_nanos(e: &CheckEvidence) -> i128 {
    match e.freshness {
        Freshness::Content => i128::MAX,
        Freshness::Time { max_age_s } => {
            (e.observed_at.unix_nanos() + i128::from(max_age_s) * NANOS).min(LAST_WRITABLE_NANOS)
        }
    }
}

pub(crate) fn is_from_future(at: &Timestamp, now: &Timestamp) -> bool {
    at.unix_nanos() > now.unix_nanos() + i128::from(FUTURE_TOLERANCE_S) * NANOS
}

pub(crate) fn is_stale(e: &CheckEvidence, now: &Timestamp) -> bool {
    match e.freshness {
        Freshness::Content => false,
        Freshness::Time { .. } => now.unix_nanos() >= expiry_nanos(e),
    }
}

/// Check evidence that counts.
pub(crate) struct CountedEvidence<'a> {
    loaded: &'a Loaded,
    tables: &'a Tables,
    /// Per evidence item: whether it counts.
    counts: Vec<bool>,
}

impl<'a> CountedEvidence<'a> {
    /// The counted evidence of the pin at position `pin`, in the bundle's order, each with its
    /// position in the bundle's evidence.
    pub(crate) fn of_pin(
        &self,
        pin: usize,
    ) -> impl Iterator<Item = (usize, &'a CheckEvidence)> + use<'_, 'a> {
        let l = self.loaded;
        self.tables
            .evidence_of_pin(pin)
            .iter()
            .filter(|at| self.counts.get(**at).copied().unwrap_or(false))
            .filter_map(move |at| Some((*at, &l.evidence.get(*at)?.doc)))
    }

    /// Per evidence item of the bundle, in its order: whether it counts.
    pub(crate) fn counts(&self) -> &[bool] {
        &self.counts
    }

    /// Every counted evidence item, in the bundle's order.
    pub(crate) fn all(&self) -> impl Iterator<Item = &'a CheckEvidence> + use<'_, 'a> {
        let l = self.loaded;
        l.evidence
            .iter()
            .zip(&self.counts)
            .filter(|(_, counts)| **counts)
            .map(|(e, _)| &e.doc)
    }
}

/// Decides which check evidence counts, adding the reasons of what may not.
pub(crate) fn count_evidence<'a>(
    l: &'a Loaded,
    t: &'a Tables,
    reasons: &mut Reasons,
) -> CountedEvidence<'a> {
    let s = &l.subject;
    let from = &l.policy.check_evidence_from;
    let producer_allowed = from.contains(&Role::Producer);
    let mut counts = vec![false; l.evidence.len()];
    for ((item, facts), counted) in l.evidence.iter().zip(&t.evidence_facts).zip(&mut counts) {
        let e = &item.doc;
        if !facts.same_subject {
            continue; // about another subject
        }
        let Some(pin) = facts.pin.and_then(|k| s.checks.get(k)) else {
            continue; // a check the subject does not pin
        };
        let id = e.id.as_str();
        if !facts.pinned_definition {
            reasons.add(
                fixed(ReasonCode::EvidenceDefinitionMismatch).check(&e.check),
                format!(
                    "evidence {id:?} ran definition {} but the subject pins {}",
                    e.definition_digest, pin.definition_digest
                ),
            );
            continue;
        }
        if facts.by_producer && !producer_allowed {
            reasons.add(
                fixed(ReasonCode::SelfVerificationDenied).check(&e.check),
                format!("evidence {id:?} was produced by the producer's principal and the policy does not accept producer evidence"),
            );
            continue;
        }
        if !from.contains(&e.produced_by.role) {
            continue; // a role the policy does not take check evidence from
        }
        if is_from_future(&e.observed_at, &l.now) {
            reasons.add(
                fixed(ReasonCode::EvidenceFromFuture).check(&e.check),
                // `now` is left out: the evaluation key holds only which items are future-dated,
                // so a detail that named `now` would break "equal keys, equal bytes".
                format!(
                    "evidence {id:?} observed at {} is more than {FUTURE_TOLERANCE_S} s after now",
                    e.observed_at
                ),
            );
            continue;
        }
        if is_stale(e, &l.now) {
            let x = expiry(e).map(|t| t.to_string()).unwrap_or_default();
            reasons.add(
                fixed(ReasonCode::EvidenceStale).check(&e.check),
                format!(
                    "evidence {id:?} observed at {} went stale at {x}",
                    e.observed_at
                ),
            );
            continue;
        }
        *counted = true;
    }
    CountedEvidence {
        loaded: l,
        tables: t,
        counts,
    }
}

/// Reasons about required checks: missing, errored, failed.
pub(crate) fn required_checks(t: &Tables, counted: &CountedEvidence<'_>, reasons: &mut Reasons) {
    for (check, pin) in &t.required_checks {
        let mut evs = pin
            .map(|k| counted.of_pin(k))
            .into_iter()
            .flatten()
            .peekable();
        if evs.peek().is_none() {
            let pinned = pin.is_some();
            let why = if pinned {
                "no counted evidence for this subject"
            } else {
                "the subject does not pin it"
            };
            reasons.add(
                fixed(ReasonCode::EvidenceMissing).check(check),
                format!("required check {:?}: {why}", check.as_str()),
            );
            continue;
        }
        for (_, e) in evs {
            match e.outcome {
                CheckOutcome::Pass => {}
                CheckOutcome::Fail => reasons.add(
                    fixed(ReasonCode::CheckFailed).check(check),
                    format!(
                        "required check {:?} failed (evidence {:?})",
                        check.as_str(),
                        e.id.as_str()
                    ),
                ),
                CheckOutcome::Error => reasons.add(
                    fixed(ReasonCode::CheckError).check(check),
                    format!(
                        "required check {:?} errored (evidence {:?}); errors prove nothing",
                        check.as_str(),
                        e.id.as_str()
                    ),
                ),
            }
        }
    }
}

/// The verification results that count, and what the others say about each verifier class.
#[derive(Default)]
pub(crate) struct Verifications<'a> {
    /// Completed, counted results with their positions in the bundle, sorted by id.
    pub counted: Vec<(usize, &'a VerificationResult)>,
    /// Classes with results admitted for an older generation (history).
    pub stale_generation: BTreeMap<&'a Id, BTreeSet<&'a Id>>,
    /// Classes with unavailable results on this subject and generation, with their reasons.
    pub unavailable: BTreeMap<&'a Id, BTreeSet<Option<UnavailableReason>>>,
}

/// Why a result's output cannot be counted, if it cannot. Rows, findings and dispositions are
/// checked whatever the status: the specification makes any result that names an unknown criterion or
/// repeats a row invalid output, an unavailable one too.
pub(crate) fn output_problem(
    l: &Loaded,
    index: &CriterionIndex,
    v: &VerificationResult,
) -> Option<String> {
    if v.status == VerificationStatus::Completed && v.unavailable_reason.is_some() {
        return Some("a completed result carries an unavailable_reason".into());
    }
    let mut seen = vec![false; index.len()];
    for (j, row) in v.criteria.iter().enumerate() {
        let Some(slot) = index.get_hinted(&row.id, j).and_then(|k| seen.get_mut(k)) else {
            return Some(format!("row names unknown criterion {:?}", row.id.as_str()));
        };
        if std::mem::replace(slot, true) {
            return Some(format!(
                "row for criterion {:?} is repeated",
                row.id.as_str()
            ));
        }
    }
    for f in &v.findings {
        if index.get(&f.criterion).is_none() {
            return Some(format!(
                "finding {:?} names unknown criterion {:?}",
                f.id.as_str(),
                f.criterion.as_str()
            ));
        }
        if f.subject_digest != l.subject_digest {
            return Some(format!(
                "finding {:?} is about another subject",
                f.id.as_str()
            ));
        }
        if f.version == 0 {
            return Some(format!(
                "finding {:?} has version 0; versions start at 1",
                f.id.as_str()
            ));
        }
    }
    let mut disposed = BTreeSet::new();
    for d in &v.dispositions {
        let known_prior = l
            .prior_findings
            .iter()
            .any(|p| p.doc.id == d.finding && p.doc.version == d.version);
        if !known_prior {
            return Some(format!(
                "disposition names finding {:?} version {}, which is not a prior blocker in the bundle",
                d.finding.as_str(),
                d.version
            ));
        }
        if !disposed.insert((&d.finding, d.version)) {
            return Some(format!(
                "finding {:?} version {} is disposed of twice",
                d.finding.as_str(),
                d.version
            ));
        }
    }
    None
}

/// Sorts the bundle's verification results into counted, history and unavailable.
pub(crate) fn count_verifications<'a>(
    l: &'a Loaded,
    t: &Tables,
    reasons: &mut Reasons,
) -> Verifications<'a> {
    let s = &l.subject;
    let mut out = Verifications::default();
    for (i, item) in l.verifications.iter().enumerate() {
        let v = &item.doc;
        if v.subject_digest != l.subject_digest {
            continue;
        }
        let id = v.id.as_str();
        let class = &v.verifier.class;
        if v.verifier.principal == s.producer.principal || v.verifier.run == s.producer.run {
            reasons.add(
                fixed(ReasonCode::SelfVerificationDenied),
                format!(
                    "verification {id:?} ({}) was made by the producer's principal or run",
                    class.as_str()
                ),
            );
            continue;
        }
        if v.generation < s.execution.generation {
            out.stale_generation.entry(class).or_default().insert(&v.id);
            continue;
        }
        if v.generation > s.execution.generation {
            reasons.add(
                fixed(ReasonCode::VerifierOutputInvalid),
                format!(
                    "verification {id:?} ({}) claims generation {}, newer than the subject's {}",
                    class.as_str(),
                    v.generation,
                    s.execution.generation
                ),
            );
            continue;
        }
        if let Some(problem) = t.output_problem.get(i).and_then(Option::as_ref) {
            reasons.add(
                fixed(ReasonCode::VerifierOutputInvalid),
                format!("verification {id:?} ({}): {problem}", class.as_str()),
            );
            continue;
        }
        if v.status == VerificationStatus::Unavailable {
            out.unavailable
                .entry(class)
                .or_default()
                .insert(v.unavailable_reason);
            continue;
        }
        out.counted.push((i, v));
    }
    out.counted
        .sort_by_key(|(i, _)| t.verification_rank.get(*i).copied());
    out
}

/// Reasons about verifier classes: every required class, and any class whose only results
/// are from an older generation.
pub(crate) fn required_verifiers(t: &Tables, v: &Verifications<'_>, reasons: &mut Reasons) {
    // An older generation's result is history, with `stale_generation` whenever nothing
    // else of its class counts, whether or not the policy requires the class.
    for (class, ids) in &v.stale_generation {
        if t.required_classes.binary_search(class).is_ok()
            || v.counted.iter().any(|(_, r)| r.verifier.class == **class)
        {
            continue; // a required class is explained below
        }
        let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
        reasons.add(
            fixed(ReasonCode::StaleGeneration),
            format!(
                "verifier class {:?}: only results admitted for an older generation ({}); they stay history",
                class.as_str(),
                ids.join(", ")
            ),
        );
    }
    for class in &t.required_classes {
        if v.counted.iter().any(|(_, r)| r.verifier.class == *class) {
            continue;
        }
        let mut explained = false;
        if let Some(ids) = v.stale_generation.get(class) {
            let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
            reasons.add(
                fixed(ReasonCode::StaleGeneration),
                format!(
                    "required verifier {:?}: only results admitted for an older generation ({}); they stay history",
                    class.as_str(),
                    ids.join(", ")
                ),
            );
            explained = true;
        }
        if let Some(why) = v.unavailable.get(class) {
            let why: Vec<&str> = why
                .iter()
                .map(|r| r.map_or("no reason given", UnavailableReason::as_str))
                .collect();
            reasons.add(
                fixed(ReasonCode::VerifierUnavailable),
                format!(
                    "required verifier {:?} was unavailable: {}",
                    class.as_str(),
                    why.join(", ")
                ),
            );
            explained = true;
        }
        if !explained {
            let floor = if t.floor_classes.binary_search(class).is_ok() {
                " (required because the policy's risk_floor raised the subject's risk class)"
            } else {
                ""
            };
            reasons.add(
                fixed(ReasonCode::VerifierMissing),
                format!(
                    "required verifier {:?} has no completed, counted result{floor}",
                    class.as_str()
                ),
            );
        }
    }
}
