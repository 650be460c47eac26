//! A writer killed with SIGKILL in the middle of thousands of appends leaves no half-written
//! item: whole transactions only, a chain that verifies after restart, and re-submitting
//! everything appends exactly what was missing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::*;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::Command;

const COUNT: u64 = 3000;
const BATCH: u64 = 7;

fn spec(t: &TestStore) -> String {
    match &t.location {
        verdict_store::Location::Sqlite(p) => format!("sqlite:{}", p.display()),
        verdict_store::Location::Postgres(url) => url.clone(),
    }
}

fn writer(t: &TestStore) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_verdict-store-bench"));
    cmd.args([
        "load",
        "--store",
        &spec(t),
        "--count",
        &COUNT.to_string(),
        "--batch",
        &BATCH.to_string(),
    ]);
    cmd.kill_on_drop(true);
    cmd
}

async fn counts(t: &TestStore) -> (i64, i64) {
    (
        t.count(&format!(
            "SELECT count(*) FROM {}",
            t.table("check_evidence")
        ))
        .await,
        t.count(&format!("SELECT count(*) FROM {}", t.table("audit_events")))
            .await,
    )
}

async fn a_killed_writer_leaves_whole_transactions_only(t: &TestStore) {
    let mut child = writer(t)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Let it commit a few hundred items, then kill it without warning.
    let mut committed = 0u64;
    while committed < 400 {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("the writer stopped early");
        committed = line.trim_start_matches("committed ").parse().unwrap();
    }
    child.start_kill().unwrap();
    let status = child.wait().await.unwrap();
    assert!(!status.success(), "the writer was killed, not finished");
    {
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(9), "killed by SIGKILL");
    }

    let store = t.reopen().await;
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    let (rows, events) = counts(t).await;
    let rows_u = u64::try_from(rows).unwrap();
    assert!(
        rows_u >= committed,
        "{rows} rows, {committed} reported committed"
    );
    assert!(
        rows_u < COUNT,
        "the writer was stopped mid-way ({rows} rows)"
    );
    assert_eq!(
        rows_u % BATCH,
        0,
        "only whole batches were committed ({rows} rows)"
    );
    assert_eq!(rows, events, "one audit event per row, none half-written");

    // Re-submitting everything appends exactly what is missing...
    let status = writer(t)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success());
    assert_eq!(
        counts(t).await,
        (i64::try_from(COUNT).unwrap(), i64::try_from(COUNT).unwrap())
    );
    // ...and once more appends nothing.
    let head = store.audit_head().await.unwrap();
    let status = writer(t)
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success());
    assert_eq!(store.audit_head().await.unwrap(), head);
    let report = store.verify_audit(None).await.unwrap();
    assert!(report.is_intact(), "{:#?}", report.problems);
    assert_eq!(report.events, COUNT);
}
both!(a_killed_writer_leaves_whole_transactions_only);
