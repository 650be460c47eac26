//! DSSE, statements, verification, JUnit and GitHub payloads, against published vectors and an
//! independent implementation.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail by panicking"
)]

use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use verdict_attest::dsse::{Envelope, b64_encode, pae};
use verdict_attest::github::{Applicable, payloads};
use verdict_attest::statement::{GATE_EXTENSION, PAYLOAD_TYPE, Statement, VerificationSummary};
use verdict_attest::{
    AttestError, Clock, DecisionInput, Pins, Refusal, attest, junit, keys, verify,
};
use verdict_core::contracts::{GateDecision, Outcome, Subject, Timestamp};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(path: &str) -> Value {
    let bytes = std::fs::read(root().join("examples").join(path)).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// A bundle and the decision the Gate makes from it, as stored (its canonical bytes).
fn decided(path: &str) -> (Value, Value) {
    let bundle = example(path);
    let decision = verdict_core::gate::evaluate_value(&bundle);
    let value = serde_json::from_slice(&decision.canonical_bytes().unwrap()).unwrap();
    (bundle, value)
}

fn attest_file(path: &str, include_bundle: bool, signer: &SigningKey) -> String {
    let (bundle, decision) = decided(path);
    attest_bundle(&bundle, &decision, include_bundle, signer, Clock::System)
}

fn attest_bundle(
    bundle: &Value,
    decision: &Value,
    include_bundle: bool,
    signer: &SigningKey,
    clock: Clock,
) -> String {
    let input = DecisionInput {
        gate: "default",
        decision,
        bundle,
        include_bundle,
        verifier_version: BTreeMap::from([("verdict".to_owned(), "0.1.0".to_owned())]),
        clock,
    };
    attest(&input, signer).unwrap().to_jsonl().unwrap()
}

fn at(t: &str) -> Timestamp {
    t.parse().unwrap()
}

#[test]
fn pae_matches_the_published_test_vector() {
    let message = pae("http://example.com/HelloWorld", b"hello world");
    assert_eq!(
        message,
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    );
    // The protocol's published envelope is signed with ECDSA P-256 over exactly these bytes:
    // its signature verifies over our encoding and not over anything else.
    let public = "0467cd390f77aa359cb08c2235f652270493a9ed832b0abcc01f70954c0390d2380c782bd54e269125a44f4433aff1432ce94e12bca73aa67ac80cea12608ddf74";
    let public: Vec<u8> = (0..public.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&public[i..i + 2], 16).unwrap())
        .collect();
    let sig = base64::engine::general_purpose::STANDARD
        .decode("A3JqsQGtVsJ2O2xqrI5IcnXip5GToJ3F+FnZ+O88SjtR6rDAajabZKciJTfUiHqJPcIAriEGAHTVeCUjW2JIZA==")
        .unwrap();
    let verifier =
        ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, public);
    verifier.verify(&message, &sig).unwrap();
    assert!(
        verifier
            .verify(&pae("http://example.com/HelloWorld", b"hello world!"), &sig)
            .is_err()
    );
    // Lengths are byte lengths in decimal without leading zeros, and an empty body is allowed.
    assert_eq!(pae("", b""), b"DSSEv1 0  0 ");
    assert_eq!(pae("t/é", b"x"), "DSSEv1 4 t/é 1 x".as_bytes());
}

#[test]
fn a_signed_envelope_verifies_only_as_signed() {
    let k = key(1);
    let body = br#"{"a":1}"#;
    let env = Envelope::sign(PAYLOAD_TYPE, body, &k);
    let ok = env.verify(&[k.verifying_key()], PAYLOAD_TYPE).unwrap();
    assert_eq!(ok.body, body);
    assert_eq!(ok.key_id, keys::key_id(&k.verifying_key()));

    // A flipped byte in the payload: the signature no longer verifies.
    let mut flipped = body.to_vec();
    flipped[2] ^= 0x01;
    let mut bad = env.clone();
    bad.payload = b64_encode(&flipped);
    assert!(matches!(
        bad.verify(&[k.verifying_key()], PAYLOAD_TYPE),
        Err(AttestError::Signature(_))
    ));
    // A flipped byte in the signature.
    let mut sig = base64::engine::general_purpose::STANDARD
        .decode(&env.signatures[0].sig)
        .unwrap();
    sig[10] ^= 0x80;
    let mut bad = env.clone();
    bad.signatures[0].sig = b64_encode(&sig);
    assert!(matches!(
        bad.verify(&[k.verifying_key()], PAYLOAD_TYPE),
        Err(AttestError::Signature(_))
    ));
    // A wrong key, even with the right key id hint copied in.
    assert!(matches!(
        env.verify(&[key(2).verifying_key()], PAYLOAD_TYPE),
        Err(AttestError::Signature(_))
    ));
    // The payload type is authenticated: relabelling breaks the signature...
    let mut relabelled = env.clone();
    relabelled.payload_type = "application/json".into();
    assert!(matches!(
        relabelled.verify(&[k.verifying_key()], "application/json"),
        Err(AttestError::Signature(_))
    ));
    // ...and a correctly signed envelope of another type is refused after the signature.
    let other = Envelope::sign("application/json", body, &k);
    assert!(matches!(
        other.verify(&[k.verifying_key()], PAYLOAD_TYPE),
        Err(AttestError::PayloadType { .. })
    ));
    // No signature at all is never a pass.
    let mut none = env.clone();
    none.signatures.clear();
    assert!(none.verify(&[k.verifying_key()], PAYLOAD_TYPE).is_err());
    // A second, foreign signature does not stop the trusted one from verifying.
    let mut two = env.clone();
    two.signatures.insert(
        0,
        Envelope::sign(PAYLOAD_TYPE, body, &key(3)).signatures[0].clone(),
    );
    assert!(two.verify(&[k.verifying_key()], PAYLOAD_TYPE).is_ok());
}

