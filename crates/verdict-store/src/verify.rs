//! `audit verify`: walks the chain and re-hashes every stored row.
//!
//! Checks, each reported with seq and table:
//! - the chain: seqs from 1 without gaps, every event's hash, every link
//!   ([`check_chain`](crate::audit::check_chain));
//! - every row: its body is canonical, decodes as its table's type, hashes to its digest, and
//!   yields its key; the event at its seq names this table, key and digest;
//! - every event names a row that exists;
//! - every pointer equals the value its last audited change set, and each change starts from
//!   the value the change before it left;
//! - every result's `counted` flag is what the execution pointer's history says it was when
//!   the result was appended;
//! - with an anchor from a signed checkpoint, the event at its seq still has its hash.
//!
//! Every read goes through one snapshot of the store ([`Backend::snapshot`](crate::backend::Backend::snapshot):
//! a read-only REPEATABLE READ transaction on PostgreSQL, a read transaction on a connection of
//! its own on SQLite), so appends and pointer moves made during the walk are neither seen
//! half-way nor taken for tampering; they are the next walk's business. On SQLite the write-ahead
//! log cannot be checkpointed past that snapshot until the walk ends.
//!
//! It streams, so memory does not grow with the chain. Events and each table are read a page
//! at a time in seq order, and the tables are merged by seq: every row meets the event at its
//! seq while at most one page of events and one page per table are held. The chain is checked
//! event by event ([`ChainCheck`](crate::audit::ChainCheck)). Held besides the pages: the
//! problems found; every pointer change (per pointer, for the pointer checks); each subject's
//! execution id. A result's `counted` flag is checked when the merge reaches it, against the
//! changes before it (only a result whose subject comes later waits for the end). A row and an
//! event that do not meet at their seq, and a link to another event than the one before, are
//! only noted: if there are any, one more pass over the events finds where each such row's
//! event and each such event's row went, and which seq a link names.

use crate::audit::{AuditEvent, AuditReport, ChainCheck, ChainHead, Problem, ProblemKind, problem};
use crate::backend::{Backend, RawRow};
use crate::error::Result;
use crate::records::{PointerChange, PointerKind, Table, key_of};
use crate::store::ExecutionHead;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Events or rows read at once.
const PAGE: u32 = 5000;

struct Change {
    seq: u64,
    change: PointerChange,
}

/// Pointer changes by pointer kind and name, in seq order.
type Changes = BTreeMap<(String, String), Vec<Change>>;

pub(crate) async fn verify<B: Backend>(
    backend: &B,
    anchor: Option<&ChainHead>,
) -> Result<AuditReport> {
    verify_paged(backend, anchor, PAGE).await
}

pub(crate) async fn verify_paged<B: Backend>(
    backend: &B,
    anchor: Option<&ChainHead>,
    page: u32,
) -> Result<AuditReport> {
    let page = page.max(1);
    let mut walk = Walk::default();
    let mut events = EventPages::new(backend, page);
    let mut tables: Vec<RowPages<'_, B>> = Table::ALL
        .into_iter()
        .map(|t| RowPages::new(backend, t, page))
        .collect();
    loop {
        events.fill().await?;
        for t in &mut tables {
            t.fill().await?;
        }
        // i128 orders the unsigned event seqs and the signed row seqs alike.
        let event_seq = events.peek().map(|e| i128::from(e.seq));
        let row_seq = tables.iter().filter_map(RowPages::peek_seq).min();
        let seq = match (event_seq, row_seq) {
            (Some(e), Some(r)) => e.min(r),
            (Some(s), None) | (None, Some(s)) => s,
            (None, None) => break,
        };
        let event = if event_seq == Some(seq) {
            events.pop()
        } else {
            None
        };
        let mut met = false;
        for t in &mut tables {
            while let Some(row) = t.pop_at(seq) {
                met |= walk.row(t.table, &row, event.as_ref());
            }
        }
        if let Some(e) = event {
            walk.event(e, met, anchor);
        }
    }
    let seq_of = walk.place_all(backend, page).await?;

    let Walk {
        rows,
        events,
        last,
        chain,
        row_found,
        event_found,
        counted,
        unplaced,
        changes,
        executions,
        anchored,
        places,
        ..
    } = walk;
    let mut problems = chain.finish(&seq_of);
    problems.extend(
        row_found
            .into_iter()
            .chain(event_found)
            .filter_map(|f| f.resolve(&places)),
    );
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
    check_blob_bytes(backend, &mut problems).await?;
    problems.extend(counted);
    problems.extend(
        unplaced
            .iter()
            .filter_map(|r| check_counted(&changes, &executions, r)),
    );

    if let Some(anchor) = anchor {
        match &anchored {
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
        events,
        rows,
        head: last.as_ref().map(AuditEvent::head),
        problems,
    })
}

