//! `audit verify`: walks the chain and re-hashes every stored row.
//!
//! Checks, each reported with seq and table:
//! - the chain: seqs from 1 without gaps, every event's hash, every link ([`check_chain`]);
//! - every row: its body is canonical, decodes as its table's type, hashes to its digest, and
//!   yields its key; the event at its seq names this table, key and digest;
//! - every event names a row that exists;
//! - every pointer equals the value its last audited change set, and each change starts from
//!   the value the change before it left;
//! - every result's `counted` flag is what the execution pointer's history says it was when
//!   the result was appended;
//! - with an anchor from a signed checkpoint, the event at its seq still has its hash.

use crate::audit::{
    AuditEvent, AuditReport, ChainHead, Problem, ProblemKind, check_chain, problem,
};
use crate::backend::{Backend, RawRow};
use crate::error::Result;
use crate::records::{PointerChange, PointerKind, Table, key_of};
use crate::store::ExecutionHead;
use std::collections::{BTreeMap, HashMap, HashSet};

const PAGE: u32 = 5000;

struct Change {
    seq: u64,
    change: PointerChange,
}

pub(crate) async fn verify<B: Backend>(
    backend: &B,
    anchor: Option<&ChainHead>,
) -> Result<AuditReport> {
    let mut events: Vec<AuditEvent> = Vec::new();
    loop {
        let after = events.last().map_or(0, |e| e.seq);
        let page = backend.audit_events(after, PAGE).await?;
        let done = page.len() < PAGE as usize;
        events.extend(page);
        if done {
            break;
        }
    }
    let mut problems = check_chain(&events);
    let by_seq: HashMap<u64, &AuditEvent> = events.iter().map(|e| (e.seq, e)).collect();
    let by_row: HashMap<(&str, &str), u64> = events
        .iter()
        .map(|e| ((e.table.as_str(), e.key.as_str()), e.seq))
        .collect();

    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut rows = 0u64;
    // What the pointer and counted checks need from the rows walked.
    let mut changes: BTreeMap<(String, String), Vec<Change>> = BTreeMap::new();
    let mut executions: HashMap<String, String> = HashMap::new();
    let mut results: Vec<(u64, String, bool, String, u64)> = Vec::new();

    for table in Table::ALL {
        let mut after = i64::MIN;
        loop {
            let page = backend.scan(table, after, PAGE).await?;
            let done = page.len() < PAGE as usize;
            for row in &page {
                rows += 1;
                after = row.seq;
                check_row(table, row, &by_seq, &by_row, &mut problems);
                seen.insert((table.name().to_owned(), row.key.clone()));
                let Ok(value) = verdict_core::json::parse(row.body.as_bytes()) else {
                    continue;
                };
                let seq = u64::try_from(row.seq).unwrap_or(0);
                match table {
                    Table::PointerChanges => {
                        if let Ok(change) =
                            verdict_core::contracts::decode_plain::<PointerChange>(&value)
                        {
                            changes
                                .entry((change.pointer.clone(), change.name.clone()))
                                .or_default()
                                .push(Change { seq, change });
                        }
                    }
                    Table::Subjects => {
                        if let Some(id) = value.pointer("/execution/id").and_then(|v| v.as_str()) {
                            executions.insert(row.key.clone(), id.to_owned());
                        }
                    }
                    Table::VerificationResults => {
                        let subject = value.get("subject_digest").and_then(|v| v.as_str());
                        let generation =
                            value.get("generation").and_then(serde_json::Value::as_u64);
                        if let (Some(s), Some(g), Some(c)) = (subject, generation, row.counted) {
                            results.push((seq, row.key.clone(), c, s.to_owned(), g));
                        }
                    }
                    _ => {}
                }
            }
            if done {
                break;
            }
        }
    }

    for e in &events {
        if Table::from_name(&e.table).is_none() {
            problems.push(problem(
                ProblemKind::Inserted,
                Some(e.seq),
                &e.table,
                Some(&e.key),
                "audit event names a table the store does not have".into(),
            ));
        } else if !seen.contains(&(e.table.clone(), e.key.clone())) {
            problems.push(problem(
                ProblemKind::Deleted,
                Some(e.seq),
                &e.table,
                Some(&e.key),
                "the row this event appended is gone".into(),
            ));
        }
    }

    for d in backend.derived_drift().await? {
        let seq = d.seq.and_then(|s| u64::try_from(s).ok());
        problems.push(problem(
            ProblemKind::Modified,
            seq,
            &d.table,
            d.key.as_deref(),
            d.detail,
        ));
    }
    check_pointers(backend, &changes, &mut problems).await?;
    check_counted(&changes, &executions, &results, &mut problems);

    if let Some(anchor) = anchor {
        match by_seq.get(&anchor.seq) {
            Some(e) if e.hash == anchor.hash => {}
            Some(e) => problems.push(problem(
                ProblemKind::Checkpoint,
                Some(anchor.seq),
                &e.table,
                Some(&e.key),
                format!(
                    "checkpoint vouches for hash {}, the chain has {}",
                    anchor.hash, e.hash
                ),
            )),
            None => problems.push(problem(
                ProblemKind::Checkpoint,
                Some(anchor.seq),
                "audit_events",
                None,
                "checkpoint vouches for an event the chain no longer has".into(),
            )),
        }
    }

    problems.sort_by(|a, b| a.seq.cmp(&b.seq).then_with(|| a.table.cmp(&b.table)));
    Ok(AuditReport {
        events: u64::try_from(events.len()).unwrap_or(u64::MAX),
        rows,
        head: events.last().map(AuditEvent::head),
        problems,
    })
}

