//! The verifiers file: which provider, model, budget and instructions each verifier class uses.
//!
//! ```yaml
//! version: 1
//! classes:
//!   reviewer:
//!     provider: {kind: openai, base_url: "http://127.0.0.1:8000/v1", model: qwen2.5-coder}
//!     budget: {context_tokens: 32000, max_output_tokens: 4096, timeout_s: 120, max_attempts: 3}
//!   security:
//!     provider: {kind: anthropic, model: claude-sonnet-4-5, api_key_env: ANTHROPIC_API_KEY}
//!     template: {file: security.md}
//!     sampling: {n: 3, k: 3}
//! ```
//!
//! API keys are never written in the file: it names the environment variable that holds one,
//! and the key is read only when a provider is built ([`ClassConfig::provider`]), so rendering
//! and planning need no secret at all. JSON or YAML is accepted; JSON is read strictly.

use crate::provider::{AnthropicProvider, CommandProvider, OpenAiProvider, Provider};
use crate::secret::Secret;
use crate::template;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use verdict_core::contracts::{Id, primitives::is_printable_name};

/// Why a verifiers file or a class in it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The file is not valid JSON/YAML or breaks the schema.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What and where.
        message: String,
    },
    /// A value is out of range or inconsistent.
    #[error("class {class:?}: {message}")]
    Invalid {
        /// The class.
        class: String,
        /// What.
        message: String,
    },
    /// The class is not in the file.
    #[error("no verifier class {0:?} in the verifiers file")]
    UnknownClass(String),
    /// The environment variable that should hold the API key is unset or empty.
    #[error("class {class:?}: environment variable {var} (the API key) is not set")]
    MissingKey {
        /// The class.
        class: String,
        /// The variable name (never its value).
        var: String,
    },
    /// The API key is shorter than 8 characters.
    #[error("class {class:?}: the API key in {var} is shorter than 8 characters")]
    ShortKey {
        /// The class.
        class: String,
        /// The variable name (never its value).
        var: String,
    },
    /// The provider could not be built.
    #[error("class {class:?}: cannot build the provider: {message}")]
    Provider {
        /// The class.
        class: String,
        /// Why.
        message: String,
    },
}

/// Per-million-token prices, for the cost estimate on receipts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Price of one million input tokens.
    pub input_per_mtok: f64,
    /// Price of one million output tokens.
    pub output_per_mtok: f64,
}

impl Price {
    /// The estimated cost of a call.
    #[must_use]
    pub fn cost(&self, tokens_in: u64, tokens_out: u64) -> f64 {
        // Token counts far below 2^53 are exact as f64.
        #[expect(
            clippy::cast_precision_loss,
            reason = "token counts are far below 2^53"
        )]
        let (i, o) = (tokens_in as f64, tokens_out as f64);
        (i * self.input_per_mtok + o * self.output_per_mtok) / 1_000_000.0
    }
}

fn zero() -> Option<f64> {
    Some(0.0)
}

fn default_openai_url() -> String {
    "https://api.openai.com/v1".into()
}

fn default_anthropic_url() -> String {
    "https://api.anthropic.com/v1".into()
}

fn default_anthropic_version() -> String {
    crate::provider::ANTHROPIC_VERSION.into()
}

/// Which provider a class calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProviderConfig {
    /// OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, LiteLLM).
    Openai {
        /// Base URL including the version path (default `https://api.openai.com/v1`).
        #[serde(default = "default_openai_url")]
        base_url: String,
        /// Model name.
        model: String,
        /// Environment variable holding the key; none for local servers without auth.
        #[serde(default)]
        api_key_env: Option<String>,
        /// Sampling temperature (default 0); `null` omits it for models that refuse it.
        #[serde(default = "zero")]
        temperature: Option<f64>,
        /// Prices for the cost estimate.
        #[serde(default)]
        price: Option<Price>,
    },
    /// Anthropic messages.
    Anthropic {
        /// Base URL including the version path (default `https://api.anthropic.com/v1`).
        #[serde(default = "default_anthropic_url")]
        base_url: String,
        /// Model name.
        model: String,
        /// Environment variable holding the key.
        api_key_env: String,
        /// `anthropic-version` header (default `2023-06-01`).
        #[serde(default = "default_anthropic_version")]
        version: String,
        /// Sampling temperature (default 0); `null` omits it.
        #[serde(default = "zero")]
        temperature: Option<f64>,
        /// Prices for the cost estimate.
        #[serde(default)]
        price: Option<Price>,
    },
    /// An external program reading the request on stdin and printing the result.
    Command {
        /// Program and arguments (no shell).
        argv: Vec<String>,
        /// Model name recorded on results.
        model: String,
        /// Snapshot recorded on results (programs cannot be asked reliably).
        #[serde(default)]
        snapshot: Option<String>,
        /// Environment variables passed to the program besides `PATH`, `HOME` and `LANG`.
        #[serde(default)]
        pass_env: Vec<String>,
    },
}

