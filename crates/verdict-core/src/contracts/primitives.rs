//! Validated scalar types shared by every contract: identifiers, principal names, timestamps.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// Why a scalar was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScalarError {
    /// Not `^[a-z0-9][a-z0-9._-]{0,127}$`.
    #[error("identifier {} does not match ^[a-z0-9][a-z0-9._-]{{0,127}}$", crate::quote::quoted(.0))]
    Identifier(String),
    /// Empty, longer than 256 characters, or holding a control, format or separator character.
    #[error("{} is not 1-256 printable characters", crate::quote::quoted(.0))]
    Printable(String),
    /// Not an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SS[.fraction]Z`).
    #[error("timestamp {} is not rfc 3339 utc (YYYY-MM-DDTHH:MM:SS[.fraction]Z)", crate::quote::quoted(.0))]
    Timestamp(String),
}

/// Whether `s` matches `^[a-z0-9][a-z0-9._-]{0,127}$` (byte for byte; no case folding).
#[must_use]
pub fn is_identifier(s: &str) -> bool {
    let b = s.as_bytes();
    matches!(b.first(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && b.len() <= 128
        && b.iter()
            .all(|c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
}

/// Characters that render as nothing or reorder text: controls (Cc), format characters (Cf) and
/// the line/paragraph separators. A principal name holding one could look like another.
#[must_use]
pub fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2
            | 0x180E | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
            | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

/// Space separators (Zs) other than U+0020, which render as a plain space: a name holding one
/// could pass for the name with an ordinary space.
#[must_use]
pub fn is_look_alike_space(c: char) -> bool {
    matches!(
        c as u32,
        0x00A0 | 0x1680 | 0x2000..=0x200A | 0x202F | 0x205F | 0x3000
    )
}

/// Whether `s` is 1–256 printable characters: none invisible, no space but U+0020.
#[must_use]
pub fn is_printable_name(s: &str) -> bool {
    let n = s.chars().count();
    (1..=256).contains(&n) && !s.chars().any(|c| is_invisible(c) || is_look_alike_space(c))
}

/// Whether `c` may be in a new principal's name: an ASCII letter or digit, `.`, `_`, `-`, `@`
/// or `+`. A principal's name is held to these so that none can pass for another written with
/// letters of another script (`оperator` with a Cyrillic `о`), an invisible character or a
/// look-alike space. Names already stored are read as they are; the rule is where names are made.
#[must_use]
pub fn is_principal_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@' | '+')
}

/// The first character of `s` a new principal's name may not hold, with its position (from 0),
/// or `None` when every one is allowed ([`is_principal_name_char`]).
#[must_use]
pub fn principal_name_refusal(s: &str) -> Option<(usize, char)> {
    s.chars()
        .enumerate()
        .find(|&(_, c)| !is_principal_name_char(c))
}

/// The look-alike skeleton of a principal's name: what the name reads as when the ASCII
/// characters that pass for one another are taken as one. Two names with the same skeleton
/// could be taken for each other (`operator` and `0perator`, `admin` and `admln`, `rn` and `m`),
/// so a new principal whose name's skeleton is another principal's is refused where names are
/// made (the engine, and on PostgreSQL the database, which computes the same function in SQL:
/// `verdict._name_skeleton`, schema version 35).
///
/// Each character, in order: ASCII letters are lowercased; then `0` reads as `o`, `1`, `i` and
/// `|` as `l`, `5` as `s`, and `_`, `-` and `.` as `.`; every other character stays as it is.
/// Then, left to right and without overlap, `rn` reads as `m`, and after that `vv` as `w`.
/// Pure and total: any text has one skeleton, names stored before the rule included.
#[must_use]
pub fn name_skeleton(name: &str) -> String {
    let mapped: String = name
        .chars()
        .map(|c| match c.to_ascii_lowercase() {
            '0' => 'o',
            '1' | 'i' | '|' => 'l',
            '5' => 's',
            '_' | '-' => '.',
            other => other,
        })
        .collect();
    mapped.replace("rn", "m").replace("vv", "w")
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $check:path, $err:ident, $pattern:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(super::compact::Compact);

        impl $name {
            /// The value as text.
            #[must_use]
            pub fn as_str(&self) -> &str {
                self.0.as_str()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_tuple(stringify!($name)).field(&self.as_str()).finish()
            }
        }

        impl FromStr for $name {
            type Err = ScalarError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                // Neither check admits a NUL character, as `Compact` requires.
                if $check(s) {
                    Ok(Self(super::compact::Compact::new(s)))
                } else {
                    Err(ScalarError::$err(s.to_owned()))
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = ScalarError;
            fn try_from(s: String) -> Result<Self, Self::Error> {
                if $check(&s) {
                    Ok(Self(super::compact::Compact::from_string(s)))
                } else {
                    Err(ScalarError::$err(s))
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                self.as_str()
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                // Reads like `String` (same errors), without a `String` when the text is borrowed.
                struct Visitor;
                impl serde::de::Visitor<'_> for Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a string")
                    }
                    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<$name, E> {
                        s.parse().map_err(E::custom)
                    }
                    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<$name, E> {
                        $name::try_from(s).map_err(E::custom)
                    }
                    fn visit_bytes<E: serde::de::Error>(self, b: &[u8]) -> Result<$name, E> {
                        match std::str::from_utf8(b) {
                            Ok(s) => self.visit_str(s),
                            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Bytes(b), &self)),
                        }
                    }
                }
                d.deserialize_string(Visitor)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> Cow<'static, str> {
                stringify!($name).into()
            }
            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $pattern
            }
        }
    };
}