#[test]
fn standard_and_url_safe_base64_are_both_accepted() {
    let k = key(4);
    // Bytes whose base64 uses both `+` and `/` in the standard alphabet.
    let body: Vec<u8> = (0..=255u8).rev().collect();
    let env = Envelope::sign("application/octet-stream+test", &body, &k);
    assert!(env.payload.contains('+') && env.payload.contains('/'));
    let trusted = [k.verifying_key()];
    let url = |s: &str| s.replace('+', "-").replace('/', "_");
    let mut safe = env.clone();
    safe.payload = url(&env.payload);
    safe.signatures[0].sig = url(&env.signatures[0].sig);
    assert_eq!(
        safe.verify(&trusted, "application/octet-stream+test")
            .unwrap()
            .body,
        body
    );
    // Unpadded, in either alphabet.
    let mut unpadded = safe.clone();
    unpadded.payload = unpadded.payload.trim_end_matches('=').to_owned();
    unpadded.signatures[0].sig = unpadded.signatures[0].sig.trim_end_matches('=').to_owned();
    assert!(
        unpadded
            .verify(&trusted, "application/octet-stream+test")
            .is_ok()
    );
    // One alphabet per value: mixing them is not base64 of either kind.
    let mut mixed = env.clone();
    mixed.payload = env.payload.replacen('+', "-", 1);
    assert!(matches!(
        mixed.verify(&trusted, "application/octet-stream+test"),
        Err(AttestError::Envelope(_))
    ));
    let mut junk = env.clone();
    junk.payload = "not base64!".into();
    assert!(matches!(
        junk.verify(&trusted, "application/octet-stream+test"),
        Err(AttestError::Envelope(_))
    ));
}

#[test]
fn envelope_json_ignores_unknown_fields_and_refuses_duplicates() {
    let k = key(5);
    let env = Envelope::sign(PAYLOAD_TYPE, b"{}", &k);
    let mut value = serde_json::to_value(&env).unwrap();
    value["future"] = Value::from(1);
    let read = Envelope::from_json(value.to_string().as_bytes()).unwrap();
    assert_eq!(read, env);
    let dup = format!(
        r#"{{"payload":"e30=","payload":"e30=","payloadType":"{PAYLOAD_TYPE}","signatures":[]}}"#
    );
    assert!(Envelope::from_json(dup.as_bytes()).is_err());
}

#[test]
fn a_decision_attests_and_verifies_with_replay() {
    let k = key(6);
    let file = attest_file("merge-gate/bundle.json", true, &k);
    let report = verify(file.as_bytes(), &[k.verifying_key()]).unwrap();
    assert_eq!(report.outcome, Outcome::Pass);
    assert_eq!(report.verification_result, "PASSED");
    assert!(report.replayed);
    let (bundle, _) = decided("merge-gate/bundle.json");
    // Every evidence of this bundle counts, so each has its test result.
    assert_eq!(
        report.test_results,
        bundle["evidence"].as_array().unwrap().len()
    );
    assert!(report.test_results > 0);
    assert_eq!(report.gate, "default");
    assert_eq!(
        report.policy_digest,
        verdict_core::digest::digest(verdict_core::digest::DigestKind::Policy, &bundle["policy"])
    );

    // Without the bundle the signed decision still verifies, but nothing was re-evaluated.
    let lean = attest_file("merge-gate/bundle.json", false, &k);
    assert!(
        !verify(lean.as_bytes(), &[k.verifying_key()])
            .unwrap()
            .replayed
    );

    // Anything but pass is FAILED, with the exact outcome alongside.
    for (path, outcome) in [
        ("rework/bundle.json", Outcome::Rework),
        ("human-required/bundle.json", Outcome::HumanRequired),
        ("blocked/bundle.json", Outcome::Blocked),
    ] {
        let (bundle, decision) = decided(path);
        let d: GateDecision = serde_json::from_value(decision.clone()).unwrap();
        assert_eq!(d.outcome, outcome, "{path}");
        if d.evaluation_key.is_none() {
            // A bundle the Gate could not read has no evaluation key: nothing to attest.
            let input = DecisionInput {
                gate: "default",
                decision: &decision,
                bundle: &bundle,
                include_bundle: true,
                verifier_version: BTreeMap::new(),
                clock: Clock::System,
            };
            assert!(attest(&input, &k).is_err(), "{path}");
            continue;
        }
        let file = attest_file(path, true, &k);
        let report = verify(file.as_bytes(), &[k.verifying_key()]).unwrap();
        assert_eq!(report.outcome, outcome);
        assert_eq!(report.verification_result, "FAILED");
        // Verified, but never a pass to rely on, at any instant.
        assert_eq!(
            report.refusals(&at("2026-11-30T12:00:00Z"), true),
            [Refusal::NotPassed { outcome }]
        );
    }
}

