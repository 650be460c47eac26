//! A strict JSON document read once into a flat list of tokens that borrow from the input.
//!
//! [`crate::json::parse`] builds a `serde_json::Value`: a `String` for every key and string and a
//! map for every object, all built, hashed from, decoded from and then freed. This reader builds
//! one `Vec` of fixed-size [`Node`]s instead, and the Gate hashes ([`canonical`]) and decodes
//! ([`de`]) its documents straight from it.
//!
//! It accepts no more than the strict reader: the same grammar, duplicate keys, integers outside
//! ±(2^53−1), non-finite numbers, invalid UTF-8, a byte order mark, trailing data and nesting
//! deeper than [`crate::json::MAX_DEPTH`] are all refused. It says only *that* a document is
//! refused ([`Refused`]); a caller that needs to say why reads the document again with the strict
//! reader, whose errors name the place. Where the two disagree in the other direction (this
//! reader refusing what the strict reader takes) nothing is lost but time, because callers fall
//! back to the strict reader.
//!
//! While reading, each node learns whether its bytes are already in RFC 8785 canonical form (no
//! whitespace, members in order, no escapes, integers only), so a canonical document is hashed
//! from the input bytes as they are.

pub(crate) mod canonical;
pub(crate) mod de;

use crate::json::{self, MAX_DEPTH};
use std::borrow::Cow;

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    True,
    False,
    /// An integer literal (no fraction, no exponent), within ±(2^53−1).
    Int,
    /// Any other number literal; finite.
    Float,
    Str,
    Array,
    Object,
}

/// The string holds at least one escape sequence.
const ESCAPED: u8 = 1;
/// The node's bytes are canonical as they stand.
const CANON: u8 = 2;
/// An object whose keys hold no escape and no supplementary-plane character and are in strictly
/// ascending byte order, which is then also their UTF-16 order: no key repeats, and the members
/// are already in canonical order.
const SORTED: u8 = 4;

/// One token. Containers are followed by their members (an object's as key, value, key, ...).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    pub kind: Kind,
    flags: u8,
    /// Byte span in the input: a string's text between its quotes, a number's literal, a
    /// container from its opening bracket to just after its closing one.
    start: u32,
    end: u32,
    /// Members of a container (pairs, for an object).
    pub len: u32,
    /// The index of the first node after this one's subtree.
    next: u32,
}

/// The document was refused; read it with the strict reader to learn where and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused;

/// A document read into nodes; node 0 is the root.
pub(crate) struct Tape<'a> {
    text: &'a str,
    nodes: Vec<Node>,
}

impl<'a> Tape<'a> {
    /// Reads `input` strictly.
    pub fn parse(input: &'a [u8]) -> Result<Self, Refused> {
        // Positions are kept in 32 bits.
        if u32::try_from(input.len()).is_err() {
            return Err(Refused);
        }
        let text = std::str::from_utf8(input).map_err(|_| Refused)?;
        if text.starts_with('\u{feff}') {
            return Err(Refused);
        }
        let mut p = Parser {
            text,
            bytes: input,
            pos: 0,
            // About one token per ten bytes of compact JSON; reserving a little more saves a copy.
            nodes: Vec::with_capacity(input.len() / 8 + 16),
            ws: false,
        };
        p.skip_ws();
        p.value(0)?;
        p.skip_ws();
        if p.pos != input.len() {
            return Err(Refused);
        }
        Ok(Tape {
            text,
            nodes: p.nodes,
        })
    }

    pub fn node(&self, at: usize) -> Option<&Node> {
        self.nodes.get(at)
    }

    /// The index of the first node after `at`'s subtree.
    pub fn next(&self, at: usize) -> usize {
        self.nodes.get(at).map_or(usize::MAX, |n| n.next as usize)
    }

