//! Probes: what one observation of a live system is, for each kind.
//!
//! Every probe does the same two things: observe (run a command, send a request, read a file)
//! and, unless only a snapshot is wanted, judge what it saw against its expectations. It never
//! panics and never hangs: its caller bounds it with the probe's timeout, and output is read
//! with a cap ([`crate::output`]).

pub mod command;
pub mod dns;
pub mod file;
pub mod http;
pub mod json;
pub mod log;
pub mod net;
pub mod tcp;
pub mod tls;

use crate::duration::Dur;
use crate::output::Captured;
use crate::spec::ProbeDef;
pub use crate::spec::Unreachable;
use serde::Serialize;
use serde_json::{Map, Value};
use std::time::Duration;
use verdict_core::contracts::CheckOutcome;
use verdict_core::digest::Digest;
use verdict_core::json::JsonErrorKind;

/// Default timeout of one observation.
pub const DEFAULT_PROBE_TIMEOUT: Dur = Dur::from_secs(10);

/// What a probe kept of its main output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct OutputInfo {
    /// The first bytes, as text.
    pub excerpt: String,
    /// Whether the excerpt is shorter than the output.
    pub truncated: bool,
    /// SHA-256 of the whole output.
    pub digest: Digest,
    /// Size of the whole output in bytes.
    pub bytes: u64,
}

impl OutputInfo {
    /// Summarises captured output.
    #[must_use]
    pub fn of(c: &Captured) -> Self {
        let (excerpt, truncated) = c.excerpt();
        Self {
            excerpt,
            truncated: truncated || c.total > c.bytes.len() as u64,
            digest: c.digest.clone(),
            bytes: c.total,
        }
    }

    /// Summarises captured output without an excerpt of it, saying why in its place.
    #[must_use]
    pub fn withheld(c: &Captured, why: &str) -> Self {
        Self {
            excerpt: format!("(no excerpt kept: {why})"),
            truncated: c.total > 0,
            digest: c.digest.clone(),
            bytes: c.total,
        }
    }

    /// [`OutputInfo::of`], or [`OutputInfo::withheld`] when there is a reason to withhold.
    #[must_use]
    pub fn of_unless(c: &Captured, withheld: Option<&str>) -> Self {
        withheld.map_or_else(|| Self::of(c), |why| Self::withheld(c, why))
    }
}

/// One observation's result, before a mode places it in time.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Pass, fail or error.
    pub outcome: CheckOutcome,
    /// Why, in one line.
    pub reason: String,
    /// Small structured facts seen (status code, exit code, counts, ...).
    pub facts: Map<String, Value>,
    /// The main output, bounded.
    pub output: Option<OutputInfo>,
    /// The observed state, for `unchanged` comparisons (only when asked for).
    pub snapshot: Option<Value>,
    /// Whether the error is that the system could not be reached (see [`Unreachable`]).
    pub unreachable: bool,
}

impl Sample {
    /// An error sample: the probe could not observe.
    #[must_use]
    pub fn error(reason: impl Into<String>) -> Self {
        Self {
            outcome: CheckOutcome::Error,
            reason: reason.into(),
            facts: Map::new(),
            output: None,
            snapshot: None,
            unreachable: false,
        }
    }

    /// An error sample: the system could not be reached.
    #[must_use]
    pub fn unreachable(reason: impl Into<String>) -> Self {
        Self {
            unreachable: true,
            ..Self::error(reason)
        }
    }

    /// A sample with facts and output, to be judged.
    #[must_use]
    pub fn observed(facts: Map<String, Value>, output: Option<OutputInfo>) -> Self {
        Self {
            outcome: CheckOutcome::Pass,
            reason: String::new(),
            facts,
            output,
            snapshot: None,
            unreachable: false,
        }
    }