/// The merge-gate bundle with its check evidence made time-sensitive: observed at 11:50 and
/// stale 900 s later, so the pass decided at 12:00 is valid until 12:05.
fn timed_pass() -> (Value, Value) {
    let mut bundle = example("merge-gate/bundle.json");
    for e in bundle["evidence"].as_array_mut().unwrap() {
        e["freshness"] = serde_json::json!({"kind": "time", "max_age_s": 900});
    }
    let decision = verdict_core::gate::evaluate_value(&bundle);
    assert_eq!(decision.outcome, Outcome::Pass);
    let value = serde_json::from_slice(&decision.canonical_bytes().unwrap()).unwrap();
    (bundle, value)
}

#[test]
fn a_pass_is_relied_on_only_before_its_valid_until() {
    let k = key(20);
    let (bundle, decision) = timed_pass();
    for include_bundle in [true, false] {
        let file = attest_bundle(&bundle, &decision, include_bundle, &k, Clock::System);
        let report = verify(file.as_bytes(), &[k.verifying_key()]).unwrap();
        assert_eq!(report.valid_until, Some(at("2026-11-30T12:05:00Z")));
        assert_eq!(report.time_verified, at("2026-11-30T12:00:00Z"));
        assert_eq!(report.clock, Clock::System);
        assert!(
            report
                .refusals(&at("2026-11-30T12:04:59.999Z"), false)
                .is_empty()
        );
        // At valid_until the pass no longer applies (the bound is exclusive), nor after it.
        for later in ["2026-11-30T12:05:00Z", "2027-01-01T00:00:00Z"] {
            assert_eq!(
                report.refusals(&at(later), false),
                [Refusal::Expired {
                    valid_until: at("2026-11-30T12:05:00Z")
                }],
                "{later}"
            );
        }
    }
    // A pass of content evidence only has no valid_until, and a verifier says so.
    let file = attest_file("merge-gate/bundle.json", true, &k);
    let report = verify(file.as_bytes(), &[k.verifying_key()]).unwrap();
    assert_eq!(report.valid_until, None);
    assert!(
        report
            .refusals(&at("2030-01-01T00:00:00Z"), false)
            .is_empty()
    );
}

#[test]
fn a_manual_clock_is_named_in_the_summary_and_refused_unless_allowed() {
    let k = key(21);
    let (bundle, decision) = timed_pass();
    let file = attest_bundle(&bundle, &decision, true, &k, Clock::Manual);
    let first = Envelope::from_json(file.lines().next().unwrap().as_bytes()).unwrap();
    let body = first
        .verify(&[k.verifying_key()], PAYLOAD_TYPE)
        .unwrap()
        .body;
    let raw: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(raw["predicate"][GATE_EXTENSION]["clock"], "manual");
    let report = verify(file.as_bytes(), &[k.verifying_key()]).unwrap();
    assert_eq!(report.clock, Clock::Manual);
    let before = at("2026-11-30T12:01:00Z");
    assert_eq!(report.refusals(&before, false), [Refusal::ManualClock]);
    assert!(report.refusals(&before, true).is_empty());
    // Allowing a manual clock never lets an expired pass through.
    assert_eq!(
        report.refusals(&at("2026-11-30T12:06:00Z"), true),
        [Refusal::Expired {
            valid_until: at("2026-11-30T12:05:00Z")
        }]
    );
    // A system-clock store says so as well.
    let system = attest_bundle(&bundle, &decision, true, &k, Clock::System);
    let first = Envelope::from_json(system.lines().next().unwrap().as_bytes()).unwrap();
    let body = first
        .verify(&[k.verifying_key()], PAYLOAD_TYPE)
        .unwrap()
        .body;
    let raw: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(raw["predicate"][GATE_EXTENSION]["clock"], "system");
    // A summary that does not name its clock, or names another, is refused, even signed.
    let silent = resign(&file, &k, |s| {
        s["predicate"][GATE_EXTENSION]
            .as_object_mut()
            .unwrap()
            .remove("clock");
    });
    assert!(matches!(
        verify(silent.as_bytes(), &[k.verifying_key()]),
        Err(AttestError::Content(_))
    ));
    let odd = resign(&file, &k, |s| {
        s["predicate"][GATE_EXTENSION]["clock"] = "simulated".into();
    });
    assert!(matches!(
        verify(odd.as_bytes(), &[k.verifying_key()]),
        Err(AttestError::Content(_))
    ));
}

