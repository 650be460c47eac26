//! The CLI against the specification (docs/spec/) where the first tests left a gap: schemas that accept every
//! document the Gate accepts, and an example in the help of every command, groups included.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::common;

use common::{root, verdict, verdict_stdin};

fn schema(name: &str) -> Value {
    let out = verdict(&["schema", name]);
    assert_eq!(out.status.code(), Some(0), "verdict schema {name}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The digest `verdict digest --kind` prints for `doc`.
fn digest(kind: &str, doc: &Value) -> String {
    let out = verdict_stdin(
        &["digest", "--kind", kind, "-"],
        &serde_json::to_vec(doc).unwrap(),
    );
    assert_eq!(out.status.code(), Some(0));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A document that carries its own `"digest"` is hashed without it (docs/spec/encoding.md). The
/// Gate passes a bundle whose documents all carry their correct digest, so the schemas must
/// accept it too, while still refusing any other unknown field.
#[test]
fn schemas_accept_a_carried_digest_on_every_document() {
    let path = root().join("examples/merge-gate/bundle.json");
    let mut bundle: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    for (field, kind) in [("subject", "subject"), ("policy", "policy")] {
        let d = digest(kind, &bundle[field]);
        bundle[field]["digest"] = Value::from(d);
    }
    for (array, kind) in [("evidence", "evidence"), ("verifications", "verification")] {
        for i in 0..bundle[array].as_array().unwrap().len() {
            let d = digest(kind, &bundle[array][i]);
            bundle[array][i]["digest"] = Value::from(d);
        }
    }
    let out = verdict_stdin(
        &["gate", "evaluate", "-"],
        &serde_json::to_vec(&bundle).unwrap(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "the Gate accepts carried digests"
    );

    let bundle_schema = jsonschema::validator_for(&schema("bundle")).unwrap();
    let errors: Vec<String> = bundle_schema
        .iter_errors(&bundle)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "bundle schema: {errors:?}");
    for (name, doc) in [
        ("subject", &bundle["subject"]),
        ("policy", &bundle["policy"]),
        ("evidence", &bundle["evidence"][0]),
        ("verification", &bundle["verifications"][0]),
    ] {
        let v = jsonschema::validator_for(&schema(name)).unwrap();
        assert!(v.is_valid(doc), "{name} schema refuses a carried digest");
        let mut other = doc.clone();
        other["digestx"] = Value::from("sha256:0");
        assert!(
            !v.is_valid(&other),
            "{name} schema accepts an unknown field"
        );
    }
}

/// Every command's `--help`, the top level and each group included, shows an example.
#[test]
fn every_group_command_has_help_with_an_example() {
    for args in [
        vec!["--help"],
        vec!["gate", "--help"],
        vec!["judge", "--help"],
        vec!["store", "--help"],
        vec!["audit", "--help"],
        vec!["principal", "--help"],
        vec!["grant", "--help"],
        vec!["policy", "--help"],
        vec!["subject", "--help"],
        vec!["evidence", "--help"],
        vec!["request", "--help"],
        vec!["run", "--help"],
        vec!["result", "--help"],
    ] {
        let out = verdict(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = String::from_utf8(out.stdout).unwrap();
        assert!(
            help.contains("Example") && help.contains("\n  verdict "),
            "{args:?} has no example:\n{help}"
        );
    }
}

/// Hostile inputs: the file can be read but is not a bundle, so the Gate still decides
/// (`blocked`, `invalid_input`, exit 1); a directory cannot be read (exit 2, no decision).
#[test]
fn hostile_inputs_decide_or_exit_2() {
    for input in [
        &b""[..],
        b"\xef\xbb\xbf{}",
        b"{\"a\":\"\xff\"}",
        b"{\"a\":1,\"a\":1}",
        b"{\"a\":9007199254740992}",
        b"{\"a\":1e400}",
    ] {
        let out = verdict_stdin(&["gate", "evaluate", "-"], input);
        assert_eq!(out.status.code(), Some(1), "{input:?}");
        let d: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(d["outcome"], "blocked");
        assert_eq!(d["reasons"][0]["code"], "invalid_input");
        let out = verdict_stdin(&["digest", "--kind", "evidence", "-"], input);
        assert_eq!(out.status.code(), Some(2), "digest of {input:?}");
        assert!(out.stdout.is_empty());
    }
    let out = verdict(&["gate", "evaluate", "crates"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
}

/// A reader that goes away (`verdict gate evaluate big.json | head -c 1`) makes the write
/// fail; the command reports it and exits 2 instead of panicking.
#[test]
fn closed_stdout_is_an_error_not_a_panic() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(["gate", "evaluate", "-"])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader is gone before the bundle is sent, so the decision cannot be written.
    drop(child.stdout.take());
    let bundle = std::fs::read(root().join("examples/merge-gate/bundle.json")).unwrap();
    child.stdin.take().unwrap().write_all(&bundle).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(2), "{stderr}");
}

/// The schemas refuse what the Gate refuses beyond the Rust types: a weight of 0 or below, a
/// fallback outcome of `pass`, a rule whose outcome is `pass`.
#[test]
fn schemas_refuse_what_the_gate_refuses_beyond_the_types() {
    let path = root().join("examples/merge-gate/bundle.json");
    let bundle: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let policy = jsonschema::validator_for(&schema("policy")).unwrap();
    let subject = jsonschema::validator_for(&schema("subject")).unwrap();
    assert!(policy.is_valid(&bundle["policy"]));
    assert!(subject.is_valid(&bundle["subject"]));
    for field in ["on_inconclusive", "on_contradiction"] {
        let mut p = bundle["policy"].clone();
        p[field] = Value::from("blocked");
        assert!(policy.is_valid(&p), "{field}: blocked");
        p[field] = Value::from("pass");
        assert!(!policy.is_valid(&p), "{field}: pass");
    }
    let mut p = bundle["policy"].clone();
    p["rules"] =
        serde_json::json!([{"id": "r", "when": "true", "outcome": "rework", "reason": "x"}]);
    assert!(policy.is_valid(&p));
    p["rules"][0]["outcome"] = Value::from("pass");
    assert!(!policy.is_valid(&p), "a rule with outcome pass");
    for (weight, ok) in [(2.5, true), (0.0, false), (-1.0, false)] {
        let mut s = bundle["subject"].clone();
        s["criteria"]["items"][0]["weight"] = Value::from(weight);
        assert_eq!(subject.is_valid(&s), ok, "weight {weight}");
    }
    // The policy's pins: required criteria each once, checks named by ids, digests as values.
    let digest = format!("sha256:{}", "1".repeat(64));
    let members = |m: Value| {
        let mut p = bundle["policy"].clone();
        for (k, v) in m.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let pinned = members(serde_json::json!({
        "risk_floor": "high", "required_criteria": ["a", "b"], "check_definitions": {"unit": digest}
    }));
    assert!(policy.is_valid(&pinned));
    for bad in [
        serde_json::json!({"required_criteria": ["a", "a"]}),
        serde_json::json!({"required_criteria": ["A"]}),
        serde_json::json!({"risk_floor": "extreme"}),
        serde_json::json!({"check_definitions": {"Unit": digest}}),
        serde_json::json!({"check_definitions": {"unit": "sha1:00"}}),
    ] {
        assert!(!policy.is_valid(&members(bad.clone())), "{bad}");
    }
}
