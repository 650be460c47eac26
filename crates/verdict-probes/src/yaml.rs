//! A strict YAML reader: YAML 1.2 core schema to `serde_json::Value`, with positions.
//!
//! It refuses what would make a spec mean two things: duplicate keys, anchors and aliases,
//! explicit tags, several documents, non-scalar keys, NaN/Infinity and integers outside
//! ±(2^53−1), the same bounds the strict JSON reader applies.

use crate::positions::{Pos, Positions, token};
use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde_json::{Map, Number, Value};
use verdict_core::json::MAX_SAFE_INTEGER;

/// Nesting deeper than this is refused.
const MAX_DEPTH: usize = 64;

/// A YAML document that was refused, with where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} at line {line} column {column}")]
pub struct YamlError {
    /// What is wrong.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

fn pos_of(span: &Span) -> Pos {
    Pos {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

fn err(span: &Span, message: impl Into<String>) -> YamlError {
    let p = pos_of(span);
    YamlError {
        message: message.into(),
        line: p.line,
        column: p.column,
    }
}

struct Reader<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    positions: Positions,
}

impl<'a> Reader<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Span), YamlError> {
        match self.parser.next_event() {
            Some(Ok(ev)) => Ok(ev),
            Some(Err(e)) => Err(YamlError {
                message: e.info().to_owned(),
                line: e.marker().line(),
                column: e.marker().col() + 1,
            }),
            None => Err(YamlError {
                message: "unexpected end of input".into(),
                line: 1,
                column: 1,
            }),
        }
    }

    fn node(
        &mut self,
        ev: Event<'a>,
        span: Span,
        pointer: &str,
        depth: usize,
    ) -> Result<Value, YamlError> {
        if depth > MAX_DEPTH {
            return Err(err(
                &span,
                format!("nesting deeper than {MAX_DEPTH} levels"),
            ));
        }
        self.positions.set_value(pointer, pos_of(&span));
        match ev {
            Event::Scalar(text, style, anchor, tag) => {
                refuse_anchor_and_tag(&span, anchor, tag.is_some())?;
                scalar(&text, style).map_err(|m| err(&span, m))
            }
            Event::SequenceStart(anchor, tag) => {
                refuse_anchor_and_tag(&span, anchor, tag.is_some())?;
                let mut items = Vec::new();
                loop {
                    let (ev, sp) = self.next()?;
                    if matches!(ev, Event::SequenceEnd) {
                        break;
                    }
                    let child = format!("{pointer}/{}", items.len());
                    items.push(self.node(ev, sp, &child, depth + 1)?);
                }
                Ok(Value::Array(items))
            }
            Event::MappingStart(anchor, tag) => {
                refuse_anchor_and_tag(&span, anchor, tag.is_some())?;
                let mut map = Map::new();
                loop {
                    let (ev, sp) = self.next()?;
                    let key = match ev {
                        Event::MappingEnd => break,
                        Event::Scalar(text, _, anchor, tag) => {
                            refuse_anchor_and_tag(&sp, anchor, tag.is_some())?;
                            text.into_owned()
                        }
                        Event::Alias(_) => return Err(err(&sp, "aliases are not supported")),
                        _ => return Err(err(&sp, "object keys must be plain strings")),
                    };
                    if map.contains_key(&key) {
                        return Err(err(&sp, format!("duplicate object key {key:?}")));
                    }
                    let child = format!("{pointer}/{}", token(&key));
                    self.positions.set_key(&child, pos_of(&sp));
                    let (vev, vsp) = self.next()?;
                    let value = self.node(vev, vsp, &child, depth + 1)?;
                    map.insert(key, value);
                }
                Ok(Value::Object(map))
            }
            Event::Alias(_) => Err(err(&span, "aliases are not supported")),
            _ => Err(err(&span, "unexpected yaml event")),
        }
    }
}

fn refuse_anchor_and_tag(span: &Span, anchor: usize, tagged: bool) -> Result<(), YamlError> {
    if anchor != 0 {
        return Err(err(span, "anchors are not supported"));
    }
    if tagged {
        return Err(err(span, "explicit tags are not supported"));
    }
    Ok(())
}

/// Resolves a scalar by the YAML 1.2 core schema; quoted and block scalars are strings.
fn scalar(text: &str, style: ScalarStyle) -> Result<Value, String> {
    if style != ScalarStyle::Plain {
        return Ok(Value::String(text.to_owned()));
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => return Err(format!("number {text} is not finite")),
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        let i = i?;
        return Ok(Value::Number(Number::from(i)));
    }
    if is_float(text) {
        let f: f64 = text
            .parse()
            .map_err(|_| format!("number {text} is not valid"))?;
        if !f.is_finite() {
            return Err(format!("number {text} is not finite"));
        }
        return Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| format!("number {text} is not finite"));
    }
    Ok(Value::String(text.to_owned()))
}

