//! `verify_audit` catches every kind of tampering, naming seq and table: a changed byte, a
//! deleted or inserted row or event, a swapped pair, a moved pointer, a flipped flag, and a
//! chain rewritten behind a signed checkpoint.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use verdict_store::{AuditReport, ChainHead, Checkpoint, Location, ProblemKind, checkpoint};

async fn report(t: &TestStore) -> AuditReport {
    t.store.verify_audit(None).await.unwrap()
}

fn assert_found(report: &AuditReport, kinds: &[ProblemKind], seq: i64, table: &str) {
    let seq = u64::try_from(seq).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| kinds.contains(&p.kind) && p.seq == Some(seq) && p.table == table),
        "expected {kinds:?} at seq {seq} in {table}, got:\n{}",
        report
            .problems
            .iter()
            .map(|p| format!("  {p}\n"))
            .collect::<String>()
    );
}

async fn seq_of(t: &TestStore, table: &str, nth: i64) -> i64 {
    t.count(&format!(
        "SELECT seq FROM {} ORDER BY seq LIMIT 1 OFFSET {nth}",
        t.table(table)
    ))
    .await
}

async fn an_intact_store_verifies(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let r = report(t).await;
    assert!(r.is_intact(), "{:#?}", r.problems);
    let events = t
        .count(&format!("SELECT count(*) FROM {}", t.table("audit_events")))
        .await;
    assert_eq!(r.events, u64::try_from(events).unwrap());
    assert_eq!(r.rows, r.events, "one row per event");
    assert_eq!(r.head, t.store.audit_head().await.unwrap());
    // The exported chain checks on its own, outside the database.
    let exported = t.store.audit_events(0, 10_000).await.unwrap();
    assert!(verdict_store::audit::check_chain(&exported).is_empty());
    let mut edited = exported.clone();
    edited[3].principal = "someone-else".into();
    let problems = verdict_store::audit::check_chain(&edited);
    assert!(
        problems
            .iter()
            .any(|p| p.kind == ProblemKind::Modified && p.seq == Some(4)),
        "{problems:?}"
    );
}
both!(an_intact_store_verifies);

async fn a_changed_byte_in_a_stored_document_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let seq = seq_of(t, "check_evidence", 1).await;
    // Flip the outcome of one piece of evidence, keeping the JSON valid.
    let table = t.table("check_evidence");
    t.tamper(
        "check_evidence",
        &format!("UPDATE {table} SET body = replace(body, '\"outcome\":\"pass\"', '\"outcome\":\"fail\"') WHERE seq = {seq}"),
    )
    .await;
    let r = report(t).await;
    assert_found(&r, &[ProblemKind::Modified], seq, "check_evidence");
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
    assert!(
        r.problems[0].detail.contains("hashes to"),
        "{}",
        r.problems[0]
    );
}
both!(a_changed_byte_in_a_stored_document_is_caught);

async fn a_deleted_audit_event_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let seq = seq_of(t, "check_evidence", 0).await;
    let audit = t.table("audit_events");
    t.tamper(
        "audit_events",
        &format!("DELETE FROM {audit} WHERE seq = {seq}"),
    )
    .await;
    let r = report(t).await;
    assert_found(&r, &[ProblemKind::Deleted], seq, "audit_events");
    // The row that event appended is now unaccounted for.
    assert_found(&r, &[ProblemKind::Inserted], seq, "check_evidence");
}
both!(a_deleted_audit_event_is_caught);

async fn a_swapped_pair_of_audit_events_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let a = seq_of(t, "check_evidence", 0).await;
    let b = seq_of(t, "check_evidence", 1).await;
    t.swap_seqs("audit_events", a, b).await;
    let r = report(t).await;
    assert_found(&r, &[ProblemKind::Reordered], a, "check_evidence");
    assert_found(&r, &[ProblemKind::Reordered], b, "check_evidence");
}
both!(a_swapped_pair_of_audit_events_is_caught);