    fn span(&self, n: &Node) -> &'a str {
        self.text
            .get(n.start as usize..n.end as usize)
            .unwrap_or("")
    }

    /// The input bytes of node `at`.
    pub fn raw(&self, at: usize) -> &'a [u8] {
        self.nodes
            .get(at)
            .map_or(&[][..], |n| self.span(n).as_bytes())
    }

    /// Whether node `at` is canonical as it stands.
    pub fn is_canonical(&self, at: usize) -> bool {
        self.nodes.get(at).is_some_and(|n| n.flags & CANON != 0)
    }

    /// The text of string node `at`, borrowed when it holds no escape.
    pub fn str_at(&self, at: usize) -> Option<Cow<'a, str>> {
        let n = self.nodes.get(at).filter(|n| n.kind == Kind::Str)?;
        let raw = self.span(n);
        if n.flags & ESCAPED == 0 {
            Some(Cow::Borrowed(raw))
        } else {
            unescape(raw).ok().map(Cow::Owned)
        }
    }

    /// The positions of an array's elements, or of an object's values paired with their keys.
    pub fn children(&self, at: usize) -> Children<'_, 'a> {
        let n = self.nodes.get(at);
        Children {
            tape: self,
            at: at + 1,
            left: n
                .filter(|n| matches!(n.kind, Kind::Array | Kind::Object))
                .map_or(0, |n| n.len as usize),
            object: n.is_some_and(|n| n.kind == Kind::Object),
        }
    }

    /// The value of member `key` of object `at`.
    pub fn get(&self, at: usize, key: &str) -> Option<usize> {
        self.members(at)
            .find(|(k, _)| self.str_at(*k).is_some_and(|s| s == key))
            .map(|(_, v)| v)
    }

    /// An object's members as (key node, value node), in document order.
    pub fn members(&self, at: usize) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.children(at).filter_map(|c| Some((c.key?, c.value)))
    }

    /// An object's members in the order of their keys' bytes (the order a `BTreeMap` keyed by
    /// `String` iterates), which is document order for a [`SORTED`] object.
    pub fn members_by_key(&self, at: usize) -> Vec<(usize, usize)> {
        let mut m: Vec<(usize, usize)> = self.members(at).collect();
        if !self.is_sorted(at) {
            m.sort_by(|a, b| self.str_at(a.0).cmp(&self.str_at(b.0)));
        }
        m
    }

    /// Whether object `at`'s members are already in canonical order.
    pub fn is_sorted(&self, at: usize) -> bool {
        self.nodes.get(at).is_some_and(|n| n.flags & SORTED != 0)
    }

    /// An integer node's value.
    pub fn int_at(&self, at: usize) -> Option<i64> {
        self.nodes
            .get(at)
            .filter(|n| n.kind == Kind::Int)
            .and_then(|n| self.span(n).parse().ok())
    }

    /// A float node's value.
    pub fn float_at(&self, at: usize) -> Option<f64> {
        self.nodes
            .get(at)
            .filter(|n| n.kind == Kind::Float)
            .and_then(|n| self.span(n).parse().ok())
    }
}

/// See [`Tape::children`].
pub(crate) struct Children<'t, 'a> {
    tape: &'t Tape<'a>,
    at: usize,
    left: usize,
    object: bool,
}

/// One element of an array, or one member of an object.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Child {
    pub key: Option<usize>,
    pub value: usize,
}

impl Iterator for Children<'_, '_> {
    type Item = Child;

    fn next(&mut self) -> Option<Child> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let key = self.object.then_some(self.at);
        let value = if self.object { self.at + 1 } else { self.at };
        self.at = self.tape.next(value);
        Some(Child { key, value })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Children<'_, '_> {}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    nodes: Vec<Node>,
    /// Whether whitespace was skipped since the enclosing container began.
    ws: bool,
}

/// A string just read: its content's span and whether it holds an escape.
struct StrToken {
    start: usize,
    end: usize,
    escaped: bool,
}

/// Whether the unescaped key `k` holds no supplementary-plane character (whose UTF-8 order
/// differs from its UTF-16 order) and sorts strictly after `prev`. Keys are short, so a plain
/// loop beats a call to `memcmp`.
fn plain_key_follows(prev: Option<&[u8]>, k: &[u8]) -> bool {
    if !k.is_ascii() && k.iter().any(|b| *b >= 0xF0) {
        return false;
    }
    let Some(p) = prev else {
        return true;
    };
    for (x, y) in p.iter().zip(k) {
        if x != y {
            return x < y;
        }
    }
    p.len() < k.len()
}

