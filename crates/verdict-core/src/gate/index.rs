//! Positions of the subject's criteria, so the Gate's work is linear in the bundle: every
//! per-criterion table is a vector indexed by position, and an id is looked up once.

use crate::contracts::Subject;

/// The subject's criterion ids with a lookup from id to position (ids are unique: validated).
pub(crate) struct CriterionIndex<'a> {
    by_position: Vec<&'a str>,
    sorted: Vec<(&'a str, usize)>,
}

impl<'a> CriterionIndex<'a> {
    pub(crate) fn new(subject: &'a Subject) -> Self {
        let mut sorted: Vec<(&str, usize)> = subject
            .criteria
            .items
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str(), i))
            .collect();
        let by_position = sorted.iter().map(|(id, _)| *id).collect();
        sorted.sort_unstable();
        Self {
            by_position,
            sorted,
        }
    }

    /// Like [`get`](Self::get), trying position `hint` first: verifiers usually answer in the
    /// subject's order, so one comparison mostly suffices.
    pub(crate) fn get_hinted(&self, id: &str, hint: usize) -> Option<usize> {
        match self.by_position.get(hint) {
            Some(at) if *at == id => Some(hint),
            _ => self.get(id),
        }
    }

    /// The position of criterion `id`, if the subject has it (byte-for-byte comparison).
    pub(crate) fn get(&self, id: &str) -> Option<usize> {
        let at = self.sorted.binary_search_by(|(k, _)| (*k).cmp(id)).ok()?;
        self.sorted.get(at).map(|(_, i)| *i)
    }

    pub(crate) fn len(&self) -> usize {
        self.sorted.len()
    }
}