impl ProviderConfig {
    /// The model name.
    #[must_use]
    pub fn model(&self) -> &str {
        match self {
            Self::Openai { model, .. }
            | Self::Anthropic { model, .. }
            | Self::Command { model, .. } => model,
        }
    }

    /// The prices, when configured.
    #[must_use]
    pub fn price(&self) -> Option<Price> {
        match self {
            Self::Openai { price, .. } | Self::Anthropic { price, .. } => *price,
            Self::Command { .. } => None,
        }
    }
}

fn d_context() -> u64 {
    32_000
}
fn d_output() -> u32 {
    4_096
}
fn d_timeout() -> u64 {
    300
}
fn d_attempts() -> u32 {
    3
}
fn d_backoff() -> u64 {
    500
}

/// What one run of a class may spend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// The prompt must fit this many estimated tokens (default 32000).
    #[serde(default = "d_context")]
    pub context_tokens: u64,
    /// Cap on each reply (default 4096).
    #[serde(default = "d_output")]
    pub max_output_tokens: u32,
    /// Wall time for the whole run, every attempt and sample included, in seconds (default
    /// 300). Fractions are allowed.
    #[serde(default = "d_timeout_f")]
    pub timeout_s: f64,
    /// Attempts per sample, the first included (default 3); retries happen on 429 and 5xx only.
    #[serde(default = "d_attempts")]
    pub max_attempts: u32,
    /// First retry delay in milliseconds, doubling per retry (default 500); a `Retry-After`
    /// from the provider takes precedence.
    #[serde(default = "d_backoff")]
    pub backoff_ms: u64,
    /// Cap on tokens in and out over the whole run.
    #[serde(default)]
    pub max_total_tokens: Option<u64>,
    /// Cap on the estimated cost over the whole run (needs prices).
    #[serde(default)]
    pub max_cost: Option<f64>,
}

#[expect(clippy::cast_precision_loss, reason = "a small constant")]
fn d_timeout_f() -> f64 {
    d_timeout() as f64
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            context_tokens: d_context(),
            max_output_tokens: d_output(),
            timeout_s: d_timeout_f(),
            max_attempts: d_attempts(),
            backoff_ms: d_backoff(),
            max_total_tokens: None,
            max_cost: None,
        }
    }
}

/// k-of-n sampling: `n` calls, at least `k` of which must give a valid result; any
/// disagreement between valid results makes the criterion inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    /// Calls made.
    pub n: u32,
    /// Valid results needed (default `n`).
    #[serde(default)]
    pub k: Option<u32>,
}

impl Default for Sampling {
    fn default() -> Self {
        Self { n: 1, k: None }
    }
}

impl Sampling {
    /// Valid results needed.
    #[must_use]
    pub fn needed(&self) -> u32 {
        self.k.unwrap_or(self.n)
    }
}

/// Where the class instructions come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TemplateSource {
    /// A built-in template by name (`reviewer`, `security`).
    Builtin(String),
    /// A file, relative to the verifiers file.
    File(PathBuf),
    /// Inline text.
    Text(String),
}

impl Default for TemplateSource {
    fn default() -> Self {
        Self::Builtin("reviewer".into())
    }
}

fn yes() -> bool {
    true
}

/// One verifier class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// The provider.
    pub provider: ProviderConfig,
    /// The budget.
    #[serde(default)]
    pub budget: Budget,
    /// The instructions template (default: built-in `reviewer`).
    #[serde(default)]
    pub template: TemplateSource,
    /// k-of-n sampling (default one call).
    #[serde(default)]
    pub sampling: Sampling,
    /// Whether valid results may be served from and stored in a cache (default true).
    #[serde(default = "yes")]
    pub cache: bool,
}