async fn a_swapped_pair_of_rows_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let a = seq_of(t, "check_evidence", 0).await;
    let b = seq_of(t, "check_evidence", 2).await;
    t.swap_seqs("check_evidence", a, b).await;
    let r = report(t).await;
    assert_found(&r, &[ProblemKind::Reordered], a, "check_evidence");
    assert_found(&r, &[ProblemKind::Reordered], b, "check_evidence");
    // Swapping the bodies instead breaks both digests.
    let t2 = match t.kind {
        Kind::Sqlite => sqlite().await,
        Kind::Postgres => postgres().await,
    };
    populate(t2.store.as_ref()).await;
    let table = t2.table("check_evidence");
    let (a, b) = (
        seq_of(&t2, "check_evidence", 0).await,
        seq_of(&t2, "check_evidence", 1).await,
    );
    t2.tamper(
        "check_evidence",
        &format!(
            "CREATE TEMP TABLE swap AS SELECT seq, body FROM {table} WHERE seq IN ({a}, {b}); \
             UPDATE {table} SET body = (SELECT body FROM swap WHERE swap.seq = \
             CASE check_evidence.seq WHEN {a} THEN {b} ELSE {a} END) WHERE seq IN ({a}, {b})"
        ),
    )
    .await;
    let r = report(&t2).await;
    assert_found(&r, &[ProblemKind::Modified], a, "check_evidence");
    assert_found(&r, &[ProblemKind::Modified], b, "check_evidence");
    t2.cleanup().await;
}
both!(a_swapped_pair_of_rows_is_caught);

async fn inserted_and_deleted_rows_are_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let table = t.table("check_evidence");
    let s = subject_digest(&subject("ex-1", 1));
    let ev = evidence(&s, "ev-smuggled");
    let body = String::from_utf8(verdict_core::canonical::to_vec(&ev)).unwrap();
    let dg = verdict_core::digest::digest(verdict_core::digest::DigestKind::Evidence, &ev);
    // A well-formed row, digest and all, that no audit event appended.
    t.tamper(
        "check_evidence",
        &format!(
            "INSERT INTO {table} (seq, key, digest, body) VALUES (5000, '{dg}', '{dg}', '{body}')"
        ),
    )
    .await;
    let victim = seq_of(t, "human_decisions", 0).await;
    let humans = t.table("human_decisions");
    t.tamper(
        "human_decisions",
        &format!("DELETE FROM {humans} WHERE seq = {victim}"),
    )
    .await;
    let r = report(t).await;
    assert_found(&r, &[ProblemKind::Inserted], 5000, "check_evidence");
    assert_found(&r, &[ProblemKind::Deleted], victim, "human_decisions");
}
both!(inserted_and_deleted_rows_are_caught);

async fn a_forged_audit_event_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let seq = seq_of(t, "gate_decisions", 0).await;
    let audit = t.table("audit_events");
    t.tamper(
        "audit_events",
        &format!("UPDATE {audit} SET principal = 'someone-else' WHERE seq = {seq}"),
    )
    .await;
    let r = report(t).await;
    assert_found(&r, &[ProblemKind::Modified], seq, "gate_decisions");
}
both!(a_forged_audit_event_is_caught);

async fn a_moved_pointer_and_a_flipped_flag_are_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let pointers = t.table("pointers");
    t.tamper(
        "pointers",
        &format!("UPDATE {pointers} SET value = NULL WHERE pointer = 'lease'"),
    )
    .await;
    let results = t.table("verification_results");
    let seq = seq_of(t, "verification_results", 0).await;
    let flip = match t.kind {
        Kind::Sqlite => format!("UPDATE {results} SET counted = 1 - counted"),
        Kind::Postgres => format!("UPDATE {results} SET counted = NOT counted"),
    };
    t.tamper("verification_results", &flip).await;
    let r = report(t).await;
    assert!(
        r.problems
            .iter()
            .any(|p| p.kind == ProblemKind::Pointer && p.table == "pointers"),
        "{:#?}",
        r.problems
    );
    assert_found(&r, &[ProblemKind::Modified], seq, "verification_results");
}
both!(a_moved_pointer_and_a_flipped_flag_are_caught);

