//! The strict JSON reader (docs/spec/encoding.md).
//!
//! `serde_json` accepts duplicate object keys (the last one wins) and integers of any size, so a
//! document could say two things at once or carry a number that another language reads
//! differently. This reader refuses both, and refuses NaN/Infinity, invalid UTF-8, a byte order
//! mark, trailing data and nesting deeper than [`MAX_DEPTH`]. Every error names the line, the
//! column and the JSON pointer of the place it was found.

use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::fmt;

/// The largest integer magnitude every JSON reader represents exactly (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = 9_007_199_254_740_991;

/// How deeply arrays and objects may nest; deeper input is refused rather than risking the stack.
pub const MAX_DEPTH: usize = 128;

/// What is wrong with a document the strict reader refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonErrorKind {
    /// The bytes are not UTF-8.
    InvalidUtf8,
    /// The document starts with a byte order mark.
    ByteOrderMark,
    /// An object repeats a key; the key is given.
    DuplicateKey(String),
    /// An integer outside ±(2^53−1); the literal is given.
    IntegerOutOfRange(String),
    /// A number that is not finite (overflows a double), or a NaN/Infinity literal.
    NonFinite(String),
    /// A nonzero number too small for a double, which would read as 0; the literal is given.
    Underflow(String),
    /// Nesting deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Anything else that is not JSON; the message says what was expected.
    Syntax(String),
}

impl fmt::Display for JsonErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUtf8 => write!(f, "invalid utf-8"),
            Self::ByteOrderMark => write!(f, "byte order mark before the document"),
            Self::DuplicateKey(k) => write!(f, "duplicate object key {k:?}"),
            Self::IntegerOutOfRange(n) => write!(f, "integer {n} outside ±(2^53-1)"),
            Self::NonFinite(n) => write!(f, "number {n} is not finite"),
            Self::Underflow(n) => write!(
                f,
                "number {n} is too small for a double (it would read as 0)"
            ),
            Self::TooDeep => write!(f, "nesting deeper than {MAX_DEPTH} levels"),
            Self::Syntax(m) => write!(f, "{m}"),
        }
    }
}

/// A refused document: what, and where (1-based line and column in characters, JSON pointer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} at line {line} column {column} (path {path})")]
pub struct JsonError {
    /// What is wrong.
    pub kind: JsonErrorKind,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub column: usize,
    /// RFC 6901 pointer to the value being read; `/` is the whole document.
    pub path: String,
}

/// Parses `input` strictly into a [`Value`].
///
/// ```
/// use verdict_core::json::{parse, JsonErrorKind};
/// assert!(parse(br#"{"a": 1}"#).is_ok());
/// let err = parse(br#"{"a": 1, "a": 2}"#).unwrap_err();
/// assert_eq!(err.kind, JsonErrorKind::DuplicateKey("a".into()));
/// assert_eq!(err.path, "/a");
/// ```
pub fn parse(input: &[u8]) -> Result<Value, JsonError> {
    let text = match std::str::from_utf8(input) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.valid_up_to();
            let (line, column) = input
                .get(..valid)
                .and_then(|p| std::str::from_utf8(p).ok())
                .map_or((1, 1), line_column);
            return Err(JsonError {
                kind: JsonErrorKind::InvalidUtf8,
                line,
                column,
                path: "/".into(),
            });
        }
    };
    let mut p = Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        path: Vec::new(),
    };
    if text.starts_with('\u{feff}') {
        return Err(p.error(JsonErrorKind::ByteOrderMark));
    }
    p.skip_ws();
    let v = p.value(0)?;
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(p.syntax("trailing data after the document"));
    }
    Ok(v)
}

/// Parses a `&str` strictly (convenience for callers that already hold text).
pub fn parse_str(input: &str) -> Result<Value, JsonError> {
    parse(input.as_bytes())
}

