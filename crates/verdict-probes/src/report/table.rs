//! The table for people.

use crate::result::Report;
use std::fmt::Write as _;
use verdict_core::contracts::CheckOutcome;

/// The status word of an outcome, coloured when asked.
#[must_use]
pub fn status(o: CheckOutcome, color: bool) -> String {
    let (word, code) = match o {
        CheckOutcome::Pass => ("PASS", "32"),
        CheckOutcome::Fail => ("FAIL", "31"),
        CheckOutcome::Error => ("ERROR", "33"),
    };
    if color {
        format!("\x1b[{code}m{word:<6}\x1b[0m")
    } else {
        format!("{word:<6}")
    }
}

/// Observed text made safe to write to a terminal, on one line: every control character (C0
/// with newline and tab, DEL, C1) and every invisible or bidirectional format character is
/// shown as `[U+XXXX]`. A reason quotes what the system printed, and an escape sequence in it
/// could otherwise rewrite the screen (erase an ERROR row and draw PASS in its place).
#[must_use]
pub fn terminal_text(text: &str) -> std::borrow::Cow<'_, str> {
    use verdict_core::contracts::primitives::is_invisible;
    if !text.chars().any(is_invisible) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            let _ = write!(out, "[U+{:04X}]", u32::from(c));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Seconds with one decimal.
#[must_use]
pub fn secs(ms: u64) -> String {
    format!("{:.1}s", ms as f64 / 1000.0)
}

/// Renders the table.
#[must_use]
pub fn render(report: &Report, color: bool) -> String {
    let idw = report
        .criteria
        .iter()
        .map(|r| r.id.as_str().len())
        .max()
        .unwrap_or(9)
        .max(9);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<6}  {:<idw$}  {:<12}  {:<9}  {:>7}  REASON",
        "STATUS", "CRITERION", "ROLE", "MODE", "TIME"
    );
    for r in &report.criteria {
        let role = format!("{:?}", r.role).to_lowercase() + if r.required { "" } else { "?" };
        let _ = writeln!(
            s,
            "{}  {:<idw$}  {:<12}  {:<9}  {:>7}  {}",
            status(r.outcome, color),
            terminal_text(r.id.as_str()),
            role,
            r.mode.as_str(),
            secs(r.duration_ms),
            terminal_text(&r.reason)
        );
    }
    let c = &report.rollup.counts;
    let _ = writeln!(
        s,
        "\n{} criteria: {} pass, {} fail, {} error ({} optional, marked ?); c={} rec_v={} cat_v={}",
        c.total,
        c.pass,
        c.fail,
        c.error,
        c.unscored,
        super::score(report.rollup.c),
        super::score(report.rollup.rec_v),
        super::score(report.rollup.cat_v)
    );
    if let Some(a) = &report.agent {
        let how = a.exit_code.map_or_else(
            || a.note.clone().unwrap_or_default(),
            |c| format!("exit code {c}"),
        );
        let _ = writeln!(
            s,
            "agent: {} ({})",
            terminal_text(&a.argv.join(" ")),
            terminal_text(&how)
        );
    }
    if report.interrupted {
        let _ = writeln!(s, "the run was stopped before every criterion finished");
    }
    let verdict = if report.passed {
        "every required criterion passed"
    } else if report.criteria.iter().any(|c| c.required) {
        "NOT every required criterion passed"
    } else {
        // Nothing required proves nothing: the run does not pass on optional criteria alone.
        "NOT passed: no criterion is required, and optional criteria alone prove nothing"
    };
    let _ = writeln!(s, "{verdict}");
    s
}
