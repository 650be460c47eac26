//! `verify_audit` reads events and tables a page at a time and merges them by seq. Here it
//! reads one, two and three at a time over stores tampered with where those pages end, and
//! must report exactly what it reports reading them all in one page.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use verdict_store::audit::AuditEvent;
use verdict_store::{AuditReport, ChainHead, ProblemKind};

/// Seqs 6 and 7 stand on either side of a page edge at page sizes 1, 2 and 3.
const EDGE: i64 = 6;

/// The report read in one page, after checking that pages of 1, 2 and 3 give the same.
async fn report_with(t: &TestStore, anchor: Option<&ChainHead>) -> AuditReport {
    let whole = t.store.verify_audit(anchor).await.unwrap();
    for page in [1, 2, 3] {
        let paged = t.store.verify_audit_paged(anchor, page).await.unwrap();
        assert_eq!(paged, whole, "page size {page}");
    }
    whole
}

async fn report(t: &TestStore) -> AuditReport {
    report_with(t, None).await
}

async fn chain(t: &TestStore) -> Vec<AuditEvent> {
    t.store.audit_events(0, 10_000).await.unwrap()
}

fn event(events: &[AuditEvent], seq: i64) -> &AuditEvent {
    events
        .iter()
        .find(|e| i64::try_from(e.seq).unwrap() == seq)
        .unwrap()
}

/// The problems as `kind seq table: detail` lines, to compare whole.
fn lines(r: &AuditReport) -> Vec<String> {
    r.problems
        .iter()
        .map(|p| {
            format!(
                "{} {} {}: {}",
                p.kind.as_str(),
                p.seq.map_or("-".into(), |s| s.to_string()),
                p.table,
                p.detail
            )
        })
        .collect()
}

fn has(r: &AuditReport, kind: ProblemKind, seq: i64, table: &str, detail: &str) {
    let seq = u64::try_from(seq).unwrap();
    assert!(
        r.problems.iter().any(|p| p.kind == kind
            && p.seq == Some(seq)
            && p.table == table
            && p.detail.contains(detail)),
        "expected {kind:?} at seq {seq} in {table} ({detail}), got:\n{:#?}",
        lines(r)
    );
}

async fn an_intact_store_reads_alike_in_any_page_size(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let r = report(t).await;
    assert!(r.is_intact(), "{:#?}", lines(&r));
    assert!(r.events > 10, "a chain longer than a few pages");
    assert_eq!(r.rows, r.events);
}
both!(an_intact_store_reads_alike_in_any_page_size);

async fn events_deleted_on_both_sides_of_a_page_edge(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let events = chain(t).await;
    let (a, b) = (event(&events, EDGE), event(&events, EDGE + 1));
    let audit = t.table("audit_events");
    t.tamper(
        "audit_events",
        &format!("DELETE FROM {audit} WHERE seq IN ({EDGE}, {})", EDGE + 1),
    )
    .await;
    let r = report(t).await;
    has(
        &r,
        ProblemKind::Deleted,
        EDGE,
        "audit_events",
        "audit event seqs 6..=7 missing from the chain",
    );
    has(
        &r,
        ProblemKind::Inserted,
        EDGE,
        &a.table,
        "no audit event appended this row (no event at seq 6)",
    );
    has(
        &r,
        ProblemKind::Inserted,
        EDGE + 1,
        &b.table,
        "no audit event appended this row (no event at seq 7)",
    );
    // The event after the gap links to one the chain no longer has.
    let c = event(&events, EDGE + 2);
    has(
        &r,
        ProblemKind::Inserted,
        EDGE + 2,
        &c.table,
        "links to no event of the chain",
    );
    assert_eq!(r.problems.len(), 4, "{:#?}", lines(&r));
}
both!(events_deleted_on_both_sides_of_a_page_edge);

