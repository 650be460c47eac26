//! Tables read off a valid bundle once, before any decision: criterion positions, the check
//! pins bearing on each criterion, each verification row's criterion, the order of item ids and
//! the names an item can be cited by. The decision then works on positions, not on id strings.

use super::count;
use super::index::CriterionIndex;
use super::load::Loaded;
use crate::contracts::compact::Compact;
use crate::contracts::{CriterionStatus, Id};

/// A verification row, filed under its criterion.
#[derive(Clone, Copy)]
pub(crate) struct RowRef {
    /// The result's position in the bundle's verifications.
    pub at: usize,
    /// The row's index in the result.
    pub row: usize,
    /// What the row says.
    pub status: CriterionStatus,
    /// Whether the row cites refs, all of them citable.
    pub cites_ok: bool,
}

/// What an evidence item's counting compares with the subject, compared once.
#[derive(Clone, Copy)]
pub(crate) struct EvidenceFacts {
    /// The position of its check's pin, if the subject pins it with a definition the policy
    /// accepts (`check_definitions`); evidence of a pin the policy refuses never counts.
    pub pin: Option<usize>,
    /// It is about this subject.
    pub same_subject: bool,
    /// It ran the definition its check's pin names.
    pub pinned_definition: bool,
    /// It was produced by the producer's principal.
    pub by_producer: bool,
}

pub(crate) struct Tables {
    pub index: CriterionIndex,
    /// The subject's check pins by id, with their positions.
    pins: Vec<(Id, usize)>,
    /// The policy's required checks, each once, with the position of the subject's pin of it.
    pub required_checks: Vec<(Id, Option<usize>)>,
    /// The required verifier classes, sorted, each once.
    pub required_classes: Vec<Id>,
    /// Of those, the ones required only because the policy's `risk_floor` raised the subject's
    /// class, sorted (a reason about one says so).
    pub floor_classes: Vec<Id>,
    /// Per criterion position: positions of the pins that bear on it.
    pub pins_of: Vec<Vec<usize>>,
    /// Per evidence item: what counting it compares.
    pub evidence_facts: Vec<EvidenceFacts>,
    /// Evidence positions by pin, each pin's in the bundle's order (those of pin `k` are
    /// `pin_evidence[pin_evidence_start[k]..pin_evidence_start[k + 1]]`).
    pin_evidence: Vec<usize>,
    pin_evidence_start: Vec<usize>,
    /// How many check sources all criteria can have together, at most.
    pub check_sources_at_most: usize,
    /// Per evidence item: its rank when the evidence is sorted by id.
    pub evidence_rank: Vec<usize>,
    /// Per verification result: its rank when the results are sorted by id.
    pub verification_rank: Vec<usize>,
    /// Per criterion position: its id as the decision holds it.
    pub criterion_id: Vec<Id>,
    /// Per evidence item: its id as a criterion source names it.
    pub evidence_ref: Vec<Id>,
    /// Per verification result: its id as a criterion source names it.
    pub verification_ref: Vec<Id>,
    /// Per verification result: whether its context left something out.
    pub incomplete_context: Vec<bool>,
    /// Per verification result, per criterion position: the index of its row for it.
    pub row_of: Vec<Vec<Option<usize>>>,
    /// Every result's rows by criterion position (rows of criterion `k` are
    /// `rows[row_start[k]..row_start[k + 1]]`), each criterion's in the order of result ids.
    rows: Vec<RowRef>,
    row_start: Vec<usize>,
    /// Per verification result: why its output cannot be counted, if it cannot.
    pub output_problem: Vec<Option<String>>,
    /// Names an item can be cited by (docs/spec/evidence.md, "Refs").
    pub refs: Citable,
}

/// Ranks of `ids` in sorted order (ids compare as strings, like the decision's sources).
fn ranks<'a>(ids: impl Iterator<Item = &'a Id>) -> Vec<usize> {
    let mut order: Vec<(&Id, usize)> = ids.enumerate().map(|(i, id)| (id, i)).collect();
    order.sort_unstable();
    let mut rank = vec![0; order.len()];
    for (r, (_, i)) in order.into_iter().enumerate() {
        if let Some(slot) = rank.get_mut(i) {
            *slot = r;
        }
    }
    rank
}

/// The verifier classes the effective risk class asks for that the stated one does not.
fn floor_classes(l: &Loaded) -> Vec<Id> {
    let p = &l.policy;
    let stated = l.subject.risk.class;
    if p.effective_risk_class(stated) == stated {
        return Vec::new();
    }
    let by_stated: Vec<&Id> = p
        .required_verifiers
        .iter()
        .chain(
            p.risk
                .range(..=stated)
                .flat_map(|(_, r)| &r.required_verifiers),
        )
        .collect();
    p.verifier_classes_for(stated)
        .into_iter()
        .filter(|c| !by_stated.contains(&c))
        .collect()
}

