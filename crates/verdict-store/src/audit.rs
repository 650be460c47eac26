//! The audit chain: one event per append, each hashing its predecessor.
//!
//! An event is `{seq, prev_hash, hash, event_type, table, key, principal, role, payload_digest,
//! correlation, recorded_at}`. Its hash is
//! `"sha256:" + hex(SHA-256("verdict:audit-event:v1" + 0x00 + JCS(event without "hash")))`;
//! since `prev_hash` is inside the hashed event, each hash commits to the whole chain before it.
//! The first event's `prev_hash` is [`GENESIS_HASH`]. Events carry digests and ids only: the
//! payload itself is the stored row the event names by table and key.

use crate::records::row_digest;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::Write as _;

/// The `prev_hash` of the first event.
pub const GENESIS_HASH: &str =
    "sha256:0000000000000000000000000000000000000000000000000000000000000000";

/// The digest domain of audit events.
pub const EVENT_DOMAIN: &str = "audit-event";

/// One audit event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuditEvent {
    /// Position in the chain, from 1, without gaps.
    pub seq: u64,
    /// Hash of the event before (or [`GENESIS_HASH`]).
    pub prev_hash: String,
    /// Hash of this event.
    pub hash: String,
    /// `append` or `cas`.
    pub event_type: String,
    /// The table of the row appended.
    pub table: String,
    /// The row's key.
    pub key: String,
    /// Who wrote.
    pub principal: String,
    /// In which role.
    pub role: String,
    /// Digest of the row's body.
    pub payload_digest: String,
    /// What the row is about (subject digest, execution, run or pointer name).
    pub correlation: Option<String>,
    /// When the store recorded it (UTC, informative; covered by the hash).
    pub recorded_at: String,
}

/// The last event of the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainHead {
    /// Its seq.
    pub seq: u64,
    /// Its hash.
    pub hash: String,
}

impl AuditEvent {
    /// The hash this event's fields (all but `hash`) produce.
    #[must_use]
    pub fn compute_hash(&self) -> String {
        self.hash_at(self.seq)
    }

    fn hash_at(&self, seq: u64) -> String {
        EventFields {
            seq,
            ..self.fields()
        }
        .hash()
    }

    /// The event's fields, borrowed.
    pub(crate) fn fields(&self) -> EventFields<'_> {
        EventFields {
            seq: self.seq,
            prev_hash: &self.prev_hash,
            event_type: &self.event_type,
            table: &self.table,
            key: &self.key,
            principal: &self.principal,
            role: &self.role,
            payload_digest: &self.payload_digest,
            correlation: self.correlation.as_deref(),
            recorded_at: &self.recorded_at,
        }
    }

    /// The event that follows `head`, with its hash computed.
    #[expect(clippy::too_many_arguments, reason = "one argument per event field")]
    pub(crate) fn next(
        head: Option<&ChainHead>,
        event_type: &str,
        table: &str,
        key: &str,
        principal: &str,
        role: &str,
        payload_digest: &str,
        correlation: Option<&str>,
        recorded_at: &str,
    ) -> Self {
        let mut event = Self {
            seq: head.map_or(1, |h| h.seq + 1),
            prev_hash: head.map_or(GENESIS_HASH, |h| h.hash.as_str()).to_owned(),
            hash: String::new(),
            event_type: event_type.to_owned(),
            table: table.to_owned(),
            key: key.to_owned(),
            principal: principal.to_owned(),
            role: role.to_owned(),
            payload_digest: payload_digest.to_owned(),
            correlation: correlation.map(str::to_owned),
            recorded_at: recorded_at.to_owned(),
        };
        event.hash = event.compute_hash();
        event
    }

    /// This event as the head of the chain.
    #[must_use]
    pub fn head(&self) -> ChainHead {
        ChainHead {
            seq: self.seq,
            hash: self.hash.clone(),
        }
    }
}

/// The fields of an event borrowed from where they already live, so a writer appending many
/// rows hashes and stores each event without copying its fields into an [`AuditEvent`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct EventFields<'a> {
    pub seq: u64,
    pub prev_hash: &'a str,
    pub event_type: &'a str,
    pub table: &'a str,
    pub key: &'a str,
    pub principal: &'a str,
    pub role: &'a str,
    pub payload_digest: &'a str,
    pub correlation: Option<&'a str>,
    pub recorded_at: &'a str,
}

