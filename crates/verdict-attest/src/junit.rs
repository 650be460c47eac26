//! JUnit XML of a subject's check evidence, for CI systems that read test reports.
//!
//! One test case per check evidence (`pass`: passed; `fail`: a failure; `error`: an error, since
//! the check could not observe), and one error case per check the subject pins that has no
//! evidence at all, so a missing check is never read as a quiet success.

use crate::error::AttestError;
use crate::statement::Clock;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use verdict_core::contracts::{CheckEvidence, CheckOutcome, Subject, decode};
use verdict_core::digest::DigestKind;

/// Text made safe for XML 1.0 attribute values and character data: markup characters are
/// escaped and characters XML cannot carry at all are replaced with U+FFFD.
#[must_use]
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            c if u32::from(c) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => {
                out.push('\u{FFFD}');
            }
            c => out.push(c),
        }
    }
    out
}

/// The JUnit report of `subject`'s check evidence, from a store keeping `clock`. Evidence
/// about another subject is refused.
pub fn junit(subject_doc: &Value, evidence: &[Value], clock: Clock) -> Result<String, AttestError> {
    let (subject, subject_digest): (Subject, _) = decode(DigestKind::Subject, subject_doc)
        .map_err(|e| AttestError::Input(format!("subject: {e}")))?;
    let mut cases = String::new();
    let (mut failures, mut errors) = (0usize, 0usize);
    let mut seen = BTreeSet::new();
    for (i, doc) in evidence.iter().enumerate() {
        let (e, _): (CheckEvidence, _) = decode(DigestKind::Evidence, doc)
            .map_err(|err| AttestError::Input(format!("evidence {i}: {err}")))?;
        if e.subject_digest != subject_digest {
            return Err(AttestError::Input(format!(
                "evidence {} is about subject {}, not {subject_digest}",
                e.id, e.subject_digest
            )));
        }
        seen.insert(e.check.to_string());
        let detail = format!(
            "evidence {} by {} ({}) observed at {}; hard: {}; content {}",
            e.id,
            e.produced_by.principal,
            e.produced_by.role.as_str(),
            e.observed_at.as_str(),
            e.hard,
            e.content_digest
        );
        let _ = writeln!(
            cases,
            "    <testcase classname=\"verdict.check\" name=\"{} [{}]\">",
            escape(e.check.as_str()),
            escape(e.id.as_str())
        );
        match e.outcome {
            CheckOutcome::Pass => {
                let _ = writeln!(cases, "      <system-out>{}</system-out>", escape(&detail));
            }
            CheckOutcome::Fail => {
                failures += 1;
                let _ = writeln!(
                    cases,
                    "      <failure type=\"fail\" message=\"the check's expectation did not hold\">{}</failure>",
                    escape(&detail)
                );
            }
            CheckOutcome::Error => {
                errors += 1;
                let _ = writeln!(
                    cases,
                    "      <error type=\"error\" message=\"the check could not observe\">{}</error>",
                    escape(&detail)
                );
            }
        }
        cases.push_str("    </testcase>\n");
    }
    let mut tests = evidence.len();
    for pin in &subject.checks {
        if seen.contains(pin.id.as_str()) {
            continue;
        }
        tests += 1;
        errors += 1;
        let _ = writeln!(
            cases,
            "    <testcase classname=\"verdict.check\" name=\"{}\">\n      <error type=\"evidence_missing\" message=\"no check evidence for this pinned check\"/>\n    </testcase>",
            escape(pin.id.as_str())
        );
    }
    let name = escape(&format!(
        "{} generation {} ({subject_digest})",
        subject.execution.id, subject.execution.generation
    ));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"verdict\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\">"
    );
    let _ = writeln!(
        out,
        "    <properties>\n      <property name=\"subject_digest\" value=\"{}\"/>\n      <property name=\"execution\" value=\"{}\"/>\n      <property name=\"clock\" value=\"{}\"/>\n    </properties>",
        escape(subject_digest.as_str()),
        escape(subject.execution.id.as_str()),
        clock.as_str()
    );
    out.push_str(&cases);
    out.push_str("  </testsuite>\n</testsuites>\n");
    Ok(out)
}