string_newtype!(
    /// An identifier: criterion, check, verifier class, policy name, document id.
    Id,
    is_identifier,
    Identifier,
    schemars::json_schema!({"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$"})
);

string_newtype!(
    /// A free name of 1–256 printable characters: principals, runs, executions, revisions.
    Name,
    is_printable_name,
    Printable,
    schemars::json_schema!({"type": "string", "minLength": 1, "maxLength": 256})
);

/// An RFC 3339 UTC instant. Keeps the text it was read from; orders by the instant.
#[derive(Debug, Clone)]
pub struct Timestamp {
    text: String,
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    nanos: i128,
}

const NANOS_PER_SEC: i128 = 1_000_000_000;

impl Timestamp {
    /// Nanoseconds since the Unix epoch.
    #[must_use]
    pub fn unix_nanos(&self) -> i128 {
        self.nanos
    }

    /// The text it was read from.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The instant `secs` seconds later, written canonically (`...Z`, fraction only if needed).
    #[must_use]
    pub fn plus_seconds(&self, secs: u64) -> Self {
        Self::from_unix_nanos(self.nanos + i128::from(secs) * NANOS_PER_SEC)
    }

    /// An instant from nanoseconds since the epoch, written canonically.
    #[must_use]
    pub fn from_unix_nanos(nanos: i128) -> Self {
        let secs = nanos.div_euclid(NANOS_PER_SEC);
        let frac = nanos.rem_euclid(NANOS_PER_SEC);
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        // Written digit by digit (this runs once per decision), as `{y:04}` and `{:02}` would:
        // a year below zero as `-` and at least three digits, every field at least its width.
        let mut b = Vec::with_capacity(32);
        if y < 0 {
            b.push(b'-');
            digits(&mut b, y.unsigned_abs(), 3);
        } else {
            digits(&mut b, y.unsigned_abs(), 4);
        }
        // Month, day, second of the day and fraction are never negative (Euclidean division).
        let (m, d, sod, frac) = (
            m.unsigned_abs(),
            d.unsigned_abs(),
            sod.unsigned_abs(),
            frac.unsigned_abs(),
        );
        b.push(b'-');
        digits(&mut b, m, 2);
        b.push(b'-');
        digits(&mut b, d, 2);
        b.push(b'T');
        digits(&mut b, sod / 3600, 2);
        b.push(b':');
        digits(&mut b, (sod % 3600) / 60, 2);
        b.push(b':');
        digits(&mut b, sod % 60, 2);
        if frac != 0 {
            // Nine digits of nanoseconds, without the trailing zeros.
            let (mut f, mut width) = (frac, 9);
            while f % 10 == 0 {
                f /= 10;
                width -= 1;
            }
            b.push(b'.');
            digits(&mut b, f, width);
        }
        b.push(b'Z');
        // Only ASCII digits and separators were written.
        let text = String::from_utf8(b).unwrap_or_default();
        Self { text, nanos }
    }
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Timestamp {}
impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

/// Appends `n` in decimal, zero-padded to at least `width` digits.
fn digits(out: &mut Vec<u8>, n: u128, width: usize) {
    // u128::MAX has 39 digits.
    let mut buf = [b'0'; 39];
    let mut at = buf.len();
    let mut push = |digit: u8| {
        at -= 1;
        if let Some(slot) = buf.get_mut(at) {
            *slot = b'0' + digit;
        }
    };
    // Every field of a real date fits 64 bits, where division by ten is a multiplication;
    // 128-bit division is a library call.
    match u64::try_from(n) {
        Ok(mut rest) => {
            while rest > 0 {
                // A single decimal digit, so the casts cannot truncate.
                push((rest % 10) as u8);
                rest /= 10;
            }
        }
        Err(_) => {
            let mut rest = n;
            while rest > 0 {
                push((rest % 10) as u8);
                rest /= 10;
            }
        }
    }
    let at = at.min(buf.len().saturating_sub(width));
    out.extend_from_slice(buf.get(at..).unwrap_or_default());
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(y) => 29,
        2 => 28,
        _ => 0,
    }
}

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i128) -> (i128, i128, i128) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    // The day of the era is in 0..146_097, so the rest is done in 64 bits, where division by a
    // constant is a multiplication (128-bit division is a library call).
    let doe = i64::try_from(z - era * 146_097).unwrap_or(0);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = i128::from(yoe) + era * 400 + i128::from(m <= 2);
    (y, i128::from(m), i128::from(d))
}

