//! The tape against the strict reader it stands in for: it must never accept what the strict
//! reader refuses, and for what both accept it must give the same canonical bytes and decode to
//! the same value.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use super::{Tape, canonical, de};
use crate::json;
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Checks one input both ways; `accept` says whether the tape must take it.
fn agree(input: &[u8], accept: Option<bool>) {
    let strict = json::parse(input);
    let tape = Tape::parse(input);
    let shown = String::from_utf8_lossy(input);
    if let Some(want) = accept {
        assert_eq!(tape.is_ok(), want, "tape on {shown:?}");
    }
    match (&strict, &tape) {
        (Err(_), Ok(_)) => panic!("the tape accepted what the strict reader refuses: {shown:?}"),
        (Ok(v), Ok(t)) => {
            let mut bytes = Vec::new();
            canonical::write(t, 0, &mut bytes);
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(crate::canonical::to_vec(v)).unwrap(),
                "canonical bytes of {shown:?}"
            );
            let decoded: Value = de::decode(t, 0).unwrap();
            assert_eq!(&decoded, v, "decoded {shown:?}");
            // The canonical flag is only ever set on bytes that are canonical.
            if t.is_canonical(0) && !v.is_string() {
                assert_eq!(t.raw(0), &crate::canonical::to_vec(v)[..], "{shown:?}");
            }
        }
        // Callers would fall back to the strict reader, but the two are meant to accept
        // exactly the same documents.
        (Ok(_), Err(_)) => panic!("the tape refused what the strict reader takes: {shown:?}"),
        (Err(_), Err(_)) => {}
    }
}

#[test]
fn refuses_everything_the_strict_reader_refuses() {
    let deep = "[".repeat(json::MAX_DEPTH + 1) + &"]".repeat(json::MAX_DEPTH + 1);
    for bad in [
        &b""[..],
        b" ",
        b"{",
        b"[1,]",
        b"{\"a\":1,}",
        b"{\"a\" 1}",
        b"{1:1}",
        b"01",
        b"-",
        b"1.",
        b".5",
        b"1e",
        b"1e+",
        b"+1",
        b"\"\x01\"",
        b"\"\\x\"",
        b"\"\\u12\"",
        b"\"\\u12g4\"",
        b"\"\\ud800\"",
        b"\"\\ud800\\u0041\"",
        b"\"\\udc00\"",
        b"\"abc",
        b"\"abc\\",
        b"\"abc\\\"",
        b"{} {}",
        b"'a'",
        b"\xef\xbb\xbf{}",
        b"\"\xff\"",
        b"\"\xc3\"",
        b"tru",
        b"nul",
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"9007199254740992",
        b"-9007199254740992",
        b"99999999999999999999",
        b"1e300",
        b"1.5e999",
        b"9007199254740993.0",
        b"9007199254740991.5",
        b"{\"a\":1,\"a\":2}",
        b"{\"b\":1,\"a\":2,\"b\":3}",
        b"{\"a\":1,\"\\u0061\":2}",
        b"{\"\\u0061\":1,\"a\":2}",
        b"{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\":2}",
        deep.as_bytes(),
    ] {
        agree(bad, Some(false));
    }
}

#[test]
fn accepts_and_canonicalises_like_the_strict_reader() {
    let deep = "[".repeat(json::MAX_DEPTH) + &"]".repeat(json::MAX_DEPTH);
    for good in [
        &b"{}"[..],
        b"[]",
        b" { } ",
        b"null",
        b"true",
        b"0",
        b"-0",
        b"-0.0",
        b"1.0",
        b"1e2",
        b"1E+2",
        b"2.5e-7",
        b"9007199254740991",
        b"-9007199254740991",
        b"0.1",
        b"\"\"",
        b"\"a\\/b\\\"c\\\\d\\b\\f\\n\\r\\t\"",
        b"\"\\u0000\\u001f\\u007f\\u2028\\u00e9\"",
        b"\"\\ud83d\\ude00\"",
        "\"caf\u{e9} \u{1f600}\"".as_bytes(),
        b"{\"b\":1,\"a\":2}",
        b"{\"a\":1,\"b\":[1,2,{\"d\":null,\"c\":true}]}",
        b"{\"a\":{\"b\":{\"c\":{}}}}",
        b"{\"\\u0062\":1,\"a\":2}",
        "{\"\u{fb33}\":1,\"\u{1f600}\":2,\"a\":3}".as_bytes(),
        "{\"\u{1f600}\":2,\"\u{fb33}\":1}".as_bytes(),
        b"{\"a\" : 1 , \"b\" :\n[ 1 ,2 ]\t}",
        b"[1,\"x\",null,false,[],{}]",
        deep.as_bytes(),
    ] {
        agree(good, Some(true));
    }
}

#[test]
fn marks_only_canonical_text_as_canonical() {
    for (text, canonical) in [
        (&b"{\"a\":1,\"b\":[true,null,\"x\"]}"[..], true),
        (b"{\"b\":1,\"a\":2}", false),
        (b"{\"a\": 1}", false),
        (b"[1.0]", false),
        (b"[-0]", false),
        (b"[\"\\n\"]", false),
        (b"{\"\\u0061\":1}", false),
        ("{\"\u{1f600}\":1}".as_bytes(), false),
        (b"[{\"a\":1},{\"b\":2}]", true),
        (b"[{\"a\":1}, {\"b\":2}]", false),
    ] {
        let t = Tape::parse(text).unwrap();
        assert_eq!(
            t.is_canonical(0),
            canonical,
            "{}",
            String::from_utf8_lossy(text)
        );
    }
}

/// How a generated value is written out.
#[derive(Debug, Clone, Copy)]
struct Style {
    spaces: bool,
    reverse_keys: bool,
    escape: bool,
    exponent_ints: bool,
}

fn write_str(s: &str, style: Style, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if style.escape && (c == 'a' || !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04X}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write(v: &Value, style: Style, out: &mut String) {
    let sep = if style.spaces { " , " } else { "," };
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) if style.exponent_ints && n.is_i64() => out.push_str(&format!("{n}e0")),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_str(s, style, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                write(x, style, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            let mut members: Vec<(&String, &Value)> = m.iter().collect();
            if style.reverse_keys {
                members.reverse();
            }
            for (i, (k, x)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                write_str(k, style, out);
                out.push_str(if style.spaces { " : " } else { ":" });
                write(x, style, out);
            }
            out.push('}');
        }
    }
}

fn arb_value() -> impl Strategy<Value = Value> {
    let text = "[a-c\u{e9}\u{fb33}\u{1f600}\u{1}\"\\\\/ ]{0,6}";
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-json::MAX_SAFE_INTEGER..=json::MAX_SAFE_INTEGER).prop_map(Value::from),
        (-1e6f64..1e6).prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text.prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 5, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map(text, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn generated_documents_read_the_same_both_ways(
        v in arb_value(),
        spaces: bool,
        reverse_keys: bool,
        escape: bool,
        exponent_ints: bool,
    ) {
        let mut text = String::new();
        write(&v, Style { spaces, reverse_keys, escape, exponent_ints }, &mut text);
        agree(text.as_bytes(), Some(true));
    }

    #[test]
    fn damaged_documents_are_never_accepted_alone(v in arb_value(), at: prop::sample::Index, byte: u8) {
        let mut text = Vec::new();
        let mut s = String::new();
        write(&v, Style { spaces: false, reverse_keys: true, escape: true, exponent_ints: false }, &mut s);
        text.extend_from_slice(s.as_bytes());
        let i = at.index(text.len());
        text[i] = byte;
        agree(&text, None);
        text.insert(i, byte);
        agree(&text, None);
    }
}