/// A parsed verifiers file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(
    title = "verdict verifiers file",
    description = "Which provider, model, budget and instructions each verifier class uses (version 1)"
)]
pub struct VerifiersFile {
    /// Format version; must be 1.
    pub version: u32,
    /// The classes, by name.
    pub classes: BTreeMap<Id, ClassConfig>,
}

/// A class ready to run: its configuration with the template text loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedClass {
    /// The class name.
    pub name: Id,
    /// Its configuration.
    pub config: ClassConfig,
    /// The instructions text.
    pub template: String,
}

impl VerifiersFile {
    /// Reads and checks a verifiers file (JSON when it starts with `{`, YAML otherwise).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let bytes = std::fs::read(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// Parses and checks verifiers file content; `origin` names it in errors.
    pub fn parse(bytes: &[u8], origin: &str) -> Result<Self, ConfigError> {
        let perr = |message: String| ConfigError::Parse {
            path: origin.to_owned(),
            message,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| perr(format!("not utf-8: {e}")))?;
        let value = if text.trim_start().starts_with('{') {
            verdict_core::json::parse(bytes).map_err(|e| perr(e.to_string()))?
        } else {
            serde_norway::from_str::<serde_json::Value>(text).map_err(|e| perr(e.to_string()))?
        };
        check_providers(&value).map_err(perr)?;
        let file: Self =
            verdict_core::contracts::decode_plain(&value).map_err(|e| perr(e.to_string()))?;
        if file.version != 1 {
            return Err(perr(format!(
                "version {} is not supported (expected 1)",
                file.version
            )));
        }
        // A value out of range is named with the file it is in, as a parse error is.
        for (name, class) in &file.classes {
            class.check(name).map_err(|e| perr(e.to_string()))?;
        }
        Ok(file)
    }

    /// The class `name`, with its template loaded (`base` is the directory template files are
    /// relative to).
    pub fn class(&self, name: &str, base: &Path) -> Result<ResolvedClass, ConfigError> {
        let (id, config) = self
            .classes
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .ok_or_else(|| ConfigError::UnknownClass(name.to_owned()))?;
        let template = config.load_template(id.as_str(), base)?;
        Ok(ResolvedClass {
            name: id.clone(),
            config: config.clone(),
            template,
        })
    }
}

/// The JSON Schema (draft 2020-12) of a verifiers file, derived from the types that read it.
#[must_use]
pub fn verifiers_schema() -> Value {
    schemars::generate::SchemaSettings::draft2020_12()
        .into_generator()
        .into_root_schema_for::<VerifiersFile>()
        .to_value()
}

/// The `kind` values a provider may have, as written in a verifiers file.
pub const PROVIDER_KINDS: [&str; 3] = ["openai", "anthropic", "command"];

/// Checks every class's `provider` for a known `kind` before the typed decode, whose message
/// for a wrong one would speak of serde's tagged enums rather than of the file.
fn check_providers(value: &Value) -> Result<(), String> {
    let Some(classes) = value.get("classes").and_then(Value::as_object) else {
        return Ok(()); // the typed decode says what is wrong
    };
    let kinds = PROVIDER_KINDS.join(", ");
    for (name, class) in classes {
        let at = format!("/classes/{name}/provider");
        let Some(provider) = class.get("provider") else {
            continue; // "missing field `provider`" from the decode is plain enough
        };
        let Some(provider) = provider.as_object() else {
            return Err(format!(
                "{at}: the provider must be a mapping with a `kind` (one of {kinds})"
            ));
        };
        match provider.get("kind") {
            None => {
                return Err(format!("{at}: `kind` is missing; expected one of {kinds}"));
            }
            Some(Value::String(k)) if PROVIDER_KINDS.contains(&k.as_str()) => {}
            Some(other) => {
                return Err(format!(
                    "{at}/kind: {other} is not a provider kind; expected one of {kinds}"
                ));
            }
        }
    }
    Ok(())
}

