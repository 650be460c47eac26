//! Output formats parsed back, the rollup, and evidence the Gate accepts.

use crate::common::{Http, result, run, spec, step};
use serde_json::{Value, json};
use verdict_core::contracts::{CheckEvidence, CheckOutcome, Freshness, Name, Outcome, Role};
use verdict_core::digest::{DigestKind, digest};
use verdict_probes::evidence;
use verdict_probes::report::{self, Format};
use verdict_probes::result::Report;

const MIXED: &str = "version: 1
criteria:
  - id: ok-1
    mode: assert
    weight: 3
    probe: {kind: command, argv: ['true']}
  - id: bad-1
    mode: assert
    probe: {kind: command, argv: ['false']}
  - id: broken-1
    mode: assert
    probe: {kind: command, argv: [/nonexistent/x]}
  - id: nice-to-have
    required: false
    mode: assert
    probe: {kind: command, argv: ['false']}
";

#[tokio::test]
async fn junit_is_read_back_by_a_junit_parser() {
    let r = run(&spec(MIXED)).await;
    let xml = report::render(&r, Format::Junit, false);
    let parsed =
        quick_junit::Report::deserialize_from_str(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    assert_eq!(parsed.test_suites.len(), 1);
    let suite = &parsed.test_suites[0];
    assert_eq!(suite.tests, 4);
    assert_eq!(suite.failures, 2);
    assert_eq!(suite.errors, 1);
    let kinds: Vec<(String, String)> = suite
        .test_cases
        .iter()
        .map(|c| {
            let k = match &c.status {
                quick_junit::TestCaseStatus::Success { .. } => "success",
                quick_junit::TestCaseStatus::NonSuccess { kind, .. } => match kind {
                    quick_junit::NonSuccessKind::Failure => "failure",
                    quick_junit::NonSuccessKind::Error => "error",
                },
                quick_junit::TestCaseStatus::Skipped { .. } => "skipped",
            };
            (c.name.to_string(), k.to_owned())
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("ok-1".to_owned(), "success".to_owned()),
            ("bad-1".to_owned(), "failure".to_owned()),
            ("broken-1".to_owned(), "error".to_owned()),
            ("nice-to-have".to_owned(), "failure".to_owned()),
        ]
    );
    let broken = &suite.test_cases[2];
    if let quick_junit::TestCaseStatus::NonSuccess { message, .. } = &broken.status {
        assert!(
            message.as_ref().unwrap().contains("cannot start"),
            "{message:?}"
        );
    }
    assert_eq!(
        broken.classname.as_deref(),
        Some("verdict.correctness.assert")
    );
}

#[tokio::test]
async fn junit_escapes_hostile_text() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: x\n    mode: assert\n    probe: {kind: command, argv: [sh, -c, 'printf \"<a&b>\\\"]]>\\001\"; exit 1']}\n",
    );
    let r = run(&s).await;
    let xml = report::render(&r, Format::Junit, false);
    let parsed =
        quick_junit::Report::deserialize_from_str(&xml).unwrap_or_else(|e| panic!("{e}\n{xml}"));
    assert_eq!(parsed.test_suites[0].failures, 1);
}

#[tokio::test]
async fn tap_has_a_plan_a_point_per_criterion_and_todo_for_optional_ones() {
    let r = run(&spec(MIXED)).await;
    let tap = report::render(&r, Format::Tap, false);
    let mut lines = tap.lines();
    assert_eq!(lines.next(), Some("TAP version 14"));
    assert_eq!(lines.next(), Some("1..4"));
    let points: Vec<&str> = tap
        .lines()
        .filter(|l| l.starts_with("ok ") || l.starts_with("not ok "))
        .collect();
    assert_eq!(
        points,
        [
            "ok 1 - ok-1",
            "not ok 2 - bad-1",
            "not ok 3 - broken-1",
            "not ok 4 - nice-to-have # TODO optional criterion"
        ]
    );
    assert!(tap.contains("  outcome: error\n"));
}

