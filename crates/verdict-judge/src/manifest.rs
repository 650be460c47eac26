//! The context manifest: exactly what a model verifier is shown, built under a token budget.
//!
//! Items are taken in a fixed order (objective, resources, evidence documents, evidence
//! outputs, prior findings). Required items are placed first and only whole; if one cannot fit,
//! the plan is incomplete and the run must end `context_incomplete` rather than grade what it
//! did not see. Optional items (resources marked optional, check outputs) are then placed in
//! order: whole if they fit, else as a prefix cut at a line end if at least
//! [`MIN_EXCERPT_BYTES`] of room is left, else excluded. The run still goes ahead when an
//! optional item is cut or excluded, or a producer-history item is withheld, but the context is
//! then recorded as incomplete, so none of its passes counts as one. The same request, template
//! and budget always give the same manifest and digest.

use crate::render::{self, DataBlock, EntryKind, Frame, Nonce, Prompt};
use crate::request::{CRITERIA_REF, JudgeRequest, OBJECTIVE_REF, output_ref};
use crate::sanitize::{self, fit_prefix, sanitized_len};
use crate::tokens;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;
use verdict_core::contracts::{Id, Name};
use verdict_core::digest::{self, Digest, DigestKind};

/// The revision of the construction rules implemented here; recorded in every manifest.
pub const CONSTRUCTION_REVISION: &str = "verdict.context-construction/1";
/// How tokens are estimated; recorded in every manifest.
pub const TOKEN_ESTIMATE: &str = "ceil(utf8_bytes/4)";
/// An optional item is only excerpted when at least this many bytes of room are left.
pub const MIN_EXCERPT_BYTES: usize = 256;

/// Resource kinds that carry the producer's reasoning or task history. They are never shown to
/// a verifier, whatever the request says (compared ASCII case-insensitively). The kind is the
/// producer's own label, so withholding such an item makes the context incomplete: labelling
/// the change a transcript hides it from the model and also takes away every pass.
pub const PRODUCER_HISTORY_KINDS: [&str; 9] = [
    "transcript",
    "reasoning",
    "chain_of_thought",
    "task_history",
    "conversation",
    "chat_log",
    "producer_transcript",
    "agent_transcript",
    "scratchpad",
];

/// The schema tag of a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ManifestSchema {
    /// Version 1.
    #[serde(rename = "verdict.context-manifest/v1")]
    V1,
}

/// How the manifest was built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Construction {
    /// [`CONSTRUCTION_REVISION`].
    pub revision: String,
    /// [`TOKEN_ESTIMATE`].
    pub token_estimate: String,
    /// The budget the prompt had to fit.
    pub budget_tokens: u64,
    /// The estimate of the rendered prompt (system and user messages).
    pub estimated_tokens: u64,
}

/// The asked criteria.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestCriteria {
    /// The criteria revision.
    pub revision: Name,
    /// The ids asked, in the subject's order.
    pub asked: Vec<Id>,
}

/// A prior blocking finding, by id and version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingKey {
    /// Finding id.
    pub id: Id,
    /// Finding version.
    pub version: u64,
}

/// One item shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestEntry {
    /// The ref it is shown under.
    #[serde(rename = "ref")]
    pub ref_: String,
    /// What it is.
    pub kind: EntryKind,
    /// For resources, the resource kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_kind: Option<String>,
    /// Digest of the whole item (raw SHA-256 for bytes, the contract digest for documents).
    pub digest: Digest,
    /// Size of the whole item.
    pub bytes_total: u64,
    /// How many of its bytes were shown.
    pub bytes_included: u64,
    /// Whether only a prefix was shown.
    pub truncated: bool,
    /// Whether the run needed all of it.
    pub required: bool,
}

/// Why an item was not shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReason {
    /// An optional item that did not fit the budget; the context is incomplete.
    Budget,
    /// A required item that did not fit: the context is incomplete.
    RequiredDidNotFit,
    /// Producer reasoning or task history, never shown by policy; the context is incomplete.
    ProducerHistory,
}

