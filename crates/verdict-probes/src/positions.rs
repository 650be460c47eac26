//! Where each value of a spec was written, so an error can name its line and column.

use std::collections::HashMap;

/// A 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// JSON pointers of a document mapped to the place each value (and each object key) starts.
#[derive(Debug, Clone, Default)]
pub struct Positions {
    values: HashMap<String, Pos>,
    keys: HashMap<String, Pos>,
}

impl Positions {
    /// Records where the value at `pointer` starts.
    pub fn set_value(&mut self, pointer: &str, pos: Pos) {
        self.values.insert(pointer.to_owned(), pos);
    }

    /// Records where the key naming the member at `pointer` starts.
    pub fn set_key(&mut self, pointer: &str, pos: Pos) {
        self.keys.insert(pointer.to_owned(), pos);
    }

    /// The place of `pointer`: its key if it is an object member, else its value; failing
    /// that, the nearest ancestor that is known (an unknown field points at its object).
    #[must_use]
    pub fn find(&self, pointer: &str) -> Option<Pos> {
        let mut p = pointer;
        loop {
            if let Some(pos) = self.keys.get(p).or_else(|| self.values.get(p)) {
                return Some(*pos);
            }
            match p.rfind('/') {
                Some(0) if p.len() > 1 => p = "",
                Some(i) if i > 0 => p = p.get(..i)?,
                _ => {
                    return self
                        .values
                        .get("")
                        .or_else(|| self.values.get("/"))
                        .copied();
                }
            }
        }
    }
}

/// Escapes one reference token of an RFC 6901 pointer.
#[must_use]
pub fn token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falls_back_to_the_nearest_known_ancestor() {
        let mut p = Positions::default();
        p.set_value("", Pos { line: 1, column: 1 });
        p.set_value("/a", Pos { line: 2, column: 4 });
        p.set_key("/a", Pos { line: 2, column: 1 });
        p.set_value("/a/b", Pos { line: 3, column: 6 });
        assert_eq!(p.find("/a"), Some(Pos { line: 2, column: 1 }));
        assert_eq!(p.find("/a/b"), Some(Pos { line: 3, column: 6 }));
        assert_eq!(p.find("/a/zz/0"), Some(Pos { line: 2, column: 1 }));
        assert_eq!(p.find("/q"), Some(Pos { line: 1, column: 1 }));
        assert_eq!(token("a/b~c"), "a~1b~0c");
    }
}
