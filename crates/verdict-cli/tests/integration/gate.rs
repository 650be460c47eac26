//! The built `verdict` binary on the example bundles: outputs and exit codes as documented.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::Value;
use std::process::Output;

use crate::common;

use common::{root, verdict, verdict_stdin};

fn decision(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

#[test]
fn examples_decide_as_documented() {
    for (file, outcome, code) in [
        ("examples/merge-gate/bundle.json", "pass", 0),
        ("examples/rework/bundle.json", "rework", 1),
        ("examples/human-required/bundle.json", "human_required", 1),
        ("examples/human-required/approved-bundle.json", "pass", 0),
        ("examples/blocked/bundle.json", "blocked", 1),
    ] {
        let out = verdict(&["gate", "evaluate", file]);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{file}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = decision(&out);
        assert_eq!(d["outcome"], outcome, "{file}");
        assert_eq!(d["schema"], "verdict.gate-decision/v1");
    }
    let rework = decision(&verdict(&[
        "gate",
        "evaluate",
        "examples/rework/bundle.json",
    ]));
    assert_eq!(rework["rework"][0]["id"], "f-retry-loop");
    assert_eq!(rework["follow_ups"][0]["id"], "f-old-timeout");
}

#[test]
fn json_output_is_canonical_and_repeatable() {
    let a = verdict(&["gate", "evaluate", "examples/merge-gate/bundle.json"]);
    let b = verdict_stdin(
        &["gate", "evaluate", "-"],
        &std::fs::read(root().join("examples/merge-gate/bundle.json")).unwrap(),
    );
    assert_eq!(a.stdout, b.stdout);
    let v: Value = serde_json::from_slice(&a.stdout).unwrap();
    let canonical = verdict_core::canonical::to_vec(&v);
    assert_eq!(
        String::from_utf8(a.stdout).unwrap().trim_end(),
        String::from_utf8(canonical).unwrap()
    );
}

#[test]
fn text_format_summarises() {
    let out = verdict(&[
        "gate",
        "evaluate",
        "--format",
        "text",
        "examples/rework/bundle.json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "outcome   rework",
        "criterion",
        "tests-pass",
        "reasons",
        "blocking_finding",
        "rework\n  f-retry-loop v1",
        "follow-ups",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn invalid_input_still_prints_a_blocked_decision() {
    let out = verdict_stdin(
        &["gate", "evaluate", "-"],
        br#"{"schema": "verdict.gate-bundle/v1", "schema": "x"}"#,
    );
    assert_eq!(out.status.code(), Some(1));
    let d = decision(&out);
    assert_eq!(d["outcome"], "blocked");
    assert_eq!(d["reasons"][0]["code"], "invalid_input");
    assert!(d["evaluation_key"].is_null());
    let out = verdict_stdin(&["gate", "evaluate", "-"], b"\xff\xfe not json");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(decision(&out)["reasons"][0]["code"], "invalid_input");
}

#[test]
fn unreadable_input_and_bad_arguments_exit_2() {
    let out = verdict(&["gate", "evaluate", "does/not/exist.json"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does/not/exist.json"));
    assert!(out.stdout.is_empty());
    assert_eq!(
        verdict(&["gate", "evaluate", "--format", "yaml", "x"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(verdict(&["gate", "frobnicate"]).status.code(), Some(2));
    assert_eq!(
        verdict(&[
            "digest",
            "--kind",
            "nonsense",
            "examples/merge-gate/subject.json"
        ])
        .status
        .code(),
        Some(2)
    );
    assert_eq!(verdict(&["schema", "nonsense"]).status.code(), Some(2));
}

#[test]
fn digest_cross_checks_the_example() {
    let out = verdict(&[
        "digest",
        "--kind",
        "subject",
        "examples/merge-gate/subject.json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let bundle: Value = serde_json::from_slice(
        &std::fs::read(root().join("examples/merge-gate/bundle.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        bundle["evidence"][0]["subject_digest"]
    );
    // Another kind over the same bytes is another digest.
    let other = verdict(&[
        "digest",
        "--kind",
        "policy",
        "examples/merge-gate/subject.json",
    ]);
    assert_ne!(
        other.stdout,
        verdict(&[
            "digest",
            "--kind",
            "subject",
            "examples/merge-gate/subject.json"
        ])
        .stdout
    );
}

#[test]
fn digest_detects_a_tampered_carried_digest() {
    let good = verdict_stdin(&["digest", "--kind", "evidence", "-"], br#"{"a": 1}"#);
    let d = String::from_utf8(good.stdout).unwrap().trim().to_owned();
    let carried = format!(r#"{{"a": 1, "digest": "{d}"}}"#);
    assert_eq!(
        verdict_stdin(&["digest", "--kind", "evidence", "-"], carried.as_bytes())
            .status
            .code(),
        Some(0)
    );
    let tampered = format!(r#"{{"a": 2, "digest": "{d}"}}"#);
    let out = verdict_stdin(&["digest", "--kind", "evidence", "-"], tampered.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not match"));
    // The strict reader refuses duplicate keys here too.
    assert_eq!(
        verdict_stdin(
            &["digest", "--kind", "evidence", "-"],
            br#"{"a": 1, "a": 1}"#
        )
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn raw_digest_streams_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("artifact.bin");
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let out = verdict(&["digest", "--raw", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        verdict_core::digest::raw(&data).as_str()
    );
}

#[test]
fn schemas_are_printed_and_accept_the_examples() {
    for name in [
        "bundle",
        "subject",
        "policy",
        "decision",
        "evidence",
        "verification",
        "request",
        "admission-note",
        "run-context",
    ] {
        let out = verdict(&["schema", name]);
        assert_eq!(out.status.code(), Some(0), "{name}");
        let s: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            s["$schema"].as_str().unwrap().contains("json-schema.org"),
            "{name}"
        );
    }
    let bundle_schema: Value =
        serde_json::from_slice(&verdict(&["schema", "bundle"]).stdout).unwrap();
    let validator = jsonschema::validator_for(&bundle_schema).unwrap();
    let bundle: Value = serde_json::from_slice(
        &std::fs::read(root().join("examples/merge-gate/bundle.json")).unwrap(),
    )
    .unwrap();
    assert!(validator.is_valid(&bundle));
    let mut typo = bundle.clone();
    typo["policy"]["requried_checks"] = serde_json::json!([]);
    assert!(
        !validator.is_valid(&typo),
        "the schema refuses unknown fields too"
    );
    let decision_schema: Value =
        serde_json::from_slice(&verdict(&["schema", "decision"]).stdout).unwrap();
    let d = decision(&verdict(&[
        "gate",
        "evaluate",
        "examples/rework/bundle.json",
    ]));
    assert!(
        jsonschema::validator_for(&decision_schema)
            .unwrap()
            .is_valid(&d)
    );
}

#[test]
fn every_command_has_help_with_an_example() {
    for args in [
        vec!["gate", "evaluate", "--help"],
        vec!["digest", "--help"],
        vec!["schema", "--help"],
    ] {
        let out = verdict(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Example"),
            "{args:?}"
        );
    }
}