fn full(len: usize, page: u32) -> bool {
    len >= usize::try_from(page).unwrap_or(usize::MAX)
}

/// The audit events in seq order, one page held at a time.
struct EventPages<'b, B> {
    backend: &'b B,
    size: u32,
    page: VecDeque<AuditEvent>,
    after: u64,
    done: bool,
}

impl<'b, B: Backend> EventPages<'b, B> {
    fn new(backend: &'b B, size: u32) -> Self {
        Self {
            backend,
            size,
            page: VecDeque::new(),
            after: 0,
            done: false,
        }
    }

    /// Reads the next page once this one is used up.
    async fn fill(&mut self) -> Result<()> {
        if self.page.is_empty() && !self.done {
            let page = self.backend.audit_events(self.after, self.size).await?;
            self.done = !full(page.len(), self.size);
            if let Some(e) = page.last() {
                self.after = e.seq;
            }
            self.page.extend(page);
        }
        Ok(())
    }

    fn peek(&self) -> Option<&AuditEvent> {
        self.page.front()
    }

    fn pop(&mut self) -> Option<AuditEvent> {
        self.page.pop_front()
    }

    async fn next(&mut self) -> Result<Option<AuditEvent>> {
        self.fill().await?;
        Ok(self.pop())
    }
}

/// The rows of one table in seq order, one page held at a time.
struct RowPages<'b, B> {
    backend: &'b B,
    table: Table,
    size: u32,
    page: VecDeque<RawRow>,
    after: i64,
    done: bool,
}

impl<'b, B: Backend> RowPages<'b, B> {
    fn new(backend: &'b B, table: Table, size: u32) -> Self {
        Self {
            backend,
            table,
            size,
            page: VecDeque::new(),
            after: i64::MIN,
            done: false,
        }
    }

    /// Reads the next page once this one is used up.
    async fn fill(&mut self) -> Result<()> {
        if self.page.is_empty() && !self.done {
            let page = self.backend.scan(self.table, self.after, self.size).await?;
            self.done = !full(page.len(), self.size);
            if let Some(r) = page.last() {
                self.after = r.seq;
            }
            self.page.extend(page);
        }
        Ok(())
    }

    fn peek_seq(&self) -> Option<i128> {
        self.page.front().map(|r| i128::from(r.seq))
    }

    /// The next row if it stands at `seq`.
    fn pop_at(&mut self, seq: i128) -> Option<RawRow> {
        if self.peek_seq() == Some(seq) {
            self.page.pop_front()
        } else {
            None
        }
    }
}

/// A finding, or one that waits for the pass that places rows and events.
enum Found {
    Done(Problem),
    /// A row the event at its seq (`at`: the table and key it names, if there is one) did not
    /// append.
    Stray {
        table: &'static str,
        key: String,
        seq: i64,
        at: Option<(String, String)>,
    },
    /// An event whose row is not at its seq: deleted, unless it stands elsewhere.
    Rowless {
        seq: u64,
        table: &'static str,
        key: String,
    },
}

/// Where a row the merge could not place stands, by table and key.
#[derive(Default)]
struct Place {
    /// The seq of the last event naming it.
    own: Option<u64>,
    /// Whether the row exists.
    present: bool,
}

