//! `verdict verify REQUEST`: run the model verifier for a stored verification request, as the
//! verifier principal whose token is given, through the engine: admission with preflight, the
//! judge over the stored subject, the context note, and the result's submission.

use crate::lifecycle_cmd::{Common, Ctx};
use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use verdict_core::contracts::{
    CheckEvidence, Finding, Id, Policy, Subject, UnavailableReason, VerificationStatus,
};
use verdict_core::digest::{self, Digest};
use verdict_engine::{ModelVerifier, RunOutcome, RunReport, VerifyTask};
use verdict_judge::cache::{FileCache, ResultCache};
use verdict_judge::config::VerifiersFile;
use verdict_judge::request::{
    EvidenceInput, JudgeRequest, ObjectiveInput, ResourceInput, VerifierIdentity,
};
use verdict_judge::{Judge, JudgeRun};
use verdict_store::DocKind;

const HELP: &str = "\
The subject pins its objective and resources by digest only, so their bytes are given here:
--objective FILE must hash (raw SHA-256) to the subject's objective digest, and every resource
of the subject needs --resource NAME=FILE whose raw SHA-256 equals the pinned digest. Anything
missing, unknown or mismatched is refused before any run is admitted.

Per class: the run is admitted (as the caller), preflight runs first (when the deterministic
evidence already ends in rework or blocked, no model is called and the run records why), then
the judge runs, the context manifest is recorded with the run, and the result is submitted,
`unavailable` ones included. One line per class: class, run id, status, reason.

Cache: a class with `cache: true` (the default) reuses a valid result of an earlier run with
the same context digest (subject, generation, criteria, data, budget), provider, model and
parameters, instructions, sampling, reply schema and ref waivers, without calling the model.
Unavailable results are never cached. The cache is $VERDICT_HOME/judge-cache (else
./.verdict/judge-cache) or --cache-dir; delete it to clear it, or pass --no-cache.

Exit status: 0 when every class completed, 1 otherwise, 2 on bad input or a refusal.

Example:
  VERDICT_TOKEN=$REVIEWER verdict verify sha256:... --verifiers verifiers.yaml \\
      --objective objective.md --resource diff=change.diff --class reviewer";

/// Arguments of `verdict verify`.
#[derive(clap::Args)]
#[command(after_help = HELP)]
pub struct Args {
    /// The verification request's digest (from `verdict request create`).
    request: String,
    /// The verifiers file (JSON or YAML); template files are relative to it.
    #[arg(long)]
    verifiers: PathBuf,
    /// Run only these classes (each must be one the request asks for); default: all of them.
    #[arg(long = "class")]
    classes: Vec<String>,
    /// The objective text, whose raw SHA-256 must equal the subject's objective digest.
    #[arg(long)]
    objective: PathBuf,
    /// A subject resource's bytes, as NAME=FILE; the file's raw SHA-256 must equal the digest
    /// the subject pins for NAME.
    #[arg(long = "resource", value_name = "NAME=FILE")]
    resources: Vec<String>,
    /// Where valid results are cached for reuse (default `$VERDICT_HOME/judge-cache`, else
    /// `./.verdict/judge-cache`); delete the directory to clear it.
    #[arg(long, value_name = "DIR", conflicts_with = "no_cache")]
    cache_dir: Option<PathBuf>,
    /// Neither read nor write the cache for this run.
    #[arg(long)]
    no_cache: bool,
    #[command(flatten)]
    common: Common,
}

/// Runs `verdict verify`.
pub fn run(args: &Args) -> Result<ExitCode> {
    crate::lifecycle_cmd::runtime()?.block_on(verify(args))
}

/// What stays the same for every class: the subject's pinned material, checked.
struct Material {
    subject: Subject,
    subject_digest: Digest,
    objective: ObjectiveInput,
    resources: Vec<ResourceInput>,
    /// The subject's criteria the pinned policy waives the verifier's ref rule for.
    refs_waived: Vec<Id>,
}

impl Material {
    /// Whether evidence can count at all: it ran the exact definition of a check the subject
    /// pins and is not the producer's own. The model is shown nothing the Gate would ignore for
    /// those reasons; the policy's other rules (roles, freshness) stay the Gate's to apply.
    fn could_count(&self, e: &CheckEvidence) -> bool {
        e.produced_by.principal != self.subject.producer.principal
            && self
                .subject
                .checks
                .iter()
                .any(|c| c.id == e.check && c.definition_digest == e.definition_digest)
    }

