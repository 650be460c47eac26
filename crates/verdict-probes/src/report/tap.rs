//! TAP version 14: one test point per criterion, with a YAML diagnostic block.
//!
//! An optional criterion that did not pass carries a `# TODO` directive, so TAP consumers show
//! it without counting it against the run, just as the exit status does not.

use crate::result::Report;
use std::fmt::Write as _;
use verdict_core::contracts::CheckOutcome;

fn q(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

fn desc(s: &str) -> String {
    // `#` starts a directive in a description; keep it out.
    s.replace('#', "\\#")
}

/// Renders TAP.
#[must_use]
pub fn render(report: &Report) -> String {
    let mut s = String::from("TAP version 14\n");
    let _ = writeln!(s, "1..{}", report.criteria.len());
    for (i, r) in report.criteria.iter().enumerate() {
        let ok = if r.outcome == CheckOutcome::Pass {
            "ok"
        } else {
            "not ok"
        };
        let todo = if !r.required && r.outcome != CheckOutcome::Pass {
            " # TODO optional criterion"
        } else {
            ""
        };
        let _ = writeln!(s, "{ok} {} - {}{todo}", i + 1, desc(r.id.as_str()));
        let _ = writeln!(s, "  ---");
        let _ = writeln!(s, "  outcome: {}", r.outcome.as_str());
        let _ = writeln!(s, "  reason: {}", q(&r.reason));
        let _ = writeln!(s, "  role: {}", format!("{:?}", r.role).to_lowercase());
        let _ = writeln!(s, "  mode: {}", r.mode.as_str());
        let _ = writeln!(s, "  required: {}", r.required);
        let _ = writeln!(s, "  samples: {}", r.samples);
        let _ = writeln!(s, "  duration_ms: {}", r.duration_ms);
        let _ = writeln!(
            s,
            "  definition_digest: {}",
            q(r.definition_digest.as_str())
        );
        if let Some(ch) = &r.changes
            && !ch.is_empty()
        {
            let _ = writeln!(s, "  changed:");
            for c in ch {
                let _ = writeln!(s, "    - {}", q(&c.path));
            }
        }
        let _ = writeln!(s, "  ...");
    }
    let c = &report.rollup.counts;
    let _ = writeln!(
        s,
        "# {} pass, {} fail, {} error; c={} rec_v={} cat_v={}",
        c.pass,
        c.fail,
        c.error,
        super::score(report.rollup.c),
        super::score(report.rollup.rec_v),
        super::score(report.rollup.cat_v)
    );
    s
}