/// An item that was not shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Exclusion {
    /// Its ref.
    #[serde(rename = "ref")]
    pub ref_: String,
    /// What it is.
    pub kind: EntryKind,
    /// Digest of the item.
    pub digest: Digest,
    /// Its size.
    pub bytes_total: u64,
    /// Why it was left out.
    pub reason: ExclusionReason,
}

/// The context manifest stored with a run; its digest is `digest("context", manifest)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextManifest {
    /// `verdict.context-manifest/v1`.
    pub schema: ManifestSchema,
    /// How it was built.
    pub construction: Construction,
    /// The subject.
    pub subject_digest: Digest,
    /// The generation the run was admitted for.
    pub generation: u64,
    /// The verifier class.
    pub verifier_class: Id,
    /// Digest (raw SHA-256) of the class instructions the prompt carries.
    pub template_digest: Digest,
    /// The result schema version the reply must follow.
    pub result_schema: String,
    /// The asked criteria.
    pub criteria: ManifestCriteria,
    /// Prior blockers to disposition.
    pub prior_findings: Vec<FindingKey>,
    /// What was shown, in the order shown.
    pub entries: Vec<ManifestEntry>,
    /// What was not.
    pub exclusions: Vec<Exclusion>,
    /// Whether every item of the request was shown whole: none excluded (by kind or budget)
    /// and none cut to an excerpt.
    pub complete: bool,
}

impl ContextManifest {
    /// The manifest as JSON.
    #[must_use]
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// `digest("context", manifest)`.
    #[must_use]
    pub fn digest(&self) -> Digest {
        digest::digest(DigestKind::Context, &self.to_value())
    }

    /// Refs a reply may cite: shown entries whose kind the gate bundle knows.
    pub fn citable_refs(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.entries.iter().filter(|e| e.kind.citable())
    }
}

/// The class-specific inputs of a plan.
#[derive(Debug, Clone)]
pub struct PlanInput<'a> {
    /// The class instructions (trusted, from the verifiers file).
    pub template: &'a str,
    /// The result schema, as sent.
    pub schema: &'a Value,
    /// The result schema's version tag.
    pub schema_version: &'a str,
    /// The budget the prompt must fit.
    pub budget_tokens: u64,
}

/// A built context: the manifest and the blocks it describes, ready to render per call.
#[derive(Debug, Clone)]
pub struct ContextPlan {
    /// The manifest.
    pub manifest: ContextManifest,
    /// Its digest.
    pub digest: Digest,
    /// Why the context is incomplete, when it is.
    pub incomplete: Option<String>,
    frame: Frame,
    blocks: Vec<DataBlock>,
}

impl ContextPlan {
    /// Renders the prompt for one call with `nonce`.
    #[must_use]
    pub fn render(&self, nonce: &Nonce) -> Prompt {
        render::render(&self.frame, &self.blocks, nonce)
    }

    /// Whether the nonce occurs in any data (it cannot be guessed, but a repeat draw is cheap).
    #[must_use]
    pub fn data_contains(&self, nonce: &Nonce) -> bool {
        self.blocks.iter().any(|b| b.body.contains(nonce.as_str()))
    }
}

struct Candidate<'a> {
    ref_: String,
    kind: EntryKind,
    resource_kind: Option<String>,
    digest: Digest,
    bytes: Cow<'a, [u8]>,
    required: bool,
    excluded_by_policy: bool,
}

impl Candidate<'_> {
    fn block(&self, truncated: bool, body: String) -> DataBlock {
        DataBlock {
            ref_: self.ref_.clone(),
            kind: self.kind,
            resource_kind: self.resource_kind.clone(),
            truncated,
            body,
        }
    }
}

fn pretty(v: &Value) -> Vec<u8> {
    serde_json::to_vec_pretty(v).unwrap_or_default()
}

