//! Attestations over the store: who may sign, what is refused, which key signed what, and that
//! rotation keeps old files checkable. On SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use ed25519_dalek::SigningKey;
use verdict_core::contracts::Outcome;
use verdict_core::digest::Digest;
use verdict_engine::attest::{ATTESTATION_SCHEMA, SigningKeyRecord};
use verdict_store::{About, Actor, DocKind};

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

async fn requests(w: &World) -> usize {
    w.engine
        .store()
        .list(DocKind::Request, &About::Execution(EXEC.into()))
        .await
        .unwrap()
        .len()
}

async fn current_key(w: &World) -> Digest {
    let s = w.engine.status(&w.ops, EXEC).await.unwrap();
    s.applicable.unwrap().decision.evaluation_key.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_attests_a_decision_and_the_store_keeps_which_key_signed_it() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 0, "change A", "run-1").await;
        let eval = current_key(&w).await;
        let old = key(1);
        assert!(
            !w.engine
                .signing_key_registered(&w.ops, &old.verifying_key())
                .await
                .unwrap()
        );
        let a = w.engine.attest(&w.ops, &eval, &old, true).await.unwrap();
        let report = verdict_attest::verify(a.jsonl.as_bytes(), &[old.verifying_key()]).unwrap();
        assert_eq!(report.outcome, Outcome::Pass);
        // The test store keeps a manual clock: the summary says so, and a relying party
        // refuses it unless it allows a manual clock.
        assert_eq!(report.clock, verdict_attest::Clock::Manual);
        assert_eq!(
            report.refusals(&report.time_verified, false),
            [verdict_attest::Refusal::ManualClock]
        );
        assert!(report.refusals(&report.time_verified, true).is_empty());
        assert!(report.replayed);
        assert_eq!(report.test_results, 1);
        assert!(
            w.engine
                .signing_key_registered(&w.ops, &old.verifying_key())
                .await
                .unwrap()
        );

        // Rotation: a new key signs from now on; the old file still checks with the old key,
        // and the store says which key signed which.
        let new = key(2);
        let b = w.engine.attest(&w.ops, &eval, &new, false).await.unwrap();
        let records = w.engine.attestations(&w.ops, EXEC).await.unwrap();
        let ids: Vec<&str> = records.iter().map(|r| r.key_id.as_str()).collect();
        assert_eq!(ids, [a.record.key_id.as_str(), b.record.key_id.as_str()]);
        assert_ne!(a.record.key_id, b.record.key_id);
        let both = [new.verifying_key(), old.verifying_key()];
        assert!(verdict_attest::verify(a.jsonl.as_bytes(), &both).is_ok());
        assert!(verdict_attest::verify(a.jsonl.as_bytes(), &[new.verifying_key()]).is_err());
        // Attesting the same decision with the same key again records nothing new.
        let before = requests(&w).await;
        let again = w.engine.attest(&w.ops, &eval, &old, true).await.unwrap();
        assert_eq!(again.jsonl, a.jsonl);
        assert_eq!(requests(&w).await, before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_an_operator_signs_and_a_refusal_writes_only_its_denial() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 0, "change A", "run-1").await;
        let eval = current_key(&w).await;
        let before = requests(&w).await;
        let denials = w.engine.store().denials(0, 1000).await.unwrap().len();
        for who in [&w.coder, &w.rev, &w.ci, &w.alice] {
            let err = w
                .engine
                .attest(who, &eval, &key(3), true)
                .await
                .unwrap_err();
            assert_eq!(err.code(), "permission_denied");
            let err = w
                .engine
                .register_signing_key(who, &key(3).verifying_key())
                .await
                .unwrap_err();
            assert_eq!(err.code(), "permission_denied");
        }
        assert_eq!(requests(&w).await, before);
        assert_eq!(
            w.engine.store().denials(0, 1000).await.unwrap().len(),
            denials + 8
        );
        assert!(
            !w.engine
                .signing_key_registered(&w.ops, &key(3).verifying_key())
                .await
                .unwrap()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_that_no_longer_applies_is_not_attested() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 0, "change A", "run-1").await;
        let eval = current_key(&w).await;
        w.engine
            .put_subject(&w.coder, &subject(0, "change B"))
            .await
            .unwrap();
        let before = requests(&w).await;
        let err = w
            .engine
            .attest(&w.ops, &eval, &key(4), true)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "conflict", "{err}");
        assert!(err.to_string().contains("subject_moved"), "{err}");
        assert_eq!(requests(&w).await, before);
        assert!(
            w.engine
                .attestations(&w.ops, EXEC)
                .await
                .unwrap()
                .is_empty()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_under_another_gates_policy_is_not_attested() {
    on_both(|store| async move {
        let w = world(store.clone()).await;
        passed(&w, 0, "change A", "run-1").await;
        let eval = current_key(&w).await;
        // A gate with a policy of its own: the pass was made under another policy.
        let other = verdict_engine::Engine::new(store, "other-gate");
        other.set_policy(&w.ops, &policy(2)).await.unwrap();
        let before = requests(&w).await;
        let err = other
            .attest(&w.ops, &eval, &key(6), true)
            .await
            .unwrap_err();
        assert_eq!(err.code(), "conflict", "{err}");
        assert_eq!(requests(&w).await, before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_a_producer_writes_are_never_taken_for_the_engines() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 0, "change A", "run-1").await;
        let eval = current_key(&w).await;
        let forged_key = key(5);
        // The producer writes the exact bytes of the engine's key record first.
        let doc = serde_json::to_value(SigningKeyRecord::of(&forged_key.verifying_key())).unwrap();
        w.engine
            .store()
            .put(
                &Actor::new("coder", verdict_core::contracts::Role::Producer),
                DocKind::Request,
                &doc,
            )
            .await
            .unwrap();
        assert!(
            !w.engine
                .signing_key_registered(&w.ops, &forged_key.verifying_key())
                .await
                .unwrap()
        );
        let err = w
            .engine
            .register_signing_key(&w.ops, &forged_key.verifying_key())
            .await
            .unwrap_err();
        assert_eq!(err.code(), "conflict");
        assert!(
            w.engine
                .attest(&w.ops, &eval, &forged_key, true)
                .await
                .is_err()
        );
        // A forged attestation record about the execution is not listed either.
        let real = w.engine.attest(&w.ops, &eval, &key(6), true).await.unwrap();
        let mut fake = serde_json::to_value(&real.record).unwrap();
        fake["key_id"] = "00".repeat(32).into();
        assert_eq!(fake["schema"], ATTESTATION_SCHEMA);
        w.engine
            .store()
            .put(
                &Actor::new("coder", verdict_core::contracts::Role::Producer),
                DocKind::Request,
                &fake,
            )
            .await
            .unwrap();
        let listed = w.engine.attestations(&w.ops, EXEC).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].key_id, real.record.key_id);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_follow_the_applicable_decision() {
    on_both(|store| async move {
        let w = world(store).await;
        // The subject names its change by the SHA-256 of its bytes: a 64-digit commit name.
        let named = verdict_core::digest::raw(b"change A");
        let sha = named.as_str().strip_prefix("sha256:").unwrap();
        let none = w.engine.github_payloads(&w.ops, EXEC, sha).await;
        assert!(none.is_ok());
        assert_eq!(none.unwrap().check_run.conclusion, "action_required");
        passed(&w, 0, "change A", "run-1").await;
        // A commit the decided subject does not name gets no success.
        for other in ["0123456789abcdef0123456789abcdef01234567", &"f".repeat(64)] {
            let p = w.engine.github_payloads(&w.ops, EXEC, other).await.unwrap();
            assert_eq!(p.check_run.conclusion, "failure", "{p:?}");
            assert_eq!(p.commit_status.state, "failure", "{p:?}");
            assert!(p.check_run.output.summary.contains("does not name commit"));
        }
        let p = w.engine.github_payloads(&w.ops, EXEC, sha).await.unwrap();
        assert_eq!(p.check_run.conclusion, "success");
        assert_eq!(p.commit_status.state, "success");
        // A manual-clock store never says success without saying whose time it was.
        assert_eq!(p.clock, verdict_attest::Clock::Manual);
        assert!(p.check_run.output.title.contains("manual clock"), "{p:?}");
        assert!(
            p.commit_status.description.contains("manual clock"),
            "{p:?}"
        );
        let xml = w.engine.junit(&w.ops, EXEC).await.unwrap();
        assert!(
            xml.contains("<property name=\"clock\" value=\"manual\"/>"),
            "{xml}"
        );
        // The counted passing evidence and the passing decision.
        assert!(
            xml.contains("tests=\"2\" failures=\"0\" errors=\"0\" skipped=\"0\""),
            "{xml}"
        );
        // A new revision: the pass no longer applies, so nothing says success.
        subject_with_evidence(&w, 0, "change B", "fail").await;
        let p = w.engine.github_payloads(&w.ops, EXEC, sha).await.unwrap();
        assert_eq!(p.check_run.conclusion, "action_required");
        assert!(p.check_run.output.summary.contains("subject_moved"));
        let xml = w.engine.junit(&w.ops, EXEC).await.unwrap();
        // The failing evidence, and no decision that applies: two failures.
        assert!(
            xml.contains("tests=\"2\" failures=\"2\" errors=\"0\""),
            "{xml}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junit_never_shows_the_producers_own_evidence_as_a_passing_test() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = w
            .engine
            .put_subject(&w.coder, &subject(0, "change A"))
            .await
            .unwrap();
        // The policy takes check evidence from runners only: the producer's own pass is kept
        // but never counted.
        let own = evidence(&d, "pass", "coder", "producer");
        w.engine
            .add_evidence(&w.coder, std::slice::from_ref(&own))
            .await
            .unwrap();
        let g = w.engine.gate_run(&w.ops, EXEC).await.unwrap();
        assert_ne!(g.decision.outcome, Outcome::Pass);
        let xml = w.engine.junit(&w.ops, EXEC).await.unwrap();
        assert!(
            xml.contains("tests=\"3\" failures=\"1\" errors=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(xml.contains("<skipped message=\"not counted: "), "{xml}");
        assert!(xml.contains("type=\"evidence_missing\""), "{xml}");
        assert!(
            xml.contains(&format!(
                "message=\"the gate decided {}\"",
                g.decision.outcome.as_str()
            )),
            "{xml}"
        );
    })
    .await;
}