impl EventFields<'_> {
    /// The event's hash: its RFC 8785 form without `hash`, written directly with the keys in
    /// their sorted order.
    pub(crate) fn hash(&self) -> String {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(b"{\"correlation\":");
        match self.correlation {
            Some(c) => json_string(&mut out, c),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"event_type\":");
        json_string(&mut out, self.event_type);
        out.extend_from_slice(b",\"key\":");
        json_string(&mut out, self.key);
        out.extend_from_slice(b",\"payload_digest\":");
        json_string(&mut out, self.payload_digest);
        out.extend_from_slice(b",\"prev_hash\":");
        json_string(&mut out, self.prev_hash);
        out.extend_from_slice(b",\"principal\":");
        json_string(&mut out, self.principal);
        out.extend_from_slice(b",\"recorded_at\":");
        json_string(&mut out, self.recorded_at);
        out.extend_from_slice(b",\"role\":");
        json_string(&mut out, self.role);
        out.extend_from_slice(b",\"seq\":");
        // Writing to a Vec cannot fail.
        let _ = write!(out, "{}", self.seq);
        out.extend_from_slice(b",\"table\":");
        json_string(&mut out, self.table);
        out.push(b'}');
        row_digest(EVENT_DOMAIN, &out).to_string()
    }
}

/// Appends `s` as a JSON string the way JCS escapes it: only `"`, `\` and control characters
/// below U+0020 are escaped (serde_json escapes the same set, with lowercase hex). Digests,
/// names and timestamps need no escape, so they are copied as they are.
fn json_string(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a &str to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// The current UTC time as RFC 3339 with microseconds, as both backends record it.
pub(crate) fn now_utc() -> String {
    audit_time(0)
}

/// The audit time `seconds_ago` seconds before now, as [`now_utc`] writes it, so that the two
/// compare as text.
pub(crate) fn audit_time(seconds_ago: u64) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
        .saturating_sub(u128::from(seconds_ago) * 1_000_000_000);
    let micros = i128::try_from(nanos / 1000).unwrap_or(0);
    let t = verdict_core::contracts::Timestamp::from_unix_nanos(micros * 1000);
    // Always six fraction digits, like PostgreSQL's to_char(..., 'US').
    let text = t.as_str();
    let base = text.get(..19).unwrap_or(text);
    format!("{base}.{:06}Z", micros.rem_euclid(1_000_000))
}

/// What kind of damage a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// A row or event no longer matches what was hashed.
    Modified,
    /// A row or event is gone.
    Deleted,
    /// A row or event is there that the chain never recorded.
    Inserted,
    /// A row or event stands at another place than where it was recorded.
    Reordered,
    /// A pointer's current value is not the one its last audited change set.
    Pointer,
    /// The chain does not contain the head a signed checkpoint vouches for.
    Checkpoint,
    /// A stored gate decision that replaying its evaluation record does not reproduce byte for
    /// byte (or that has no record to replay): a decision the Gate did not make.
    Replay,
}

impl ProblemKind {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Modified => "modified",
            Self::Deleted => "deleted",
            Self::Inserted => "inserted",
            Self::Reordered => "reordered",
            Self::Pointer => "pointer",
            Self::Checkpoint => "checkpoint",
            Self::Replay => "replay",
        }
    }
}

/// One finding of `audit verify`: what, at which seq, in which table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    /// What kind of damage.
    pub kind: ProblemKind,
    /// The audit seq concerned, when there is one.
    pub seq: Option<u64>,
    /// The table concerned (`audit_events` for the chain itself, `pointers` for pointers).
    pub table: String,
    /// The row's key, when known.
    pub key: Option<String>,
    /// What exactly.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "seq {seq} table {}: {}", self.table, self.kind.as_str())?,
            None => write!(f, "table {}: {}", self.table, self.kind.as_str())?,
        }
        if let Some(key) = &self.key {
            write!(f, " (key {key})")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// The result of walking the chain and re-hashing every stored row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Events walked.
    pub events: u64,
    /// Rows re-hashed.
    pub rows: u64,
    /// The last event, if any.
    pub head: Option<ChainHead>,
    /// Everything found wrong; empty means the store is intact.
    pub problems: Vec<Problem>,
}

