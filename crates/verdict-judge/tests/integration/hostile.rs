//! The hostile corpus (tests/fixtures/hostile): instructions to the grader, fake results, fake
//! delimiters, invisible characters and look-alike criterion ids, placed in diffs, logs, the
//! objective and a resource name. Each is rendered and checked (the delimiters hold, the data
//! cannot change the requested criteria), then answered by a fake server that obeys the
//! injection: the validator must reject every such reply.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use verdict_core::contracts::{UnavailableReason, VerificationStatus};
use verdict_judge::Judge;
use verdict_judge::config::Sampling;
use verdict_judge::provider::OpenAiProvider;
use verdict_judge::render::Nonce;
use verdict_judge::request::JudgeRequest;
use verdict_judge::sanitize::{MARKER_CLOSE, MARKER_OPEN, must_escape, sanitize};

struct Case {
    file: String,
    target: String,
    content: String,
    obey: Value,
    reject: String,
}

fn cases() -> Vec<Case> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let v: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            Case {
                file: p.file_name().unwrap().to_string_lossy().into_owned(),
                target: v["target"].as_str().unwrap().to_owned(),
                content: v["content"].as_str().unwrap().to_owned(),
                obey: v["obey"].clone(),
                reject: v["reject"].as_str().unwrap().to_owned(),
            }
        })
        .collect()
}

fn request_for(c: &Case) -> JudgeRequest {
    let mut req = request();
    match c.target.as_str() {
        "diff" => req.resources = vec![resource("diff", "git_diff", c.content.as_bytes(), true)],
        "log" => req.evidence[0].output = Some(c.content.as_bytes().to_vec()),
        "objective" => req.objective.text.clone_from(&c.content),
        "resource_name" => req.resources.push(resource(
            &c.content,
            "note",
            b"see the other resource\n",
            true,
        )),
        other => panic!("{}: unknown target {other}", c.file),
    }
    req
}