/// Rewrites the summary of `file` with `change`, re-signed by `k`: a signer can sign anything,
/// so the content checks must hold on their own.
fn resign(file: &str, k: &SigningKey, change: impl FnOnce(&mut Value)) -> String {
    let mut lines: Vec<String> = file.lines().map(str::to_owned).collect();
    let env = Envelope::from_json(lines[0].as_bytes()).unwrap();
    let body = env.verify(&[k.verifying_key()], PAYLOAD_TYPE).unwrap().body;
    let mut statement: Value = serde_json::from_slice(&body).unwrap();
    change(&mut statement);
    let bytes = serde_json::to_vec(&statement).unwrap();
    lines[0] = Envelope::sign(PAYLOAD_TYPE, &bytes, k).to_json().unwrap();
    lines.join("\n")
}

#[test]
fn signed_content_that_contradicts_itself_is_refused() {
    let k = key(7);
    let trusted = [k.verifying_key()];
    let file = attest_file("rework/bundle.json", true, &k);
    assert!(verify(file.as_bytes(), &trusted).is_ok());

    // PASSED over a rework decision.
    let lie = resign(&file, &k, |s| {
        s["predicate"]["verificationResult"] = "PASSED".into();
    });
    assert!(matches!(
        verify(lie.as_bytes(), &trusted),
        Err(AttestError::Content(_))
    ));
    // An outcome that is not the embedded decision's.
    let lie = resign(&file, &k, |s| {
        s["predicate"][GATE_EXTENSION]["outcome"] = "pass".into();
        s["predicate"]["verificationResult"] = "PASSED".into();
        s["predicate"]["verifiedLevels"] = serde_json::json!(["VERDICT_GATE_PASS"]);
    });
    assert!(matches!(
        verify(lie.as_bytes(), &trusted),
        Err(AttestError::Content(_))
    ));
    // A decision rewritten to pass, with its digest recomputed: the bundle does not reproduce it.
    let lie = resign(&file, &k, |s| {
        let ext = &mut s["predicate"][GATE_EXTENSION];
        ext["decision"]["outcome"] = "pass".into();
        ext["decision"]["reasons"] = serde_json::json!([]);
        ext["reasons"] = serde_json::json!([]);
        ext["outcome"] = "pass".into();
        let d = verdict_core::digest::digest(
            verdict_core::digest::DigestKind::Decision,
            &ext["decision"],
        );
        ext["decision_digest"] = d.as_str().into();
        s["predicate"]["verificationResult"] = "PASSED".into();
        s["predicate"]["verifiedLevels"] = serde_json::json!(["VERDICT_GATE_PASS"]);
    });
    assert!(matches!(
        verify(lie.as_bytes(), &trusted),
        Err(AttestError::Replay(_))
    ));
    // Another subject in the statement than in the decision.
    let lie = resign(&file, &k, |s| {
        s["subject"][0]["digest"]["verdictSubject"] = "00".repeat(32).into();
    });
    assert!(matches!(
        verify(lie.as_bytes(), &trusted),
        Err(AttestError::Content(_))
    ));
    // A test result line moved in from another subject's file.
    let other = attest_file("merge-gate/bundle.json", true, &k);
    let foreign = other.lines().nth(1).unwrap();
    let spliced = format!("{file}{foreign}\n");
    assert!(matches!(
        verify(spliced.as_bytes(), &trusted),
        Err(AttestError::Content(_))
    ));
    // A test result removed, or repeated: the file no longer reports what the Gate read.
    let without: String = file
        .lines()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert!(file.lines().count() > 1);
    assert!(matches!(
        verify(without.as_bytes(), &trusted),
        Err(AttestError::Content(_))
    ));
    let twice = format!("{file}{}\n", file.lines().nth(1).unwrap());
    assert!(matches!(
        verify(twice.as_bytes(), &trusted),
        Err(AttestError::Content(_))
    ));
    // Only test results, no summary.
    let tail: String = file.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert!(verify(tail.as_bytes(), &trusted).is_err());
    // A file signed by someone else.
    assert!(matches!(
        verify(file.as_bytes(), &[key(8).verifying_key()]),
        Err(AttestError::Signature(_))
    ));
}

#[test]
fn an_inconsistent_bundle_is_never_attested() {
    let (bundle, decision) = decided("merge-gate/bundle.json");
    let (_, other) = decided("rework/bundle.json");
    let input = DecisionInput {
        gate: "default",
        decision: &other,
        bundle: &bundle,
        include_bundle: true,
        verifier_version: BTreeMap::new(),
        clock: Clock::System,
    };
    assert!(matches!(
        attest(&input, &key(9)),
        Err(AttestError::Replay(_))
    ));
    let _ = decision;
}

#[test]
fn rotation_keeps_old_files_verifiable() {
    let (old, new) = (key(10), key(11));
    let before = attest_file("merge-gate/bundle.json", true, &old);
    let after = attest_file("merge-gate/bundle.json", true, &new);
    let both = [new.verifying_key(), old.verifying_key()];
    let r = verify(before.as_bytes(), &both).unwrap();
    assert_eq!(
        r.key_ids.into_iter().collect::<Vec<_>>(),
        vec![keys::key_id(&old.verifying_key())]
    );
    assert!(verify(after.as_bytes(), &both).is_ok());
    assert!(verify(before.as_bytes(), &[new.verifying_key()]).is_err());
}