impl ClassConfig {
    fn check(&self, class: &Id) -> Result<(), ConfigError> {
        let bad = |message: String| ConfigError::Invalid {
            class: class.to_string(),
            message,
        };
        let b = &self.budget;
        if b.context_tokens == 0 || b.max_output_tokens == 0 {
            return Err(bad(
                "budget.context_tokens and budget.max_output_tokens must be positive".into(),
            ));
        }
        // The context budget is recorded in every run's manifest; past what a provider may
        // report for one call it means nothing, and far past it no record could hold it.
        if b.context_tokens > crate::tokens::MAX_BUDGET_TOKENS {
            return Err(bad(format!(
                "budget.context_tokens is {}, above the most a call can use, {}",
                b.context_tokens,
                crate::tokens::MAX_BUDGET_TOKENS
            )));
        }
        if !(b.timeout_s.is_finite() && b.timeout_s > 0.0 && b.timeout_s <= 86_400.0) {
            return Err(bad("budget.timeout_s must be > 0 and at most 86400".into()));
        }
        if !(1..=10).contains(&b.max_attempts) {
            return Err(bad("budget.max_attempts must be between 1 and 10".into()));
        }
        if b.max_cost.is_some_and(|c| !c.is_finite() || c < 0.0) {
            return Err(bad("budget.max_cost must be finite and >= 0".into()));
        }
        if b.max_cost.is_some() && self.provider.price().is_none() {
            return Err(bad(
                "budget.max_cost needs provider.price to estimate costs".into(),
            ));
        }
        if !(1..=16).contains(&self.sampling.n)
            || !(1..=self.sampling.n).contains(&self.sampling.needed())
        {
            return Err(bad("sampling needs 1 <= k <= n <= 16".into()));
        }
        let model = self.provider.model();
        if !is_printable_name(model) {
            return Err(bad(
                "provider.model must be 1-256 printable characters".into()
            ));
        }
        match &self.provider {
            ProviderConfig::Openai {
                base_url,
                temperature,
                price,
                api_key_env,
                ..
            } => {
                check_url(base_url, api_key_env.is_some()).map_err(bad)?;
                check_temperature(*temperature).map_err(bad)?;
                check_price(*price).map_err(bad)?;
                if api_key_env.as_deref().is_some_and(|v| !is_env_name(v)) {
                    return Err(bad(
                        "provider.api_key_env must be an environment variable name".into(),
                    ));
                }
            }
            ProviderConfig::Anthropic {
                base_url,
                temperature,
                price,
                api_key_env,
                version,
                ..
            } => {
                // The key goes with every call.
                check_url(base_url, true).map_err(bad)?;
                check_temperature(*temperature).map_err(bad)?;
                check_price(*price).map_err(bad)?;
                if !is_env_name(api_key_env) {
                    return Err(bad(
                        "provider.api_key_env must be an environment variable name".into(),
                    ));
                }
                if !is_printable_name(version) {
                    return Err(bad("provider.version must be printable".into()));
                }
            }
            ProviderConfig::Command {
                argv,
                snapshot,
                pass_env,
                ..
            } => {
                if argv.first().is_none_or(String::is_empty) {
                    return Err(bad("provider.argv must name a program".into()));
                }
                if snapshot.as_deref().is_some_and(|s| !is_printable_name(s)) {
                    return Err(bad(
                        "provider.snapshot must be 1-256 printable characters".into()
                    ));
                }
                if let Some(v) = pass_env.iter().find(|v| !is_env_name(v)) {
                    return Err(bad(format!(
                        "provider.pass_env entry {v:?} is not a variable name"
                    )));
                }
                if let Some(v) = pass_env
                    .iter()
                    .find(|v| verdict_core::child_env::is_withheld(v))
                {
                    return Err(bad(format!(
                        "provider.pass_env entry {v:?} is one of verdict's own settings or a store login, never given to a provider program"
                    )));
                }
            }
        }
        if let TemplateSource::Builtin(name) = &self.template
            && template::builtin(name).is_none()
        {
            return Err(bad(format!(
                "unknown built-in template {name:?} (known: {})",
                template::BUILTIN_NAMES.join(", ")
            )));
        }
        Ok(())
    }

    /// Loads the template text.
    pub fn load_template(&self, class: &str, base: &Path) -> Result<String, ConfigError> {
        match &self.template {
            TemplateSource::Builtin(name) => {
                template::builtin(name)
                    .map(str::to_owned)
                    .ok_or_else(|| ConfigError::Invalid {
                        class: class.to_owned(),
                        message: format!("unknown built-in template {name:?}"),
                    })
            }
            TemplateSource::Text(t) => Ok(t.clone()),
            TemplateSource::File(p) => {
                let path = base.join(p);
                std::fs::read_to_string(&path).map_err(|e| ConfigError::Read {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })
            }
        }
    }

