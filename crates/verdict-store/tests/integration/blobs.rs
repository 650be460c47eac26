//! Blobs (schema version 12): bytes kept under their raw digest, put idempotently, bounded,
//! append-only; on PostgreSQL the database hashes the bytes itself and refuses a mismatch, an
//! oversized body and a record naming another writer, whoever calls the routine; `audit
//! verify` hashes every blob's bytes again.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use sqlx::Connection as _;
use verdict_core::contracts::Role;
use verdict_store::{Actor, BlobRecord, MAX_BLOB_BYTES, ProblemKind, StoreError, Table};

async fn bytes_round_trip_and_a_second_put_keeps_them_once(t: &TestStore) {
    let store = t.store.as_ref();
    let runner = Actor::new(RUNNER, Role::Runner);
    let bytes = b"diff --git a/x b/x\n+one line\n";
    let first = store
        .put_blob(&runner, bytes, Some("text/x-diff"))
        .await
        .unwrap();
    assert!(first.inserted);
    let digest = verdict_core::digest::raw(bytes);
    assert_eq!(first.key, digest.as_str());
    let record: BlobRecord = first.decode().unwrap();
    assert_eq!(record.digest, digest);
    assert_eq!(record.size, 29);
    assert_eq!(record.media_type.as_deref(), Some("text/x-diff"));
    assert_eq!(record.writer.as_str(), RUNNER);
    let head = store.audit_head().await.unwrap().unwrap();
    // The same bytes again by their writer: the stored record, nothing appended.
    let again = store.put_blob(&runner, bytes, None).await.unwrap();
    assert!(!again.inserted);
    assert_eq!(again.seq, first.seq);
    assert_eq!(store.audit_head().await.unwrap().unwrap(), head);
    // By another principal with another media type: the stored record, and that principal
    // recorded once as holding the bytes (schema version 27), which are not kept again.
    let op = Actor::new(OPERATOR, Role::Operator);
    assert!(!store.blob_put_by(&digest, OPERATOR).await.unwrap());
    let again = store.put_blob(&op, bytes, None).await.unwrap();
    assert!(!again.inserted);
    assert_eq!(again.seq, first.seq);
    assert_eq!(again.body, first.body);
    let events = store.audit_events(head.seq, 10).await.unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].table.as_str(), events[0].principal.as_str()),
        ("blob_holders", OPERATOR)
    );
    let held = store.rows(Table::BlobHolders, 0, 10).await.unwrap();
    assert_eq!(held.len(), 1);
    let holder: BlobRecord = held[0].decode().unwrap();
    assert_eq!(
        (holder.digest, holder.writer.as_str()),
        (digest.clone(), OPERATOR)
    );
    assert!(store.blob_put_by(&digest, OPERATOR).await.unwrap());
    assert!(store.blob_put_by(&digest, RUNNER).await.unwrap());
    assert!(!store.blob_put_by(&digest, PRODUCER).await.unwrap());
    let head = store.audit_head().await.unwrap().unwrap();
    store.put_blob(&op, bytes, None).await.unwrap();
    assert_eq!(store.audit_head().await.unwrap().unwrap(), head);
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) FROM {} WHERE key = '{digest}'",
            t.table("blobs")
        ))
        .await,
        1
    );
    let (row, read) = store.blob(&digest).await.unwrap().unwrap();
    assert_eq!(read, bytes);
    assert_eq!(row.seq, first.seq);
    assert!(
        store
            .blob(&verdict_core::digest::raw(b"never stored"))
            .await
            .unwrap()
            .is_none()
    );
    // Empty bytes are bytes too.
    assert!(store.put_blob(&runner, b"", None).await.unwrap().inserted);
    assert!(store.verify_audit(None).await.unwrap().is_intact());
}
both!(bytes_round_trip_and_a_second_put_keeps_them_once);

async fn oversized_bytes_a_bad_media_type_and_other_roles_store_nothing(t: &TestStore) {
    let store = t.store.as_ref();
    let runner = Actor::new(RUNNER, Role::Runner);
    let head = store.audit_head().await.unwrap();
    let big = vec![7_u8; MAX_BLOB_BYTES + 1];
    let err = store.put_blob(&runner, &big, None).await.unwrap_err();
    assert!(
        matches!(&err, StoreError::Invalid { what: "blob", message } if message.contains("8388608")),
        "{err}"
    );
    for media in ["", "text", "text/plain\n", "a/b/c", &"x/".repeat(200)] {
        let err = store
            .put_blob(&runner, b"x", Some(media))
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::Invalid { .. }),
            "{media:?}: {err}"
        );
    }
    for role in [Role::Verifier, Role::Human] {
        let err = store
            .put_blob(&Actor::new("someone", role), b"x", None)
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    }
    let err = store
        .put_blob(&Actor::gate("gate"), b"x", None)
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Forbidden { .. }), "{err}");
    assert_eq!(store.audit_head().await.unwrap(), head);
    let rows = t
        .count(&format!("SELECT count(*) FROM {}", t.table("blobs")))
        .await;
    assert_eq!(rows, 0);
    // Exactly the limit is kept.
    let full = vec![1_u8; MAX_BLOB_BYTES];
    assert!(store.put_blob(&runner, &full, None).await.unwrap().inserted);
    let (_, read) = store
        .blob(&verdict_core::digest::raw(&full))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.len(), MAX_BLOB_BYTES);
}
both!(oversized_bytes_a_bad_media_type_and_other_roles_store_nothing);