/// Where `value` holds U+0000, in a string or a member name, as a JSON pointer (`""` for the
/// document itself); `None` when it holds none. The strict reader accepts `\u0000`, as JSON
/// does, but PostgreSQL's `text` and `jsonb` cannot hold that character, so the store refuses
/// such a document on every backend alike rather than on one only (docs/spec/encoding.md).
#[must_use]
pub fn nul_pointer(value: &Value) -> Option<String> {
    fn escape(key: &str) -> String {
        // U+0000 itself is written as its escape, so the pointer can be shown anywhere.
        key.replace('~', "~0")
            .replace('/', "~1")
            .replace('\0', "\\u0000")
    }
    match value {
        Value::String(s) => s.contains('\0').then(String::new),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_pointer(v).map(|rest| format!("/{i}{rest}"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(format!("/{}", escape(k)))
            } else {
                nul_pointer(v).map(|rest| format!("/{}{rest}", escape(k)))
            }
        }),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

enum Seg {
    /// An object key, by the position of its opening quote: it is only read again to name the
    /// place of an error, so reading a document never copies its keys for the path.
    Key(usize),
    Index(usize),
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    path: Vec<Seg>,
}

fn line_column(prefix: &str) -> (usize, usize) {
    let line = prefix.bytes().filter(|b| *b == b'\n').count() + 1;
    let last = prefix
        .rfind('\n')
        .map_or(prefix, |i| prefix.get(i + 1..).unwrap_or(""));
    (line, last.chars().count() + 1)
}

/// Escapes one RFC 6901 reference token.
pub(crate) fn pointer_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

impl Parser<'_> {
    fn error(&self, kind: JsonErrorKind) -> JsonError {
        let prefix = self.text.get(..self.pos).unwrap_or(self.text);
        let (line, column) = line_column(prefix);
        let mut path = String::new();
        for seg in &self.path {
            path.push('/');
            match seg {
                Seg::Key(at) => path.push_str(&pointer_token(&self.key_at(*at))),
                Seg::Index(i) => path.push_str(&i.to_string()),
            }
        }
        if path.is_empty() {
            path.push('/');
        }
        JsonError {
            kind,
            line,
            column,
            path,
        }
    }

    /// The key whose opening quote is at `at` (already read once without error).
    fn key_at(&self, at: usize) -> String {
        let mut p = Parser {
            text: self.text,
            bytes: self.bytes,
            pos: at,
            path: Vec::new(),
        };
        p.string().unwrap_or_default()
    }

    fn syntax(&self, msg: &str) -> JsonError {
        self.error(JsonErrorKind::Syntax(msg.to_owned()))
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn expect_literal(&mut self, lit: &str, v: Value) -> Result<Value, JsonError> {
        if self.bytes.get(self.pos..self.pos + lit.len()) == Some(lit.as_bytes()) {
            self.pos += lit.len();
            Ok(v)
        } else {
            Err(self.syntax("expected a json value"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek() {
            None => Err(self.syntax("unexpected end of input, expected a json value")),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b't') => self.expect_literal("true", Value::Bool(true)),
            Some(b'f') => self.expect_literal("false", Value::Bool(false)),
            Some(b'n') => self.expect_literal("null", Value::Null),
            Some(b'-' | b'0'..=b'9') => self.number().map(Value::Number),
            Some(b'N' | b'I') => Err(self.error(JsonErrorKind::NonFinite(self.word()))),
            Some(_) => Err(self.syntax("expected a json value")),
        }
    }

    fn word(&self) -> String {
        let rest = self.text.get(self.pos..).unwrap_or("");
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect()
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error(JsonErrorKind::TooDeep));
        }
        self.pos += 1;
        let mut map = Map::new();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Value::Object(map));
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(self.syntax("expected an object key"));
            }
            let key_at = self.pos;
            let key = self.string()?;
            self.path.push(Seg::Key(key_at));
            let slot = match map.entry(key) {
                Entry::Vacant(slot) => slot,
                Entry::Occupied(o) => {
                    return Err(self.error(JsonErrorKind::DuplicateKey(o.key().clone())));
                }
            };
            self.skip_ws();
            if self.peek() != Some(b':') {
                return Err(self.syntax("expected ':' after an object key"));
            }
            self.pos += 1;
            self.skip_ws();
            let v = self.value(depth)?;
            self.path.pop();
            slot.insert(v);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Value::Object(map));
                }
                _ => return Err(self.syntax("expected ',' or '}' in an object")),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > MAX_DEPTH {
            return Err(self.error(JsonErrorKind::TooDeep));
        }
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_ws();
            self.path.push(Seg::Index(items.len()));
            let v = self.value(depth)?;
            self.path.pop();
            items.push(v);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.syntax("expected ',' or ']' in an array")),
            }
        }
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let digits = self
            .text
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.syntax("truncated \\u escape"))?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.syntax("invalid \\u escape"));
        }
        let v = u16::from_str_radix(digits, 16).map_err(|_| self.syntax("invalid \\u escape"))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, JsonError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let start = self.pos;
            self.pos += crate::canonical::plain_prefix(self.bytes.get(start..).unwrap_or_default());
            // `start..pos` only ends on ASCII bytes, so it is a char boundary.
            out.push_str(self.text.get(start..self.pos).unwrap_or(""));
            match self.peek() {
                None => return Err(self.syntax("unterminated string")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    let esc = self
                        .peek()
                        .ok_or_else(|| self.syntax("unterminated string"))?;
                    self.pos += 1;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                                    return Err(self.syntax("lone surrogate in \\u escape"));
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.syntax("lone surrogate in \\u escape"));
                                }
                                let cp = 0x10000
                                    + ((u32::from(hi) - 0xD800) << 10)
                                    + (u32::from(lo) - 0xDC00);
                                char::from_u32(cp)
                            } else {
                                char::from_u32(u32::from(hi))
                            };
                            out.push(c.ok_or_else(|| self.syntax("lone surrogate in \\u escape"))?);
                        }
                        _ => return Err(self.syntax("invalid escape in string")),
                    }
                }
                Some(_) => return Err(self.syntax("control character in string")),
            }
        }
    }

    fn number(&mut self) -> Result<Number, JsonError> {
        let start = self.pos;
        let token = match scan_number(self.bytes, start) {
            Ok(t) => t,
            Err((fault, at)) => {
                self.pos = at;
                return Err(match fault {
                    NumberSyntax::NegativeWord => {
                        self.error(JsonErrorKind::NonFinite(format!("-{}", self.word())))
                    }
                    NumberSyntax::Invalid => self.syntax("invalid number"),
                    NumberSyntax::NoFractionDigits => {
                        self.syntax("invalid number: digits expected after '.'")
                    }
                    NumberSyntax::NoExponentDigits => {
                        self.syntax("invalid number: digits expected in exponent")
                    }
                });
            }
        };
        self.pos = token.end;
        let lit = self.text.get(start..token.end).unwrap_or("");
        number_value(lit, token.integral).map_err(|fault| match fault {
            NumberFault::Unreadable => self.syntax("invalid number"),
            NumberFault::OutOfRange => {
                self.pos = start;
                self.error(JsonErrorKind::IntegerOutOfRange(lit.to_owned()))
            }
            NumberFault::NonFinite => {
                self.pos = start;
                self.error(JsonErrorKind::NonFinite(lit.to_owned()))
            }
            NumberFault::Underflow => {
                self.pos = start;
                self.error(JsonErrorKind::Underflow(lit.to_owned()))
            }
        })
    }
}