    /// The judge request for one run, from the task the engine hands over.
    fn request(
        &self,
        identity: VerifierIdentity,
        generation: u64,
        evidence: &[Value],
        prior: &[Value],
    ) -> Result<JudgeRequest> {
        let mut inputs = Vec::new();
        for (i, v) in evidence.iter().enumerate() {
            let document = serde_json::from_value::<CheckEvidence>(v.clone())
                .with_context(|| format!("stored evidence {i} of the subject"))?;
            if self.could_count(&document) {
                inputs.push(EvidenceInput {
                    document,
                    output: None,
                });
            }
        }
        let evidence = inputs;
        let prior_findings = prior
            .iter()
            .enumerate()
            .map(|(i, v)| {
                serde_json::from_value::<Finding>(v.clone())
                    .with_context(|| format!("prior finding {i} the request pins"))
            })
            .collect::<Result<Vec<_>>>()?;
        let req = JudgeRequest {
            result_id: format!("vr-{}", identity.run)
                .parse()
                .map_err(|e| anyhow::anyhow!("result id for run {}: {e}", identity.run))?,
            verifier: identity,
            subject_digest: self.subject_digest.clone(),
            generation,
            objective: self.objective.clone(),
            criteria: self.subject.criteria.clone(),
            ask: None,
            resources: self.resources.clone(),
            evidence,
            prior_findings,
            evidence_refs_waived: self.refs_waived.clone(),
        };
        req.validate()?;
        Ok(req)
    }
}

/// The judge seen as the engine's model verifier; it keeps the run record for the context note.
struct JudgeVerifier<'a> {
    judge: &'a Judge,
    material: &'a Material,
    last: Mutex<Option<JudgeRun>>,
}

#[async_trait]
impl ModelVerifier for JudgeVerifier<'_> {
    async fn verify(&self, task: &VerifyTask) -> std::result::Result<Value, String> {
        let identity = VerifierIdentity {
            principal: task.verifier.clone(),
            class: task.class.clone(),
            run: task.run_id.clone(),
        };
        let req = self
            .material
            .request(
                identity,
                task.generation,
                &task.evidence,
                &task.prior_findings,
            )
            .map_err(|e| format!("{e:#}"))?;
        let run = self.judge.run(&req).await.map_err(|e| e.to_string())?;
        let doc = serde_json::to_value(&run.result).map_err(|e| e.to_string())?;
        if let Ok(mut slot) = self.last.lock() {
            *slot = Some(run);
        }
        Ok(doc)
    }
}

