//! JUnit XML of a subject's check evidence, for CI systems that read test reports.
//!
//! One test case per check evidence the Gate counts (`pass`: passed; `fail`: a failure; `error`:
//! an error, since the check could not observe); evidence it does not count (the producer's own,
//! a role the policy does not take, another definition, stale or future-dated) is a skipped case
//! with the reason, never a result. One error case per check the subject pins that has no
//! counted evidence, so a missing check is never read as a quiet success, and one case for the
//! decision that applies, which fails unless it is a pass: the suite is never all green while
//! the Gate says otherwise.

use crate::error::AttestError;
use crate::github::Applicable;
use crate::statement::Clock;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use verdict_core::contracts::{CheckEvidence, CheckOutcome, Outcome, Subject, decode};
use verdict_core::digest::DigestKind;
use verdict_core::gate::Prepared;

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

/// Why the Gate does not count `e`: the reasons of `decision` about its check that name it, or,
/// where the Gate sets evidence aside without a reason, what it was.
fn not_counted(e: &CheckEvidence, decision: &verdict_core::contracts::GateDecision) -> String {
    let quoted = format!("{:?}", e.id.as_str());
    let named: Vec<String> = decision
        .reasons
        .iter()
        .filter(|r| r.check.as_ref() == Some(&e.check) && r.detail.contains(&quoted))
        .map(|r| format!("{}: {}", r.code.as_str(), r.detail))
        .collect();
    if named.is_empty() {
        format!(
            "not counted: the policy does not take this check's evidence from a {} (or the subject does not pin it)",
            e.produced_by.role.as_str()
        )
    } else {
        format!("not counted: {}", named.join("; "))
    }
}

/// The JUnit report of the check evidence in `bundle` (an execution's current subject, its
/// gate's policy and what is stored about the subject, at the store's `now`), counted as the
/// Gate counts it, with `applicable` (the decision that applies, or why none does) as a case of
/// its own, from a store keeping `clock`. Evidence about another subject is refused.
pub fn junit(
    bundle: &Value,
    applicable: Applicable<'_>,
    clock: Clock,
) -> Result<String, AttestError> {
    let subject_doc = bundle
        .get("subject")
        .ok_or_else(|| AttestError::Input("the bundle has no subject".into()))?;
    let (subject, subject_digest): (Subject, _) = decode(DigestKind::Subject, subject_doc)
        .map_err(|e| AttestError::Input(format!("subject: {e}")))?;
    let evidence = bundle
        .get("evidence")
        .and_then(Value::as_array)
        .ok_or_else(|| AttestError::Input("the bundle has no evidence list".into()))?;
    let prepared = Prepared::new(bundle).map_err(|d| {
        let why: Vec<String> = d.reasons.iter().map(|r| r.detail.clone()).collect();
        AttestError::Input(format!(
            "the Gate cannot evaluate the bundle: {}",
            why.join("; ")
        ))
    })?;
    let counted = prepared.counted_evidence();
    let fresh = prepared.decide();
    let mut cases = String::new();
    let (mut failures, mut errors, mut skipped) = (0usize, 0usize, 0usize);
    let mut seen = BTreeSet::new();
    for (i, doc) in evidence.iter().enumerate() {
        let (e, digest): (CheckEvidence, _) = decode(DigestKind::Evidence, doc)
            .map_err(|err| AttestError::Input(format!("evidence {i}: {err}")))?;
        if e.subject_digest != subject_digest {
            return Err(AttestError::Input(format!(
                "evidence {} is about subject {}, not {subject_digest}",
                e.id, e.subject_digest
            )));
        }
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
        if !counted.contains(&digest) {
            // What the Gate did not count is no result, passing or failing.
            skipped += 1;
            let _ = writeln!(
                cases,
                "      <skipped message=\"{}\"/>\n      <system-out>{}</system-out>",
                escape(&not_counted(&e, &fresh)),
                escape(&detail)
            );
            cases.push_str("    </testcase>\n");
            continue;
        }
        seen.insert(e.check.to_string());
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
            "    <testcase classname=\"verdict.check\" name=\"{}\">\n      <error type=\"evidence_missing\" message=\"no counted check evidence for this pinned check\"/>\n    </testcase>",
            escape(pin.id.as_str())
        );
    }
    // The decision itself is a case: whatever the checks say, the suite fails unless the Gate's
    // applicable decision is a pass.
    tests += 1;
    let _ = writeln!(
        cases,
        "    <testcase classname=\"verdict.gate\" name=\"decision\">"
    );
    match applicable {
        Applicable::Decision(d, _) if d.outcome == Outcome::Pass => {
            let _ = writeln!(
                cases,
                "      <system-out>{}</system-out>",
                escape(&format!(
                    "pass; evaluation key {}",
                    d.evaluation_key.as_ref().map_or("(none)", |k| k.as_str())
                ))
            );
        }
        Applicable::Decision(d, _) => {
            failures += 1;
            let reasons: Vec<String> = d
                .reasons
                .iter()
                .map(|r| format!("{} ({}): {}", r.code.as_str(), r.outcome.as_str(), r.detail))
                .collect();
            let _ = writeln!(
                cases,
                "      <failure type=\"{}\" message=\"the gate decided {}\">{}</failure>",
                escape(d.outcome.as_str()),
                escape(d.outcome.as_str()),
                escape(&reasons.join("\n"))
            );
        }
        Applicable::None(why) => {
            failures += 1;
            let _ = writeln!(
                cases,
                "      <failure type=\"no_decision\" message=\"no decision applies\">{}</failure>",
                escape(why)
            );
        }
    }
    cases.push_str("    </testcase>\n");
    let name = escape(&format!(
        "{} generation {} ({subject_digest})",
        subject.execution.id, subject.execution.generation
    ));
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"verdict\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">"
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