/// A number literal's extent: where it ends and whether it is an integer (no fraction, no
/// exponent).
pub(crate) struct NumberToken {
    pub end: usize,
    pub integral: bool,
}

/// Why the bytes at a position are not a number literal.
pub(crate) enum NumberSyntax {
    /// A minus sign followed by a word (`-Infinity`).
    NegativeWord,
    Invalid,
    NoFractionDigits,
    NoExponentDigits,
}

/// Why a well-formed literal is refused.
pub(crate) enum NumberFault {
    Unreadable,
    /// An integer, or a number with an integral value, beyond ±(2^53−1).
    OutOfRange,
    NonFinite,
    /// A nonzero literal too small for a double: it would read as 0.
    Underflow,
}

fn digits_from(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(at..)
        .unwrap_or_default()
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count()
}

/// Scans the number literal at `start` (RFC 8259 §6). On failure, also says where.
pub(crate) fn scan_number(
    bytes: &[u8],
    start: usize,
) -> Result<NumberToken, (NumberSyntax, usize)> {
    let mut pos = start;
    if bytes.get(pos) == Some(&b'-') {
        pos += 1;
    }
    match bytes.get(pos) {
        Some(b'0') => pos += 1,
        Some(b'1'..=b'9') => pos += digits_from(bytes, pos),
        Some(b'I') => return Err((NumberSyntax::NegativeWord, pos)),
        _ => return Err((NumberSyntax::Invalid, pos)),
    }
    let mut integral = true;
    if bytes.get(pos) == Some(&b'.') {
        pos += 1;
        integral = false;
        let n = digits_from(bytes, pos);
        if n == 0 {
            return Err((NumberSyntax::NoFractionDigits, pos));
        }
        pos += n;
    }
    if let Some(b'e' | b'E') = bytes.get(pos) {
        pos += 1;
        integral = false;
        if let Some(b'+' | b'-') = bytes.get(pos) {
            pos += 1;
        }
        let n = digits_from(bytes, pos);
        if n == 0 {
            return Err((NumberSyntax::NoExponentDigits, pos));
        }
        pos += n;
    }
    Ok(NumberToken { end: pos, integral })
}

