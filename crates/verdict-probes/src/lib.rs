//! # verdict-probes: deterministic checks
//!
//! One job: run a check spec (docs/checks.md) against a live system and say, per criterion,
//! `pass`, `fail` or `error`, with what was observed, and turn that into check evidence the
//! Gate can count (docs/spec/evidence.md).
//!
//! Main items:
//! - [`load::load_file`] / [`load::load_bytes`]: YAML or strict JSON, `{{var}}` substitution,
//!   validation of everything (unknown fields, durations, weights, regexes, CEL, JSONPath)
//!   before anything runs, normalisation and [`check::Check::definition_digest`].
//! - [`probe::Probe`]: `command`, `json`, `http`, `tcp`, `dns`, `file`, `log`, `tls`.
//! - [`runner::run`]: the modes (`assert`, `converge`, `hold`, `unchanged`), concurrency,
//!   `--during` and stopping; [`runner::take_baseline`] for `unchanged`.
//! - [`result::Report`]: per-criterion results and the rollup (`c`, `rec_v`, `cat_v`);
//!   [`report::render`] writes it as a table, JSON, JUnit or TAP.
//! - [`evidence::evidence_documents`]: check evidence bound to a subject.
//! - [`schema::check_spec_schema`]: the JSON Schema of a check spec, true of the loader.
//!
//! ```
//! use std::collections::BTreeMap;
//! use verdict_probes::{load, runner};
//!
//! let spec = load::load_bytes(
//!     br#"
//! version: 1
//! criteria:
//!   - id: shell-works
//!     mode: assert
//!     probe: {kind: command, argv: [sh, -c, "echo ok"], stdout: {equals: "ok\n"}}
//! "#,
//!     load::Format::Yaml,
//!     &BTreeMap::new(),
//! )?;
//! // What a subject pins in `checks[].definition_digest`:
//! println!("{}", spec.checks[0].definition_digest);
//! let rt = tokio::runtime::Runtime::new()?;
//! let report = rt.block_on(runner::run(
//!     &spec,
//!     runner::RunOptions::default(),
//!     std::sync::Arc::new(runner::Quiet),
//!     &runner::Stopper::new(),
//! ));
//! assert!(report.passed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod baseline;
pub mod cel_expect;
pub mod check;
pub mod clock;
pub mod diff;
pub mod duration;
pub mod error;
pub mod evidence;
mod files;
pub mod inspection;
pub mod load;
mod modes;
pub mod output;
pub mod positions;
pub mod probe;
pub mod process;
pub mod progress;
pub mod report;
pub mod result;
pub mod runner;
pub mod schema;
pub mod spec;
pub mod text_match;
pub mod vars;
pub mod yaml;