/// The position as stored in a node (inputs longer than `u32::MAX` are refused up front).
fn at32(pos: usize) -> u32 {
    u32::try_from(pos).unwrap_or(u32::MAX)
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        let start = self.pos;
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
        self.ws |= self.pos != start;
    }

    fn push(&mut self, kind: Kind, flags: u8, start: usize, end: usize) -> usize {
        let at = self.nodes.len();
        self.nodes.push(Node {
            kind,
            flags,
            start: at32(start),
            end: at32(end),
            len: 0,
            next: at32(at + 1),
        });
        at
    }

    /// Reads one value; returns whether it is canonical as it stands.
    fn value(&mut self, depth: usize) -> Result<bool, Refused> {
        match self.peek() {
            Some(b'{') => self.container(depth + 1, true),
            Some(b'[') => self.container(depth + 1, false),
            Some(b'"') => Ok(!self.string()?.escaped),
            Some(b't') => self.literal(b"true", Kind::True),
            Some(b'f') => self.literal(b"false", Kind::False),
            Some(b'n') => self.literal(b"null", Kind::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(Refused),
        }
    }

    fn literal(&mut self, lit: &[u8], kind: Kind) -> Result<bool, Refused> {
        if self.bytes.get(self.pos..self.pos + lit.len()) != Some(lit) {
            return Err(Refused);
        }
        self.push(kind, CANON, self.pos, self.pos + lit.len());
        self.pos += lit.len();
        Ok(true)
    }

    fn container(&mut self, depth: usize, object: bool) -> Result<bool, Refused> {
        if depth > MAX_DEPTH {
            return Err(Refused);
        }
        let (close, kind) = if object {
            (b'}', Kind::Object)
        } else {
            (b']', Kind::Array)
        };
        let start = self.pos;
        let at = self.push(kind, 0, start, start);
        self.pos += 1;
        let outer_ws = std::mem::replace(&mut self.ws, false);
        let mut canon = true;
        let mut sorted = true;
        let mut len: u32 = 0;
        let mut prev_key: Option<&[u8]> = None;
        self.skip_ws();
        if self.peek() == Some(close) {
            self.pos += 1;
        } else {
            loop {
                self.skip_ws();
                if object {
                    if self.peek() != Some(b'"') {
                        return Err(Refused);
                    }
                    let key = self.string()?;
                    if sorted {
                        let k = self.bytes.get(key.start..key.end).unwrap_or_default();
                        sorted = !key.escaped && plain_key_follows(prev_key, k);
                        prev_key = Some(k);
                    }
                    self.skip_ws();
                    if self.peek() != Some(b':') {
                        return Err(Refused);
                    }
                    self.pos += 1;
                    self.skip_ws();
                }
                canon &= self.value(depth)?;
                len = len.checked_add(1).ok_or(Refused)?;
                self.skip_ws();
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(c) if c == close => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Refused),
                }
            }
        }
        if object && !sorted {
            self.check_unique_keys(at, len as usize)?;
        }
        let end = self.pos;
        let next = at32(self.nodes.len());
        let ws = std::mem::replace(&mut self.ws, outer_ws);
        let canon = canon && !ws && (!object || sorted);
        let node = self.nodes.get_mut(at).ok_or(Refused)?;
        node.end = at32(end);
        node.len = len;
        node.next = next;
        node.flags = if canon { CANON } else { 0 } | if object && sorted { SORTED } else { 0 };
        Ok(canon)
    }

    /// Refuses an object (not in plain sorted order) that repeats a key. Its `len` members are
    /// complete, so each value's `next` leads to the following key.
    fn check_unique_keys(&self, at: usize, len: usize) -> Result<(), Refused> {
        let mut keys: Vec<Cow<'_, str>> = Vec::with_capacity(len);
        let mut i = at + 1;
        for _ in 0..len {
            let n = self.nodes.get(i).ok_or(Refused)?;
            let raw = self
                .text
                .get(n.start as usize..n.end as usize)
                .ok_or(Refused)?;
            keys.push(if n.flags & ESCAPED == 0 {
                Cow::Borrowed(raw)
            } else {
                Cow::Owned(unescape(raw)?)
            });
            i = self.nodes.get(i + 1).ok_or(Refused)?.next as usize;
        }
        keys.sort_unstable();
        if keys.windows(2).any(|w| w.first() == w.get(1)) {
            return Err(Refused);
        }
        Ok(())
    }

    /// Reads a string and pushes its node.
    fn string(&mut self) -> Result<StrToken, Refused> {
        self.pos += 1; // opening quote
        let start = self.pos;
        let mut escaped = false;
        loop {
            self.pos +=
                crate::canonical::plain_prefix(self.bytes.get(self.pos..).unwrap_or_default());
            match self.peek() {
                Some(b'"') => break,
                Some(b'\\') => {
                    escaped = true;
                    // Skip the escape's first character; `unescape` checks the whole string.
                    self.pos += 2;
                }
                _ => return Err(Refused), // end of input or a control character
            }
        }
        let end = self.pos;
        self.pos += 1;
        if escaped {
            unescape(self.text.get(start..end).ok_or(Refused)?)?;
        }
        let flags = if escaped { ESCAPED } else { CANON };
        self.push(Kind::Str, flags, start, end);
        Ok(StrToken {
            start,
            end,
            escaped,
        })
    }

    fn number(&mut self) -> Result<bool, Refused> {
        let start = self.pos;
        let token = json::scan_number(self.bytes, start).map_err(|_| Refused)?;
        self.pos = token.end;
        let lit = self.text.get(start..token.end).ok_or(Refused)?;
        json::number_value(lit, token.integral).map_err(|_| Refused)?;
        if token.integral {
            // `-0` is written `0` in canonical form.
            let canon = lit != "-0";
            self.push(Kind::Int, if canon { CANON } else { 0 }, start, self.pos);
            return Ok(canon);
        }
        self.push(Kind::Float, 0, start, self.pos);
        Ok(false)
    }
}