type Places = HashMap<&'static str, HashMap<String, Place>>;

impl Found {
    fn resolve(self, places: &Places) -> Option<Problem> {
        let place = |table: &str, key: &str| places.get(table).and_then(|m| m.get(key));
        match self {
            Self::Done(p) => Some(p),
            Self::Stray {
                table,
                key,
                seq,
                at,
            } => {
                let own = place(table, &key).and_then(|p| p.own);
                let (kind, detail) = match (at, own) {
                    (Some((t, k)), Some(own)) => (
                        ProblemKind::Reordered,
                        format!("row points at the event of {t} {k}; its own event is seq {own}"),
                    ),
                    (Some((t, k)), None) => (
                        ProblemKind::Inserted,
                        format!("no audit event appended this row (seq {seq} belongs to {t} {k})"),
                    ),
                    (None, Some(own)) => (
                        ProblemKind::Reordered,
                        format!("row claims seq {seq}, but its audit event is seq {own}"),
                    ),
                    (None, None) => (
                        ProblemKind::Inserted,
                        format!("no audit event appended this row (no event at seq {seq})"),
                    ),
                };
                Some(problem(
                    kind,
                    u64::try_from(seq).ok(),
                    table,
                    Some(&key),
                    detail,
                ))
            }
            Self::Rowless { seq, table, key } => (!place(table, &key).is_some_and(|p| p.present))
                .then(|| {
                    problem(
                        ProblemKind::Deleted,
                        Some(seq),
                        table,
                        Some(&key),
                        "the row this event appended is gone".into(),
                    )
                }),
        }
    }
}

/// A result's `counted` flag and what decides it: seq, key, counted, subject, generation.
type Counted = (u64, String, bool, String, u64);

/// What the merge keeps besides the pages.
#[derive(Default)]
struct Walk {
    rows: u64,
    events: u64,
    last: Option<AuditEvent>,
    chain: ChainCheck,
    /// Problems of rows in the order the merge met them, and then of events.
    row_found: Vec<Found>,
    event_found: Vec<Found>,
    counted: Vec<Problem>,
    /// Results whose subject the merge had not met yet.
    unplaced: Vec<Counted>,
    changes: Changes,
    executions: HashMap<String, String>,
    /// The event at the anchor's seq.
    anchored: Option<AuditEvent>,
    /// The rows and events that did not meet, to place.
    places: Places,
    /// The seqs of events whose row was not at their seq.
    rowless: HashSet<u64>,
}

impl Walk {
    /// Checks one row against the event at its seq; whether it is that event's row.
    fn row(&mut self, table: Table, row: &RawRow, event: Option<&AuditEvent>) -> bool {
        self.rows += 1;
        let name = table.name();
        let seq = u64::try_from(row.seq).ok();
        check_body(table, row, &mut self.row_found);
        let met = match event {
            Some(e) if e.table == name && e.key == row.key => {
                if e.payload_digest != row.digest {
                    self.row_found.push(Found::Done(problem(
                        ProblemKind::Modified,
                        seq,
                        name,
                        Some(&row.key),
                        format!(
                            "recorded digest {} differs from the audited {}",
                            row.digest, e.payload_digest
                        ),
                    )));
                }
                true
            }
            other => {
                self.place(name, &row.key).present = true;
                self.row_found.push(Found::Stray {
                    table: name,
                    key: row.key.clone(),
                    seq: row.seq,
                    at: other.map(|e| (e.table.clone(), e.key.clone())),
                });
                false
            }
        };
        self.keep(table, row);
        met
    }

