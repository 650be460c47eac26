//! `verdict audit verify`, `checkpoint`, `keygen`, `export` and `verify-checkpoint`, run as a
//! user would, against stores filled through the store library and then tampered with.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use serde_json::json;
use sqlx::{Connection as _, Executor as _};
use std::path::Path;
use std::process::{Command, Output};
use verdict_core::contracts::Role;
use verdict_store::{Actor, DocKind, Location, OpenOptions};

fn verdict(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verdict"))
        .args(args)
        .env_remove("VERDICT_STORE")
        .env_remove("VERDICT_HOME")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn evidence(i: u32) -> serde_json::Value {
    json!({
        "id": format!("ev-{i}"),
        "kind": "check",
        "check": "unit-tests",
        "subject_digest": verdict_core::digest::raw(b"subject").as_str(),
        "definition_digest": verdict_core::digest::raw(b"def").as_str(),
        "produced_by": {"principal": "ci-runner", "role": "runner"},
        "outcome": "pass",
        "hard": true,
        "content_digest": verdict_core::digest::raw(&i.to_le_bytes()).as_str(),
        "observed_at": "2026-11-30T11:50:00Z",
        "freshness": {"kind": "content"}
    })
}

async fn fill(location: &Location, options: &OpenOptions) {
    let store = verdict_store::open_with(location, options).await.unwrap();
    let runner = Actor::new("ci-runner", Role::Runner);
    for i in 0..5 {
        store
            .put(&runner, DocKind::Evidence, &evidence(i))
            .await
            .unwrap();
    }
}

async fn sqlite_store(dir: &Path) -> String {
    let path = dir.join("verdict.db");
    fill(&Location::Sqlite(path.clone()), &OpenOptions::default()).await;
    format!("sqlite:{}", path.display())
}

/// Runs SQL on the SQLite file with the append-only triggers of `table` dropped, as someone
/// holding the file can.
fn tamper_sqlite(spec: &str, table: &str, sql: &str) {
    let conn = rusqlite::Connection::open(spec.trim_start_matches("sqlite:")).unwrap();
    let triggers: Vec<(String, String)> = conn
        .prepare("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?1")
        .unwrap()
        .query_map([table], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for (name, _) in &triggers {
        conn.execute_batch(&format!("DROP TRIGGER {name}")).unwrap();
    }
    conn.execute_batch(sql).unwrap();
    for (_, create) in &triggers {
        conn.execute_batch(create).unwrap();
    }
}

fn verify(spec: &str) -> (Option<i32>, String) {
    let out = verdict(&["audit", "verify", "--store", spec]);
    (out.status.code(), text(&out.stdout) + &text(&out.stderr))
}

#[tokio::test]
async fn an_intact_store_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sqlite_store(dir.path()).await;
    let (code, out) = verify(&spec);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("audit chain intact: 5 events, 5 rows"),
        "{out}"
    );
    let json = verdict(&["audit", "verify", "--store", &spec, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["problems"], json!([]));
    assert_eq!(report["head"]["seq"], 5);
}

#[tokio::test]
async fn a_changed_byte_is_named_by_seq_and_table() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sqlite_store(dir.path()).await;
    tamper_sqlite(
        &spec,
        "check_evidence",
        "UPDATE check_evidence SET body = replace(body, '\"outcome\":\"pass\"', '\"outcome\":\"fail\"') WHERE seq = 3",
    );
    let (code, out) = verify(&spec);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("seq 3 table check_evidence: modified"),
        "{out}"
    );
}

#[tokio::test]
async fn a_deleted_audit_row_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sqlite_store(dir.path()).await;
    tamper_sqlite(
        &spec,
        "audit_events",
        "DELETE FROM audit_events WHERE seq = 2",
    );
    let (code, out) = verify(&spec);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("seq 2 table audit_events: deleted"), "{out}");
}

#[tokio::test]
async fn a_swapped_pair_of_rows_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sqlite_store(dir.path()).await;
    tamper_sqlite(
        &spec,
        "audit_events",
        "UPDATE audit_events SET seq = -1 WHERE seq = 2; UPDATE audit_events SET seq = 2 WHERE seq = 4; \
         UPDATE audit_events SET seq = 4 WHERE seq = -1",
    );
    let (code, out) = verify(&spec);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("seq 2 table check_evidence: reordered"),
        "{out}"
    );
    assert!(
        out.contains("seq 4 table check_evidence: reordered"),
        "{out}"
    );
}

#[tokio::test]
async fn verify_never_creates_or_migrates_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.db");
    let (code, out) = verify(&format!("sqlite:{}", path.display()));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("no store there"), "{out}");
    assert!(!path.exists());
}