fn len64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn candidates(req: &JudgeRequest) -> Vec<Candidate<'_>> {
    let mut out = Vec::new();
    out.push(Candidate {
        ref_: OBJECTIVE_REF.to_owned(),
        kind: EntryKind::Objective,
        resource_kind: None,
        digest: digest::raw(req.objective.text.as_bytes()),
        bytes: Cow::Borrowed(req.objective.text.as_bytes()),
        required: true,
        excluded_by_policy: false,
    });
    for r in &req.resources {
        let history = PRODUCER_HISTORY_KINDS
            .iter()
            .any(|k| k.eq_ignore_ascii_case(r.kind.as_str()));
        out.push(Candidate {
            ref_: r.name.to_string(),
            kind: EntryKind::Resource,
            resource_kind: Some(r.kind.to_string()),
            digest: r.digest.clone(),
            bytes: Cow::Borrowed(&r.content),
            required: r.required,
            excluded_by_policy: history,
        });
    }
    for e in &req.evidence {
        let v = serde_json::to_value(&e.document).unwrap_or(Value::Null);
        out.push(Candidate {
            ref_: e.document.id.to_string(),
            kind: EntryKind::CheckEvidence,
            resource_kind: None,
            digest: digest::digest(DigestKind::Evidence, &v),
            bytes: Cow::Owned(pretty(&v)),
            required: true,
            excluded_by_policy: false,
        });
    }
    for e in &req.evidence {
        if let Some(output) = &e.output {
            out.push(Candidate {
                ref_: output_ref(&e.document.id),
                kind: EntryKind::CheckOutput,
                resource_kind: None,
                digest: digest::raw(output),
                bytes: Cow::Borrowed(output),
                required: false,
                excluded_by_policy: false,
            });
        }
    }
    for f in &req.prior_findings {
        let v = serde_json::to_value(f).unwrap_or(Value::Null);
        out.push(Candidate {
            ref_: f.id.to_string(),
            kind: EntryKind::PriorFinding,
            resource_kind: None,
            digest: digest::digest(DigestKind::Finding, &v),
            bytes: Cow::Owned(pretty(&v)),
            required: true,
            excluded_by_policy: false,
        });
    }
    out
}

enum Placement {
    Whole(String),
    Prefix(usize, String),
    Out(ExclusionReason),
}

