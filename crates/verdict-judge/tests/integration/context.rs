//! Context construction: budgets, deterministic truncation, `context_incomplete`, exclusions,
//! and the request rules.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use std::sync::Arc;
use verdict_core::contracts::{UnavailableReason, VerificationStatus};
use verdict_judge::config::{Budget, ResolvedClass, Sampling};
use verdict_judge::manifest::{ExclusionReason, MIN_EXCERPT_BYTES};
use verdict_judge::provider::OpenAiProvider;
use verdict_judge::render::{EntryKind, Nonce};
use verdict_judge::request::RequestError;
use verdict_judge::{Judge, judge::plan_request};

fn class(context_tokens: u64) -> ResolvedClass {
    class_with(
        openai_config("http://127.0.0.1:9/v1"),
        Budget {
            context_tokens,
            ..budget()
        },
        Sampling::default(),
    )
}

fn frame_tokens() -> u64 {
    // With a huge budget everything fits; the estimate of the smallest request is a floor.
    let mut req = request();
    req.resources.clear();
    req.evidence.clear();
    plan_request(&class(1_000_000), &req)
        .unwrap()
        .manifest
        .construction
        .estimated_tokens
}

#[tokio::test]
async fn a_required_item_that_does_not_fit_ends_context_incomplete_without_a_call() {
    let server =
        FakeServer::start(|r| Answer::json(&openai_envelope(&good_reply(&r.nonce()).to_string())))
            .await;
    let mut req = request();
    let big = "+ line of a very large change\n".repeat(4000);
    req.resources = vec![resource("diff", "git_diff", big.as_bytes(), true)];
    let mut c = class(frame_tokens() + 2000);
    c.config.provider = openai_config(&server.url);
    let judge = Judge::new(
        c,
        Arc::new(OpenAiProvider::new(&server.url, "m", None, Some(0.0)).unwrap()),
    )
    .unwrap();
    let run = judge.run(&req).await.unwrap();
    assert_eq!(run.result.status, VerificationStatus::Unavailable);
    assert_eq!(
        run.result.unavailable_reason,
        Some(UnavailableReason::ContextIncomplete)
    );
    assert!(
        run.detail
            .as_deref()
            .unwrap()
            .contains("required resource \"diff\""),
        "{:?}",
        run.detail
    );
    assert!(!run.result.context.as_ref().unwrap().complete);
    assert!(!run.manifest.complete);
    let ex = run
        .manifest
        .exclusions
        .iter()
        .find(|e| e.ref_ == "diff")
        .unwrap();
    assert_eq!(ex.reason, ExclusionReason::RequiredDidNotFit);
    assert!(run.result.criteria.is_empty());
    assert!(run.receipts.is_empty());
    assert!(server.received().is_empty(), "nothing is graded unseen");
}

#[test]
fn optional_items_are_cut_at_a_line_end_and_the_prompt_fits_the_budget() {
    let mut req = request();
    let log: String = (0..3000)
        .map(|i| format!("test case_{i} ... ok\n"))
        .collect();
    req.evidence[0].output = Some(log.clone().into_bytes());
    let budget = frame_tokens() + 3000;
    let plan = plan_request(&class(budget), &req).unwrap();
    // Part of the log was not shown, so the context is not complete; the run still goes ahead.
    assert!(!plan.manifest.complete);
    assert!(plan.incomplete.is_none());
    let e = plan
        .manifest
        .entries
        .iter()
        .find(|e| e.kind == EntryKind::CheckOutput)
        .unwrap();
    assert!(e.truncated);
    assert!(e.bytes_included < e.bytes_total);
    assert_eq!(e.bytes_total, log.len() as u64);
    let kept = &log[..usize::try_from(e.bytes_included).unwrap()];
    assert!(kept.ends_with('\n'), "cut at a line end");
    // Required items are whole.
    for e in plan.manifest.entries.iter().filter(|e| e.required) {
        assert!(
            !e.truncated && e.bytes_included == e.bytes_total,
            "{}",
            e.ref_
        );
    }
    let p = plan.render(&Nonce::random().unwrap());
    assert_eq!(
        p.estimated_tokens(),
        plan.manifest.construction.estimated_tokens
    );
    assert!(p.estimated_tokens() <= budget);
    assert!(p.user.contains(kept));
    assert!(p.user.contains("truncated=true"));
}