async fn verify(args: &Args) -> Result<ExitCode> {
    let ctx = Ctx::open(&args.common).await?;
    let caller = ctx.caller().await?;
    let request_digest: Digest = args
        .request
        .parse()
        .map_err(|e| anyhow::anyhow!("{:?}: {e}", args.request))?;
    let engine = &ctx.engine;
    let request = engine
        .store()
        .get(DocKind::Request, &request_digest)
        .await?
        .with_context(|| format!("no verification request {request_digest}"))?
        .value()?;
    if request.get("schema") != Some(&Value::from(verdict_engine::REQUEST_SCHEMA)) {
        bail!(
            "{request_digest} is not a {}",
            verdict_engine::REQUEST_SCHEMA
        );
    }
    let asked: Vec<String> = request
        .get("verifier_classes")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let classes = if args.classes.is_empty() {
        asked.clone()
    } else {
        for c in &args.classes {
            if !asked.contains(c) {
                bail!("--class {c:?}: the request asks for {asked:?} only");
            }
        }
        args.classes.clone()
    };
    if classes.is_empty() {
        bail!("the request asks for no verifier class; nothing to run");
    }
    let subject_digest: Digest = request
        .get("subject_digest")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .parse()
        .map_err(|e| anyhow::anyhow!("request {request_digest}: subject_digest: {e}"))?;
    let subject: Subject = engine
        .store()
        .get(DocKind::Subject, &subject_digest)
        .await?
        .with_context(|| format!("no subject {subject_digest}"))?
        .decode()?;
    // The policy the request pinned says which criteria, if any, may pass without refs.
    let policy_digest: Digest = request
        .get("policy_digest")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .parse()
        .map_err(|e| anyhow::anyhow!("request {request_digest}: policy_digest: {e}"))?;
    let policy: Policy = engine
        .store()
        .get(DocKind::Policy, &policy_digest)
        .await?
        .with_context(|| format!("no policy {policy_digest}"))?
        .decode()?;
    let refs_waived = subject
        .criteria
        .items
        .iter()
        .map(|c| c.id.clone())
        .filter(|id| policy.evidence_refs_waived.contains(id))
        .collect();
    let material = Material {
        objective: objective(&args.objective, &subject)?,
        resources: resources(&args.resources, &subject)?,
        subject,
        subject_digest,
        refs_waived,
    };
    let mut file = VerifiersFile::load(&args.verifiers)?;
    let cap = verdict_engine::RequestBudget::of_request(&request)
        .with_context(|| format!("request {request_digest}"))?;
    for class in &classes {
        if let Some(config) = file.classes.iter_mut().find(|(k, _)| k.as_str() == class) {
            capped(&mut config.1.budget, &cap);
        }
    }
    let base = args.verifiers.parent().unwrap_or_else(|| Path::new("."));
    let cache: Option<Arc<dyn ResultCache>> = if args.no_cache {
        None
    } else {
        Some(Arc::new(FileCache::new(cache_dir(
            args.cache_dir.as_deref(),
        ))))
    };
    let mut judges = Vec::new();
    for class in &classes {
        let mut judge = Judge::from_config(&file, class, base)
            .with_context(|| format!("verifier class {class:?}"))?;
        let config = &judge.class().config;
        if config.budget.max_cost.is_some() && config.provider.price().is_none() {
            bail!(
                "verifier class {class:?}: the request caps cost, but the class has no \
                 provider.price to estimate costs with"
            );
        }
        if let Some(cache) = &cache {
            judge = judge.with_cache(cache.clone());
        }
        judges.push((class.clone(), judge));
    }
    // A dry build with what is stored now, so a request the judge would refuse is bad input
    // here, before any run is admitted and left half-done.
    let generation = request
        .get("generation")
        .and_then(Value::as_u64)
        .unwrap_or_default();
    let evidence: Vec<Value> = engine
        .store()
        .list(
            DocKind::Evidence,
            &verdict_store::About::Subject(material.subject_digest.clone()),
        )
        .await?
        .iter()
        .map(verdict_store::Stored::value)
        .collect::<Result<_, _>>()?;
    let prior = engine.pinned_prior_findings(&caller, &request).await?;
    for (class, _) in &judges {
        material.request(
            VerifierIdentity {
                principal: caller.name().clone(),
                class: class
                    .parse()
                    .map_err(|e| anyhow::anyhow!("{class:?}: {e}"))?,
                run: "vrun-check".parse().map_err(|e| anyhow::anyhow!("{e}"))?,
            },
            generation,
            &evidence,
            &prior,
        )?;
    }
    let mut all_completed = true;
    for (class, judge) in &judges {
        let run_id = new_run_id(class)?;
        let pre = engine
            .admit(
                &caller,
                &request_digest,
                caller.name().as_str(),
                class,
                &run_id,
            )
            .await?;
        if pre.skipped {
            all_completed = false;
            outln!(
                "{class} {run_id} skipped preflight {}: {}",
                pre.outcome.as_str(),
                pre.reasons.join("; ")
            )?;
            continue;
        }
        let model = JudgeVerifier {
            judge,
            material: &material,
            last: Mutex::new(None),
        };
        let called = engine.run_model(&caller, &run_id, &model).await;
        let mut record = model.last.lock().ok().and_then(|mut s| s.take());
        if let Some(run) = &record {
            let report = RunReport {
                manifest: run.manifest.to_value(),
                receipts: run.receipts.clone(),
                detail: run.detail.clone(),
                cache_key: run.cache_key.as_ref().map(|k| k.0.to_string()),
            };
            engine.record_run_context(&caller, &run_id, &report).await?;
            if let Some(key) = &run.cache_key {
                eprintln!("{class} {run_id}: result reused from the cache ({})", key.0);
            }
        }
        let outcome = match (called, record.as_mut()) {
            (Ok(o), _) => o,
            // The engine refused what the judge produced (say, a ref it does not accept): the
            // run must still end, so it ends `unavailable` with `invalid_output` and the
            // refusal as its reason, rather than staying started with nothing submitted.
            (Err(refused), Some(run)) => {
                let why = format!("the engine refused the result: {refused}");
                run.result.status = VerificationStatus::Unavailable;
                run.result.unavailable_reason = Some(UnavailableReason::InvalidOutput);
                run.result.criteria.clear();
                run.result.findings.clear();
                run.result.dispositions.clear();
                run.detail = Some(why);
                let doc = serde_json::to_value(&run.result)?;
                RunOutcome::Submitted(engine.submit_result(&caller, &doc).await?)
            }
            (Err(refused), None) => return Err(refused.into()),
        };
        match (outcome, record) {
            (RunOutcome::Submitted(s), Some(run)) => {
                let completed = run.result.status == VerificationStatus::Completed && s.counted;
                all_completed &= completed;
                let status = if run.result.status == VerificationStatus::Completed {
                    "completed"
                } else {
                    "unavailable"
                };
                let mut reason = match (run.result.unavailable_reason, &run.detail) {
                    (Some(r), Some(d)) => format!("{}: {d}", reason_name(r)),
                    (Some(r), None) => reason_name(r),
                    (None, _) => "-".to_owned(),
                };
                if let Some(why) = &s.why_not {
                    reason = format!("{reason} (not counted: {why})");
                }
                outln!("{class} {run_id} {status} {reason}")?;
            }
            (RunOutcome::Skipped(pre), _) => {
                all_completed = false;
                outln!(
                    "{class} {run_id} skipped preflight {}: {}",
                    pre.outcome.as_str(),
                    pre.reasons.join("; ")
                )?;
            }
            (RunOutcome::Submitted(s), None) => {
                all_completed = false;
                outln!("{class} {run_id} submitted {}", s.digest)?;
            }
        }
    }
    Ok(if all_completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The cache directory: `--cache-dir`, else `$VERDICT_HOME/judge-cache`, else
/// `./.verdict/judge-cache` (next to the default store).
fn cache_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_owned();
    }
    let home = std::env::var_os(verdict_store::location::HOME_ENV)
        .filter(|h| !h.is_empty())
        .map_or_else(|| PathBuf::from(".verdict"), PathBuf::from);
    home.join("judge-cache")
}

