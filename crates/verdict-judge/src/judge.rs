//! One verification run of one verifier class: plan the context, call the provider (with the
//! deadline, bounded retries and budget), validate, combine samples, and produce the
//! verification result with its manifest and receipts.
//!
//! Every way a run can go wrong ends in a result with status `unavailable`, the contract's
//! reason and a precise detail; none of them can produce `passed` or `failed`. The only errors
//! returned as `Err` are requests that break the request rules, which are the caller's fault
//! and are refused before anything is sent.

use crate::cache::{CacheKey, CachedResult, KeyParts, ResultCache};
use crate::config::{ConfigError, ResolvedClass, VerifiersFile};
use crate::manifest::{self, ContextManifest, ContextPlan, PlanInput};
use crate::provider::{CallFailure, CallInput, CallReply, Output, Provider};
use crate::receipt::Receipt;
use crate::render::Nonce;
use crate::reply::{self, ReplyRules, ReplyValidator, SchemaError, ValidReply, clip};
use crate::request::{JudgeRequest, RequestError};
use crate::sampling;
use crate::sanitize::make_storable;
use serde::Serialize;
use serde_json::Value;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use verdict_core::contracts::{
    ContextRef, CriterionRow, Disposition, Finding, Id, Name, Runtime, UnavailableReason,
    VerificationResult, VerificationStatus, Verifier,
};
use verdict_core::digest::Digest;

/// The longest wait between retries, whatever a provider asks for.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(300);
/// What a snapshot is recorded as when the provider reported none.
pub const UNREPORTED: &str = "unreported";

/// A run's record: the result plus everything needed to audit how it was reached.
#[derive(Debug, Clone, Serialize)]
pub struct JudgeRun {
    /// The verification result (docs/spec/evidence.md).
    pub result: VerificationResult,
    /// What the model was shown.
    pub manifest: ContextManifest,
    /// `digest("context", manifest)`, also in `result.context`.
    pub context_digest: Digest,
    /// One receipt per provider call, in order.
    pub receipts: Vec<Receipt>,
    /// Why the run is unavailable, precisely; `None` when it completed.
    pub detail: Option<String>,
    /// Whether the result came from the cache (then no call was made).
    pub cache_hit: bool,
    /// The key it was served from, on a cache hit.
    pub cache_key: Option<CacheKey>,
    /// Criteria and prior findings on which samples disagreed.
    pub disagreements: Vec<String>,
    /// The rationale each valid sample gave per criterion.
    pub rationales: Vec<Vec<(Id, String)>>,
}

/// Why a [`Judge`] could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JudgeError {
    /// The verifiers file or class is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The result schema does not compile.
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

/// A failed run: the contract reason and the precise detail.
#[derive(Debug, Clone)]
struct Failure {
    reason: UnavailableReason,
    detail: String,
}

fn fail(reason: UnavailableReason, detail: impl Into<String>) -> Failure {
    Failure {
        reason,
        detail: detail.into(),
    }
}

/// What the run loop keeps across calls; it outlives a cancelled run's future.
#[derive(Debug, Default)]
struct RunState {
    receipts: Vec<Receipt>,
    tokens: u64,
    cost: f64,
    snapshot: Option<String>,
}

/// Plans the context of `req` for `class` without any provider (nothing is sent, no key is
/// needed).
pub fn plan_request(
    class: &ResolvedClass,
    req: &JudgeRequest,
) -> Result<ContextPlan, RequestError> {
    plan_with(&class.template, class.config.budget.context_tokens, req)
}

/// Plans the context of `req` with class instructions `template` under a budget of
/// `budget_tokens`: what `verdict judge render` shows.
pub fn plan_with(
    template: &str,
    budget_tokens: u64,
    req: &JudgeRequest,
) -> Result<ContextPlan, RequestError> {
    req.validate()?;
    let schema = reply::result_schema();
    Ok(manifest::plan(
        req,
        &PlanInput {
            template,
            schema: &schema,
            schema_version: reply::RESULT_SCHEMA_VERSION,
            budget_tokens,
        },
    ))
}

/// A model verifier for one class.
pub struct Judge {
    class: ResolvedClass,
    provider: Arc<dyn Provider>,
    cache: Option<Arc<dyn ResultCache>>,
    validator: ReplyValidator,
    schema: Value,
}