async fn a_signed_checkpoint_catches_a_rewritten_tail(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let key = checkpoint::generate_key().unwrap();
    let head = t.store.audit_head().await.unwrap().unwrap();
    let cp = Checkpoint::sign(&key, &head);
    cp.verify(&key.verifying_key()).unwrap();
    let anchor = ChainHead {
        seq: cp.seq,
        hash: cp.head.clone(),
    };
    assert!(
        t.store
            .verify_audit(Some(&anchor))
            .await
            .unwrap()
            .is_intact()
    );
    // Removing the last event and its row leaves a chain that is consistent on its own...
    let last = i64::try_from(head.seq).unwrap();
    let (audit, leases) = (t.table("audit_events"), t.table("pointer_changes"));
    t.tamper(
        "audit_events",
        &format!("DELETE FROM {audit} WHERE seq = {last}"),
    )
    .await;
    t.tamper(
        "pointer_changes",
        &format!("DELETE FROM {leases} WHERE seq = {last}"),
    )
    .await;
    let pointers = t.table("pointers");
    t.tamper(
        "pointers",
        &format!("DELETE FROM {pointers} WHERE pointer = 'lease'"),
    )
    .await;
    assert!(
        report(t).await.is_intact(),
        "{:#?}",
        report(t).await.problems
    );
    // ...but not with the checkpoint taken before.
    let r = t.store.verify_audit(Some(&anchor)).await.unwrap();
    assert_found(&r, &[ProblemKind::Checkpoint], last, "audit_events");
}
both!(a_signed_checkpoint_catches_a_rewritten_tail);

/// Since schema version 3 the columns a PostgreSQL store derives from a body (the subject a
/// piece of evidence is filed under, say) are filled by the write routine. One changed behind
/// its back, with the body left alone, would file evidence under another subject: `audit
/// verify` checks every such column against the expression it was derived with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_derived_column_is_caught() {
    let t = postgres().await;
    populate(t.store.as_ref()).await;
    assert!(report(&t).await.is_intact());
    let seq = seq_of(&t, "check_evidence", 0).await;
    let table = t.table("check_evidence");
    t.tamper(
        "check_evidence",
        &format!(
            "UPDATE {table} SET subject_digest = 'sha256:{}' WHERE seq = {seq}",
            "0".repeat(64)
        ),
    )
    .await;
    let r = report(&t).await;
    assert_found(&r, &[ProblemKind::Modified], seq, "check_evidence");
    assert_eq!(r.problems.len(), 1, "{:#?}", r.problems);
    assert!(
        r.problems[0].detail.contains("subject_digest"),
        "{}",
        r.problems[0]
    );
    t.cleanup().await;
}

/// On SQLite whoever writes the file can also rewrite the schema without touching a row or an
/// event: a generated column's definition in `sqlite_master` changed so that one piece of
/// evidence is filed under no subject (hiding a hard failure from the Gate), a trigger added,
/// an index dropped. `audit verify` compares every object of the schema with what the
/// migrations make and names each one that differs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_schema_is_caught_on_sqlite() {
    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    assert!(report(&t).await.is_intact());
    let seq = seq_of(&t, "check_evidence", 0).await;
    let column = "subject_digest TEXT GENERATED ALWAYS AS (json_extract(body, ''$.subject_digest'')) VIRTUAL";
    let hidden = format!(
        "subject_digest TEXT GENERATED ALWAYS AS (CASE WHEN seq = {seq} THEN ''hidden'' \
         ELSE json_extract(body, ''$.subject_digest'') END) VIRTUAL"
    );
    t.raw(&format!(
        "PRAGMA writable_schema = ON; \
         UPDATE sqlite_master SET sql = replace(sql, '{column}', '{hidden}') \
         WHERE type = 'table' AND name = 'check_evidence'; \
         PRAGMA writable_schema = OFF;"
    ))
    .await
    .unwrap();
    // A handle opened after the change reads the rewritten schema.
    let reopened = verdict_store::open(&t.location).await.unwrap();
    let hid: i64 = {
        let Location::Sqlite(path) = &t.location else {
            unreachable!()
        };
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.query_row(
            &format!("SELECT count(*) FROM check_evidence WHERE seq = {seq} AND subject_digest = 'hidden'"),
            [],
            |r| r.get(0),
        )
        .unwrap()
    };
    assert_eq!(hid, 1, "the rewritten definition is in force");
    let r = reopened.verify_audit(None).await.unwrap();
    assert!(!r.is_intact());
    assert!(
        r.problems.iter().any(|p| p.kind == ProblemKind::Modified
            && p.table == "check_evidence"
            && p.detail
                .contains("table \"check_evidence\" is defined otherwise")),
        "{:#?}",
        r.problems
    );
    drop(reopened);

    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    t.raw(
        "CREATE TRIGGER quietly_passing AFTER INSERT ON check_evidence BEGIN SELECT 1; END; \
         DROP INDEX check_evidence_subject_digest;",
    )
    .await
    .unwrap();
    let r = verdict_store::open(&t.location)
        .await
        .unwrap()
        .verify_audit(None)
        .await
        .unwrap();
    for (name, what) in [
        ("quietly_passing", "is not one"),
        ("check_evidence_subject_digest", "is missing"),
    ] {
        assert!(
            r.problems
                .iter()
                .any(|p| p.key.as_deref() == Some(name) && p.detail.contains(what)),
            "{name}: {:#?}",
            r.problems
        );
    }
    t.cleanup().await;
}

