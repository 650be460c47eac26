//! The runner worker's checks: the definitions it was given, keyed by their definition digest,
//! and the [`ChecksKit`] that runs, for each subject, exactly the checks that subject pins.
//!
//! A subject pins each check by id and definition digest (`checks[].definition_digest`), so
//! two subjects may pin different definitions of one check id. The runner resolves every pin
//! among the definitions it holds; a subject pinning a definition the runner does not hold (or
//! holds only under another digest: other bytes, other `--var` values) is refused before
//! anything runs, and its job is given up at once with the reason, so the Gate sees the
//! evidence missing rather than evidence of another definition.

use crate::engine::Principal;
use crate::workers::{ChecksKit, ChecksRun, JobFailure};
use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::Arc;
use verdict_core::contracts::Subject;
use verdict_core::digest::Digest;
use verdict_probes::check::Check;
use verdict_probes::load::Spec;
use verdict_probes::runner::{self, RunOptions, Stopper};

/// Check definitions by their definition digest.
#[derive(Debug, Clone, Default)]
pub struct CheckDefinitions {
    by_digest: BTreeMap<Digest, (Arc<Check>, Digest)>,
}

impl CheckDefinitions {
    /// The definitions of every check of `specs` (loaded with their variables), each under its
    /// own definition digest.
    #[must_use]
    pub fn new(specs: impl IntoIterator<Item = Spec>) -> Self {
        let mut by_digest = BTreeMap::new();
        for spec in specs {
            for check in &spec.checks {
                by_digest
                    .entry(check.definition_digest.clone())
                    .or_insert_with(|| (check.clone(), spec.source_digest.clone()));
            }
        }
        Self { by_digest }
    }

    /// How many definitions are held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// Whether none is.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// The spec of exactly the checks `subject` pins, each the definition of its pinned digest,
    /// in the subject's order; or why not, naming each pin that cannot be resolved.
    pub fn pinned(&self, subject: &Subject) -> Result<Spec, String> {
        let mut checks = Vec::new();
        let mut missing = Vec::new();
        for pin in &subject.checks {
            match self.by_digest.get(&pin.definition_digest) {
                Some((check, _)) if check.id == pin.id => checks.push(check.clone()),
                Some((check, _)) => missing.push(format!(
                    "check {} pins definition {}, which is this runner's definition of check {}",
                    pin.id, pin.definition_digest, check.id
                )),
                None => {
                    let held: Vec<String> = self
                        .by_digest
                        .iter()
                        .filter(|(_, (c, _))| c.id == pin.id)
                        .map(|(d, _)| d.to_string())
                        .collect();
                    missing.push(if held.is_empty() {
                        format!(
                            "check {} pins definition {}, which this runner was not given",
                            pin.id, pin.definition_digest
                        )
                    } else {
                        format!(
                            "check {} pins definition {}, but this runner's definition of it hashes to {} (other bytes or --var values)",
                            pin.id,
                            pin.definition_digest,
                            held.join(", ")
                        )
                    });
                }
            }
        }
        if !missing.is_empty() {
            return Err(missing.join("; "));
        }
        // The spec's source is the definitions it was made of, in order.
        let sources: Vec<u8> = checks
            .iter()
            .flat_map(|c| c.definition_digest.as_str().bytes().chain(*b"\n"))
            .collect();
        Ok(Spec {
            source_digest: verdict_core::digest::raw(&sources),
            checks,
        })
    }
}

/// Runs the checks each subject pins with the probes, and files their evidence as the caller.
#[derive(Debug, Clone)]
pub struct ProbeChecks {
    definitions: CheckDefinitions,
}

impl ProbeChecks {
    /// A kit over `definitions`.
    #[must_use]
    pub const fn new(definitions: CheckDefinitions) -> Self {
        Self { definitions }
    }
}

#[async_trait]
impl ChecksKit for ProbeChecks {
    async fn run_checks(
        &self,
        caller: &Principal,
        subject: &Subject,
        subject_digest: &Digest,
    ) -> Result<ChecksRun, JobFailure> {
        let spec = self
            .definitions
            .pinned(subject)
            .map_err(|why| JobFailure { why, retry: false })?;
        let opts = RunOptions {
            jobs: runner::DEFAULT_JOBS,
            deadline: None,
            baseline: None,
            agent: None,
        };
        let report = runner::run(&spec, opts, Arc::new(runner::Quiet), &Stopper::new()).await;
        let docs = verdict_probes::evidence::evidence_documents(
            &report,
            &spec,
            subject_digest,
            caller.name(),
        )?;
        let outcome = format!(
            "{} checks, {}",
            docs.len(),
            if report.passed {
                "passed"
            } else {
                "not all passed"
            }
        );
        Ok(ChecksRun {
            evidence: docs,
            outcome,
        })
    }
}