/// Names a bundle item can be cited by, restricted to items about this subject, plus prior
/// findings and the subject's resources.
fn citable(l: &Loaded) -> Citable {
    let mut refs: Vec<Compact> = l
        .subject
        .resources
        .iter()
        .map(|r| Compact::new(r.name.as_str()))
        .collect();
    refs.extend(
        l.evidence
            .iter()
            .filter(|e| e.doc.subject_digest == l.subject_digest)
            .map(|e| Compact::new(e.doc.id.as_str())),
    );
    for v in l
        .verifications
        .iter()
        .filter(|v| v.doc.subject_digest == l.subject_digest)
    {
        refs.push(Compact::new(v.doc.id.as_str()));
        refs.extend(v.doc.findings.iter().map(|f| Compact::new(f.id.as_str())));
    }
    refs.extend(
        l.prior_findings
            .iter()
            .map(|f| Compact::new(f.doc.id.as_str())),
    );
    refs.sort_unstable();
    refs.dedup();
    Citable(refs)
}

/// The names a row, finding or disposition may cite, sorted (ids and names hold no NUL, as
/// [`Compact`] requires).
pub(crate) struct Citable(Vec<Compact>);

impl Citable {
    /// Whether `name` is citable (byte-for-byte comparison).
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0
            .binary_search_by(|c| c.as_bytes().cmp(name.as_bytes()))
            .is_ok()
    }
}

