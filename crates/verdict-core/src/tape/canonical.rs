//! RFC 8785 canonical bytes of a tape node: byte for byte what [`crate::canonical::write`] gives
//! for the `Value` the strict reader builds from the same text.

use super::{Kind, Tape};
use crate::canonical as jcs;
use std::borrow::Cow;

/// Appends the canonical bytes of node `at` to `out`.
pub(crate) fn write(t: &Tape<'_>, at: usize, out: &mut Vec<u8>) {
    let Some(n) = t.node(at) else {
        return;
    };
    if t.is_canonical(at) {
        // A string's span is its text between the quotes.
        let quoted = n.kind == Kind::Str;
        if quoted {
            out.push(b'"');
        }
        out.extend_from_slice(t.raw(at));
        if quoted {
            out.push(b'"');
        }
        return;
    }
    match n.kind {
        Kind::Null => out.extend_from_slice(b"null"),
        Kind::True => out.extend_from_slice(b"true"),
        Kind::False => out.extend_from_slice(b"false"),
        // The reader keeps integers within ±(2^53−1); `-0` is the only one not canonical.
        Kind::Int => jcs::write_i64(t.int_at(at).unwrap_or(0), out),
        Kind::Float => jcs::write_f64(t.float_at(at).unwrap_or(0.0), out),
        Kind::Str => jcs::write_str(&t.str_at(at).unwrap_or_default(), out),
        Kind::Array => {
            out.push(b'[');
            for (i, c) in t.children(at).enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(t, c.value, out);
            }
            out.push(b']');
        }
        Kind::Object => {
            out.push(b'{');
            if t.is_sorted(at) {
                for (i, (k, v)) in t.members(at).enumerate() {
                    member(t, i, &t.str_at(k).unwrap_or_default(), v, out);
                }
            } else {
                let mut m: Vec<(Cow<'_, str>, usize)> = t
                    .members(at)
                    .map(|(k, v)| (t.str_at(k).unwrap_or_default(), v))
                    .collect();
                m.sort_by(|a, b| jcs::utf16_cmp(&a.0, &b.0));
                for (i, (k, v)) in m.iter().enumerate() {
                    member(t, i, k, *v, out);
                }
            }
            out.push(b'}');
        }
    }
}

fn member(t: &Tape<'_>, i: usize, key: &str, value: usize, out: &mut Vec<u8>) {
    if i > 0 {
        out.push(b',');
    }
    jcs::write_str(key, out);
    out.push(b':');
    write(t, value, out);
}