#[tokio::test]
async fn checkpoints_are_signed_exported_and_checked_outside_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sqlite_store(dir.path()).await;
    let key = dir.path().join("audit.key");
    let key_s = key.to_str().unwrap();
    let out = verdict(&["audit", "keygen", "--out", key_s]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let public = text(&out.stdout).trim().to_owned();
    assert_eq!(public.len(), 64);
    // A key file is never overwritten.
    assert_eq!(
        verdict(&["audit", "keygen", "--out", key_s]).status.code(),
        Some(2)
    );

    let cp = dir.path().join("checkpoint.json");
    let cp_s = cp.to_str().unwrap();
    let out = verdict(&[
        "audit",
        "checkpoint",
        "--store",
        &spec,
        "--key",
        key_s,
        "--out",
        cp_s,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&cp).unwrap()).unwrap();
    assert_eq!(doc["seq"], 5);
    assert_eq!(doc["public_key"], public.as_str());

    let ok = verdict(&["audit", "verify-checkpoint", cp_s, "--public-key", &public]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stdout));
    let other = verdict(&[
        "audit",
        "keygen",
        "--out",
        dir.path().join("other.key").to_str().unwrap(),
    ]);
    let other_public = text(&other.stdout).trim().to_owned();
    let bad = verdict(&[
        "audit",
        "verify-checkpoint",
        cp_s,
        "--public-key",
        &other_public,
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad.stdout));

    // The exported chain checks against the checkpoint with no database at all.
    let chain = dir.path().join("chain.jsonl");
    let out = verdict(&[
        "audit",
        "export",
        "--store",
        &spec,
        "--out",
        chain.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let with_events = [
        "audit",
        "verify-checkpoint",
        cp_s,
        "--public-key",
        &public,
        "--events",
        chain.to_str().unwrap(),
    ];
    let out = verdict(&with_events);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let edited = std::fs::read_to_string(&chain)
        .unwrap()
        .replacen("ci-runner", "ci-runnex", 1);
    std::fs::write(&chain, edited).unwrap();
    let out = verdict(&with_events);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("seq 1 table check_evidence: modified"),
        "{}",
        text(&out.stdout)
    );

    // Verifying the store against the checkpoint needs the trusted key, and then holds...
    let no_key = verdict(&["audit", "verify", "--store", &spec, "--checkpoint", cp_s]);
    assert_eq!(no_key.status.code(), Some(2));
    let args = [
        "audit",
        "verify",
        "--store",
        &spec,
        "--checkpoint",
        cp_s,
        "--public-key",
        &public,
    ];
    assert_eq!(verdict(&args).status.code(), Some(0));
    // ...until the tail is cut off, consistently, behind its back.
    tamper_sqlite(
        &spec,
        "audit_events",
        "DELETE FROM audit_events WHERE seq = 5",
    );
    tamper_sqlite(
        &spec,
        "check_evidence",
        "DELETE FROM check_evidence WHERE seq = 5",
    );
    assert_eq!(
        verify(&spec).0,
        Some(0),
        "the shortened chain is consistent on its own"
    );
    let out = verdict(&args);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains("seq 5 table audit_events: checkpoint"),
        "{}",
        text(&out.stdout)
    );
    // And no checkpoint is signed over a damaged chain.
    tamper_sqlite(
        &spec,
        "audit_events",
        "UPDATE audit_events SET principal = 'x' WHERE seq = 1",
    );
    let out = verdict(&["audit", "checkpoint", "--store", &spec, "--key", key_s]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("refusing to sign"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn every_audit_command_shows_an_example() {
    for cmd in [
        "verify",
        "checkpoint",
        "keygen",
        "verify-checkpoint",
        "export",
    ] {
        let out = verdict(&["audit", cmd, "--help"]);
        assert!(out.status.success());
        assert!(
            text(&out.stdout).contains(&format!("verdict audit {cmd}")),
            "{cmd}: {}",
            text(&out.stdout)
        );
    }
}

#[tokio::test]
async fn verify_on_postgres_names_seq_and_table() {
    // Dropped with its roles when the test ends, whether it passes or not.
    let scratch = verdict_store::scratch::ScratchPostgres::create("cliaudit").unwrap();
    let (url, prefix) = (scratch.url().to_owned(), scratch.role_prefix());
    let options = OpenOptions {
        role_prefix: Some(prefix.clone()),
        ..OpenOptions::default()
    };
    fill(&Location::Postgres(url.clone()), &options).await;
    let (code, out) = verify(&url);
    assert_eq!(code, Some(0), "{out}");
    let mut db_conn = sqlx::PgConnection::connect(&url).await.unwrap();
    db_conn
        .execute(
            "BEGIN; SET LOCAL session_replication_role = replica; \
             UPDATE verdict.check_evidence SET body = replace(body, '\"pass\"', '\"fail\"') WHERE seq = 4; COMMIT;",
        )
        .await
        .unwrap();
    db_conn.close().await.unwrap();
    let (code, out) = verify(&url);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("seq 4 table check_evidence: modified"),
        "{out}"
    );
}