    /// Keeps what the pointer and counted checks need from a row.
    fn keep(&mut self, table: Table, row: &RawRow) {
        let Ok(value) = verdict_core::json::parse(row.body.as_bytes()) else {
            return;
        };
        let seq = u64::try_from(row.seq).unwrap_or(0);
        match table {
            Table::PointerChanges => {
                if let Ok(change) = verdict_core::contracts::decode_plain::<PointerChange>(&value) {
                    self.changes
                        .entry((change.pointer.clone(), change.name.clone()))
                        .or_default()
                        .push(Change { seq, change });
                }
            }
            Table::Subjects => {
                if let Some(id) = value.pointer("/execution/id").and_then(|v| v.as_str()) {
                    self.executions.insert(row.key.clone(), id.to_owned());
                }
            }
            Table::VerificationResults => {
                let subject = value.get("subject_digest").and_then(|v| v.as_str());
                let generation = value.get("generation").and_then(serde_json::Value::as_u64);
                if let (Some(s), Some(g), Some(c)) = (subject, generation, row.counted) {
                    let result = (seq, row.key.clone(), c, s.to_owned(), g);
                    // The merge has met every change before this seq, so the flag is checked
                    // now, unless the subject is yet to come.
                    if self.executions.contains_key(s) {
                        self.counted.extend(check_counted(
                            &self.changes,
                            &self.executions,
                            &result,
                        ));
                    } else {
                        self.unplaced.push(result);
                    }
                }
            }
            _ => {}
        }
    }

    /// Takes the event the rows at its seq were checked against; `met`: one of them was its row.
    fn event(&mut self, e: AuditEvent, met: bool, anchor: Option<&ChainHead>) {
        self.chain.push(&e);
        self.events += 1;
        match Table::from_name(&e.table) {
            None => self.event_found.push(Found::Done(problem(
                ProblemKind::Inserted,
                Some(e.seq),
                &e.table,
                Some(&e.key),
                "audit event names a table the store does not have".into(),
            ))),
            Some(t) if !met => {
                self.place(t.name(), &e.key);
                self.rowless.insert(e.seq);
                self.event_found.push(Found::Rowless {
                    seq: e.seq,
                    table: t.name(),
                    key: e.key.clone(),
                });
            }
            Some(_) => {}
        }
        if anchor.is_some_and(|a| a.seq == e.seq) {
            self.anchored = Some(e.clone());
        }
        self.last = Some(e);
    }

    fn place(&mut self, table: &'static str, key: &str) -> &mut Place {
        self.places
            .entry(table)
            .or_default()
            .entry(key.to_owned())
            .or_default()
    }

    /// One more pass over the events, when anything waits for it: the last event naming each
    /// row to place, whether that row exists, and the seq of each hash the chain check wants.
    async fn place_all<B: Backend>(
        &mut self,
        backend: &B,
        page: u32,
    ) -> Result<HashMap<String, u64>> {
        let hashes: HashSet<String> = self.chain.wanted().into_iter().map(str::to_owned).collect();
        let mut seq_of = HashMap::new();
        if hashes.is_empty() && self.places.is_empty() {
            return Ok(seq_of);
        }
        // The pass covers the chain the merge walked, and nothing after it.
        let end = self.last.as_ref().map_or(0, |e| e.seq);
        let mut events = EventPages::new(backend, page);
        while let Some(e) = events.next().await? {
            if e.seq > end {
                break;
            }
            if let Some(place) = self
                .places
                .get_mut(e.table.as_str())
                .and_then(|m| m.get_mut(e.key.as_str()))
            {
                place.own = Some(e.seq);
                // An event the merge saw meet its row vouches that the row exists.
                if !self.rowless.contains(&e.seq) {
                    place.present = true;
                }
            }
            if hashes.contains(&e.hash) {
                seq_of.insert(e.hash, e.seq);
            }
        }
        Ok(seq_of)
    }
}

/// A row's own checks: its body is valid, hashes to its digest and yields its key.
fn check_body(table: Table, row: &RawRow, found: &mut Vec<Found>) {
    let name = table.name();
    let seq = u64::try_from(row.seq).ok();
    let report = |found: &mut Vec<Found>, detail: String| {
        found.push(Found::Done(problem(
            ProblemKind::Modified,
            seq,
            name,
            Some(&row.key),
            detail,
        )));
    };
    match key_of(table, row.body.as_bytes()) {
        Err(e) => report(found, format!("stored body is no longer valid: {e}")),
        Ok((key, digest)) => {
            if digest.as_str() != row.digest {
                report(
                    found,
                    format!(
                        "stored body hashes to {digest}, not to its recorded digest {}",
                        row.digest
                    ),
                );
            } else if key != row.key {
                report(found, format!("stored body belongs under key {key}"));
            }
        }
    }
}

