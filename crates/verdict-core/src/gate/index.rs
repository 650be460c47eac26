//! Positions of the subject's criteria, so the Gate's work is linear in the bundle: every
//! per-criterion table is a vector indexed by position, and an id is looked up once.

use crate::contracts::{Id, Subject};

/// The subject's criterion ids with a lookup from id to position (ids are unique: validated).
pub(crate) struct CriterionIndex {
    by_position: Vec<Id>,
    sorted: Vec<(Id, usize)>,
}

impl CriterionIndex {
    pub(crate) fn new(subject: &Subject) -> Self {
        let by_position: Vec<Id> = subject
            .criteria
            .items
            .iter()
            .map(|c| c.id.clone())
            .collect();
        let mut sorted: Vec<(Id, usize)> = by_position
            .iter()
            .enumerate()
            .map(|(i, id)| (id.clone(), i))
            .collect();
        sorted.sort_unstable();
        Self {
            by_position,
            sorted,
        }
    }

    /// Like [`get`](Self::get), trying position `hint` first: verifiers usually answer in the
    /// subject's order, so one comparison mostly suffices.
    pub(crate) fn get_hinted(&self, id: &Id, hint: usize) -> Option<usize> {
        match self.by_position.get(hint) {
            Some(at) if at == id => Some(hint),
            _ => self.get(id),
        }
    }

    /// The position of criterion `id`, if the subject has it (byte-for-byte comparison).
    pub(crate) fn get(&self, id: &Id) -> Option<usize> {
        let at = self.sorted.binary_search_by(|(k, _)| k.cmp(id)).ok()?;
        self.sorted.get(at).map(|(_, i)| *i)
    }

    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }
}
