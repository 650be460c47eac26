//! Batched appends: repeats settle on the stored row, and a batch that fails in the database
//! leaves no row and no audit event behind, on both backends.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::{Id, Role};
use verdict_store::{Actor, DocKind, StoreError};

fn runner() -> Actor {
    Actor::new(RUNNER, Role::Runner)
}

fn verifier() -> Actor {
    Actor::new(VERIFIER, Role::Verifier)
}

async fn head_seq(t: &TestStore) -> u64 {
    t.store.audit_head().await.unwrap().map_or(0, |h| h.seq)
}

async fn assert_intact(t: &TestStore) {
    let report = t.store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
}

fn id(s: &str) -> Id {
    Id::try_from(s.to_owned()).unwrap()
}

async fn repeats_in_a_batch_settle_on_one_row(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    let (e1, e2, e3) = (
        evidence(&s, "ev-1"),
        evidence(&s, "ev-2"),
        evidence(&s, "ev-3"),
    );
    let before = head_seq(t).await;
    let batch = [
        (DocKind::Evidence, e1.clone()),
        (DocKind::Evidence, e1.clone()),
        (DocKind::Evidence, e2.clone()),
        (DocKind::Evidence, e1.clone()),
    ];
    let first = t.store.put_batch(&runner(), &batch).await.unwrap();
    assert_eq!(first.len(), 4);
    assert!(first[0].inserted && first[2].inserted);
    assert!(!first[1].inserted && !first[3].inserted);
    let settled = verdict_store::Stored {
        inserted: false,
        ..first[0].clone()
    };
    assert_eq!((&first[1], &first[3]), (&settled, &settled));
    assert_eq!((first[0].seq, first[2].seq), (before + 1, before + 2));
    assert_eq!(head_seq(t).await, before + 2, "one event per row appended");

    // Against rows of an earlier commit, too.
    let rows = t
        .store
        .put_batch(
            &runner(),
            &[(DocKind::Evidence, e2), (DocKind::Evidence, e3)],
        )
        .await
        .unwrap();
    assert_eq!((rows[0].inserted, rows[0].seq), (false, before + 2));
    assert_eq!((rows[1].inserted, rows[1].seq), (true, before + 3));

    // Each event names the row appended at its seq, in order.
    let keys: Vec<String> = [&first[0], &first[2], &rows[1]]
        .iter()
        .map(|r| r.key.clone())
        .collect();
    let named: Vec<(u64, String, String)> = t
        .store
        .audit_events(before, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.seq, e.table, e.key))
        .collect();
    let expected: Vec<(u64, String, String)> = (1..)
        .zip(keys)
        .map(|(n, k)| (before + n, "check_evidence".to_owned(), k))
        .collect();
    assert_eq!(named, expected);
    assert_intact(t).await;
}
both!(repeats_in_a_batch_settle_on_one_row);

async fn a_batch_failing_in_the_database_leaves_nothing(t: &TestStore) {
    let s = subject_digest(&subject("ex-1", 1));
    t.store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Subject,
            &subject("ex-1", 1),
        )
        .await
        .unwrap();
    admit(t, &s, 1, "vrun-1").await;
    t.store
        .put(&verifier(), DocKind::Finding, &finding(&s, "f-stored", 1))
        .await
        .unwrap();
    let before = head_seq(t).await;

    // The same finding version with other content, first within the batch, then against a
    // stored row: the conflict is found only while appending, after other rows went in.
    let mut rewritten = finding(&s, "f-1", 1);
    rewritten["severity"] = json!("minor");
    let mut restated = finding(&s, "f-stored", 1);
    restated["severity"] = json!("minor");
    for bad in [rewritten, restated] {
        let err = t
            .store
            .put_batch(
                &verifier(),
                &[
                    (DocKind::Finding, finding(&s, "f-1", 1)),
                    (DocKind::Finding, finding(&s, "f-2", 1)),
                    (DocKind::Finding, bad),
                ],
            )
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { .. }), "{err}");
        assert_eq!(head_seq(t).await, before, "no audit event survives");
        for f in ["f-1", "f-2"] {
            assert!(t.store.finding(&id(f), 1).await.unwrap().is_none(), "{f}");
        }
    }

    // The chain goes on from where the failed batches found it.
    let rows = t
        .store
        .put_batch(
            &verifier(),
            &[
                (DocKind::Finding, finding(&s, "f-1", 1)),
                (DocKind::Finding, finding(&s, "f-2", 1)),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        rows.iter().map(|r| r.seq).collect::<Vec<_>>(),
        [before + 1, before + 2]
    );
    assert_intact(t).await;
}
both!(a_batch_failing_in_the_database_leaves_nothing);

/// Schema 41: on PostgreSQL a write of several parts is one statement, the pool's check of the
/// connection it hands out and the call, however many parts it has: records of several tables;
/// a request with its jobs; a record made under a job's claim that also ends the job. The audit
/// chain's lock, which the first record takes and the transaction holds to its end, is then
/// never held while the database waits on the client (before: a round trip for each table, for
/// the job's end, its notification and the COMMIT, each with every other writer waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_of_several_parts_is_one_exchange_on_postgresql() {
    use std::time::Duration;
    use verdict_store::{JobClaim, JobKind, JobState, RequestJob};
    let t = postgres().await;
    let store = t.store.as_ref();
    populate(store).await;
    cover_requests(store, &[], &[(RUNNER, Role::Runner)]).await;
    let exchanges = |before: u64| store.round_trips() - before;

    // An operator of its own: the store looks its identity up once (the test's OPERATOR has
    // none and acts as the login, looked up each time).
    register(store, "op-parts", Role::Operator).await;
    let op = Actor::new("op-parts", Role::Operator);
    store
        .put(&op, DocKind::Request, &request_doc("ex-1", "parts-0"))
        .await
        .unwrap();
    let before = store.round_trips();
    let stored = store
        .put_batch(
            &op,
            &[
                (DocKind::Request, request_doc("ex-1", "parts-1")),
                (DocKind::Policy, policy(9)),
                (DocKind::Request, request_doc("ex-1", "parts-2")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(stored.len(), 3);
    assert_eq!(exchanges(before), 2, "records of several tables");

    let before = store.round_trips();
    let checks = RequestJob {
        kind: JobKind::Checks,
        class: String::new(),
        deadline: None,
    };
    let (request, jobs) = store
        .put_request_enqueuing(&op, &request_doc("ex-1", "parts-3"), &[checks])
        .await
        .unwrap();
    assert_eq!(exchanges(before), 2, "a request with its jobs");
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].request.as_str(), request.key);

    let lease = Duration::from_secs(60);
    let claimed = store
        .queue()
        .claim_job(&runner(), JobKind::Checks, "h-1", lease)
        .await
        .unwrap()
        .unwrap();
    let ending = JobClaim::new(claimed.id, claimed.fencing, lease).completing("done");
    let s = subject_digest(&subject("ex-1", 1));
    let before = store.round_trips();
    store
        .put_claimed(
            &runner(),
            &ending,
            DocKind::Evidence,
            &evidence(&s, "ev-parts"),
        )
        .await
        .unwrap();
    assert_eq!(exchanges(before), 2, "a record that ends its job");
    let done = store.queue().job(claimed.id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Done);
    t.cleanup().await;
}