#[test]
fn statements_have_the_standard_shape() {
    let k = key(12);
    let file = attest_file("merge-gate/bundle.json", true, &k);
    let env = Envelope::from_json(file.lines().next().unwrap().as_bytes()).unwrap();
    let body = env.verify(&[k.verifying_key()], PAYLOAD_TYPE).unwrap().body;
    let raw: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(raw["_type"], "https://in-toto.io/Statement/v1");
    assert_eq!(
        raw["predicateType"],
        "https://slsa.dev/verification_summary/v1"
    );
    for field in [
        "verifier",
        "timeVerified",
        "resourceUri",
        "policy",
        "inputAttestations",
        "verificationResult",
        "verifiedLevels",
        GATE_EXTENSION,
    ] {
        assert!(raw["predicate"].get(field).is_some(), "{field}");
    }
    let s: Statement<VerificationSummary> = serde_json::from_value(raw).unwrap();
    assert_eq!(s.subject[0].name.as_deref(), Some("verdict-subject"));
    let (bundle, _) = decided("merge-gate/bundle.json");
    assert_eq!(s.predicate.time_verified, bundle["now"].as_str().unwrap());
    let resources = bundle["subject"]["resources"].as_array().unwrap();
    assert_eq!(s.subject.len(), 1 + resources.len());
    let first = resources[0]["digest"].as_str().unwrap();
    assert_eq!(
        s.subject[1].digest["sha256"],
        first.trim_start_matches("sha256:")
    );
}

