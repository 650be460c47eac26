//! Documents built for the hand flow, so nobody computes a digest by hand: a subject from an
//! objective, resources and check specs ([`subject`]), and the skeleton of a verification
//! result for an admitted run ([`Engine::result_template`]).

use crate::engine::{Engine, Principal};
use crate::error::{EngineError, Result, invalid};
use serde::Deserialize;
use std::collections::BTreeSet;
use verdict_core::contracts::{
    CheckPin, Criteria, Criterion, CriterionRow, CriterionStatus, Disposition, DispositionKind,
    Execution, Id, Name, Objective, Producer, Resource, Risk, RiskClass, Role, Subject,
    SubjectSchema, VerificationResult, VerificationStatus, Verifier, WorkItem,
};
use verdict_core::digest::{Digest, DigestKind};
use verdict_probes::load::Spec;
use verdict_store::DocKind;

/// One resource the subject pins: its bytes are digested here.
#[derive(Debug, Clone)]
pub struct ResourceInput {
    /// Name (usable as an evidence ref).
    pub name: String,
    /// Kind (`file`, `git_diff`, ...).
    pub kind: String,
    /// Raw SHA-256 of its bytes.
    pub digest: Digest,
    /// Where to find it, if anywhere.
    pub uri: Option<String>,
}

/// What a subject is built from. Criteria come from the check specs (one per spec criterion,
/// with its description as text) and from `criteria` (criteria no check bears on, judged by
/// verifiers); an id given twice is refused.
#[derive(Debug)]
pub struct SubjectInput {
    /// Execution id.
    pub execution: String,
    /// Generation (1 for a first attempt; a retry is the next one).
    pub generation: u64,
    /// Mission, if any.
    pub mission: Option<String>,
    /// The producer principal.
    pub producer: String,
    /// The producer's run.
    pub producer_run: String,
    /// Work items (kind, id, version).
    pub work_items: Vec<(String, String, String)>,
    /// Objective revision label.
    pub objective_revision: String,
    /// Raw SHA-256 of the objective text.
    pub objective_digest: Digest,
    /// Criteria revision label.
    pub criteria_revision: String,
    /// Criteria beyond those of the specs.
    pub criteria: Vec<Criterion>,
    /// Resources.
    pub resources: Vec<ResourceInput>,
    /// Loaded check specs; each criterion becomes a check pin with the definition digest
    /// `verdict check` computes, bearing on the criterion of the same id.
    pub specs: Vec<Spec>,
    /// Workflow revision.
    pub workflow_revision: String,
    /// Risk class.
    pub risk: RiskClass,
    /// Risk classification revision.
    pub risk_revision: String,
    /// Capabilities the work touches.
    pub capabilities: Vec<String>,
}

fn name(what: &'static str, text: &str) -> Result<Name> {
    text.parse()
        .map_err(|e| invalid(what)(format!("{text:?}: {e}")))
}

/// Builds a subject, every digest computed, and checks it against the contract (the subject
/// the Gate and `subject put` would read).
pub fn subject(input: SubjectInput) -> Result<(Subject, Digest)> {
    let mut items = Vec::new();
    let mut checks = Vec::new();
    let mut seen = BTreeSet::new();
    for spec in &input.specs {
        for c in &spec.checks {
            if !seen.insert(c.id.to_string()) {
                return Err(invalid("subject")(format!(
                    "criterion {:?} is given twice",
                    c.id.as_str()
                )));
            }
            items.push(Criterion {
                id: c.id.clone(),
                text: c.description.clone().unwrap_or_else(|| c.id.to_string()),
                required: c.required,
                role: c.role,
                weight: Some(c.weight).filter(|w| (*w - 1.0).abs() > f64::EPSILON),
            });
            checks.push(CheckPin {
                id: c.id.clone(),
                definition_digest: c.definition_digest.clone(),
                criteria: vec![c.id.clone()],
            });
        }
    }
    for c in input.criteria {
        if !seen.insert(c.id.to_string()) {
            return Err(invalid("subject")(format!(
                "criterion {:?} is given twice",
                c.id.as_str()
            )));
        }
        items.push(c);
    }
    if items.is_empty() {
        return Err(invalid("subject")(
            "it has no criteria: give a check spec or a criterion".into(),
        ));
    }
    let subject = Subject {
        schema: SubjectSchema::V1,
        mission: input
            .mission
            .as_deref()
            .map(|m| name("mission", m))
            .transpose()?,
        execution: Execution {
            id: name("execution id", &input.execution)?,
            generation: input.generation,
        },
        work_items: input
            .work_items
            .iter()
            .map(|(kind, id, version)| {
                Ok(WorkItem {
                    kind: name("work item kind", kind)?,
                    id: name("work item id", id)?,
                    version: name("work item version", version)?,
                })
            })
            .collect::<Result<_>>()?,
        producer: Producer {
            principal: name("producer", &input.producer)?,
            run: name("producer run", &input.producer_run)?,
        },
        objective: Objective {
            revision: name("objective revision", &input.objective_revision)?,
            digest: input.objective_digest,
        },
        criteria: Criteria {
            revision: name("criteria revision", &input.criteria_revision)?,
            items,
        },
        resources: input
            .resources
            .into_iter()
            .map(|r| {
                Ok(Resource {
                    name: name("resource name", &r.name)?,
                    kind: name("resource kind", &r.kind)?,
                    digest: r.digest,
                    uri: r.uri,
                })
            })
            .collect::<Result<_>>()?,
        checks,
        workflow_revision: name("workflow revision", &input.workflow_revision)?,
        risk: Risk {
            class: input.risk,
            revision: name("risk revision", &input.risk_revision)?,
            capabilities: input.capabilities,
        },
    };
    // Read back through the contract, so what is printed is exactly what `subject put` takes.
    let value = serde_json::to_value(&subject).map_err(|e| invalid("subject")(e.to_string()))?;
    verdict_core::contracts::decode::<Subject>(DigestKind::Subject, &value)
        .map_err(|e| invalid("subject")(e.to_string()))
}