/// Whoever writes a SQLite file can put a trigger into `sqlite_master` under a name SQLite keeps
/// for itself (`sqlite_…`, which `CREATE TRIGGER` refuses but the file does not): SQLite loads
/// and fires it like any other. One that drops every later check evidence (`RAISE(IGNORE)`)
/// made a runner's failing evidence vanish while the append said it was stored, and `audit
/// verify` skipped the name. Now the schema check compares every object but the statistics
/// tables, and an insert that stores no row fails, writing nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_under_sqlites_own_prefix_is_caught_and_stores_nothing_quietly() {
    use verdict_core::contracts::Role;
    use verdict_store::{Actor, DocKind};
    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    t.raw(
        "PRAGMA writable_schema = ON; \
         INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES ('trigger', \
         'sqlite_censor', 'check_evidence', 0, \
         'CREATE TRIGGER sqlite_censor BEFORE INSERT ON check_evidence BEGIN SELECT RAISE(IGNORE); END'); \
         PRAGMA writable_schema = OFF;",
    )
    .await
    .unwrap();
    let reopened = t.reopen().await;
    let r = reopened.verify_audit(None).await.unwrap();
    assert!(
        r.problems.iter().any(|p| p.kind == ProblemKind::Modified
            && p.key.as_deref() == Some("sqlite_censor")
            && p.detail.contains("is not one")),
        "{:#?}",
        r.problems
    );
    let head = reopened.audit_head().await.unwrap();
    let s = subject_digest(&subject("ex-1", 1));
    let put = reopened
        .put(
            &Actor::new(RUNNER, Role::Runner),
            DocKind::Evidence,
            &evidence(&s, "ev-censored"),
        )
        .await;
    let e = put.expect_err("an append the trigger drops is an error, not a success");
    assert!(e.to_string().contains("changed 0 rows, not one"), "{e}");
    assert_eq!(reopened.audit_head().await.unwrap(), head, "nothing stored");
    t.cleanup().await;
}

/// Whoever writes a SQLite file can rebuild an index without a row: the index's definition
/// changed to leave one key out, `REINDEX`, the definition put back. Every read through the
/// index (the Gate's evidence for a subject) then misses the row, while the walk, reading each
/// table in seq order, finds it intact, so a hard failure was hidden with `audit verify`
/// saying intact. SQLite's integrity check, run by the walk, compares every index with its
/// table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_rebuilt_without_a_row_is_caught_on_sqlite() {
    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    assert!(report(&t).await.is_intact());
    let seq = seq_of(&t, "check_evidence", 0).await;
    let Location::Sqlite(path) = &t.location else {
        unreachable!()
    };
    {
        let conn = rusqlite::Connection::open(path).unwrap();
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'check_evidence_subject_digest'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let partial = format!("{sql} WHERE seq <> {seq}");
        conn.execute_batch(&format!(
            "PRAGMA writable_schema = ON; \
             UPDATE sqlite_master SET sql = '{}' WHERE name = 'check_evidence_subject_digest'; \
             PRAGMA writable_schema = OFF;",
            partial.replace('\'', "''")
        ))
        .unwrap();
        drop(conn);
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("REINDEX check_evidence_subject_digest;")
            .unwrap();
        conn.execute_batch(&format!(
            "PRAGMA writable_schema = ON; \
             UPDATE sqlite_master SET sql = '{}' WHERE name = 'check_evidence_subject_digest'; \
             PRAGMA writable_schema = OFF;",
            sql.replace('\'', "''")
        ))
        .unwrap();
    }
    let reopened = t.reopen().await;
    let r = reopened.verify_audit(None).await.unwrap();
    assert!(!r.is_intact(), "the rebuilt index goes unnoticed");
    assert!(
        r.problems
            .iter()
            .any(|p| p.kind == ProblemKind::Modified && p.detail.contains("integrity check")),
        "{:#?}",
        r.problems
    );
    t.cleanup().await;
}

