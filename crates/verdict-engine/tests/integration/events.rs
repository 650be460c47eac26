//! The audit log projected to lifecycle events (`Engine::events_after`), on SQLite and
//! PostgreSQL: every kind of event once, with the seq of the row it reads, in order across
//! pages; only the engine's own cancellation is believed; and each caller sees only the
//! executions it may read, without a denial being written.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_engine::events::{Event, EventKind};
use verdict_store::DocKind;

async fn all(w: &World, who: &verdict_engine::Principal, page: u32) -> Vec<Event> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let p = w.engine.events_after(who, after, page).await.unwrap();
        if p.read_to == after {
            return out;
        }
        assert!(p.events.iter().all(|e| e.seq > after && e.seq <= p.read_to));
        after = p.read_to;
        out.extend(p.events);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lifecycle_event_is_projected_once_from_the_row_its_seq_names() {
    on_both(|store| async move {
        let w = world(store).await;
        let d1 = passed(&w, 1, "d1", "run-1").await;
        // Nothing needs a person, so `decide` would refuse to approve; the row is what counts.
        approval_as_stored(&w, "looked fine").await;
        let req = request(&w, json!({"max_runs": 2})).await;
        w.engine
            .admit(&w.ops, &req, "rev", "reviewer", "run-2")
            .await
            .unwrap();
        w.engine
            .cancel_run(&w.ops, "run-2", "enough")
            .await
            .unwrap();
        // A producer writes a record shaped like the engine's cancellation: no event.
        let forged = json!({
            "schema": "verdict.cancellation/v1",
            "cancelled": {"kind": "execution", "id": EXEC},
            "subject_digest": d1.as_str(),
            "by": {"principal": "ops", "role": "operator"},
            "reason": "forged",
            "at": now().to_string(),
        });
        w.engine
            .store()
            .put(&w.coder.actor(), DocKind::Request, &forged)
            .await
            .unwrap();
        let cancelled_at = w.engine.store().audit_head().await.unwrap().unwrap().seq;
        w.engine
            .cancel_execution(&w.ops, EXEC, "abandoned")
            .await
            .unwrap();

        let events = all(&w, &w.ops, 1000).await;
        let kinds: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
        assert_eq!(
            kinds,
            [
                "subject_moved",
                "run_ended",
                "gate_decision",
                "human_decision",
                "run_ended",
                "execution_cancelled"
            ],
            "{events:#?}"
        );
        assert!(events.iter().all(|e| e.execution.as_deref() == Some(EXEC)));
        // Each id is the seq of the audit event that appended the row it reads.
        let audit = w.engine.store().audit_events(0, 10_000).await.unwrap();
        let table_of = |seq: u64| audit.iter().find(|a| a.seq == seq).unwrap().table.clone();
        let tables: Vec<String> = events.iter().map(|e| table_of(e.seq)).collect();
        assert_eq!(
            tables,
            [
                "pointer_changes",
                "run_events",
                "gate_decisions",
                "human_decisions",
                "run_events",
                "verification_requests"
            ]
        );
        match &events[0].kind {
            EventKind::SubjectMoved {
                subject_digest,
                generation,
                previous,
            } => {
                assert_eq!(subject_digest, &d1);
                assert_eq!(*generation, 1);
                assert!(previous.is_none());
            }
            other => panic!("{other:?}"),
        }
        match &events[1].kind {
            EventKind::RunEnded { run_id, status, .. } => {
                assert_eq!((run_id.as_str(), status.as_str()), ("run-1", "completed"));
            }
            other => panic!("{other:?}"),
        }
        match &events[2].kind {
            EventKind::GateDecision {
                outcome,
                reasons,
                subject_digest,
                ..
            } => {
                assert_eq!(outcome, "pass");
                assert!(reasons.is_empty(), "{reasons:?}");
                assert_eq!(subject_digest, &d1);
            }
            other => panic!("{other:?}"),
        }
        match &events[3].kind {
            EventKind::HumanDecision {
                principal,
                decision,
                ..
            } => assert_eq!(
                (principal.as_str(), decision.as_str()),
                ("alice", "approve")
            ),
            other => panic!("{other:?}"),
        }
        match &events[4].kind {
            EventKind::RunEnded { run_id, status, .. } => {
                assert_eq!((run_id.as_str(), status.as_str()), ("run-2", "cancelled"));
            }
            other => panic!("{other:?}"),
        }
        match &events[5].kind {
            EventKind::ExecutionCancelled { by, reason, .. } => {
                assert_eq!((by.as_str(), reason.as_str()), ("ops", "abandoned"));
            }
            other => panic!("{other:?}"),
        }
        assert!(events[5].seq > cancelled_at);

        // Small pages read the same events, each once.
        let paged = all(&w, &w.ops, 3).await;
        assert_eq!(paged, events);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_the_callers_grants_and_filtering_writes_nothing() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "d1", "run-1").await;
        let token = w
            .engine
            .add_principal(
                &w.ops,
                "outsider",
                serde_json::from_value(json!("verifier")).unwrap(),
            )
            .await
            .unwrap();
        let outsider = w.engine.authenticate(&token).await.unwrap();
        let before = w.engine.store().audit_head().await.unwrap().unwrap().seq;

        let everything = all(&w, &w.ops, 1000).await;
        assert!(!everything.is_empty());
        assert_eq!(all(&w, &w.rev, 1000).await, everything);
        assert!(all(&w, &outsider, 1000).await.is_empty());
        // Reading past what a caller may see still moves its cursor to the log's head.
        let page = w.engine.events_after(&outsider, 0, 1000).await.unwrap();
        assert_eq!(page.read_to, before);
        assert_eq!(
            w.engine.store().audit_head().await.unwrap().unwrap().seq,
            before,
            "filtering wrote"
        );

        w.engine.revoke(&w.ops, "g-rev", "rotation").await.unwrap();
        assert!(all(&w, &w.rev, 1000).await.is_empty());
        assert_eq!(all(&w, &w.rev2, 1000).await, everything);
    })
    .await;
}