    /// Sets the outcome and reason.
    #[must_use]
    pub fn judged(mut self, verdict: Result<String, Judged>) -> Self {
        match verdict {
            Ok(why) => {
                self.outcome = CheckOutcome::Pass;
                self.reason = why;
            }
            Err(Judged::Fail(why)) => {
                self.outcome = CheckOutcome::Fail;
                self.reason = why;
            }
            Err(Judged::Error(why)) => {
                self.outcome = CheckOutcome::Error;
                self.reason = why;
            }
            Err(Judged::Unreachable(why)) => {
                self.outcome = CheckOutcome::Error;
                self.reason = why;
                self.unreachable = true;
            }
        }
        self
    }

    /// Applies a probe's `unreachable` setting: with `fail`, an unreachable system is a failure
    /// of the criterion; every other error stays an error.
    #[must_use]
    pub fn unreachable_as(mut self, setting: Unreachable) -> Self {
        if self.unreachable && self.outcome == CheckOutcome::Error && setting == Unreachable::Fail {
            self.outcome = CheckOutcome::Fail;
            self.reason = format!("unreachable (counted as a failure): {}", self.reason);
        }
        self
    }
}

/// A judgement that is not a pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged {
    /// The expectation does not hold.
    Fail(String),
    /// The expectation could not be evaluated.
    Error(String),
    /// The system could not be reached: an error unless the probe says `unreachable: fail`.
    Unreachable(String),
}

/// Reads an observed system's JSON (`what` names it in the error: `stdout`, `body`, `source`)
/// with the core's strict reader, as verdict reads every other input. A document the reader
/// refuses could be read two ways (a key named twice: first or last?), or differently by
/// another reader (an integer beyond ±(2^53−1), a number that is not finite), so no
/// expectation is judged on it: the caller makes it an `error`.
pub(crate) fn strict_json(bytes: &[u8], what: &str) -> Result<Value, StrictRefusal> {
    verdict_core::json::parse(bytes).map_err(|e| {
        let message = match &e.kind {
            JsonErrorKind::DuplicateKey(key) => format!(
                "{what} is not strict JSON: key {} named twice at {} (line {} column {})",
                verdict_core::quote::quoted(key),
                verdict_core::quote::quoted(&e.path),
                e.line,
                e.column
            ),
            JsonErrorKind::IntegerOutOfRange(_)
            | JsonErrorKind::NonFinite(_)
            | JsonErrorKind::Underflow(_) => {
                format!("{what} is not strict JSON: {e}")
            }
            JsonErrorKind::InvalidUtf8
            | JsonErrorKind::ByteOrderMark
            | JsonErrorKind::TooDeep
            | JsonErrorKind::Syntax(_) => format!("{what} is not json: {e}"),
        };
        StrictRefusal {
            ambiguous: matches!(e.kind, JsonErrorKind::DuplicateKey(_)),
            message,
        }
    })
}

/// Reads `bytes` (`what` names them) as strict JSON and evaluates `expect` over it. Both take
/// time that grows with the document and the expression, so they run off the async thread:
/// the probe's timeout and the run's deadline still stop the observation. The CEL crate
/// cannot be cancelled; a blocking thread left behind finishes on its own.
pub(crate) async fn expect_json(
    expect: &crate::cel_expect::Expect,
    bytes: &[u8],
    what: &'static str,
) -> Result<(), Judged> {
    let (e, bytes) = (expect.clone(), bytes.to_vec());
    let evaluated = tokio::task::spawn_blocking(move || {
        let doc = strict_json(&bytes, what).map_err(|r| Judged::Error(r.message))?;
        match e.eval(&doc) {
            Ok(true) => Ok(()),
            Ok(false) => Err(Judged::Fail(format!("{} is false", e.source()))),
            Err(m) => Err(Judged::Error(m)),
        }
    })
    .await;
    evaluated.unwrap_or_else(|e| Err(Judged::Error(format!("the evaluation failed: {e}"))))
}

/// Why [`strict_json`] refused a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StrictRefusal {
    /// The document names a key twice: an error in every mode, so that a snapshot does not
    /// keep as text what an expectation refuses to read.
    pub(crate) ambiguous: bool,
    /// What is wrong and where, for the sample's reason.
    pub(crate) message: String,
}