fn hex4(bytes: &[u8]) -> Result<u16, Refused> {
    let digits = bytes.get(..4).ok_or(Refused)?;
    let mut v: u16 = 0;
    for d in digits {
        let x = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return Err(Refused),
        };
        v = (v << 4) | u16::from(x);
    }
    Ok(v)
}

/// The text of a string's raw content with its escapes resolved; refuses what the strict reader
/// refuses (unknown escapes, lone surrogates, truncated `\u`).
pub(crate) fn unescape(raw: &str) -> Result<String, Refused> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut pos = 0;
    while pos < bytes.len() {
        let plain = bytes
            .get(pos..)
            .unwrap_or_default()
            .iter()
            .position(|b| *b == b'\\')
            .unwrap_or(bytes.len() - pos);
        out.push_str(raw.get(pos..pos + plain).ok_or(Refused)?);
        pos += plain;
        if pos >= bytes.len() {
            break;
        }
        let esc = *bytes.get(pos + 1).ok_or(Refused)?;
        pos += 2;
        let c = match esc {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = hex4(bytes.get(pos..).unwrap_or_default())?;
                pos += 4;
                let cp = if (0xD800..0xDC00).contains(&hi) {
                    if bytes.get(pos..pos + 2) != Some(b"\\u") {
                        return Err(Refused);
                    }
                    let lo = hex4(bytes.get(pos + 2..).unwrap_or_default())?;
                    if !(0xDC00..0xE000).contains(&lo) {
                        return Err(Refused);
                    }
                    pos += 6;
                    0x10000 + ((u32::from(hi) - 0xD800) << 10) + (u32::from(lo) - 0xDC00)
                } else {
                    u32::from(hi)
                };
                char::from_u32(cp).ok_or(Refused)?
            }
            _ => return Err(Refused),
        };
        out.push(c);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