impl AuditReport {
    /// Whether nothing was found wrong.
    #[must_use]
    pub fn is_intact(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(crate) fn problem(
    kind: ProblemKind,
    seq: Option<u64>,
    table: &str,
    key: Option<&str>,
    detail: String,
) -> Problem {
    Problem {
        kind,
        seq,
        table: table.to_owned(),
        key: key.map(str::to_owned),
        detail,
    }
}

/// Checks a chain of events on its own (for example one exported from the database): seqs
/// without gaps from 1, every hash recomputed, every `prev_hash` linking to the event before.
/// `events` must be sorted by seq.
#[must_use]
pub fn check_chain(events: &[AuditEvent]) -> Vec<Problem> {
    let mut check = ChainCheck::default();
    for e in events {
        check.push(e);
    }
    let wanted = check.wanted();
    let mut seq_of = HashMap::new();
    if !wanted.is_empty() {
        for e in events {
            if wanted.contains(e.hash.as_str()) {
                seq_of.insert(e.hash.clone(), e.seq);
            }
        }
    }
    check.finish(&seq_of)
}

/// The chain check of [`check_chain`], fed one event at a time in seq order so that a chain
/// too long to hold is checked a page at a time. It keeps the hash of the event before and what
/// it found. Two findings name the event a `prev_hash` points at, which can stand anywhere in
/// the chain, before or after: those wait for [`ChainCheck::finish`], which takes the seq of
/// each hash [`ChainCheck::wanted`] lists (the last event with that hash, as one more pass over
/// the chain finds it).
#[derive(Debug)]
pub(crate) struct ChainCheck {
    expected_seq: u64,
    prev: String,
    found: Vec<ChainFinding>,
}

#[derive(Debug)]
enum ChainFinding {
    Done(Problem),
    /// The event no longer hashes to its hash; it may have been moved from the seq after the
    /// event its `prev_hash` names.
    Rehashed(AuditEvent),
    /// The event hashes right but links to another event than the one before it.
    Relinked {
        seq: u64,
        table: String,
        key: String,
        prev_hash: String,
    },
}

impl Default for ChainCheck {
    fn default() -> Self {
        Self {
            expected_seq: 1,
            prev: GENESIS_HASH.to_owned(),
            found: Vec::new(),
        }
    }
}

impl ChainCheck {
    /// Checks the next event.
    pub(crate) fn push(&mut self, e: &AuditEvent) {
        if e.seq > self.expected_seq {
            let expected = self.expected_seq;
            let range = if e.seq - 1 == expected {
                format!("seq {expected}")
            } else {
                format!("seqs {expected}..={}", e.seq - 1)
            };
            self.found.push(ChainFinding::Done(problem(
                ProblemKind::Deleted,
                Some(expected),
                "audit_events",
                None,
                format!("audit event {range} missing from the chain"),
            )));
        } else if e.seq < self.expected_seq {
            self.found.push(ChainFinding::Done(problem(
                ProblemKind::Reordered,
                Some(e.seq),
                "audit_events",
                None,
                format!("audit event seq {} out of order", e.seq),
            )));
        }
        if e.compute_hash() != e.hash {
            self.found.push(ChainFinding::Rehashed(e.clone()));
        } else if e.prev_hash != self.prev {
            self.found.push(ChainFinding::Relinked {
                seq: e.seq,
                table: e.table.clone(),
                key: e.key.clone(),
                prev_hash: e.prev_hash.clone(),
            });
        }
        self.prev.clone_from(&e.hash);
        self.expected_seq = self.expected_seq.max(e.seq.saturating_add(1));
    }

    /// The hashes whose seq [`ChainCheck::finish`] needs (none on an intact chain).
    pub(crate) fn wanted(&self) -> HashSet<&str> {
        self.found
            .iter()
            .filter_map(|f| match f {
                ChainFinding::Done(_) => None,
                ChainFinding::Rehashed(e) => Some(e.prev_hash.as_str()),
                ChainFinding::Relinked { prev_hash, .. } => Some(prev_hash.as_str()),
            })
            .collect()
    }

    /// What was found, in the order the events came; `seq_of` gives the seq of the last event
    /// with each hash [`ChainCheck::wanted`] listed that the chain has.
    pub(crate) fn finish(self, seq_of: &HashMap<String, u64>) -> Vec<Problem> {
        self.found
            .into_iter()
            .map(|f| match f {
                ChainFinding::Done(p) => p,
                ChainFinding::Rehashed(e) => {
                    // An event moved from its place still hashes right at the seq after the
                    // event its prev_hash names.
                    let moved_from = seq_of
                        .get(&e.prev_hash)
                        .and_then(|p| p.checked_add(1))
                        .filter(|&orig| orig != e.seq && e.hash_at(orig) == e.hash);
                    match moved_from {
                        Some(orig) => problem(
                            ProblemKind::Reordered,
                            Some(e.seq),
                            &e.table,
                            Some(&e.key),
                            format!(
                                "audit event recorded as seq {orig} now stands at seq {}",
                                e.seq
                            ),
                        ),
                        None => problem(
                            ProblemKind::Modified,
                            Some(e.seq),
                            &e.table,
                            Some(&e.key),
                            "audit event no longer hashes to its recorded hash".into(),
                        ),
                    }
                }
                ChainFinding::Relinked {
                    seq,
                    table,
                    key,
                    prev_hash,
                } => {
                    let (kind, detail) = match seq_of.get(&prev_hash) {
                        Some(p) => (
                            ProblemKind::Reordered,
                            format!("audit event follows seq {p}, not the event before it"),
                        ),
                        None => (
                            ProblemKind::Inserted,
                            "audit event links to no event of the chain: inserted or rewritten"
                                .into(),
                        ),
                    };
                    problem(kind, Some(seq), &table, Some(&key), detail)
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_copied_without_escape_match_their_json_form() {
        let cases = [
            "",
            "sha256:00ff",
            "2026-11-30T12:00:00.000001Z",
            "ünï \u{7f} \u{2028} \u{1F600}",
            "\"",
            "\\",
            "a\u{0}b",
            "tab\there",
            "\u{1f}",
            " ",
        ];
        for case in cases {
            let mut out = Vec::new();
            json_string(&mut out, case);
            let expected = serde_json::to_string(case).unwrap_or_default();
            assert_eq!(
                String::from_utf8(out).unwrap_or_default(),
                expected,
                "{case:?}"
            );
        }
    }

    #[test]
    fn the_hashed_form_is_the_canonical_form() {
        let e = AuditEvent::next(
            None,
            "append",
            "check_evidence",
            "k\u{1}\"\\é\u{2028}",
            "p \u{7f} ünï",
            "runner",
            "sha256:00",
            Some("ex\n1"),
            "2026-11-30T12:00:00.000001Z",
        );
        let doc = serde_json::json!({
            "seq": 1, "prev_hash": GENESIS_HASH, "event_type": "append", "table": "check_evidence",
            "key": e.key, "principal": e.principal, "role": "runner", "payload_digest": "sha256:00",
            "correlation": e.correlation, "recorded_at": e.recorded_at,
        });
        let canonical = verdict_core::canonical::to_vec(&doc);
        assert_eq!(e.hash, row_digest(EVENT_DOMAIN, &canonical).to_string());
        let none = AuditEvent::next(Some(&e.head()), "cas", "t", "k", "p", "r", "d", None, "now");
        let doc = serde_json::json!({
            "seq": 2, "prev_hash": e.hash, "event_type": "cas", "table": "t", "key": "k",
            "principal": "p", "role": "r", "payload_digest": "d", "correlation": null, "recorded_at": "now",
        });
        assert_eq!(
            none.hash,
            row_digest(EVENT_DOMAIN, &verdict_core::canonical::to_vec(&doc)).to_string()
        );
    }

    fn chain_of(n: u64) -> Vec<AuditEvent> {
        let mut events: Vec<AuditEvent> = Vec::new();
        for i in 0..n {
            let head = events.last().map(AuditEvent::head);
            let key = format!("k{i}");
            events.push(AuditEvent::next(
                head.as_ref(),
                "append",
                "t",
                &key,
                "p",
                "r",
                "d",
                None,
                "now",
            ));
        }
        events
    }

    fn details(problems: &[Problem]) -> Vec<String> {
        problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn links_are_placed_anywhere_in_the_chain() {
        let events = chain_of(4);
        assert!(check_chain(&events).is_empty());
        // The third event copied to seq 5: it names the second as its predecessor.
        let mut moved = events.clone();
        let mut copy = events
            .get(2)
            .cloned()
            .unwrap_or_else(|| chain_of(1).remove(0));
        copy.seq = 5;
        moved.push(copy);
        assert_eq!(
            details(&check_chain(&moved)),
            [
                "seq 5 table t: reordered (key k2): audit event recorded as seq 3 now stands at seq 5"
            ]
        );
        // A later event, rightly hashed, that follows the second instead of the one before it.
        let mut relinked = events.clone();
        let second = relinked
            .get(1)
            .map(AuditEvent::head)
            .unwrap_or_else(|| ChainHead {
                seq: 0,
                hash: String::new(),
            });
        let after_fourth = ChainHead { seq: 4, ..second };
        relinked.push(AuditEvent::next(
            Some(&after_fourth),
            "append",
            "t",
            "k9",
            "p",
            "r",
            "d",
            None,
            "now",
        ));
        assert_eq!(
            details(&check_chain(&relinked)),
            [
                "seq 5 table t: reordered (key k9): audit event follows seq 2, not the event before it"
            ]
        );
        // Without the second event, the third links to nothing the chain has.
        let mut gap = events;
        gap.remove(1);
        assert_eq!(
            details(&check_chain(&gap)),
            [
                "seq 2 table audit_events: deleted: audit event seq 2 missing from the chain",
                "seq 3 table t: inserted (key k2): audit event links to no event of the chain: inserted or rewritten",
            ]
        );
    }
}