#[test]
fn an_independent_implementation_verifies_the_envelopes() {
    let Some(python) = std::env::var_os("VERDICT_ATTEST_PYTHON") else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but VERDICT_ATTEST_PYTHON is not set: .ci/run installs it"
        );
        eprintln!(
            "skipped the securesystemslib / in-toto-attestation check: VERDICT_ATTEST_PYTHON is unset"
        );
        return;
    };
    let k = key(13);
    let dir = std::env::temp_dir().join(format!("verdict-attest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/verify_envelopes.py");
    let public = keys::hex(k.verifying_key().as_bytes());
    let run = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::process::Command::new(&python)
            .arg(&script)
            .arg(&path)
            .arg(&public)
            .output()
            .unwrap()
    };
    let file = attest_file("merge-gate/bundle.json", true, &k);
    let out = run("good.jsonl", &file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("verified {}", file.lines().count()));
    // The same implementation refuses a flipped payload byte.
    let mut env = Envelope::from_json(file.lines().next().unwrap().as_bytes()).unwrap();
    let mut body = base64::engine::general_purpose::STANDARD
        .decode(&env.payload)
        .unwrap();
    body[5] ^= 0x01;
    env.payload = b64_encode(&body);
    let out = run("bad.jsonl", &format!("{}\n", env.to_json().unwrap()));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("line 1: signature"));
    // And our URL-safe spelling is read by it too.
    let env = Envelope::from_json(file.lines().next().unwrap().as_bytes()).unwrap();
    let mut safe = env.clone();
    safe.payload = env.payload.replace('+', "-").replace('/', "_");
    safe.signatures[0].sig = env.signatures[0].sig.replace('+', "-").replace('/', "_");
    let out = run("safe.jsonl", &format!("{}\n", safe.to_json().unwrap()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The merge-gate bundle and its pass, with the subject it is about.
fn merge_gate() -> (Value, GateDecision, Subject) {
    let (bundle, decision) = decided("merge-gate/bundle.json");
    let subject = serde_json::from_value(bundle["subject"].clone()).unwrap();
    (bundle, serde_json::from_value(decision).unwrap(), subject)
}

#[test]
fn junit_reports_counted_evidence_every_missing_check_and_the_decision() {
    let (bundle, pass, subject) = merge_gate();
    let xml = junit::junit(
        &bundle,
        Applicable::Decision(&pass, &subject),
        Clock::System,
    )
    .unwrap();
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"));
    // One counted passing evidence and the passing decision.
    assert!(
        xml.contains("tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"0\""),
        "{xml}"
    );
    assert!(
        xml.contains("classname=\"verdict.gate\" name=\"decision\""),
        "{xml}"
    );

    // The decision that applies is not a pass, or none applies: never all green.
    let rework: GateDecision = serde_json::from_value(decided("rework/bundle.json").1).unwrap();
    let xml = junit::junit(
        &bundle,
        Applicable::Decision(&rework, &subject),
        Clock::System,
    )
    .unwrap();
    assert!(xml.contains("failures=\"1\" errors=\"0\""), "{xml}");
    assert!(xml.contains("message=\"the gate decided rework\""), "{xml}");
    let xml = junit::junit(&bundle, Applicable::None("no decision yet"), Clock::System).unwrap();
    assert!(xml.contains("failures=\"1\" errors=\"0\""), "{xml}");
    assert!(xml.contains("type=\"no_decision\""), "{xml}");

    // Without its evidence, every pinned check is an error, never a silent pass.
    let mut empty = bundle.clone();
    empty["evidence"] = serde_json::json!([]);
    let xml = junit::junit(&empty, Applicable::None("x"), Clock::System).unwrap();
    assert_eq!(xml.matches("type=\"evidence_missing\"").count(), 1, "{xml}");

    // Evidence about another subject is refused.
    let mut mixed = bundle.clone();
    let (rework_bundle, _) = decided("rework/bundle.json");
    mixed["evidence"] = rework_bundle["evidence"].clone();
    assert!(junit::junit(&mixed, Applicable::None("x"), Clock::System).is_err());
    assert_eq!(
        junit::escape("a<b>&\"c'\u{1}\n"),
        "a&lt;b&gt;&amp;&quot;c&apos;\u{FFFD}&#10;"
    );
}

#[test]
fn evidence_the_gate_does_not_count_is_never_a_passing_test() {
    let (bundle, _, subject) = merge_gate();
    // The producer's own passing run of the check, in place of the runner's.
    let mut own = bundle.clone();
    own["evidence"][0]["produced_by"] =
        serde_json::json!({"principal": subject.producer.principal.as_str(), "role": "producer"});
    own["evidence"][0]["id"] = "ev-own".into();
    let decision = verdict_core::gate::evaluate_value(&own);
    assert_ne!(decision.outcome, Outcome::Pass);
    let xml = junit::junit(
        &own,
        Applicable::Decision(&decision, &subject),
        Clock::System,
    )
    .unwrap();
    // Skipped with the Gate's reason; the check it claims is missing; the decision fails.
    assert!(
        xml.contains("tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"1\""),
        "{xml}"
    );
    assert!(xml.contains("<skipped message=\"not counted: "), "{xml}");
    assert!(xml.contains("type=\"evidence_missing\""), "{xml}");
    // The same with the runner's evidence beside it: the runner's counts, the producer's
    // is still skipped, and the decision decides.
    let mut both = bundle.clone();
    let extra = own["evidence"][0].clone();
    both["evidence"].as_array_mut().unwrap().push(extra);
    let decision = verdict_core::gate::evaluate_value(&both);
    let xml = junit::junit(
        &both,
        Applicable::Decision(&decision, &subject),
        Clock::System,
    )
    .unwrap();
    assert!(xml.contains("skipped=\"1\""), "{xml}");
    assert!(!xml.contains("type=\"evidence_missing\""), "{xml}");
    // Stale evidence: skipped with evidence_stale, and the check is missing.
    let mut stale = bundle.clone();
    stale["evidence"][0]["freshness"] = serde_json::json!({"kind": "time", "max_age_s": 60});
    let decision = verdict_core::gate::evaluate_value(&stale);
    let xml = junit::junit(
        &stale,
        Applicable::Decision(&decision, &subject),
        Clock::System,
    )
    .unwrap();
    assert!(xml.contains("evidence_stale"), "{xml}");
    assert!(xml.contains("skipped=\"1\""), "{xml}");
    assert!(xml.contains("type=\"evidence_missing\""), "{xml}");
}

#[test]
fn github_payloads_say_success_only_for_an_applicable_pass() {
    let sha = "a".repeat(40);
    let outcome = |path: &str| -> GateDecision { serde_json::from_value(decided(path).1).unwrap() };
    let subject = naming(&sha);
    let pass = payloads(
        "default",
        &sha,
        Applicable::Decision(&outcome("merge-gate/bundle.json"), &subject),
        Clock::System,
    )
    .unwrap();
    assert_eq!(
        (
            pass.check_run.conclusion.as_str(),
            pass.commit_status.state.as_str()
        ),
        ("success", "success")
    );
    assert_eq!(pass.check_run.status, "completed");
    assert_eq!(pass.commit_status.context, "verdict/default");
    for (path, conclusion, state) in [
        ("rework/bundle.json", "failure", "failure"),
        ("human-required/bundle.json", "action_required", "pending"),
        ("blocked/bundle.json", "failure", "error"),
    ] {
        let p = payloads(
            "default",
            &sha,
            Applicable::Decision(&outcome(path), &subject),
            Clock::System,
        )
        .unwrap();
        assert_eq!(p.check_run.conclusion, conclusion, "{path}");
        assert_eq!(p.commit_status.state, state, "{path}");
        assert!(p.commit_status.description.chars().count() <= 140);
    }
    let none = payloads(
        "default",
        &sha,
        Applicable::None("subject_moved"),
        Clock::System,
    )
    .unwrap();
    assert_eq!(none.check_run.conclusion, "action_required");
    assert_eq!(none.commit_status.state, "pending");
    assert!(payloads("default", "HEAD", Applicable::None("x"), Clock::System).is_err());
    assert!(
        payloads(
            "default",
            &"A".repeat(40),
            Applicable::None("x"),
            Clock::System
        )
        .is_err()
    );
}

/// The merge-gate subject with a work item naming commit `sha`.
fn naming(sha: &str) -> Subject {
    let (bundle, _) = decided("merge-gate/bundle.json");
    let mut subject: Subject = serde_json::from_value(bundle["subject"].clone()).unwrap();
    subject.work_items.push(
        serde_json::from_value(serde_json::json!({"kind": "commit", "id": "repo", "version": sha}))
            .unwrap(),
    );
    subject
}

#[test]
fn a_decision_is_posted_only_on_a_commit_its_subject_names() {
    let d: GateDecision = serde_json::from_value(decided("merge-gate/bundle.json").1).unwrap();
    let named = "d".repeat(40);
    let subject = naming(&named);
    let ok = payloads(
        "default",
        &named,
        Applicable::Decision(&d, &subject),
        Clock::System,
    )
    .unwrap();
    assert_eq!(ok.check_run.conclusion, "success");
    // A work item's version in capitals names the same commit.
    let upper = naming(&"D".repeat(40));
    let ok = payloads(
        "default",
        &named,
        Applicable::Decision(&d, &upper),
        Clock::System,
    )
    .unwrap();
    assert_eq!(ok.commit_status.state, "success");
    // Any other commit: the pass is not posted on it, and the payloads say why.
    for other in [
        "e".repeat(40),
        "d".repeat(64),
        format!("{}e", "d".repeat(39)),
    ] {
        let p = payloads(
            "default",
            &other,
            Applicable::Decision(&d, &subject),
            Clock::System,
        )
        .unwrap();
        assert_eq!(
            (
                p.check_run.conclusion.as_str(),
                p.commit_status.state.as_str()
            ),
            ("failure", "failure"),
            "{other}"
        );
        assert!(
            p.check_run.output.summary.contains("does not name commit"),
            "{p:?}"
        );
        assert_eq!(p.check_run.external_id, None);
    }
    // A subject with no commit at all names none.
    let (bundle, _) = decided("merge-gate/bundle.json");
    let bare: Subject = serde_json::from_value(bundle["subject"].clone()).unwrap();
    let p = payloads(
        "default",
        &named,
        Applicable::Decision(&d, &bare),
        Clock::System,
    )
    .unwrap();
    assert_eq!(p.check_run.conclusion, "failure");
    // A 64-digit SHA names a resource whose SHA-256 it is, and only a 64-digit one.
    let hex = bare.resources[0].digest.as_str()["sha256:".len()..].to_owned();
    let p = payloads(
        "default",
        &hex,
        Applicable::Decision(&d, &bare),
        Clock::System,
    )
    .unwrap();
    assert_eq!(p.check_run.conclusion, "success");
    let p = payloads(
        "default",
        &hex[..40],
        Applicable::Decision(&d, &bare),
        Clock::System,
    )
    .unwrap();
    assert_eq!(p.check_run.conclusion, "failure");
}

#[test]
fn exports_from_a_manual_clock_say_so() {
    let sha = "b".repeat(40);
    let d: GateDecision = serde_json::from_value(decided("merge-gate/bundle.json").1).unwrap();
    let subject = naming(&sha);
    let system = payloads(
        "default",
        &sha,
        Applicable::Decision(&d, &subject),
        Clock::System,
    )
    .unwrap();
    assert_eq!(system.clock, Clock::System);
    assert!(!system.check_run.output.title.contains("manual"));
    let manual = payloads(
        "default",
        &sha,
        Applicable::Decision(&d, &subject),
        Clock::Manual,
    )
    .unwrap();
    assert_eq!(manual.clock, Clock::Manual);
    // Still the Gate's conclusion, but never a success that does not say whose time it was.
    assert_eq!(manual.check_run.conclusion, "success");
    for text in [
        &manual.check_run.output.title,
        &manual.check_run.output.summary,
        &manual.commit_status.description,
    ] {
        assert!(text.contains("manual clock"), "{text}");
    }
    let json = serde_json::to_value(&manual).unwrap();
    assert_eq!(json["clock"], "manual");

    let (bundle, _) = decided("merge-gate/bundle.json");
    let xml = junit::junit(&bundle, Applicable::Decision(&d, &subject), Clock::Manual).unwrap();
    assert!(
        xml.contains("<property name=\"clock\" value=\"manual\"/>"),
        "{xml}"
    );
    let xml = junit::junit(&bundle, Applicable::Decision(&d, &subject), Clock::System).unwrap();
    assert!(
        xml.contains("<property name=\"clock\" value=\"system\"/>"),
        "{xml}"
    );
}

/// The merge-gate bundle with, beside the runner's evidence, the producer's own passing run of
/// the same check: kept by the Gate, never counted (self-verification).
fn with_own_evidence() -> (Value, Value, String) {
    let (bundle, _, subject) = merge_gate();
    let mut own = bundle["evidence"][0].clone();
    own["produced_by"] =
        serde_json::json!({"principal": subject.producer.principal.as_str(), "role": "producer"});
    own["id"] = "ev-own".into();
    let mut both = bundle.clone();
    both["evidence"].as_array_mut().unwrap().push(own.clone());
    let runner_id = bundle["evidence"][0]["id"].as_str().unwrap().to_owned();
    (both, own, runner_id)
}

/// A JUnit testcase block of `xml` for evidence `id`.
fn case<'a>(xml: &'a str, id: &str) -> &'a str {
    let start = xml.find(&format!("[{id}]\">")).unwrap();
    let end = start + xml[start..].find("</testcase>").unwrap();
    &xml[start..end]
}