/// What a snapshot keeps of output that may be JSON: the document when the strict reader
/// takes it, the text when it is not JSON, and an error when it names a key twice or is not
/// text (with bad bytes replaced, two different outputs would compare equal).
pub(crate) fn snapshot_of(bytes: &[u8], what: &str) -> Result<Value, Judged> {
    match strict_json(bytes, what) {
        Ok(v) => Ok(v),
        Err(r) if r.ambiguous => Err(Judged::Error(r.message)),
        Err(_) => crate::output::strict_text(bytes)
            .map(|t| Value::String(t.to_owned()))
            .map_err(|e| Judged::Error(format!("{what} {e}"))),
    }
}

/// A field of a probe definition that is wrong: pointer relative to the probe, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Relative JSON pointer (`/expect`), or empty for the probe itself.
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl FieldError {
    /// A new field error.
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

/// Spec-wide values a probe definition falls back on.
#[derive(Debug, Clone, Copy)]
pub struct ProbeDefaults {
    /// Timeout of one observation.
    pub timeout: Dur,
    /// Output cap in bytes.
    pub max_output: u64,
}

/// A probe compiled and ready to observe.
#[derive(Debug)]
pub enum Probe {
    /// `command`.
    Command(command::CommandCheck),
    /// `json`.
    Json(json::JsonCheck),
    /// `http`.
    Http(http::HttpCheck),
    /// `tcp`.
    Tcp(tcp::TcpCheck),
    /// `dns`.
    Dns(dns::DnsCheck),
    /// `file`.
    File(file::FileCheck),
    /// `log`.
    Log(log::LogCheck),
    /// `tls`.
    Tls(tls::TlsCheck),
}

/// Shared resources probes use while a run lasts (HTTP clients; they keep no connection open
/// between requests).
#[derive(Debug, Default)]
pub struct ProbeEnv {
    /// HTTP clients by TLS settings.
    pub http: http::Clients,
}

fn positive_timeout(t: Option<Dur>, d: &ProbeDefaults) -> Result<Dur, FieldError> {
    let t = t.unwrap_or(d.timeout);
    if t.is_zero() {
        return Err(FieldError::new(
            "/timeout",
            "a probe timeout must be greater than 0",
        ));
    }
    Ok(t)
}

/// The probe's `unreachable` setting, normalised: `error`, the default, is left out of the
/// definition so that specs written before the option keep their definition digests.
fn unreachable_setting(u: &mut Option<Unreachable>) -> Unreachable {
    let setting = u.unwrap_or(Unreachable::Error);
    *u = (setting == Unreachable::Fail).then_some(setting);
    setting
}

fn positive_cap(c: Option<u64>, d: &ProbeDefaults) -> Result<u64, FieldError> {
    let c = c.unwrap_or(d.max_output);
    if c == 0 {
        return Err(FieldError::new(
            "/max_output",
            "max_output must be greater than 0",
        ));
    }
    Ok(c)
}

impl Probe {
    /// Compiles a definition, returning it normalised (every default filled in).
    pub fn compile(def: ProbeDef, d: &ProbeDefaults) -> Result<(ProbeDef, Self), FieldError> {
        Ok(match def {
            ProbeDef::Command(p) => {
                let (n, c) = command::CommandCheck::compile(p, d)?;
                (ProbeDef::Command(n), Self::Command(c))
            }
            ProbeDef::Json(p) => {
                let (n, c) = json::JsonCheck::compile(p, d)?;
                (ProbeDef::Json(n), Self::Json(c))
            }
            ProbeDef::Http(p) => {
                let (n, c) = http::HttpCheck::compile(p, d)?;
                (ProbeDef::Http(n), Self::Http(c))
            }
            ProbeDef::Tcp(p) => {
                let (n, c) = tcp::TcpCheck::compile(p, d)?;
                (ProbeDef::Tcp(n), Self::Tcp(c))
            }
            ProbeDef::Dns(p) => {
                let (n, c) = dns::DnsCheck::compile(p, d)?;
                (ProbeDef::Dns(n), Self::Dns(c))
            }
            ProbeDef::File(p) => {
                let (n, c) = file::FileCheck::compile(p, d)?;
                (ProbeDef::File(n), Self::File(c))
            }
            ProbeDef::Log(p) => {
                let (n, c) = log::LogCheck::compile(p, d)?;
                (ProbeDef::Log(n), Self::Log(c))
            }
            ProbeDef::Tls(p) => {
                let (n, c) = tls::TlsCheck::compile(p, d)?;
                (ProbeDef::Tls(n), Self::Tls(c))
            }
        })
    }

    /// The kind name.
    #[must_use]
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Command(_) => "command",
            Self::Json(_) => "json",
            Self::Http(_) => "http",
            Self::Tcp(_) => "tcp",
            Self::Dns(_) => "dns",
            Self::File(_) => "file",
            Self::Log(_) => "log",
            Self::Tls(_) => "tls",
        }
    }

    /// The timeout of one observation.
    #[must_use]
    pub fn timeout(&self) -> Duration {
        match self {
            Self::Command(c) => c.timeout,
            Self::Json(c) => c.timeout,
            Self::Http(c) => c.timeout,
            Self::Tcp(c) => c.timeout,
            Self::Dns(c) => c.timeout,
            Self::File(c) => c.timeout,
            Self::Log(c) => c.timeout,
            Self::Tls(c) => c.timeout,
        }
    }

    /// What an unreachable system counts as for this probe; `error` for the kinds that do not
    /// reach over the network.
    #[must_use]
    pub fn unreachable(&self) -> Unreachable {
        match self {
            Self::Json(c) => c.unreachable,
            Self::Http(c) => c.unreachable,
            Self::Tcp(c) => c.unreachable,
            Self::Tls(c) => c.unreachable,
            Self::Command(_) | Self::Dns(_) | Self::File(_) | Self::Log(_) => Unreachable::Error,
        }
    }

    /// Whether the probe reaches a system over the network, so that no answer within its
    /// timeout means the system was not reached.
    fn reaches(&self) -> bool {
        match self {
            Self::Json(c) => c.reaches(),
            Self::Http(_) | Self::Tcp(_) | Self::Tls(_) => true,
            Self::Command(_) | Self::Dns(_) | Self::File(_) | Self::Log(_) => false,
        }
    }

    /// Whether it observes a live system (time-sensitive evidence) rather than fixed content.
    #[must_use]
    pub fn is_content_fact(&self) -> bool {
        matches!(self, Self::File(f) if f.pins_content())
    }

    /// Takes what must be remembered from before the agent acts (log positions), within the
    /// probe's timeout.
    pub async fn mark_start(&self) {
        if let Self::Log(l) = self {
            l.mark_start(self.timeout()).await;
        }
    }

    /// One observation, bounded by the probe's timeout. With `judge` false only the snapshot is
    /// wanted: the outcome is `pass` when the probe could observe.
    pub async fn observe(&self, env: &ProbeEnv, judge: bool) -> Sample {
        let fut = async {
            match self {
                Self::Command(c) => c.observe(judge).await,
                Self::Json(c) => c.observe(env, judge).await,
                Self::Http(c) => c.observe(env, judge).await,
                Self::Tcp(c) => c.observe(judge).await,
                Self::Dns(c) => c.observe(judge).await,
                Self::File(c) => c.observe(judge).await,
                Self::Log(c) => c.observe(judge).await,
                Self::Tls(c) => c.observe(judge).await,
            }
        };
        let limit = self.timeout();
        let sample = match tokio::time::timeout(limit, fut).await {
            Ok(s) => s,
            Err(_) => {
                let why = format!(
                    "timed out after {}",
                    Dur::from_millis(limit.as_millis() as u64)
                );
                if self.reaches() {
                    Sample::unreachable(why)
                } else {
                    Sample::error(why)
                }
            }
        };
        sample.unreachable_as(self.unreachable())
    }
}

/// A fact object from pairs.
#[must_use]
pub fn facts<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}
