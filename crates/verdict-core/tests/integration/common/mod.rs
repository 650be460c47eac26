//! A small bundle builder for tests. Items say `"$S"` / `"$P"` where they mean the subject's
//! or the policy's digest; [`Bundle::value`] fills them in after every change, so a test edits
//! the subject freely and its evidence keeps pointing at it.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::{Value, json};
use verdict_core::contracts::{GateDecision, Outcome, ReasonCode};
use verdict_core::digest::{DigestKind, digest};
use verdict_core::gate;

pub const DEF: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
pub const OTHER_DEF: &str =
    "sha256:2222222222222222222222222222222222222222222222222222222222222222";
pub const CONTENT: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
pub const NOW: &str = "2026-11-30T12:00:00Z";

#[derive(Clone)]
pub struct Bundle {
    pub v: Value,
}

pub fn evidence(id: &str, check: &str, outcome: &str) -> Value {
    json!({
        "id": id, "kind": "check", "check": check, "subject_digest": "$S", "definition_digest": DEF,
        "produced_by": {"principal": "ci-runner", "role": "runner"}, "outcome": outcome, "hard": true,
        "content_digest": CONTENT, "observed_at": "2026-11-30T11:50:00Z", "freshness": {"kind": "content"}
    })
}

pub fn row(id: &str, status: &str, refs: &[&str]) -> Value {
    json!({"id": id, "status": status, "method": "model_review", "evidence_refs": refs})
}

pub fn verification(id: &str, class: &str, rows: Vec<Value>) -> Value {
    json!({
        "id": id,
        "verifier": {"principal": format!("{class}-1"), "class": class, "run": format!("run-{id}")},
        "subject_digest": "$S", "generation": 3, "status": "completed",
        "criteria": rows, "findings": [], "dispositions": []
    })
}

pub fn unavailable(id: &str, class: &str, reason: &str) -> Value {
    json!({
        "id": id,
        "verifier": {"principal": format!("{class}-1"), "class": class, "run": format!("run-{id}")},
        "subject_digest": "$S", "generation": 3, "status": "unavailable", "unavailable_reason": reason,
        "criteria": [], "findings": [], "dispositions": []
    })
}

pub fn finding(id: &str, version: u64, criterion: &str, severity: &str, scope: &str) -> Value {
    json!({
        "id": id, "version": version, "criterion": criterion, "type": "bug", "severity": severity,
        "scope": scope, "subject_digest": "$S", "evidence_refs": ["diff"], "method": "model_review"
    })
}

pub fn human(id: &str, principal: &str, decision: &str) -> Value {
    json!({
        "id": id, "principal": principal, "role": "human", "subject_digest": "$S", "policy_digest": "$P",
        "decision": decision, "reason": "looked at it", "decided_at": "2026-11-30T11:55:00Z"
    })
}

fn fill(v: &mut Value, s: &str, p: &str) {
    match v {
        Value::String(x) if x == "$S" => *x = s.to_owned(),
        Value::String(x) if x == "$P" => *x = p.to_owned(),
        Value::Array(a) => a.iter_mut().for_each(|x| fill(x, s, p)),
        Value::Object(o) => o.values_mut().for_each(|x| fill(x, s, p)),
        _ => {}
    }
}

impl Bundle {
    /// The smallest bundle that passes: one required criterion, one required check with
    /// passing runner evidence, one required reviewer whose row cites that evidence.
    pub fn base() -> Self {
        Self {
            v: json!({
                "schema": "verdict.gate-bundle/v1",
                "policy": {
                    "schema": "verdict.policy/v1", "name": "merge", "revision": 1,
                    "required_checks": ["unit"], "required_verifiers": ["reviewer"]
                },
                "subject": {
                    "schema": "verdict.subject/v1",
                    "execution": {"id": "ex-1", "generation": 3},
                    "work_items": [{"kind": "work_package", "id": "wp-1", "version": "1"}],
                    "producer": {"principal": "agent-1", "run": "run-1"},
                    "objective": {"revision": "o1", "digest": CONTENT},
                    "criteria": {"revision": "c1", "items": [{"id": "works", "text": "it works"}]},
                    "resources": [{"name": "diff", "kind": "git_diff", "digest": CONTENT}],
                    "checks": [{"id": "unit", "definition_digest": DEF, "criteria": ["works"]}],
                    "workflow_revision": "wf-1",
                    "risk": {"class": "low", "revision": "r1", "capabilities": []}
                },
                "evidence": [evidence("ev-unit", "unit", "pass")],
                "verifications": [verification("vr-1", "reviewer", vec![row("works", "passed", &["ev-unit"])])],
                "human_decisions": [],
                "prior_findings": [],
                "now": NOW
            }),
        }
    }

    pub fn subject_digest(&self) -> String {
        digest(DigestKind::Subject, &self.v["subject"]).to_string()
    }

    pub fn policy_digest(&self) -> String {
        digest(DigestKind::Policy, &self.v["policy"]).to_string()
    }

    /// The bundle with every `$S` / `$P` replaced.
    pub fn value(&self) -> Value {
        let (s, p) = (self.subject_digest(), self.policy_digest());
        let mut v = self.v.clone();
        for field in [
            "evidence",
            "verifications",
            "human_decisions",
            "prior_findings",
        ] {
            fill(&mut v[field], &s, &p);
        }
        v
    }

    pub fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&self.value()).unwrap()
    }

    pub fn eval(&self) -> GateDecision {
        gate::evaluate(&self.bytes())
    }

    pub fn push(&mut self, field: &str, item: Value) -> &mut Self {
        self.v[field].as_array_mut().unwrap().push(item);
        self
    }

    pub fn add_criterion(&mut self, c: Value) -> &mut Self {
        self.v["subject"]["criteria"]["items"]
            .as_array_mut()
            .unwrap()
            .push(c);
        self
    }
}

pub fn codes(d: &GateDecision) -> Vec<ReasonCode> {
    let mut c: Vec<ReasonCode> = d.reasons.iter().map(|r| r.code).collect();
    c.sort();
    c.dedup();
    c
}

/// Asserts the outcome and that `code` is among the reasons.
pub fn assert_reason(d: &GateDecision, outcome: Outcome, code: ReasonCode) {
    assert!(
        codes(d).contains(&code),
        "expected {code:?} among {:?}\n{}",
        codes(d),
        serde_json::to_string_pretty(d).unwrap()
    );
    assert_eq!(
        d.outcome,
        outcome,
        "{}",
        serde_json::to_string_pretty(d).unwrap()
    );
}
