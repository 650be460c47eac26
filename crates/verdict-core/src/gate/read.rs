//! Reading a bundle from its bytes without building a JSON tree: the common case, fast.
//!
//! [`load`] parses the bytes into a [`Tape`], hashes every document from it (a document that is
//! canonical already is hashed as it was written) and decodes the typed documents from it. It
//! handles only bundles that read without a single reason: no carried digest anywhere, every
//! field present and known, every document decoding. For anything else it returns `None`, and
//! the caller reads the bundle the strict way ([`super::load`]), so that every reason and every
//! detail of a bundle that does not read cleanly comes from one place. Both ways give the same
//! [`Loaded`] for the bundles this one accepts, which a differential test holds them to.

use super::load::{self, BUNDLE_SCHEMA, FIELDS, Item, Loaded};
use super::reasons::Reasons;
use crate::contracts::{
    CheckEvidence, Finding, HumanDecision, Policy, Subject, Timestamp, VerificationResult,
};
use crate::digest::{self, CARRIED_FIELD, Digest, DigestKind};
use crate::tape::{Kind, Tape, canonical, de};
use serde::de::DeserializeOwned;

/// Reads a bundle that reads cleanly; `None` for every other input.
pub(crate) fn load(input: &[u8]) -> Option<Loaded> {
    let t = Tape::parse(input).ok()?;
    if t.node(0)?.kind != Kind::Object {
        return None;
    }
    let mut at = [None; FIELDS.len()];
    for (k, v) in t.members(0) {
        let key = t.str_at(k)?;
        let slot = FIELDS.iter().position(|f| *f == key)?;
        *at.get_mut(slot)? = Some(v);
    }
    let [
        Some(schema),
        Some(policy),
        Some(subject),
        Some(evidence),
        Some(verifications),
        Some(human_decisions),
        Some(prior_findings),
        Some(now),
    ] = at
    else {
        return None;
    };
    if t.str_at(schema)? != BUNDLE_SCHEMA {
        return None;
    }
    // Written to only for documents that are not canonical as they stand.
    let mut buf = Vec::new();
    let (policy, policy_digest) = document::<Policy>(&t, policy, DigestKind::Policy, &mut buf)?;
    let (subject, subject_digest) =
        document::<Subject>(&t, subject, DigestKind::Subject, &mut buf)?;
    let now: Timestamp = de::decode(&t, now).ok()?;

    let evidence = items::<CheckEvidence>(&t, evidence, DigestKind::Evidence, &mut buf)?;
    let verifications =
        items::<VerificationResult>(&t, verifications, DigestKind::Verification, &mut buf)?;
    let human_decisions =
        items::<HumanDecision>(&t, human_decisions, DigestKind::HumanDecision, &mut buf)?;
    let prior_findings = items::<Finding>(&t, prior_findings, DigestKind::Finding, &mut buf)?;
    // Every item's digest is in one of the four lists: a duplicate is left out of its list
    // only when an equal digest is already there.
    let evidence_set_digest = load::evidence_set(
        evidence
            .iter()
            .map(|i| &i.digest)
            .chain(verifications.iter().map(|i| &i.digest))
            .chain(human_decisions.iter().map(|i| &i.digest))
            .chain(prior_findings.iter().map(|i| &i.digest)),
    );
    Some(Loaded {
        policy,
        policy_digest,
        subject,
        subject_digest,
        now,
        evidence,
        verifications,
        human_decisions,
        prior_findings,
        evidence_set_digest,
        // A bundle with a carried digest is read the strict way.
        tampered: Vec::new(),
        reasons: Reasons::default(),
    })
}

/// `digest(kind, node)` for a node that carries no digest of its own.
fn digest_of(t: &Tape<'_>, at: usize, kind: DigestKind, buf: &mut Vec<u8>) -> Digest {
    if t.is_canonical(at) {
        return digest::digest_canonical(kind, t.raw(at));
    }
    buf.clear();
    canonical::write(t, at, buf);
    digest::digest_canonical(kind, buf)
}

/// Whether `at` is an object with a carried digest, or holds findings that carry one: those
/// are checked and stripped by the strict way.
fn carries_digest(t: &Tape<'_>, at: usize) -> bool {
    let carries = |x: usize| {
        t.node(x).is_some_and(|n| n.kind == Kind::Object) && t.get(x, CARRIED_FIELD).is_some()
    };
    carries(at)
        || t.get(at, "findings")
            .is_some_and(|f| t.children(f).any(|c| carries(c.value)))
}

fn document<T: DeserializeOwned>(
    t: &Tape<'_>,
    at: usize,
    kind: DigestKind,
    buf: &mut Vec<u8>,
) -> Option<(T, Digest)> {
    if t.node(at)?.kind != Kind::Object || carries_digest(t, at) {
        return None;
    }
    let d = digest_of(t, at, kind, buf);
    Some((de::decode(t, at).ok()?, d))
}

/// One array of documents, one per digest, sorted by digest.
fn items<T: DeserializeOwned>(
    t: &Tape<'_>,
    at: usize,
    kind: DigestKind,
    buf: &mut Vec<u8>,
) -> Option<Vec<Item<T>>> {
    if t.node(at)?.kind != Kind::Array {
        return None;
    }
    let mut out: Vec<Item<T>> = Vec::with_capacity(t.node(at)?.len as usize);
    for c in t.children(at) {
        let (doc, digest) = document(t, c.value, kind, buf)?;
        out.push(Item { doc, digest });
    }
    out.sort_by(|a, b| a.digest.cmp(&b.digest));
    // The same document twice is the same member of the set (equal digests, equal documents).
    out.dedup_by(|a, b| a.digest == b.digest);
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

    use super::load;
    use serde_json::Value;

    fn bundle_of(fixture: &str) -> Vec<u8> {
        let doc: Value = serde_json::from_str(fixture).unwrap();
        serde_json::to_vec_pretty(&doc["bundle"]).unwrap()
    }

    #[test]
    fn reads_clean_bundles_and_leaves_the_rest_to_the_strict_way() {
        let clean = [
            bundle_of(include_str!("../../tests/fixtures/gate/pass-baseline.json")),
            bundle_of(include_str!(
                "../../tests/fixtures/gate/missing-criterion-row.json"
            )),
            // The policy's optional members, each set.
            bundle_of(include_str!(
                "../../tests/fixtures/gate/risk-floor-raises-stated-low.json"
            )),
            bundle_of(include_str!(
                "../../tests/fixtures/gate/required-criterion-left-out.json"
            )),
            bundle_of(include_str!(
                "../../tests/fixtures/gate/check-pinned-to-another-definition.json"
            )),
            include_str!("../../../../examples/merge-gate/bundle.json")
                .as_bytes()
                .to_vec(),
        ];
        for b in &clean {
            assert!(load(b).is_some(), "{}", String::from_utf8_lossy(b));
        }
        let tampered = bundle_of(include_str!(
            "../../tests/fixtures/gate/tampered-evidence.json"
        ));
        let mut unknown: Value = serde_json::from_slice(&clean[0]).unwrap();
        unknown["requried_checks"] = Value::Array(Vec::new());
        // The same bundle with its schema given twice.
        let mut twice = String::from_utf8(clean[0].clone()).unwrap();
        twice.insert_str(1, "\"schema\": \"verdict.gate-bundle/v1\",");
        for b in [
            tampered,
            serde_json::to_vec(&unknown).unwrap(),
            twice.into_bytes(),
            b"{}".to_vec(),
            b"[]".to_vec(),
        ] {
            assert!(load(&b).is_none(), "{}", String::from_utf8_lossy(&b));
        }
    }
}
