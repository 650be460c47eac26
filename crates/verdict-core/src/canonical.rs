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

fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

fn write_object(map: &Map<String, Value>, out: &mut Vec<u8>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    // UTF-8 byte order equals UTF-16 order unless a key holds a supplementary-plane character
    // (4-byte UTF-8), so the common case only needs a sortedness check.
    let byte_sorted = entries.windows(2).all(|w| match w {
        [(a, _), (b, _)] => a.as_bytes() < b.as_bytes(),
        _ => true,
    });
    let has_astral = entries.iter().any(|(k, _)| k.bytes().any(|b| b >= 0xF0));
    if !byte_sorted || has_astral {
        entries.sort_by(|(a, _), (b, _)| utf16_cmp(a, b));
    }
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(k, out);
        out.push(b':');
        write(v, out);
    }
    out.push(b'}');
}

/// Lowercase hex digit of a nibble (`n < 16`).
pub(crate) fn hex_digit(n: u8) -> u8 {
    if n < 10 { b'0' + n } else { b'a' + (n - 10) }
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            0x00..=0x1f => None,
            _ => continue,
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

fn write_number(n: &Number, out: &mut Vec<u8>) {
    const EXACT: u64 = 1 << 53;
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT) {
        out.extend_from_slice(i.to_string().as_bytes());
        return;
    }
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT) {
        out.extend_from_slice(u.to_string().as_bytes());
        return;
    }
    // Every other number is an IEEE double, as ECMAScript sees it.
    let f = n.as_f64().unwrap_or(0.0);
    if f == 0.0 {
        out.push(b'0'); // -0 serialises as 0
        return;
    }
    let mut buf = ryu_js::Buffer::new();
    out.extend_from_slice(buf.format_finite(f).as_bytes());
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
    fn escapes_like_json_stringify() {
        let v = json!("\u{0}\u{1f}\"\\/\u{7f}\u{2028}é");
        assert_eq!(canon(&v), "\"\\u0000\\u001f\\\"\\\\/\u{7f}\u{2028}é\"");
    }
}