/// Lowers a class's budget to the caps the request pins; a cap never raises a limit.
fn capped(budget: &mut verdict_judge::config::Budget, cap: &verdict_engine::RequestBudget) {
    if let Some(t) = cap.max_total_tokens {
        budget.max_total_tokens = Some(budget.max_total_tokens.map_or(t, |b| b.min(t)));
    }
    if let Some(c) = cap.max_cost {
        budget.max_cost = Some(budget.max_cost.map_or(c, |b| b.min(c)));
    }
    if let Some(t) = cap.timeout_s {
        budget.timeout_s = budget.timeout_s.min(t);
    }
}

fn reason_name(r: UnavailableReason) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{r:?}"))
}

/// A fresh run id per class: runs are never reused, so a second `verify` starts new ones.
fn new_run_id(class: &str) -> Result<String> {
    let token = verdict_engine::token::generate()?;
    let hex = token
        .trim_start_matches(verdict_engine::token::TOKEN_PREFIX)
        .get(..12)
        .unwrap_or_default()
        .to_owned();
    Ok(format!("vrun-{class}-{hex}"))
}

fn objective(path: &Path, subject: &Subject) -> Result<ObjectiveInput> {
    let bytes = std::fs::read(path).with_context(|| format!("--objective {}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--objective {}: not UTF-8 text", path.display()))?;
    let actual = digest::raw(text.as_bytes());
    if actual != subject.objective.digest {
        bail!(
            "--objective {}: hashes to {actual}, not the subject's objective digest {}",
            path.display(),
            subject.objective.digest
        );
    }
    Ok(ObjectiveInput {
        revision: subject.objective.revision.clone(),
        text,
        digest: Some(actual),
    })
}

fn resources(given: &[String], subject: &Subject) -> Result<Vec<ResourceInput>> {
    let mut files: BTreeMap<&str, &str> = BTreeMap::new();
    for g in given {
        let Some((name, path)) = g.split_once('=') else {
            bail!("--resource {g:?}: expected NAME=FILE");
        };
        if !subject.resources.iter().any(|r| r.name.as_str() == name) {
            bail!("--resource {name:?}: the subject has no resource of that name");
        }
        if files.insert(name, path).is_some() {
            bail!("--resource {name:?} is given twice");
        }
    }
    let mut out = Vec::new();
    for r in &subject.resources {
        let Some(path) = files.get(r.name.as_str()) else {
            bail!(
                "resource {:?} of the subject has no retrievable content here: give --resource {}=FILE",
                r.name.as_str(),
                r.name
            );
        };
        let content =
            std::fs::read(path).with_context(|| format!("--resource {}={path}", r.name))?;
        let actual = digest::raw(&content);
        if actual != r.digest {
            bail!(
                "--resource {}={path}: hashes to {actual}, not the pinned {}",
                r.name,
                r.digest
            );
        }
        out.push(ResourceInput {
            name: r.name.clone(),
            kind: r.kind.clone(),
            digest: actual,
            content,
            required: true,
        });
    }
    Ok(out)
}