    /// Builds the provider, reading the API key from the environment now.
    pub fn provider(&self, class: &str) -> Result<Arc<dyn Provider>, ConfigError> {
        let key = |var: &str| match Secret::from_env(var) {
            None => Err(ConfigError::MissingKey {
                class: class.to_owned(),
                var: var.to_owned(),
            }),
            // A key this short could not be told apart from ordinary text when redacting.
            Some(k) if k.expose().len() < 8 => Err(ConfigError::ShortKey {
                class: class.to_owned(),
                var: var.to_owned(),
            }),
            Some(k) => Ok(k),
        };
        let perr = |message: String| ConfigError::Provider {
            class: class.to_owned(),
            message,
        };
        Ok(match &self.provider {
            ProviderConfig::Openai {
                base_url,
                model,
                api_key_env,
                temperature,
                ..
            } => {
                let k = api_key_env.as_deref().map(key).transpose()?;
                Arc::new(OpenAiProvider::new(base_url, model, k, *temperature).map_err(perr)?)
            }
            ProviderConfig::Anthropic {
                base_url,
                model,
                api_key_env,
                version,
                temperature,
                ..
            } => Arc::new(
                AnthropicProvider::new(base_url, model, key(api_key_env)?, version, *temperature)
                    .map_err(perr)?,
            ),
            ProviderConfig::Command {
                argv,
                model,
                snapshot,
                pass_env,
            } => Arc::new(
                CommandProvider::new(argv.clone(), model, snapshot.clone(), pass_env.clone())
                    .map_err(perr)?,
            ),
        })
    }
}

/// Checks a provider's `base_url`; a provider that `sends_key` may use plain http only to the
/// loopback, so a file cannot send a key in clear across a network.
fn check_url(url: &str, sends_key: bool) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
            if u.password().is_some() || !u.username().is_empty() {
                Err("provider.base_url must not carry credentials; use api_key_env".into())
            } else if let Some(why) = crate::provider::plain_http_refusal(&u).filter(|_| sends_key)
            {
                Err(format!("provider.base_url {url:?}: {why}"))
            } else {
                Ok(())
            }
        }
        _ => Err(format!("provider.base_url {url:?} is not an http(s) url")),
    }
}

fn check_temperature(t: Option<f64>) -> Result<(), String> {
    match t {
        Some(t) if !(t.is_finite() && (0.0..=2.0).contains(&t)) => {
            Err("provider.temperature must be within 0..=2".into())
        }
        _ => Ok(()),
    }
}

/// The highest price per million tokens a verifiers file may set. The dearest models cost a
/// few hundred currency units per million tokens; a thousand million leaves room for any
/// currency, and keeps a run's estimated cost (at most about 3.2e10 tokens, see
/// [`crate::tokens::MAX_REPORTED_TOKENS`], so about 3.2e13 at this price) far inside the
/// ±(2^53 - 1) a stored receipt may hold.
pub const MAX_PRICE_PER_MTOK: f64 = 1e9;

fn check_price(p: Option<Price>) -> Result<(), String> {
    let Some(p) = p else { return Ok(()) };
    for (field, x) in [
        ("input_per_mtok", p.input_per_mtok),
        ("output_per_mtok", p.output_per_mtok),
    ] {
        if !(x.is_finite() && x >= 0.0) {
            return Err(format!(
                "provider.price.{field} must be finite and >= 0, not {x}"
            ));
        }
        if x > MAX_PRICE_PER_MTOK {
            return Err(format!(
                "provider.price.{field} is {x:e}, above the highest price a file may set, {MAX_PRICE_PER_MTOK:e} per million tokens"
            ));
        }
    }
    Ok(())
}