fn check_row(
    table: Table,
    row: &RawRow,
    by_seq: &HashMap<u64, &AuditEvent>,
    by_row: &HashMap<(&str, &str), u64>,
    problems: &mut Vec<Problem>,
) {
    let name = table.name();
    let seq = u64::try_from(row.seq).ok();
    let report = |problems: &mut Vec<Problem>, kind, detail: String| {
        problems.push(problem(kind, seq, name, Some(&row.key), detail));
    };
    match key_of(table, row.body.as_bytes()) {
        Err(e) => report(
            problems,
            ProblemKind::Modified,
            format!("stored body is no longer valid: {e}"),
        ),
        Ok((key, digest)) => {
            if digest.as_str() != row.digest {
                report(
                    problems,
                    ProblemKind::Modified,
                    format!(
                        "stored body hashes to {digest}, not to its recorded digest {}",
                        row.digest
                    ),
                );
            } else if key != row.key {
                report(
                    problems,
                    ProblemKind::Modified,
                    format!("stored body belongs under key {key}"),
                );
            }
        }
    }
    let own = by_row.get(&(name, row.key.as_str())).copied();
    match seq.and_then(|s| by_seq.get(&s)) {
        Some(e) if e.table == name && e.key == row.key => {
            if e.payload_digest != row.digest {
                report(
                    problems,
                    ProblemKind::Modified,
                    format!(
                        "recorded digest {} differs from the audited {}",
                        row.digest, e.payload_digest
                    ),
                );
            }
        }
        Some(e) => match own {
            Some(at) => report(
                problems,
                ProblemKind::Reordered,
                format!(
                    "row points at the event of {} {}; its own event is seq {at}",
                    e.table, e.key
                ),
            ),
            None => report(
                problems,
                ProblemKind::Inserted,
                format!(
                    "no audit event appended this row (seq {} belongs to {} {})",
                    row.seq, e.table, e.key
                ),
            ),
        },
        None => match own {
            Some(at) => report(
                problems,
                ProblemKind::Reordered,
                format!(
                    "row claims seq {}, but its audit event is seq {at}",
                    row.seq
                ),
            ),
            None => report(
                problems,
                ProblemKind::Inserted,
                format!(
                    "no audit event appended this row (no event at seq {})",
                    row.seq
                ),
            ),
        },
    }
}

async fn check_pointers<B: Backend>(
    backend: &B,
    changes: &BTreeMap<(String, String), Vec<Change>>,
    problems: &mut Vec<Problem>,
) -> Result<()> {
    for ((pointer, name), list) in changes {
        let mut list: Vec<&Change> = list.iter().collect();
        list.sort_by_key(|c| c.change.revision);
        let mut prev = serde_json::Value::Null;
        for (i, c) in list.iter().enumerate() {
            let expected_rev = u64::try_from(i).unwrap_or(u64::MAX) + 1;
            if c.change.revision != expected_rev || c.change.old != prev {
                problems.push(problem(
                    ProblemKind::Pointer,
                    Some(c.seq),
                    "pointer_changes",
                    Some(&format!("{pointer}:{}:{name}", c.change.revision)),
                    format!(
                        "change does not follow revision {} of the same pointer",
                        expected_rev - 1
                    ),
                ));
            }
            prev = c.change.new.clone();
        }
    }
    for p in backend.pointers().await? {
        let history = changes.get(&(p.kind.as_str().to_owned(), p.name.clone()));
        let last = history.and_then(|h| h.iter().max_by_key(|c| c.change.revision));
        let value = p.value.as_deref().map_or(Ok(serde_json::Value::Null), |v| {
            verdict_core::json::parse(v.as_bytes())
        });
        let ok = match (last, value) {
            (Some(c), Ok(v)) => c.change.revision == p.revision && c.change.new == v,
            _ => false,
        };
        if !ok {
            problems.push(problem(
                ProblemKind::Pointer,
                last.map(|c| c.seq),
                "pointers",
                Some(&format!("{}:{}", p.kind.as_str(), p.name)),
                format!(
                    "pointer at revision {} holds {}, which no audited change set",
                    p.revision,
                    p.value.as_deref().unwrap_or("none")
                ),
            ));
        }
    }
    Ok(())
}

fn check_counted(
    changes: &BTreeMap<(String, String), Vec<Change>>,
    executions: &HashMap<String, String>,
    results: &[(u64, String, bool, String, u64)],
    problems: &mut Vec<Problem>,
) {
    for (seq, key, counted, subject, generation) in results {
        let head = executions.get(subject).and_then(|exec| {
            changes
                .get(&(PointerKind::Execution.as_str().to_owned(), exec.clone()))
                .and_then(|h| h.iter().filter(|c| c.seq < *seq).max_by_key(|c| c.seq))
                .and_then(|c| serde_json::from_value::<ExecutionHead>(c.change.new.clone()).ok())
        });
        let expected = head
            .is_some_and(|h| h.subject_digest.as_str() == subject && h.generation == *generation);
        if expected != *counted {
            problems.push(problem(
                ProblemKind::Modified,
                Some(*seq),
                Table::VerificationResults.name(),
                Some(key),
                format!("counted is {counted}, but the execution pointer history says {expected}"),
            ));
        }
    }
}