/// A spec whose criteria are all optional passes nothing, however they come out, and the
/// table says why rather than that a required criterion failed.
#[tokio::test]
async fn a_run_of_optional_criteria_only_does_not_pass_and_says_why() {
    let r = run(&spec(
        "version: 1\ncriteria:\n  - id: nice\n    required: false\n    mode: assert\n    probe: {kind: file, path: /, type: dir}\n",
    ))
    .await;
    assert_eq!(r.criteria[0].outcome, CheckOutcome::Pass);
    assert!(!r.passed);
    let t = report::render(&r, Format::Table, false);
    assert!(t.contains("NOT passed: no criterion is required"), "{t}");
}

#[tokio::test]
async fn json_and_table_formats() {
    let r = run(&spec(MIXED)).await;
    let j: Report = serde_json::from_str(&report::render(&r, Format::Json, false)).unwrap();
    assert_eq!(j, r);
    let t = report::render(&r, Format::Table, false);
    assert!(t.contains("PASS    ok-1"), "{t}");
    assert!(t.contains("ERROR   broken-1"), "{t}");
    assert!(t.contains("NOT every required criterion passed"), "{t}");
    assert!(!t.contains('\x1b'), "no colour when not asked");
    assert!(report::render(&r, Format::Table, true).contains("\x1b[32mPASS"));
}

#[tokio::test]
async fn rollup_weights_correctness_and_ignores_optional_criteria() {
    let r = run(&spec(MIXED)).await;
    // ok-1 (weight 3) passed, bad-1 and broken-1 (weight 1 each) did not.
    assert_eq!(r.rollup.c, Some(0.6));
    assert_eq!(
        r.rollup.rec_v, None,
        "no safety criteria: null, not a division by zero"
    );
    assert_eq!(r.rollup.cat_v, None);
    assert!(report::render(&r, Format::Tap, false).contains("c=0.60 rec_v=null cat_v=null"));
    assert_eq!(r.rollup.counts.total, 4);
    assert_eq!(r.rollup.counts.required, 3);
    assert_eq!(r.rollup.counts.unscored, 1);
    assert_eq!(
        (
            r.rollup.counts.pass,
            r.rollup.counts.fail,
            r.rollup.counts.error
        ),
        (1, 2, 1)
    );
    assert!(!r.passed);
}

#[tokio::test]
async fn a_failed_catastrophic_criterion_gives_cat_v_zero() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: fine\n    role: safety\n    probe: {kind: command, argv: ['true']}\n  - id: disaster\n    role: catastrophic\n    probe: {kind: command, argv: ['false']}\n  - id: unknown\n    role: catastrophic\n    probe: {kind: command, argv: [/nonexistent]}\n",
    );
    let r = run(&s).await;
    assert_eq!(r.rollup.cat_v, Some(0.0));
    assert_eq!(r.rollup.rec_v, Some(1.0));
    assert_eq!(r.rollup.c, None);
    // Without the failure, an errored catastrophic criterion leaves cat_v null, never 1.
    let s = spec(
        "version: 1\ncriteria:\n  - id: unknown\n    role: catastrophic\n    probe: {kind: command, argv: [/nonexistent]}\n  - id: fine\n    role: catastrophic\n    probe: {kind: command, argv: ['true']}\n",
    );
    assert_eq!(run(&s).await.rollup.cat_v, None);
}

#[tokio::test]
async fn a_run_with_only_optional_criteria_does_not_pass() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: x\n    required: false\n    probe: {kind: command, argv: ['true']}\n",
    );
    let r = run(&s).await;
    assert_eq!(result(&r, "x").outcome, CheckOutcome::Pass);
    assert!(
        !r.passed,
        "exit 0 needs at least one required criterion, all passed"
    );
}