fn is_env_name(s: &str) -> bool {
    let b = s.as_bytes();
    matches!(b.first(), Some(c) if c.is_ascii_alphabetic() || *c == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
        && b.len() <= 128
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<VerifiersFile, ConfigError> {
        VerifiersFile::parse(s.as_bytes(), "verifiers")
    }

    #[test]
    fn yaml_and_json_with_defaults() {
        let f = parse(
            "version: 1\nclasses:\n  reviewer:\n    provider: {kind: openai, base_url: 'http://127.0.0.1:8000/v1', model: qwen}\n  security:\n    provider: {kind: anthropic, model: claude, api_key_env: ANTHROPIC_API_KEY}\n    template: {builtin: security}\n    sampling: {n: 3, k: 2}\n  local:\n    provider: {kind: command, argv: [agent, --json], model: agent}\n",
        )
        .unwrap();
        let r = &f.classes[&"reviewer".parse::<Id>().unwrap()];
        assert_eq!(r.budget, Budget::default());
        assert_eq!(r.sampling, Sampling::default());
        assert!(r.cache);
        assert!(
            matches!(&r.provider, ProviderConfig::Openai { temperature: Some(t), api_key_env: None, .. } if *t == 0.0)
        );
        let s = f.class("security", Path::new(".")).unwrap();
        assert!(s.template.contains("security engineer"));
        assert_eq!(s.config.sampling.needed(), 2);
        assert!(
            matches!(&s.config.provider, ProviderConfig::Anthropic { base_url, version, .. }
            if base_url == "https://api.anthropic.com/v1" && version == "2023-06-01")
        );
        let j = parse(r#"{"version": 1, "classes": {"reviewer": {"provider": {"kind": "openai", "model": "m", "temperature": null}}}}"#).unwrap();
        let r = &j.classes[&"reviewer".parse::<Id>().unwrap()];
        assert!(
            matches!(
                &r.provider,
                ProviderConfig::Openai {
                    temperature: None,
                    ..
                }
            ),
            "null omits the temperature"
        );
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let base = "version: 1\nclasses:\n  reviewer:\n    provider: {kind: openai, model: m";
        for (tail, want) in [
            ("}\n    budgte: {}\n", "unknown field"),
            ("}\n    sampling: {n: 2, k: 3}\n", "k <= n"),
            (", base_url: 'http://user:pw@host/v1'}\n", "credentials"),
            (", base_url: 'file:///etc/passwd'}\n", "not an http(s) url"),
            (", temperature: 9}\n", "temperature"),
            ("}\n    budget: {max_cost: 1}\n", "needs provider.price"),
            ("}\n    budget: {max_attempts: 0}\n", "max_attempts"),
            ("}\n    budget: {timeout_s: -1}\n", "timeout_s"),
            (
                "}\n    template: {builtin: nope}\n",
                "unknown built-in template",
            ),
            (", api_key_env: 'sk-abc=def'}\n", "variable name"),
            (
                ", price: {input_per_mtok: 1e25, output_per_mtok: 1}}\n",
                "provider.price.input_per_mtok is 1e25, above",
            ),
            (
                ", price: {input_per_mtok: 1, output_per_mtok: -1}}\n",
                "provider.price.output_per_mtok must be finite",
            ),
            (
                "}\n    budget: {context_tokens: 9007199254740991}\n",
                "budget.context_tokens is 9007199254740991, above",
            ),
        ] {
            let err = VerifiersFile::parse(format!("{base}{tail}").as_bytes(), "team/v.yaml")
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{tail}: {err}");
            // Every refusal names the file it read.
            assert!(err.starts_with("team/v.yaml: "), "{tail}: {err}");
        }
        assert!(
            parse("version: 2\nclasses: {}\n")
                .unwrap_err()
                .to_string()
                .contains("version 2")
        );
        assert!(
            parse("{\"version\": 1, \"version\": 1, \"classes\": {}}")
                .unwrap_err()
                .to_string()
                .contains("duplicate")
        );
        assert!(parse("version: 1\nclasses:\n  Bad Name: {provider: {kind: command, argv: [x], model: m}}\n").is_err());
        let f = parse("version: 1\nclasses: {}\n").unwrap();
        assert_eq!(
            f.class("reviewer", Path::new(".")).unwrap_err(),
            ConfigError::UnknownClass("reviewer".into())
        );
    }

    #[test]
    fn a_wrong_provider_is_named_with_the_file_the_place_and_the_valid_kinds() {
        for (text, place, shown) in [
            (
                "version: 1\nclasses:\n  reviewer:\n    provider: {kind: openaii, model: m}\n",
                "/classes/reviewer/provider/kind",
                "\"openaii\" is not a provider kind",
            ),
            (
                r#"{"version": 1, "classes": {"sec": {"provider": {"kind": 7, "model": "m"}}}}"#,
                "/classes/sec/provider/kind",
                "7 is not a provider kind",
            ),
            (
                "version: 1\nclasses:\n  reviewer:\n    provider: {model: m}\n",
                "/classes/reviewer/provider",
                "`kind` is missing",
            ),
            (
                "version: 1\nclasses:\n  reviewer:\n    provider: openai\n",
                "/classes/reviewer/provider",
                "must be a mapping",
            ),
        ] {
            let err = VerifiersFile::parse(text.as_bytes(), "team/verifiers.yaml")
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("team/verifiers.yaml: "), "{err}");
            assert!(err.contains(place) && err.contains(shown), "{err}");
            assert!(err.contains("openai, anthropic, command"), "{err}");
            assert!(
                !err.contains("tagged") && !err.contains("ProviderConfig"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_key_is_refused_plain_http_to_any_host_but_the_loopback() {
        let file = |provider: &str| {
            format!("version: 1\nclasses:\n  reviewer:\n    provider: {{{provider}}}\n")
        };
        for url in [
            "http://192.0.2.7:8000/v1",
            "HTTP://models.example/v1",
            "http://[::ffff:127.0.0.1]/v1",
            "http://localhost.evil.example/v1",
        ] {
            for provider in [
                format!("kind: anthropic, base_url: '{url}', model: m, api_key_env: K"),
                format!("kind: openai, base_url: '{url}', model: m, api_key_env: K"),
            ] {
                let err = VerifiersFile::parse(file(&provider).as_bytes(), "team/v.yaml")
                    .unwrap_err()
                    .to_string();
                assert!(
                    err.starts_with("team/v.yaml: class \"reviewer\": provider.base_url ")
                        && err.contains(&format!("{url:?}"))
                        && err.contains("unencrypted"),
                    "{provider}: {err}"
                );
            }
            // An OpenAI-compatible server without a key gets none, so any host will do.
            let keyless = format!("kind: openai, base_url: '{url}', model: m");
            assert!(
                VerifiersFile::parse(file(&keyless).as_bytes(), "v.yaml").is_ok(),
                "{url}"
            );
        }
        for url in [
            "http://127.0.0.1:8000/v1",
            "http://127.9.9.9/v1",
            "http://[::1]:8000/v1",
            "http://localhost:11434/v1",
            "https://models.example/v1",
        ] {
            for provider in [
                format!("kind: anthropic, base_url: '{url}', model: m, api_key_env: K"),
                format!("kind: openai, base_url: '{url}', model: m, api_key_env: K"),
            ] {
                let parsed = VerifiersFile::parse(file(&provider).as_bytes(), "v.yaml");
                assert!(parsed.is_ok(), "{provider}: {parsed:?}");
            }
        }
    }

    #[test]
    fn template_files_are_relative_to_the_verifiers_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.md"), "Check the migrations.").unwrap();
        let f = parse("version: 1\nclasses:\n  db:\n    provider: {kind: command, argv: [x], model: m}\n    template: {file: t.md}\n").unwrap();
        assert_eq!(
            f.class("db", dir.path()).unwrap().template,
            "Check the migrations."
        );
        assert!(matches!(
            f.class("db", Path::new("/nonexistent")),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn costs_follow_prices() {
        let p = Price {
            input_per_mtok: 3.0,
            output_per_mtok: 15.0,
        };
        assert!((p.cost(1_000_000, 100_000) - 4.5).abs() < 1e-12);
        // The dearest price a file may set, over the most a run can charge, stays well inside
        // what a stored receipt may hold.
        let dear = Price {
            input_per_mtok: MAX_PRICE_PER_MTOK,
            output_per_mtok: MAX_PRICE_PER_MTOK,
        };
        let most = 16 * crate::tokens::MAX_REPORTED_TOKENS;
        assert!(dear.cost(most, most) < 9_007_199_254_740_991.0 / 100.0);
        let f = parse(&format!(
            "version: 1\nclasses:\n  reviewer:\n    provider: {{kind: openai, model: m, price: {{input_per_mtok: {MAX_PRICE_PER_MTOK}, output_per_mtok: 0}}}}\n"
        ));
        assert!(f.is_ok(), "{f:?}");
    }
}