/// The value of a scanned literal, or why it is refused: integers must lie within
/// ±(2^53−1), and a fraction or exponent does not hide an out-of-range integer (`1e300`,
/// `9007199254740993.0`).
pub(crate) fn number_value(lit: &str, integral: bool) -> Result<Number, NumberFault> {
    if integral {
        return match lit.parse::<i64>() {
            Ok(n) if (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n) => Ok(Number::from(n)),
            _ => Err(NumberFault::OutOfRange),
        };
    }
    let f: f64 = lit.parse().map_err(|_| NumberFault::Unreadable)?;
    if !f.is_finite() {
        return Err(NumberFault::NonFinite);
    }
    if f.fract() == 0.0 && f.abs() > MAX_SAFE_INTEGER as f64 {
        return Err(NumberFault::OutOfRange);
    }
    // `1e-400` is not 0: read as 0 it would meet `== 0.0`.
    let mantissa = lit.split(['e', 'E']).next().unwrap_or(lit);
    if f == 0.0 && mantissa.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        return Err(NumberFault::Underflow);
    }
    Number::from_f64(f).ok_or(NumberFault::NonFinite)
}

#[cfg(test)]
mod tests {

    #[test]
    fn nul_pointer_names_where_u0000_is() {
        let doc = parse(br#"{"a":["x","y\u0000z"],"b":"ok"}"#).unwrap_or_default();
        assert_eq!(nul_pointer(&doc).as_deref(), Some("/a/1"));
        let key = parse(br#"{"k/\u0000":1}"#).unwrap_or_default();
        assert_eq!(nul_pointer(&key).as_deref(), Some("/k~1\\u0000"));
        // A backslash followed by `u0000` is six ordinary characters, not U+0000.
        let text = parse(br#"{"a":"\\u0000"}"#).unwrap_or_default();
        assert_eq!(nul_pointer(&text), None);
        assert_eq!(
            nul_pointer(&parse(b"[1,true,null]").unwrap_or_default()),
            None
        );
    }
    use super::*;

    fn kind(input: &[u8]) -> JsonErrorKind {
        parse(input).unwrap_err().kind
    }

    #[test]
    fn accepts_ordinary_documents() {
        let v =
            parse(br#" {"a": [1, -2, 3.5, "x\u00e9\ud83d\ude00", true, false, null], "b": {}} "#)
                .unwrap();
        assert_eq!(v["a"][3], "xé😀");
        assert_eq!(v["a"][1], -2);
        assert_eq!(
            parse(b"9007199254740991").unwrap(),
            9_007_199_254_740_991_i64
        );
        assert_eq!(
            parse(b"-9007199254740991").unwrap(),
            -9_007_199_254_740_991_i64
        );
    }

    #[test]
    fn refuses_duplicate_keys_with_their_path() {
        let e = parse(b"{\"x\": {\"k\": 1,\n \"k\": 2}}").unwrap_err();
        assert_eq!(e.kind, JsonErrorKind::DuplicateKey("k".into()));
        assert_eq!(e.path, "/x/k");
        assert_eq!(e.line, 2);
    }

    #[test]
    fn refuses_integers_outside_the_safe_range() {
        assert!(matches!(
            kind(b"9007199254740992"),
            JsonErrorKind::IntegerOutOfRange(_)
        ));
        assert!(matches!(
            kind(b"-9007199254740992"),
            JsonErrorKind::IntegerOutOfRange(_)
        ));
        assert!(matches!(
            kind(b"1e300"),
            JsonErrorKind::IntegerOutOfRange(_)
        ));
        assert!(matches!(
            kind(b"[1, 99999999999999999999]"),
            JsonErrorKind::IntegerOutOfRange(_)
        ));
        assert!(parse(b"1.5e3").is_ok());
    }

    #[test]
    fn refuses_nonzero_numbers_too_small_for_a_double() {
        for lit in ["1e-400", "-2.5E-330", "0.000001e-320", "2e-324"] {
            assert_eq!(
                kind(lit.as_bytes()),
                JsonErrorKind::Underflow(lit.into()),
                "{lit}"
            );
        }
        for zero in ["0", "0.0", "-0.0", "0e-400", "0.000e5"] {
            assert!(parse(zero.as_bytes()).is_ok(), "{zero}");
        }
        assert!(
            parse(b"2.2250738585072014e-308").is_ok(),
            "the smallest normal double"
        );
    }

    #[test]
    fn names_what_is_wrong_with_a_number_and_where() {
        for (input, kind, column, path) in [
            (
                &b"1."[..],
                JsonErrorKind::Syntax("invalid number: digits expected after '.'".into()),
                3,
                "/",
            ),
            (
                b"[0, 1e+]",
                JsonErrorKind::Syntax("invalid number: digits expected in exponent".into()),
                8,
                "/1",
            ),
            (
                b"-x",
                JsonErrorKind::Syntax("invalid number".into()),
                2,
                "/",
            ),
            (
                b"-Infinity",
                JsonErrorKind::NonFinite("-Infinity".into()),
                2,
                "/",
            ),
            (
                b"[1, 9007199254740992]",
                JsonErrorKind::IntegerOutOfRange("9007199254740992".into()),
                5,
                "/1",
            ),
            (
                b"{\"a\": 1.5e999}",
                JsonErrorKind::NonFinite("1.5e999".into()),
                7,
                "/a",
            ),
            (
                b"1e300",
                JsonErrorKind::IntegerOutOfRange("1e300".into()),
                1,
                "/",
            ),
        ] {
            let e = parse(input).unwrap_err();
            let shown = String::from_utf8_lossy(input);
            assert_eq!(e.kind, kind, "{shown}");
            assert_eq!((e.line, e.column), (1, column), "{shown}");
            assert_eq!(e.path, path, "{shown}");
        }
    }

    #[test]
    fn refuses_non_finite_numbers() {
        assert!(matches!(kind(b"NaN"), JsonErrorKind::NonFinite(_)));
        assert!(matches!(kind(b"Infinity"), JsonErrorKind::NonFinite(_)));
        assert!(matches!(kind(b"-Infinity"), JsonErrorKind::NonFinite(_)));
        assert!(matches!(kind(b"1.5e999"), JsonErrorKind::NonFinite(_)));
    }

    #[test]
    fn refuses_invalid_utf8_with_position() {
        let e = parse(b"{\"a\":\n \"\xff\"}").unwrap_err();
        assert_eq!(e.kind, JsonErrorKind::InvalidUtf8);
        assert_eq!((e.line, e.column), (2, 3));
    }

    #[test]
    fn refuses_other_malformations() {
        for bad in [
            &b""[..],
            b"{",
            b"[1,]",
            b"{\"a\":1,}",
            b"01",
            b"1.",
            b"\"\x01\"",
            b"\"\\x\"",
            b"\"\\ud800\"",
            b"{} {}",
            b"'a'",
            b"\xef\xbb\xbf{}",
        ] {
            assert!(
                parse(bad).is_err(),
                "accepted {:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn refuses_deep_nesting_without_overflowing_the_stack() {
        let deep = "[".repeat(100_000);
        assert_eq!(kind(deep.as_bytes()), JsonErrorKind::TooDeep);
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(ok.as_bytes()).is_ok());
    }

    #[test]
    fn pointer_escapes_keys() {
        let e = parse(br#"{"a/b~c": {"d": 1, "d": 1}}"#).unwrap_err();
        assert_eq!(e.path, "/a~1b~0c/d");
    }
}
