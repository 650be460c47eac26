//! Positions of the subject's criteria, so the Gate's work is linear in the bundle: every
//! per-criterion table is a vector indexed by position, and an id is looked up once.

use crate::contracts::Subject;

/// The subject's criterion ids with a lookup from id to position (ids are unique: validated).
pub(crate) struct CriterionIndex<'a> {
    sorted: Vec<(&'a str, usize)>,
}

impl<'a> CriterionIndex<'a> {
    pub(crate) fn new(subject: &'a Subject) -> Self {
        let mut sorted: Vec<(&str, usize)> =
            subject.criteria.items.iter().enumerate().map(|(i, c)| (c.id.as_str(), i)).collect();
        sorted.sort_unstable();
        Self { sorted }
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
