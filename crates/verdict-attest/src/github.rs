//! A decision as GitHub check-run and commit-status request bodies, written to a file for
//! whatever posts them. Only `pass` is ever `success`, and only on a commit the decided subject
//! names; a decision that no longer applies, or no decision at all, asks for action instead.

use crate::error::AttestError;
use crate::statement::Clock;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use verdict_core::contracts::{GateDecision, Outcome, Subject};

/// The body of a check-run creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckRun {
    /// `verdict/<gate>`.
    pub name: String,
    /// The commit it is about.
    pub head_sha: String,
    /// Always `completed`.
    pub status: String,
    /// `success` only for an applicable pass.
    pub conclusion: String,
    /// The evaluation key, when there is a decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// Title, summary and details.
    pub output: CheckRunOutput,
}

/// What a check run shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CheckRunOutput {
    /// One line.
    pub title: String,
    /// The outcome and subject.
    pub summary: String,
    /// One line per reason.
    pub text: String,
}

/// The body of a commit-status creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CommitStatus {
    /// `success` only for an applicable pass.
    pub state: String,
    /// `verdict/<gate>`.
    pub context: String,
    /// At most 140 characters.
    pub description: String,
}

/// Both payloads, as written to the file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct GithubPayloads {
    /// The clock of the store that decided; on `manual` the title, summary and description
    /// say so too, since only these reach the people reading the check.
    pub clock: Clock,
    /// For `POST /repos/{owner}/{repo}/check-runs`.
    pub check_run: CheckRun,
    /// For `POST /repos/{owner}/{repo}/statuses/{sha}`.
    pub commit_status: CommitStatus,
}

/// The decision that applies now, or why none does.
#[derive(Debug, Clone, Copy)]
pub enum Applicable<'a> {
    /// This decision applies; it is about this subject.
    Decision(&'a GateDecision, &'a Subject),
    /// None applies; the text says why.
    None(&'a str),
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Whether `subject` names commit `sha`: a work item whose `version` is the SHA (hex, any
/// case), or, for a 64-digit SHA, a resource whose digest it is (a SHA-256 repository names an
/// object by the SHA-256 of its bytes). Nothing else ties a decision to a commit.
#[must_use]
pub fn names_commit(subject: &Subject, sha: &str) -> bool {
    subject
        .work_items
        .iter()
        .any(|w| w.version.as_str().eq_ignore_ascii_case(sha))
        || (sha.len() == 64
            && subject
                .resources
                .iter()
                .any(|r| r.digest.as_str().strip_prefix("sha256:") == Some(sha)))
}

/// What a manual-clock store's payloads say first, in the title and the summary.
pub const MANUAL_CLOCK_NOTE: &str = "manual clock: the time was chosen by the caller";

/// The payloads for `gate` about commit `head_sha` (40 or 64 lowercase hex digits), from a
/// store keeping `clock`.
pub fn payloads(
    gate: &str,
    head_sha: &str,
    applicable: Applicable<'_>,
    clock: Clock,
) -> Result<GithubPayloads, AttestError> {
    if !matches!(head_sha.len(), 40 | 64)
        || !head_sha
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return Err(AttestError::Input(format!(
            "head sha {head_sha:?} is not 40 or 64 lowercase hex digits"
        )));
    }
    let name = format!("verdict/{gate}");
    let (conclusion, state, title, summary, text, external_id) = match applicable {
        // A decision is about the commit its subject names and no other: posting it on another
        // commit would let a pass float to code nobody verified.
        Applicable::Decision(d, subject) if !names_commit(subject, head_sha) => {
            let about = d.subject_digest.as_ref().map_or("(none)", |s| s.as_str());
            let why = format!(
                "Gate {gate} decided {} for subject {about}, which does not name commit {head_sha} (no work item's version, and no resource's digest, is it); nothing was decided about this commit.",
                d.outcome.as_str()
            );
            (
                "failure",
                "failure",
                "verdict: this commit was not decided".to_owned(),
                why.clone(),
                why,
                None,
            )
        }
        Applicable::Decision(d, _) => {
            let (conclusion, state) = match d.outcome {
                Outcome::Pass => ("success", "success"),
                Outcome::Rework => ("failure", "failure"),
                Outcome::HumanRequired => ("action_required", "pending"),
                Outcome::Blocked => ("failure", "error"),
            };
            let subject = d.subject_digest.as_ref().map_or("(none)", |s| s.as_str());
            let text: Vec<String> = d
                .reasons
                .iter()
                .map(|r| {
                    format!(
                        "- {} ({}): {}",
                        r.code.as_str(),
                        r.outcome.as_str(),
                        r.detail
                    )
                })
                .collect();
            (
                conclusion,
                state,
                format!("verdict: {}", d.outcome.as_str()),
                format!(
                    "Gate {gate} decided {} for subject {subject}.",
                    d.outcome.as_str()
                ),
                if text.is_empty() {
                    "No reasons.".to_owned()
                } else {
                    text.join("\n")
                },
                d.evaluation_key.as_ref().map(|k| k.to_string()),
            )
        }
        Applicable::None(why) => (
            "action_required",
            "pending",
            "verdict: no applicable decision".to_owned(),
            format!("Gate {gate} has no decision that applies now: {why}."),
            why.to_owned(),
            None,
        ),
    };
    // A simulated time never reads as a real decision on the commit: the note comes first in
    // the title (and so the status description), where a shortened text still keeps it.
    let (title, summary) = match clock {
        Clock::System => (title, summary),
        Clock::Manual => (
            format!("[{MANUAL_CLOCK_NOTE}] {title}"),
            format!(
                "This store keeps a {MANUAL_CLOCK_NOTE}; nothing here was decided at a real time. {summary}"
            ),
        ),
    };
    Ok(GithubPayloads {
        clock,
        check_run: CheckRun {
            name: name.clone(),
            head_sha: head_sha.to_owned(),
            status: "completed".to_owned(),
            conclusion: conclusion.to_owned(),
            external_id,
            output: CheckRunOutput {
                title: title.clone(),
                summary,
                text,
            },
        },
        commit_status: CommitStatus {
            state: state.to_owned(),
            context: name,
            description: shorten(&title, 140),
        },
    })
}
