//! Check evidence (docs/spec/evidence.md): one document per criterion, bound to a subject.
//!
//! - `check` is the criterion id and `definition_digest` its normalised definition's digest,
//!   exactly what a subject pins in `checks[]`;
//! - `subject_digest` is `digest("subject", subject)`;
//! - `content_digest` is the raw SHA-256 of the canonical JSON of the criterion's kept
//!   observations (each holding the digest of its whole output);
//! - `observed_at` is when the criterion finished observing;
//! - `freshness` is `{kind: time, max_age_s}` (the criterion's `max_age`, default 15 minutes) for
//!   live observations, `{kind: content}` for a file probe that pins a SHA-256 and asserts
//!   nothing but the bytes;
//! - `id` is `ev-` and 32 hex digits of the SHA-256 of the canonical JSON of the fields above,
//!   so the same observation always gets the same id and different ones never share it;
//! - each document carries its own `digest` (`digest("evidence", doc)`), so tampering shows.

use crate::check::Check;
use crate::load::Spec;
use crate::result::{CriterionResult, Report};
use serde_json::{Value, json};
use std::path::Path;
use verdict_core::contracts::{
    CheckEvidence, EvidenceKind, Id, Name, ProducedBy, Role, Subject, Timestamp,
};
use verdict_core::digest::{Digest, DigestKind};

/// A subject read strictly, with its digest.
#[derive(Debug, Clone)]
pub struct BoundSubject {
    /// The subject.
    pub subject: Subject,
    /// `digest("subject", subject)`.
    pub digest: Digest,
}

/// Reads a subject document (strict JSON; a carried digest must match).
pub fn read_subject(bytes: &[u8]) -> Result<BoundSubject, String> {
    let v =
        verdict_core::json::parse(bytes).map_err(|e| format!("subject is not valid json: {e}"))?;
    let (subject, digest) = verdict_core::contracts::decode::<Subject>(DigestKind::Subject, &v)
        .map_err(|e| format!("invalid subject: {e}"))?;
    Ok(BoundSubject { subject, digest })
}

/// Compares the spec with what the subject pins. A pinned check whose definition differs is an
/// error (its evidence could never count); criteria the subject does not pin are returned, as
/// their evidence will be ignored by the Gate.
pub fn check_pins(subject: &Subject, spec: &Spec) -> Result<Vec<String>, String> {
    let mut unpinned = Vec::new();
    for c in &spec.checks {
        match subject.checks.iter().find(|p| p.id == c.id) {
            Some(pin) if pin.definition_digest != c.definition_digest => {
                return Err(format!(
                    "the subject pins check {} with definition {}, but this spec defines {} (check the spec and its --var values)",
                    c.id, pin.definition_digest, c.definition_digest
                ));
            }
            Some(_) => {}
            None => unpinned.push(c.id.to_string()),
        }
    }
    Ok(unpinned)
}

/// `content_digest`: raw SHA-256 of the canonical JSON of the kept observations.
pub fn content_digest(result: &CriterionResult) -> Result<Digest, String> {
    let v = serde_json::to_value(&result.observations)
        .map_err(|e| format!("cannot encode observations: {e}"))?;
    Ok(verdict_core::digest::raw(&verdict_core::canonical::to_vec(
        &v,
    )))
}

/// The evidence of one criterion's result.
pub fn evidence_for(
    result: &CriterionResult,
    check: &Check,
    subject_digest: &Digest,
    principal: &Name,
) -> Result<CheckEvidence, String> {
    let content = content_digest(result)?;
    let observed_at: Timestamp = result
        .finished_at
        .parse()
        .map_err(|e| format!("bad observation time {:?}: {e}", result.finished_at))?;
    let seed = json!({
        "check": check.id.as_str(),
        "subject_digest": subject_digest.as_str(),
        "definition_digest": check.definition_digest.as_str(),
        "content_digest": content.as_str(),
        "observed_at": observed_at.as_str(),
        "outcome": result.outcome.as_str(),
        "principal": principal.as_str(),
    });
    let hash = verdict_core::digest::raw(&verdict_core::canonical::to_vec(&seed));
    let hex = hash.as_str().trim_start_matches("sha256:");
    let id: Id = format!("ev-{}", hex.get(..32).unwrap_or(hex))
        .parse()
        .map_err(|e| format!("cannot form an evidence id: {e}"))?;
    Ok(CheckEvidence {
        id,
        kind: EvidenceKind::Check,
        check: check.id.clone(),
        subject_digest: subject_digest.clone(),
        definition_digest: check.definition_digest.clone(),
        produced_by: ProducedBy {
            principal: principal.clone(),
            role: Role::Runner,
        },
        outcome: result.outcome,
        hard: true,
        content_digest: content,
        observed_at,
        freshness: check.freshness(),
    })
}

/// Every criterion's evidence as JSON documents, each carrying its own digest.
pub fn evidence_documents(
    report: &Report,
    spec: &Spec,
    subject_digest: &Digest,
    principal: &Name,
) -> Result<Vec<Value>, String> {
    let mut out = Vec::with_capacity(report.criteria.len());
    for r in &report.criteria {
        let check = spec
            .checks
            .iter()
            .find(|c| c.id == r.id)
            .ok_or_else(|| format!("no criterion {} in the spec", r.id))?;
        let ev = evidence_for(r, check, subject_digest, principal)?;
        let mut v =
            serde_json::to_value(&ev).map_err(|e| format!("cannot encode evidence: {e}"))?;
        let d = verdict_core::digest::digest(DigestKind::Evidence, &v);
        if let Value::Object(m) = &mut v {
            m.insert("digest".into(), Value::String(d.to_string()));
        }
        out.push(v);
    }
    Ok(out)
}

/// Why [`write_atomic`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The destination exists and is not a regular file.
    #[error("{path} exists and is {what}, not a regular file; refusing to replace it")]
    NotRegular {
        /// The destination.
        path: String,
        /// What it is.
        what: &'static str,
    },
    /// Creating, writing or renaming failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Writes `bytes` to `path` all at once: a temporary file beside it, then a rename, so a reader
/// never sees half a file.
///
/// The directory may be writable by the program under test: the temporary file gets a random
/// name and is created exclusively (never opening a symlink, FIFO or file already there), and a
/// destination that is anything but a regular file is refused rather than replaced.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    use std::io::Write as _;
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            let t = meta.file_type();
            let what = if t.is_file() {
                None
            } else if t.is_symlink() {
                Some("a symlink")
            } else if t.is_dir() {
                Some("a directory")
            } else if t.is_fifo() {
                Some("a FIFO")
            } else if t.is_socket() {
                Some("a socket")
            } else {
                Some("a device")
            };
            if let Some(what) = what {
                return Err(WriteError::NotRegular {
                    path: path.display().to_string(),
                    what,
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Mode 0666 less the umask, as a plain create would give.
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o666))
        .tempfile_in(&dir)?;
    tmp.write_all(bytes)?;
    tmp.flush()?;
    // On failure the temporary file is removed when the error drops it.
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}
