//! The engine's own principal writes nothing but its bookkeeping in the system role (schema
//! 17): a webhook's registration and removal and an operator's run context are the operator's
//! own acts, and only an operator's are believed; a delivery or failure record is the system's.
//! On SQLite and PostgreSQL.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use serde_json::json;
use verdict_core::digest::{DigestKind, digest};
use verdict_engine::webhooks::{NewWebhook, WebhookNote, WebhookScope};
use verdict_engine::{ENGINE_PRINCIPAL, RunReport};
use verdict_store::{Actor, ActorRole, DocKind, StoreError};

/// The principal and role the audit chain names as the writer of its newest event.
async fn last_writer(w: &World) -> (String, String) {
    let head = w.engine.store().audit_head().await.unwrap().unwrap().seq;
    let events = w.engine.store().audit_events(head - 1, 1).await.unwrap();
    (events[0].principal.clone(), events[0].role.clone())
}

async fn head(w: &World) -> u64 {
    w.engine.store().audit_head().await.unwrap().unwrap().seq
}

fn new_hook(id: &str) -> NewWebhook {
    NewWebhook {
        id: id.into(),
        url: "https://hooks.example.com/verdict".into(),
        scope: WebhookScope::All,
        event_types: Vec::new(),
        secret_sha256: digest(DigestKind::Context, &json!({"secret": id})),
    }
}

/// A registration as the engine writes one, naming `by`, with `url`.
fn registration(id: &str, url: &str, by: &str) -> serde_json::Value {
    json!({
        "schema": "verdict.webhook/v1",
        "id": id,
        "url": url,
        "scope": {"kind": "all"},
        "event_types": [],
        "secret_sha256": digest(DigestKind::Context, &json!({"secret": id})).as_str(),
        "registered_by": by,
        "at": now().to_string(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_their_operators_acts_and_deliveries_the_systems() {
    on_both(|store| async move {
        let w = world(store).await;
        let hook = w
            .engine
            .register_webhook(&w.ops, new_hook("hook-1"))
            .await
            .unwrap();
        assert_eq!(last_writer(&w).await, ("ops".into(), "operator".into()));
        w.engine.record_webhook_delivered(&hook, 3).await.unwrap();
        assert_eq!(
            last_writer(&w).await,
            (ENGINE_PRINCIPAL.into(), "system".into())
        );
        w.engine
            .record_webhook_failure(&hook, 4, 3, "connection refused")
            .await
            .unwrap();
        assert_eq!(
            last_writer(&w).await,
            (ENGINE_PRINCIPAL.into(), "system".into())
        );
        let (notes, _) = w.engine.webhook_notes_after(0).await.unwrap();
        assert!(
            matches!(
                notes.iter().map(|(_, n)| n).collect::<Vec<_>>()[..],
                [
                    WebhookNote::Registered(_),
                    WebhookNote::Delivered(_),
                    WebhookNote::Failed(_)
                ]
            ),
            "{notes:?}"
        );
        assert_eq!(
            w.engine.webhooks(&w.ops).await.unwrap(),
            std::slice::from_ref(&hook)
        );
        w.engine.remove_webhook(&w.ops, "hook-1").await.unwrap();
        assert_eq!(last_writer(&w).await, ("ops".into(), "operator".into()));
        assert!(w.engine.webhooks(&w.ops).await.unwrap().is_empty());
        // Nothing in the chain was written by the engine's principal outside the system role.
        let events = w.engine.store().audit_events(0, 10_000).await.unwrap();
        assert!(
            events
                .iter()
                .all(|e| e.principal != ENGINE_PRINCIPAL || e.role == "system"),
            "{events:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_not_written_by_the_operator_it_names_is_neither_stored_nor_believed() {
    on_both(|store| async move {
        let w = world(store).await;
        let store = w.engine.store();
        let before = head(&w).await;
        // The engine's principal in the operator role, and the system role, write no
        // registration: refused, nothing appended.
        let engine = Actor::new(ENGINE_PRINCIPAL, ActorRole::Operator);
        let evil = registration("evil", "https://attacker.example.com/", "ops");
        let e = store
            .put(&engine, DocKind::Request, &evil)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Refused(_)), "{e}");
        let e = store
            .put(&Actor::system(ENGINE_PRINCIPAL), DocKind::Request, &evil)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Forbidden { .. }), "{e}");
        assert_eq!(head(&w).await, before);
        // A producer may append to the requests table, so its registration naming an operator
        // is stored, and ignored; so is an operator's naming another principal, and a
        // producer's delivery record or removal.
        store
            .put(&w.coder.actor(), DocKind::Request, &evil)
            .await
            .unwrap();
        store
            .put(
                &w.ops.actor(),
                DocKind::Request,
                &registration("evil-2", "https://attacker.example.com/2", "coder"),
            )
            .await
            .unwrap();
        let hook = w
            .engine
            .register_webhook(&w.ops, new_hook("hook-1"))
            .await
            .unwrap();
        for forged in [
            json!({"schema": "verdict.webhook-delivered/v1", "webhook": "hook-1", "event": 999_999,
                "at": now().to_string()}),
            json!({"schema": "verdict.webhook-removal/v1", "webhook": "hook-1", "removed_by": "ops",
                "at": now().to_string()}),
        ] {
            store
                .put(&w.coder.actor(), DocKind::Request, &forged)
                .await
                .unwrap();
        }
        let (notes, _) = w.engine.webhook_notes_after(0).await.unwrap();
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert_eq!(notes[0].1, WebhookNote::Registered(hook.clone()));
        assert_eq!(w.engine.webhooks(&w.ops).await.unwrap(), [hook]);
        // The id a forged registration took is still free to an operator.
        w.engine
            .register_webhook(&w.ops, new_hook("evil"))
            .await
            .unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_run_context_is_its_own_and_read_back() {
    on_both(|store| async move {
        let w = world(store).await;
        let (d, _, _) = prepared(&w, 1, "change A", "run-1").await;
        let manifest = json!({"schema": "verdict.context-manifest/v1", "entries": []});
        let report = RunReport {
            manifest: manifest.clone(),
            ..Default::default()
        };
        let digest = w
            .engine
            .record_run_context(&w.ops, "run-1", &report)
            .await
            .unwrap();
        assert_eq!(last_writer(&w).await, ("ops".into(), "operator".into()));
        let notes = w.engine.run_contexts(&w.ops, "run-1").await.unwrap();
        assert_eq!(notes.len(), 1);
        assert_eq!(notes[0].context_digest, digest);
        assert_eq!(notes[0].manifest, manifest);
        // A context note of the same shape from the producer is stored (it may append to the
        // requests table, holding a write grant) and not believed.
        let mut forged = serde_json::to_value(&notes[0]).unwrap();
        forged["manifest"] = json!({"schema": "verdict.context-manifest/v1", "entries": [1]});
        w.engine
            .store()
            .put(&w.coder.actor(), DocKind::Request, &forged)
            .await
            .unwrap();
        assert_eq!(forged["subject_digest"], json!(d.as_str()));
        assert_eq!(
            w.engine.run_contexts(&w.ops, "run-1").await.unwrap().len(),
            1
        );
        // Nor can it be written as the engine's principal.
        let e = w
            .engine
            .store()
            .put(
                &Actor::new(ENGINE_PRINCIPAL, ActorRole::Operator),
                DocKind::Request,
                &forged,
            )
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Refused(_)), "{e}");
    })
    .await;
}
