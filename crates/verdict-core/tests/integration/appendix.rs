//! The specification's complete example bundle (docs/spec/bundle.md): its digests are real and it passes.

use verdict_core::digest::{DigestKind, digest};
use verdict_core::json;

const BUNDLE: &[u8] = include_bytes!("../../../../examples/merge-gate/bundle.json");

#[test]
fn appendix_digests_are_reproduced() {
    let v = json::parse(BUNDLE).unwrap();
    let subject = digest(DigestKind::Subject, &v["subject"]);
    assert_eq!(
        subject.as_str(),
        v["evidence"][0]["subject_digest"].as_str().unwrap()
    );
    assert_eq!(
        subject.as_str(),
        "sha256:0ac282182c0ff7c3fa537b686f41beda4e5b04340ac0f1f9fd577a4c9b37f0ea"
    );
}