/// `Some` when `text` is a core-schema integer; its value must be within ±(2^53−1).
fn parse_int(text: &str) -> Option<Result<i64, String>> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let parsed = if let Some(hex) = body.strip_prefix("0x") {
        (!neg && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| i128::from_str_radix(hex, 16))
    } else if let Some(oct) = body.strip_prefix("0o") {
        (!neg && !oct.is_empty() && oct.bytes().all(|b| (b'0'..=b'7').contains(&b)))
            .then(|| i128::from_str_radix(oct, 8))
    } else {
        (!body.is_empty() && body.bytes().all(|b| b.is_ascii_digit())).then(|| body.parse::<i128>())
    }?;
    let out_of_range = || format!("integer {text} outside ±(2^53-1)");
    Some(match parsed {
        Ok(v) => {
            let v = if neg { -v } else { v };
            if v.abs() > i128::from(MAX_SAFE_INTEGER) {
                Err(out_of_range())
            } else {
                i64::try_from(v).map_err(|_| out_of_range())
            }
        }
        Err(_) => Err(out_of_range()),
    })
}

fn is_float(text: &str) -> bool {
    // [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
    let b = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mant, exp) = match b.find(['e', 'E']) {
        Some(i) => (b.get(..i).unwrap_or(""), b.get(i + 1..)),
        None => (b, None),
    };
    let mant_ok = match mant.split_once('.') {
        Some((i, f)) => {
            (!i.is_empty() || !f.is_empty())
                && i.bytes().all(|c| c.is_ascii_digit())
                && f.bytes().all(|c| c.is_ascii_digit())
                && !(i.is_empty() && f.is_empty())
        }
        None => !mant.is_empty() && mant.bytes().all(|c| c.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|c| c.is_ascii_digit())
    });
    mant_ok && exp_ok
}

/// Parses one YAML document into a JSON value and the positions of its members.
pub fn parse(text: &str) -> Result<(Value, Positions), YamlError> {
    let mut r = Reader {
        parser: Parser::new_from_str(text),
        positions: Positions::default(),
    };
    let (ev, _) = r.next()?;
    if !matches!(ev, Event::StreamStart) {
        return Err(YamlError {
            message: "not a yaml stream".into(),
            line: 1,
            column: 1,
        });
    }
    let (ev, sp) = r.next()?;
    match ev {
        Event::DocumentStart(_) => {}
        Event::StreamEnd => return Err(err(&sp, "empty document")),
        _ => return Err(err(&sp, "expected a document")),
    }
    let (ev, sp) = r.next()?;
    let value = r.node(ev, sp, "", 0)?;
    let (ev, sp) = r.next()?;
    if !matches!(ev, Event::DocumentEnd) {
        return Err(err(&sp, "expected the end of the document"));
    }
    let (ev, sp) = r.next()?;
    if !matches!(ev, Event::StreamEnd) {
        return Err(err(&sp, "only one yaml document is allowed"));
    }
    Ok((value, r.positions))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_core_schema() {
        let (v, _) = parse(
            "a: 1\nb: -2.5\nc: true\nd: ~\ne: \"1\"\nf: 0x1F\ng: [x, 'y']\nh: |\n  line\ni: 1e3\nj: app.kubernetes.io/name\n",
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": 1, "b": -2.5, "c": true, "d": null, "e": "1", "f": 31, "g": ["x", "y"],
                   "h": "line\n", "i": 1000.0, "j": "app.kubernetes.io/name"})
        );
    }

    #[test]
    fn refuses_duplicate_keys_with_their_position() {
        let e = parse("a: 1\nb:\n  c: 1\n  c: 2\n").unwrap_err();
        assert!(e.message.contains("duplicate object key \"c\""), "{e}");
        assert_eq!((e.line, e.column), (4, 3));
    }

    #[test]
    fn refuses_ambiguous_constructs() {
        for bad in [
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "a: 1\n---\nb: 2\n",
            "? [a]\n: 1\n",
            "a: .nan\n",
            "a: 9007199254740992\n",
            "a: [1, 2\n",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(parse("a: 9007199254740991\n").is_ok());
    }

    #[test]
    fn records_positions_of_keys_and_values() {
        let (_, p) = parse("criteria:\n  - id: x\n    probe: {kind: tcp}\n").unwrap();
        assert_eq!(
            p.find("/criteria/0/probe"),
            Some(Pos { line: 3, column: 5 })
        );
        assert_eq!(
            p.find("/criteria/0/probe/kind"),
            Some(Pos {
                line: 3,
                column: 13
            })
        );
        assert_eq!(p.find("/criteria/0/id"), Some(Pos { line: 2, column: 5 }));
    }

    #[test]
    fn json_text_is_read_with_positions() {
        let (v, p) = parse("{\n  \"a\": {\"b\": [1, \"x\"]}\n}").unwrap();
        assert_eq!(v, json!({"a": {"b": [1, "x"]}}));
        assert_eq!(
            p.find("/a/b/1"),
            Some(Pos {
                line: 2,
                column: 18
            })
        );
    }
}
