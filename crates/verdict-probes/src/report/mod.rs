//! Output formats of a run: a table for people, JSON, JUnit XML for CI systems, and TAP.

pub mod junit;
pub mod table;
pub mod tap;

use crate::result::Report;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// The report as JSON (`verdict.check-report/v1`).
    Json,
    /// JUnit XML.
    Junit,
    /// TAP version 14.
    Tap,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "table" => Ok(Self::Table),
            "json" => Ok(Self::Json),
            "junit" => Ok(Self::Junit),
            "tap" => Ok(Self::Tap),
            other => Err(format!(
                "unknown format {other:?} (expected table, json, junit or tap)"
            )),
        }
    }
}

/// Renders `report` in `format`; `color` applies to the table only.
#[must_use]
pub fn render(report: &Report, format: Format, color: bool) -> String {
    match format {
        Format::Table => table::render(report, color),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)
                .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
            s.push('\n');
            s
        }
        Format::Junit => junit::render(report),
        Format::Tap => tap::render(report),
    }
}

/// A score for display: two decimals, or `null`.
#[must_use]
pub fn score(v: Option<f64>) -> String {
    v.map_or_else(|| "null".to_owned(), |x| format!("{x:.2}"))
}