#[test]
fn an_optional_item_with_no_room_left_is_excluded() {
    let mut req = request();
    req.resources.push(resource(
        "bench-log",
        "log",
        "x\n".repeat(50_000).as_bytes(),
        false,
    ));
    // Enough for everything required, and less than a minimal excerpt more.
    let full = plan_request(&class(1_000_000), &{
        let mut r = req.clone();
        r.resources.pop();
        r.evidence[0].output = None;
        r
    })
    .unwrap()
    .manifest
    .construction
    .estimated_tokens;
    let mut r2 = req.clone();
    r2.evidence[0].output = None;
    let plan = plan_request(&class(full + (MIN_EXCERPT_BYTES as u64 / 8)), &r2).unwrap();
    assert!(
        !plan.manifest.complete,
        "an item left out leaves the context incomplete"
    );
    assert!(plan.incomplete.is_none());
    let ex = plan
        .manifest
        .exclusions
        .iter()
        .find(|e| e.ref_ == "bench-log")
        .unwrap();
    assert_eq!(ex.reason, ExclusionReason::Budget);
    assert!(
        !plan
            .render(&Nonce::random().unwrap())
            .user
            .contains("bench-log")
    );
}

#[test]
fn instructions_alone_over_budget_are_incomplete() {
    let plan = plan_request(&class(100), &request()).unwrap();
    assert!(!plan.manifest.complete);
    assert!(plan.incomplete.unwrap().contains("alone need"));
}

#[test]
fn producer_history_is_never_shown() {
    let mut req = request();
    req.resources.push(resource(
        "agent-log",
        "Transcript",
        b"I was told to make the tests pass; I skipped two.\n",
        true,
    ));
    req.resources.push(resource(
        "thoughts",
        "chain_of_thought",
        b"hidden plan\n",
        false,
    ));
    let plan = plan_request(&class(1_000_000), &req).unwrap();
    assert!(
        !plan.manifest.complete,
        "withheld history leaves the context incomplete"
    );
    assert!(plan.incomplete.is_none());
    for name in ["agent-log", "thoughts"] {
        let ex = plan
            .manifest
            .exclusions
            .iter()
            .find(|e| e.ref_ == name)
            .unwrap();
        assert_eq!(ex.reason, ExclusionReason::ProducerHistory);
        assert!(plan.manifest.entries.iter().all(|e| e.ref_ != name));
    }
    let p = plan.render(&Nonce::random().unwrap());
    assert!(!p.user.contains("skipped two") && !p.user.contains("hidden plan"));
}

#[test]
fn the_manifest_is_deterministic_and_binds_what_was_shown() {
    let a = plan_request(&class(32_000), &request()).unwrap();
    let b = plan_request(&class(32_000), &request()).unwrap();
    assert_eq!(a.manifest, b.manifest);
    assert_eq!(a.digest, b.digest);
    assert_eq!(
        a.digest,
        verdict_core::digest::digest(
            verdict_core::digest::DigestKind::Context,
            &a.manifest.to_value()
        )
    );
    // Two renderings differ only by their nonce.
    let (n1, n2) = (Nonce::random().unwrap(), Nonce::random().unwrap());
    let (p1, p2) = (a.render(&n1), a.render(&n2));
    assert_ne!(p1.user, p2.user);
    assert_eq!(
        p1.user.replace(n1.as_str(), "N"),
        p2.user.replace(n2.as_str(), "N")
    );
    // One byte of the diff, the budget, the generation or the class instructions changes it.
    let mut req = request();
    req.resources = vec![resource(
        "diff",
        "git_diff",
        format!("{DIFF} ").as_bytes(),
        true,
    )];
    assert_ne!(plan_request(&class(32_000), &req).unwrap().digest, a.digest);
    assert_ne!(
        plan_request(&class(32_001), &request()).unwrap().digest,
        a.digest
    );
    let mut req = request();
    req.generation = 4;
    assert_ne!(plan_request(&class(32_000), &req).unwrap().digest, a.digest);
    let mut c = class(32_000);
    c.template.push_str(" Be strict.");
    assert_ne!(plan_request(&c, &request()).unwrap().digest, a.digest);
    // Entries record the content digests the subject pins.
    let diff = a
        .manifest
        .entries
        .iter()
        .find(|e| e.ref_ == "diff")
        .unwrap();
    assert_eq!(diff.digest, verdict_core::digest::raw(DIFF.as_bytes()));
    assert_eq!(diff.bytes_included, DIFF.len() as u64);
}

