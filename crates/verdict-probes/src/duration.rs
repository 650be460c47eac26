//! Durations as a spec writes them (`500ms`, `2s`, `1m30s`, `0`) and their one canonical form.
//!
//! A bare number other than `0` is refused: `timeout: 30` could mean seconds or milliseconds,
//! and a check that waits a thousand times too long or too short is worse than an error.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A whole number of milliseconds, written canonically as `<n>s` when it is whole seconds and
/// `<n>ms` otherwise, so equal durations always normalise to equal text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(u64);

/// The longest duration a spec may state (one week); anything longer is a typo.
pub const MAX_MILLIS: u64 = 7 * 24 * 3600 * 1000;

impl Dur {
    /// From milliseconds.
    #[must_use]
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms)
    }

    /// From whole seconds.
    #[must_use]
    pub const fn from_secs(s: u64) -> Self {
        Self(s.saturating_mul(1000))
    }

    /// Milliseconds.
    #[must_use]
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// Whole seconds, rounded down.
    #[must_use]
    pub const fn as_secs(self) -> u64 {
        self.0 / 1000
    }

    /// As a standard duration.
    #[must_use]
    pub const fn std(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// Whether it is zero.
    #[must_use]
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Parses `0`, or one or more `<digits><unit>` groups with units `ms`, `s`, `m`, `h`
    /// (largest first, each at most once), optionally with a decimal fraction on the last.
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if t == "0" {
            return Ok(Self(0));
        }
        if t.is_empty() {
            return Err("empty duration".into());
        }
        let mut total: u64 = 0;
        let mut rest = t;
        let mut last_rank = usize::MAX;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| format!("duration {text:?} needs a unit (ms, s, m or h)"))?;
            let (num, tail) = rest.split_at(num_len);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, next) = tail.split_at(unit_len);
            let (rank, unit_ms) = match unit {
                "h" => (0, 3_600_000u64),
                "m" => (1, 60_000),
                "s" => (2, 1000),
                "ms" => (3, 1),
                _ => {
                    return Err(format!(
                        "duration {text:?} has unknown unit {unit:?} (use ms, s, m or h)"
                    ));
                }
            };
            if num.is_empty() {
                return Err(format!("duration {text:?} has a unit without a number"));
            }
            if last_rank != usize::MAX && rank <= last_rank {
                return Err(format!("duration {text:?} repeats or misorders its units"));
            }
            last_rank = rank;
            let ms = parse_scaled(num, unit_ms).ok_or_else(|| {
                format!("duration {text:?} is not a whole number of milliseconds")
            })?;
            if num.contains('.') && !next.is_empty() {
                return Err(format!(
                    "duration {text:?}: only the last part may have a fraction"
                ));
            }
            total = total
                .checked_add(ms)
                .ok_or_else(|| format!("duration {text:?} is too long"))?;
            rest = next;
        }
        if total > MAX_MILLIS {
            return Err(format!("duration {text:?} is longer than a week"));
        }
        Ok(Self(total))
    }
}

/// `num` (digits with an optional fraction) times `unit_ms`, if that is a whole number.
fn parse_scaled(num: &str, unit_ms: u64) -> Option<u64> {
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int.is_empty() && frac.is_empty() || frac.contains('.') || frac.len() > 9 {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut ms = whole.checked_mul(unit_ms)?;
    if !frac.is_empty() {
        let digits: u64 = frac.parse().ok()?;
        let scale = 10u64.checked_pow(u32::try_from(frac.len()).ok()?)?;
        let scaled = u128::from(digits) * u128::from(unit_ms);
        if scaled % u128::from(scale) != 0 {
            return None;
        }
        ms = ms.checked_add(u64::try_from(scaled / u128::from(scale)).ok()?)?;
    }
    Some(ms)
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_str("0s")
        } else if self.0.is_multiple_of(1000) {
            write!(f, "{}s", self.0 / 1000)
        } else {
            write!(f, "{}ms", self.0)
        }
    }
}

/// The text a duration may be written as: `0`, or `<number><unit>` groups largest unit first,
/// only the last with a fraction. (Staying within a week and a whole number of milliseconds are
/// checked when the spec loads.)
pub const PATTERN: &str = concat!(
    r"^\s*(?:0",
    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)h",
    r"|(?:[0-9]+h)?(?:[0-9]+\.?[0-9]*|\.[0-9]+)m",
    r"|(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+\.?[0-9]*|\.[0-9]+)s",
    r"|(?:[0-9]+h)?(?:[0-9]+m)?(?:[0-9]+s)?(?:[0-9]+\.?[0-9]*|\.[0-9]+)ms",
    r")\s*$"
);

impl schemars::JsonSchema for Dur {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "A duration such as \"500ms\", \"30s\", \"1m30s\" or \"1.5s\", at most a week; the only bare number is 0.",
            "anyOf": [
                {"type": "string", "pattern": PATTERN},
                {"type": "integer", "const": 0}
            ]
        })
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Dur;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"500ms\", \"30s\", \"2m\" or 0")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                Dur::parse(v).map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(0))
                } else {
                    Err(E::custom(format!(
                        "duration {v} needs a unit (ms, s, m or h)"
                    )))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
                if v == 0 {
                    Ok(Dur(0))
                } else {
                    Err(E::custom(format!(
                        "duration {v} needs a unit (ms, s, m or h)"
                    )))
                }
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Dur, E> {
                Err(E::custom(format!(
                    "duration {v} needs a unit (ms, s, m or h)"
                )))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_combinations() {
        for (text, ms) in [
            ("0", 0),
            ("0s", 0),
            ("500ms", 500),
            ("2s", 2000),
            ("1.5s", 1500),
            ("2m", 120_000),
            ("1m30s", 90_000),
            ("1h2m3s4ms", 3_723_004),
            (".25s", 250),
        ] {
            assert_eq!(Dur::parse(text), Ok(Dur(ms)), "{text}");
        }
    }

    #[test]
    fn refuses_ambiguous_or_malformed() {
        for bad in [
            "", "30", "1.5", "s", "5d", "1s1m", "1s1s", "1.5m30s", "0.0001s", "1..5s", "-1s",
            "1 s", "9999h",
        ] {
            assert!(Dur::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn canonical_text_is_unique() {
        assert_eq!(Dur(90_000).to_string(), "90s");
        assert_eq!(Dur(1500).to_string(), "1500ms");
        assert_eq!(Dur(0).to_string(), "0s");
        for ms in [0, 1, 999, 1000, 1001, 60_000, 3_723_004] {
            assert_eq!(Dur::parse(&Dur(ms).to_string()), Ok(Dur(ms)));
        }
    }

    #[test]
    fn bare_numbers_other_than_zero_are_refused() {
        assert_eq!(
            serde_json::from_value::<Dur>(serde_json::json!(0)).ok(),
            Some(Dur(0))
        );
        assert!(serde_json::from_value::<Dur>(serde_json::json!(30)).is_err());
        assert!(serde_json::from_value::<Dur>(serde_json::json!(1.5)).is_err());
    }
}
