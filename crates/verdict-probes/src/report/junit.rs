//! JUnit XML: one `testsuite` for the run, one `testcase` per criterion; `fail` is a
//! `<failure>`, `error` an `<error>` (CI systems show infrastructure errors apart).

use crate::result::Report;
use std::fmt::Write as _;
use verdict_core::contracts::CheckOutcome;

/// Escapes text for an XML attribute or element; characters XML 1.0 cannot hold become U+FFFD.
#[must_use]
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\t' | '\n' | '\r' => o.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => o.push('\u{fffd}'),
            c => o.push(c),
        }
    }
    o
}

fn secs(ms: u64) -> String {
    format!("{:.3}", ms as f64 / 1000.0)
}

/// Renders JUnit XML.
#[must_use]
pub fn render(report: &Report) -> String {
    let c = &report.rollup.counts;
    let time: u64 = report
        .criteria
        .iter()
        .map(|r| r.duration_ms)
        .max()
        .unwrap_or(0);
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"verdict check\" tests=\"{}\" failures=\"{}\" errors=\"{}\" time=\"{}\">",
        c.total,
        c.fail,
        c.error,
        secs(time)
    );
    let _ = writeln!(
        s,
        "  <testsuite name=\"verdict check\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"0\" time=\"{}\" timestamp=\"{}\">",
        c.total,
        c.fail,
        c.error,
        secs(time),
        esc(&report.started_at)
    );
    let _ = writeln!(s, "    <properties>");
    for (k, v) in [
        ("spec_digest", report.spec_digest.to_string()),
        ("c", super::score(report.rollup.c)),
        ("rec_v", super::score(report.rollup.rec_v)),
        ("cat_v", super::score(report.rollup.cat_v)),
        ("passed", report.passed.to_string()),
    ] {
        let _ = writeln!(s, "      <property name=\"{k}\" value=\"{}\"/>", esc(&v));
    }
    let _ = writeln!(s, "    </properties>");
    for r in &report.criteria {
        let role = format!("{:?}", r.role).to_lowercase();
        let class = format!(
            "verdict.{role}.{}{}",
            r.mode.as_str(),
            if r.required { "" } else { ".optional" }
        );
        let _ = write!(
            s,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
            esc(r.id.as_str()),
            esc(&class),
            secs(r.duration_ms)
        );
        let detail = serde_json::to_string_pretty(&r.observations).unwrap_or_default();
        match r.outcome {
            CheckOutcome::Pass => {
                let _ = writeln!(s, ">");
            }
            CheckOutcome::Fail => {
                let _ = writeln!(s, ">");
                let _ = writeln!(
                    s,
                    "      <failure message=\"{}\" type=\"fail\">{}</failure>",
                    esc(&r.reason),
                    esc(&detail)
                );
            }
            CheckOutcome::Error => {
                let _ = writeln!(s, ">");
                let _ = writeln!(
                    s,
                    "      <error message=\"{}\" type=\"error\">{}</error>",
                    esc(&r.reason),
                    esc(&detail)
                );
            }
        }
        let _ = writeln!(
            s,
            "      <system-out>{}</system-out>",
            esc(&format!(
                "{}\ndefinition_digest: {}\nsamples: {}",
                r.reason, r.definition_digest, r.samples
            ))
        );
        let _ = writeln!(s, "    </testcase>");
    }
    let _ = writeln!(s, "  </testsuite>");
    let _ = writeln!(s, "</testsuites>");
    s
}