fn parse_timestamp(s: &str) -> Option<i128> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if part.iter().all(u8::is_ascii_digit) {
            std::str::from_utf8(part).ok()?.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 20
        || b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || b.get(10) != Some(&b'T')
        || b.get(13) != Some(&b':')
        || b.get(16) != Some(&b':')
        || b.last() != Some(&b'Z')
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59
    {
        return None;
    }
    let mut frac: i128 = 0;
    let rest = b.get(19..b.len() - 1)?;
    if !rest.is_empty() {
        let digits = rest.strip_prefix(b".")?;
        if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        for i in 0..9 {
            frac = frac * 10 + i128::from(digits.get(i).map_or(0, |c| c - b'0'));
        }
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se;
    Some(i128::from(secs) * NANOS_PER_SEC + frac)
}

impl FromStr for Timestamp {
    type Err = ScalarError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_timestamp(s)
            .map(|nanos| Self {
                text: s.to_owned(),
                nanos,
            })
            .ok_or_else(|| ScalarError::Timestamp(s.to_owned()))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

impl schemars::JsonSchema for Timestamp {
    fn schema_name() -> Cow<'static, str> {
        "Timestamp".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "format": "date-time",
            "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?Z$"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for ok in ["a", "0", "tests-pass", "a.b_c-d", &"a".repeat(128)] {
            assert!(is_identifier(ok), "{ok}");
        }
        for bad in [
            "",
            "A",
            "-a",
            ".a",
            "a b",
            "tests-pasѕ",
            "a/b",
            &"a".repeat(129),
            "é",
        ] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn printable_names() {
        assert!(is_printable_name("agent coder #1"));
        assert!(is_printable_name(&"é".repeat(256)));
        for bad in [
            "",
            "a\u{200b}b",
            "a\u{202e}b",
            "a\nb",
            "a\u{feff}",
            "agent\u{a0}coder",
            "agent\u{3000}coder",
            "agent\u{2009}coder",
            "agent\u{202f}coder",
            &"x".repeat(257),
        ] {
            assert!(!is_printable_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn names_that_pass_for_one_another_share_a_skeleton() {
        for (a, b) in [
            ("operator", "0perator"),
            ("operator", "OPERATOR"),
            ("admin", "admln"),
            ("admin", "adm1n"),
            ("admin", "admIn"),
            ("admin", "adm|n"),
            ("l", "I"),
            ("l", "1"),
            ("modern", "rnodern"),
            ("www", "vvvvvv"),
            ("ci-runner", "ci_runner"),
            ("ci-runner", "ci.runner"),
            ("s5", "5s"),
        ] {
            assert_eq!(name_skeleton(a), name_skeleton(b), "{a} {b}");
        }
        for (a, b) in [
            ("operator", "operators"),
            ("rev", "rev2"),
            ("alice", "bob"),
            ("a@b", "a+b"),
            ("\u{43e}perator", "operator"),
        ] {
            assert_ne!(name_skeleton(a), name_skeleton(b), "{a} {b}");
        }
        assert_eq!(name_skeleton("Ops-0_1.IrnVV5|"), "ops.o.l.lmwsl");
    }

    #[test]
    fn a_principal_name_is_ascii_letters_digits_and_five_marks() {
        for ok in [
            "operator",
            "rev-2",
            "Alice.Smith",
            "ci_runner",
            "a@b.example",
            "x+y",
        ] {
            assert_eq!(principal_name_refusal(ok), None, "{ok}");
        }
        for (bad, at, c) in [
            ("\u{43e}perator", 0, '\u{43e}'),
            ("t\u{3bf}ken", 1, '\u{3bf}'),
            ("ad\u{ff4d}in", 2, '\u{ff4d}'),
            ("h\u{e9}l\u{e8}ne", 1, '\u{e9}'),
            ("agent coder", 5, ' '),
            ("rev\u{a0}", 3, '\u{a0}'),
            ("a/b", 1, '/'),
        ] {
            assert_eq!(principal_name_refusal(bad), Some((at, c)), "{bad:?}");
        }
    }

    #[test]
    fn timestamps_round_trip() {
        let t: Timestamp = "2026-11-30T12:00:00Z".parse().unwrap();
        assert_eq!(t.unix_nanos(), 1_796_040_000 * NANOS_PER_SEC);
        assert_eq!(
            Timestamp::from_unix_nanos(t.unix_nanos()).as_str(),
            "2026-11-30T12:00:00Z"
        );
        let f: Timestamp = "2024-02-29T23:59:59.5Z".parse().unwrap();
        assert_eq!(f.plus_seconds(1).as_str(), "2024-03-01T00:00:00.5Z");
        assert_eq!(
            "1970-01-01T00:00:00Z"
                .parse::<Timestamp>()
                .unwrap()
                .unix_nanos(),
            0
        );
        let early: Timestamp = "1969-12-31T23:59:59Z".parse().unwrap();
        assert_eq!(early.unix_nanos(), -NANOS_PER_SEC);
        assert_eq!(
            Timestamp::from_unix_nanos(-NANOS_PER_SEC).as_str(),
            "1969-12-31T23:59:59Z"
        );
    }

    /// Every instant of years 0 to 9999 is written as the reader reads it back, with its
    /// fraction trimmed; beyond that range the general path writes what it always wrote.
    #[test]
    fn written_timestamps_read_back() {
        let first = "0000-01-01T00:00:00Z"
            .parse::<Timestamp>()
            .unwrap()
            .unix_nanos();
        let last = "9999-12-31T23:59:59.999999999Z"
            .parse::<Timestamp>()
            .unwrap()
            .unix_nanos();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let span = u128::try_from(last - first).unwrap();
        for i in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut n = first + i128::try_from(u128::from(x) * u128::from(i + 1) % span).unwrap();
            if i % 3 == 0 {
                n -= n.rem_euclid(NANOS_PER_SEC); // whole seconds
            }
            let t = Timestamp::from_unix_nanos(n);
            let back: Timestamp = t.as_str().parse().unwrap();
            assert_eq!(back.unix_nanos(), n, "{}", t.as_str());
            // A fraction is written only when there is one, and without trailing zeros.
            if let Some((_, fraction)) = t.as_str().split_once('.') {
                assert!(
                    !fraction.ends_with("0Z") && fraction != "Z",
                    "{}",
                    t.as_str()
                );
            }
        }
        assert_eq!(
            Timestamp::from_unix_nanos(first).as_str(),
            "0000-01-01T00:00:00Z"
        );
        assert_eq!(
            Timestamp::from_unix_nanos(last).as_str(),
            "9999-12-31T23:59:59.999999999Z"
        );
        assert_eq!(
            Timestamp::from_unix_nanos(last + 1).as_str(),
            "10000-01-01T00:00:00Z"
        );
        assert_eq!(
            Timestamp::from_unix_nanos(first - NANOS_PER_SEC).as_str(),
            "-001-12-31T23:59:59Z"
        );
        // Years past 64 bits are still written in full.
        let far = Timestamp::from_unix_nanos(i128::MAX);
        let year = far.as_str().split('-').next().unwrap();
        assert!(
            year.len() > 20 && year.bytes().all(|b| b.is_ascii_digit()),
            "{far}"
        );
        assert!(far.as_str().ends_with('Z'), "{far}");
    }

    #[test]
    fn timestamps_refuse_non_utc_and_impossible_dates() {
        for bad in [
            "2026-11-30T12:00:00+00:00",
            "2026-11-30T12:00:00z",
            "2026-11-30 12:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30T23:59:60Z",
            "2026-11-30T12:00:00.Z",
            "2026-11-30T12:00:00.1234567890Z",
            "2026-11-30T12:00Z",
            "+026-11-30T12:00:00Z",
        ] {
            assert!(bad.parse::<Timestamp>().is_err(), "{bad}");
        }
    }
}
