//! The text behind [`super::Id`] and [`super::Name`]: held inline when short, shared when long.
//!
//! A bundle holds hundreds of ids and names, nearly all a few bytes long, and the Gate copies
//! them into tables and decisions many times over. Text of up to [`INLINE`] bytes is kept in the
//! value itself, so reading one allocates nothing and copying one is a plain copy of a few words
//! with no shared counter to update; longer text shares one allocation.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The longest text held inline, in bytes.
pub(crate) const INLINE: usize = 16;

/// Text that holds no NUL character (true of every identifier and printable name).
#[derive(Clone)]
pub(crate) struct Compact(Repr);

#[derive(Clone)]
enum Repr {
    Inline(Inline),
    Shared(Arc<str>),
}

/// The text's bytes, NUL-padded: the text holds no NUL, so the padding gives its length.
/// Word-aligned so that a copy moves whole words (assembled from narrower pieces, a copy stalls
/// the read that moves it on).
#[derive(Clone, Copy)]
#[repr(align(8))]
struct Inline([u8; INLINE]);

impl Compact {
    /// `s`, which the caller has checked holds no NUL character.
    pub(crate) fn new(s: &str) -> Self {
        let mut bytes = [0; INLINE];
        match bytes.get_mut(..s.len()) {
            Some(head) => {
                head.copy_from_slice(s.as_bytes());
                Self(Repr::Inline(Inline(bytes)))
            }
            None => Self(Repr::Shared(Arc::from(s))),
        }
    }

    /// `s`, keeping its allocation when it is too long to hold inline.
    pub(crate) fn from_string(s: String) -> Self {
        if s.len() <= INLINE {
            Self::new(&s)
        } else {
            Self(Repr::Shared(Arc::from(s)))
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        match &self.0 {
            // Never empty-by-failure: the bytes are a whole `str` copied in, and padding is NUL,
            // which is ASCII.
            Repr::Inline(_) => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Repr::Shared(s) => s,
        }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline(Inline(bytes)) => {
                let padding = u128::from_le_bytes(*bytes).leading_zeros() / 8;
                let len = INLINE.saturating_sub(usize::try_from(padding).unwrap_or(0));
                bytes.get(..len).unwrap_or_default()
            }
            Repr::Shared(s) => s.as_bytes(),
        }
    }
}

impl PartialEq for Compact {
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Inline(a), Repr::Inline(b)) => a.0 == b.0,
            // Text short enough to be inline always is, so it never equals shared text.
            (Repr::Inline(_), Repr::Shared(_)) | (Repr::Shared(_), Repr::Inline(_)) => false,
            (Repr::Shared(a), Repr::Shared(b)) => a == b,
        }
    }
}

impl Eq for Compact {}

impl PartialOrd for Compact {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Compact {
    /// Byte order, which is the order of the text.
    fn cmp(&self, other: &Self) -> Ordering {
        match (&self.0, &other.0) {
            // NUL padding sorts below every byte text can hold, so the padded arrays, read as
            // big-endian numbers, are in the order of their text.
            (Repr::Inline(a), Repr::Inline(b)) => {
                u128::from_be_bytes(a.0).cmp(&u128::from_be_bytes(b.0))
            }
            _ => self.as_bytes().cmp(other.as_bytes()),
        }
    }
}

impl Hash for Compact {
    /// Hashes like the text, as `Borrow<str>` on the types built on this requires.
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::{Compact, INLINE};
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn hash_of<T: Hash + ?Sized>(x: &T) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    #[test]
    fn compact_text_reads_compares_and_hashes_like_the_text() {
        // Either side of the inline limit, multi-byte characters across it, and long text.
        let texts = [
            String::new(),
            "a".to_owned(),
            "ev-1".to_owned(),
            "x".repeat(INLINE),
            "x".repeat(INLINE + 1),
            "é".repeat(INLINE / 2),
            format!("{}é", "x".repeat(INLINE - 1)),
            "日本語の名前".to_owned(),
            "y".repeat(256),
        ];
        for a in &texts {
            let c = Compact::new(a);
            assert_eq!(c.as_str(), a);
            assert_eq!(Compact::from_string(a.clone()).as_str(), a);
            assert_eq!(hash_of(&c), hash_of(a.as_str()));
            for b in &texts {
                let d = Compact::new(b);
                assert_eq!(
                    c.cmp(&d),
                    a.as_bytes().cmp(b.as_bytes()),
                    "{a:?} against {b:?}"
                );
                assert_eq!(c == d, a == b);
            }
        }
    }
}