async fn audit_verify_hashes_every_blobs_bytes_again(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let seq = t
        .count(&format!("SELECT seq FROM {}", t.table("blobs")))
        .await;
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    // The bytes changed behind the store's back; the record and its hash are untouched.
    let table = t.table("blobs");
    let bytes = match t.kind {
        Kind::Sqlite => "X'6576696c'",
        Kind::Postgres => "'\\x6576696c'::bytea",
    };
    t.tamper(
        "blobs",
        &format!("UPDATE {table} SET bytes = {bytes} WHERE seq = {seq}"),
    )
    .await;
    let report = t.store.verify_audit(None).await.unwrap();
    let seq = u64::try_from(seq).unwrap();
    let found: Vec<_> = report
        .problems
        .iter()
        .filter(|p| p.kind == ProblemKind::Modified && p.seq == Some(seq) && p.table == "blobs")
        .collect();
    assert!(
        found.iter().any(|p| p.detail.contains("hash to")),
        "{:#?}",
        report.problems
    );
    assert!(
        found
            .iter()
            .any(|p| p.detail.contains("the record says 23 bytes")),
        "{:#?}",
        report.problems
    );
    assert_eq!(report.problems.len(), 2, "{:#?}", report.problems);
}
both!(audit_verify_hashes_every_blobs_bytes_again);

/// The call of put_blobs a principal's own login makes by hand, with the record the store
/// would write for `bytes` (claiming `size` bytes) and the key `key`.
fn by_hand(key: &str, writer: &str, size: usize) -> (String, String) {
    let record = BlobRecord {
        digest: key.parse().unwrap(),
        size: u64::try_from(size).unwrap(),
        media_type: None,
        writer: writer.parse().unwrap(),
        stored_at: "2026-12-01T00:00:00Z".parse().unwrap(),
    };
    let body = String::from_utf8(verdict_core::canonical::to_vec(
        &serde_json::to_value(&record).unwrap(),
    ))
    .unwrap();
    let digest = verdict_store::records::row_digest(Table::Blobs.domain(), body.as_bytes());
    (body, digest.to_string())
}

async fn call(
    conn: &mut sqlx::PgConnection,
    principal: &str,
    role: &str,
    key: &str,
    body: &str,
    digest: &str,
    bytes: &[u8],
) -> Result<bool, String> {
    sqlx::query_scalar::<_, bool>(
        "SELECT r_inserted FROM verdict.put_blobs($1, $2, $3, $4, $5, NULL, $6)",
    )
    .bind(principal)
    .bind(role)
    .bind(key)
    .bind(digest)
    .bind(body)
    .bind(bytes)
    .fetch_one(conn)
    .await
    .map_err(|e| e.to_string())
}