/// The fields of a stored verification request a result template needs.
#[derive(Debug, Deserialize)]
struct RequestPins {
    subject_digest: Digest,
    generation: u64,
    #[serde(default)]
    prior_blockers: Vec<PriorBlocker>,
}

#[derive(Debug, Deserialize)]
struct PriorBlocker {
    id: Id,
    version: u64,
}

impl Engine {
    /// The skeleton of the verification result run `run_id` would submit for `request`: one
    /// `not_tested` row per criterion of the subject and each prior blocker the request pins
    /// marked `still_present`, the answers that claim nothing, so a row left unfilled never
    /// shows a criterion holds or a blocker resolved. Only the run's own verifier (or an
    /// operator) may ask; a refusal is recorded.
    pub async fn result_template(
        &self,
        caller: &Principal,
        request: &Digest,
        run_id: &str,
    ) -> Result<VerificationResult> {
        self.require_role(
            caller,
            &[Role::Verifier, Role::Operator],
            "draft verification results",
        )
        .await?;
        let run = self
            .store
            .run(run_id)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "run",
                key: run_id.to_owned(),
            })?;
        if caller.role == Role::Verifier && run.admission.verifier != caller.name {
            let err = EngineError::PermissionDenied {
                principal: caller.name.to_string(),
                role: caller.role.as_str(),
                action: "draft a verification result".into(),
                why: format!(
                    "run {run_id:?} belongs to verifier {:?}",
                    run.admission.verifier.as_str()
                ),
            };
            return Err(self.deny(caller, err).await);
        }
        if run.admission.request_digest != *request {
            return Err(invalid("run")(format!(
                "run {run_id:?} serves request {}, not {request}",
                run.admission.request_digest
            )));
        }
        let pins: RequestPins = self
            .store
            .get(DocKind::Request, request)
            .await?
            .ok_or_else(|| EngineError::NotFound {
                what: "verification request",
                key: request.to_string(),
            })?
            .decode()?;
        let subject = self.subject(&pins.subject_digest).await?;
        Ok(VerificationResult {
            id: format!("vr-{run_id}")
                .parse()
                .map_err(|e| invalid("result id")(format!("{e}")))?,
            verifier: Verifier {
                principal: run.admission.verifier.clone(),
                class: run.admission.class.clone(),
                run: run.admission.run_id.clone(),
                runtime: None,
            },
            subject_digest: pins.subject_digest,
            generation: pins.generation,
            context: None,
            status: VerificationStatus::Completed,
            unavailable_reason: None,
            criteria: subject
                .criteria
                .items
                .iter()
                .map(|c| CriterionRow {
                    id: c.id.clone(),
                    status: CriterionStatus::NotTested,
                    method: String::new(),
                    evidence_refs: Vec::new(),
                })
                .collect(),
            findings: Vec::new(),
            dispositions: pins
                .prior_blockers
                .into_iter()
                .map(|b| Disposition {
                    finding: b.id,
                    version: b.version,
                    disposition: DispositionKind::StillPresent,
                    evidence_refs: Vec::new(),
                    reason: None,
                })
                .collect(),
        })
    }
}