/// Builds the context for `req` under the class inputs. The request must already be valid
/// ([`JudgeRequest::validate`]).
#[must_use]
pub fn plan(req: &JudgeRequest, input: &PlanInput<'_>) -> ContextPlan {
    let asked = req.asked();
    let criteria_items: Vec<(Id, bool, String)> = req
        .criteria
        .items
        .iter()
        .filter(|c| asked.contains(&c.id))
        .map(|c| (c.id.clone(), c.required, c.text.clone()))
        .collect();
    let frame = Frame {
        subject_digest: req.subject_digest.clone(),
        generation: req.generation,
        criteria: criteria_items,
        priors: render::priors_of(&req.prior_findings),
        template: sanitize::sanitize_str(input.template),
        schema: input.schema.to_string(),
    };
    let budget = usize::try_from(tokens::budget_bytes(input.budget_tokens)).unwrap_or(usize::MAX);
    let frame_bytes = render::frame_len(&frame);
    let cands = candidates(req);
    let mut placement: Vec<Option<Placement>> = cands.iter().map(|_| None).collect();
    let mut used = frame_bytes;
    let mut incomplete = (frame_bytes > budget).then(|| {
        format!(
            "the rules, class instructions and criteria alone need {} tokens of the {}-token budget",
            tokens::estimate(frame_bytes),
            input.budget_tokens
        )
    });

    // Required items first, whole or not at all.
    for (c, slot) in cands.iter().zip(placement.iter_mut()) {
        if c.excluded_by_policy {
            *slot = Some(Placement::Out(ExclusionReason::ProducerHistory));
            continue;
        }
        if !c.required {
            continue;
        }
        let cost = render::block_overhead(&c.block(false, String::new())) + sanitized_len(&c.bytes);
        if incomplete.is_none() && used.saturating_add(cost) <= budget {
            used += cost;
            *slot = Some(Placement::Whole(sanitize::sanitize(&c.bytes)));
        } else {
            if incomplete.is_none() {
                incomplete = Some(format!(
                    "required {} {:?} ({} tokens) does not fit: {} of the {}-token budget are already used",
                    c.kind.as_str(),
                    c.ref_,
                    tokens::estimate(cost),
                    tokens::estimate(used),
                    input.budget_tokens
                ));
            }
            *slot = Some(Placement::Out(ExclusionReason::RequiredDidNotFit));
        }
    }
    // Then optional items, in order: whole, else a prefix, else out.
    for (c, slot) in cands.iter().zip(placement.iter_mut()) {
        if slot.is_some() {
            continue;
        }
        let whole =
            render::block_overhead(&c.block(false, String::new())) + sanitized_len(&c.bytes);
        if incomplete.is_none() && used.saturating_add(whole) <= budget {
            used += whole;
            *slot = Some(Placement::Whole(sanitize::sanitize(&c.bytes)));
            continue;
        }
        let overhead = render::block_overhead(&c.block(true, String::new()));
        let room = budget.saturating_sub(used).saturating_sub(overhead);
        if incomplete.is_none() && room >= MIN_EXCERPT_BYTES {
            let (kept, body) = fit_prefix(&c.bytes, room);
            if kept > 0 {
                used += overhead + body.len();
                *slot = Some(Placement::Prefix(kept, body));
                continue;
            }
        }
        *slot = Some(Placement::Out(ExclusionReason::Budget));
    }

    let criteria_json = serde_json::to_value(&req.criteria).unwrap_or(Value::Null);
    let criteria_len = len64(verdict_core::canonical::to_vec(&criteria_json).len());
    let mut entries = vec![ManifestEntry {
        ref_: CRITERIA_REF.to_owned(),
        kind: EntryKind::Criteria,
        resource_kind: None,
        digest: digest::raw(&verdict_core::canonical::to_vec(&criteria_json)),
        bytes_total: criteria_len,
        bytes_included: criteria_len,
        truncated: false,
        required: true,
    }];
    let mut exclusions = Vec::new();
    let mut blocks = Vec::new();
    for (c, slot) in cands.iter().zip(placement) {
        let total = len64(c.bytes.len());
        let entry = |included: usize, truncated: bool| ManifestEntry {
            ref_: c.ref_.clone(),
            kind: c.kind,
            resource_kind: c.resource_kind.clone(),
            digest: c.digest.clone(),
            bytes_total: total,
            bytes_included: len64(included),
            truncated,
            required: c.required,
        };
        match slot {
            Some(Placement::Whole(body)) => {
                entries.push(entry(c.bytes.len(), false));
                blocks.push(c.block(false, body));
            }
            Some(Placement::Prefix(kept, body)) => {
                entries.push(entry(kept, true));
                blocks.push(c.block(true, body));
            }
            Some(Placement::Out(reason)) => exclusions.push(Exclusion {
                ref_: c.ref_.clone(),
                kind: c.kind,
                digest: c.digest.clone(),
                bytes_total: total,
                reason,
            }),
            None => {}
        }
    }
    let estimated = if incomplete.is_some() {
        tokens::estimate(used)
    } else {
        tokens::estimate(
            frame_bytes
                + blocks
                    .iter()
                    .map(|b| render::block_overhead(b) + b.body.len())
                    .sum::<usize>(),
        )
    };
    let manifest = ContextManifest {
        schema: ManifestSchema::V1,
        construction: Construction {
            revision: CONSTRUCTION_REVISION.to_owned(),
            token_estimate: TOKEN_ESTIMATE.to_owned(),
            budget_tokens: input.budget_tokens,
            estimated_tokens: estimated,
        },
        subject_digest: req.subject_digest.clone(),
        generation: req.generation,
        verifier_class: req.verifier.class.clone(),
        template_digest: digest::raw(input.template.as_bytes()),
        result_schema: input.schema_version.to_owned(),
        criteria: ManifestCriteria {
            revision: req.criteria.revision.clone(),
            asked,
        },
        prior_findings: req
            .prior_findings
            .iter()
            .map(|f| FindingKey {
                id: f.id.clone(),
                version: f.version,
            })
            .collect(),
        // A verifier cannot pass what it was not shown: anything left out, by kind or by
        // budget, or shown only in part, leaves the context incomplete, and the Gate counts
        // the run's passes as inconclusive (its failures and findings still stand).
        complete: incomplete.is_none()
            && exclusions.is_empty()
            && entries.iter().all(|e| !e.truncated),
        entries,
        exclusions,
    };
    let digest = manifest.digest();
    ContextPlan {
        manifest,
        digest,
        incomplete,
        frame,
        blocks,
    }
}
