//! The engine's own principal writes nothing but its bookkeeping in the system role (schema
//! 19): a webhook's registration and removal and an operator's run context are the operator's
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

/// A registration the engine's identity wrote before schema 19 (reproduced by a superuser
/// connection with no role set, which the identity check does not bind) is still believed and
/// listed: since then no new one can be written so. The same call through the engine's
/// identity now is refused, and nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_the_engine_wrote_before_schema_19_is_still_believed() {
    use sqlx::{Connection as _, Executor as _};
    let scratch = verdict_store::scratch::ScratchPostgres::create("engine").unwrap();
    let options = verdict_store::OpenOptions {
        role_prefix: Some(scratch.role_prefix()),
        max_connections: 4,
        ..verdict_store::OpenOptions::default()
    };
    let store = verdict_store::open_with(&scratch.location(), &options)
        .await
        .unwrap();
    let w = world(store.clone()).await;
    let doc = registration("old-hook", "https://hooks.example.com/old", "ops");
    let table = verdict_store::Table::VerificationRequests;
    let body = String::from_utf8(verdict_core::canonical::to_vec(&doc)).unwrap();
    let dg = verdict_store::records::row_digest(table.domain(), body.as_bytes());
    let key = verdict_store::records::key_of_value(table, &doc, &dg).unwrap();
    let call = format!(
        "SELECT r_seq FROM verdict.put_one_verification_requests('{ENGINE_PRINCIPAL}', 'operator', \
         '{key}', '{dg}', '{}', NULL)",
        body.replace('\'', "''")
    );
    let mut conn = sqlx::PgConnection::connect(scratch.url()).await.unwrap();
    let before = head(&w).await;
    let err = conn
        .execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "BEGIN; SET LOCAL ROLE \"{}engine\"; {call}",
            scratch.role_prefix()
        ))))
        .await
        .unwrap_err();
    assert_eq!(
        err.as_database_error().unwrap().code().as_deref(),
        Some("42501"),
        "{err}"
    );
    conn.execute("ROLLBACK").await.unwrap();
    assert_eq!(head(&w).await, before);
    conn.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(call)))
        .await
        .unwrap();
    conn.close().await.unwrap();
    assert_eq!(
        last_writer(&w).await,
        (ENGINE_PRINCIPAL.into(), "operator".into())
    );
    let hooks = w.engine.webhooks(&w.ops).await.unwrap();
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].id.as_str(), "old-hook");
    assert!(store.verify_audit(None).await.unwrap().is_intact());
}