#[test]
fn each_evidence_is_shown_as_the_gate_counted_it_whatever_its_place() {
    // The Gate reads evidence once per digest in digest order; a report that took the Gate's
    // flags by place in the bundle showed the runner's counted evidence as skipped and the
    // producer's own as a passing test, depending on the order the list happened to have.
    let (both, own, runner_id) = with_own_evidence();
    let (_, _, subject) = merge_gate();
    for own_first in [false, true] {
        let mut b = both.clone();
        if own_first {
            let list = b["evidence"].as_array_mut().unwrap();
            list.retain(|e| e["id"] != "ev-own");
            list.insert(0, own.clone());
        }
        let decision = verdict_core::gate::evaluate_value(&b);
        let xml =
            junit::junit(&b, Applicable::Decision(&decision, &subject), Clock::System).unwrap();
        assert!(
            !case(&xml, &runner_id).contains("<skipped"),
            "own first: {own_first}: {xml}"
        );
        assert!(
            case(&xml, "ev-own").contains("<skipped message=\"not counted: "),
            "own first: {own_first}: {xml}"
        );
    }
}

#[test]
fn a_test_result_is_signed_only_for_evidence_the_gate_counted() {
    let k = key(11);
    let trusted = [k.verifying_key()];
    let (both, own, _) = with_own_evidence();
    let decision = verdict_core::gate::evaluate_value(&both);
    let decision: Value = serde_json::from_slice(&decision.canonical_bytes().unwrap()).unwrap();
    let file = attest_bundle(&both, &decision, true, &k, Clock::System);
    let report = verify(file.as_bytes(), &trusted).unwrap();
    // The runner's evidence has its test result; the producer's own run, which the Gate kept
    // but did not count, has none, though the summary lists it among what the Gate read.
    assert_eq!(report.test_results, 1, "{file}");
    assert!(!file.lines().skip(1).any(|l| {
        let env = Envelope::from_json(l.as_bytes()).unwrap();
        let body = env.verify(&trusted, PAYLOAD_TYPE).unwrap().body;
        String::from_utf8(body).unwrap().contains("ev-own")
    }));

    // The key's holder adds a PASSED test result for the producer's evidence: refused, with
    // the bundle or without it.
    let own_digest = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &own);
    let forged_line = |file: &str| -> String {
        let env = Envelope::from_json(file.lines().nth(1).unwrap().as_bytes()).unwrap();
        let mut s: Value =
            serde_json::from_slice(&env.verify(&trusted, PAYLOAD_TYPE).unwrap().body).unwrap();
        let ext = s["predicate"]
            .as_object_mut()
            .unwrap()
            .values_mut()
            .find(|v| v.get("evidence_digest").is_some())
            .unwrap();
        ext["evidence"] = own.clone();
        ext["evidence_digest"] = own_digest.as_str().into();
        Envelope::sign(PAYLOAD_TYPE, &serde_json::to_vec(&s).unwrap(), &k)
            .to_json()
            .unwrap()
    };
    let added = format!("{file}{}\n", forged_line(&file));
    let err = verify(added.as_bytes(), &trusted).unwrap_err();
    assert!(err.to_string().contains("did not count"), "{err}");
    let lean = attest_bundle(&both, &decision, false, &k, Clock::System);
    let added = format!("{lean}{}\n", forged_line(&lean));
    assert!(verify(added.as_bytes(), &trusted).is_err());

    // And names it counted in the summary too: the embedded bundle says otherwise.
    let counted_too = resign(&file, &k, |s| {
        let list = s["predicate"][GATE_EXTENSION]["counted_evidence"]
            .as_array_mut()
            .unwrap();
        list.push(own_digest.as_str().into());
        list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
    });
    let counted_too = format!("{counted_too}\n{}\n", forged_line(&file));
    assert!(matches!(
        verify(counted_too.as_bytes(), &trusted),
        Err(AttestError::Replay(_))
    ));
}