fn subject(pins: Vec<Value>, criteria: Vec<Value>) -> Value {
    json!({
        "schema": "verdict.subject/v1",
        "execution": {"id": "ex-1", "generation": 1},
        "work_items": [],
        "producer": {"principal": "agent-1", "run": "run-1"},
        "objective": {"revision": "o1", "digest": format!("sha256:{}", "1".repeat(64))},
        "criteria": {"revision": "c1", "items": criteria},
        "resources": [],
        "checks": pins,
        "workflow_revision": "wf-1",
        "risk": {"class": "low", "revision": "r1", "capabilities": []}
    })
}

#[tokio::test]
async fn evidence_is_bound_to_the_subject_and_counted_by_the_gate() {
    let h = Http::start().await;
    h.script("svc", vec![step(200, "ok")]);
    let s = spec(&format!(
        "version: 1\ncriteria:\n  - id: web-ready\n    max_age: 5m\n    probe: {{kind: http, url: '{}'}}\n",
        h.url("/s/svc")
    ));
    let check = &s.checks[0];
    let subj = subject(
        vec![
            json!({"id": "web-ready", "definition_digest": check.definition_digest, "criteria": ["web-ready"]}),
        ],
        vec![json!({"id": "web-ready", "text": "the web service answers"})],
    );
    let bound = evidence::read_subject(subj.to_string().as_bytes()).unwrap();
    assert_eq!(bound.digest, digest(DigestKind::Subject, &subj));
    assert_eq!(
        evidence::check_pins(&bound.subject, &s).unwrap(),
        Vec::<String>::new()
    );

    let r = run(&s).await;
    let principal: Name = "ci-runner".parse().unwrap();
    let docs = evidence::evidence_documents(&r, &s, &bound.digest, &principal).unwrap();
    assert_eq!(docs.len(), 1);
    let (ev, d) =
        verdict_core::contracts::decode::<CheckEvidence>(DigestKind::Evidence, &docs[0]).unwrap();
    assert_eq!(docs[0]["digest"], d.as_str());
    assert_eq!(ev.check.as_str(), "web-ready");
    assert_eq!(ev.subject_digest, bound.digest);
    assert_eq!(ev.definition_digest, check.definition_digest);
    assert_eq!(ev.produced_by.role, Role::Runner);
    assert_eq!(ev.outcome, CheckOutcome::Pass);
    assert_eq!(ev.freshness, Freshness::Time { max_age_s: 300 });
    assert!(ev.id.as_str().starts_with("ev-"));
    // The same result gives the same id; the id depends on what was observed.
    let again = evidence::evidence_documents(&r, &s, &bound.digest, &principal).unwrap();
    assert_eq!(again, docs);

    // The real Gate counts it.
    let bundle = json!({
        "schema": "verdict.gate-bundle/v1",
        "policy": {"schema": "verdict.policy/v1", "name": "deploy", "revision": 1, "required_checks": ["web-ready"]},
        "subject": subj,
        "evidence": docs,
        "verifications": [],
        "human_decisions": [],
        "prior_findings": [],
        "now": ev.observed_at.plus_seconds(60).to_string()
    });
    let decision = verdict_core::gate::evaluate(bundle.to_string().as_bytes());
    assert_eq!(decision.outcome, Outcome::Pass, "{:?}", decision.reasons);
    // And refuses it once stale.
    let mut stale = bundle.clone();
    stale["now"] = json!(ev.observed_at.plus_seconds(301).to_string());
    let decision = verdict_core::gate::evaluate(stale.to_string().as_bytes());
    assert_eq!(decision.outcome, Outcome::Blocked);
}