async fn check_pointers<B: Backend>(
    backend: &B,
    changes: &Changes,
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
    let pointers = backend.pointers().await?;
    // A pointer an audited change set has a row: pointers are never removed, so one whose row
    // is gone (deleted behind the triggers, with every event left alone) is tampering, and
    // reading it as never set would drop an execution or a store's clock from every read.
    let held: HashSet<(String, String)> = pointers
        .iter()
        .map(|p| (p.kind.as_str().to_owned(), p.name.clone()))
        .collect();
    for ((pointer, name), list) in changes {
        if held.contains(&(pointer.clone(), name.clone())) {
            continue;
        }
        let last = list.iter().max_by_key(|c| c.change.revision);
        problems.push(problem(
            ProblemKind::Pointer,
            last.map(|c| c.seq),
            "pointers",
            Some(&format!("{pointer}:{name}")),
            format!(
                "pointer has audited changes up to revision {} but no row",
                last.map_or(0, |c| c.change.revision)
            ),
        ));
    }
    for p in pointers {
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

/// Blobs read at once when their bytes are hashed again (each is at most 8 MiB).
const BLOB_PAGE: u32 = 4;

/// Every blob's bytes hash to its key and have the length its record says: the bytes are kept
/// beside the hashed record, so they are hashed again here, in code.
async fn check_blob_bytes<B: Backend>(backend: &B, problems: &mut Vec<Problem>) -> Result<()> {
    let mut after = i64::MIN;
    loop {
        let page = backend.scan(Table::Blobs, after, BLOB_PAGE).await?;
        for row in &page {
            after = row.seq;
            let seq = u64::try_from(row.seq).ok();
            let mut report = |detail: String| {
                problems.push(problem(
                    ProblemKind::Modified,
                    seq,
                    Table::Blobs.name(),
                    Some(&row.key),
                    detail,
                ));
            };
            let Some(bytes) = backend.blob_bytes(&row.key).await? else {
                report("the blob's bytes are gone".into());
                continue;
            };
            let actual = verdict_core::digest::raw(&bytes);
            if actual.as_str() != row.key {
                report(format!(
                    "the stored bytes hash to {actual}, not to their key {}",
                    row.key
                ));
            }
            let size = verdict_core::json::parse(row.body.as_bytes())
                .ok()
                .and_then(|v| v.get("size").and_then(serde_json::Value::as_u64));
            if size.is_some_and(|n| usize::try_from(n).ok() != Some(bytes.len())) {
                report(format!(
                    "the record says {} bytes, the stored bytes are {}",
                    size.unwrap_or_default(),
                    bytes.len()
                ));
            }
        }
        if !full(page.len(), BLOB_PAGE) {
            return Ok(());
        }
    }
}

/// A problem if a result's `counted` flag is not what the execution pointer held just before
/// the result's seq.
fn check_counted(
    changes: &Changes,
    executions: &HashMap<String, String>,
    (seq, key, counted, subject, generation): &Counted,
) -> Option<Problem> {
    let head = executions.get(subject).and_then(|exec| {
        changes
            .get(&(PointerKind::Execution.as_str().to_owned(), exec.clone()))
            .and_then(|h| h.iter().filter(|c| c.seq < *seq).max_by_key(|c| c.seq))
            .and_then(|c| serde_json::from_value::<ExecutionHead>(c.change.new.clone()).ok())
    });
    let expected =
        head.is_some_and(|h| h.subject_digest.as_str() == subject && h.generation == *generation);
    (expected != *counted).then(|| {
        problem(
            ProblemKind::Modified,
            Some(*seq),
            Table::VerificationResults.name(),
            Some(key),
            format!("counted is {counted}, but the execution pointer history says {expected}"),
        )
    })
}
