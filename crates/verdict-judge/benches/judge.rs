//! Benchmarks of the model verifier's own work (no provider): sanitizing untrusted text
//! against a plain copy, planning and rendering a large context, and validating a reply.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use std::hint::black_box;
use verdict_judge::judge::plan_with;
use verdict_judge::render::Nonce;
use verdict_judge::reply::{ReplyRules, ReplyValidator};
use verdict_judge::request::{JudgeRequest, ObjectiveInput, ResourceInput, VerifierIdentity};
use verdict_judge::sanitize::sanitize;

const SUBJECT: &str = "sha256:0ac282182c0ff7c3fa537b686f41beda4e5b04340ac0f1f9fd577a4c9b37f0ea";

fn diff(bytes: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes + 100);
    let mut i = 0;
    while out.len() < bytes {
        out.extend_from_slice(
            format!("+    let value_{i} = compute(\"input {i}\", &config)?; // é ü\n").as_bytes(),
        );
        i += 1;
    }
    out
}

fn request(criteria: usize, required_kib: usize, optional_kib: usize) -> JudgeRequest {
    let items: Vec<_> = (0..criteria)
        .map(|i| json!({"id": format!("c-{i}"), "text": format!("criterion {i} holds")}))
        .collect();
    let res = |name: &str, bytes: Vec<u8>, required| ResourceInput {
        name: name.parse().unwrap(),
        kind: "git_diff".parse().unwrap(),
        digest: verdict_core::digest::raw(&bytes),
        content: bytes,
        required,
    };
    JudgeRequest {
        result_id: "vr-1".parse().unwrap(),
        verifier: VerifierIdentity {
            principal: "reviewer-1".parse().unwrap(),
            class: "reviewer".parse().unwrap(),
            run: "vrun-1".parse().unwrap(),
        },
        subject_digest: SUBJECT.parse().unwrap(),
        generation: 1,
        objective: ObjectiveInput {
            revision: "r1".parse().unwrap(),
            text: "Make the change".into(),
            digest: None,
        },
        criteria: serde_json::from_value(json!({"revision": "c1", "items": items})).unwrap(),
        ask: None,
        resources: vec![
            res("diff", diff(required_kib * 1024), true),
            res("context", diff(optional_kib * 1024), false),
        ],
        evidence: vec![],
        prior_findings: vec![],
        evidence_refs_waived: vec![],
    }
}

fn benches(c: &mut Criterion) {
    let text = diff(1 << 20);
    let mut g = c.benchmark_group("sanitize_1mib");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.bench_function("plain_copy_baseline", |b| {
        b.iter(|| black_box(String::from_utf8_lossy(black_box(&text)).into_owned()))
    });
    g.bench_function("sanitize", |b| {
        b.iter(|| black_box(sanitize(black_box(&text))))
    });
    g.finish();

    let template = verdict_judge::template::builtin("reviewer").unwrap();
    let req = request(20, 256, 1024);
    let nonce = Nonce::random().unwrap();
    let mut g = c.benchmark_group("context");
    g.bench_function("plan_256k_required_1m_optional_budget_128k", |b| {
        b.iter(|| black_box(plan_with(template, 128_000, black_box(&req)).unwrap()));
    });
    let plan = plan_with(template, 128_000, &req).unwrap();
    g.bench_function("render_planned_context", |b| {
        b.iter(|| black_box(plan.render(black_box(&nonce))))
    });
    g.finish();

    let rows: Vec<_> = (0..20)
        .map(|i| json!({"id": format!("c-{i}"), "status": "passed", "evidence_refs": ["diff"], "rationale": "the diff shows it"}))
        .collect();
    let reply =
        json!({"nonce": nonce.as_str(), "criteria": rows, "findings": [], "dispositions": []})
            .to_string();
    let validator = ReplyValidator::new().unwrap();
    let rules = ReplyRules {
        nonce: nonce.as_str(),
        manifest: &plan.manifest,
        refs_waived: &[],
        redact: &verdict_judge::reply::no_secrets,
    };
    c.bench_function("validate_reply_20_criteria", |b| {
        b.iter(|| black_box(validator.validate(black_box(&reply), rules).unwrap()))
    });
}

criterion_group!(judge, benches);
criterion_main!(judge);