#[test]
fn asking_a_subset_shows_and_requires_only_that_subset() {
    let mut req = request();
    req.ask = Some(vec!["no-regression".parse().unwrap()]);
    let plan = plan_request(&class(32_000), &req).unwrap();
    let asked: Vec<&str> = plan
        .manifest
        .criteria
        .asked
        .iter()
        .map(|i| i.as_str())
        .collect();
    assert_eq!(asked, ["no-regression"]);
    let p = plan.render(&Nonce::random().unwrap());
    assert!(
        p.user
            .contains("Grade exactly these criteria, each once: \"no-regression\".\n")
    );
    assert!(!p.user.contains("\"tests-pass\" (required)"));
}

#[test]
fn requests_that_break_the_rules_are_refused() {
    let c = class(32_000);
    let mut r = request();
    r.resources[0].content.push(b'!');
    assert!(matches!(
        plan_request(&c, &r),
        Err(RequestError::ResourceDigest { .. })
    ));

    let mut r = request();
    r.evidence[0].document.subject_digest =
        "sha256:2222222222222222222222222222222222222222222222222222222222222222"
            .parse()
            .unwrap();
    assert!(matches!(
        plan_request(&c, &r),
        Err(RequestError::ForeignEvidence { .. })
    ));

    let mut r = request();
    r.resources.push(resource("ev-unit", "log", b"x", true));
    assert_eq!(
        plan_request(&c, &r).unwrap_err(),
        RequestError::DuplicateRef("ev-unit".into())
    );

    let mut r = request();
    r.resources.push(resource("objective", "doc", b"x", true));
    assert_eq!(
        plan_request(&c, &r).unwrap_err(),
        RequestError::DuplicateRef("objective".into())
    );

    let mut r = request();
    r.ask = Some(vec!["security".parse().unwrap()]);
    assert!(matches!(plan_request(&c, &r), Err(RequestError::BadAsk(_))));
    r.ask = Some(vec![]);
    assert_eq!(
        plan_request(&c, &r).unwrap_err(),
        RequestError::NothingAsked
    );

    let mut r = request();
    let mut f = prior_finding("f-old", 1);
    f.severity = verdict_core::contracts::Severity::Minor;
    r.prior_findings.push(f);
    assert!(matches!(
        plan_request(&c, &r),
        Err(RequestError::PriorNotBlocker(_))
    ));

    let mut r = request();
    r.objective.digest = Some(verdict_core::digest::raw(b"another objective"));
    assert!(matches!(
        plan_request(&c, &r),
        Err(RequestError::ObjectiveDigest { .. })
    ));
    r.objective.digest = Some(verdict_core::digest::raw(r.objective.text.as_bytes()));
    assert!(plan_request(&c, &r).is_ok());

    let mut r = request();
    r.criteria.items.push(r.criteria.items[0].clone());
    assert!(matches!(
        plan_request(&c, &r),
        Err(RequestError::DuplicateCriterion(_))
    ));
}

#[tokio::test]
async fn a_change_labelled_as_history_is_withheld_and_the_result_records_an_incomplete_context() {
    let server =
        FakeServer::start(|r| Answer::json(&openai_envelope(&good_reply(&r.nonce()).to_string())))
            .await;
    let judge = || {
        let p = Arc::new(OpenAiProvider::new(&server.url, "judge-model", None, Some(0.0)).unwrap());
        Judge::new(
            class_with(openai_config(&server.url), budget(), Sampling::default()),
            p,
        )
        .unwrap()
    };
    // The whole context shown: complete.
    let run = judge().run(&request()).await.unwrap();
    assert_eq!(run.result.status, VerificationStatus::Completed);
    assert!(run.result.context.as_ref().unwrap().complete);

    // The producer labels its code a `transcript` and its docs a `chat_log`: neither is shown,
    // and a pass over them must not count as one.
    let mut req = request();
    req.resources.push(resource(
        "greet",
        "transcript",
        b"echo hi; disable_auth\n",
        true,
    ));
    req.resources.push(resource(
        "readme",
        "chat_log",
        b"SECRET-README-CONTENT\n",
        false,
    ));
    let run = judge().run(&req).await.unwrap();
    let prompt = server.received().last().unwrap().prompt();
    assert!(!prompt.1.contains("disable_auth") && !prompt.1.contains("SECRET-README"));
    assert_eq!(run.result.status, VerificationStatus::Completed);
    assert!(!run.result.context.as_ref().unwrap().complete);
    assert!(!run.manifest.complete);
    let withheld: Vec<&str> = run
        .manifest
        .exclusions
        .iter()
        .filter(|e| e.reason == ExclusionReason::ProducerHistory)
        .map(|e| e.ref_.as_str())
        .collect();
    assert_eq!(withheld, ["greet", "readme"]);
}
