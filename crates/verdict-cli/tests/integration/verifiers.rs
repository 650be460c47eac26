//! The verifiers file as a newcomer meets it: the examples load and match the schema
//! `verdict schema verifiers` prints, and a wrong provider is reported in plain words.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use verdict_judge::config::{ProviderConfig, VerifiersFile};

fn verdict(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(args)
        .output()
        .unwrap()
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/verifiers")
}

fn schema() -> jsonschema::Validator {
    let out = verdict(&["schema", "verifiers"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let schema: Value = serde_json::from_slice(&out.stdout).unwrap();
    jsonschema::draft202012::new(&schema).unwrap()
}

#[test]
fn every_example_loads_resolves_and_matches_the_printed_schema() {
    let schema = schema();
    let mut kinds = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(examples()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        files += 1;
        let file = VerifiersFile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!file.classes.is_empty(), "{}", path.display());
        for (name, class) in &file.classes {
            // Templates resolve relative to the file; the class is ready to run.
            let resolved = file.class(name.as_str(), &examples()).unwrap();
            assert!(!resolved.template.trim().is_empty());
            kinds.push(match &class.provider {
                ProviderConfig::Openai { .. } => "openai",
                ProviderConfig::Anthropic { .. } => "anthropic",
                ProviderConfig::Command { .. } => "command",
            });
        }
        // What the types read is what the schema describes.
        let doc = serde_json::to_value(&file).unwrap();
        let errors: Vec<String> = schema.iter_errors(&doc).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}", path.display());
    }
    assert_eq!(files, 3);
    kinds.sort_unstable();
    assert_eq!(kinds, ["anthropic", "command", "openai"]);
}

#[test]
fn the_schema_refuses_what_the_loader_refuses() {
    let schema = schema();
    let bad = [
        json!({"version": 1, "classes": {"r": {"provider": {"kind": "openaii", "model": "m"}}}}),
        json!({"version": 1, "classes": {"r": {"provider": {"kind": "command", "model": "m"}}}}),
        json!({"version": 1, "classes": {"r": {"provider": {"kind": "openai", "model": "m"}, "budgte": {}}}}),
    ];
    for doc in bad {
        assert!(!schema.is_valid(&doc), "{doc}");
        assert!(VerifiersFile::parse(doc.to_string().as_bytes(), "v.json").is_err());
    }
}

#[test]
fn a_wrong_provider_kind_is_reported_plainly_by_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let verifiers = dir.path().join("verifiers.yaml");
    std::fs::write(
        &verifiers,
        "version: 1\nclasses:\n  reviewer:\n    provider: {kind: open-ai, model: m}\n",
    )
    .unwrap();
    let request = dir.path().join("request.json");
    let doc = json!({
        "schema": "verdict.judge-request/v1", "result_id": "vr-1",
        "verifier": {"principal": "reviewer-1", "class": "reviewer", "run": "vrun-1"},
        "subject_digest": "sha256:0ac282182c0ff7c3fa537b686f41beda4e5b04340ac0f1f9fd577a4c9b37f0ea",
        "generation": 1,
        "objective": {"revision": "r1", "text": "Add a retry"},
        "criteria": {"revision": "c1", "items": [{"id": "tests-pass", "text": "Tests pass"}]}
    });
    std::fs::write(&request, doc.to_string()).unwrap();
    let out = verdict(&[
        "judge",
        "render",
        request.to_str().unwrap(),
        "--verifiers",
        verifiers.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for part in [
        verifiers.to_str().unwrap(),
        "/classes/reviewer/provider/kind",
        "\"open-ai\" is not a provider kind; expected one of openai, anthropic, command",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    assert!(
        !err.contains("tagged") && !err.contains("ProviderConfig"),
        "{err}"
    );
}
