//! k-of-n sampling (disagreement is inconclusive, never a vote) and the result cache (valid
//! results only).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use verdict_core::contracts::{
    CriterionStatus, DispositionKind, UnavailableReason, VerificationStatus,
};
use verdict_judge::Judge;
use verdict_judge::cache::MemoryCache;
use verdict_judge::config::Sampling;
use verdict_judge::provider::OpenAiProvider;

fn judge(url: &str, sampling: Sampling) -> Judge {
    let provider = Arc::new(OpenAiProvider::new(url, "judge-model", None, Some(0.0)).unwrap());
    Judge::new(class_with(openai_config(url), budget(), sampling), provider).unwrap()
}

fn answer(v: &Value) -> Answer {
    Answer::json(&openai_envelope(&v.to_string()))
}

#[tokio::test]
async fn agreeing_samples_complete_and_each_call_has_its_own_nonce() {
    let server = FakeServer::start(|r| answer(&good_reply(&r.nonce()))).await;
    let run = judge(&server.url, Sampling { n: 3, k: None })
        .run(&request())
        .await
        .unwrap();
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
    assert_eq!(run.result.criteria[0].status, CriterionStatus::Passed);
    assert!(run.disagreements.is_empty());
    assert_eq!(run.receipts.len(), 3);
    let nonces: BTreeSet<String> = server.received().iter().map(Received::nonce).collect();
    assert_eq!(nonces.len(), 3);
    assert_eq!(run.rationales.len(), 3);
}

#[tokio::test]
async fn any_disagreement_is_inconclusive_even_against_a_majority() {
    // Two samples say passed, one says failed: no vote, the criterion is inconclusive.
    let server = FakeServer::start(|r| {
        let mut v = good_reply(&r.nonce());
        if r.index == 1 {
            v["criteria"][1] = row("no-regression", "failed", &["diff"]);
        }
        answer(&v)
    })
    .await;
    let run = judge(&server.url, Sampling { n: 3, k: None })
        .run(&request())
        .await
        .unwrap();
    assert_eq!(run.result.status, VerificationStatus::Completed);
    let status: Vec<CriterionStatus> = run.result.criteria.iter().map(|r| r.status).collect();
    assert_eq!(
        status,
        [
            CriterionStatus::Passed,
            CriterionStatus::Inconclusive,
            CriterionStatus::NotTested
        ]
    );
    assert_eq!(
        run.disagreements,
        ["criterion \"no-regression\": samples disagree"]
    );
}

#[tokio::test]
async fn disagreeing_dispositions_need_a_human_and_findings_are_united() {
    let server = FakeServer::start(|r| {
        let mut v = good_reply(&r.nonce());
        let kind = if r.index == 0 { "resolved" } else { "still_present" };
        v["dispositions"] = json!([{"finding": "f-old", "version": 2, "disposition": kind, "evidence_refs": ["diff"], "reason": null}]);
        if r.index == 1 {
            v["findings"] = json!([{"criterion": "no-regression", "type": "changed_signature", "severity": "blocker",
                "scope": "change", "location": {"resource": "diff", "path": "pay.rs", "line": 2},
                "evidence_refs": ["diff"], "remediation": "keep the old signature", "confidence": 0.7}]);
        }
        answer(&v)
    })
    .await;
    let mut req = request();
    req.prior_findings = vec![prior_finding("f-old", 2)];
    let run = judge(&server.url, Sampling { n: 2, k: None })
        .run(&req)
        .await
        .unwrap();
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
    assert_eq!(run.result.dispositions.len(), 1);
    assert_eq!(
        run.result.dispositions[0].disposition,
        DispositionKind::HumanRequired
    );
    assert_eq!(
        run.result.findings.len(),
        1,
        "a blocker one sample saw is kept"
    );
    let f = &run.result.findings[0];
    assert!(f.id.as_str().starts_with("f-"));
    assert_eq!((f.version, f.subject_digest.as_str()), (1, SUBJECT));
}

#[tokio::test]
async fn k_of_n_tolerates_up_to_n_minus_k_invalid_samples() {
    let bad_second = |r: &Received| {
        if r.index == 1 {
            answer(&good_reply("ffffffffffffffffffffffffffffffff"))
        } else {
            answer(&good_reply(&r.nonce()))
        }
    };
    let server = FakeServer::start(bad_second).await;
    let run = judge(&server.url, Sampling { n: 3, k: Some(2) })
        .run(&request())
        .await
        .unwrap();
    assert_eq!(
        run.result.status,
        VerificationStatus::Completed,
        "{:?}",
        run.detail
    );
    assert_eq!(run.rationales.len(), 2);

    let server = FakeServer::start(bad_second).await;
    let run = judge(&server.url, Sampling { n: 3, k: None })
        .run(&request())
        .await
        .unwrap();
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::InvalidOutput)
    );
    assert!(
        run.detail
            .unwrap()
            .starts_with("sample 2 of 3: nonce mismatch")
    );
    assert_eq!(
        server.received().len(),
        2,
        "no third call once the run cannot succeed"
    );
}

#[tokio::test]
async fn valid_results_are_cached_and_failures_never_are() {
    let cache = Arc::new(MemoryCache::new());
    let server = FakeServer::start(|r| answer(&good_reply(&r.nonce()))).await;
    let j = judge(&server.url, Sampling::default()).with_cache(cache.clone());
    let first = j.run(&request()).await.unwrap();
    assert!(!first.cache_hit);
    let mut again = request();
    again.result_id = "vr-2".parse().unwrap();
    again.verifier.run = "vrun-2".parse().unwrap();
    let second = j.run(&again).await.unwrap();
    assert!(second.cache_hit);
    assert_eq!(server.received().len(), 1);
    assert_eq!(second.result.criteria, first.result.criteria);
    assert_eq!(second.result.id.as_str(), "vr-2");
    assert_eq!(second.result.verifier.run.as_str(), "vrun-2");
    assert_eq!(
        second.result.verifier.runtime,
        first.result.verifier.runtime
    );
    assert!(second.receipts.is_empty());

    // Another context is another key.
    let mut changed = request();
    changed.resources = vec![resource("diff", "git_diff", b"+other change\n", true)];
    let third = j.run(&changed).await.unwrap();
    assert!(!third.cache_hit);
    assert_eq!(server.received().len(), 2);

    // Failures are not stored: the next run calls again.
    let cache = Arc::new(MemoryCache::new());
    let failing = FakeServer::start(|_| Answer::raw(400, "no")).await;
    let j = judge(&failing.url, Sampling::default()).with_cache(cache.clone());
    assert_eq!(
        j.run(&request()).await.unwrap().result.status,
        VerificationStatus::Unavailable
    );
    assert!(cache.is_empty());
    assert!(!j.run(&request()).await.unwrap().cache_hit);
    assert_eq!(failing.received().len(), 2);
}