/// Pointers are never removed, so a pointer row deleted behind the triggers (its changes and
/// their events left alone) used to go unnoticed: the walk compared only the rows that exist.
/// An execution deleted so vanished from every listing and the ledger; a manual clock's row
/// deleted made the store read as one on the system clock. Every pointer an audited change set
/// must have its row.
async fn a_deleted_pointer_row_is_caught(t: &TestStore) {
    populate(t.store.as_ref()).await;
    assert!(report(t).await.is_intact());
    let table = t.table("pointers");
    t.tamper(
        "pointers",
        &format!("DELETE FROM {table} WHERE pointer = 'execution' AND name = 'ex-1'"),
    )
    .await;
    let r = report(t).await;
    assert!(
        r.problems.iter().any(|p| p.kind == ProblemKind::Pointer
            && p.key.as_deref() == Some("execution:ex-1")
            && p.detail.contains("but no row")),
        "{:#?}",
        r.problems
    );
}
both!(a_deleted_pointer_row_is_caught);

/// A trigger written into a SQLite file that drops a pointer's update (`RAISE(IGNORE)`) made
/// `subject put` answer success while the execution stayed where it was. A pointer write that
/// changes no row fails, and nothing of the move is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pointer_update_a_trigger_drops_fails_and_stores_nothing() {
    use verdict_core::contracts::Role;
    use verdict_store::{Actor, DocKind, PointerKind};
    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    t.raw(
        "CREATE TRIGGER pin_head BEFORE UPDATE ON pointers WHEN NEW.pointer = 'execution' \
         BEGIN SELECT RAISE(IGNORE); END;",
    )
    .await
    .unwrap();
    let store = t.reopen().await;
    // populate left ex-1 at its generation-1 subject.
    let was = verdict_store::ExecutionHead {
        subject_digest: subject_digest(&subject("ex-1", 1)),
        generation: 1,
    };
    let pointer = store.pointer(PointerKind::Execution, "ex-1").await.unwrap();
    let next = subject("ex-1", 2);
    let s = store
        .put(
            &Actor::new(PRODUCER, Role::Producer),
            DocKind::Subject,
            &next,
        )
        .await
        .unwrap();
    let before = store.audit_head().await.unwrap();
    let moved = store
        .set_current_subject(
            &Actor::new(OPERATOR, Role::Operator),
            "ex-1",
            Some(&was),
            &s.digest,
        )
        .await;
    let e = moved.expect_err("a move the trigger drops is an error, not a success");
    assert!(e.to_string().contains("changed 0 rows, not one"), "{e}");
    assert_eq!(store.audit_head().await.unwrap(), before, "nothing stored");
    assert_eq!(
        store.pointer(PointerKind::Execution, "ex-1").await.unwrap(),
        pointer
    );
    t.cleanup().await;
}

/// `ANALYZE` makes SQLite's statistics tables, whose rows only steer the planner: a store
/// analysed still verifies. A table written into `sqlite_master` under such a name with any
/// other definition is compared like every other object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_tables_are_spared_only_as_analyze_makes_them() {
    let t = sqlite().await;
    populate(t.store.as_ref()).await;
    t.raw("ANALYZE;").await.unwrap();
    let r = t.reopen().await.verify_audit(None).await.unwrap();
    assert!(r.is_intact(), "{:#?}", r.problems);
    t.raw(
        "PRAGMA writable_schema = ON; \
         UPDATE sqlite_master SET sql = 'CREATE TABLE sqlite_stat1(tbl,idx,stat,extra)' \
         WHERE name = 'sqlite_stat1'; \
         PRAGMA writable_schema = OFF;",
    )
    .await
    .unwrap();
    let r = t.reopen().await.verify_audit(None).await.unwrap();
    assert!(
        r.problems
            .iter()
            .any(|p| p.key.as_deref() == Some("sqlite_stat1") && p.detail.contains("is not one")),
        "{:#?}",
        r.problems
    );
    t.cleanup().await;
}