impl Tables {
    pub(crate) fn new(l: &Loaded) -> Self {
        let index = CriterionIndex::new(&l.subject);
        let n = index.len();
        let mut pins: Vec<(Id, usize)> = l
            .subject
            .checks
            .iter()
            .enumerate()
            .map(|(i, p)| (p.id.clone(), i))
            .collect();
        pins.sort_unstable();
        let mut pins_of: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, pin) in l.subject.checks.iter().enumerate() {
            for c in &pin.criteria {
                if let Some(slot) = index.get(c).and_then(|k| pins_of.get_mut(k)) {
                    slot.push(i);
                }
            }
        }
        let refs = citable(l);
        let mut tables = Self {
            index,
            pins,
            required_checks: Vec::new(),
            // The policy's floor applies inside: a subject cannot state itself out of them.
            required_classes: l.policy.verifier_classes_for(l.subject.risk.class),
            floor_classes: floor_classes(l),
            pins_of,
            evidence_facts: Vec::new(),
            pin_evidence: Vec::new(),
            pin_evidence_start: Vec::new(),
            check_sources_at_most: 0,
            evidence_rank: ranks(l.evidence.iter().map(|e| &e.doc.id)),
            verification_rank: ranks(l.verifications.iter().map(|v| &v.doc.id)),
            criterion_id: l
                .subject
                .criteria
                .items
                .iter()
                .map(|c| c.id.clone())
                .collect(),
            evidence_ref: l.evidence.iter().map(|e| e.doc.id.clone()).collect(),
            verification_ref: l.verifications.iter().map(|v| v.doc.id.clone()).collect(),
            incomplete_context: l
                .verifications
                .iter()
                .map(|v| v.doc.context.as_ref().is_some_and(|ctx| !ctx.complete))
                .collect(),
            row_of: Vec::with_capacity(l.verifications.len()),
            rows: Vec::new(),
            row_start: Vec::new(),
            output_problem: Vec::with_capacity(l.verifications.len()),
            refs,
        };
        let mut required: Vec<&Id> = l.policy.required_checks.iter().collect();
        required.sort_unstable();
        required.dedup();
        tables.required_checks = required
            .into_iter()
            .map(|id| (id.clone(), tables.pin(id)))
            .collect();
        tables.evidence_facts = l
            .evidence
            .iter()
            .map(|e| {
                let pin = tables.pin(&e.doc.check).filter(|k| {
                    l.subject.checks.get(*k).is_some_and(|p| {
                        l.policy
                            .check_definitions
                            .get(&p.id)
                            .is_none_or(|want| *want == p.definition_digest)
                    })
                });
                EvidenceFacts {
                    pin,
                    same_subject: e.doc.subject_digest == l.subject_digest,
                    pinned_definition: pin
                        .and_then(|k| l.subject.checks.get(k))
                        .is_some_and(|p| p.definition_digest == e.doc.definition_digest),
                    by_producer: e.doc.produced_by.principal == l.subject.producer.principal,
                }
            })
            .collect();
        tables.file_evidence(l.subject.checks.len());
        tables.check_sources_at_most = tables
            .pins_of
            .iter()
            .flatten()
            .map(|k| tables.evidence_of_pin(*k).len())
            .sum();
        for item in &l.verifications {
            let v = &item.doc;
            let mut row_of = vec![None; n];
            for (j, row) in v.criteria.iter().enumerate() {
                if let Some(slot) = tables
                    .index
                    .get_hinted(&row.id, j)
                    .and_then(|k| row_of.get_mut(k))
                {
                    slot.get_or_insert(j);
                }
            }
            tables
                .output_problem
                .push(count::output_problem(l, &tables.index, v));
            tables.row_of.push(row_of);
        }
        tables.file_rows(l);
        tables
    }

    /// Files the evidence under the pins of its checks.
    fn file_evidence(&mut self, pins: usize) {
        let mut start = vec![0usize; pins + 1];
        for k in self.evidence_facts.iter().filter_map(|f| f.pin) {
            if let Some(s) = start.get_mut(k + 1) {
                *s += 1;
            }
        }
        for k in 0..pins {
            let before = start.get(k).copied().unwrap_or(0);
            if let Some(s) = start.get_mut(k + 1) {
                *s += before;
            }
        }
        let mut next = start.clone();
        let mut filed = vec![0; start.last().copied().unwrap_or(0)];
        for (at, k) in self
            .evidence_facts
            .iter()
            .enumerate()
            .filter_map(|(at, f)| Some((at, f.pin?)))
        {
            if let Some(slot) = next.get_mut(k).and_then(|i| {
                let at_slot = *i;
                *i += 1;
                filed.get_mut(at_slot)
            }) {
                *slot = at;
            }
        }
        self.pin_evidence = filed;
        self.pin_evidence_start = start;
    }

    /// Positions of the evidence of the pin at position `k`, in the bundle's order.
    pub(crate) fn evidence_of_pin(&self, k: usize) -> &[usize] {
        match (
            self.pin_evidence_start.get(k),
            self.pin_evidence_start.get(k + 1),
        ) {
            (Some(a), Some(b)) => self.pin_evidence.get(*a..*b).unwrap_or_default(),
            _ => &[],
        }
    }

    /// Files every result's rows under their criteria, results in id order.
    fn file_rows(&mut self, l: &Loaded) {
        let n = self.index.len();
        let mut by_rank: Vec<usize> = (0..l.verifications.len()).collect();
        by_rank.sort_unstable_by_key(|at| self.verification_rank.get(*at).copied());
        let mut start = vec![0usize; n + 1];
        for row_of in &self.row_of {
            for (k, j) in row_of.iter().enumerate() {
                if let (Some(_), Some(s)) = (j, start.get_mut(k + 1)) {
                    *s += 1;
                }
            }
        }
        for k in 0..n {
            let before = start.get(k).copied().unwrap_or(0);
            if let Some(s) = start.get_mut(k + 1) {
                *s += before;
            }
        }
        let mut next = start.clone();
        let empty = RowRef {
            at: 0,
            row: 0,
            status: CriterionStatus::NotTested,
            cites_ok: false,
        };
        let mut rows = vec![empty; start.last().copied().unwrap_or(0)];
        for at in by_rank {
            let (Some(item), Some(row_of)) = (l.verifications.get(at), self.row_of.get(at)) else {
                continue;
            };
            for (k, j) in row_of.iter().enumerate() {
                let Some(row) = j.and_then(|j| item.doc.criteria.get(j)) else {
                    continue;
                };
                let cites_ok = !row.evidence_refs.is_empty()
                    && row
                        .evidence_refs
                        .iter()
                        .all(|x| self.refs.contains(x.as_str()));
                if let Some(slot) = next.get_mut(k).and_then(|i| {
                    let at_slot = *i;
                    *i += 1;
                    rows.get_mut(at_slot)
                }) {
                    *slot = RowRef {
                        at,
                        row: j.unwrap_or(0),
                        status: row.status,
                        cites_ok,
                    };
                }
            }
        }
        self.rows = rows;
        self.row_start = start;
    }

    /// How many rows are filed, under all criteria.
    pub(crate) fn row_count(&self) -> usize {
        self.rows.len()
    }

    /// The rows filed under criterion `k`, results in id order.
    pub(crate) fn rows_of(&self, k: usize) -> &[RowRef] {
        match (self.row_start.get(k), self.row_start.get(k + 1)) {
            (Some(a), Some(b)) => self.rows.get(*a..*b).unwrap_or_default(),
            _ => &[],
        }
    }

    /// The position of the subject's pin of check `id`.
    pub(crate) fn pin(&self, id: &Id) -> Option<usize> {
        let at = self.pins.binary_search_by(|(k, _)| k.cmp(id)).ok()?;
        self.pins.get(at).map(|(_, i)| *i)
    }
}
