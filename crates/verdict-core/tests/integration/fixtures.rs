//! Data-driven hostile cases: every `fixtures/gate/*.json` names the outcome and the exact set
//! of reason codes its bundle must produce.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;
use verdict_core::contracts::ReasonCode;
use verdict_core::gate;

#[test]
fn every_gate_fixture_decides_as_expected() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gate");
    let mut seen = 0;
    let mut failures = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
    {
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let bundle = serde_json::to_vec(&doc["bundle"]).unwrap();
        let d = gate::evaluate(&bundle);
        let want_outcome = doc["expect"]["outcome"].as_str().unwrap();
        let mut want: Vec<String> = doc["expect"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect();
        want.sort();
        let mut got: Vec<String> = d
            .reasons
            .iter()
            .map(|r| ReasonCode::as_str(r.code).to_owned())
            .collect();
        got.sort();
        got.dedup();
        if d.outcome.as_str() != want_outcome || got != want {
            failures.push(format!(
                "{}: want {want_outcome} {want:?}, got {} {got:?}\n{:#?}",
                path.display(),
                d.outcome.as_str(),
                d.reasons
            ));
        }
        seen += 1;
    }
    assert!(
        seen >= 15,
        "only {seen} fixtures found in {}",
        dir.display()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every fixture and example bundle, compact and pretty-printed, is decided byte for byte the
/// same by `evaluate` (which reads a clean bundle without a JSON tree) and by the strict way
/// (a JSON tree first).
#[test]
fn every_fixture_and_example_reads_the_same_both_ways() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut bundles = Vec::new();
    for entry in std::fs::read_dir(root.join("tests/fixtures/gate")).unwrap() {
        let path = entry.unwrap().path();
        let doc: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        bundles.push(doc["bundle"].clone());
    }
    for dir in ["merge-gate", "rework", "human-required", "blocked"] {
        for entry in std::fs::read_dir(root.join("../../examples").join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains("bundle"))
            {
                bundles.push(serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap());
            }
        }
    }
    assert!(bundles.len() >= 20, "only {} bundles", bundles.len());
    for b in bundles {
        for bytes in [
            serde_json::to_vec(&b).unwrap(),
            serde_json::to_vec_pretty(&b).unwrap(),
        ] {
            let strict = gate::evaluate_value(&verdict_core::json::parse(&bytes).unwrap());
            assert_eq!(
                gate::evaluate(&bytes).canonical_bytes().unwrap(),
                strict.canonical_bytes().unwrap(),
                "{}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }
}
