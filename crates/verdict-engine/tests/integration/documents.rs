//! The engine's own documents against their schemas (`verdict schema request|admission-note|
//! run-context`): every document the engine stores validates and reads back, and what the
//! reader refuses for its shape the schema refuses too.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common::{EXEC, evidence, on_both, subject, world};
use serde_json::{Value, json};
use verdict_engine::{AdmissionNote, RunContext, VerificationRequest, document_schema};
use verdict_store::{About, DocKind};

fn validator(name: &str) -> jsonschema::Validator {
    jsonschema::draft202012::new(&document_schema(name).unwrap()).unwrap()
}

/// Whether the reader of `name` reads `doc`.
fn reads(name: &str, doc: &Value) -> bool {
    match name {
        "request" => VerificationRequest::from_value(doc).is_ok(),
        "admission-note" => AdmissionNote::from_value(doc).is_some(),
        "run-context" => verdict_core::contracts::decode_plain::<RunContext>(doc).is_ok(),
        other => panic!("no reader for {other}"),
    }
}

#[test]
fn every_engine_document_has_a_schema_and_no_other_name_does() {
    for name in verdict_engine::DOCUMENT_NAMES {
        assert!(document_schema(name).is_some(), "{name}");
    }
    assert!(document_schema("subject").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_engine_stores_validates_and_what_the_reader_refuses_the_schema_refuses() {
    on_both(|store| async move {
        let w = world(store).await;
        let d = w
            .engine
            .put_subject(&w.coder, &subject(1, "change A"))
            .await
            .unwrap();
        w.engine
            .add_evidence(&w.ci, &[evidence(&d, "pass", "ci", "runner")])
            .await
            .unwrap();
        w.engine
            .create_request_for(
                &w.coder,
                EXEC,
                &json!({"max_runs": 2, "timeout_s": 30}),
                Some("payments"),
            )
            .await
            .unwrap();
        let req = w
            .engine
            .create_request(&w.coder, EXEC, &json!({}))
            .await
            .unwrap();
        w.engine
            .admit(&w.rev, &req, "rev", "reviewer", "run-1")
            .await
            .unwrap();
        let report = verdict_engine::RunReport {
            manifest: json!({"schema": "verdict.context-manifest/v1"}),
            receipts: vec![],
            detail: Some("the provider timed out".into()),
            cache_key: None,
        };
        w.engine
            .record_run_context(&w.rev, "run-1", &report)
            .await
            .unwrap();
        let mut stored: Vec<(&str, Value)> = Vec::new();
        for about in [About::Execution(EXEC.into()), About::Subject(d.clone())] {
            for row in w
                .engine
                .store()
                .list(DocKind::Request, &about)
                .await
                .unwrap()
            {
                let doc = row.value().unwrap();
                let name = match doc["schema"].as_str().unwrap() {
                    "verdict.request/v1" => "request",
                    "verdict.admission/v1" => "admission-note",
                    "verdict.run-context/v1" => "run-context",
                    _ => continue,
                };
                if !stored.iter().any(|(_, v)| v == &doc) {
                    stored.push((name, doc));
                }
            }
        }
        for name in verdict_engine::DOCUMENT_NAMES {
            assert!(
                stored.iter().any(|(n, _)| *n == name),
                "no stored {name}: {stored:?}"
            );
        }
        for (name, doc) in &stored {
            let v = validator(name);
            let errors: Vec<String> = v.iter_errors(doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{name}: {errors:?}\n{doc}");
            assert!(reads(name, doc), "{name}: {doc}");
            // Refused by both: a field nobody writes, a missing field, another schema tag.
            let mut extra = doc.clone();
            extra["unexpected"] = json!(true);
            let mut missing = doc.clone();
            missing.as_object_mut().unwrap().remove("subject_digest");
            let mut other = doc.clone();
            other["schema"] = json!("verdict.cancellation/v1");
            let mut digest = doc.clone();
            digest["subject_digest"] = json!("sha256:not-hex");
            for bad in [extra, missing, other, digest] {
                assert!(!reads(name, &bad), "{name} reads {bad}");
                assert!(!v.is_valid(&bad), "{name} schema accepts {bad}");
            }
        }
        // A budget that caps nothing the reader accepts is refused by the schema too.
        let (_, request) = stored.iter().find(|(n, _)| *n == "request").unwrap();
        let v = validator("request");
        for budget in [
            json!({"max_runs": 0}),
            json!({"max_total_tokens": 0}),
            json!({"max_cost": -1}),
            json!({"timeout_s": 0}),
            json!({"timeout_s": 90000}),
            json!({"max_run": 2}),
        ] {
            let mut bad = request.clone();
            bad["budget"] = budget.clone();
            assert!(!reads("request", &bad), "reads budget {budget}");
            assert!(!v.is_valid(&bad), "schema accepts budget {budget}");
        }
    })
    .await;
}

#[test]
fn every_store_record_has_a_schema_and_no_contract_document_does() {
    use verdict_store::schema::{RECORD_TABLES, record_names, record_schema};
    assert_eq!(record_names().len(), RECORD_TABLES.len() + 1);
    for name in record_names() {
        let s = record_schema(name).unwrap_or_else(|| panic!("{name}"));
        jsonschema::draft202012::new(&s).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for name in ["subject", "store.subject", "request", ""] {
        assert!(record_schema(name).is_none(), "{name}");
    }
}

/// Every row of every table of the store's own records, and every audit event, written by a
/// whole lifecycle (a pass, a blob and its second holder, a token rotated, a grant given and
/// revoked, a refusal), validates against its schema (`verdict schema store.…`), on both
/// backends; and each table had a row to check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_record_the_store_keeps_validates_against_its_schema() {
    use verdict_store::schema::{AUDIT_EVENT, RECORD_TABLES, record_schema};
    on_both(|store| async move {
        let w = world(store).await;
        crate::common::passed(&w, 1, "change A", "run-1").await;
        let bytes = b"+fn added() {}\n";
        let digest = verdict_core::digest::raw(bytes);
        for who in [&w.coder, &w.ci] {
            w.engine
                .put_blob(who, digest.as_str(), bytes, Some("text/x-diff"))
                .await
                .unwrap();
        }
        w.engine
            .rotate_token(&w.ops, "rev", "rotated")
            .await
            .unwrap();
        w.engine
            .grant(
                &w.ops,
                "g-extra",
                "rev2",
                verdict_store::ScopeKind::Execution,
                EXEC,
                verdict_store::Access::Read,
                &"2099-01-01T00:00:00Z".parse().unwrap(),
            )
            .await
            .unwrap();
        w.engine.revoke(&w.ops, "g-extra", "done").await.unwrap();
        w.engine
            .add_principal(&w.coder, "minted", verdict_core::contracts::Role::Operator)
            .await
            .unwrap_err();
        let store = w.engine.store();
        for table in RECORD_TABLES {
            let name = table.domain();
            let v = jsonschema::draft202012::new(&record_schema(name).unwrap()).unwrap();
            let rows = store.rows(table, 0, 10_000).await.unwrap();
            assert!(!rows.is_empty(), "no {name} row to check");
            for row in rows {
                let doc = row.value().unwrap();
                let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
                assert!(errors.is_empty(), "{name} {doc}: {errors:?}");
            }
        }
        let v = jsonschema::draft202012::new(&record_schema(AUDIT_EVENT).unwrap()).unwrap();
        let events = store.audit_events(0, 10_000).await.unwrap();
        assert!(!events.is_empty());
        for e in events {
            let doc = serde_json::to_value(&e).unwrap();
            let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{doc}: {errors:?}");
        }
    })
    .await;
}
