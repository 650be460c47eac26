//! RFC 8785 (JCS) canonical form.
//!
//! A focused writer: object members sorted by their UTF-16 code units, strings escaped exactly as
//! ECMAScript's `JSON.stringify` does, numbers in ECMAScript's shortest round-trip form, no
//! whitespace. It is tested differentially against `serde_json_canonicalizer`.

use serde_json::{Map, Number, Value};
use std::cmp::Ordering;

/// Returns the canonical bytes of `value`.
///
/// ```
/// let v = serde_json::json!({"b": [1.0, 2.5e-7], "a": "é\n"});
/// assert_eq!(verdict_core::canonical::to_vec(&v), r#"{"a":"é\n","b":[1,2.5e-7]}"#.as_bytes());
/// ```
#[must_use]
pub fn to_vec(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write(value, &mut out);
    out
}

/// Appends the canonical bytes of `value` to `out`.
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => write_object(map, out),
    }
}

/// Orders two keys by their UTF-16 code units, as RFC 8785 sorts object members.
pub(crate) fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    write_members(map, None, out);
}

/// Writes `map` as a canonical object, leaving out the member named `skip` if there is one.
pub(crate) fn write_members(map: &Map<String, Value>, skip: Option<&str>, out: &mut Vec<u8>) {
    // UTF-8 byte order equals UTF-16 order unless a key holds a supplementary-plane character
    // (4-byte UTF-8), so the common case only needs a sortedness check, and no copy.
    let mut keys = map.keys();
    let byte_sorted = match keys.next() {
        None => true,
        Some(first) => {
            let mut prev = first;
            keys.all(|k| {
                let ok = prev.as_bytes() < k.as_bytes();
                prev = k;
                ok
            })
        }
    };
    let has_astral = map.keys().any(|k| k.bytes().any(|b| b >= 0xF0));
    out.push(b'{');
    let mut first = true;
    let mut member = |k: &str, v: &Value, out: &mut Vec<u8>| {
        if skip == Some(k) {
            return;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        write_string(k, out);
        out.push(b':');
        write(v, out);
    };
    if byte_sorted && !has_astral {
        for (k, v) in map {
            member(k, v, out);
        }
    } else {
        let mut entries: Vec<(&String, &Value)> = map.iter().collect();
        entries.sort_by(|(a, _), (b, _)| utf16_cmp(a, b));
        for (k, v) in entries {
            member(k, v, out);
        }
    }
    out.push(b'}');
}

/// Lowercase hex digit of a nibble (`n < 16`).
pub(crate) fn hex_digit(n: u8) -> u8 {
    if n < 10 { b'0' + n } else { b'a' + (n - 10) }
}

/// Writes `s` as a canonical JSON string.
pub(crate) fn write_str(s: &str, out: &mut Vec<u8>) {
    write_string(s, out);
}

/// The length of the prefix of `bytes` that a JSON string holds as it is: up to the first
/// control, quote or backslash. Eight bytes at a time, since most text needs no escape at all;
/// the first flagged byte of a word is found from the mask, so a short string costs one word.
pub(crate) fn plain_prefix(bytes: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each byte of `w` that is a control (below 0x20), a quote or a backslash.
    // A borrow can flag a byte above a flagged one, never below it, so the lowest flag is exact.
    let stops = |w: u64| {
        let below = w.wrapping_sub(ONES * 0x20) & !w;
        let q = w ^ (ONES * u64::from(b'"'));
        let bs = w ^ (ONES * u64::from(b'\\'));
        (below | (q.wrapping_sub(ONES) & !q) | (bs.wrapping_sub(ONES) & !bs)) & HIGH
    };
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in chunks.by_ref() {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let m = stops(u64::from_le_bytes(word));
        if m != 0 {
            return at + (m.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    let rest = chunks.remainder();
    at + rest
        .iter()
        .position(|&b| b < 0x20 || b == b'"' || b == b'\\')
        .unwrap_or(rest.len())
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let plain = plain_prefix(bytes);
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate().skip(plain) {
        // Only controls, the quote and the backslash need escaping.
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            _ => None,
        };
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        match esc {
            Some(e) => out.extend_from_slice(e),
            None => {
                out.extend_from_slice(b"\\u00");
                out.push(hex_digit(b >> 4));
                out.push(hex_digit(b & 0xf));
            }
        }
        start = i + 1;
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.push(b'"');
}

/// Integers up to 2^53 are written as integers; beyond that a number is the double it reads as.
const EXACT: u64 = 1 << 53;

fn write_number(n: &Number, out: &mut Vec<u8>) {
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        write_int(i.unsigned_abs(), i < 0, out);
        return;
    }
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        write_int(u, false, out);
        return;
    }
    // Every other number is an IEEE double, as ECMAScript sees it.
    write_f64(n.as_f64().unwrap_or(0.0), out);
}

/// Writes an unsigned integer as a JSON number the way [`write`] writes a `Number` holding it.
pub(crate) fn write_u64(u: u64, out: &mut Vec<u8>) {
    if u <= EXACT {
        write_int(u, false, out);
    } else {
        // Beyond 2^53 a number is the double it reads as, by definition.
        write_f64(u as f64, out);
    }
}

/// Writes a finite double in ECMAScript's shortest round-trip form (`-0` as `0`).
pub(crate) fn write_f64(f: f64, out: &mut Vec<u8>) {
    if f == 0.0 {
        out.push(b'0'); // -0 serialises as 0
        return;
    }
    let mut buf = ryu_js::Buffer::new();
    out.extend_from_slice(buf.format_finite(f).as_bytes());
}

/// Writes an integer the way [`write`] writes a `Number` holding it, for `|i| <= 2^53`.
pub(crate) fn write_i64(i: i64, out: &mut Vec<u8>) {
    write_int(i.unsigned_abs(), i < 0, out);
}

/// Decimal digits of `magnitude`, with a minus sign when `negative`, without allocating.
fn write_int(mut magnitude: u64, negative: bool, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        if let Some(d) = digits.get_mut(at) {
            // `magnitude % 10` is below 10, so the cast cannot truncate.
            *d = b'0' + (magnitude % 10) as u8;
        }
        magnitude /= 10;
        if magnitude == 0 || at == 0 {
            break;
        }
    }
    if negative {
        out.push(b'-');
    }
    out.extend_from_slice(digits.get(at..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn canon(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn rfc8785_examples() {
        // Numbers from RFC 8785 appendix B.
        let cases = [
            (0.0, "0"),
            (-0.0, "0"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740992.0, "9007199254740992"),
            (1e21, "1e+21"),
            (333333333.3333333, "333333333.3333333"),
            (1e23, "1e+23"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
        ];
        for (f, want) in cases {
            assert_eq!(canon(&json!(f)), want, "{f}");
        }
    }

    #[test]
    fn sorts_by_utf16_code_units() {
        // U+1F600 (surrogates D83D..) sorts before U+FB33 in UTF-16, after it in UTF-8.
        let v = json!({"\u{fb33}": 1, "\u{1f600}": 2, "a": 3});
        assert_eq!(canon(&v), "{\"a\":3,\"\u{1f600}\":2,\"\u{fb33}\":1}");
    }

    #[test]
    fn plain_prefix_stops_at_the_first_byte_to_escape() {
        for (s, want) in [
            ("", 0),
            ("abc", 3),
            ("0123456789abcdef", 16),
            ("01234567\"9", 8),
            ("0123456\\", 7),
            ("0123456789\u{1f}", 10),
            ("\u{7f}\u{80}é\u{1f600} long enough to span words", 35),
            ("\ttab first", 0),
        ] {
            assert_eq!(plain_prefix(s.as_bytes()), want, "{s:?}");
        }
    }

    #[test]
    fn plain_prefix_agrees_with_a_byte_by_byte_scan() {
        // Every stop byte at every place of strings up to three words long, behind fillers that
        // include the bytes a word-wide borrow or a high bit could confuse.
        let fillers = [
            b' ', b'!', b'#', b'[', b']', b'a', 0x7f, 0x80, 0xc3, 0xff, 0x21, 0x5b,
        ];
        let naive = |b: &[u8]| {
            b.iter()
                .position(|&c| c < 0x20 || c == b'"' || c == b'\\')
                .unwrap_or(b.len())
        };
        for len in 0..25 {
            for shift in 0..fillers.len() {
                let plain: Vec<u8> = (0..len)
                    .map(|i| fillers[(i + shift) % fillers.len()])
                    .collect();
                assert_eq!(plain_prefix(&plain), len, "{plain:?}");
                for at in 0..len {
                    for stop in [0x00, 0x01, 0x1f, b'"', b'\\'] {
                        let mut b = plain.clone();
                        b[at] = stop;
                        // A second stop later must not move the answer.
                        if at + 2 < len {
                            b[at + 2] = 0x00;
                        }
                        assert_eq!(plain_prefix(&b), naive(&b), "{b:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn escapes_like_json_stringify() {
        let v = json!("\u{0}\u{1f}\"\\/\u{7f}\u{2028}é");
        assert_eq!(canon(&v), "\"\\u0000\\u001f\\\"\\\\/\u{7f}\u{2028}é\"");
    }
}