async fn events_swapped_across_a_page_edge(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let events = chain(t).await;
    let (a, b) = (event(&events, EDGE), event(&events, EDGE + 1));
    t.swap_seqs("audit_events", EDGE, EDGE + 1).await;
    let r = report(t).await;
    // Each row now meets the other's event, and is told where its own went.
    has(
        &r,
        ProblemKind::Reordered,
        EDGE,
        &a.table,
        &format!(
            "row points at the event of {} {}; its own event is seq 7",
            b.table, b.key
        ),
    );
    has(
        &r,
        ProblemKind::Reordered,
        EDGE + 1,
        &b.table,
        &format!(
            "row points at the event of {} {}; its own event is seq 6",
            a.table, a.key
        ),
    );
    assert!(
        !r.problems.iter().any(|p| p.kind == ProblemKind::Deleted),
        "{:#?}",
        lines(&r)
    );
}
both!(events_swapped_across_a_page_edge);

async fn rows_swapped_across_a_table_page_edge(t: &TestStore) {
    populate(t.store.as_ref()).await;
    // The first and third evidence rows: a page of two ends between them.
    let table = t.table("check_evidence");
    let seq = |n: i64| format!("SELECT seq FROM {table} ORDER BY seq LIMIT 1 OFFSET {n}");
    let (a, b) = (t.count(&seq(0)).await, t.count(&seq(2)).await);
    let events = chain(t).await;
    let (ea, eb) = (event(&events, a), event(&events, b));
    t.swap_seqs("check_evidence", a, b).await;
    let r = report(t).await;
    has(
        &r,
        ProblemKind::Reordered,
        a,
        "check_evidence",
        &format!(
            "row points at the event of check_evidence {}; its own event is seq {b}",
            ea.key
        ),
    );
    has(
        &r,
        ProblemKind::Reordered,
        b,
        "check_evidence",
        &format!(
            "row points at the event of check_evidence {}; its own event is seq {a}",
            eb.key
        ),
    );
    assert_eq!(r.problems.len(), 2, "{:#?}", lines(&r));
}
both!(rows_swapped_across_a_table_page_edge);

async fn a_row_moved_past_the_end_of_the_chain(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let table = t.table("check_evidence");
    let seq = t
        .count(&format!(
            "SELECT seq FROM {table} ORDER BY seq LIMIT 1 OFFSET 2"
        ))
        .await;
    moved_past_the_end(t, "check_evidence", seq).await;
}
both!(a_row_moved_past_the_end_of_the_chain);

/// Moves the row at `seq` of `table` to seq 10000, past the end of the chain, and checks that
/// the move is the one problem reported: its event's row still exists, only elsewhere, so
/// nothing is reported deleted.
async fn moved_past_the_end(t: &TestStore, table: &str, seq: i64) {
    let name = t.table(table);
    t.tamper(
        table,
        &format!("UPDATE {name} SET seq = 10000 WHERE seq = {seq}"),
    )
    .await;
    let r = report(t).await;
    has(
        &r,
        ProblemKind::Reordered,
        10_000,
        table,
        &format!("row claims seq 10000, but its audit event is seq {seq}"),
    );
    assert_eq!(r.problems.len(), 1, "{:#?}", lines(&r));
}

async fn an_event_copied_past_the_end_of_the_chain(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let events = chain(t).await;
    let last = events.last().unwrap().seq;
    let copied = event(&events, EDGE);
    let audit = t.table("audit_events");
    t.tamper(
        "audit_events",
        &format!(
            "INSERT INTO {audit} (seq, prev_hash, hash, event_type, tbl, key, principal, role, \
             payload_digest, correlation, recorded_at) SELECT 1000, prev_hash, hash, event_type, \
             tbl, key, principal, role, payload_digest, correlation, recorded_at FROM {audit} \
             WHERE seq = {EDGE}"
        ),
    )
    .await;
    let r = report(t).await;
    has(
        &r,
        ProblemKind::Deleted,
        i64::try_from(last).unwrap() + 1,
        "audit_events",
        &format!("audit event seqs {}..=999 missing from the chain", last + 1),
    );
    has(
        &r,
        ProblemKind::Reordered,
        1000,
        &copied.table,
        "audit event recorded as seq 6 now stands at seq 1000",
    );
    // The row it names stands at seq 6, met by the original event: not deleted.
    assert_eq!(r.problems.len(), 2, "{:#?}", lines(&r));
}
both!(an_event_copied_past_the_end_of_the_chain);