impl std::fmt::Debug for Judge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judge")
            .field("class", &self.class.name)
            .field("provider", &self.provider)
            .field("cached", &self.cache.is_some())
            .finish()
    }
}

impl Judge {
    /// A judge for `class` calling `provider`.
    pub fn new(class: ResolvedClass, provider: Arc<dyn Provider>) -> Result<Self, JudgeError> {
        Ok(Self {
            class,
            provider,
            cache: None,
            validator: ReplyValidator::new()?,
            schema: reply::result_schema(),
        })
    }

    /// A judge for class `name` of a verifiers file; template files are read relative to
    /// `base`, the API key from the environment.
    pub fn from_config(file: &VerifiersFile, name: &str, base: &Path) -> Result<Self, JudgeError> {
        let class = file.class(name, base)?;
        let provider = class.config.provider(name)?;
        Self::new(class, provider)
    }

    /// Serves and stores valid results through `cache` (when the class allows caching).
    #[must_use]
    pub fn with_cache(mut self, cache: Arc<dyn ResultCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// The class this judge runs.
    #[must_use]
    pub fn class(&self) -> &ResolvedClass {
        &self.class
    }

    /// Runs the verification.
    pub async fn run(&self, req: &JudgeRequest) -> Result<JudgeRun, RequestError> {
        self.run_until(req, std::future::pending()).await
    }

    /// Runs the verification until `cancel` completes; a cancelled run is `unavailable` with
    /// reason `cancelled`, and keeps the receipts of the calls already made.
    pub async fn run_until(
        &self,
        req: &JudgeRequest,
        cancel: impl Future<Output = ()>,
    ) -> Result<JudgeRun, RequestError> {
        if req.verifier.class != self.class.name {
            return Err(RequestError::ClassMismatch {
                request: req.verifier.class.to_string(),
                judge: self.class.name.to_string(),
            });
        }
        let plan = plan_request(&self.class, req)?;
        let state = Mutex::new(RunState::default());
        if let Some(why) = &plan.incomplete {
            let f = fail(UnavailableReason::ContextIncomplete, why.clone());
            return Ok(self.finish(req, &plan, &state, Err(f)));
        }
        let key = self.cache_key(req, &plan);
        if let (Some(cache), Some(key)) = (&self.cache, &key)
            && let Some(hit) = cache.get(key)
            && fits(&hit, &plan.manifest, &req.evidence_refs_waived)
        {
            return Ok(self.finish_cached(req, &plan, hit, key.clone()));
        }
        let outcome = {
            let work = self.sample_all(&plan, &req.evidence_refs_waived, &state);
            tokio::select! {
                biased;
                () = cancel => Err(fail(UnavailableReason::Cancelled, "the run was cancelled by its caller")),
                r = work => r,
            }
        }
        .and_then(with_secret_finding_ids);
        let run = self.finish(req, &plan, &state, outcome);
        if let (Some(cache), Some(key), Some(runtime)) =
            (&self.cache, key, &run.result.verifier.runtime)
            && run.result.status == VerificationStatus::Completed
        {
            cache.put(
                key,
                CachedResult {
                    criteria: run.result.criteria.clone(),
                    findings: run.result.findings.clone(),
                    dispositions: run.result.dispositions.clone(),
                    runtime: runtime.clone(),
                },
            );
        }
        Ok(run)
    }

    fn cache_key(&self, req: &JudgeRequest, plan: &ContextPlan) -> Option<CacheKey> {
        if !self.class.config.cache {
            return None;
        }
        let s = self.class.config.sampling;
        Some(
            KeyParts {
                criteria_revision: &req.criteria.revision,
                template_digest: &plan.manifest.template_digest,
                provider: &self.provider.identity(),
                max_output_tokens: self.class.config.budget.max_output_tokens,
                sampling: (s.n, s.needed()),
                context_digest: &plan.digest,
                schema_version: reply::RESULT_SCHEMA_VERSION,
                refs_waived: &req.evidence_refs_waived,
            }
            .key(),
        )
    }

    async fn sample_all(
        &self,
        plan: &ContextPlan,
        waived: &[Id],
        state: &Mutex<RunState>,
    ) -> Result<Combined, Failure> {
        let budget = &self.class.config.budget;
        let timeout = Duration::try_from_secs_f64(budget.timeout_s).unwrap_or(Duration::ZERO);
        let deadline = Instant::now() + timeout;
        let n = self.class.config.sampling.n.max(1);
        let needed = self.class.config.sampling.needed().clamp(1, n);
        let mut valid: Vec<ValidReply> = Vec::new();
        let mut first_failure: Option<Failure> = None;
        let mut failures = 0u32;
        for sample in 0..n {
            match self.one_sample(sample, plan, waived, deadline, state).await {
                Ok(v) => valid.push(v),
                Err(f) => {
                    failures += 1;
                    let f = if n > 1 {
                        fail(
                            f.reason,
                            format!("sample {} of {n}: {}", sample + 1, f.detail),
                        )
                    } else {
                        f
                    };
                    // A spent budget ends the run: what was spent past a cap is never made
                    // up for by the samples that came before it.
                    if f.reason == UnavailableReason::BudgetExhausted {
                        return Err(f);
                    }
                    first_failure.get_or_insert(f);
                    if failures > n - needed {
                        return Err(first_failure.unwrap_or_else(|| {
                            fail(UnavailableReason::ProviderError, "no sample")
                        }));
                    }
                }
            }
        }
        let combined = sampling::combine(&valid);
        Ok(Combined {
            rows: combined.rows,
            findings: combined.findings,
            dispositions: combined.dispositions,
            disagreements: combined.disagreements,
            rationales: valid.into_iter().map(|v| v.rationales).collect(),
        })
    }

    async fn one_sample(
        &self,
        sample: u32,
        plan: &ContextPlan,
        waived: &[Id],
        deadline: Instant,
        state: &Mutex<RunState>,
    ) -> Result<ValidReply, Failure> {
        let budget = self.class.config.budget;
        let price = self.class.config.provider.price();
        let nonce = loop {
            let n = Nonce::random()
                .map_err(|e| fail(UnavailableReason::ProviderError, e.to_string()))?;
            if !plan.data_contains(&n) {
                break n;
            }
        };
        let prompt = plan.render(&nonce);
        let prompt_tokens = prompt.estimated_tokens();
        let p = &self.provider;
        let redact = |t: &str| p.redact(t);
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            {
                let st = lock(state);
                if let Some(cap) = budget.max_total_tokens
                    && st.tokens.saturating_add(prompt_tokens) > cap
                {
                    return Err(fail(
                        UnavailableReason::BudgetExhausted,
                        format!(
                            "token budget: {} tokens spent, the next call needs about {prompt_tokens} more, cap {cap}",
                            st.tokens
                        ),
                    ));
                }
                if let Some(cap) = budget.max_cost {
                    let Some(price) = price else {
                        return Err(fail(
                            UnavailableReason::BudgetExhausted,
                            format!(
                                "the cost cap {cap} cannot be checked: the provider has no price"
                            ),
                        ));
                    };
                    if st.cost + price.cost(prompt_tokens, 0) > cap {
                        return Err(fail(
                            UnavailableReason::BudgetExhausted,
                            format!(
                                "cost budget: {:.6} spent, the next call would pass the cap {cap}",
                                st.cost
                            ),
                        ));
                    }
                }
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(fail(
                    UnavailableReason::Timeout,
                    format!("the run's time budget of {}s ran out", budget.timeout_s),
                ));
            }
            let started = Instant::now();
            let input = CallInput {
                system: &prompt.system,
                user: &prompt.user,
                schema: &self.schema,
                max_output_tokens: budget.max_output_tokens,
                timeout: remaining,
            };
            // The run's deadline is the only timer: whatever a call ends with once it has
            // passed, the call ran out the time budget and is a timeout.
            let result = match tokio::time::timeout_at(deadline, p.call(input)).await {
                Ok(Err(_)) | Err(_) if Instant::now() >= deadline => {
                    Err(CallFailure::Timeout(millis(started.elapsed())))
                }
                Ok(r) => r,
                Err(_) => Err(CallFailure::Timeout(millis(started.elapsed()))),
            };
            // A usage count no call can reach is not believed, nor charged: the reply is
            // refused like any other response that breaks the protocol.
            let result = result.and_then(plausible_usage);
            let latency_ms = millis(started.elapsed());
            let mut receipt = Receipt {
                sample,
                attempt,
                provider: p.name().to_owned(),
                model: p.model().to_owned(),
                snapshot: None,
                nonce: nonce.as_str().to_owned(),
                tokens_in: None,
                tokens_out: None,
                tokens_estimated: false,
                tokens_charged: None,
                cost_estimate: None,
                latency_ms,
                outcome: String::new(),
                detail: None,
            };
            match result {
                Ok(reply) => {
                    receipt.snapshot = reply
                        .snapshot
                        .as_deref()
                        .map(|s| clean_snapshot(&p.redact(s)));
                    receipt.tokens_in = reply.tokens_in;
                    receipt.tokens_out = reply.tokens_out;
                    receipt.tokens_estimated = reply.tokens_estimated;
                    // Usage is charged at no less than the estimate of what was sent and what
                    // the model wrote (ceil(bytes / 4), the unit every budget is counted in): a
                    // count left out, or reported as 0 beside a long reply, must not slip a cap.
                    // The response's padding (bytes past what an honest envelope around the
                    // text takes) is charged as output too: it costs the provider nothing.
                    let written = crate::tokens::estimate(reply.charged_bytes());
                    let (tin, tout) = (
                        reply.tokens_in.unwrap_or(0).max(prompt_tokens),
                        reply.tokens_out.unwrap_or(0).max(written),
                    );
                    receipt.tokens_charged =
                        Some(crate::tokens::storable(tin.saturating_add(tout)));
                    receipt.cost_estimate =
                        price.map(|pr| crate::tokens::storable_f64(pr.cost(tin, tout)));
                    let rules = ReplyRules {
                        nonce: nonce.as_str(),
                        manifest: &plan.manifest,
                        refs_waived: waived,
                        redact: &redact,
                    };
                    let (outcome, checked) = match &reply.output {
                        Output::Document(text) => match self.validator.validate(text, rules) {
                            Ok(v) => ("valid", Ok(redact_reply(v, p.as_ref()))),
                            Err(e) => ("invalid_output", Err(e.detail)),
                        },
                        Output::Refused(said) => (
                            "refused",
                            Err(format!("the model refused: {}", clip(&p.redact(said)))),
                        ),
                        Output::Truncated => (
                            "truncated",
                            Err(format!(
                                "the reply was cut off at the output limit of {} tokens",
                                budget.max_output_tokens
                            )),
                        ),
                        Output::Missing(why) => ("no_result", Err(why.clone())),
                        Output::OffProtocol(why) => ("invalid_output", Err(why.clone())),
                        Output::Unfinished(why) => ("unfinished", Err(why.clone())),
                    };
                    // A reply that did not end as an answer ends is the provider's failure,
                    // not the model's output: it is recorded so, and never read.
                    let reason = if matches!(reply.output, Output::Unfinished(_)) {
                        UnavailableReason::ProviderError
                    } else {
                        UnavailableReason::InvalidOutput
                    };
                    let mut st = lock(state);
                    st.tokens = st.tokens.saturating_add(tin.saturating_add(tout));
                    st.cost += receipt.cost_estimate.unwrap_or(0.0);
                    // Budgets are checked again with what the call reported: a reply that
                    // spent past a cap is never a counted result, however valid it is.
                    // A reply longer than the output cap allows was not produced under that
                    // cap, whatever usage it reports: it is not read.
                    let over = (written > u64::from(budget.max_output_tokens))
                        .then(|| {
                            let padding = match reply.padding_bytes() {
                                0 => String::new(),
                                n => format!(" and {n} bytes of padding around it"),
                            };
                            format!(
                                "output budget: the reply holds {} bytes of text{padding}, about {written} tokens, past max_output_tokens {} (the call reported {} out)",
                                reply.reply_bytes,
                                budget.max_output_tokens,
                                reply
                                    .tokens_out
                                    .map_or_else(|| "nothing".to_owned(), |t| t.to_string())
                            )
                        })
                        .or_else(|| over_budget(&budget, &st, tin, tout, receipt.cost_estimate));
                    let over_cap = over.is_some();
                    let checked = match over {
                        Some(why) => Err(fail(UnavailableReason::BudgetExhausted, why)),
                        None => checked.map_err(|d| fail(reason, p.redact(&d))),
                    };
                    receipt.outcome = if over_cap {
                        "budget_exhausted".to_owned()
                    } else {
                        outcome.to_owned()
                    };
                    receipt.detail = checked.as_ref().err().map(|f| f.detail.clone());
                    if checked.is_ok() && st.snapshot.is_none() {
                        st.snapshot.clone_from(&receipt.snapshot);
                    }
                    st.receipts.push(receipt);
                    return checked;
                }
                Err(failure) => {
                    receipt.outcome = failure.label();
                    let detail = p.redact(&failure.to_string());
                    receipt.detail = Some(detail.clone());
                    lock(state).receipts.push(receipt);
                    if let CallFailure::Timeout(_) = failure {
                        return Err(fail(
                            UnavailableReason::Timeout,
                            format!(
                                "attempt {attempt}: {detail} (run time budget {}s)",
                                budget.timeout_s
                            ),
                        ));
                    }
                    if !failure.retryable() {
                        return Err(fail(
                            UnavailableReason::ProviderError,
                            format!("attempt {attempt}: {detail}"),
                        ));
                    }
                    if attempt >= budget.max_attempts {
                        return Err(fail(
                            UnavailableReason::ProviderError,
                            format!("gave up after {attempt} attempts; last: {detail}"),
                        ));
                    }
                    let delay = retry_delay(&failure, budget.backoff_ms, attempt);
                    if Instant::now() + delay >= deadline {
                        return Err(fail(
                            UnavailableReason::BudgetExhausted,
                            format!(
                                "attempt {attempt}: {detail}; retrying after {} ms would pass the run's time budget of {}s",
                                millis(delay),
                                budget.timeout_s
                            ),
                        ));
                    }
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    fn verifier(&self, req: &JudgeRequest, snapshot: Option<&str>) -> Verifier {
        let runtime = snapshot.and_then(|s| {
            Some(Runtime {
                provider: Name::try_from(self.provider.name().to_owned()).ok()?,
                model: Name::try_from(self.provider.model().to_owned()).ok()?,
                snapshot: Name::try_from(s.to_owned()).ok()?,
            })
        });
        Verifier {
            principal: req.verifier.principal.clone(),
            class: req.verifier.class.clone(),
            run: req.verifier.run.clone(),
            runtime,
        }
    }

    fn finish(
        &self,
        req: &JudgeRequest,
        plan: &ContextPlan,
        state: &Mutex<RunState>,
        outcome: Result<Combined, Failure>,
    ) -> JudgeRun {
        let mut st = std::mem::take(&mut *lock(state));
        // Every detail a provider could have written into (an error body, a program's stderr, a
        // name from a malformed reply, a transport message) leaves the crate here, and only
        // here: escaped once, every control character visible, it reaches neither the store
        // nor a terminal as anything but text.
        for r in &mut st.receipts {
            if let Some(d) = &mut r.detail {
                make_storable(d);
            }
        }
        let outcome = outcome.map_err(|mut f| {
            make_storable(&mut f.detail);
            f
        });
        let context = Some(ContextRef {
            digest: plan.digest.clone(),
            complete: plan.manifest.complete,
        });
        let (
            status,
            reason,
            detail,
            rows,
            findings,
            dispositions,
            disagreements,
            rationales,
            snapshot,
        ) = match outcome {
            Ok(c) => (
                VerificationStatus::Completed,
                None,
                None,
                c.rows,
                c.findings,
                c.dispositions,
                c.disagreements,
                c.rationales,
                Some(st.snapshot.unwrap_or_else(|| UNREPORTED.to_owned())),
            ),
            Err(f) => (
                VerificationStatus::Unavailable,
                Some(f.reason),
                Some(f.detail),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                Vec::new(),
                st.snapshot,
            ),
        };
        JudgeRun {
            result: VerificationResult {
                id: req.result_id.clone(),
                verifier: self.verifier(req, snapshot.as_deref()),
                subject_digest: req.subject_digest.clone(),
                generation: req.generation,
                context,
                status,
                unavailable_reason: reason,
                criteria: rows,
                findings,
                dispositions,
            },
            manifest: plan.manifest.clone(),
            context_digest: plan.digest.clone(),
            receipts: st.receipts,
            detail,
            cache_hit: false,
            cache_key: None,
            disagreements,
            rationales,
        }
    }

    fn finish_cached(
        &self,
        req: &JudgeRequest,
        plan: &ContextPlan,
        hit: CachedResult,
        key: CacheKey,
    ) -> JudgeRun {
        let mut verifier = self.verifier(req, None);
        verifier.runtime = Some(hit.runtime);
        JudgeRun {
            result: VerificationResult {
                id: req.result_id.clone(),
                verifier,
                subject_digest: req.subject_digest.clone(),
                generation: req.generation,
                context: Some(ContextRef {
                    digest: plan.digest.clone(),
                    complete: plan.manifest.complete,
                }),
                status: VerificationStatus::Completed,
                unavailable_reason: None,
                criteria: hit.criteria,
                findings: hit.findings,
                dispositions: hit.dispositions,
            },
            manifest: plan.manifest.clone(),
            context_digest: plan.digest.clone(),
            receipts: Vec::new(),
            detail: None,
            cache_hit: true,
            cache_key: Some(key),
            disagreements: Vec::new(),
            rationales: Vec::new(),
        }
    }
}

/// Whether a cached result is one this run could have produced: one row per asked criterion in
/// order, refs only from the manifest, a cited ref on every pass not waived, findings on asked
/// criteria, one disposition per prior blocker. The key already pins all of this; the check is
/// for an entry damaged or edited where it is kept.
fn fits(hit: &CachedResult, m: &ContextManifest, waived: &[Id]) -> bool {
    let citable: std::collections::BTreeSet<&str> =
        m.citable_refs().map(|e| e.ref_.as_str()).collect();
    let cites = |refs: &[String]| refs.iter().all(|r| citable.contains(r.as_str()));
    let rows_fit = hit.criteria.len() == m.criteria.asked.len()
        && hit.criteria.iter().zip(&m.criteria.asked).all(|(row, id)| {
            row.id == *id
                && row.method == reply::METHOD
                && cites(&row.evidence_refs)
                && !(row.status == verdict_core::contracts::CriterionStatus::Passed
                    && row.evidence_refs.is_empty()
                    && !waived.contains(id))
        });
    let findings_fit = hit.findings.iter().all(|f| {
        m.criteria.asked.contains(&f.criterion)
            && f.subject_digest == m.subject_digest
            && cites(&f.evidence_refs)
    });
    let dispositions_fit = hit.dispositions.len() == m.prior_findings.len()
        && hit
            .dispositions
            .iter()
            .zip(&m.prior_findings)
            .all(|(d, k)| d.finding == k.id && d.version == k.version && cites(&d.evidence_refs));
    rows_fit && findings_fit && dispositions_fit
}

/// Gives a run's findings ids that nobody can name before its result is stored. The id a
/// finding is first given is derived from the problem (so that the run's samples agree on it),
/// and anyone who reads the subject could derive it too; a finding is stored under its id and
/// version for every writer, so another verifier that stored a finding under that id first
/// would have this run's whole result refused, and a second run describing the same problem
/// in other words would be refused the same way. Each id is therefore hashed with a secret
/// drawn for this run and never kept.
fn with_secret_finding_ids(mut c: Combined) -> Result<Combined, Failure> {
    let mut secret = [0u8; 16];
    getrandom::fill(&mut secret).map_err(|e| {
        fail(
            UnavailableReason::ProviderError,
            format!("no randomness for the run's finding ids: {e}"),
        )
    })?;
    let secret = verdict_core::digest::hex(&secret);
    for f in &mut c.findings {
        let d = verdict_core::digest::digest(
            verdict_core::digest::DigestKind::Finding,
            &serde_json::json!({ "run_secret": secret, "finding": f.id }),
        );
        f.id = d
            .as_str()
            .get(7..31)
            .and_then(|hex| format!("f-{hex}").parse().ok())
            .ok_or_else(|| {
                fail(
                    UnavailableReason::InvalidOutput,
                    format!("finding {}: no id could be derived", f.id),
                )
            })?;
    }
    Ok(c)
}

/// The combined valid samples of a run.
#[derive(Debug)]
struct Combined {
    rows: Vec<CriterionRow>,
    findings: Vec<Finding>,
    dispositions: Vec<Disposition>,
    disagreements: Vec<String>,
    rationales: Vec<Vec<(Id, String)>>,
}

/// Removes the provider's secrets from every text of a reply the run keeps. A model never sees
/// a key, but a hostile endpoint could put one into its answer.
fn redact_reply(mut v: ValidReply, p: &dyn Provider) -> ValidReply {
    for (_, r) in &mut v.rationales {
        *r = p.redact(r);
    }
    for f in &mut v.findings {
        f.kind = p.redact(&f.kind);
        f.remediation = f.remediation.as_deref().map(|t| p.redact(t));
        if let Some(l) = &mut f.location {
            l.path = l.path.as_deref().map(|t| p.redact(t));
        }
    }
    for d in &mut v.dispositions {
        d.reason = d.reason.as_deref().map(|t| p.redact(t));
    }
    v
}

/// Why the run is over a cap once a call reported `tokens_in` and `tokens_out` (already added
/// to `st`), or `None`.
fn over_budget(
    budget: &crate::config::Budget,
    st: &RunState,
    tokens_in: u64,
    tokens_out: u64,
    cost: Option<f64>,
) -> Option<String> {
    if let Some(cap) = budget.max_total_tokens
        && st.tokens > cap
    {
        return Some(format!(
            "token budget: the call was charged {tokens_in} tokens in and {tokens_out} out, \
             {} in all for the run, over the cap {cap}",
            st.tokens
        ));
    }
    if let Some(cap) = budget.max_cost
        && (st.cost > cap || !st.cost.is_finite())
    {
        return Some(format!(
            "cost budget: the call cost about {:.6}, {:.6} in all for the run, over the cap {cap}",
            cost.unwrap_or(0.0),
            st.cost
        ));
    }
    None
}

fn lock(state: &Mutex<RunState>) -> std::sync::MutexGuard<'_, RunState> {
    // The state is only touched between awaits by this run; a poisoned lock still holds
    // consistent data (every write is a single push or add).
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn retry_delay(failure: &CallFailure, backoff_ms: u64, attempt: u32) -> Duration {
    let asked = match failure {
        CallFailure::Status {
            retry_after: Some(s),
            ..
        } => Some(Duration::from_secs(*s)),
        _ => None,
    };
    let backoff =
        Duration::from_millis(backoff_ms.saturating_mul(1u64 << attempt.saturating_sub(1).min(20)));
    asked.unwrap_or(backoff).min(MAX_RETRY_DELAY)
}

/// A snapshot as recorded: printable, at most 256 characters, else [`UNREPORTED`].
/// `reply`, unless it reports more input or output tokens than any one call can use
/// ([`crate::tokens::MAX_REPORTED_TOKENS`]): such a count is no measurement, and summed or
/// priced it could pass what a stored record may hold.
fn plausible_usage(reply: CallReply) -> Result<CallReply, CallFailure> {
    let max = crate::tokens::MAX_REPORTED_TOKENS;
    for (side, count) in [("input", reply.tokens_in), ("output", reply.tokens_out)] {
        if let Some(n) = count.filter(|n| *n > max) {
            return Err(CallFailure::Protocol(format!(
                "the response reports {n} {side} tokens for one call, more than the {max} any call can use"
            )));
        }
    }
    Ok(reply)
}

fn clean_snapshot(s: &str) -> String {
    if verdict_core::contracts::primitives::is_printable_name(s) {
        s.to_owned()
    } else {
        UNREPORTED.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_double_and_honour_retry_after() {
        let e = CallFailure::Status {
            status: 503,
            retry_after: None,
            detail: String::new(),
        };
        assert_eq!(retry_delay(&e, 100, 1), Duration::from_millis(100));
        assert_eq!(retry_delay(&e, 100, 3), Duration::from_millis(400));
        let e = CallFailure::Status {
            status: 429,
            retry_after: Some(7),
            detail: String::new(),
        };
        assert_eq!(retry_delay(&e, 100, 1), Duration::from_secs(7));
        let e = CallFailure::Status {
            status: 429,
            retry_after: Some(100_000),
            detail: String::new(),
        };
        assert_eq!(retry_delay(&e, 100, 1), MAX_RETRY_DELAY);
    }

    #[test]
    fn snapshots_must_be_printable() {
        assert_eq!(clean_snapshot("fp_abc123"), "fp_abc123");
        assert_eq!(clean_snapshot("a\u{202e}b"), UNREPORTED);
        assert_eq!(clean_snapshot(&"x".repeat(300)), UNREPORTED);
    }
}
