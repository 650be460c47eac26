//! Cancellations are the canceller's own acts: the audit chain names the producer or operator
//! who cancelled, not the engine, and a cancellation record written by anyone else (another
//! producer, a verifier, a producer naming an operator) is still ignored. On SQLite and on
//! PostgreSQL with one test body.

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::contracts::Role;
use verdict_store::{DocKind, RunStatus};

/// The principal and role the audit chain names for every row appended to `table` under `key`.
async fn writers(w: &World, table: &str, key: &str) -> Vec<(String, String)> {
    w.engine
        .store()
        .audit_events(0, 10_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.table == table && e.key == key)
        .map(|e| (e.principal, e.role))
        .collect()
}

fn by(principal: &str, role: &str) -> Vec<(String, String)> {
    vec![(principal.to_owned(), role.to_owned())]
}

/// The seq of the newest cancellation record of the execution.
async fn cancellation_key(w: &World) -> String {
    w.engine
        .store()
        .list(
            DocKind::Request,
            &verdict_store::About::Execution(EXEC.to_owned()),
        )
        .await
        .unwrap()
        .into_iter()
        .rev()
        .find(|r| r.value().unwrap()["schema"] == verdict_engine::CANCELLATION_SCHEMA)
        .unwrap()
        .key
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_cancellation_and_its_runs_ends_are_written_by_the_producer() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-open")
            .await
            .unwrap();
        let c = w
            .engine
            .cancel_execution(&w.coder, EXEC, "withdrawn")
            .await
            .unwrap();
        assert_eq!(c.by.role, Role::Producer);
        assert_eq!(
            writers(&w, "verification_requests", &cancellation_key(&w).await).await,
            by("coder", "producer")
        );
        let run = w.engine.store().run("run-open").await.unwrap().unwrap();
        assert_eq!(run.status(), Some(RunStatus::Cancelled));
        let n = run.events.last().unwrap().n;
        assert_eq!(
            writers(&w, "run_events", &format!("run-open#{n}")).await,
            by("coder", "producer")
        );
        // The record is believed, and the execution event shows it.
        let seen = w.engine.execution_cancellation(&w.ops, EXEC).await.unwrap();
        assert_eq!(seen.map(|c| c.reason), Some("withdrawn".to_owned()));
        assert!(
            w.engine
                .put_subject(&w.coder, &subject(2, "change B"))
                .await
                .is_err()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_cancellations_are_written_by_the_operator() {
    on_both(|store| async move {
        let w = world(store).await;
        passed(&w, 1, "change A", "run-a").await;
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-x")
            .await
            .unwrap();
        w.engine
            .cancel_run(&w.ops, "run-x", "not needed")
            .await
            .unwrap();
        assert_eq!(
            writers(&w, "verification_requests", &cancellation_key(&w).await).await,
            by("ops", "operator")
        );
        w.engine
            .cancel_execution(&w.ops, EXEC, "abandoned")
            .await
            .unwrap();
        assert_eq!(
            writers(&w, "verification_requests", &cancellation_key(&w).await).await,
            by("ops", "operator")
        );
        assert!(
            w.engine
                .execution_cancellation(&w.ops, EXEC)
                .await
                .unwrap()
                .is_some()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_records_by_anyone_but_the_canceller_are_ignored() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = passed(&w, 1, "change A", "run-a").await;
        let role = serde_json::from_value(json!("producer")).unwrap();
        let t = w
            .engine
            .add_principal(&w.ops, "other-coder", role)
            .await
            .unwrap();
        let other = w.engine.authenticate(&t).await.unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-other",
                "other-coder",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Write,
                &ts("2027-01-01T00:00:00Z"),
            )
            .await
            .unwrap();
        let note = |principal: &str, role: &str| {
            json!({
                "schema": verdict_engine::CANCELLATION_SCHEMA,
                "cancelled": {"kind": "execution", "id": EXEC},
                "subject_digest": d.as_str(),
                "by": {"principal": principal, "role": role},
                "reason": "forged",
                "at": now().as_str(),
            })
        };
        let s = w.engine.store();
        // Another producer naming itself, or naming the execution's producer; the producer
        // naming an operator: each is stored (producers write the requests table) and ignored.
        for (writer, named) in [
            (&other, note("other-coder", "producer")),
            (&other, note("coder", "producer")),
            (&w.coder, note("ops", "operator")),
        ] {
            s.put(&writer.actor(), DocKind::Request, &named)
                .await
                .unwrap();
        }
        // A verifier may write only its own admission's note; a runner nothing there.
        assert!(
            s.put(&w.rev.actor(), DocKind::Request, &note("rev", "verifier"))
                .await
                .is_err()
        );
        assert!(
            s.put(&w.ci.actor(), DocKind::Request, &note("ci", "runner"))
                .await
                .is_err()
        );
        assert!(
            w.engine
                .execution_cancellation(&w.ops, EXEC)
                .await
                .unwrap()
                .is_none()
        );
        let events = w.engine.events_after(&w.ops, 0, 1000).await.unwrap();
        assert!(
            events
                .events
                .iter()
                .all(|e| e.kind.name() != "execution_cancelled"),
            "{events:?}"
        );
        // None of these writers may end a run of the execution on the strength of its forgery.
        let req = request(&w, json!({})).await;
        w.engine
            .admit(&w.ops, &req, "rev2", "reviewer", "run-open")
            .await
            .unwrap();
        for writer in [&other, &w.coder] {
            assert!(
                s.record_run_status(&writer.actor(), "run-open", RunStatus::Cancelled, None)
                    .await
                    .is_err()
            );
        }
        // Nor end one of its own execution with any status but `cancelled`, cancelled or not.
        assert!(
            s.record_run_status(&w.coder.actor(), "run-open", RunStatus::Started, None)
                .await
                .is_err()
        );
        assert_eq!(
            w.engine
                .store()
                .run("run-open")
                .await
                .unwrap()
                .unwrap()
                .status(),
            None
        );
    })
    .await;
}
