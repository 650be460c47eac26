//! # verdict-judge: the model verifier
//!
//! Its one job: turn a verification request into a verification result from a model, in a way
//! that can be audited and cannot be talked into a pass. The model produces evidence only; the
//! Gate decides.
//!
//! - [`manifest`]: the context manifest, built under a token budget by deterministic
//!   truncation; a required item that does not fit ends the run `context_incomplete`.
//! - [`render`] and [`sanitize`]: untrusted text goes between per-call random-nonce
//!   delimiters, with invisible and bidirectional characters and delimiter brackets escaped,
//!   and the rules repeated after the data.
//! - [`provider`]: OpenAI-compatible chat completions, Anthropic messages and an external
//!   `command`, behind one small [`provider::Provider`] trait.
//! - [`reply`]: the result schema (derived from Rust types) and the strict validation of a
//!   reply: schema, nonce, one row per asked criterion, only refs from the manifest.
//! - [`judge`]: the run loop ([`Judge`]): deadline, bounded retries, budget, k-of-n sampling
//!   without voting, caching of valid results only, receipts.
//! - [`config`]: the verifiers file; API keys come from the environment and are kept in
//!   [`secret::Secret`], which nothing prints.
//!
//! ```
//! use verdict_judge::config::{ClassConfig, ResolvedClass, VerifiersFile};
//! use verdict_judge::render::Nonce;
//!
//! let file = VerifiersFile::parse(br#"{"version": 1, "classes": {"reviewer":
//!     {"provider": {"kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "m"}}}}"#,
//!     "verifiers.json").unwrap();
//! let class = file.class("reviewer", std::path::Path::new(".")).unwrap();
//! let request = verdict_judge::request_file::parse(br#"{
//!     "schema": "verdict.judge-request/v1", "result_id": "vr-1",
//!     "verifier": {"principal": "reviewer-1", "class": "reviewer", "run": "vrun-1"},
//!     "subject_digest": "sha256:0000000000000000000000000000000000000000000000000000000000000000",
//!     "generation": 1,
//!     "objective": {"revision": "r1", "text": "Add a retry"},
//!     "criteria": {"revision": "c1", "items": [{"id": "tests-pass", "text": "Tests pass"}]},
//!     "resources": [{"name": "diff", "kind": "git_diff", "text": "+retry()\n"}]
//! }"#, "request.json", std::path::Path::new(".")).unwrap();
//!
//! // Planning and rendering need no provider and no key.
//! let plan = verdict_judge::judge::plan_request(&class, &request).unwrap();
//! assert!(plan.manifest.complete);
//! let prompt = plan.render(&Nonce::random().unwrap());
//! assert!(prompt.user.contains("+retry()"));
//! // With a provider: `Judge::from_config(&file, "reviewer", dir)?.run(&request).await`.
//! ```

pub mod cache;
pub mod config;
pub mod judge;
pub mod manifest;
pub mod provider;
pub mod receipt;
pub mod render;
pub mod reply;
pub mod request;
pub mod request_file;
mod sampling;
pub mod sanitize;
pub mod secret;
pub mod template;
pub mod tokens;

pub use judge::{Judge, JudgeError, JudgeRun};
pub use request::{JudgeRequest, RequestError};