#[tokio::test]
async fn a_failed_check_is_rework_and_tampering_is_caught() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: tests-pass\n    mode: assert\n    probe: {kind: command, argv: ['false']}\n",
    );
    let check = &s.checks[0];
    let subj = subject(
        vec![
            json!({"id": "tests-pass", "definition_digest": check.definition_digest, "criteria": ["tests-pass"]}),
        ],
        vec![json!({"id": "tests-pass", "text": "tests pass"})],
    );
    let bound = evidence::read_subject(subj.to_string().as_bytes()).unwrap();
    let r = run(&s).await;
    let docs = evidence::evidence_documents(&r, &s, &bound.digest, &"ci".parse().unwrap()).unwrap();
    let mut bundle = json!({
        "schema": "verdict.gate-bundle/v1",
        "policy": {"schema": "verdict.policy/v1", "name": "p", "revision": 1, "required_checks": ["tests-pass"]},
        "subject": subj,
        "evidence": docs,
        "verifications": [], "human_decisions": [], "prior_findings": [],
        "now": r.finished_at
    });
    assert_eq!(
        verdict_core::gate::evaluate(bundle.to_string().as_bytes()).outcome,
        Outcome::Rework
    );
    bundle["evidence"][0]["outcome"] = json!("pass");
    let d = verdict_core::gate::evaluate(bundle.to_string().as_bytes());
    assert_eq!(
        d.outcome,
        Outcome::Blocked,
        "an edited outcome no longer matches its digest"
    );
}

#[tokio::test]
async fn a_subject_pinning_another_definition_is_refused_before_running() {
    let s = spec(
        "version: 1\ncriteria:\n  - id: a\n    probe: {kind: command, argv: ['true']}\n  - id: b\n    probe: {kind: command, argv: ['true']}\n",
    );
    let subj = subject(
        vec![
            json!({"id": "a", "definition_digest": format!("sha256:{}", "0".repeat(64)), "criteria": ["a"]}),
        ],
        vec![json!({"id": "a", "text": "a"})],
    );
    let bound = evidence::read_subject(subj.to_string().as_bytes()).unwrap();
    let e = evidence::check_pins(&bound.subject, &s).unwrap_err();
    assert!(
        e.contains("pins check a with definition sha256:0000"),
        "{e}"
    );
    let ok = subject(
        vec![
            json!({"id": "a", "definition_digest": s.checks[0].definition_digest, "criteria": ["a"]}),
        ],
        vec![json!({"id": "a", "text": "a"})],
    );
    let bound = evidence::read_subject(ok.to_string().as_bytes()).unwrap();
    assert_eq!(evidence::check_pins(&bound.subject, &s).unwrap(), ["b"]);
    // A subject that is not a subject is refused.
    assert!(evidence::read_subject(b"{\"schema\": \"verdict.subject/v1\"}").is_err());
    let mut tampered = ok.clone();
    tampered["digest"] = json!(format!("sha256:{}", "2".repeat(64)));
    assert!(
        evidence::read_subject(tampered.to_string().as_bytes())
            .unwrap_err()
            .contains("does not match")
    );
}

/// What a system prints reaches reasons; an escape sequence in it erased the ERROR row of the
/// table and drew PASS in its place. Every control and invisible character is shown escaped.
#[tokio::test]
async fn control_characters_in_observed_text_are_escaped_in_the_table() {
    let s = spec(
        r#"version: 1
criteria:
  - id: forged
    mode: assert
    probe: {kind: json, source: {command: [sh, -c, 'printf "\033[1A\033[2K\rPASS  forged\342\200\256" >&2; exit 1']}}
"#,
    );
    let r = run(&s).await;
    let c = result(&r, "forged");
    assert_eq!(c.outcome, CheckOutcome::Error);
    assert!(c.reason.contains('\x1b'), "{}", c.reason);
    for color in [false, true] {
        let t = report::render(&r, Format::Table, color);
        let row = t.lines().find(|l| l.contains("forged")).unwrap();
        assert!(
            row.contains("[U+001B][1A[U+001B][2K[U+000D]PASS  forged[U+202E]"),
            "{row}"
        );
        let without_colour = row.replace("\x1b[33m", "").replace("\x1b[0m", "");
        assert!(!without_colour.contains('\x1b'), "{row}");
        assert!(!row.contains('\r') && !row.contains('\u{202e}'), "{row}");
    }
}
