//! The request file: a [`JudgeRequest`] written as a document, with content inline or in files
//! next to it. Used by `verdict judge render` so anyone can see exactly what a model would be
//! shown for a request.
//!
//! ```json
//! {
//!   "schema": "verdict.judge-request/v1",
//!   "result_id": "vr-1",
//!   "verifier": {"principal": "reviewer-1", "class": "reviewer", "run": "vrun-1"},
//!   "subject_digest": "sha256:…",
//!   "generation": 3,
//!   "objective": {"revision": "obj-r4", "text": "Retry failed payments once"},
//!   "criteria": {"revision": "crit-r4", "items": [{"id": "tests-pass", "text": "All unit tests pass"}]},
//!   "resources": [{"name": "diff", "kind": "git_diff", "file": "change.diff"}],
//!   "evidence": [{"document": {…check evidence…}, "output_file": "unit.log"}],
//!   "prior_findings": [],
//!   "evidence_refs_waived": []
//! }
//! ```
//!
//! A resource's `digest` may be omitted, and is then computed from its content; when given, it
//! must match.

use crate::request::{
    EvidenceInput, JudgeRequest, ObjectiveInput, ResourceInput, VerifierIdentity,
};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use verdict_core::contracts::{CheckEvidence, Criteria, Finding, Id, Name};
use verdict_core::digest::{self, Digest};

/// Why a request file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestFileError {
    /// A file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// Which file.
        path: String,
        /// Why.
        message: String,
    },
    /// The document is not strict JSON or breaks the request schema.
    #[error("{path}: {message}")]
    Parse {
        /// Which file.
        path: String,
        /// What and where.
        message: String,
    },
    /// An item gives both or neither of inline text and a file.
    #[error("{what}: give exactly one of `{inline}` and `{file}`")]
    Content {
        /// Which item.
        what: String,
        /// The inline field.
        inline: &'static str,
        /// The file field.
        file: &'static str,
    },
    /// A stated digest does not match the content.
    #[error("{what}: content hashes to {actual}, not the stated {stated}")]
    Digest {
        /// Which item.
        what: String,
        /// Stated.
        stated: Digest,
        /// Computed.
        actual: Digest,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
enum Schema {
    #[serde(rename = "verdict.judge-request/v1")]
    V1,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ObjectiveDoc {
    revision: Name,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    file: Option<PathBuf>,
    #[serde(default)]
    digest: Option<Digest>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResourceDoc {
    name: Name,
    kind: Name,
    #[serde(default)]
    digest: Option<Digest>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    file: Option<PathBuf>,
    #[serde(default = "yes")]
    required: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EvidenceDoc {
    document: CheckEvidence,
    #[serde(default)]
    output_text: Option<String>,
    #[serde(default)]
    output_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestDoc {
    #[allow(dead_code, reason = "checked by decoding")]
    schema: Schema,
    result_id: Id,
    verifier: VerifierIdentity,
    subject_digest: Digest,
    generation: u64,
    objective: ObjectiveDoc,
    criteria: Criteria,
    #[serde(default)]
    ask: Option<Vec<Id>>,
    #[serde(default)]
    resources: Vec<ResourceDoc>,
    #[serde(default)]
    evidence: Vec<EvidenceDoc>,
    #[serde(default)]
    prior_findings: Vec<Finding>,
    #[serde(default)]
    evidence_refs_waived: Vec<Id>,
}

fn read(path: &Path) -> Result<Vec<u8>, RequestFileError> {
    std::fs::read(path).map_err(|e| RequestFileError::Read {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

fn content(
    what: &str,
    inline: Option<String>,
    file: Option<PathBuf>,
    names: (&'static str, &'static str),
    base: &Path,
) -> Result<Option<Vec<u8>>, RequestFileError> {
    match (inline, file) {
        (Some(t), None) => Ok(Some(t.into_bytes())),
        (None, Some(f)) => read(&base.join(f)).map(Some),
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(RequestFileError::Content {
            what: what.to_owned(),
            inline: names.0,
            file: names.1,
        }),
    }
}

/// Reads a request file; relative content files are resolved against the file's directory.
pub fn load(path: &Path) -> Result<JudgeRequest, RequestFileError> {
    let bytes = read(path)?;
    let base = path.parent().unwrap_or_else(|| Path::new("."));
    parse(&bytes, &path.display().to_string(), base)
}

/// Parses request file content; `origin` names it in errors, `base` resolves content files.
pub fn parse(bytes: &[u8], origin: &str, base: &Path) -> Result<JudgeRequest, RequestFileError> {
    let perr = |message: String| RequestFileError::Parse {
        path: origin.to_owned(),
        message,
    };
    let value = verdict_core::json::parse(bytes).map_err(|e| perr(e.to_string()))?;
    let doc: RequestDoc =
        verdict_core::contracts::decode_plain(&value).map_err(|e| perr(e.to_string()))?;

    let text_bytes = content(
        "objective",
        doc.objective.text,
        doc.objective.file,
        ("text", "file"),
        base,
    )?
    .ok_or_else(|| RequestFileError::Content {
        what: "objective".into(),
        inline: "text",
        file: "file",
    })?;
    let text =
        String::from_utf8(text_bytes).map_err(|_| perr("the objective is not utf-8".into()))?;

    let mut resources = Vec::new();
    for r in doc.resources {
        let what = format!("resource {:?}", r.name.as_str());
        let bytes = content(&what, r.text, r.file, ("text", "file"), base)?.ok_or_else(|| {
            RequestFileError::Content {
                what: what.clone(),
                inline: "text",
                file: "file",
            }
        })?;
        let actual = digest::raw(&bytes);
        if let Some(stated) = r.digest
            && stated != actual
        {
            return Err(RequestFileError::Digest {
                what,
                stated,
                actual,
            });
        }
        resources.push(ResourceInput {
            name: r.name,
            kind: r.kind,
            digest: actual,
            content: bytes,
            required: r.required,
        });
    }
    let mut evidence = Vec::new();
    for e in doc.evidence {
        let what = format!("evidence {:?}", e.document.id.as_str());
        let output = content(
            &what,
            e.output_text,
            e.output_file,
            ("output_text", "output_file"),
            base,
        )?;
        evidence.push(EvidenceInput {
            document: e.document,
            output,
        });
    }
    Ok(JudgeRequest {
        result_id: doc.result_id,
        verifier: doc.verifier,
        subject_digest: doc.subject_digest,
        generation: doc.generation,
        objective: ObjectiveInput {
            revision: doc.objective.revision,
            text,
            digest: doc.objective.digest,
        },
        criteria: doc.criteria,
        ask: doc.ask,
        resources,
        evidence,
        prior_findings: doc.prior_findings,
        evidence_refs_waived: doc.evidence_refs_waived,
    })
}