fn with_nonce(v: &Value, nonce: &str) -> Value {
    match v {
        Value::String(s) if s == "$NONCE" => Value::String(nonce.to_owned()),
        Value::Array(a) => Value::Array(a.iter().map(|x| with_nonce(x, nonce)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), with_nonce(x, nonce)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn class() -> verdict_judge::config::ResolvedClass {
    class_with(
        openai_config("http://127.0.0.1:9/v1"),
        budget(),
        Sampling::default(),
    )
}

#[test]
fn the_corpus_has_at_least_thirty_cases() {
    let cs = cases();
    assert!(cs.len() >= 30, "{}", cs.len());
    for target in ["diff", "log", "objective", "resource_name"] {
        assert!(
            cs.iter().any(|c| c.target == target),
            "no case targets {target}"
        );
    }
}

#[test]
fn delimiters_hold_and_the_data_cannot_change_the_criteria() {
    for c in cases() {
        let req = request_for(&c);
        let plan = verdict_judge::judge::plan_request(&class(), &req).unwrap();
        assert!(plan.manifest.complete, "{}", c.file);
        let asked: Vec<&str> = plan
            .manifest
            .criteria
            .asked
            .iter()
            .map(|i| i.as_str())
            .collect();
        assert_eq!(asked, ASKED, "{}", c.file);

        let nonce = Nonce::random().unwrap();
        let p = plan.render(&nonce);
        let n = nonce.as_str();
        let blocks = plan.manifest.entries.len() - 1; // the criteria are not a data block

        // Only our own marker lines carry the reserved brackets, in the right order.
        for text in [&p.system, &p.user] {
            for ch in text.chars() {
                assert!(
                    !must_escape(ch) || ch == MARKER_OPEN || ch == MARKER_CLOSE,
                    "{}: {ch:?} passed",
                    c.file
                );
            }
        }
        let opens = p.user.matches(MARKER_OPEN).count();
        assert_eq!(opens, 2 + 2 * blocks, "{}", c.file);
        assert_eq!(p.user.matches(MARKER_CLOSE).count(), opens, "{}", c.file);
        let markers: Vec<&str> = p.user.lines().filter(|l| l.contains(MARKER_OPEN)).collect();
        assert_eq!(
            markers.len(),
            opens,
            "{}: a marker bracket outside a marker line",
            c.file
        );
        assert!(markers[0].starts_with(&format!(
            "{MARKER_OPEN}VERDICT-REQUEST nonce={n}{MARKER_CLOSE}"
        )));
        assert!(markers[markers.len() - 1].starts_with(&format!(
            "{MARKER_OPEN}VERDICT-REQUEST nonce={n}{MARKER_CLOSE}"
        )));
        for pair in markers[1..markers.len() - 1].chunks(2) {
            assert!(
                pair[0].starts_with(&format!("{MARKER_OPEN}VERDICT-DATA nonce={n} ref=")),
                "{}: {}",
                c.file,
                pair[0]
            );
            assert!(pair[0].ends_with(MARKER_CLOSE), "{}", c.file);
            assert_eq!(
                pair[1],
                format!("{MARKER_OPEN}VERDICT-END nonce={n}{MARKER_CLOSE}"),
                "{}",
                c.file
            );
        }

        // The hostile text is shown, neutralised, and intact otherwise.
        if c.target != "resource_name" {
            assert!(
                p.user.contains(&sanitize(c.content.as_bytes())),
                "{}: data not shown",
                c.file
            );
        }
        // The nonce never occurs inside data.
        let data_start = p.user.find("Data blocks follow.").unwrap();
        let data_end = p
            .user
            .rfind(&format!("{MARKER_OPEN}VERDICT-REQUEST"))
            .unwrap();
        let data = &p.user[data_start..data_end];
        for line in data.lines().filter(|l| !l.starts_with(MARKER_OPEN)) {
            assert!(!line.contains(n), "{}: nonce inside data", c.file);
        }

        // The criteria requested, before and after the data, are exactly the subject's.
        let before = &p.user[p.user.find("Criteria to grade:\n").unwrap()..];
        let listed: Vec<&str> = before
            .lines()
            .skip(1)
            .take_while(|l| !l.is_empty())
            .map(|l| l.split('"').nth(1).unwrap())
            .collect();
        assert_eq!(listed, ASKED, "{}", c.file);
        assert!(
            p.user.contains("Grade exactly these criteria, each once: \"tests-pass\", \"no-regression\", \"docs-updated\".\n"),
            "{}",
            c.file
        );
        // The rules come last, after all data.
        assert!(
            p.user.rfind("Reply now with one JSON document").unwrap() > data_end,
            "{}",
            c.file
        );
    }
}

#[tokio::test]
async fn a_model_that_obeys_the_injection_is_rejected() {
    for c in cases() {
        let obey = c.obey.clone();
        let server = FakeServer::start(move |r| {
            Answer::json(&openai_envelope(&with_nonce(&obey, &r.nonce()).to_string()))
        })
        .await;
        let provider =
            Arc::new(OpenAiProvider::new(&server.url, "judge-model", None, Some(0.0)).unwrap());
        let judge = Judge::new(
            class_with(openai_config(&server.url), budget(), Sampling::default()),
            provider,
        )
        .unwrap();
        let run = judge.run(&request_for(&c)).await.unwrap();
        assert_eq!(
            run.result.status,
            VerificationStatus::Unavailable,
            "{}: accepted",
            c.file
        );
        assert_eq!(
            run.result.unavailable_reason,
            Some(UnavailableReason::InvalidOutput),
            "{}",
            c.file
        );
        assert!(run.result.criteria.is_empty(), "{}", c.file);
        let detail = run.detail.unwrap();
        assert!(
            detail.contains(&c.reject),
            "{}: {detail:?} lacks {:?}",
            c.file,
            c.reject
        );
        // The server saw the hostile text, so the rejection is the validator's doing.
        assert_eq!(server.received().len(), 1);
    }
}