/// One hand-written call: principal, key, body, digest, bytes, and what the refusal says.
type HandCall = (String, String, String, String, Vec<u8>, &'static str);

/// Schema 44: a runner's own login puts bytes by hand first, with a record the store's reader
/// would refuse (a `stored_at` that is no time, a media type that is none, or a member more):
/// refused, nothing appended,
/// so the bytes stay free and the store puts them as it does any.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_cannot_store_bytes_under_a_record_the_reader_refuses() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, _) = principal_login(&t, RUNNER, Role::Runner).await;
    let head = t.store.audit_head().await.unwrap();
    let bytes = b"\n".as_slice();
    let key = verdict_core::digest::raw(bytes).to_string();
    for body in [
        format!(r#"{{"digest":"{key}","size":1,"stored_at":"never","writer":"{RUNNER}"}}"#),
        format!(
            r#"{{"digest":"{key}","size":1,"stored_at":"2026-12-01 00:00:00+00","writer":"{RUNNER}"}}"#
        ),
        format!(
            r#"{{"digest":"{key}","size":1,"stored_at":"2026-12-01T24:00:00Z","writer":"{RUNNER}"}}"#
        ),
        format!(
            r#"{{"digest":"{key}","size":1,"stored_at":"2026-12-01T00:00:00Z","writer":"{RUNNER}","zzz":[1,2]}}"#
        ),
        // A media type the reader refuses: a control character, no subtype.
        format!(
            r#"{{"digest":"{key}","media_type":"text/plain\u0007","size":1,"stored_at":"2026-12-01T00:00:00Z","writer":"{RUNNER}"}}"#
        ),
        format!(
            r#"{{"digest":"{key}","media_type":"not a type","size":1,"stored_at":"2026-12-01T00:00:00Z","writer":"{RUNNER}"}}"#
        ),
    ] {
        let digest = verdict_store::records::row_digest(Table::Blobs.domain(), body.as_bytes());
        let err = call(
            &mut conn,
            RUNNER,
            "runner",
            &key,
            &body,
            digest.as_str(),
            bytes,
        )
        .await
        .unwrap_err();
        assert!(err.contains("a blob record holds"), "{body}: {err}");
    }
    assert_eq!(t.store.audit_head().await.unwrap(), head);
    // The record the store writes is taken, and the bytes read back.
    let (body, digest) = by_hand(&key, RUNNER, bytes.len());
    assert!(
        call(&mut conn, RUNNER, "runner", &key, &body, &digest, bytes)
            .await
            .unwrap()
    );
    let runner = Actor::new(RUNNER, Role::Runner);
    let stored = t.store.put_blob(&runner, bytes, None).await.unwrap();
    assert_eq!(stored.key, key);
    conn.close().await.unwrap();
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    t.cleanup().await;
}

/// A runner's own database login calls put_blobs by hand: bytes that do not hash to the key,
/// a record claiming another size or another writer, bytes past the limit, another principal
/// named, and a direct INSERT are all refused by the database, and nothing is appended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_hashes_the_bytes_and_refuses_a_mismatch_by_hand() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    let (mut conn, login) = principal_login(&t, RUNNER, Role::Runner).await;
    let head = t.store.audit_head().await.unwrap();
    let bytes = b"the real bytes".as_slice();
    let key = verdict_core::digest::raw(bytes).to_string();
    let other = verdict_core::digest::raw(b"other bytes").to_string();
    let big = vec![0_u8; MAX_BLOB_BYTES + 1];
    let big_key = verdict_core::digest::raw(&big).to_string();
    let cases: Vec<HandCall> = vec![
        // The key of other bytes, with a record that agrees with the key.
        {
            let (b, dg) = by_hand(&other, RUNNER, bytes.len());
            (
                RUNNER.into(),
                other.clone(),
                b,
                dg,
                bytes.to_vec(),
                "the bytes hash to",
            )
        },
        {
            let (b, dg) = by_hand(&key, RUNNER, bytes.len() + 1);
            (
                RUNNER.into(),
                key.clone(),
                b,
                dg,
                bytes.to_vec(),
                "the record says",
            )
        },
        {
            let (b, dg) = by_hand(&key, PRODUCER, bytes.len());
            (
                RUNNER.into(),
                key.clone(),
                b,
                dg,
                bytes.to_vec(),
                "names writer",
            )
        },
        {
            let (b, dg) = by_hand(&big_key, RUNNER, big.len());
            (
                RUNNER.into(),
                big_key.clone(),
                b,
                dg,
                big.clone(),
                "exceed the limit of 8388608",
            )
        },
        {
            let (b, _) = by_hand(&key, RUNNER, bytes.len());
            (
                RUNNER.into(),
                key.clone(),
                b,
                other.clone(),
                bytes.to_vec(),
                "does not match the body",
            )
        },
        {
            // Another principal named: the identity check refuses first.
            let (b, dg) = by_hand(&key, PRODUCER, bytes.len());
            (
                PRODUCER.into(),
                key.clone(),
                b,
                dg,
                bytes.to_vec(),
                "does not act for principal",
            )
        },
    ];
    for (principal, k, body, digest, data, says) in &cases {
        let err = call(&mut conn, principal, "runner", k, body, digest, data)
            .await
            .unwrap_err();
        assert!(err.contains(says), "{says}: {err}");
    }
    let err = sqlx::query("INSERT INTO verdict.blobs (seq, key, digest, body, bytes) VALUES (9999, 'k', 'd', '{}', '\\x00')")
        .execute(&mut conn)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("permission denied"), "{err}");
    assert_eq!(t.store.audit_head().await.unwrap(), head);
    // The call the store makes goes through, once.
    let (body, digest) = by_hand(&key, RUNNER, bytes.len());
    assert!(
        call(&mut conn, RUNNER, "runner", &key, &body, &digest, bytes)
            .await
            .unwrap()
    );
    assert!(
        !call(&mut conn, RUNNER, "runner", &key, &body, &digest, bytes)
            .await
            .unwrap()
    );
    assert!(t.store.verify_audit(None).await.unwrap().is_intact());
    conn.close().await.unwrap();
    t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap();
    t.cleanup().await;
}

/// A verifier's or a human's own login may not call put_blobs at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verifier_or_human_login_cannot_put_a_blob() {
    let t = postgres().await;
    let bytes = b"x".as_slice();
    let key = verdict_core::digest::raw(bytes).to_string();
    for (name, role, r) in [
        ("reviewer-9", Role::Verifier, "verifier"),
        (HUMAN, Role::Human, "human"),
    ] {
        let (mut conn, login) = principal_login(&t, name, role).await;
        let (body, digest) = by_hand(&key, name, 1);
        let err = call(&mut conn, name, r, &key, &body, &digest, bytes)
            .await
            .unwrap_err();
        assert!(
            err.contains("permission denied for function put_blobs"),
            "{err}"
        );
        conn.close().await.unwrap();
        t.raw(&format!("DROP ROLE \"{login}\"")).await.unwrap();
    }
    assert_eq!(t.count("SELECT count(*) FROM verdict.blobs").await, 0);
    t.cleanup().await;
}