#[test]
fn a_relying_party_pins_the_subject_gate_and_policy() {
    let k = key(12);
    let file = attest_file("merge-gate/bundle.json", true, &k);
    let report = verify(file.as_bytes(), &[k.verifying_key()]).unwrap();
    let exact = Pins {
        subject_digest: Some(report.subject_digest.clone()),
        gate: Some("default".to_owned()),
        policy_digest: Some(report.policy_digest.clone()),
    };
    assert!(report.unpinned(&exact).is_empty());
    assert!(report.unpinned(&Pins::default()).is_empty());
    // A pass signed for a lenient gate of the same store is no pass for the strict one.
    let strict = Pins {
        gate: Some("strict".to_owned()),
        ..exact.clone()
    };
    assert_eq!(
        report.unpinned(&strict),
        [Refusal::Unpinned {
            what: "gate",
            wanted: "strict".to_owned(),
            found: "default".to_owned(),
        }]
    );
    let other: verdict_core::digest::Digest = format!("sha256:{}", "0".repeat(64)).parse().unwrap();
    let elsewhere = Pins {
        subject_digest: Some(other.clone()),
        gate: None,
        policy_digest: Some(other),
    };
    let refused: Vec<&str> = report
        .unpinned(&elsewhere)
        .iter()
        .map(|r| match r {
            Refusal::Unpinned { what, .. } => *what,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(refused, ["subject", "policy"]);
}