async fn a_forged_event_and_a_deleted_row_at_a_page_edge(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let events = chain(t).await;
    let (a, b) = (event(&events, EDGE), event(&events, EDGE + 1));
    let audit = t.table("audit_events");
    t.tamper(
        "audit_events",
        &format!("UPDATE {audit} SET principal = 'someone-else' WHERE seq = {EDGE}"),
    )
    .await;
    let rows = t.table(&b.table);
    t.tamper(
        &b.table,
        &format!("DELETE FROM {rows} WHERE seq = {}", EDGE + 1),
    )
    .await;
    let r = report(t).await;
    has(
        &r,
        ProblemKind::Modified,
        EDGE,
        &a.table,
        "audit event no longer hashes to its recorded hash",
    );
    has(
        &r,
        ProblemKind::Deleted,
        EDGE + 1,
        &b.table,
        "the row this event appended is gone",
    );
    // A checkpoint holds the event's recorded hash, not the one it would hash to now.
    let anchor = ChainHead {
        seq: a.seq,
        hash: a.hash.clone(),
    };
    let anchored = report_with(t, Some(&anchor)).await;
    assert_eq!(anchored.problems.len(), r.problems.len());
    let wrong = ChainHead {
        seq: a.seq,
        hash: b.hash.clone(),
    };
    let anchored = report_with(t, Some(&wrong)).await;
    has(
        &anchored,
        ProblemKind::Checkpoint,
        EDGE,
        &a.table,
        "checkpoint vouches for hash",
    );
}
both!(a_forged_event_and_a_deleted_row_at_a_page_edge);

async fn a_subject_moved_after_its_results(t: &TestStore) {
    populate(t.store.as_ref()).await;
    let subjects = t.table("subjects");
    let seq = t
        .count(&format!("SELECT seq FROM {subjects} ORDER BY seq LIMIT 1"))
        .await;
    let results = t.table("verification_results");
    assert_eq!(
        t.count(&format!(
            "SELECT count(*) FROM {results} WHERE counted AND seq > {seq}"
        ))
        .await,
        1,
        "a counted result after its subject"
    );
    // The result's flag is still checked against the subject's execution, met only later, so
    // the move stays the one problem.
    moved_past_the_end(t, "subjects", seq).await;
}
both!(a_subject_moved_after_its_results);

/// `audit verify` on a store that is being written: appends and pointer moves land between
/// the pages the walk reads, and before and after it reads the pointers. None of them is
/// tampering, so every report must be intact.
async fn a_store_written_during_the_walk_verifies_intact(t: &TestStore) {
    use verdict_core::contracts::Role;
    use verdict_store::{Actor, DocKind};
    populate(t.store.as_ref()).await;
    let store = std::sync::Arc::clone(&t.store);
    let writer = tokio::spawn(async move {
        let op = Actor::new(OPERATOR, Role::Operator);
        let runner = Actor::new(RUNNER, Role::Runner);
        let s = subject_digest(&subject("ex-1", 1));
        let mut head = None;
        for i in 0..300u64 {
            store
                .put(
                    &runner,
                    DocKind::Evidence,
                    &evidence(&s, &format!("live-{i}")),
                )
                .await
                .unwrap();
            if i % 4 == 0 {
                let p = store
                    .put(&op, DocKind::Policy, &policy(10 + i))
                    .await
                    .unwrap();
                let moved = store
                    .set_gate_policy(&op, "live", head.as_ref(), &p.digest)
                    .await
                    .unwrap();
                head = moved.gate().unwrap();
            }
        }
    });
    let mut walks = 0;
    while !writer.is_finished() {
        for page in [1, 2, 7] {
            let r = t.store.verify_audit_paged(None, page).await.unwrap();
            assert!(r.is_intact(), "page size {page}: {:#?}", lines(&r));
            walks += 1;
        }
    }
    writer.await.unwrap();
    assert!(walks > 0);
    assert!(report(t).await.is_intact());
}
both!(a_store_written_during_the_walk_verifies_intact);
